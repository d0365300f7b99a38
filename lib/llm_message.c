/* llm_message.c: what one LLM request sends and what its answer holds: the request body in the
 * API's form (Chat Completions or Responses), the answer's text and usage, what a server that
 * refused it says, and the function calls of the tool loop. llm.c sends them. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"
#include "llm.h"
#include "llm_message.h"
#include "xalloc.h"

/* Whether the round about to be sent may call functions: within the rounds, and results left. */
int llm_may_call(const struct call *c)
{
	const struct llm_tools *t = c->req->tools;
	return t && c->round <= t->max_rounds && c->tool_bytes < t->max_total_bytes;
}

/* "tools" in the form of the API: Chat nests each function under "function". */
static cJSON *tools_json(const struct llm_settings *s, const struct llm_tools *t)
{
	cJSON *tools = cJSON_CreateArray();
	if (!tools)
		xalloc_die();
	for (size_t k = 0; k < t->nfunctions; k++) {
		const struct llm_function *f = &t->functions[k];
		cJSON *tool = json_object(), *holder = tool;
		json_add_string(tool, "type", "function");
		if (s->api == LLM_CHAT) {
			holder = json_object();
			json_add(tool, "function", holder);
		}
		json_add_string(holder, "name", f->name);
		json_add_string(holder, "description", f->description);
		/* Text that is not JSON (the caller's bug) goes as a string, which the server refuses. */
		cJSON *parameters = cJSON_Parse(f->parameters);
		json_add(holder, "parameters", parameters ? parameters : cJSON_CreateString(f->parameters));
		json_add_bool(holder, "strict", 1);
		json_append(tools, tool);
	}
	return tools;
}

cJSON *llm_request_body(const struct call *c)
{
	const struct llm_settings *s = c->s;
	const struct llm_request *r = c->req;
	cJSON *body = json_object();
	json_add_string(body, "model", s->model);
	cJSON *messages = cJSON_Duplicate(c->conversation ? c->conversation : r->messages, 1);
	if (s->api == LLM_RESPONSES) {
		/* An input message says it is one: llama-server reads an assistant's turn (the
		 * answer a correction quotes) only with "type": "message", which OpenAI allows. */
		cJSON *m;
		cJSON_ArrayForEach(m, messages)
			if (json_string(m, "role") && !cJSON_GetObjectItemCaseSensitive(m, "type"))
				json_add_string(m, "type", "message");
	}
	json_add(body, s->api == LLM_CHAT ? "messages" : "input", messages);
	if (r->tools) {
		/* The round after the last that may call functions gets them still (the conversation
		 * holds calls), but must answer. */
		json_add(body, "tools", tools_json(s, r->tools));
		json_add_string(body, "tool_choice", llm_may_call(c) ? "auto" : "none");
	}
	if (!isnan(s->temperature))
		json_add_number(body, "temperature", s->temperature);
	if (s->max_output_tokens > 0)
		json_add_number(body, s->api == LLM_CHAT ? "max_completion_tokens" : "max_output_tokens",
				(double)s->max_output_tokens);
	if (s->reasoning_effort) {
		if (s->api == LLM_CHAT) {
			json_add_string(body, "reasoning_effort", s->reasoning_effort);
		} else {
			cJSON *reasoning = json_object();
			json_add_string(reasoning, "effort", s->reasoning_effort);
			json_add(body, "reasoning", reasoning);
		}
	}
	cJSON *format = NULL;
	/* A round that may call functions asks for no answer format: llama-server constrains
	 * the whole answer to the format (a grammar), so a model asked for both could never
	 * call a function. The round that must answer (tool_choice "none") asks for it. */
	int answers = !r->tools || !llm_may_call(c);
	if (answers && s->format == LLM_FORMAT_JSON) {
		format = json_object();
		json_add_string(format, "type", "json_object");
	} else if (answers && s->format == LLM_FORMAT_SCHEMA && r->schema) {
		/* Chat nests the schema under json_schema; Responses puts it beside the type. */
		format = json_object();
		json_add_string(format, "type", "json_schema");
		cJSON *holder = format;
		if (s->api == LLM_CHAT) {
			holder = json_object();
			json_add(format, "json_schema", holder);
		}
		json_add_string(holder, "name", r->schema_name ? r->schema_name : "answer");
		json_add(holder, "schema", cJSON_Duplicate(r->schema, 1));
		json_add_bool(holder, "strict", 1);
	}
	if (format && s->api == LLM_CHAT) {
		json_add(body, "response_format", format);
	} else if (format) {
		cJSON *text = json_object();
		json_add(text, "format", format);
		json_add(body, "text", text);
	}
	return body;
}

