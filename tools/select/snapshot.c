/* snapshot.c: RUN/graph.bin and RUN/graph.blobs (see snapshot.h). The graph's four arrays
 * are stored as they are in memory, and a load uses them in place: no parse, no copy. */
#include "common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "fnv1a.h"
#include "log.h"
#include "run.h"
#include "snapshot.h"
#include "xalloc.h"

#define SNAPSHOT_VERSION 5 /* version 1 is graph.json; 4 added the checkpoint's checksum; 5 the build
				    numbers, transpositions and failures (gnode and gedge grew at their end) */
#define SNAPSHOT_OLDER 4   /* read too: its records are a prefix of version 5's */
#define BYTE_ORDER_MARK 0x01020304u
#define PAGE 4096
#define DELTAS_MAX 65536
static const char checkpoint_magic[8] = "KGGRAPH";
static const char delta_magic[8] = "KGDELTA";

/* The four record kinds, in the order of the checkpoint: a node is an mcgs_node and a gnode,
 * an edge an mcgs_edge and a gedge. */
enum { MNODE, GNODE, MEDGE, GEDGE, KINDS };
static const size_t kind_size[KINDS] = {
	sizeof(struct mcgs_node), sizeof(struct gnode), sizeof(struct mcgs_edge), sizeof(struct gedge),
};
/* Version 4's: the same records up to the fields version 5 appended. */
static const size_t older_size[KINDS] = {
	sizeof(struct mcgs_node), offsetof(struct gnode, build), sizeof(struct mcgs_edge), offsetof(struct gedge, build),
};

/* A checkpoint: file_head, head_rec, then each array at a page boundary with room for cap
 * records (those past the count are zero), then the rollout path. */
struct file_head {
	char magic[8];
	uint32_t version, byte_order, head_size, params;
	uint32_t sizes[KINDS]; /* of the record kinds: a build with other sizes cannot read it */
	uint64_t offset[KINDS], cap[KINDS], path_offset;
	uint64_t checksum;     /* of what a load reads (checkpoint_checksum), this field 0 */
};

struct head_rec {
	uint64_t nnodes, nedges, rollout_len, incumbent, rng, events_len;
	int64_t iter, builds, last_improvement;
	int64_t rollout_active, rollout_node, rollout_steps_left, rollout_step;
	double baseline_ms, rollout_best;
	struct blob kernel, regraph;
	double params[SEARCH_PARAMS_MAX];
};

/* A delta: delta_head, then head_rec, the number of changed nodes and edges, each changed
 * node (its index, its mcgs_node and gnode), each changed edge likewise, the rollout path. */
struct delta_head {
	char magic[8];
	uint64_t payload_len, checksum;
};

struct snapshot {
	const char *blobs;	     /* graph.blobs as mapped at load */
	size_t blobs_mapped;
	size_t blobs_len;	     /* its valid length, with what this process appended */
	const char *bin;	     /* graph.bin as mapped at load: what it holds */
	size_t bin_mapped;
	char *arrays;		     /* graph.bin mapped again, copy-on-write: the graph's arrays */
	size_t arrays_mapped;
	char **written;		     /* the buffers this process wrote to graph.bin */
	size_t nwritten;
	struct head_rec head;	     /* what graph.bin holds now */
	/* Where each stored record is: in the checkpoint's array, or where a delta moved it. */
	const char *base[KINDS];
	uint64_t offset[KINDS], cap[KINDS]; /* the checkpoint's arrays: where, and their room */
	uint64_t base_count[2];	     /* nodes and edges in the checkpoint */
	const char **moved[KINDS];   /* NULL: in base */
	size_t moved_cap[2];
	const char *path;	     /* the rollout path: head.rollout_len uint64_t */
	size_t size[KINDS];	     /* the records' sizes in graph.bin: kind_size, or older_size */
	int older;		     /* graph.bin is of version 4: the graph's arrays are copies, made
					whole (upgrade_older); the next save writes a checkpoint */
	size_t checkpoint_len;	     /* bytes of graph.bin's checkpoint */
	size_t file_len;	     /* bytes of its valid part: the checkpoint and whole deltas */
	int stored;		     /* graph.bin holds head and the records */
};

/* ---------------------------------------------------------------- blobs */

