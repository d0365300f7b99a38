/* run.c: one run loaded once: its spec, baseline and replay table (see run.h; the names of
 * its files are run_layout.c's, which the readers below this one use). */
#include "common.h"

#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"
#include "replay.h"
#include "run.h"
#include "xalloc.h"

int run_init(struct run *run, const char *dir, int *unreadable)
{
	*run = (struct run){.dir = xstrdup(dir)};
	char *path = run_path(dir, RUN_SPEC);
	run->spec = t1_load(path, unreadable);
	free(path);
	return run->spec ? 0 : -1;
}

const cJSON *run_baseline(struct run *run)
{
	if (!run->baseline) {
		char *path = run_path(run->dir, RUN_BASELINE);
		run->baseline = json_read_optional(path);
		free(path);
	}
	return run->baseline;
}

int run_replayed(const char *dir)
{
	char *path = run_path(dir, RUN_REPLAY);
	struct stat st;
	int replayed = stat(path, &st) == 0 && S_ISREG(st.st_mode);
	free(path);
	return replayed;
}

const struct replay *run_replay(struct run *run, int *broken)
{
	*broken = 0;
	if (!run->replay_read) {
		run->replay_read = 1;
		if (run_replayed(run->dir)) {
			char *path = run_path(run->dir, RUN_REPLAY);
			run->replay = replay_load(path);
			run->replay_read = run->replay ? 2 : -1;
			free(path);
		}
	}
	*broken = run->replay_read == -1;
	return run->replay;
}

void run_release(struct run *run)
{
	replay_free(run->replay);
	free(run->dir);
	t1_free(run->spec);
	cJSON_Delete(run->baseline);
	memset(run, 0, sizeof(*run));
}
