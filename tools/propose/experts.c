/* experts.c (kg-propose): asks LLM experts for candidate changes: builds the prompt from the
 * run's files, asks every persona at once, extracts and checks the answers, corrects once. */
#include "common.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <string.h>

#include "experts.h"
#include "fileio.h"
#include "fnv1a.h"
#include "functions.h"
#include "jsonl.h"
#include "log.h"
#include "prompt.h"
#include "run.h"

static const struct {
	const char *name, *text;
} builtin_personas[] = {
	{"throughput", "You are the throughput expert. Raise arithmetic intensity and hide latency: bigger tiles "
		       "and more work per thread, deeper software pipelines (more stages, cp.async), wider vector "
		       "loads, tensor cores where the math allows. Accept more registers and shared memory as long "
		       "as occupancy stays adequate and nothing spills."},
	{"memory", "You are the memory expert. Lower register and shared-memory pressure to raise occupancy and "
		   "remove spills: smaller tiles, fewer stages, fewer live values, reused buffers. Make global "
		   "accesses coalesced and aligned, cut redundant traffic, and use the caches well; for a "
		   "memory-bound kernel, move bytes at the speed of the memory system."},
	{"robustness", "You are the robustness expert. Prefer safe, proven choices that keep results correct on "
		       "every input size: tensor-core-friendly shapes (multiples of 16), aligned vector widths, "
		       "moderate tiles and stages, configurations that compile without spills, correct tails. "
		       "Take small steps from what already measured well."},
};

static const char system_prompt[] =
	"You are an expert CUDA performance engineer. You propose concrete changes that make one CUDA kernel "
	"faster on one GPU while its results stay correct. Every proposal is compiled with NVRTC, run, checked "
	"against a reference on fresh random inputs and timed with CUDA events; a change that does not compile, "
	"or changes the results, is wasted. Reason from the measurements and symptoms you are given. Answer "
	"with one JSON object and nothing else.";

/* ---------------------------------------------------------------- personas */

int persona_add(struct experts *ex, const char *name_or_file)
{
	struct persona p = {0};
	for (size_t i = 0; i < ARRAY_SIZE(builtin_personas); i++)
		if (strcmp(name_or_file, builtin_personas[i].name) == 0)
			p = (struct persona){xstrdup(builtin_personas[i].name), xstrdup(builtin_personas[i].text)};
	if (!p.name) {
		size_t len;
		char *text = file_read_all(name_or_file, &len);
		if (!text) {
			if (errno == ENOENT && !strchr(name_or_file, '/') && !strchr(name_or_file, '.'))
				return log_error("--persona: '%s' is neither a built-in persona (throughput, memory, "
						 "robustness) nor a prompt file", name_or_file);
			return log_error("--persona: cannot read the prompt file '%s':", name_or_file);
		}
		char *copy = xstrdup(name_or_file), *base = basename(copy), *dot = strrchr(base, '.');
		if (dot && dot != base)
			*dot = '\0';
		p = (struct persona){xstrdup(base), text};
		free(copy);
	}
	ex->personas = xreallocarray(ex->personas, ex->npersonas + 1, sizeof(*ex->personas));
	ex->personas[ex->npersonas++] = p;
	return 0;
}

void experts_release(struct experts *ex)
{
	for (size_t i = 0; i < ex->npersonas; i++) {
		free(ex->personas[i].name);
		free(ex->personas[i].text);
	}
	free(ex->personas);
}

/* ---------------------------------------------------------------- the prompt */

/* Each section's name, and drop: the order in which --max-prompt-tokens leaves them out (the
 * least needed first), 0 for those always kept: what the kernel is, its source and its tuning
 * space. */
