/* llm.c: requests to OpenAI-compatible endpoints through one curl multi handle, with retries
 * on their own timers, a cache of answers keyed by the request, and a log of every call. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>

#include <curl/curl.h>

#include "clock.h"
#include "fileio.h"
#include "jsonl.h"
#include "llm.h"
#include "llm_message.h"
#include "log.h"
#include "parse.h"
#include "rng.h"
#include "sha256.h"
#include "xalloc.h"

/* libcurl, loaded with dlopen by the first request: kg-propose and kg-relabel start once per
 * build of a search and most runs make no request (rules, the catalog), while linking libcurl
 * cost each start its thirty libraries, 5 ms of CPU. */
static struct {
	int tried, loaded;
	char *error;
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	void (*easy_reset)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	CURLcode (*easy_perform)(CURL *);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	time_t (*getdate)(const char *, const time_t *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_perform)(CURLM *, int *);
	CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd[], unsigned int, int, int *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	CURLMcode (*multi_cleanup)(CURLM *);
} libcurl;

/* Loads libcurl ($KG_LIBCURL_LIBRARY if set, else libcurl.so.4) and sets up its global state,
 * once; 0, or -1 with libcurl.error set. */
static int libcurl_open(void)
{
	if (libcurl.tried)
		return libcurl.loaded ? 0 : -1;
	libcurl.tried = 1;
	const char *path = getenv("KG_LIBCURL_LIBRARY");
	void *h = dlopen(path && *path ? path : "libcurl.so.4", RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		libcurl.error = xasprintf("cannot load libcurl (%s): %s", path && *path ? "KG_LIBCURL_LIBRARY" : "install libcurl4",
					  dlerror());
		return -1;
	}
	/* dlsym returns void *; POSIX guarantees it converts to a function pointer. */
#define LOAD(field)                                                                            \
	if (!(*(void **)&libcurl.field = dlsym(h, "curl_" #field))) {                              \
		libcurl.error = xasprintf("libcurl has no curl_%s: %s", #field, dlerror());       \
		return -1;                                                                     \
	}
	LOAD(global_init);
	LOAD(easy_init);
	LOAD(easy_reset);
	LOAD(easy_setopt);
	LOAD(easy_getinfo);
	LOAD(easy_perform);
	LOAD(easy_cleanup);
	LOAD(easy_strerror);
	LOAD(getdate);
	LOAD(slist_append);
	LOAD(slist_free_all);
	LOAD(multi_init);
	LOAD(multi_add_handle);
	LOAD(multi_remove_handle);
	LOAD(multi_perform);
	LOAD(multi_poll);
	LOAD(multi_info_read);
	LOAD(multi_cleanup);
#undef LOAD
	if (libcurl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		libcurl.error = xstrdup("libcurl could not set up its global state");
		return -1;
	}
	libcurl.loaded = 1;
	return 0;
}

/* What the calls of one llm_run have spent so far, against the caps. */
struct session {
	long calls, tokens;
};

/* The price per million tokens (input, output) kernelgraph knows for model; 0, 0 when it
 * knows none (a local server costs nothing). */
static void llm_default_prices(const char *model, double *in, double *out)
{
	/* USD per million tokens, from OpenAI's price list (standard tier, 2026). */
	static const struct {
		const char *model;
		double in, out;
	} prices[] = {
		{"gpt-5-nano", 0.05, 0.40}, {"gpt-5-mini", 0.25, 2.00}, {"gpt-5", 1.25, 10.00},
		{"gpt-4.1-nano", 0.10, 0.40}, {"gpt-4.1-mini", 0.40, 1.60}, {"gpt-4.1", 2.00, 8.00},
		{"gpt-4o-mini", 0.15, 0.60}, {"gpt-4o", 2.50, 10.00}, {"o4-mini", 1.10, 4.40},
	};
	*in = *out = 0;
	for (size_t i = 0; i < ARRAY_SIZE(prices); i++)
		if (strcmp(model, prices[i].model) == 0) {
			*in = prices[i].in;
			*out = prices[i].out;
		}
}

void llm_settings_init(struct llm_settings *s)
{
	*s = (struct llm_settings){.model = "gpt-5-mini", .temperature = NAN, .timeout_s = 300, .retries = 4,
				   .backoff_s = 1, .backoff_max_s = 30, .retry_after_max_s = 120, .read_cache = 1,
				   .price_in = NAN, .price_out = NAN};
}

/* ---------------------------------------------------------------- options */

/* The largest number of seconds an option takes (11 days), and of anything else. */
#define MAX_SECONDS 1e6
#define MAX_NUMBER 1e9
#define MAX_RETRIES 100

static char *whole_option(const char *name, const char *arg, long min, long max, long *out)
{
	int64_t v;
	if (parse_int64(arg, min, max, &v))
		return xasprintf("%s: '%s' is not a whole number from %ld to %ld", name, arg, min, max);
	*out = (long)v;
	return NULL;
}

static char *number_option(const char *name, const char *arg, const char *what, double max, double *out)
{
	if (parse_double(arg, 0, max, out))
		return xasprintf("%s: '%s' is not a %s from 0 to %.15g", name, arg, what, max);
	return NULL;
}

char *llm_option(struct llm_settings *s, int opt, const char *arg)
{
	static const char *const formats[] = {[LLM_FORMAT_SCHEMA] = "schema", [LLM_FORMAT_JSON] = "json",
					      [LLM_FORMAT_NONE] = "none"};
	long retries = 0;
	char *why;
	switch ((enum llm_option)opt) {
	case LLM_OPT_API:
		if (strcmp(arg, "chat") != 0 && strcmp(arg, "responses") != 0)
			return xasprintf("--api: '%s' is not chat or responses", arg);
		s->api = strcmp(arg, "chat") == 0 ? LLM_CHAT : LLM_RESPONSES;
		return NULL;
	case LLM_OPT_BASE_URL: s->base_url = arg; return NULL;
	case LLM_OPT_MODEL: s->model = arg; return NULL;
	case LLM_OPT_FORMAT:
		for (size_t k = 0; k < ARRAY_SIZE(formats); k++)
			if (strcmp(arg, formats[k]) == 0) {
				s->format = (enum llm_format)k;
				return NULL;
			}
		return xasprintf("--format: '%s' is not schema, json or none", arg);
	case LLM_OPT_TEMPERATURE: return number_option("--temperature", arg, "number", MAX_NUMBER, &s->temperature);
	case LLM_OPT_MAX_OUTPUT_TOKENS:
		return whole_option("--max-output-tokens", arg, 1, INT32_MAX, &s->max_output_tokens);
	case LLM_OPT_REASONING_EFFORT: s->reasoning_effort = arg; return NULL;
	case LLM_OPT_TIMEOUT: return number_option("--timeout", arg, "number of seconds", MAX_SECONDS, &s->timeout_s);
	case LLM_OPT_RETRIES:
		if ((why = whole_option("--retries", arg, 0, MAX_RETRIES, &retries)) == NULL)
			s->retries = (int)retries;
		return why;
	case LLM_OPT_BACKOFF: return number_option("--backoff", arg, "number of seconds", MAX_SECONDS, &s->backoff_s);
	case LLM_OPT_BACKOFF_MAX:
		return number_option("--backoff-max", arg, "number of seconds", MAX_SECONDS, &s->backoff_max_s);
	case LLM_OPT_RETRY_AFTER_MAX:
		return number_option("--retry-after-max", arg, "number of seconds", MAX_SECONDS, &s->retry_after_max_s);
	case LLM_OPT_NO_CACHE: s->read_cache = 0; return NULL;
	case LLM_OPT_MAX_CALLS: return whole_option("--max-calls", arg, 1, INT32_MAX, &s->max_calls);
	case LLM_OPT_MAX_TOKENS: return whole_option("--max-tokens", arg, 1, INT32_MAX, &s->max_tokens);
	case LLM_OPT_PRICE_IN: return number_option("--price-in", arg, "price in USD", MAX_NUMBER, &s->price_in);
	case LLM_OPT_PRICE_OUT: return number_option("--price-out", arg, "price in USD", MAX_NUMBER, &s->price_out);
	}
	return xasprintf("option %d is not an LLM option", opt);
}

int llm_settings_from_env(struct llm_settings *s)
{
	static const char openai[] = "https://api.openai.com/v1";
	const char *key = getenv(LLM_ENV_API_KEY), *base = getenv(LLM_ENV_BASE_URL);
	s->api_key = key && *key ? key : NULL;
	if (!s->base_url)
		s->base_url = base && *base ? base : openai;
	double in, out;
	llm_default_prices(s->model, &in, &out);
	if (isnan(s->price_in))
		s->price_in = in;
	if (isnan(s->price_out))
		s->price_out = out;
	/* A local server (llama.cpp, Ollama, vLLM) may need no key; OpenAI always does. */
	if (!s->api_key && strcmp(s->base_url, openai) == 0)
		return log_error("--llm needs OPENAI_API_KEY (or OPENAI_BASE_URL, for a local server that needs no key)");
	return 0;
}

/* ---------------------------------------------------------------- files */

/* How many bytes at p spell the character k: k itself, or a JSON escape of it (\uXXXX, or
 * \/ and \" for those two) behind any number of backslashes, the form an escape takes in
 * each level of JSON it is nested in (a string holding JSON holding the key). 0: none. */
static size_t spelled(const char *p, char k)
{
	if (*p == k)
		return 1;
	size_t b = 0;
	while (p[b] == '\\')
		b++;
	if (b == 0)
		return 0;
	if ((k == '/' || k == '"') && p[b] == k)
		return b + 1;
	if (p[b] != 'u')
		return 0;
	unsigned v = 0;
	for (int i = 1; i <= 4; i++) {
		char h = p[b + (size_t)i];
		int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
		if (d < 0)
			return 0;
		v = v * 16 + (unsigned)d;
	}
	return v == (unsigned char)k ? b + 5 : 0;
}

char *llm_redact(const struct llm_settings *s, char *text)
{
	const char *key = s->api_key;
	if (!key || !*key || !text)
		return text;
	struct strbuf out;
	strbuf_init(&out);
	int found = 0;
	for (size_t i = 0; text[i];) {
		size_t q = i, j;
		for (j = 0; key[j]; j++) {
			size_t n = spelled(text + q, key[j]);
			if (!n)
				break;
			q += n;
		}
		if (!key[j]) {
			strbuf_addstr(&out, "[redacted]");
			found = 1;
			i = q;
		} else {
			strbuf_add(&out, text + i, 1);
			i++;
		}
	}
	if (!found) {
		strbuf_release(&out);
		return text;
	}
	free(text);
	return strbuf_detach(&out);
}

void llm_redact_json(const struct llm_settings *s, cJSON *item)
{
	if (!item || !s->api_key || !*s->api_key)
		return;
	if (item->string && !(item->type & cJSON_StringIsConst)) {
		char *name = llm_redact(s, xstrdup(item->string));
		if (strcmp(name, item->string) != 0) {
			size_t len = strlen(name) + 1;
			char *own = cJSON_malloc(len);
			if (!own)
				xalloc_die();
			memcpy(own, name, len);
			cJSON_free(item->string);
			item->string = own;
		}
		free(name);
	}
	if (cJSON_IsString(item)) {
		char *value = llm_redact(s, xstrdup(item->valuestring));
		if (strcmp(value, item->valuestring) != 0 && !cJSON_SetValuestring(item, value))
			xalloc_die();
		free(value);
	}
	for (cJSON *child = item->child; child; child = child->next)
		llm_redact_json(s, child);
}

static void write_redacted(const struct llm_settings *s, const char *path, const cJSON *doc, int line)
{
	char *text = cJSON_PrintUnformatted(doc);
	if (!text)
		xalloc_die();
	char *own = llm_redact(s, xasprintf("%s\n", text));
	cJSON_free(text);
	if ((line ? file_append(path, own, strlen(own)) : file_write_atomic(path, own, strlen(own))) != 0)
		log_warn("cannot write '%s':", path);
	free(own);
}

static char *cache_path(const struct call *c)
{
	return xasprintf("%s/%s.json", c->s->cache_dir, c->key);
}

/* Keeps the request (a round of it, with tools), its answer and its cost in log_dir; one line
 * per call in calls.jsonl. */
static void log_call(struct call *c)
{
	const struct llm_settings *s = c->s;
	struct llm_request *r = c->req;
	if (!s->log_dir)
		return;
	if (dir_create_nofollow(s->log_dir, 1) != 0) {
		log_warn("cannot create '%s':", s->log_dir);
		return;
	}
	char t[40], stamp[40];
	utc_now(t, sizeof(t), 1);
	size_t k = 0;
	for (const char *p = t; *p && k + 1 < sizeof(stamp); p++)
		if (*p != '-' && *p != ':')
			stamp[k++] = *p;
	stamp[k] = '\0';
	free(r->log_file);
	r->log_file = r->tools ? xasprintf("%s-%ld-%zu-%s-round%d.json", stamp, (long)getpid(), c->index, r->label, c->round)
			       : xasprintf("%s-%ld-%zu-%s.json", stamp, (long)getpid(), c->index, r->label);
	cJSON *doc = json_object();
	json_add_string(doc, "t", t);
	json_add_string(doc, "label", r->label);
	if (r->tools)
		json_add_number(doc, "round", c->round);
	json_add_string(doc, "api", s->api == LLM_CHAT ? "chat" : "responses");
	json_add_string(doc, "url", c->url);
	cJSON *request = cJSON_Parse(c->body);
	json_add(doc, "request", request ? request : cJSON_CreateString(c->body));
	cJSON *response = c->response.len ? cJSON_Parse(c->response.buf) : NULL;
	json_add(doc, "response", response ? response : c->response.len ? cJSON_CreateString(c->response.buf) : cJSON_CreateNull());
	json_add_bool(doc, "ok", c->answered);
	json_add(doc, "error", r->error ? cJSON_CreateString(r->error) : cJSON_CreateNull());
	json_add_number(doc, "http_status", (double)r->http_status);
	json_add(doc, "attempts", cJSON_Duplicate(c->attempts, 1));
	json_add_bool(doc, "cached", c->round_cached);
	if (c->ran)
		json_add(doc, "function_calls", cJSON_Duplicate(c->ran, 1));
	char *path = xasprintf("%s/%s", s->log_dir, r->log_file);
	write_redacted(s, path, doc, 0);
	free(path);

	cJSON *line = json_object();
	json_add_string(line, "t", t);
	json_add_string(line, "file", r->log_file);
	json_add_string(line, "label", r->label);
	if (r->tools) {
		json_add_number(line, "round", c->round);
		json_add_number(line, "function_calls", cJSON_GetArraySize(c->ran));
	}
	json_add_string(line, "model", s->model);
	json_add_bool(line, "ok", c->answered);
	json_add_bool(line, "cached", c->round_cached);
	json_add_number(line, "http_status", (double)r->http_status);
	json_add_number(line, "attempts", c->round_attempts);
	json_add_number(line, "tokens_in", c->round_in);
	json_add_number(line, "tokens_out", c->round_out);
	json_add_number(line, "cost_usd", c->round_cost);
	json_add_number(line, "ms", monotonic_ms() - c->round_started_ms);
	if (r->error)
		json_add_string(line, "error", r->error);
	path = xasprintf("%s/calls.jsonl", s->log_dir);
	write_redacted(s, path, line, 1);
	free(path);
	cJSON_Delete(line);
	cJSON_Delete(doc);
}

/* What calls.jsonl says was spent: calls made (not served by the cache) and their tokens. */
static void spent_so_far(const struct llm_settings *s, long *calls, long *tokens)
{
	*calls = *tokens = 0;
	if (!s->log_dir)
		return;
	char *path = xasprintf("%s/calls.jsonl", s->log_dir);
	cJSON *lines = jsonl_read_file(path), *line;
	cJSON_ArrayForEach(line, lines) {
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(line, "cached"))) {
			*calls += (long)json_number(line, "attempts", 0);
			*tokens += (long)(json_number(line, "tokens_in", 0) + json_number(line, "tokens_out", 0));
		}
	}
	cJSON_Delete(lines);
	free(path);
}

/* ---------------------------------------------------------------- the transfer */

static size_t on_body(char *data, size_t size, size_t count, void *ctx)
{
	struct call *c = ctx;
	if (size * count > LLM_MAX_ANSWER_BYTES - c->response.len) {
		/* Nothing of it is kept: a cut body could end inside the key. */
		c->too_large = 1;
		strbuf_release(&c->response);
		strbuf_init(&c->response);
		return 0; /* libcurl ends the transfer with CURLE_WRITE_ERROR */
	}
	strbuf_add(&c->response, data, size * count);
	return size * count;
}

/* Every body, from the server or the cache, passes here before anything reads it: an echo
 * of the key (a server quoting the Authorization header, in an error or in the answer
 * itself) is gone before the error message is cut to length, the answer parsed into
 * candidates, or anything cached, logged or written. Text after a NUL byte, which no JSON
 * holds, is dropped with it. */
static void response_arrived(struct call *c)
{
	if (!c->response.len)
		return;
	char *text = llm_redact(c->s, strbuf_detach(&c->response));
	strbuf_init(&c->response);
	strbuf_addstr(&c->response, text);
	free(text);
}

/* Retry-After is seconds or an HTTP date; OpenAI also sends retry-after-ms. */
static size_t on_header(char *data, size_t size, size_t count, void *ctx)
{
	struct call *c = ctx;
	size_t len = size * count;
	char *line = xstrndup(data, len), *colon = strchr(line, ':');
	if (colon) {
		*colon = '\0';
		char *value = colon + 1, *end;
		value += strspn(value, " \t");
		value[strcspn(value, "\r\n")] = '\0';
		if (strcasecmp(line, "retry-after-ms") == 0) {
			double ms = strtod(value, &end);
			if (end != value && ms >= 0)
				c->retry_after_s = ms / 1000;
		} else if (strcasecmp(line, "retry-after") == 0 && isnan(c->retry_after_s)) {
			double secs = strtod(value, &end);
			if (end != value && *end == '\0' && secs >= 0) {
				c->retry_after_s = secs;
			} else {
				time_t when = libcurl.getdate(value, NULL);
				if (when != -1)
					c->retry_after_s = fmax(0, difftime(when, time(NULL)));
			}
		}
	}
	free(line);
	return len;
}

static int start_attempt(CURLM *multi, struct call *c, struct curl_slist *headers)
{
	const struct llm_settings *s = c->s;
	if (!c->easy && !(c->easy = libcurl.easy_init()))
		return -1;
	libcurl.easy_reset(c->easy);
	strbuf_reset(&c->response);
	c->too_large = 0;
	c->retry_after_s = NAN;
	c->errbuf[0] = '\0';
	long timeout_ms = (long)(s->timeout_s * 1000);
	if (libcurl.easy_setopt(c->easy, CURLOPT_URL, c->url) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_HTTPHEADER, headers) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_WRITEDATA, c) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_HEADERDATA, c) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_ERRORBUFFER, c->errbuf) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_ACCEPT_ENCODING, "") != CURLE_OK ||
	    libcurl.easy_setopt(c->easy, CURLOPT_PRIVATE, c) != CURLE_OK ||
	    libcurl.multi_add_handle(multi, c->easy) != CURLM_OK)
		return -1;
	c->running = 1;
	c->req->attempts++;
	c->round_attempts++;
	c->started_ms = monotonic_ms();
	return 0;
}

