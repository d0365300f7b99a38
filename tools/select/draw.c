/* draw.c: kg-select --draw (see draw.h). The drawing is built once (struct drawing) and then
 * written as DOT or JSON, so that both forms show the same nodes with the same fills. The
 * DOT is byte for byte what kg-report wrote when it drew the graph itself with jq
 * (tests/81-kg-report.bats pins it), so numbers are printed as jq prints them (jq_number). */
#include "common.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "draw.h"
#include "jsonl.h"
#include "log.h"
#include "mcgs.h"
#include "parse.h"
#include "xalloc.h"

struct dnode {
	long id;	 /* the graph's node (the log's update.child_id) */
	long parent;	 /* the node of the candidate that made it; -1 for the root */
	char *state;	 /* build.state, or "" */
	char *status;	 /* "ok", or the failed node's status (gnode.status) */
	int ok;		 /* measured: not failed, with a median */
	double ms;	 /* the median, when ok */
	double speedup;	 /* the baseline's median over ms, when ok */
	long build;	 /* the candidates learned up to it (0: the baseline) */
	cJSON *config;	 /* build.config, else candidate.config, else {} (owned) */
	int shown;	 /* kept in the picture */
	int on_path;	 /* on the incumbent's path from the root */
	char fill[8];	 /* "#rrggbb" */
};

struct dedge {
	long from, to;	   /* the graph's nodes */
	char *method;	   /* method.canonical, else candidate.method, else "?" */
	cJSON *changes;	   /* "key from → to" strings: what it changed in from's configuration */
	int transposition; /* led to a node met before */
	int on_path;
};

struct drawing {
	struct dnode *nodes; /* the graph's, in the order they were made */
	size_t nnodes;
	long *at;	     /* at[id]: the node's index in nodes */
	size_t nat;
	struct dedge *edges; /* one per evaluated candidate, in the order they were learned */
	size_t nedges;
	double base;	     /* the baseline's median */
	size_t kept;	     /* nodes shown */
	long incumbent;	     /* its node, or -1 */
	const char *name;    /* the kernel's */
};

static struct dnode *node_of(struct drawing *d, long id)
{
	return id >= 0 && (size_t)id < d->nat && d->at[id] >= 0 ? &d->nodes[d->at[id]] : NULL;
}

static const cJSON *member(const cJSON *o, const char *path1, const char *path2)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, path1);
	return path2 ? cJSON_GetObjectItemCaseSensitive(v, path2) : v;
}

/* jq's "a // b": a unless it is missing, null or false. */
static const cJSON *either(const cJSON *a, const cJSON *b)
{
	return json_given(a) ? a : b;
}

/* A number as jq 1.6 prints it: the shortest digits that read back as d, in plain notation
 * unless the exponent is below -4 or more than 15 past the digits ("1e-05", "1e+17"). */
static void jq_number(char *out, size_t size, double d)
{
	if (d != d) {
		snprintf(out, size, "null");
		return;
	}
	if (d > DBL_MAX)
		d = DBL_MAX;
	if (d < -DBL_MAX)
		d = -DBL_MAX;
	/* digits d1 d2 ... stand for 0.d1d2... times 10^decpt */
	char digits[18] = "0";
	long decpt = 1;
	size_t n = d != 0 ? shortest_digits(d, digits, &decpt) : 1;
	char *o = out, *stop = out + size - 1;
#define PUT(c) (o < stop ? (void)(*o++ = (c)) : (void)0)
	if (signbit(d)) /* jq writes -0 too */
		PUT('-');
	if (d == 0) {
		PUT('0');
	} else if (decpt <= -4 || decpt > (long)n + 15) {
		long e = decpt - 1;
		PUT(digits[0]);
		if (n > 1)
			PUT('.');
		for (size_t i = 1; i < n; i++)
			PUT(digits[i]);
		o += snprintf(o, (size_t)(stop - o) + 1, "e%c%02ld", e < 0 ? '-' : '+', labs(e));
		o = o > stop ? stop : o;
	} else if (decpt <= 0) {
		PUT('0');
		PUT('.');
		for (long i = decpt; i < 0; i++)
			PUT('0');
		for (size_t i = 0; i < n; i++)
			PUT(digits[i]);
	} else {
		for (long i = 0; i < decpt || (size_t)i < n; i++) {
			if (i == decpt)
				PUT('.');
			PUT((size_t)i < n ? digits[i] : '0');
		}
	}
#undef PUT
	*o = '\0';
}

