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

#include <curl/curl.h>

#include "clock.h"
#include "fileio.h"
#include "jsonl.h"
#include "llm.h"
#include "log.h"
#include "rng.h"
#include "sha256.h"
#include "xalloc.h"

/* What one request goes through, attempt after attempt. */
struct call {
	struct llm_request *req;
	const struct llm_settings *s;
	char *url;
	char *body;		/* the request body, as sent and as cached */
	char key[SHA256_HEX_SIZE]; /* the cache key */
	CURL *easy;
	struct strbuf response; /* the body of the last attempt, once ended without the key */
	int too_large;		/* the body ran past LLM_MAX_ANSWER_BYTES and was dropped */
	double retry_after_s;	/* from the last attempt's headers; NAN when absent */
	double due_ms;		/* when the next attempt may start */
	double started_ms;
	int running, done;
	cJSON *attempts;	/* for the log: status, ms, error of each */
	char errbuf[CURL_ERROR_SIZE];
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

/* ---------------------------------------------------------------- requests */

static cJSON *request_body(const struct llm_settings *s, const struct llm_request *r)
{
	cJSON *body = json_object();
	json_add_string(body, "model", s->model);
	json_add(body, s->api == LLM_CHAT ? "messages" : "input", cJSON_Duplicate(r->messages, 1));
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
	if (s->format == LLM_FORMAT_JSON) {
		format = json_object();
		json_add_string(format, "type", "json_object");
	} else if (s->format == LLM_FORMAT_SCHEMA && r->schema) {
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

/* The answer's text and token counts from a response body. Returns the text (the caller
 * frees it), or NULL with *why set. */
static char *answer_text(const struct llm_settings *s, const cJSON *doc, double *in, double *out, char **why)
{
	const cJSON *usage = cJSON_GetObjectItemCaseSensitive(doc, "usage");
	*in = json_number(usage, s->api == LLM_CHAT ? "prompt_tokens" : "input_tokens", 0);
	*out = json_number(usage, s->api == LLM_CHAT ? "completion_tokens" : "output_tokens", 0);
	if (s->api == LLM_CHAT) {
		const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "choices"), 0);
		const cJSON *message = cJSON_GetObjectItemCaseSensitive(choice, "message");
		const char *content = json_string(message, "content"), *refusal = json_string(message, "refusal");
		if (content)
			return xstrdup(content);
		*why = refusal ? xasprintf("the model refused: %s", refusal)
			       : xstrdup("no choices[0].message.content in the response");
		return NULL;
	}
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
	const char *status = json_string(doc, "status");
	*why = xasprintf("no output_text in the response (status %s)", status ? status : "absent");
	return NULL;
}

/* The server's own words about an error: error.message of a JSON body, else its start. */
static char *server_message(const char *body)
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

/* ---------------------------------------------------------------- files */

/* The key never reaches a file: any echo of it (an error body quoting the header) is cut. */
static char *redacted(const struct llm_settings *s, char *text)
{
	if (!s->api_key || !*s->api_key)
		return text;
	size_t klen = strlen(s->api_key);
	char *at;
	while ((at = strstr(text, s->api_key)) != NULL) {
		char *out = xasprintf("%.*s[redacted]%s", (int)(at - text), text, at + klen);
		free(text);
		text = out;
	}
	return text;
}

static void write_redacted(const struct llm_settings *s, const char *path, const cJSON *doc, int line)
{
	char *text = cJSON_PrintUnformatted(doc);
	if (!text)
		xalloc_die();
	char *own = redacted(s, xasprintf("%s\n", text));
	cJSON_free(text);
	if ((line ? file_append(path, own, strlen(own)) : file_write_atomic(path, own, strlen(own))) != 0)
		log_warn("cannot write '%s':", path);
	free(own);
}

static char *cache_path(const struct call *c)
{
	return xasprintf("%s/%s.json", c->s->cache_dir, c->key);
}

/* Keeps the request, its answer and its cost in log_dir; one line per call in calls.jsonl. */
static void log_call(struct call *c, size_t index)
{
	const struct llm_settings *s = c->s;
	struct llm_request *r = c->req;
	if (!s->log_dir)
		return;
	if (dir_create(s->log_dir) != 0) {
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
	r->log_file = xasprintf("%s-%ld-%zu-%s.json", stamp, (long)getpid(), index, r->label);
	cJSON *doc = json_object();
	json_add_string(doc, "t", t);
	json_add_string(doc, "label", r->label);
	json_add_string(doc, "api", s->api == LLM_CHAT ? "chat" : "responses");
	json_add_string(doc, "url", c->url);
	cJSON *request = cJSON_Parse(c->body);
	json_add(doc, "request", request ? request : cJSON_CreateString(c->body));
	cJSON *response = c->response.len ? cJSON_Parse(c->response.buf) : NULL;
	json_add(doc, "response", response ? response : c->response.len ? cJSON_CreateString(c->response.buf) : cJSON_CreateNull());
	json_add_bool(doc, "ok", r->ok);
	json_add(doc, "error", r->error ? cJSON_CreateString(r->error) : cJSON_CreateNull());
	json_add_number(doc, "http_status", (double)r->http_status);
	json_add(doc, "attempts", cJSON_Duplicate(c->attempts, 1));
	json_add_bool(doc, "cached", r->cached);
	char *path = xasprintf("%s/%s", s->log_dir, r->log_file);
	write_redacted(s, path, doc, 0);
	free(path);

	cJSON *line = json_object();
	json_add_string(line, "t", t);
	json_add_string(line, "file", r->log_file);
	json_add_string(line, "label", r->label);
	json_add_string(line, "model", s->model);
	json_add_bool(line, "ok", r->ok);
	json_add_bool(line, "cached", r->cached);
	json_add_number(line, "http_status", (double)r->http_status);
	json_add_number(line, "attempts", r->attempts);
	json_add_number(line, "tokens_in", r->tokens_in);
	json_add_number(line, "tokens_out", r->tokens_out);
	json_add_number(line, "cost_usd", r->cost_usd);
	json_add_number(line, "ms", r->ms);
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
	char *text = redacted(c->s, strbuf_detach(&c->response));
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
				time_t when = curl_getdate(value, NULL);
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
	if (!c->easy && !(c->easy = curl_easy_init()))
		return -1;
	curl_easy_reset(c->easy);
	strbuf_reset(&c->response);
	c->too_large = 0;
	c->retry_after_s = NAN;
	c->errbuf[0] = '\0';
	long timeout_ms = (long)(s->timeout_s * 1000);
	if (curl_easy_setopt(c->easy, CURLOPT_URL, c->url) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, headers) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_HEADERDATA, c) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, c->errbuf) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_ACCEPT_ENCODING, "") != CURLE_OK ||
	    curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c) != CURLE_OK ||
	    curl_multi_add_handle(multi, c->easy) != CURLM_OK)
		return -1;
	c->running = 1;
	c->req->attempts++;
	c->started_ms = monotonic_ms();
	return 0;
}

