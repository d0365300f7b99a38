/* rules.c (kg-propose): the built-in proposer, so a search runs without an LLM: one step along
 * each parameter, the spec's library of ready patches, and random configurations for diversity. */
#include "common.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "fnv1a.h"
#include "jsonl.h"
#include "log.h"
#include "materialize.h"
#include "model.h"
#include "moves.h"
#include "rng.h"
#include "rules.h"
#include "run.h"
#include "space.h"

/* Priors kg-select normalizes over siblings: a step and a ready patch are worth trying first;
 * a random configuration is there for diversity. */
#define PRIOR_STEP 1.0
#define PRIOR_PATCH 1.0
#define PRIOR_RANDOM 0.5

/* Whether p may go out (context_accept); a refused p is reported, counted and released. Checked
 * at once, so that the random draws that follow never take a neighbour's place. */
static int accepted(struct run_info *run, const struct node_info *node, struct proposal *p, size_t *dropped)
{
	struct strbuf why;
	strbuf_init(&why);
	int ok = context_accept(run, node, p, &why) == 0;
	if (!ok) {
		log_info("%s: node %s: %s: %s: dropped: %s", run->run.dir, node->state, p->proposer, p->detail, why.buf);
		proposal_release(p);
		(*dropped)++;
	}
	strbuf_release(&why);
	return ok;
}

static void append(struct proposal *p, struct proposal **list, size_t *n)
{
	*list = xreallocarray(*list, *n + 1, sizeof(**list));
	(*list)[(*n)++] = *p;
}

/* For each parameter, the nearest value below and above the node's that keeps the
 * configuration valid and one the node's kernel takes (and, with --within, measured), the
 * others unchanged. */
static void neighbours(struct run_info *run, const struct node_info *node, struct proposal **list, size_t *n,
		       size_t *dropped)
{
	const struct t1_spec *spec = run->run.spec;
	size_t *at = xcalloc(spec->nparams + 1, sizeof(*at)), *try = xcalloc(spec->nparams + 1, sizeof(*try));
	config_indices(spec, node->config, at); /* node_load checked it is of the space */
	for (size_t k = 0; k < spec->nparams; k++) {
		const struct t1_param *param = &spec->params[k];
		for (int dir = -1; dir <= 1; dir += 2) {
			memcpy(try, at, spec->nparams * sizeof(*try));
			for (long j = (long)at[k] + dir; j >= 0 && j < (long)param->nvalues; j += dir) {
				try[k] = (size_t)j;
				if (!config_valid(spec, try) || !kernel_takes(spec, node, NULL, try, NULL) ||
				    !context_within(run, try))
					continue;
				struct proposal p = {.proposer = xstrdup("rules:neighbour"), .method = xstrdup(param_method(spec, k)),
						     .prior = PRIOR_STEP};
				p.detail = xasprintf("%s %s -> %s", param->name, param->values_json[at[k]], param->values_json[j]);
				p.config = json_object();
				json_add(p.config, param->name, cJSON_Parse(param->values_json[j]));
				if (accepted(run, node, &p, dropped))
					append(&p, list, n);
				break;
			}
		}
	}
	free(try);
	free(at);
}

/* The number of an architecture, 90 for "sm_90" and "sm_90a" alike (kg-build gives a ready
 * patch that needs "sm_90a" that architecture where the run builds for "sm_90"); -1 for
 * anything else. */
static long arch_generation(const char *arch)
{
	char *end;
	long n = strncmp(arch, "sm_", 3) == 0 ? strtol(arch + 3, &end, 10) : -1;
	return n > 0 && (*end == '\0' || ((*end == 'a' || *end == 'f') && end[1] == '\0')) ? n : -1;
}

static int applied(const struct node_info *node, const char *name)
{
	for (size_t i = 0; i < node->napplied; i++)
		if (strcmp(node->applied[i], name) == 0)
			return 1;
	return 0;
}

/* Whether the run has tried the KernelGraph.Patches entry name: measured it, or failed to
 * build it (a patch this GPU cannot compile fails at every node alike). */
static int tried_anywhere(const struct run_info *run, const char *name)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, run->events) {
		const char *library = json_string(cJSON_GetObjectItemCaseSensitive(e, "candidate"), "library");
		if (library && strcmp(library, name) == 0)
			return 1;
	}
	return 0;
}

/* Whether the ready patch applies to node's kernel, tried by GNU patch as kg-build will try
 * it, on a copy in a directory of its own under $TMPDIR: a patch of another kernel (wgmma's
 * diff at the warp-specialized node) is a build that can only fail. Returns 1, or 0 with why
 * set; -1 (why set) when it could not be tried: then it is offered, and kg-build says. */