/* v as jq's tojson writes it (keys in their order, numbers as jq_number, strings escaped as
 * jq escapes them: DEL and the control characters as \uXXXX). */
static void jq_json(FILE *fp, const cJSON *v)
{
	char num[40];
	const cJSON *c;
	if (cJSON_IsNumber(v)) {
		jq_number(num, sizeof num, v->valuedouble);
		fputs(num, fp);
	} else if (cJSON_IsString(v)) {
		fputc('"', fp);
		for (const unsigned char *s = (const unsigned char *)v->valuestring; *s; s++) {
			switch (*s) {
			case '"': fputs("\\\"", fp); break;
			case '\\': fputs("\\\\", fp); break;
			case '\b': fputs("\\b", fp); break;
			case '\f': fputs("\\f", fp); break;
			case '\n': fputs("\\n", fp); break;
			case '\r': fputs("\\r", fp); break;
			case '\t': fputs("\\t", fp); break;
			default:
				if (*s < 0x20 || *s == 0x7f)
					fprintf(fp, "\\u%04x", *s);
				else
					fputc(*s, fp);
			}
		}
		fputc('"', fp);
	} else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
		int object = cJSON_IsObject(v);
		fputc(object ? '{' : '[', fp);
		cJSON_ArrayForEach(c, v) {
			if (c != v->child)
				fputc(',', fp);
			if (object) {
				cJSON key = {.type = cJSON_String, .valuestring = c->string};
				jq_json(fp, &key);
				fputc(':', fp);
			}
			jq_json(fp, c);
		}
		fputc(object ? '}' : ']', fp);
	} else {
		fputs(cJSON_IsTrue(v) ? "true" : cJSON_IsFalse(v) ? "false" : "null", fp);
	}
}

/* jq's tostring: a string as it is, anything else as tojson. Returns a string to free. */
static char *jq_text(const cJSON *v)
{
	char *text = NULL;
	size_t len = 0;
	if (cJSON_IsString(v))
		return xstrdup(v->valuestring);
	FILE *fp = open_memstream(&text, &len);
	if (!fp)
		xalloc_die();
	jq_json(fp, v);
	if (fclose(fp) != 0)
		xalloc_die();
	return text;
}

/* s in a DOT string: backslashes and quotes escaped. */
static void put_dot(FILE *fp, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', fp);
		fputc(*s, fp);
	}
}

/* A speedup as kg-tune and trace.md write it: three significant digits ("1.11x", "0.968x"),
 * rounded half away from zero as jq's round. */
static void put_x3(FILE *fp, double v)
{
	int d = v >= 100 ? 0 : v >= 10 ? 1 : v >= 1 ? 2 : 3;
	char s[40];
	jq_number(s, sizeof s, round(v * pow(10, d)));
	size_t len = strlen(s);
	if (d == 0) {
		fprintf(fp, "%sx", s);
		return;
	}
	char p[64];
	int pad = d + 1 - (int)len;
	snprintf(p, sizeof p, "%.*s%s", pad > 0 ? pad : 0, "000", s);
	len = strlen(p);
	fprintf(fp, "%.*s.%sx", (int)(len - (size_t)d), p, p + len - (size_t)d);
}

