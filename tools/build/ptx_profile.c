/* ptx_profile.c: one pass over the PTX text, classifying each instruction by its opcode
 * (the dotted first word, after any "@%p" guard); the line tokenizer ptx_regions.c shares. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#include "ptx_profile.h"
#include "xalloc.h"

enum width { W_SCALAR, W_V2, W_V4, W_V8, NWIDTHS };
enum memory_op { GLOBAL_LOAD, GLOBAL_STORE, SHARED_LOAD, SHARED_STORE, NMEMORY_OPS };

enum counter {
	C_INSTRUCTIONS, C_LDMATRIX, C_CP_ASYNC, C_BULK, C_MMA, C_WGMMA, C_BARRIERS, C_BRANCHES, C_LOOPS,
	C_FMA, C_FLOP, C_ATOMICS, C_SHUFFLES, NCOUNTERS
};

static const char *const counter_names[NCOUNTERS] = {
	"instructions", "ldmatrix", "cp_async", "bulk_copies", "mma", "wgmma", "barriers", "branches", "loops",
	"fma", "flop_instructions", "atomics", "shuffles"};
static const char *const memory_names[NMEMORY_OPS] = {"global_loads", "global_stores", "shared_loads", "shared_stores"};
static const char *const width_names[NWIDTHS] = {"scalar", "v2", "v4", "v8"};

struct profile {
	long counts[NCOUNTERS];
	long memory[NMEMORY_OPS][NWIDTHS];
	char **labels; /* labels seen so far: a branch to one of them goes backwards */
	size_t nlabels;
};

int ptx_has_part(const char *opcode, const char *part)
{
	size_t n = strlen(part);
	for (const char *p = strstr(opcode, part); p; p = strstr(p + 1, part))
		if (p[n] == '.' || p[n] == '\0')
			return 1;
	return 0;
}

int ptx_starts(const char *opcode, const char *prefix)
{
	return strncmp(opcode, prefix, strlen(prefix)) == 0;
}

enum ptx_line_kind ptx_split_line(char *line, struct ptx_line *out)
{
	char *p = line;
	char *comment = strstr(p, "//");
	if (comment)
		*comment = '\0';
	while (*p == ' ' || *p == '\t')
		p++;
	memset(out, 0, sizeof(*out));
	out->text = p;
	if (*p == '\0' || *p == '.' || *p == '{' || *p == '}' || *p == ')' || *p == '(')
		return out->kind = PTX_OTHER;
	size_t word = strcspn(p, " \t;:");
	while (p[word] == ':' && p[word + 1] == ':') /* a qualifier such as "shared::cta", not a label */
		word += 2 + strcspn(p + word + 2, " \t;:");
	if (p[word] == ':') {
		p[word] = '\0';
		return out->kind = PTX_LABEL;
	}
	if (*p == '@') { /* a guard predicate: "@%p1 bra ..." */
		out->guarded = 1;
		p += word;
		while (*p == ' ' || *p == '\t')
			p++;
		word = strcspn(p, " \t;");
	}
	if (word == 0)
		return out->kind = PTX_OTHER;
	out->operands = p[word] ? p + word + 1 : p + word;
	p[word] = '\0';
	out->text = p;
	return out->kind = PTX_INSTRUCTION;
}

static int is_float_type(const char *opcode)
{
	return ptx_has_part(opcode, ".f16") || ptx_has_part(opcode, ".f16x2") || ptx_has_part(opcode, ".bf16") ||
	       ptx_has_part(opcode, ".bf16x2") || ptx_has_part(opcode, ".f32") || ptx_has_part(opcode, ".f64");
}

static void count_memory(struct profile *pr, enum memory_op op, const char *opcode)
{
	enum width w = ptx_has_part(opcode, ".v8")   ? W_V8
		       : ptx_has_part(opcode, ".v4") ? W_V4
		       : ptx_has_part(opcode, ".v2") ? W_V2
						     : W_SCALAR;
	pr->memory[op][w]++;
}

static void count_branch(struct profile *pr, const char *operands)
{
	pr->counts[C_BRANCHES]++;
	while (*operands == ' ' || *operands == '\t')
		operands++;
	size_t len = strcspn(operands, " \t;,");
	for (size_t k = 0; k < pr->nlabels; k++)
		if (strlen(pr->labels[k]) == len && strncmp(pr->labels[k], operands, len) == 0) {
			pr->counts[C_LOOPS]++;
			return;
		}
}