static int patch_applies(const struct run_info *run, const struct node_info *node, const char *patch,
			 struct strbuf *why)
{
	const char *tmp = getenv("TMPDIR"), *kernel = strrchr(run->run.spec->kernel_path, '/');
	char *dir = xasprintf("%s/kg-propose.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int applies = -1;
	if (!mkdtemp(dir)) {
		strbuf_addf(why, "cannot make a directory to try it in (%s)", strerror(errno));
		free(dir);
		return -1;
	}
	char *path = xasprintf("%s/%s", dir, run_variant_file(VARIANT_KERNEL));
	if (file_write(path, node->source, strlen(node->source)) != 0) {
		strbuf_addf(why, "cannot write '%s': %s", path, strerror(errno));
	} else {
		struct patch_report r;
		patch_apply(dir, run_variant_file(VARIANT_KERNEL), kernel ? kernel + 1 : run->run.spec->kernel_path, patch, &r);
		applies = r.outcome == PATCH_APPLIED ? 1 : r.outcome == PATCH_REJECTED ? 0 : -1;
		if (r.message)
			strbuf_addstr(why, r.message);
		patch_report_release(&r);
	}
	dir_remove_tree(dir);
	free(path);
	free(dir);
	return applies;
}

/* KernelGraph.Patches: [{"Name", "Patch" or "PatchFile", "Method", "Detail", "Config", "Prior",
 * "Conditions", "After"}]; one with After (another entry's Name) is a diff of that entry's
 * kernel, offered only where that entry is on the path.
 * Once the run has tried a patch somewhere, it is offered again only at the incumbent:
 * the patched variant's own configuration moves explore the patched space from there, and
 * offering it at every other node spent a build a node on the same edit (11 of 40 on an H100
 * matmul); the incumbent's configuration with the patch is the composition worth a build. */
/* Whether an entry of patches other than self is named name. */
static int patch_named(const cJSON *patches, const char *name, const cJSON *self)
{
	const cJSON *entry;
	cJSON_ArrayForEach(entry, patches) {
		const char *other = json_string(entry, "Name");
		if (entry != self && other && strcmp(other, name) == 0)
			return 1;
	}
	return 0;
}

static void library(struct run_info *run, const struct node_info *node, struct proposal **list, size_t *n,
		    size_t *dropped)
{
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(run->run.spec->json, "KernelGraph");
	const cJSON *patches = cJSON_GetObjectItemCaseSensitive(ext, "Patches"), *entry;
	if (patches && !cJSON_IsArray(patches)) {
		log_warn("%s/spec.json: KernelGraph.Patches: must be an array of patches; ignored", run->run.dir);
		return;
	}
	int i = -1;
	cJSON_ArrayForEach(entry, patches) {
		i++;
		const char *name = json_string(entry, "Name"), *text = json_string(entry, "Patch");
		const char *file = json_string(entry, "PatchFile");
		const cJSON *config = cJSON_GetObjectItemCaseSensitive(entry, "Config");
		if (!name || (!text && !file) || (config && !cJSON_IsObject(config))) {
			log_warn("%s/spec.json: KernelGraph.Patches[%d]: needs a Name, a Patch or PatchFile, and Config "
				 "(if any) an object; ignored", run->run.dir, i);
			continue;
		}
		/* a patch of another patch's kernel: only below that one */
		const cJSON *after_item = cJSON_GetObjectItemCaseSensitive(entry, "After");
		const char *after = json_string(entry, "After");
		if (after_item && (!after || !patch_named(patches, after, entry))) {
			log_warn("%s/spec.json: KernelGraph.Patches[%d].After: must be the Name of another entry; ignored",
				 run->run.dir, i);
			continue;
		}
		if (applied(node, name))
			continue;
		const char *needs = json_string(entry, "Arch"), *builds = json_string(node->build, "arch");
		if (needs && builds && arch_generation(needs) != arch_generation(builds)) {
			log_info("%s: node %s: rules:library: %s: needs %s, and the run builds for %s: not offered", run->run.dir,
				 node->state, name, needs, builds);
			continue;
		}
		if (after && !applied(node, after)) {
			log_info("%s: node %s: rules:library: %s: applies after %s, which is not on the path", run->run.dir,
				 node->state, name, after);
			continue;
		}
		const char *incumbent = json_string(run->best, "state");
		if ((!incumbent || strcmp(incumbent, node->state) != 0) && tried_anywhere(run, name)) {
			log_info("%s: node %s: rules:library: %s: tried elsewhere in the run; offered again only at "
				 "the incumbent", run->run.dir, node->state, name);
			continue;
		}
		char *patch = NULL;
		if (!text) {
			char *path = xasprintf("%s/%s", run->run.dir, file);
			size_t len;
			if (file_confined(run->run.dir, file, 1) && access(path, F_OK) == 0) /* a link out of the run */
				log_warn("%s/spec.json: KernelGraph.Patches[%d].PatchFile: '%s': %s '%s'; %s", run->run.dir, i, file,
					 FILE_NOT_INSIDE, run->run.dir, T1_FILES_RULE);
			else if (!(patch = file_read_all(path, &len)))
				log_warn("%s/spec.json: KernelGraph.Patches[%d].PatchFile: cannot read '%s':", run->run.dir, i, path);
			free(path);
			if (!patch)
				continue;
		}
		const char *method = json_string(entry, "Method"), *detail = json_string(entry, "Detail");
		struct proposal p = {.proposer = xstrdup("rules:library"), .method = xstrdup(method ? method : name),
				     .detail = xstrdup(detail ? detail : name), .patch = patch ? patch : xstrdup(text),
				     .library = xstrdup(name), .prior = json_number(entry, "Prior", PRIOR_PATCH)};
		p.config = config ? cJSON_Duplicate(config, 1) : NULL;
		/* GNU patch runs only for what the cheap checks let through */
		if (!accepted(run, node, &p, dropped))
			continue;
		struct strbuf why;
		strbuf_init(&why);
		int applies = patch_applies(run, node, p.patch, &why);
		if (applies <= 0)
			log_info("%s: node %s: rules:library: %s: %s: %s", run->run.dir, node->state, name,
				 applies ? "not tried on the node's kernel, offered" : "does not apply to the node's kernel",
				 why.buf);
		strbuf_release(&why);
		if (applies == 0) {
			proposal_release(&p);
			(*dropped)++;
		} else {
			append(&p, list, n);
		}
	}
}

/* ---------------------------------------------------------------- random configurations */

struct random_offer {
	struct run_info *run;
	const struct node_info *node;
	struct proposal **list;
	size_t *n;
};

static int offer_random(void *ctx, const size_t *indices)
{
	struct random_offer *ro = ctx;
	/* A draw the node's kernel does not take is refused as context_accept would refuse it,
	 * before its texts are made: late in a search with ready patches most draws are. */
	if (!kernel_takes(ro->run->run.spec, ro->node, NULL, indices, NULL))
		return -1;
	struct proposal p = {.proposer = xstrdup("rules:random"), .prior = PRIOR_RANDOM,
			     .config = config_object(ro->run->run.spec, indices)};
	p.method = xstrdup(move_method(ro->run->run.spec, ro->node->config, p.config));
	p.detail = json_text(p.config);
	struct strbuf why;
	strbuf_init(&why);
	int rc = context_accept(ro->run, ro->node, &p, &why) == 0 ? 0 : -1;
	if (rc == 0) {
		*ro->list = xreallocarray(*ro->list, *ro->n + 1, sizeof(**ro->list));
		(*ro->list)[(*ro->n)++] = p;
	} else {
		proposal_release(&p); /* an already seen draw does not count: draw again */
	}
	strbuf_release(&why);
	return rc;
}

/* With a model, every configuration move is priced by it (fixed priors would swamp its
 * figures once kg-select normalizes them) and the weak ones go, unless they are all the node
 * has left: kg-select marks a node that gets nothing exhausted for good, and a search that
 * ends "exhausted" must have proposed every valid configuration (of the --within table), so
 * the weak moves go out then, at their low priors, rather than never. */
static void price(const struct model *m, struct run_info *run, const struct node_info *node, struct proposal *list,
		  size_t *n, size_t *dropped)
{
	size_t kept = 0, nweak = 0;
	struct proposal *weak_list = xcalloc(*n + 1, sizeof(*weak_list));
	for (size_t i = 0; i < *n; i++) {
		struct proposal *p = &list[i];
		enum move_weakness weak = MOVE_STRONG;
		if (!p->patch && !p->source && p->full_config && strcmp(p->proposer, "rules:model") != 0)
			p->prior = model_prior(m, p->full_config, &weak);
		if (weak != MOVE_STRONG) {
			log_info("%s: node %s: %s: %s: dropped: the model expects %s", run->run.dir, node->state,
				 p->proposer, p->detail,
				 weak == MOVE_WEAK_ON_NODE ? "too little gain (--min-pred-gain)"
							   : "it no faster than the run's best");
			weak_list[nweak++] = *p;
		} else {
			list[kept++] = *p;
		}
	}
	if (kept == 0) {
		if (nweak)
			log_info("%s: node %s: nothing but the moves the model dropped as weak is left: they go out after all", run->run.dir,
				 node->state);
		memcpy(list, weak_list, nweak * sizeof(*list));
		kept = nweak;
	} else {
		for (size_t i = 0; i < nweak; i++)
			proposal_release(&weak_list[i]);
		*dropped += nweak;
	}
	free(weak_list);
	*n = kept;
}

/* Most promising first, so that a build budget keeps the best and the search widens in this
 * order; a stable insertion sort, since ties keep the order the rules made them in. */
static void sort_by_prior(struct proposal *list, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct proposal p = list[i];
		size_t j = i;
		for (; j > 0 && list[j - 1].prior < p.prior; j--)
			list[j] = list[j - 1];
		list[j] = p;
	}
}