/* Ends a request: its answer, or the error of its last attempt. */
static void finish(struct call *c, char *error)
{
	struct llm_request *r = c->req;
	c->done = 1;
	if (error) {
		r->error = llm_redact(c->s, error);
		return;
	}
	double in = 0, out = 0;
	char *why = NULL;
	cJSON *doc = cJSON_Parse(c->response.buf ? c->response.buf : "");
	/* After parsing, as well as before (response_arrived): what an escape spelled is text
	 * now, and the answer's parts are joined below. */
	llm_redact_json(c->s, doc);
	cJSON *asked = doc && r->tools ? llm_calls_asked(c->s, doc) : NULL;
	int calls = cJSON_GetArraySize(asked);
	cJSON_Delete(asked);
	if (calls && llm_may_call(c)) {
		c->has_calls = 1;
		llm_usage_of(c->s, doc, &in, &out);
	} else {
		r->text = doc ? llm_redact(c->s, llm_answer_text(c->s, doc, &in, &out, &r->cut, &why)) : NULL;
		if (calls && r->text && !*r->text) { /* llama-server's "content": "" beside its calls */
			free(r->text);
			r->text = NULL;
		}
	}
	cJSON_Delete(doc);
	if (!c->has_calls && !r->text) {
		if (calls) { /* tool_choice "none" was not heeded */
			free(why);
			why = xasprintf("the model still called functions in round %d, after the %d round%s that may", c->round,
					r->tools->max_rounds, r->tools->max_rounds == 1 ? "" : "s");
		}
		r->error = llm_redact(c->s, why ? why : xstrdup("the response is not JSON"));
		return;
	}
	c->answered = 1;
	r->ok = !c->has_calls;
	c->round_in = in;
	c->round_out = out;
	c->round_cost = c->round_cached ? 0 : (in * c->s->price_in + out * c->s->price_out) / 1e6;
	r->tokens_in += in;
	r->tokens_out += out;
	r->cost_usd += c->round_cost;
	if (!c->round_cached)
		c->session->tokens += (long)(in + out);
}