static void classify(struct profile *pr, const char *opcode, const char *operands)
{
	static const char *const flop_ops[] = {"add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "rsqrt",
					       "ex2", "lg2", "sin", "cos", "tanh", "min", "max", "neg", "abs", NULL};
	pr->counts[C_INSTRUCTIONS]++;
	if (ptx_starts(opcode, "ld.global") || ptx_starts(opcode, "ldu.global"))
		count_memory(pr, GLOBAL_LOAD, opcode);
	else if (ptx_starts(opcode, "st.global"))
		count_memory(pr, GLOBAL_STORE, opcode);
	else if (ptx_starts(opcode, "ld.shared"))
		count_memory(pr, SHARED_LOAD, opcode);
	else if (ptx_starts(opcode, "st.shared"))
		count_memory(pr, SHARED_STORE, opcode);
	else if (ptx_starts(opcode, "ldmatrix"))
		pr->counts[C_LDMATRIX]++;
	else if (ptx_starts(opcode, "cp.async.bulk") || ptx_starts(opcode, "cp.reduce.async.bulk"))
		pr->counts[C_BULK]++;
	else if (ptx_starts(opcode, "cp.async.ca") || ptx_starts(opcode, "cp.async.cg"))
		pr->counts[C_CP_ASYNC]++;
	else if (ptx_starts(opcode, "wgmma.mma_async"))
		pr->counts[C_WGMMA]++;
	else if (ptx_starts(opcode, "mma.") || ptx_starts(opcode, "wmma.mma"))
		pr->counts[C_MMA]++;
	else if ((ptx_starts(opcode, "bar.") && !ptx_starts(opcode, "bar.warp")) || ptx_starts(opcode, "barrier."))
		pr->counts[C_BARRIERS]++;
	else if (strcmp(opcode, "bra") == 0 || ptx_starts(opcode, "bra."))
		count_branch(pr, operands);
	else if (ptx_starts(opcode, "atom.") || ptx_starts(opcode, "red."))
		pr->counts[C_ATOMICS]++;
	else if (ptx_starts(opcode, "shfl."))
		pr->counts[C_SHUFFLES]++;
	if (is_float_type(opcode)) {
		for (size_t k = 0; flop_ops[k]; k++)
			if (ptx_starts(opcode, flop_ops[k]) && opcode[strlen(flop_ops[k])] == '.') {
				pr->counts[C_FLOP]++;
				if (k == 3 || k == 4)
					pr->counts[C_FMA]++;
				break;
			}
	}
}

static void read_line(struct profile *pr, char *line)
{
	struct ptx_line l;
	switch (ptx_split_line(line, &l)) {
	case PTX_LABEL:
		pr->labels = xreallocarray(pr->labels, pr->nlabels + 1, sizeof(*pr->labels));
		pr->labels[pr->nlabels++] = xstrdup(l.text);
		break;
	case PTX_INSTRUCTION:
		classify(pr, l.text, l.operands);
		break;
	case PTX_OTHER:
		break;
	}
}

static void add_counts(cJSON *obj, const char *name, long n)
{
	if (!cJSON_AddNumberToObject(obj, name, (double)n))
		xalloc_die();
}

cJSON *ptx_profile(const char *ptx)
{
	struct profile pr;
	memset(&pr, 0, sizeof(pr));
	char *copy = xstrdup(ptx);
	for (char *line = copy, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		read_line(&pr, line);
	}
	free(copy);

	cJSON *out = cJSON_CreateObject();
	if (!out)
		xalloc_die();
	add_counts(out, counter_names[C_INSTRUCTIONS], pr.counts[C_INSTRUCTIONS]);
	for (int op = 0; op < NMEMORY_OPS; op++) {
		cJSON *widths = cJSON_AddObjectToObject(out, memory_names[op]);
		if (!widths)
			xalloc_die();
		for (int w = 0; w < NWIDTHS; w++)
			add_counts(widths, width_names[w], pr.memory[op][w]);
	}
	for (int c = C_INSTRUCTIONS + 1; c < NCOUNTERS; c++)
		add_counts(out, counter_names[c], pr.counts[c]);
	for (size_t k = 0; k < pr.nlabels; k++)
		free(pr.labels[k]);
	free(pr.labels);
	return out;
}