static const struct {
	const char *name;
	int drop;
} section_info[SEC_COUNT] = {
	[SEC_GOAL] = {"goal", 0}, [SEC_DEVICE] = {"device", 6}, [SEC_SOURCE] = {"kernel source", 0},
	[SEC_SPACE] = {"tuning space", 0}, [SEC_SYMPTOMS] = {"symptoms", 7}, [SEC_REGIONS] = {"regions", 1},
	[SEC_METRICS] = {"hardware metrics", 4}, [SEC_HISTORY] = {"history", 3}, [SEC_CATALOG] = {"method catalog", 2},
	[SEC_REGRAPH] = {"ReGraph", 5},
};

/* The bytes a token takes, where the server does not count them: 4 (English text and code,
 * for the usual tokenizers), until a server that refused a prompt said how many tokens it was. */
static double bytes_per_token = 4;

/* The prompt's size in tokens: the server's count (llm_count_tokens) while it gives one, else
 * an estimate at bytes_per_token. *exact says which. */
static long prompt_tokens(const struct llm_settings *s, const char *text, int *exact)
{
	if (!*text)
		return 0;
	long n = *exact ? llm_count_tokens(s, text) : -1;
	if (n >= 0)
		return n;
	*exact = 0; /* once the server has not counted, it is not asked again */
	return (long)ceil((double)strlen(text) / bytes_per_token);
}

/* The context every expert is told: the sections, left out by their drop order until the
 * prompt (fixed: the tokens of what surrounds them) fits budget tokens (0: no limit), each
 * left-out section logged. Returns NULL with why set when the sections always kept do not
 * fit. */
static char *fit_context(const struct llm_settings *s, char *part[SEC_COUNT], long budget, long fixed, int exact,
			 const char *where, struct strbuf *why)
{
	long tokens[SEC_COUNT], total = fixed;
	int keep[SEC_COUNT];
	for (int k = 0; k < SEC_COUNT; k++) {
		keep[k] = 1;
		tokens[k] = budget > 0 ? prompt_tokens(s, part[k], &exact) : 0;
		total += tokens[k];
	}
	if (budget > 0 && total > budget) {
		struct strbuf left;
		strbuf_init(&left);
		long before = total;
		for (int drop = 1; drop < SEC_COUNT && total > budget; drop++)
			for (int k = 0; k < SEC_COUNT; k++)
				if (section_info[k].drop == drop && tokens[k] > 0) {
					keep[k] = 0;
					total -= tokens[k];
					strbuf_addf(&left, "%s%s (%ld)", left.len ? ", " : "", section_info[k].name, tokens[k]);
				}
		char how[64];
		if (exact)
			snprintf(how, sizeof(how), "counted by the server");
		else
			snprintf(how, sizeof(how), "estimated at %.3g bytes a token", bytes_per_token);
		if (total > budget) {
			strbuf_addf(why, "the prompt is %ld tokens (%s) without its sections that may be left out, more than "
					 "the %ld it may have", total, how, budget);
			strbuf_release(&left);
			return NULL;
		}
		log_info("%s: the prompt, %ld tokens (%s), is over %ld: left out %s", where, before, how, budget, left.buf);
		strbuf_release(&left);
	}
	struct strbuf sb;
	strbuf_init(&sb);
	for (int k = 0; k < SEC_COUNT; k++)
		if (keep[k])
			strbuf_addstr(&sb, part[k]);
	return strbuf_detach(&sb);
}