/* Ends a request: its answer, or the error of its last attempt. */
static void finish(struct call *c, char *error)
{
	struct llm_request *r = c->req;
	c->done = 1;
	if (error) {
		r->error = redacted(c->s, error);
		return;
	}
	double in = 0, out = 0;
	char *why = NULL;
	cJSON *doc = cJSON_Parse(c->response.buf ? c->response.buf : "");
	r->text = doc ? answer_text(c->s, doc, &in, &out, &why) : NULL;
	cJSON_Delete(doc);
	if (!r->text) {
		r->error = redacted(c->s, why ? why : xstrdup("the response is not JSON"));
		return;
	}
	r->ok = 1;
	r->tokens_in = in;
	r->tokens_out = out;
	if (!r->cached)
		r->cost_usd = (in * c->s->price_in + out * c->s->price_out) / 1e6;
}

/* An attempt ended: keep its outcome, then finish or schedule the next attempt. */
static void attempt_done(struct call *c, CURLcode code, uint64_t *rng)
{
	const struct llm_settings *s = c->s;
	struct llm_request *r = c->req;
	long status = 0;
	curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
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
				: xasprintf("%s: %s", c->url, c->errbuf[0] ? c->errbuf : curl_easy_strerror(code));
		retryable = 1;
	} else if (status < 200 || status > 299) {
		char *message = server_message(c->response.buf ? c->response.buf : "");
		error = xasprintf("HTTP %ld from %s: %s", status, c->url, message);
		free(message);
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
	if (!retryable || r->attempts > s->retries) {
		char *full = xasprintf("%s (%d attempt%s)", error, r->attempts, r->attempts == 1 ? "" : "s");
		free(error);
		finish(c, full);
		return;
	}
	double wait_s;
	if (!isnan(c->retry_after_s)) {
		if (c->retry_after_s > s->retry_after_max_s) {
			char *full = xasprintf("%s; the server asks to wait %g s, more than --retry-after-max %g s (%d attempt%s)",
					       error, c->retry_after_s, s->retry_after_max_s, r->attempts, r->attempts == 1 ? "" : "s");
			free(error);
			finish(c, full);
			return;
		}
		wait_s = c->retry_after_s;
	} else {
		wait_s = fmin(s->backoff_max_s, s->backoff_s * pow(2, r->attempts - 1)) * (0.5 + 0.5 * rng_uniform(rng));
	}
	char *shown = redacted(s, error);
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
	c->req->cached = 1;
	finish(c, NULL);
	if (!c->req->ok) { /* a damaged entry: ask again */
		free(c->req->error);
		c->req->error = NULL;
		c->req->cached = c->done = 0;
		return 0;
	}
	return 1;
}