/* The token counts of a response body. */
void llm_usage_of(const struct llm_settings *s, const cJSON *doc, double *in, double *out)
{
	const cJSON *usage = cJSON_GetObjectItemCaseSensitive(doc, "usage");
	*in = json_number(usage, s->api == LLM_CHAT ? "prompt_tokens" : "input_tokens", 0);
	*out = json_number(usage, s->api == LLM_CHAT ? "completion_tokens" : "output_tokens", 0);
}

/* The first choice's message of a Chat Completions response. */
static const cJSON *chat_message(const cJSON *doc)
{
	const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "choices"), 0);
	return cJSON_GetObjectItemCaseSensitive(choice, "message");
}

/* The answer's text and token counts from a response body. Returns the text (the caller
 * frees it), or NULL with *why set. */
char *llm_answer_text(const struct llm_settings *s, const cJSON *doc, double *in, double *out, int *cut, char **why)
{
	llm_usage_of(s, doc, in, out);
	if (s->api == LLM_CHAT) {
		const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "choices"), 0);
		const char *finish = json_string(choice, "finish_reason");
		*cut = finish && strcmp(finish, "length") == 0;
		const cJSON *message = chat_message(doc);
		const char *content = json_string(message, "content"), *refusal = json_string(message, "refusal");
		if (content)
			return xstrdup(content);
		*why = refusal ? xasprintf("the model refused: %s", refusal)
			       : xstrdup("no choices[0].message.content in the response");
		return NULL;
	}
	/* llama-server says "completed" of an answer cut at max_output_tokens: one that used
	 * them all counts as cut too. */
	const char *status = json_string(doc, "status");
	*cut = (status && strcmp(status, "incomplete") == 0) ||
	       (s->max_output_tokens > 0 && *out >= (double)s->max_output_tokens);
	struct strbuf text;
	strbuf_init(&text);
	int found = 0;
	const cJSON *item, *part;
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(doc, "output")) {
		const char *type = json_string(item, "type");
		if (!type || strcmp(type, "message") != 0)
			continue; /* reasoning summaries and tool calls are not the answer */
		cJSON_ArrayForEach(part, cJSON_GetObjectItemCaseSensitive(item, "content")) {
			const char *t = json_string(part, "text"), *ptype = json_string(part, "type");
			if (t && ptype && strcmp(ptype, "output_text") == 0) {
				strbuf_addstr(&text, t);
				found = 1;
			}
		}
	}
	if (found)
		return strbuf_detach(&text);
	strbuf_release(&text);
	*why = xasprintf("no output_text in the response (status %s)", status ? status : "absent");
	return NULL;
}

/* The server's own words about an error: error.message of a JSON body, else its start. */
char *llm_server_message(const char *body)
{
	cJSON *doc = cJSON_Parse(body);
	const char *message = json_string(cJSON_GetObjectItemCaseSensitive(doc, "error"), "message");
	char *out = message ? xstrdup(message) : xstrndup(body, strnlen(body, 200));
	cJSON_Delete(doc);
	for (char *p = out; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return out;
}

/* The number after the first of phrases in text; 0 when none is there. */
static long number_after(const char *text, const char *const *phrases, size_t n)
{
	for (size_t k = 0; text && k < n; k++) {
		const char *at = strstr(text, phrases[k]);
		if (at)
			return strtol(at + strlen(phrases[k]), NULL, 10);
	}
	return 0;
}

/* The context a server said a prompt overflowed, and the prompt's size, in tokens; 0 where
 * the body says none. llama-server: {"error": {"type": "exceed_context_size_error",
 * "n_ctx": N, "n_prompt_tokens": M}}; OpenAI and vLLM: "This model's maximum context length
 * is N tokens. However, your messages resulted in M tokens" ("you requested M tokens"). */
void llm_context_of(const char *body, long *context, long *prompt)
{
	static const char *const context_phrases[] = {"maximum context length is "};
	static const char *const prompt_phrases[] = {"resulted in ", "you requested "};
	cJSON *doc = cJSON_Parse(body);
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(doc, "error");
	const char *message = json_string(error, "message");
	*context = (long)json_number(error, "n_ctx", 0);
	*prompt = (long)json_number(error, "n_prompt_tokens", 0);
	if (*context <= 0) {
		*context = number_after(message, context_phrases, ARRAY_SIZE(context_phrases));
		*prompt = number_after(message, prompt_phrases, ARRAY_SIZE(prompt_phrases));
	}
	if (*context <= 0)
		*context = *prompt = 0;
	if (*prompt < 0)
		*prompt = 0;
	cJSON_Delete(doc);
}

/* ---------------------------------------------------------------- function calls */

static void add_asked(cJSON *asked, const char *id, const char *name, const char *arguments)
{
	cJSON *a = json_object();
	json_add_string(a, "id", id ? id : "");
	json_add_string(a, "name", name ? name : "");
	if (arguments)
		json_add_string(a, "arguments", arguments);
	json_append(asked, a);
}

/* The function calls a response asks for, as [{"id", "name", "arguments"}] (arguments as the
 * text the model wrote; absent when it wrote none); empty when it asks for none. */
cJSON *llm_calls_asked(const struct llm_settings *s, const cJSON *doc)
{
	cJSON *asked = cJSON_CreateArray();
	if (!asked)
		xalloc_die();
	const cJSON *item;
	if (s->api == LLM_CHAT) {
		cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(chat_message(doc), "tool_calls")) {
			const cJSON *f = cJSON_GetObjectItemCaseSensitive(item, "function");
			add_asked(asked, json_string(item, "id"), json_string(f, "name"), json_string(f, "arguments"));
		}
		return asked;
	}
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(doc, "output")) {
		const char *type = json_string(item, "type");
		if (type && strcmp(type, "function_call") == 0)
			add_asked(asked, json_string(item, "call_id"), json_string(item, "name"), json_string(item, "arguments"));
	}
	return asked;
}