/* An attempt ended: keep its outcome, then finish or schedule the next attempt. */
static void attempt_done(struct call *c, CURLcode code, uint64_t *rng)
{
	const struct llm_settings *s = c->s;
	struct llm_request *r = c->req;
	long status = 0;
	libcurl.easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
	c->running = 0;
	r->http_status = status;
	response_arrived(c);
	char *error = NULL;
	int retryable = 0;
	if (c->too_large) {
		error = xasprintf("the answer from %s is larger than %d MiB, the limit of an answer", c->url,
				  LLM_MAX_ANSWER_BYTES >> 20);
	} else if (code != CURLE_OK) {
		error = code == CURLE_OPERATION_TIMEDOUT
				? xasprintf("no answer from %s within %g s (--timeout)", c->url, s->timeout_s)
				: xasprintf("%s: %s", c->url, c->errbuf[0] ? c->errbuf : libcurl.easy_strerror(code));
		retryable = 1;
	} else if (status < 200 || status > 299) {
		char *message = llm_server_message(c->response.buf ? c->response.buf : "");
		error = xasprintf("HTTP %ld from %s: %s", status, c->url, message);
		free(message);
		if (status == 400)
			llm_context_of(c->response.buf ? c->response.buf : "", &r->context_tokens, &r->refused_tokens);
		retryable = status == 408 || status == 409 || status == 429 || status >= 500;
	}
	cJSON *attempt = json_object();
	json_add_number(attempt, "http_status", (double)status);
	json_add_number(attempt, "ms", monotonic_ms() - c->started_ms);
	if (error)
		json_add_string(attempt, "error", error);
	if (!isnan(c->retry_after_s))
		json_add_number(attempt, "retry_after_s", c->retry_after_s);
	json_append(c->attempts, attempt);
	if (!error) {
		finish(c, NULL);
		return;
	}
	if (!retryable || c->round_attempts > s->retries) {
		char *full = xasprintf("%s (%d attempt%s)", error, c->round_attempts, c->round_attempts == 1 ? "" : "s");
		free(error);
		finish(c, full);
		return;
	}
	double wait_s;
	if (!isnan(c->retry_after_s)) {
		if (c->retry_after_s > s->retry_after_max_s) {
			char *full = xasprintf("%s; the server asks to wait %g s, more than --retry-after-max %g s (%d attempt%s)",
					       error, c->retry_after_s, s->retry_after_max_s, c->round_attempts,
					       c->round_attempts == 1 ? "" : "s");
			free(error);
			finish(c, full);
			return;
		}
		wait_s = c->retry_after_s;
	} else {
		wait_s = fmin(s->backoff_max_s, s->backoff_s * pow(2, c->round_attempts - 1)) * (0.5 + 0.5 * rng_uniform(rng));
	}
	char *shown = llm_redact(s, error);
	log_debug("%s: %s; again in %.2f s", r->label, shown, wait_s);
	free(shown);
	c->due_ms = monotonic_ms() + wait_s * 1000;
}