static void store_in_cache(const struct call *c)
{
	if (!c->s->cache_dir || !c->req->ok || c->req->cached)
		return;
	char *path = cache_path(c);
	if (dir_create(c->s->cache_dir) != 0 || file_write_atomic(path, c->response.buf, c->response.len) != 0)
		log_warn("cannot write '%s':", path);
	free(path);
}

static struct curl_slist *request_headers(const struct llm_settings *s)
{
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	if (s->api_key && *s->api_key) {
		char *auth = xasprintf("Authorization: Bearer %s", s->api_key);
		h = curl_slist_append(h, auth);
		explicit_bzero(auth, strlen(auth));
		free(auth);
	}
	return h;
}

size_t llm_run(const struct llm_settings *s, struct llm_request *reqs, size_t n)
{
	static int initialized;
	if (!initialized && curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK)
		initialized = 1;
	long calls, tokens;
	spent_so_far(s, &calls, &tokens);
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
		c->url = xasprintf("%.*s%s", (int)base_len, s->base_url, path);
		cJSON *body = request_body(s, &reqs[i]);
		c->body = cJSON_PrintUnformatted(body);
		cJSON_Delete(body);
		if (!c->body)
			xalloc_die();
		char *keyed = xasprintf("%s\n%s", c->url, c->body);
		sha256_hex(keyed, strlen(keyed), c->key);
		free(keyed);
		strbuf_init(&c->response);
		c->attempts = cJSON_CreateArray();
		c->retry_after_s = NAN;
		c->req->ms = monotonic_ms();
		if (from_cache(c))
			continue;
		if (s->max_calls > 0 && calls >= s->max_calls)
			finish(c, xasprintf("--max-calls %ld reached (%ld calls in %s/calls.jsonl)", s->max_calls, calls, s->log_dir));
		else if (s->max_tokens > 0 && tokens >= s->max_tokens)
			finish(c, xasprintf("--max-tokens %ld reached (%ld tokens in %s/calls.jsonl)", s->max_tokens, tokens, s->log_dir));
		else
			calls++; /* counted when it starts, so that a batch cannot overshoot the cap */
	}

	CURLM *multi = curl_multi_init();
	struct curl_slist *headers = request_headers(s);
	if (!multi || !headers)
		xalloc_die();
	for (;;) {
		double now = monotonic_ms(), next_due = INFINITY;
		size_t pending = 0;
		for (size_t i = 0; i < n; i++) {
			struct call *c = &calls_of[i];
			if (c->done || c->running)
				continue;
			if (c->due_ms <= now) {
				if (start_attempt(multi, c, headers) != 0)
					finish(c, xstrdup("libcurl could not set up the request"));
			} else {
				next_due = fmin(next_due, c->due_ms);
			}
		}
		int running = 0;
		curl_multi_perform(multi, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct call *c;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
			CURLcode code = msg->data.result;
			curl_multi_remove_handle(multi, c->easy);
			attempt_done(c, code, &rng);
			if (c->done) {
				store_in_cache(c);
			}
		}
		for (size_t i = 0; i < n; i++)
			pending += !calls_of[i].done;
		if (!pending)
			break;
		int wait_ms = 1000;
		if (isfinite(next_due))
			wait_ms = (int)fmax(0, fmin(1000, next_due - monotonic_ms()));
		curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
	}
	size_t failed = 0;
	for (size_t i = 0; i < n; i++) {
		struct call *c = &calls_of[i];
		c->req->ms = monotonic_ms() - c->req->ms;
		failed += !c->req->ok;
		log_call(c, i);
		if (c->easy)
			curl_easy_cleanup(c->easy);
		strbuf_release(&c->response);
		cJSON_Delete(c->attempts);
		cJSON_free(c->body);
		free(c->url);
	}
	curl_slist_free_all(headers);
	curl_multi_cleanup(multi);
	free(calls_of);
	return failed;
}

void llm_request_release(struct llm_request *r)
{
	free(r->text);
	free(r->error);
	free(r->log_file);
	r->text = r->error = r->log_file = NULL;
}
