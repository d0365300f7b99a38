/* fuzz_jsonl.c: libFuzzer harness for the JSON-lines reader every tool's record loop uses:
 * any bytes are read line by line to the end, each record written back out as a tool would. */
#include "common.h"

#include <stdint.h>
#include <stdio.h>

#include "jsonl.h"
#include "log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_init("fuzz_jsonl");
	log_quieter(); /* a bad line is an expected outcome: its message is noise here */
	log_quieter();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *in = fmemopen((void *)data, size, "r"), *out = fopen("/dev/null", "w");
	if (!in || !out) {
		if (in)
			fclose(in);
		if (out)
			fclose(out);
		return 0;
	}
	struct jsonl_reader reader;
	jsonl_reader_init(&reader, in, "<fuzz>");
	cJSON *record;
	enum jsonl_status st;
	while ((st = jsonl_next(&reader, &record)) != JSONL_EOF && st != JSONL_IO_ERROR) {
		if (st == JSONL_RECORD) {
			jsonl_write(out, record);
			cJSON_Delete(record);
		}
	}
	jsonl_reader_release(&reader);
	fclose(in);
	fclose(out);
	return 0;
}