/* A reference read from graph.bin must lie inside graph.blobs. Its bytes are not read here
 * (a step touches only the blobs it uses); that the last one referenced ends in a NUL keeps
 * every string inside the map. */
static int blob_valid(const struct snapshot *s, struct blob b, int optional, uint64_t *end)
{
	if (b.off == BLOB_NONE)
		return optional;
	if (!blob_inside(b, s->blobs_mapped))
		return 0;
	if (b.off + b.len > *end)
		*end = b.off + b.len;
	return 1;
}

/* Queues text for graph.blobs unless stored already; b gets its future place. */
static void blob_stage(const struct snapshot *s, struct strbuf *fresh, struct blob *b, const char *text)
{
	if (b->off != BLOB_NONE || !text)
		return;
	b->off = s->blobs_len + fresh->len;
	b->len = strlen(text);
	strbuf_add(fresh, text, b->len + 1);
}

static void json_stage(const struct snapshot *s, struct strbuf *fresh, struct blob *b, const cJSON *value)
{
	if (b->off != BLOB_NONE || !value)
		return;
	char *text = cJSON_PrintUnformatted(value);
	if (!text)
		xalloc_die();
	blob_stage(s, fresh, b, text);
	free(text);
}

static int store_blobs(struct graph *g, struct snapshot *s)
{
	struct strbuf fresh;
	strbuf_init(&fresh);
	blob_stage(s, &fresh, &g->kernel_blob, g->kernel ? g->kernel : "");
	if (g->regraph)
		blob_stage(s, &fresh, &g->regraph_blob, g->regraph);
	/* Only new nodes and edges have blobs to store (graph_node_set_json is for those). */
	for (size_t i = s->stored ? s->head.nnodes : 0; i < g->g.nnodes; i++) {
		struct gnode *n = &g->nodes[i];
		const struct node_cache *c = &g->node_cache[i];
		blob_stage(s, &fresh, &n->state, c->state);
		json_stage(s, &fresh, &n->config, c->config);
		json_stage(s, &fresh, &n->methods, c->methods);
		blob_stage(s, &fresh, &n->status, c->status);
		blob_stage(s, &fresh, &n->reason, c->reason);
	}
	for (size_t i = s->stored ? s->head.nedges : 0; i < g->g.nedges; i++) {
		json_stage(s, &fresh, &g->edges[i].candidate, g->edge_cache[i].candidate);
		blob_stage(s, &fresh, &g->edges[i].method, g->edge_cache[i].method);
	}
	int rc = 0;
	if (fresh.len > 0) {
		char *path = run_path(g->run, RUN_GRAPH_BLOBS);
		rc = file_write_tail(path, s->blobs_len, fresh.buf, fresh.len);
		if (rc)
			log_error("cannot write '%s':", path);
		else
			s->blobs_len += fresh.len;
		free(path);
	}
	strbuf_release(&fresh);
	return rc;
}

static int map_blobs(struct snapshot *s, const char *run)
{
	char *path = run_path(run, RUN_GRAPH_BLOBS);
	s->blobs = file_map(path, &s->blobs_mapped);
	int rc = 0;
	if (!s->blobs) {
		s->blobs_mapped = 0;
		if (errno != ENOENT)
			rc = log_error("cannot read '%s':", path);
	}
	s->blobs_len = s->blobs_mapped;
	free(path);
	return rc;
}

/* ---------------------------------------------------------------- where records are */

static void encode_head(const struct graph *g, struct head_rec *h)
{
	memset(h, 0, sizeof(*h));
	h->nnodes = g->g.nnodes;
	h->nedges = g->g.nedges;
	h->rollout_len = g->rollout.active ? g->rollout.len : 0;
	h->incumbent = g->incumbent;
	h->rng = g->rng;
	h->iter = g->iter;
	h->builds = g->builds;
	h->events_len = g->events_len;
	h->last_improvement = g->last_improvement;
	h->rollout_active = g->rollout.active;
	h->rollout_node = (int64_t)g->rollout.node;
	h->rollout_steps_left = g->rollout.steps_left;
	h->rollout_step = g->rollout.step;
	h->rollout_best = g->rollout.best;
	h->baseline_ms = g->baseline_ms;
	h->kernel = g->kernel_blob;
	h->regraph = g->regraph ? g->regraph_blob : (struct blob){BLOB_NONE, 0};
	search_params_export(&g->params, h->params);
}