/* Appends the model's turn to the conversation, as the API wants it back: Chat's assistant
 * message with its tool_calls; the Responses API's function_call items, and the reasoning
 * items a reasoning model needs beside them. Only the first keep calls go back (every call
 * sent back needs a result); the last of them, when refused is set, with empty arguments and
 * a name kept short, since it is answered by the one refusal for it and all the calls after. */
static void add_model_turn(const struct llm_settings *s, cJSON *conversation, const cJSON *doc, int keep, int refused)
{
	const cJSON *item;
	cJSON *kept = cJSON_CreateArray();
	if (!kept)
		xalloc_die();
	if (s->api == LLM_CHAT) {
		const cJSON *message = chat_message(doc);
		const char *content = json_string(message, "content");
		cJSON *turn = json_object();
		json_add_string(turn, "role", "assistant");
		json_add(turn, "content", content ? cJSON_CreateString(content) : cJSON_CreateNull());
		int k = 0;
		cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(message, "tool_calls"))
			if (k++ < keep)
				json_append(kept, cJSON_Duplicate(item, 1));
		json_add(turn, "tool_calls", kept);
		json_append(conversation, turn);
	} else {
		int k = 0;
		cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(doc, "output")) {
			const char *type = json_string(item, "type");
			int call = type && strcmp(type, "function_call") == 0;
			if ((call && k++ < keep) || (type && strcmp(type, "reasoning") == 0))
				json_append(conversation, cJSON_Duplicate(item, 1));
		}
		cJSON_Delete(kept);
	}
	if (!refused || keep == 0)
		return;
	/* The refused call: the last function call appended. */
	cJSON *last = NULL, *m;
	if (s->api == LLM_CHAT) {
		cJSON *calls = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(conversation, cJSON_GetArraySize(conversation) - 1),
								"tool_calls");
		last = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(calls, keep - 1), "function");
	} else {
		cJSON_ArrayForEach(m, conversation) {
			const char *type = json_string(m, "type");
			if (type && strcmp(type, "function_call") == 0)
				last = m;
		}
	}
	if (!last)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(last, "arguments");
	json_add_string(last, "arguments", "{}");
	const char *name = json_string(last, "name");
	if (name && strlen(name) > 64) {
		cJSON_DeleteItemFromObjectCaseSensitive(last, "name");
		json_add_string(last, "name", "unknown");
	}
}

static void add_result(const struct llm_settings *s, cJSON *conversation, const char *id, const char *result)
{
	cJSON *m = json_object();
	if (s->api == LLM_CHAT) {
		json_add_string(m, "role", "tool");
		json_add_string(m, "tool_call_id", id);
		json_add_string(m, "content", result);
	} else {
		json_add_string(m, "type", "function_call_output");
		json_add_string(m, "call_id", id);
		json_add_string(m, "output", result);
	}
	json_append(conversation, m);
}

/* result cut to at most max bytes (at a line's end when one is in the second half, never
 * inside a UTF-8 character), with a note saying how much was left out. Takes result. */
