/* fuzz_replay.c: libFuzzer harness for the replay loader (a T4 table or an events.jsonl):
 * any bytes as the table's file, loaded, then every measurement it holds walked and looked up. */
#include "common.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "replay.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char table[] = "/tmp/fuzz_replay.XXXXXX";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_init("fuzz_replay");
	log_quieter();
	log_quieter();
	setenv("XDG_CACHE_HOME", "/nonexistent/fuzz_replay", 1); /* every input parsed, none cached */
	int fd = mkstemp(table);
	if (fd < 0)
		abort();
	close(fd);
	return 0;
}

static int look_up(void *ctx, const cJSON *config, const cJSON *bench)
{
	const struct replay *r = ctx;
	(void)bench;
	cJSON *runtimes = NULL, *found = replay_lookup(r, config, NULL, 0, &runtimes);
	cJSON_Delete(found);
	cJSON_Delete(runtimes);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (file_write(table, data, size) != 0)
		abort();
	struct replay *r = replay_load(table);
	if (r) {
		replay_each(r, look_up, r);
		replay_free(r);
	}
	return 0;
}