/* White blended towards (r, g, b) by t in [0, 1], as "#rrggbb". */
static void blend(char out[8], double t, int r, int g, int b)
{
	int c[3] = {r, g, b};
	out[0] = '#';
	for (int i = 0; i < 3; i++) {
		long v = lround(255 - (255 - c[i]) * t);
		out[1 + 2 * i] = "0123456789abcdef"[(v / 16) & 15];
		out[2 + 2 * i] = "0123456789abcdef"[v % 16 & 15];
	}
	out[7] = '\0';
}

/* "key from → to" for each member of to that differs from from's ("-": from has none). */
static cJSON *config_changes(const cJSON *from, const cJSON *to)
{
	cJSON *out = cJSON_CreateArray(), *c;
	if (!out)
		xalloc_die();
	const cJSON *members = cJSON_IsObject(to) ? to : NULL;
	cJSON_ArrayForEach(c, members) {
		const cJSON *was = cJSON_GetObjectItemCaseSensitive(from, c->string);
		if (was ? cJSON_Compare(was, c, 1) : cJSON_IsNull(c))
			continue;
		char *a = jq_text(either(was, NULL) ? was : &(cJSON){.type = cJSON_String, .valuestring = "-"});
		char *b = jq_text(c);
		size_t size = strlen(c->string) + strlen(a) + strlen(b) + 8;
		char *line = xmalloc(size);
		snprintf(line, size, "%s %s → %s", c->string, a, b);
		if (!cJSON_AddItemToArray(out, cJSON_CreateString(line)))
			xalloc_die();
		free(line);
		free(a);
		free(b);
	}
	return out;
}

/* The drawing's node of the graph's node i; made_by: the edge whose evaluation made it, or
 * MCGS_NONE for the root. What kg-report drew from the record that made it, the graph keeps. */
static void add_node(struct drawing *d, const struct graph *g, size_t i, size_t made_by)
{
	const struct gnode *gn = &g->nodes[i];
	const char *state = graph_node_state(g, i), *status = graph_node_status(g, i);
	/* a node's configuration is build.config; a candidate that failed before kg-build made one
	 * is drawn with its own */
	const cJSON *config = either(either(graph_node_config(g, i),
					    made_by == MCGS_NONE ? NULL : member(graph_edge_candidate(g, made_by), "config", NULL)),
				     NULL);
	struct dnode *n = &d->nodes[d->nnodes];
	*n = (struct dnode){
		.id = (long)i,
		.parent = made_by == MCGS_NONE ? -1 : (long)g->g.edges[made_by].from,
		/* a failed candidate without a state has a node of its own, "failed:EDGE" */
		.state = xstrdup(gn->failed && strncmp(state, "failed:", 7) == 0 ? "" : state),
		.status = xstrdup(!gn->failed ? "ok" : status ? status : "failed"),
		.ok = !gn->failed && !isnan(gn->median_ms),
		.ms = isnan(gn->median_ms) ? 0 : gn->median_ms,
		.build = (long)gn->build,
		.config = config ? cJSON_Duplicate(config, 1) : cJSON_CreateObject(),
	};
	if (!n->config)
		xalloc_die();
	d->at[i] = (long)d->nnodes++;
}

/* The drawing's edge of the graph's evaluated edge e, from its parent's node to its child's. */
static void add_edge(struct drawing *d, const struct graph *g, size_t e)
{
	const struct mcgs_edge *me = &g->g.edges[e];
	const char *method = graph_edge_method(g, e);
	struct dedge *de = &d->edges[d->nedges++];
	*de = (struct dedge){
		.from = (long)me->from,
		.to = (long)me->to,
		.method = xstrdup(method && *method ? method : "?"),
		.transposition = g->edges[e].transposition,
	};
	const struct dnode *parent = node_of(d, de->from);
	de->changes = config_changes(parent ? parent->config : NULL,
				     either(graph_node_config(g, me->to), member(graph_edge_candidate(g, e), "config", NULL)));
}

/* An evaluated edge, for putting them in the order they were learned. */
struct learned_edge {
	int64_t build;
	size_t edge;
};