/* Serves a request from the cache when it can. */
static int from_cache(struct call *c)
{
	if (!c->s->cache_dir || !c->s->read_cache)
		return 0;
	char *path = cache_path(c);
	size_t len;
	char *text = file_read_all(path, &len);
	free(path);
	if (!text)
		return 0;
	strbuf_reset(&c->response);
	strbuf_add(&c->response, text, len);
	free(text);
	response_arrived(c); /* an entry written before the key was cut from answers */
	c->round_cached = 1;
	finish(c, NULL);
	if (!c->answered) { /* a damaged entry: ask again */
		free(c->req->error);
		c->req->error = NULL;
		c->round_cached = c->done = 0;
		return 0;
	}
	c->cached_rounds++;
	return 1;
}

static void store_in_cache(const struct call *c)
{
	if (!c->s->cache_dir || !c->answered || c->round_cached)
		return;
	char *path = cache_path(c);
	if (dir_create_nofollow(c->s->cache_dir, 2) != 0 || file_write_atomic(path, c->response.buf, c->response.len) != 0)
		log_warn("cannot write '%s':", path);
	free(path);
}

static struct curl_slist *request_headers(const struct llm_settings *s)
{
	struct curl_slist *h = libcurl.slist_append(NULL, "Content-Type: application/json");
	if (s->api_key && *s->api_key) {
		char *auth = xasprintf("Authorization: Bearer %s", s->api_key);
		h = libcurl.slist_append(h, auth);
		explicit_bzero(auth, strlen(auth));
		free(auth);
	}
	return h;
}