void rules_propose(struct run_info *run, const struct node_info *node, const struct rules_settings *settings,
		   struct proposal **list, size_t *n, size_t *dropped, size_t *left_out)
{
	size_t first = *n, random = settings->random;
	int waiting;
	struct model *m = model_fit(run, node, &settings->model, &waiting);
	/* refining starts once the run has explored on its own (--history may have put
	 * better configurations than the incumbent's neighbours on the table) */
	int refine = m && model_measured(m) >= settings->model.initial;
	/* The initial design: the default and random draws, spread over the space so that the
	 * model's first fit sees more than the default's neighbourhood. */
	if (waiting && random + 1 < settings->model.initial)
		random = settings->model.initial - 1;
	if (!waiting)
		neighbours(run, node, list, n, dropped);
	library(run, node, list, n, dropped);
	uint64_t rng = settings->seed ^ fnv1a64(node->state, strlen(node->state));
	if (random) {
		struct random_offer ro = {run, node, list, n};
		const size_t *listed;
		long nlisted = run_listing(run, &listed);
		random_configs(run->run.spec, listed, nlisted, &rng, random, offer_random, &ro);
	}
	int exploit = 0;
	size_t picked = 0; /* by the model */
	if (m) {
		size_t before = *n;
		exploit = model_propose(m, run, node, rng_next(&rng), list, n);
		picked = *n - before;
		size_t mine = *n - first;
		if (mine)
			price(m, run, node, *list + first, &mine, dropped);
		*n = first + mine;
		model_free(m);
	}
	if (*n == first) /* nothing proposed: *list may be NULL, and NULL + 0 is undefined */
		return;
	sort_by_prior(*list + first, *n - first);
	/* At the incumbent, its most promising neighbour goes first: the best region is
	 * refined step by step while the model's picks explore from the other nodes. */
	const char *incumbent = json_string(run->best, "state");
	if (refine && !exploit && incumbent && strcmp(incumbent, node->state) == 0)
		for (size_t i = first; i < *n; i++)
			if (strcmp((*list)[i].proposer, "rules:neighbour") == 0) {
				struct proposal p = (*list)[i];
				memmove(*list + first + 1, *list + first, (i - first) * sizeof(**list));
				(*list)[first] = p;
				break;
			}
	for (size_t i = first; i < *n; i++) /* the model's move of a stalled search's best */
		if ((*list)[i].lead) {
			struct proposal p = (*list)[i];
			memmove(*list + first + 1, *list + first, (i - first) * sizeof(**list));
			(*list)[first] = p;
			break;
		}
	/* In the endgame the model's picks (the lowest predicted times) go first, ahead of
	 * moves priced by their expected improvement. */
	if (exploit) {
		double top = (*list)[first].prior;
		size_t front = first;
		for (size_t i = first; i < *n; i++)
			if (strcmp((*list)[i].proposer, "rules:model") == 0) {
				struct proposal p = (*list)[i];
				memmove(*list + front + 1, *list + front, (i - front) * sizeof(**list));
				p.prior = fmax(p.prior, top);
				(*list)[front++] = p;
			}
	}
	/* The widening's share, most promising first; the initial design goes out whole, as
	 * the model waits for all of it (and its compiles run side by side). */
	size_t keep = settings->children ? settings->children : SIZE_MAX;
	if (waiting && keep < random + picked)
		keep = random + picked;
	for (; *n - first > keep; (*left_out)++)
		proposal_release(&(*list)[--*n]);
}
