/* fuzz_graph.c: libFuzzer harness for kg-select's graph loader (tools/select/snapshot.c and
 * graph.c). An input is a little-endian uint32 n, then n bytes of graph.bin, then the rest as
 * graph.blobs (tests/fuzz/corpus/graph/ holds graphs the tests make, in that form). Each is
 * written to a run directory and loaded; a graph that loads is walked as a step would walk
 * it (its out-edges, the best value below the root, the export that reads every blob), so
 * what the checks let through must not crash, hang or leak.
 * `make fuzz` builds and runs it (the Makefile's FUZZ_EXTRA_graph adds kg-select's files).
 *
 * Mutations mostly fail the checkpoint's checksum, so an input whose n has its top bit set gets
 * the checksums of its checkpoint and of each delta written again after the mutation (as
 * tests/tools/graph_bin.py does for 50-kg-select.bats), and the checks behind them are fuzzed
 * too. The layout is snapshot.c's, read here from the file's own header. */
#include "common.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "fnv1a.h"
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

/* snapshot.c's file_head and the start of its head_rec: what the checksums cover. */
#define KINDS 4
struct file_head {
	char magic[8];
	uint32_t version, byte_order, head_size, params;
	uint32_t sizes[KINDS];
	uint64_t offset[KINDS], cap[KINDS], path_offset;
	uint64_t checksum;
};
struct delta_head {
	char magic[8];
	uint64_t payload_len, checksum;
};

/* Whether [at, at + count x size) lies inside len bytes. */
static int inside(uint64_t at, uint64_t count, uint64_t size, size_t len)
{
	return at <= len && size && count <= (len - at) / size;
}

/* Writes the checksums of the checkpoint in bin and of each delta after it again, where the
 * header's figures let them be computed; what they cannot cover is left to the loader. */
static void fix_checksums(uint8_t *bin, size_t len)
{
	struct file_head fh;
	uint64_t head[3]; /* nnodes, nedges, rollout_len */
	if (len < sizeof(fh))
		return;
	memcpy(&fh, bin, sizeof(fh));
	if (fh.head_size < sizeof(head) || fh.head_size > len - sizeof(fh))
		return;
	memcpy(head, bin + sizeof(fh), sizeof(head));
	struct file_head zeroed = fh;
	zeroed.checksum = 0;
	uint64_t sum = fnv1a64_words(FNV1A64_BASIS, &zeroed, sizeof(zeroed));
	sum = fnv1a64_words(sum, bin + sizeof(fh), fh.head_size);
	for (int k = 0; k < KINDS; k++) {
		uint64_t count = k < 2 ? head[0] : head[1];
		if (!inside(fh.offset[k], count, fh.sizes[k], len))
			return;
		sum = fnv1a64_words(sum, bin + fh.offset[k], count * fh.sizes[k]);
	}
	if (!inside(fh.path_offset, head[2], sizeof(uint64_t), len))
		return;
	sum = fnv1a64_words(sum, bin + fh.path_offset, head[2] * sizeof(uint64_t));
	memcpy(bin + offsetof(struct file_head, checksum), &sum, sizeof(sum));
	size_t pos = fh.path_offset + head[2] * sizeof(uint64_t);
	struct delta_head dh;
	while (len - pos >= sizeof(dh)) {
		memcpy(&dh, bin + pos, sizeof(dh));
		if (dh.payload_len > len - pos - sizeof(dh))
			return;
		dh.checksum = fnv1a64(bin + pos + sizeof(dh), dh.payload_len);
		memcpy(bin + pos + offsetof(struct delta_head, checksum), &dh.checksum, sizeof(dh.checksum));
		pos += sizeof(dh) + dh.payload_len;
	}
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
	int fix = (n & 0x80000000u) != 0;
	n &= 0x7fffffffu;
	if (n > size - sizeof(n))
		return 0;
	if (fix) {
		uint8_t *bin = xmalloc(n + 1);
		memcpy(bin, data + sizeof(n), n);
		fix_checksums(bin, n);
		write_part("graph.bin", bin, n);
		free(bin);
	} else {
		write_part("graph.bin", data + sizeof(n), n);
	}
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