/* A round whose answer asks for function calls is over: runs them, logs the round and makes
 * the call ready for the next. Returns 1 then, 0 when the call has ended (or is not done). */
static int round_continues(struct call *c)
{
	if (!c->done || !c->has_calls)
		return 0;
	cJSON *doc = cJSON_Parse(c->response.buf);
	llm_run_calls(c, doc);
	cJSON_Delete(doc);
	log_call(c);
	cJSON_Delete(c->ran);
	cJSON_Delete(c->attempts);
	c->ran = NULL;
	c->attempts = cJSON_CreateArray();
	strbuf_reset(&c->response);
	c->round++;
	c->req->rounds++;
	c->done = c->answered = c->has_calls = c->round_attempts = c->round_cached = 0;
	c->round_in = c->round_out = c->round_cost = 0;
	c->req->http_status = 0;
	c->due_ms = 0;
	return 1;
}

/* Makes the body of the call's round: answered from the cache (rounds after rounds, as long as
 * it holds them), refused by a spending cap, or due now. */
static void round_begin(struct call *c)
{
	const struct llm_settings *s = c->s;
	struct session *ss = c->session;
	for (;;) {
		c->round_started_ms = monotonic_ms();
		cJSON *body = llm_request_body(c);
		cJSON_free(c->body);
		c->body = cJSON_PrintUnformatted(body);
		cJSON_Delete(body);
		if (!c->body)
			xalloc_die();
		char *keyed = xasprintf("%s\n%s", c->url, c->body);
		sha256_hex(keyed, strlen(keyed), c->key);
		free(keyed);
		if (!from_cache(c))
			break;
		if (!round_continues(c))
			return;
	}
	if (s->max_calls > 0 && ss->calls >= s->max_calls)
		finish(c, xasprintf("--max-calls %ld reached (%ld calls in %s/calls.jsonl)", s->max_calls, ss->calls, s->log_dir));
	else if (s->max_tokens > 0 && ss->tokens >= s->max_tokens)
		finish(c, xasprintf("--max-tokens %ld reached (%ld tokens in %s/calls.jsonl)", s->max_tokens, ss->tokens, s->log_dir));
	else
		ss->calls++; /* counted when it starts, so that a batch cannot overshoot the cap */
}