/* The graph's record of kind k at index i. */
static void *record(const struct graph *g, int k, size_t i)
{
	switch (k) {
	case MNODE: return &g->g.nodes[i];
	case GNODE: return &g->nodes[i];
	case MEDGE: return &g->g.edges[i];
	default: return &g->edges[i];
	}
}

/* Where graph.bin holds the record of kind k at index i. */
static const char *held(const struct snapshot *s, int k, size_t i)
{
	const char *moved = i < s->moved_cap[k / 2] ? s->moved[k][i] : NULL;
	return moved ? moved : s->base[k] + i * s->size[k];
}

static void move_record(struct snapshot *s, int k, size_t i, const char *at)
{
	size_t *cap = &s->moved_cap[k / 2];
	if (i >= *cap) {
		size_t want = i + 1 > 2 * *cap ? i + 1 : 2 * *cap;
		for (int j = k / 2 * 2; j < k / 2 * 2 + 2; j++) {
			s->moved[j] = xreallocarray(s->moved[j], want, sizeof(*s->moved[j]));
			memset(s->moved[j] + *cap, 0, (want - *cap) * sizeof(*s->moved[j]));
		}
		*cap = want;
	}
	s->moved[k][i] = at;
}

/* Points at the checkpoint map (a file_head first): nothing moved. */
static int point_checkpoint(struct snapshot *s, const char *map, size_t len)
{
	struct file_head fh;
	if (len < sizeof(fh) + sizeof(s->head))
		return -1;
	memcpy(&fh, map, sizeof(fh));
	memcpy(&s->head, map + sizeof(fh), sizeof(s->head));
	uint64_t counts[KINDS] = {s->head.nnodes, s->head.nnodes, s->head.nedges, s->head.nedges};
	for (int k = 0; k < KINDS; k++) {
		s->size[k] = fh.sizes[k]; /* read_checkpoint let only kind_size or older_size through */
		if (fh.offset[k] % PAGE != 0 || fh.offset[k] > len || fh.cap[k] < counts[k] ||
		    fh.cap[k] > (len - fh.offset[k]) / s->size[k] || fh.cap[k] != fh.cap[k / 2 * 2])
			return -1;
		s->base[k] = map + fh.offset[k];
		s->offset[k] = fh.offset[k];
		s->cap[k] = fh.cap[k];
	}
	if (fh.path_offset > len || s->head.rollout_len > (len - fh.path_offset) / sizeof(uint64_t))
		return -1;
	s->path = map + fh.path_offset;
	s->checkpoint_len = fh.path_offset + s->head.rollout_len * sizeof(uint64_t);
	s->base_count[0] = s->head.nnodes;
	s->base_count[1] = s->head.nedges;
	for (int k = 0; k < KINDS; k++)
		if (s->moved[k])
			memset(s->moved[k], 0, s->moved_cap[k / 2] * sizeof(*s->moved[k]));
	return 0;
}

/* The checksum of a checkpoint (FNV-1a by words): its file_head with the checksum 0, its head_rec, the records
 * up to the counts (the room past them is never read) and the rollout path. Damage that
 * still parses, a flipped bit in a visit count say, is caught here; graph_check catches what
 * a bug could write. */
static uint64_t checkpoint_checksum(const char *map, const struct file_head *fh, const struct head_rec *h)
{
	struct file_head zeroed = *fh;
	zeroed.checksum = 0;
	uint64_t sum = fnv1a64_words(FNV1A64_BASIS, &zeroed, sizeof(zeroed));
	sum = fnv1a64_words(sum, h, sizeof(*h));
	for (int k = 0; k < KINDS; k++)
		sum = fnv1a64_words(sum, map + fh->offset[k], (k < MEDGE ? h->nnodes : h->nedges) * fh->sizes[k]);
	return fnv1a64_words(sum, map + fh->path_offset, h->rollout_len * sizeof(uint64_t));
}

/* ---------------------------------------------------------------- loading */