static int by_build(const void *a, const void *b)
{
	const struct learned_edge *x = a, *y = b;
	if (x->build != y->build)
		return x->build < y->build ? -1 : 1;
	return x->edge < y->edge ? -1 : x->edge > y->edge;
}

/* The nodes in the order they were made (the graph's), the evaluated edges in the order they
 * were learned (their build numbers), each node drawn from the edge that made it: the one
 * into it of its own build number. */
static void read_graph(struct drawing *d, const struct graph *g)
{
	size_t n = g->g.nnodes, m = g->g.nedges, evaluated = 0;
	struct learned_edge *order = xcalloc(m + 1, sizeof(*order));
	size_t *made_by = xcalloc(n, sizeof(*made_by));
	for (size_t i = 0; i < n; i++)
		made_by[i] = MCGS_NONE;
	for (size_t e = 0; e < m; e++) {
		size_t to = g->g.edges[e].to;
		if (to == MCGS_NONE)
			continue;
		order[evaluated++] = (struct learned_edge){g->edges[e].build, e};
		if (to != 0 && made_by[to] == MCGS_NONE && g->edges[e].build == g->nodes[to].build)
			made_by[to] = e;
	}
	qsort(order, evaluated, sizeof(*order), by_build);
	d->base = isnan(g->baseline_ms) ? 0 : g->baseline_ms;
	d->nodes = xcalloc(n, sizeof(*d->nodes));
	d->at = xcalloc(n, sizeof(*d->at));
	d->nat = n;
	for (size_t i = 0; i < n; i++)
		add_node(d, g, i, made_by[i]);
	d->edges = xcalloc(evaluated + 1, sizeof(*d->edges));
	for (size_t k = 0; k < evaluated; k++)
		add_edge(d, g, order[k].edge);
	free(order);
	free(made_by);
}

/* Appends to kept (n of them) the nodes from id up to the root that it does not hold yet;
 * returns how many it would add without adding them when dry. */
static size_t add_chain(struct drawing *d, long id, int dry)
{
	size_t more = 0;
	for (struct dnode *n = node_of(d, id); n && !n->shown; n = node_of(d, n->parent)) {
		more++;
		if (!dry) {
			n->shown = 1;
			d->kept++;
		}
		if (n->parent == n->id)
			break;
	}
	return more;
}

static int by_speedup(const void *a, const void *b)
{
	const struct dnode *x = *(const struct dnode *const *)a, *y = *(const struct dnode *const *)b;
	if (x->speedup != y->speedup)
		return x->speedup < y->speedup ? 1 : -1;
	return x < y ? -1 : x > y; /* stable: in the log's order */
}

/* Which nodes are shown (all when there are at most max; else the incumbent's path, then the
 * fastest, each with what links it to the root, while they fit), the path, the fills. */
static void lay_out(struct drawing *d, const char *best, long max)
{
	double fastest = 1.0001, slowest = 0.9999;
	size_t nfast = 0;
	struct dnode **fast = xcalloc(d->nnodes + 1, sizeof *fast);
	d->incumbent = -1;
	for (size_t i = 0; i < d->nnodes; i++) {
		struct dnode *n = &d->nodes[i];
		if (d->incumbent < 0 && best && strcmp(n->state, best) == 0)
			d->incumbent = n->id;
		if (!n->ok)
			continue;
		n->speedup = d->base / n->ms;
		fastest = fmax(fastest, n->speedup);
		slowest = fmin(slowest, n->speedup);
		fast[nfast++] = n;
	}
	for (struct dnode *n = node_of(d, d->incumbent); n && !n->on_path; n = node_of(d, n->parent))
		n->on_path = 1;
	if (d->nnodes <= (size_t)max) {
		for (size_t i = 0; i < d->nnodes; i++)
			d->nodes[i].shown = 1;
		d->kept = d->nnodes;
	} else {
		add_chain(d, d->incumbent, 0);
		qsort(fast, nfast, sizeof *fast, by_speedup);
		for (size_t i = 0; i < nfast && i < (size_t)max; i++)
			if (d->kept + add_chain(d, fast[i]->id, 1) <= (size_t)max)
				add_chain(d, fast[i]->id, 0);
	}
	free(fast);
	for (size_t i = 0; i < d->nnodes; i++) {
		struct dnode *n = &d->nodes[i];
		if (!n->ok)
			snprintf(n->fill, sizeof n->fill, "#d9d9d9");
		else if (n->speedup >= 1)
			blend(n->fill, fmin(log2(n->speedup) / log2(fastest), 1), 49, 163, 84);
		else
			blend(n->fill, fmin(log2(n->speedup) / log2(slowest), 1), 222, 45, 38);
	}
	for (size_t i = 0; i < d->nedges; i++) {
		struct dedge *e = &d->edges[i];
		const struct dnode *to = node_of(d, e->to);
		e->on_path = to && to->on_path && to->parent == e->from;
	}
}