size_t llm_run(const struct llm_settings *s, struct llm_request *reqs, size_t n)
{
	int have_curl = libcurl_open() == 0;
	struct session session;
	spent_so_far(s, &session.calls, &session.tokens);
	struct call *calls_of = xcalloc(n + 1, sizeof(*calls_of));
	uint64_t rng = s->jitter_seed;
	const char *path = s->api == LLM_CHAT ? "/chat/completions" : "/responses";
	size_t base_len = strlen(s->base_url);
	while (base_len && s->base_url[base_len - 1] == '/')
		base_len--;
	for (size_t i = 0; i < n; i++) {
		struct call *c = &calls_of[i];
		c->req = &reqs[i];
		c->s = s;
		c->session = &session;
		c->index = i;
		c->url = xasprintf("%.*s%s", (int)base_len, s->base_url, path);
		strbuf_init(&c->response);
		c->attempts = cJSON_CreateArray();
		c->retry_after_s = NAN;
		c->round = c->req->rounds = 1;
		c->req->ms = monotonic_ms();
		if (c->req->tools)
			c->conversation = cJSON_Duplicate(c->req->messages, 1);
		round_begin(c);
	}

	CURLM *multi = have_curl ? libcurl.multi_init() : NULL;
	struct curl_slist *headers = have_curl ? request_headers(s) : NULL;
	if (have_curl && (!multi || !headers))
		xalloc_die();
	for (;;) {
		double now = monotonic_ms(), next_due = INFINITY;
		size_t pending = 0;
		for (size_t i = 0; i < n; i++) {
			struct call *c = &calls_of[i];
			if (c->done || c->running)
				continue;
			if (!have_curl) { /* what the cache did not answer cannot be asked */
				finish(c, xstrdup(libcurl.error));
				continue;
			}
			if (c->due_ms <= now) {
				if (start_attempt(multi, c, headers) != 0)
					finish(c, xstrdup("libcurl could not set up the request"));
			} else {
				next_due = fmin(next_due, c->due_ms);
			}
		}
		int running = 0, left;
		CURLMsg *msg;
		if (have_curl)
			libcurl.multi_perform(multi, &running);
		while (have_curl && (msg = libcurl.multi_info_read(multi, &left)) != NULL) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct call *c;
			libcurl.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
			CURLcode code = msg->data.result;
			libcurl.multi_remove_handle(multi, c->easy);
			attempt_done(c, code, &rng);
			if (c->done) {
				store_in_cache(c);
				if (round_continues(c))
					round_begin(c);
			}
		}
		for (size_t i = 0; i < n; i++)
			pending += !calls_of[i].done;
		if (!pending)
			break;
		int wait_ms = 1000;
		if (isfinite(next_due))
			wait_ms = (int)fmax(0, fmin(1000, next_due - monotonic_ms()));
		libcurl.multi_poll(multi, NULL, 0, wait_ms, NULL);
	}
	size_t failed = 0;
	for (size_t i = 0; i < n; i++) {
		struct call *c = &calls_of[i];
		c->req->ms = monotonic_ms() - c->req->ms;
		c->req->cached = c->cached_rounds == c->req->rounds;
		failed += !c->req->ok;
		log_call(c);
		cJSON_Delete(c->conversation);
		cJSON_Delete(c->ran);
		if (c->easy)
			libcurl.easy_cleanup(c->easy);
		strbuf_release(&c->response);
		cJSON_Delete(c->attempts);
		cJSON_free(c->body);
		free(c->url);
	}
	if (have_curl) {
		libcurl.slist_free_all(headers);
		libcurl.multi_cleanup(multi);
	}
	free(calls_of);
	return failed;
}