static int read_checkpoint(struct snapshot *s, const char *map, size_t len, const char *path)
{
	struct file_head fh;
	if (len < sizeof(fh) || memcmp(map, checkpoint_magic, sizeof(checkpoint_magic)) != 0)
		return log_error("%s: not a kg-select graph", path);
	memcpy(&fh, map, sizeof(fh));
	if (fh.byte_order != BYTE_ORDER_MARK)
		return log_error("%s: written on a machine of the other byte order: export it there (kg-select --export)", path);
	int sizes_match = 1;
	s->older = fh.version == SNAPSHOT_OLDER;
	for (int k = 0; k < KINDS; k++)
		sizes_match &= fh.sizes[k] == (s->older ? older_size[k] : kind_size[k]);
	if ((fh.version != SNAPSHOT_VERSION && !s->older) || fh.head_size != sizeof(struct head_rec) ||
	    fh.params != SEARCH_PARAMS_MAX || !sizes_match)
		return log_error("%s: version %u, but this kg-select reads version %d (and %d)", path, fh.version,
				 SNAPSHOT_VERSION, SNAPSHOT_OLDER);
	if (point_checkpoint(s, map, len) != 0)
		return log_error("%s: cut short", path);
	if (checkpoint_checksum(map, &fh, &s->head) != fh.checksum)
		return log_error("%s: damaged: its checkpoint does not match its checksum", path);
	return 0;
}

/* Says in why what is wrong with a delta: -2, read_delta's value for a damaged one. */
static int damaged(struct strbuf *why, const char *fmt, ...) PRINTF_LIKE(2, 3);
static int damaged(struct strbuf *why, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(why, fmt, ap);
	va_end(ap);
	return -2;
}

/* Points at the records of the delta at *pos; changing nothing, -1 for one a kill cut short,
 * -2 for a damaged one (why says what is wrong with it). A save truncates the file where the
 * delta goes and writes it in one piece, so a kill leaves a prefix of it: a header that
 * promises more than the file holds. Any other failure is damage, and dropping it would lose
 * the deltas after it.
 *
 * Every count is bounded by the bytes that hold it, before anything is sized by it: a save
 * writes each node and edge past the previous counts into the delta (build_delta), so the
 * counts grow by at most the records it holds, in ascending order and covering each new
 * index; a count that a damaged but checksummed file makes huge would otherwise size the
 * graph's arrays (decode) and die out of memory instead of reporting the file. */
static int read_delta(struct snapshot *s, const char *map, size_t len, size_t *pos, struct strbuf *why)
{
	struct delta_head dh;
	if (len - *pos < sizeof(dh))
		return -1;
	memcpy(&dh, map + *pos, sizeof(dh));
	size_t at = *pos + sizeof(dh);
	if (memcmp(dh.magic, delta_magic, sizeof(dh.magic)) != 0)
		return damaged(why, "no delta's header there");
	if (dh.payload_len > len - at)
		return -1;
	if (fnv1a64(map + at, dh.payload_len) != dh.checksum)
		return damaged(why, "it does not match its checksum");
	size_t end = at + dh.payload_len;
	struct head_rec h;
	uint64_t changed[2], i = 0;
	if (end - at < sizeof(h) + sizeof(changed))
		return -1;
	memcpy(&h, map + at, sizeof(h));
	memcpy(changed, map + at + sizeof(h), sizeof(changed));
	at += sizeof(h) + sizeof(changed);
	size_t pair[2] = {s->size[MNODE] + s->size[GNODE], s->size[MEDGE] + s->size[GEDGE]};
	uint64_t count[2] = {h.nnodes, h.nedges}, before[2] = {s->head.nnodes, s->head.nedges};
	static const char *const kind_name[2] = {"nodes", "edges"};
	if (changed[0] > (end - at) / (8 + pair[0]) || changed[1] > (end - at - changed[0] * (8 + pair[0])) / (8 + pair[1]))
		return damaged(why, "%" PRIu64 " changed nodes and %" PRIu64 " changed edges do not fit in its %" PRIu64
			       " bytes", changed[0], changed[1], dh.payload_len);
	size_t rest = end - at - changed[0] * (8 + pair[0]) - changed[1] * (8 + pair[1]);
	/* Compared by division: rollout_len * 8 can wrap to the bytes left. */
	if (rest % sizeof(uint64_t) != 0 || h.rollout_len != rest / sizeof(uint64_t))
		return damaged(why, "a rollout path of %" PRIu64 " edges, but %zu bytes hold it", h.rollout_len, rest);
	for (int kind = 0; kind < 2; kind++)
		if (count[kind] < before[kind] || count[kind] - before[kind] > changed[kind])
			return damaged(why, "%" PRIu64 " %s, but the graph before it has %" PRIu64 " and it changes %" PRIu64,
				       count[kind], kind_name[kind], before[kind], changed[kind]);
	for (int kind = 0; kind < 2; kind++) {
		uint64_t added = 0;
		for (uint64_t c = 0; c < changed[kind]; c++) {
			uint64_t prev = i;
			memcpy(&i, map + at, 8);
			/* checksummed, so written so: a bug, not a kill */
			if (i >= count[kind] || (c > 0 && i <= prev))
				return damaged(why, "changed %s[%" PRIu64 "]: not below its %" PRIu64 " %s, or not above the one before it",
					       kind_name[kind], i, count[kind], kind_name[kind]);
			added += i >= before[kind];
			move_record(s, 2 * kind, i, map + at + 8);
			move_record(s, 2 * kind + 1, i, map + at + 8 + s->size[2 * kind]);
			at += 8 + pair[kind];
		}
		if (added != count[kind] - before[kind])
			return damaged(why, "%" PRIu64 " %s, but it holds %" PRIu64 " of the %" PRIu64 " new ones",
				       count[kind], kind_name[kind], added, count[kind] - before[kind]);
	}
	s->head = h;
	s->path = map + at;
	*pos = end;
	return 0;
}