static char *user_prompt(const char *context, const struct persona *persona, int tool_rounds)
{
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "%s\n## Your role: %s\n%s\n", context, persona->name, persona->text);
	if (tool_rounds > 0)
		strbuf_addf(&sb, "\n## Functions\nBefore you answer, you may call functions to look closer at this variant "
				 "(at most %d round%s of calls): metrics(names) for its hardware metrics, region_detail(id) "
				 "for a region above, source_lines(start, end) for kernel.cu lines, ptx_for_lines(start, end) "
				 "for the PTX compiled from kernel.cu lines. Ask only for what your proposal needs.\n",
			    tool_rounds, tool_rounds == 1 ? "" : "s");
	strbuf_addstr(&sb,
		      "\n## Answer\nOne JSON object {\"candidates\": [...]}; each candidate has:\n"
		      "- \"think\": your reasoning, in a few sentences\n"
		      "- \"method\": the optimization method, a short name (a catalog name when one fits)\n"
		      "- \"detail\": what exactly changes\n"
		      "- \"patch\": a unified diff against kernel.cu (--- a/kernel.cu, +++ b/kernel.cu, @@ hunks whose "
		      "context lines match the source exactly), or null\n"
		      "- \"source\": the whole new kernel.cu instead of a patch, or null\n"
		      "- \"config\": the complete configuration to build with (every parameter, values from the lists "
		      "above, the conditions satisfied), or null to keep the current one\n"
		      "- \"launch_update\": null; the launch follows from the configuration (GlobalSize and LocalSize "
		      "of the spec)\n"
		      "Keep the kernel's name, signature and macros; a change may be code, configuration or both.\n");
	return strbuf_detach(&sb);
}

/* The answer's JSON schema; the configuration's values are listed where the list is short,
 * so that a strict endpoint cannot even produce one outside the space. */
static cJSON *answer_schema(const struct t1_spec *spec)
{
	static const char *const types[] = {"integer", "integer", "number", "boolean", "string"};
	cJSON *config = json_object(), *props = json_object(), *required = cJSON_CreateArray();
	json_add_string(config, "type", "object");
	for (size_t k = 0; k < spec->nparams; k++) {
		const struct t1_param *p = &spec->params[k];
		cJSON *prop = json_object();
		if (p->nvalues <= 64) {
			cJSON *values = cJSON_CreateArray();
			for (size_t v = 0; v < p->nvalues; v++)
				json_append(values, cJSON_Parse(p->values_json[v]));
			json_add(prop, "enum", values);
		} else {
			json_add_string(prop, "type", types[p->type]);
		}
		json_add(props, p->name, prop);
		json_append(required, cJSON_CreateString(p->name));
	}
	json_add(config, "properties", props);
	json_add(config, "required", required);
	json_add_bool(config, "additionalProperties", 0);
	char *config_text = json_text(config);
	char *text = xasprintf(
		"{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"candidates\"],\"properties\":{"
		"\"candidates\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"additionalProperties\":false,"
		"\"required\":[\"think\",\"method\",\"detail\",\"patch\",\"source\",\"config\",\"launch_update\"],"
		"\"properties\":{\"think\":{\"type\":\"string\"},\"method\":{\"type\":\"string\"},"
		"\"detail\":{\"type\":\"string\"},\"patch\":{\"type\":[\"string\",\"null\"]},"
		"\"source\":{\"type\":[\"string\",\"null\"]},\"config\":{\"anyOf\":[{\"type\":\"null\"},%s]},"
		"\"launch_update\":{\"type\":\"null\"}}}}}}",
		config_text);
	cJSON *schema = cJSON_Parse(text);
	if (!schema)
		xalloc_die();
	free(text);
	free(config_text);
	cJSON_Delete(config);
	return schema;
}

static cJSON *message(const char *role, const char *content)
{
	cJSON *m = json_object();
	json_add_string(m, "role", role);
	json_add_string(m, "content", content);
	return m;
}

/* ---------------------------------------------------------------- answers */

/* The end of the JSON value starting at text[0] ('{' or '['), strings and escapes respected;
 * NULL when it does not close. */
static const char *value_end(const char *text)
{
	int depth = 0, in_string = 0;
	for (const char *p = text; *p; p++) {
		if (in_string) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				in_string = 0;
		} else if (*p == '"') {
			in_string = 1;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if ((*p == '}' || *p == ']') && --depth == 0) {
			return p + 1;
		}
	}
	return NULL;
}

static int answer_shaped(const cJSON *v)
{
	return cJSON_IsArray(v) || cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(v, "candidates")) ||
	       json_string(v, "method");
}

static cJSON *parse_span(const char *start, const char *end)
{
	char *copy = xstrndup(start, (size_t)(end - start));
	cJSON *v = cJSON_Parse(copy);
	free(copy);
	if (v && !answer_shaped(v)) {
		cJSON_Delete(v);
		v = NULL;
	}
	return v;
}