/* The body of a /tokenize or /v1/models answer, kept up to the size of an answer. */
static size_t on_small_body(char *data, size_t size, size_t count, void *ctx)
{
	struct strbuf *sb = ctx;
	if (sb->len + size * count > LLM_MAX_ANSWER_BYTES)
		return 0;
	strbuf_add(sb, data, size * count);
	return size * count;
}

/* One attempt of a request beside the API's (a GET when post is NULL), bounded by s's timeout
 * and at most 30 s: these only help fit the prompt, so a server that is slow to answer them
 * costs the expansion little. Returns the answer parsed as JSON when the status is 200, else
 * NULL with *status the status (0: no answer, or libcurl not loaded). */
static cJSON *side_request(const struct llm_settings *s, const char *url, const char *post, long *status)
{
	*status = 0;
	if (libcurl_open() != 0)
		return NULL;
	struct curl_slist *headers = request_headers(s);
	struct strbuf got;
	strbuf_init(&got);
	cJSON *doc = NULL;
	CURL *easy = libcurl.easy_init();
	if (easy && headers && libcurl.easy_setopt(easy, CURLOPT_URL, url) == CURLE_OK &&
	    (!post || libcurl.easy_setopt(easy, CURLOPT_POSTFIELDS, post) == CURLE_OK) &&
	    libcurl.easy_setopt(easy, CURLOPT_HTTPHEADER, headers) == CURLE_OK &&
	    libcurl.easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_small_body) == CURLE_OK &&
	    libcurl.easy_setopt(easy, CURLOPT_WRITEDATA, &got) == CURLE_OK &&
	    libcurl.easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)(fmin(s->timeout_s, 30) * 1000)) == CURLE_OK &&
	    libcurl.easy_setopt(easy, CURLOPT_NOSIGNAL, 1L) == CURLE_OK && libcurl.easy_perform(easy) == CURLE_OK &&
	    libcurl.easy_getinfo(easy, CURLINFO_RESPONSE_CODE, status) == CURLE_OK && *status == 200)
		doc = cJSON_Parse(got.buf ? got.buf : "");
	if (easy)
		libcurl.easy_cleanup(easy);
	libcurl.slist_free_all(headers);
	strbuf_release(&got);
	return doc;
}

