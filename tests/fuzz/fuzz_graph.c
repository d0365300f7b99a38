/* fuzz_graph.c: libFuzzer harness for kg-select's graph loader (tools/select/snapshot.c and
 * graph.c). An input is a little-endian uint32 n, then n bytes of graph.bin, then the rest as
 * graph.blobs (tests/fuzz/corpus/graph/ holds graphs the tests make, in that form). Each is
 * written to a run directory and loaded; a graph that loads is walked as a step would walk
 * it (its out-edges, the best value below the root, the export that reads every blob), so
 * what the checks let through must not crash, hang or leak.
 * `make fuzz` builds and runs it (the Makefile's FUZZ_EXTRA_graph adds kg-select's files).
 *
 * Mutations mostly fail the checkpoint's checksum; tests/tools/graph_bin.py reaches the checks
 * behind it in tests/50-kg-select.bats. */
#include "common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "graph.h"
#include "log.h"
#include "mcgs.h"
#include "snapshot.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char run[] = "/tmp/kg-fuzz-graph-XXXXXX";

static void write_part(const char *name, const uint8_t *data, size_t len)
{
	char *path = xasprintf("%s/%s", run, name);
	if (file_write(path, data, len) != 0)
		abort();
	free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready) {
		log_init("fuzz_graph");
		if (!mkdtemp(run))
			abort();
		ready = 1;
	}
	uint32_t n;
	if (size < sizeof(n))
		return 0;
	memcpy(&n, data, sizeof(n));
	if (n > size - sizeof(n))
		return 0;
	write_part("graph.bin", data + sizeof(n), n);
	write_part("graph.blobs", data + sizeof(n) + n, size - sizeof(n) - n);
	struct graph g;
	struct snapshot *s;
	if (snapshot_load(&s, &g, run) > 0) {
		for (size_t i = 0; i < g.g.nnodes; i++) {
			size_t *out = xcalloc(g.g.nodes[i].nout + 1, sizeof(*out));
			mcgs_out_edges(&g.g, i, out);
			free(out);
		}
		(void)mcgs_best(&g.g, 0);
		cJSON_Delete(graph_export(&g));
	}
	graph_release(&g);
	snapshot_free(s);
	return 0;
}