/* The first JSON value in text that has the shape of an answer: the whole text, a fenced
 * code block, or a balanced {...} inside prose. Returns it, or NULL with why set. */
static cJSON *answer_extract(const char *text, struct strbuf *why)
{
	cJSON *v = parse_span(text, text + strlen(text));
	if (v)
		return v;
	/* Fenced blocks: ```json ... ``` or ``` ... ``` */
	for (const char *p = strstr(text, "```"); p; p = strstr(p, "```")) {
		const char *body = strchr(p + 3, '\n'), *close = body ? strstr(body, "```") : NULL;
		if (!close)
			break;
		if ((v = parse_span(body + 1, close)))
			return v;
		p = close + 3;
	}
	/* A balanced value inside prose. */
	for (const char *p = text; *p; p++) {
		if (*p != '{' && *p != '[')
			continue;
		const char *end = value_end(p);
		if (end && (v = parse_span(p, end)))
			return v;
	}
	strbuf_addstr(why, "no JSON object with \"candidates\" in the answer");
	return NULL;
}

static char *optional_text(const cJSON *c, const char *key, int *bad)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(c, key);
	if (!item || cJSON_IsNull(item))
		return NULL;
	if (!cJSON_IsString(item)) {
		*bad = 1;
		return NULL;
	}
	return *item->valuestring ? xstrdup(item->valuestring) : NULL;
}

/* Turns an answer into proposals. Returns how many, or -1 with why set when none is usable. */
static int take_candidates(const cJSON *answer, const char *proposer, struct proposal **list, size_t *n,
			   struct strbuf *why)
{
	const cJSON *items = cJSON_IsArray(answer) ? answer : cJSON_GetObjectItemCaseSensitive(answer, "candidates");
	cJSON *single = NULL;
	if (!items) { /* one candidate, unwrapped */
		single = cJSON_CreateArray();
		json_append(single, cJSON_Duplicate(answer, 1));
		items = single;
	}
	int taken = 0, i = -1;
	const cJSON *c;
	cJSON_ArrayForEach(c, items) {
		i++;
		int bad = 0;
		struct proposal p = {.proposer = xstrdup(proposer), .prior = NAN};
		p.method = optional_text(c, "method", &bad);
		p.detail = optional_text(c, "detail", &bad);
		p.think = optional_text(c, "think", &bad);
		p.patch = optional_text(c, "patch", &bad);
		p.source = optional_text(c, "source", &bad);
		const cJSON *config = cJSON_GetObjectItemCaseSensitive(c, "config");
		const cJSON *launch = cJSON_GetObjectItemCaseSensitive(c, "launch_update");
		if (config && !cJSON_IsNull(config))
			p.config = cJSON_Duplicate(config, 1);
		if (launch && !cJSON_IsNull(launch))
			p.launch_update = cJSON_Duplicate(launch, 1);
		const char *problem = !cJSON_IsObject(c) ? "is not an object"
				      : bad ? "think, method, detail, patch and source must be strings or null"
				      : !p.method ? "method: missing"
				      : p.config && !cJSON_IsObject(p.config) ? "config: must be an object or null"
				      : !p.patch && !p.source && !p.config ? "changes nothing: no patch, source or config"
				      : p.patch && strlen(p.patch) > KG_CANDIDATE_MAX_BYTES ? "patch: larger than 1 MiB, the most a patch may have"
				      : p.source && strlen(p.source) > KG_CANDIDATE_MAX_BYTES ? "source: larger than 1 MiB, the most a source may have"
									    : NULL;
		if (problem) {
			if (!why->len)
				strbuf_addf(why, "candidates[%d]: %s", i, problem);
			proposal_release(&p);
			continue;
		}
		*list = xreallocarray(*list, *n + 1, sizeof(**list));
		(*list)[(*n)++] = p;
		taken++;
	}
	cJSON_Delete(single);
	if (!taken && !why->len)
		strbuf_addstr(why, "the answer has no candidates");
	return taken ? taken : -1;
}