long llm_count_tokens(const struct llm_settings *s, const char *text)
{
	size_t len = strlen(s->base_url);
	while (len && s->base_url[len - 1] == '/')
		len--;
	if (len >= 3 && strncmp(s->base_url + len - 3, "/v1", 3) == 0)
		len -= 3;
	char *url = xasprintf("%.*s/tokenize", (int)len, s->base_url);
	cJSON *body = json_object();
	json_add_string(body, "content", text);
	char *sent = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	if (!sent)
		xalloc_die();
	long status, n = -1;
	cJSON *doc = side_request(s, url, sent, &status);
	const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(doc, "tokens");
	if (cJSON_IsArray(tokens))
		n = cJSON_GetArraySize(tokens);
	cJSON_Delete(doc);
	cJSON_free(sent);
	free(url);
	return n;
}

/* Whether entry of a model list names model: its id, or one of llama-server's aliases. */
static int names_model(const cJSON *entry, const char *model)
{
	const char *id = json_string(entry, "id");
	if (id && strcmp(id, model) == 0)
		return 1;
	const cJSON *alias;
	cJSON_ArrayForEach(alias, cJSON_GetObjectItemCaseSensitive(entry, "aliases"))
		if (cJSON_IsString(alias) && strcmp(alias->valuestring, model) == 0)
			return 1;
	return 0;
}

long llm_server_context(const struct llm_settings *s, char **said)
{
	size_t len = strlen(s->base_url);
	while (len && s->base_url[len - 1] == '/')
		len--;
	char *url = xasprintf("%.*s/models", (int)len, s->base_url);
	long status, context = 0;
	cJSON *doc = side_request(s, url, NULL, &status);
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(doc, "data"), *entry, *found = NULL;
	int i = 0, at = -1;
	/* The entry of the model asked for; a server of one model (llama-server serves its
	 * model under any name) answers for it whatever it calls it. */
	cJSON_ArrayForEach(entry, data) {
		if (!found && names_model(entry, s->model)) {
			found = entry;
			at = i;
		}
		i++;
	}
	if (!found && i == 1) {
		found = cJSON_GetArrayItem(data, 0);
		at = 0;
	}
	/* llama-server: meta.n_ctx, the context of one slot (--ctx-size over --parallel), which
	 * a prompt and its answer share; vLLM: max_model_len. */
	double n_ctx = json_number(cJSON_GetObjectItemCaseSensitive(found, "meta"), "n_ctx", 0);
	double max_model_len = json_number(found, "max_model_len", 0);
	const char *field = n_ctx >= 1 ? "meta.n_ctx" : max_model_len >= 1 ? "max_model_len" : NULL;
	double n = n_ctx >= 1 ? n_ctx : max_model_len;
	if (field && n <= INT32_MAX && n == floor(n)) {
		context = (long)n;
		*said = xasprintf("GET %s: data[%d].%s", url, at, field);
	} else if (!doc) {
		*said = status ? xasprintf("GET %s: HTTP %ld", url, status) : xasprintf("GET %s: no answer", url);
	} else if (!found) {
		*said = xasprintf("GET %s: no entry of data[] is the model '%s'", url, s->model);
	} else {
		*said = xasprintf("GET %s: data[%d] has no meta.n_ctx or max_model_len", url, at);
	}
	cJSON_Delete(doc);
	free(url);
	return context;
}

void llm_request_release(struct llm_request *r)
{
	free(r->text);
	free(r->error);
	free(r->log_file);
	r->text = r->error = r->log_file = NULL;
	r->cut = 0;
}