static char *cut_result(char *result, size_t max)
{
	size_t len = strlen(result);
	if (len <= max)
		return result;
	size_t keep = max;
	while (keep > 0 && ((unsigned char)result[keep] & 0xC0) == 0x80)
		keep--;
	const char *newline = memrchr(result, '\n', keep);
	if (newline && (size_t)(newline - result) >= keep / 2)
		keep = (size_t)(newline - result) + 1;
	char *out = xasprintf("%.*s%s[cut: the first %zu of %zu bytes; ask for less]", (int)keep, result,
			      keep && result[keep - 1] == '\n' ? "" : "\n", keep, len);
	free(result);
	return out;
}

/* The result of one call the model asked for: the function's, or what was wrong with the call. */
static char *call_result(struct call *c, const char *name, const char *arguments)
{
	const struct llm_tools *t = c->req->tools;
	const struct llm_function *f = NULL;
	for (size_t k = 0; k < t->nfunctions; k++)
		if (strcmp(t->functions[k].name, name) == 0)
			f = &t->functions[k];
	if (!f) {
		struct strbuf sb;
		strbuf_init(&sb);
		strbuf_addf(&sb, "error: there is no function '%.100s'; the functions are", name);
		for (size_t k = 0; k < t->nfunctions; k++)
			strbuf_addf(&sb, "%s %s", k ? "," : "", t->functions[k].name);
		return strbuf_detach(&sb);
	}
	cJSON *args = arguments ? cJSON_Parse(arguments) : NULL;
	char *result;
	if (!cJSON_IsObject(args))
		result = xasprintf("error: the arguments of %s are not a JSON object: %.200s", name,
				   arguments ? arguments : "(none)");
	else
		result = t->call(t->ctx, name, args);
	cJSON_Delete(args);
	size_t left = c->tool_bytes < t->max_total_bytes ? t->max_total_bytes - c->tool_bytes : 0;
	return cut_result(result, left < t->max_result_bytes ? left : t->max_result_bytes);
}

/* What text adds to a request once written as a JSON string (its escapes and quotes). */
static size_t json_len(const char *text)
{
	cJSON *str = cJSON_CreateString(text ? text : "");
	char *printed = str ? cJSON_PrintUnformatted(str) : NULL;
	if (!printed)
		xalloc_die();
	size_t len = strlen(printed);
	cJSON_free(printed);
	cJSON_Delete(str);
	return len;
}

/* The JSON around one call sent back and its result ("type", "role", "tool_call_id", ...). */
#define CALL_OVERHEAD_BYTES 160

/* Runs the calls the round's answer (doc) asks for: the model's turn and each result go into
 * the conversation, and into c->ran for the round's log. What goes back counts against
 * --tool-total-bytes, the calls sent back as well as their results (errors included); once it
 * is reached, the call there gets one short refusal that speaks for it and every call after
 * it, which are not sent back at all: a model asking for 30,000 calls makes the next request
 * grow by the limit and a fixed margin, not by 30,000 refusals. */
void llm_run_calls(struct call *c, const cJSON *doc)
{
	const struct llm_settings *s = c->s;
	const struct llm_tools *t = c->req->tools;
	cJSON *asked = llm_calls_asked(s, doc), *a;
	int total = cJSON_GetArraySize(asked), keep = 0, refused = 0;
	char **results = xcalloc((size_t)total + 1, sizeof(*results));
	cJSON_ArrayForEach(a, asked) {
		const char *id = json_string(a, "id"), *name = json_string(a, "name"), *arguments = json_string(a, "arguments");
		if (c->tool_bytes >= t->max_total_bytes) {
			results[keep] = xasprintf("error: the results of this conversation reached their limit (%zu bytes): "
						  "this call and the %d after it were not run; answer now with what you have",
						  t->max_total_bytes, total - keep - 1);
			keep++;
			refused = 1;
			break;
		}
		c->tool_bytes += CALL_OVERHEAD_BYTES + 2 * json_len(id) + json_len(name) + json_len(arguments);
		results[keep] = call_result(c, name, arguments);
		c->tool_bytes += json_len(results[keep++]);
	}
	add_model_turn(s, c->conversation, doc, keep, refused);
	c->ran = cJSON_CreateArray();
	if (!c->ran)
		xalloc_die();
	int k = 0;
	cJSON_ArrayForEach(a, asked) {
		if (k == keep)
			break;
		add_result(s, c->conversation, json_string(a, "id"), results[k]);
		cJSON *ran = cJSON_Duplicate(a, 1);
		json_add_string(ran, "result", results[k]);
		json_append(c->ran, ran);
		free(results[k++]);
		c->req->function_calls++;
	}
	free(results);
	cJSON_Delete(asked);
}