/* The fields version 5 appended, in a graph read from version 4: as a graph that learned its
 * records then has them (no build numbers: graph_unnumbered; no status or reason). */
static void upgrade_older(struct graph *g)
{
	for (size_t i = 0; i < g->g.nnodes; i++) {
		struct gnode *n = &g->nodes[i];
		n->build = 0;
		n->status = n->reason = (struct blob){BLOB_NONE, 0};
	}
	for (size_t i = 0; i < g->g.nedges; i++) {
		struct gedge *e = &g->edges[i];
		e->build = 0;
		e->transposition = e->spare = 0;
	}
}

/* Points g at the stored records and checks that each names nodes, edges and blobs that
 * exist, and that out-edge lists only go forward (so walking one ends): a damaged file is
 * reported (and g is not used). */
static int decode(struct graph *g, const struct snapshot *s, const char *path)
{
	const struct head_rec *h = &s->head;
	size_t n = h->nnodes, m = h->nedges;
	g->blobs = s->blobs; /* what the stored blob references point into */
	g->blobs_len = s->blobs_mapped;
	if (n == 0)
		return log_error("%s: the graph has no root", path);
	uint64_t end = 0;
	if (!blob_valid(s, h->kernel, 0, &end) || !blob_valid(s, h->regraph, 1, &end))
		return log_error("%s: the kernel's name or the regraph path is outside graph.blobs", path);
	if (n > s->cap[MNODE] || m > s->cap[MEDGE] || s->older) {
		/* The deltas outgrew the checkpoint's room, or its records are shorter than the
		 * graph's: the arrays move to the heap. */
		graph_reserve(g, n, m);
		for (int k = 0; k < KINDS; k++)
			for (size_t i = 0; i < s->base_count[k / 2]; i++)
				memcpy(record(g, k, i), s->base[k] + i * s->size[k], s->size[k]);
	} else {
		graph_use_arrays(g, (void *)(s->arrays + s->offset[MNODE]), (void *)(s->arrays + s->offset[GNODE]),
				 (size_t)s->cap[MNODE], (void *)(s->arrays + s->offset[MEDGE]),
				 (void *)(s->arrays + s->offset[GEDGE]), (size_t)s->cap[MEDGE]);
	}
	for (int k = 0; k < KINDS; k++)
		for (size_t i = 0; i < (k < MEDGE ? n : m) && i < s->moved_cap[k / 2]; i++)
			if (s->moved[k][i])
				memcpy(record(g, k, i), s->moved[k][i], s->size[k]);
	g->g.nnodes = n;
	g->g.nedges = m;
	if (s->older)
		upgrade_older(g);
	for (size_t i = 0; i < n; i++) {
		const struct gnode *gn = &g->nodes[i];
		if (!blob_valid(s, gn->state, 0, &end) || !blob_valid(s, gn->config, 1, &end) ||
		    !blob_valid(s, gn->methods, 1, &end))
			return log_error("%s: nodes[%zu]: state, config or methods outside graph.blobs", path, i);
		if (!blob_valid(s, gn->status, 1, &end) || !blob_valid(s, gn->reason, 1, &end))
			return log_error("%s: nodes[%zu]: status or reason outside graph.blobs", path, i);
	}
	for (size_t i = 0; i < m; i++) {
		const struct gedge *ge = &g->edges[i];
		if (!blob_valid(s, ge->candidate, 1, &end) || !blob_valid(s, ge->method, 0, &end))
			return log_error("%s: edges[%zu]: candidate or method outside graph.blobs", path, i);
	}
	if (s->blobs[end] != '\0')
		return log_error("%s: graph.blobs does not match it", path);

	char *why = search_params_import(&g->params, h->params);
	if (why) {
		log_error("%s: params.%s", path, why);
		free(why);
		return -1;
	}
	g->kernel = xstrdup(graph_blob_text(g, h->kernel));
	g->kernel_blob = h->kernel;
	const char *regraph = graph_blob_text(g, h->regraph);
	g->regraph = regraph ? xstrdup(regraph) : NULL;
	g->regraph_blob = h->regraph;
	g->rng = h->rng;
	g->iter = h->iter;
	g->builds = h->builds;
	g->events_len = h->events_len;
	g->last_improvement = h->last_improvement;
	g->incumbent = h->incumbent;
	g->baseline_ms = h->baseline_ms;
	if (h->rollout_active != 0 && h->rollout_active != 1)
		return log_error("%s: rollout: active %" PRId64 " is not 0 or 1", path, h->rollout_active);
	if (h->rollout_active) {
		g->rollout = (struct rollout){.active = 1, .node = (size_t)h->rollout_node,
					     .steps_left = h->rollout_steps_left, .step = h->rollout_step,
					     .best = h->rollout_best, .len = h->rollout_len,
					     .path = xcalloc(h->rollout_len + 1, sizeof(*g->rollout.path))};
		memcpy(g->rollout.path, s->path, h->rollout_len * sizeof(*g->rollout.path));
	}
	return graph_check(g, path);
}

