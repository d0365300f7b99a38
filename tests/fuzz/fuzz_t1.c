/* fuzz_t1.c: a libFuzzer harness for the T1 loader: each input is a spec file, loaded as
 * kg-propose loads one (t1_load); a bad spec is an expected result, not a finding. */
#include "common.h"

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"
#include "t1.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where each input is written for t1_load, which reads a file; made once per process. */
static char spec_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_init("fuzz_t1");
	log_quieter(); /* errors still print: they are what a bad spec gives */
	snprintf(spec_path, sizeof(spec_path), "/tmp/fuzz_t1.%ld.json", (long)getpid());
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fopen(spec_path, "wb");
	if (!f)
		return 0;
	size_t written = fwrite(data, 1, size, f);
	if (fclose(f) != 0 || written != size)
		return 0;
	int unreadable;
	struct t1_spec *spec = t1_load(spec_path, &unreadable);
	if (spec) {
		/* What kg-propose asks of every space: its size, and whether it is small enough to
		 * list (bounded, so that one input cannot walk billions of points). */
		int saturated;
		uint64_t count;
		(void)t1_cartesian_size(spec, &saturated);
		(void)t1_count(spec, 64, &count, &saturated);
		t1_free(spec);
	}
	unlink(spec_path);
	return 0;
}