static int edge_shown(struct drawing *d, const struct dedge *e)
{
	const struct dnode *from = node_of(d, e->from), *to = node_of(d, e->to);
	return from && to && from->shown && to->shown;
}

static void write_dot(struct drawing *d, const char *best, FILE *fp)
{
	char num[40];
	fputs("digraph search {\n"
	      "  graph [rankdir=LR, fontname=\"sans\", fontsize=14, labelloc=t, labeljust=l, nodesep=0.25, ranksep=0.5,\n"
	      "         label=\"", fp);
	put_dot(fp, d->name);
	fprintf(fp, ": search graph, %zu of %zu nodes%s\\lfill: speedup against the baseline (green faster, red slower, "
		    "grey failed); thick blue: the incumbent's path\\l\"];\n",
		d->kept, d->nnodes,
		d->kept < d->nnodes ? ": the incumbent's path and the fastest, each with the nodes that lead to it (--graph-nodes)"
				    : "");
	fputs("  node [shape=box, style=\"rounded,filled\", fontname=\"sans\", fontsize=10, penwidth=1];\n"
	      "  edge [fontname=\"sans\", fontsize=8, color=\"#777777\", fontcolor=\"#444444\"];\n", fp);
	for (size_t i = 0; i < d->nnodes; i++) {
		const struct dnode *n = &d->nodes[i];
		if (!n->shown)
			continue;
		fprintf(fp, "  n%ld [label=\"%s", n->id,
			n->id == 0 ? "baseline " : best && strcmp(n->state, best) == 0 ? "best " : "");
		char state[9];
		snprintf(state, sizeof state, "%s", n->state);
		put_dot(fp, state);
		fputs("\\n", fp);
		if (n->ok) {
			jq_number(num, sizeof num, n->ms);
			fprintf(fp, "%.8s ms, ", num);
			put_x3(fp, n->speedup);
		} else {
			put_dot(fp, n->status);
		}
		fprintf(fp, "\\nbuild %ld\", tooltip=\"", n->build);
		char *config = jq_text(n->config);
		put_dot(fp, config);
		free(config);
		fprintf(fp, "\", fillcolor=\"%s\"%s%s];\n", n->fill,
			n->ok ? "" : ", style=\"rounded,filled,dashed\", fontcolor=\"#555555\"",
			n->on_path ? ", penwidth=3, color=\"#1f77b4\"" : "");
	}
	for (size_t i = 0; i < d->nedges; i++) {
		const struct dedge *e = &d->edges[i];
		if (!edge_shown(d, e))
			continue;
		fprintf(fp, "  n%ld -> n%ld [label=\"", e->from, e->to);
		put_dot(fp, e->method);
		int k = 0;
		const cJSON *c;
		/* the changes two to a line */
		cJSON_ArrayForEach(c, e->changes) {
			fputs(k == 0 ? "\\n" : k % 2 ? ", " : "\\n", fp);
			put_dot(fp, c->valuestring);
			k++;
		}
		fprintf(fp, "\"%s%s];\n", e->on_path ? ", penwidth=3, color=\"#1f77b4\", fontcolor=\"#1f77b4\"" : "",
			e->transposition ? ", style=dashed" : "");
	}
	fputs("}\n", fp);
}