/* Loads RUN/graph.bin into g (initialized, empty) and s: 1 when loaded, 0 when there is
 * none, -1 after reporting a damaged file. */
static int load_bin(struct snapshot *s, struct graph *g)
{
	char *path = run_path(g->run, RUN_GRAPH);
	size_t len;
	const char *map = file_map(path, &len);
	if (!map) {
		int missing = errno == ENOENT;
		if (!missing)
			log_error("cannot read '%s':", path);
		free(path);
		return missing ? 0 : -1;
	}
	s->bin = map;
	s->bin_mapped = len;
	int rc = read_checkpoint(s, map, len, path);
	if (rc == 0 && s->older)
		log_warn("%s: version %d, without the candidates' build numbers and failures: kg-select --draw reads them "
			 "from events.jsonl, and the next save writes version %d", path, SNAPSHOT_OLDER, SNAPSHOT_VERSION);
	if (rc == 0) {
		size_t pos = s->checkpoint_len;
		int got = 0;
		struct strbuf why;
		strbuf_init(&why);
		while (pos < len && (got = read_delta(s, map, len, &pos, &why)) == 0)
			;
		if (got == -2)
			rc = log_error("%s: damaged: the delta at byte %zu: %s (truncating the file there goes back to the graph "
				       "before it, and the next kg-select learns the rest again from events.jsonl)", path, pos,
				       why.buf);
		else if (pos < len)
			log_warn("%s: dropping %zu bytes after the last whole delta (a step was killed while saving)",
				 path, len - pos);
		strbuf_release(&why);
		s->file_len = pos;
		s->stored = 1;
		if (rc == 0)
			rc = map_blobs(s, g->run);
	}
	if (rc == 0 && !(s->arrays = file_map_copy(path, &s->arrays_mapped)))
		rc = log_error("cannot read '%s':", path);
	if (rc == 0 && s->arrays_mapped != len)
		rc = log_error("%s: changed while being read (is another kg-select running without the lock?)", path);
	if (rc == 0)
		rc = decode(g, s, path);
	free(path);
	return rc == 0 ? 1 : -1;
}