/* ---------------------------------------------------------------- asking */

struct expert_call {
	const struct persona *persona;
	cJSON *messages;
	struct llm_request req;
	char *proposer;
	int done;
	int shortened; /* asked again with a shorter prompt, which takes the place of the correction */
};

static void add_error(cJSON *errors, const char *persona, const char *error)
{
	cJSON *e = json_object();
	json_add_string(e, "persona", persona);
	json_add_string(e, "error", error);
	json_append(errors, e);
}

/* The context the endpoint's prompts may fill, in tokens: what its model list reports
 * (llm_server_context, asked once a process when --max-prompt-tokens is not given), or what
 * it said when it refused a prompt of this process as longer (llm_request's context_tokens),
 * which overrides the report; 0 while neither is known. A process talks to one endpoint, so
 * each expansion fits its prompts to it from the start. */
static long server_context;
static int context_asked;

/* The tokens a prompt may have: --max-prompt-tokens, and at most the server's context less
 * room for the answer (--max-output-tokens, else a quarter of it) and for the tool loop's
 * results; 0: no limit known. */
static long prompt_budget(const struct experts *ex, const struct llm_settings *s, long context)
{
	long budget = ex->max_prompt_tokens;
	if (context > 0) {
		long room = s->max_output_tokens > 0 ? s->max_output_tokens : context / 4;
		if (ex->tool_rounds > 0)
			room += ex->tool_total_bytes / 4;
		long fit = context - room > 1 ? context - room : 1;
		budget = budget > 0 && budget < fit ? budget : fit;
	}
	return budget;
}

static cJSON *expert_messages(const char *context, const struct persona *persona, int tool_rounds)
{
	cJSON *messages = cJSON_CreateArray();
	char *prompt = user_prompt(context, persona, tool_rounds);
	json_append(messages, message("system", system_prompt));
	json_append(messages, message("user", prompt));
	free(prompt);
	return messages;
}

/* Whether a prompt of these sections surely fits budget tokens, uncounted: a token spans at
 * least a byte of text (a tokenizer's byte fallback exactly one), so a prompt of no more bytes
 * than the budget, with the template's framing, fits. A large context then costs no
 * /tokenize request per section at every expansion. */
static int surely_fits(const struct experts *ex, char *part[SEC_COUNT], long budget)
{
	size_t bytes = strlen(system_prompt) + 16, most = 0;
	for (size_t i = 0; i < ex->npersonas; i++) {
		char *rest = user_prompt("", &ex->personas[i], ex->tool_rounds);
		most = strlen(rest) > most ? strlen(rest) : most;
		free(rest);
	}
	for (int k = 0; k < SEC_COUNT; k++)
		bytes += strlen(part[k]);
	return bytes + most <= (size_t)budget;
}

/* Asks the endpoint for its context, once a process, where --max-prompt-tokens does not give
 * the budget; logs where the budget comes from. */
static void ask_context(const struct experts *ex, const struct llm_settings *s, const char *where)
{
	if (ex->max_prompt_tokens > 0 || context_asked)
		return;
	context_asked = 1;
	char *said = NULL;
	long reported = llm_server_context(s, &said);
	if (reported > 0) {
		server_context = reported;
		long budget = prompt_budget(ex, s, reported);
		log_info("%s: the prompt may have %ld tokens: the context the server reports, %ld tokens (%s), less %ld "
			 "for the answer%s", where, budget, reported, said, reported - budget,
			 ex->tool_rounds > 0 ? " and the tool loop's results" : "");
	} else {
		log_info("%s: the prompt has no token budget (no --max-prompt-tokens, and the server reports no context: "
			 "%s)", where, said);
	}
	free(said);
}

/* The tokens of a prompt beyond its sections: the system prompt, the longest persona with
 * the answer's form, and a few for each message's framing (the chat template). */