static void add(cJSON *o, const char *key, cJSON *v)
{
	if (!v || !cJSON_AddItemToObject(o, key, v)) {
		cJSON_Delete(v);
		xalloc_die();
	}
}

/* The same drawing as one JSON document: {"kernel", "nodes_total", "incumbent", "nodes":
 * [...], "edges": [...]}, the shown nodes and edges with what the DOT says of them. */
static void write_json(struct drawing *d, FILE *fp)
{
	cJSON *doc = cJSON_CreateObject(), *nodes = cJSON_CreateArray(), *edges = cJSON_CreateArray();
	add(doc, "kernel", cJSON_CreateString(d->name));
	add(doc, "nodes_total", cJSON_CreateNumber((double)d->nnodes));
	add(doc, "incumbent", d->incumbent >= 0 ? cJSON_CreateNumber((double)d->incumbent) : cJSON_CreateNull());
	add(doc, "nodes", nodes);
	add(doc, "edges", edges);
	for (size_t i = 0; i < d->nnodes; i++) {
		const struct dnode *n = &d->nodes[i];
		if (!n->shown)
			continue;
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(nodes, o))
			xalloc_die();
		add(o, "id", cJSON_CreateNumber((double)n->id));
		add(o, "build", cJSON_CreateNumber((double)n->build));
		add(o, "state", cJSON_CreateString(n->state));
		add(o, "status", cJSON_CreateString(n->ok ? "ok" : n->status));
		add(o, "median_ms", n->ok ? cJSON_CreateNumber(n->ms) : cJSON_CreateNull());
		add(o, "speedup", n->ok ? cJSON_CreateNumber(n->speedup) : cJSON_CreateNull());
		add(o, "fill", cJSON_CreateString(n->fill));
		add(o, "on_path", cJSON_CreateBool(n->on_path));
		add(o, "config", cJSON_Duplicate(n->config, 1));
	}
	for (size_t i = 0; i < d->nedges; i++) {
		const struct dedge *e = &d->edges[i];
		if (!edge_shown(d, e))
			continue;
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(edges, o))
			xalloc_die();
		add(o, "from", cJSON_CreateNumber((double)e->from));
		add(o, "to", cJSON_CreateNumber((double)e->to));
		add(o, "method", cJSON_CreateString(e->method));
		add(o, "changes", cJSON_Duplicate(e->changes, 1));
		add(o, "on_path", cJSON_CreateBool(e->on_path));
		add(o, "transposition", cJSON_CreateBool(e->transposition));
	}
	char *text = cJSON_PrintUnformatted(doc);
	if (!text)
		xalloc_die();
	fprintf(fp, "%s\n", text);
	cJSON_free(text);
	cJSON_Delete(doc);
}

void draw_graph(const struct graph *g, enum draw_format format, long max_nodes, FILE *fp)
{
	struct drawing d = {0};
	const char *slash = strrchr(g->run, '/');
	const char *best = g->g.nnodes ? graph_node_state(g, g->incumbent) : NULL;
	/* a run made before the graph kept its kernel's name is named as its folder */
	d.name = g->kernel && *g->kernel ? g->kernel : slash ? slash + 1 : g->run;
	read_graph(&d, g);
	lay_out(&d, best, max_nodes);
	if (format == DRAW_DOT)
		write_dot(&d, best, fp);
	else
		write_json(&d, fp);
	for (size_t i = 0; i < d.nnodes; i++) {
		free(d.nodes[i].state);
		free(d.nodes[i].status);
		cJSON_Delete(d.nodes[i].config);
	}
	for (size_t i = 0; i < d.nedges; i++) {
		free(d.edges[i].method);
		cJSON_Delete(d.edges[i].changes);
	}
	free(d.nodes);
	free(d.edges);
	free(d.at);
}