int snapshot_load(struct snapshot **s, struct graph *g, const char *run)
{
	graph_init(g, run);
	*s = xcalloc(1, sizeof(**s));
	int rc = load_bin(*s, g);
	return rc == 0 ? graph_import(g, run) : rc;
}

/* ---------------------------------------------------------------- saving */

/* Sets changed[i] for each record of kind k that is new or differs from what graph.bin
 * holds: a block of records still where the checkpoint has them is compared at once. */
static void mark_changed(const struct graph *g, const struct snapshot *s, int k, uint64_t count, uint64_t stored,
			 unsigned char *changed)
{
	const size_t size = kind_size[k], block = 64;
	for (uint64_t i = 0; i < count; i += block) {
		uint64_t end = i + block < count ? i + block : count, held_end = end < stored ? end : stored;
		for (uint64_t j = i > stored ? i : stored; j < end; j++)
			changed[j] = 1;
		if (i >= held_end)
			continue;
		int in_base = 1;
		for (uint64_t j = i; j < held_end && in_base; j++)
			in_base = j >= s->moved_cap[k / 2] || !s->moved[k][j];
		if (in_base && memcmp(s->base[k] + i * size, record(g, k, i), (held_end - i) * size) == 0)
			continue;
		for (uint64_t j = i; j < held_end; j++)
			if (memcmp(held(s, k, j), record(g, k, j), size) != 0)
				changed[j] = 1;
	}
}

/* The delta of g against what graph.bin holds: each node and edge with a record that is new
 * or differs. *moves gets, for each, where in out its records are; the nodes come first. */
static void build_delta(const struct graph *g, const struct snapshot *s, const struct head_rec *h,
			struct strbuf *out, size_t **moves, size_t *nmoves, size_t *node_moves)
{
	struct delta_head dh = {.payload_len = 0};
	memcpy(dh.magic, delta_magic, sizeof(dh.magic));
	strbuf_add(out, &dh, sizeof(dh));
	strbuf_add(out, h, sizeof(*h));
	uint64_t changed[2] = {0, 0}, count[2] = {h->nnodes, h->nedges}, stored[2] = {s->head.nnodes, s->head.nedges};
	size_t counts_at = out->len;
	strbuf_add(out, changed, sizeof(changed));
	for (int kind = 0; kind < 2; kind++) {
		int a = 2 * kind, b = 2 * kind + 1;
		unsigned char *flags = xcalloc(count[kind] + 1, 1);
		mark_changed(g, s, a, count[kind], stored[kind], flags);
		mark_changed(g, s, b, count[kind], stored[kind], flags);
		for (uint64_t i = 0; i < count[kind]; i++) {
			if (!flags[i])
				continue;
			strbuf_add(out, &i, 8);
			*moves = xreallocarray(*moves, *nmoves + 1, sizeof(**moves));
			(*moves)[(*nmoves)++] = out->len;
			strbuf_add(out, record(g, a, i), kind_size[a]);
			strbuf_add(out, record(g, b, i), kind_size[b]);
			changed[kind]++;
		}
		free(flags);
	}
	*node_moves = changed[0];
	for (size_t i = 0; i < h->rollout_len; i++) {
		uint64_t v = g->rollout.path[i];
		strbuf_add(out, &v, sizeof(v));
	}
	memcpy(out->buf + counts_at, changed, sizeof(changed));
	dh.payload_len = out->len - sizeof(dh);
	dh.checksum = fnv1a64(out->buf + sizeof(dh), dh.payload_len);
	memcpy(out->buf, &dh, sizeof(dh));
}

static size_t page_up(size_t n)
{
	return (n + PAGE - 1) / PAGE * PAGE;
}

/* A checkpoint of g, each array with room to grow (an eighth, and 256 records) so that the
 * steps until the next checkpoint use it in place. */