static long fixed_tokens(const struct experts *ex, const struct llm_settings *s, int *exact)
{
	long most = 0;
	for (size_t i = 0; i < ex->npersonas; i++) {
		char *rest = user_prompt("", &ex->personas[i], ex->tool_rounds);
		long n = prompt_tokens(s, rest, exact);
		free(rest);
		most = n > most ? n : most;
	}
	return prompt_tokens(s, system_prompt, exact) + most + 16;
}

void experts_propose(const struct experts *ex, struct run_info *run, const struct node_info *node,
		     struct proposal **list, size_t *n, cJSON *errors)
{
	struct llm_settings s = ex->llm;
	char *log_dir = run_path(run->run.dir, RUN_LLM), *cache_dir = run_path(run->run.dir, RUN_LLM_CACHE);
	s.log_dir = log_dir;
	s.cache_dir = cache_dir;
	s.jitter_seed ^= fnv1a64(node->state, strlen(node->state));
	cJSON *schema = answer_schema(run->run.spec);
	struct variant_view view = {run, node};
	struct llm_tools tools = {.max_rounds = ex->tool_rounds, .max_result_bytes = (size_t)ex->tool_result_bytes,
				  .max_total_bytes = (size_t)ex->tool_total_bytes};
	functions_init(&tools, &view);
	struct expert_call *calls = xcalloc(ex->npersonas + 1, sizeof(*calls));
	struct llm_request *reqs = xcalloc(ex->npersonas + 1, sizeof(*reqs));
	char *part[SEC_COUNT], *where = xasprintf("%s: node %s", run->run.dir, node->state);
	prompt_sections(ex, run, node, part);
	struct strbuf why_not;
	strbuf_init(&why_not);
	ask_context(ex, &s, where);
	long budget = prompt_budget(ex, &s, server_context);
	if (budget > 0 && surely_fits(ex, part, budget))
		budget = 0; /* nothing to leave out, nothing to count */
	int exact = 1;
	long fixed = budget > 0 ? fixed_tokens(ex, &s, &exact) : 0;
	char *context = fit_context(&s, part, budget, fixed, exact, where, &why_not);
	for (size_t i = 0; i < ex->npersonas; i++) {
		struct expert_call *c = &calls[i];
		c->persona = &ex->personas[i];
		c->proposer = xasprintf("llm:%s/%s", s.model, c->persona->name);
		if (context) {
			c->messages = expert_messages(context, c->persona, ex->tool_rounds);
		} else {
			add_error(errors, c->persona->name, why_not.buf);
			c->done = 1;
		}
	}
	free(context);
	char *shorter = NULL; /* the context fitted to what the server said, for shorter_fit tokens */
	long shorter_fit = 0;
	/* Round 1 asks everyone; round 2 corrects, once, those whose answer was unusable, and asks
	 * again with a shorter prompt those whose prompt the server found longer than its context. */
	for (int round = 1; round <= 2; round++) {
		size_t k = 0, *index = xcalloc(ex->npersonas + 1, sizeof(*index));
		for (size_t i = 0; i < ex->npersonas; i++) {
			if (calls[i].done)
				continue;
			reqs[k] = (struct llm_request){.label = calls[i].persona->name, .messages = calls[i].messages,
						       .schema = schema, .schema_name = "candidates",
						       .tools = ex->tool_rounds > 0 ? &tools : NULL};
			index[k++] = i;
		}
		if (k)
			llm_run(&s, reqs, k);
		for (size_t j = 0; j < k; j++) {
			struct expert_call *c = &calls[index[j]];
			struct llm_request *r = &reqs[j];
			c->done = 1;
			if (!r->ok && r->context_tokens > 0 && round == 1) {
				/* The server said how long a prompt may be: shorten it to fit, once. */
				server_context = r->context_tokens;
				if (r->refused_tokens > 0) { /* and how long this one was: the estimate's measure */
					size_t bytes = 0;
					const cJSON *m;
					cJSON_ArrayForEach(m, c->messages)
						bytes += strlen(json_string(m, "content") ? json_string(m, "content") : "");
					bytes_per_token = (double)bytes / (double)r->refused_tokens;
				}
				long fit = prompt_budget(ex, &s, server_context);
				if (fit != shorter_fit) { /* measured once for every expert refused alike */
					free(shorter);
					strbuf_reset(&why_not);
					exact = 1;
					fixed = fixed_tokens(ex, &s, &exact);
					shorter = fit_context(&s, part, fit, fixed, exact, where, &why_not);
					shorter_fit = fit;
				}
				if (shorter) {
					log_warn("%s: %s: %s; asking again with the prompt shortened to %ld tokens", where,
						 c->persona->name, r->error, fit);
					cJSON_Delete(c->messages);
					c->messages = expert_messages(shorter, c->persona, ex->tool_rounds);
					c->done = 0;
					c->shortened = 1;
				} else {
					char *error = xasprintf("%s; and %s", r->error, why_not.buf);
					add_error(errors, c->persona->name, error);
					free(error);
				}
				llm_request_release(r);
				continue;
			}
			if (!r->ok) {
				add_error(errors, c->persona->name, r->error);
				llm_request_release(r);
				continue;
			}
			log_info("%s: node %s: %s answered in %.0f ms (%s%d round%s, %d function call%s, %.0f + %.0f tokens, $%.4f)",
				 run->run.dir, node->state, c->persona->name, r->ms, r->cached ? "cached, " : "", r->rounds,
				 r->rounds == 1 ? "" : "s", r->function_calls, r->function_calls == 1 ? "" : "s", r->tokens_in,
				 r->tokens_out, r->cost_usd);
			struct strbuf why;
			strbuf_init(&why);
			cJSON *answer = answer_extract(r->text, &why);
			/* Every field of a candidate (think, method, detail, source, patch, config) is
			 * text only after this parse, where an escaped key becomes the key. */
			llm_redact_json(&s, answer);
			int usable = answer && take_candidates(answer, c->proposer, list, n, &why) >= 0;
			if (!usable && r->cut) { /* what went wrong first: the answer has no end */
				char *was = strbuf_detach(&why);
				strbuf_init(&why);
				if (s.max_output_tokens > 0)
					strbuf_addf(&why, "the answer stopped at --max-output-tokens %ld, unfinished: %s",
						    s.max_output_tokens, was);
				else
					strbuf_addf(&why, "the answer stopped at the server's output token limit, unfinished: %s", was);
				free(was);
			}
			if (usable) {
				if (why.len)
					log_warn("%s: node %s: %s: dropped %s", run->run.dir, node->state, c->persona->name, why.buf);
			} else if (round == 1) {
				char *fix = xasprintf("Your answer could not be used: %s. Answer again with only one JSON object "
						      "{\"candidates\": [...]} as specified, no prose and no code fences.", why.buf);
				json_append(c->messages, message("assistant", r->text));
				json_append(c->messages, message("user", fix));
				free(fix);
				log_warn("%s: node %s: %s: malformed answer (%s); asking once more", run->run.dir, node->state,
					 c->persona->name, why.buf);
				c->done = 0;
			} else {
				char *error = xasprintf("malformed answer %s: %s (see %s/%s)",
							c->shortened ? "to the shortened prompt" : "after one correction", why.buf,
							log_dir, r->log_file);
				add_error(errors, c->persona->name, error);
				free(error);
			}
			cJSON_Delete(answer);
			strbuf_release(&why);
			llm_request_release(r);
		}
		free(index);
	}
	for (size_t i = 0; i < ex->npersonas; i++) {
		cJSON_Delete(calls[i].messages);
		free(calls[i].proposer);
	}
	for (int k = 0; k < SEC_COUNT; k++)
		free(part[k]);
	free(shorter);
	free(where);
	strbuf_release(&why_not);
	free(calls);
	free(reqs);
	cJSON_Delete(schema);
	free(log_dir);
	free(cache_dir);
}
