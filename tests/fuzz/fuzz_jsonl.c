/* fuzz_jsonl.c: libFuzzer harness for the JSON-lines reader every tool's record loop uses:
 * any bytes are read line by line to the end, each record written back out as a tool would,
 * and judged by the bottleneck model as a metrics.json whose "build" is a build record. */
#include "common.h"

#include <stdint.h>
#include <stdio.h>

#include "bottleneck.h"
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

/* The bottleneck model on a record: its metrics reader, its scores and its output. */
static void judge(FILE *out, const cJSON *record)
{
	struct bottleneck_metrics m;
	struct bottleneck b;
	struct strbuf why;
	strbuf_init(&why);
	int have = bottleneck_metrics_read(record, "<fuzz>", &m, &why);
	strbuf_release(&why);
	bottleneck_classify(have > 0 ? &m : NULL, cJSON_GetObjectItemCaseSensitive(record, "build"), &b);
	cJSON *verdict = bottleneck_to_json(&b);
	jsonl_write(out, verdict);
	cJSON_Delete(verdict);
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
			judge(out, record);
			cJSON_Delete(record);
		}
	}
	jsonl_reader_release(&reader);
	fclose(in);
	fclose(out);
	return 0;
}