static char *build_checkpoint(const struct graph *g, const struct head_rec *h, size_t *len)
{
	struct file_head fh = {.version = SNAPSHOT_VERSION, .byte_order = BYTE_ORDER_MARK,
			       .head_size = sizeof(*h), .params = SEARCH_PARAMS_MAX};
	memcpy(fh.magic, checkpoint_magic, sizeof(fh.magic));
	size_t pos = sizeof(fh) + sizeof(*h);
	for (int k = 0; k < KINDS; k++) {
		uint64_t count = k < MEDGE ? h->nnodes : h->nedges;
		fh.sizes[k] = (uint32_t)kind_size[k];
		fh.cap[k] = count + count / 8 + 256;
		fh.offset[k] = pos = page_up(pos);
		pos += fh.cap[k] * kind_size[k];
	}
	fh.path_offset = pos;
	*len = pos + h->rollout_len * sizeof(uint64_t);
	char *buf = xcalloc(*len, 1);
	memcpy(buf + sizeof(fh), h, sizeof(*h));
	for (int k = 0; k < KINDS; k++)
		if (k < MEDGE ? h->nnodes : h->nedges) /* a graph of the root alone has no edge array */
			memcpy(buf + fh.offset[k], record(g, k, 0), (k < MEDGE ? h->nnodes : h->nedges) * kind_size[k]);
	for (size_t i = 0; i < h->rollout_len; i++) {
		uint64_t v = g->rollout.path[i];
		memcpy(buf + fh.path_offset + i * sizeof(v), &v, sizeof(v));
	}
	fh.checksum = checkpoint_checksum(buf, &fh, h);
	memcpy(buf, &fh, sizeof(fh));
	return buf;
}

static void keep_written(struct snapshot *s, char *buf)
{
	s->written = xreallocarray(s->written, s->nwritten + 1, sizeof(*s->written));
	s->written[s->nwritten++] = buf;
}

/* Appends the delta in out to graph.bin; the held records move into out. 0, or -1. */
static int write_delta(struct snapshot *s, const char *file, struct strbuf *out, const struct head_rec *h,
		       const size_t *moves, size_t nmoves, size_t node_moves)
{
	if (file_write_tail(file, s->file_len, out->buf, out->len) != 0)
		return -1;
	s->file_len += out->len;
	for (size_t k = 0; k < nmoves; k++) {
		uint64_t i;
		int a = k < node_moves ? MNODE : MEDGE;
		memcpy(&i, out->buf + moves[k] - 8, 8);
		move_record(s, a, i, out->buf + moves[k]);
		move_record(s, a + 1, i, out->buf + moves[k] + kind_size[a]);
	}
	s->head = *h;
	s->path = out->buf + out->len - h->rollout_len * sizeof(uint64_t);
	keep_written(s, strbuf_detach(out));
	return 0;
}

int snapshot_save(struct snapshot *s, struct graph *g)
{
	if (store_blobs(g, s) != 0)
		return -1;
	struct head_rec h;
	encode_head(g, &h);
	char *file = run_path(g->run, RUN_GRAPH);
	int rc = -1, written = 0;
	/* a version 4 file takes no delta of version 5's records */
	if (s->stored && !s->older) {
		struct strbuf out;
		size_t *moves = NULL, nmoves = 0, node_moves = 0;
		strbuf_init(&out);
		build_delta(g, s, &h, &out, &moves, &nmoves, &node_moves);
		/* Every load reads the deltas: past 64 KiB of them, a new checkpoint (a few ms
		 * once) costs less than reading them at every step. */
		if (s->file_len - s->checkpoint_len + out.len <= DELTAS_MAX) {
			rc = write_delta(s, file, &out, &h, moves, nmoves, node_moves);
			written = 1;
		}
		strbuf_release(&out);
		free(moves);
	}
	if (!written) {
		size_t len;
		char *buf = build_checkpoint(g, &h, &len);
		rc = file_write_atomic(file, buf, len);
		if (rc == 0) {
			point_checkpoint(s, buf, len);
			s->file_len = s->checkpoint_len;
			s->stored = 1;
			s->older = 0;
			keep_written(s, buf);
		} else {
			free(buf);
		}
	}
	if (rc != 0)
		log_error("cannot write '%s':", file);
	free(file);
	return rc ? -1 : 0;
}

void snapshot_free(struct snapshot *s)
{
	if (!s)
		return;
	file_unmap(s->blobs, s->blobs_mapped);
	file_unmap(s->bin, s->bin_mapped);
	file_unmap(s->arrays, s->arrays_mapped);
	for (size_t i = 0; i < s->nwritten; i++)
		free(s->written[i]);
	free(s->written);
	for (int k = 0; k < KINDS; k++)
		free(s->moved[k]);
	free(s);
}
