/* llm.h: the one client of OpenAI-compatible endpoints (Chat Completions and Responses APIs),
 * on libcurl: requests run concurrently, retry with backoff, replay from a cache and are logged. */
#ifndef KG_LLM_H
#define KG_LLM_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

enum llm_api { LLM_CHAT, LLM_RESPONSES };

/* The largest response body kept: a longer one fails the request (not retried). An answer
 * of a few candidates, each a patch or source of at most KG_CANDIDATE_MAX_BYTES, fits. */
#define LLM_MAX_ANSWER_BYTES (4 << 20)

/* The environment variables llm_settings_from_env reads; kg-build, which never calls an
 * endpoint, removes them before it compiles anything. */
#define LLM_ENV_API_KEY "OPENAI_API_KEY"
#define LLM_ENV_BASE_URL "OPENAI_BASE_URL"

/* How the answer's shape is asked for: a JSON schema (strict structured output), any JSON
 * object, or nothing (the prompt alone; for endpoints that refuse response_format). */
enum llm_format { LLM_FORMAT_SCHEMA, LLM_FORMAT_JSON, LLM_FORMAT_NONE };

struct llm_settings {
	const char *base_url;	  /* ".../v1": the API paths are appended to it */
	const char *api_key;	  /* sent as a bearer token and written nowhere; NULL: no header */
	enum llm_api api;
	enum llm_format format;
	const char *model;
	double temperature;	  /* NAN: not sent (reasoning models accept only their default) */
	long max_output_tokens;	  /* 0: not sent */
	const char *reasoning_effort; /* NULL: not sent */
	double timeout_s;	  /* per attempt, connection included */
	int retries;		  /* further attempts after a 408, 409, 429, 5xx or network error */
	double backoff_s;	  /* the first wait; doubled at each retry, up to backoff_max_s */
	double backoff_max_s;
	double retry_after_max_s; /* a longer Retry-After ends the request instead */
	uint64_t jitter_seed;	  /* each wait is drawn in [0.5, 1) of its value from this */
	const char *log_dir;	  /* every request and response, and calls.jsonl; NULL: none
				   * (a run's llm/: not a link) */
	const char *cache_dir;	  /* answers keyed by the request; NULL: no cache. A run's
				   * llm/cache: neither it nor llm/ may be a link */
	int read_cache;		  /* 0: always call (the answer still refreshes the cache) */
	double price_in, price_out; /* USD per million input and output tokens */
	long max_calls;		  /* caps on what log_dir's calls.jsonl records; 0: none */
	long max_tokens;
};

/* A function the model may call before it answers. */
struct llm_function {
	const char *name;
	const char *description;
	const char *parameters; /* its arguments' JSON schema, as text: an object whose properties
				 * are all required, with no others (strict function calling) */
};

/* Function calling: Chat Completions' "tools", answered "tool_calls" and "role": "tool"
 * messages; the Responses API's "function_call" items and "function_call_output" inputs. A
 * request that asks for functions is a round: the calls are run, their results appended to
 * the conversation, and the next round sent, each round logged and cached as a request of its
 * own, so that a rerun with the same inputs is served by the cache round after round. */
struct llm_tools {
	const struct llm_function *functions;
	size_t nfunctions;
	/* Runs a call of one of the functions, arguments an object; returns its result (llm
	 * frees it). What the model got wrong (a bad argument) is a result too, that the model
	 * reads: "error: ...". Never called for an unknown function or arguments that are not a
	 * JSON object: the model is told so without it. */
	char *(*call)(void *ctx, const char *name, const cJSON *arguments);
	void *ctx;
	int max_rounds;		 /* rounds that may call functions; the one after must answer
				  * (it is sent with tool_choice "none") */
	size_t max_result_bytes; /* a longer result is cut, with a note saying so */
	size_t max_total_bytes;	 /* the results of one conversation, together; once reached,
				  * every further call is refused and the next round must answer */
};

/* One conversation to send. The caller fills the first block; llm_run fills the rest. */
struct llm_request {
	const char *label;	  /* names the request in logs and file names ("throughput") */
	const cJSON *messages;	  /* [{"role", "content"}, ...] */
	const cJSON *schema;	  /* the answer's JSON schema (with LLM_FORMAT_SCHEMA) */
	const char *schema_name;
	const struct llm_tools *tools; /* NULL: one request, no function calling */

	int ok;			  /* an answer came */
	char *text;		  /* the answer's text (ok) */
	int cut;		  /* the answer stopped at the output token limit (Chat's finish_reason
				   * "length", the Responses API's status "incomplete"): text is its start */
	char *error;		  /* why not (!ok): status, the server's message, attempts */
	long http_status;	  /* of the last attempt; 0 when none answered */
	long context_tokens;	  /* when the server refused the prompt as longer than its context:
				   * that context in tokens (llama-server's n_ctx; OpenAI's and vLLM's
				   * "maximum context length is N tokens"); else 0 */
	long refused_tokens;	  /* and the prompt's size it gave then (llama-server's n_prompt_tokens,
				   * OpenAI's "resulted in N tokens", vLLM's "you requested N tokens");
				   * else 0 */
	int attempts;		  /* made for this request (0 when served by the cache) */
	int cached;		  /* the answer came from the cache (every round of it) */
	int rounds;		  /* requests sent (1 without tools) */
	int function_calls;	  /* calls the model made, over every round */
	double tokens_in, tokens_out, cost_usd, ms; /* summed over the rounds */
	char *log_file;		  /* the stored request and response (of the last round), inside log_dir */
};

/* Sends every request at once and returns when each has an answer or has failed. Returns
 * the number that failed. Reports nothing itself beyond progress at debug level; the caller
 * reads each request's error. */
size_t llm_run(const struct llm_settings *s, struct llm_request *reqs, size_t n);

/* The API key's one redactor: returns text with every spelling of s->api_key replaced by
 * "[redacted]": the key itself, or with any of its characters JSON-escaped (\u0073, at any
 * depth of nesting: \\u0073). Takes text (freed when it is replaced) and returns the
 * caller's string. Base64 or other encodings of the key are not recognised. */
char *llm_redact(const struct llm_settings *s, char *text);
/* llm_redact on every string and member name of a parsed document, in place: run after each
 * parse of an answer, since parsing turns an escaped key into the key. */
void llm_redact_json(const struct llm_settings *s, cJSON *doc);

/* How many tokens text is for the endpoint's model, by the server's own tokenizer: its
 * /tokenize beside the API root (llama-server's, at base_url without its "/v1"). Returns -1
 * where the server has none, it does not answer within s's timeout (at most 30 s), or
 * libcurl cannot be loaded. */
long llm_count_tokens(const struct llm_settings *s, const char *text);

/* The context the endpoint's model has for a request (its prompt and answer together), in
 * tokens, as the server reports it in its model list (GET base_url/models): llama-server's
 * data[].meta.n_ctx (one slot's), vLLM's data[].max_model_len, of the entry naming s->model,
 * or of the only entry. Returns 0 where the server reports none, does not answer within s's
 * timeout (at most 30 s), or libcurl cannot be loaded. *said (the caller frees it) says where
 * the figure came from ("GET URL: data[0].meta.n_ctx"), or why there is none. */
long llm_server_context(const struct llm_settings *s, char **said);

/* Frees what llm_run put in a request. */
void llm_request_release(struct llm_request *r);

/* The settings every tool starts from: gpt-5-mini on Chat Completions with a strict schema,
 * 300 s per attempt, 4 retries waiting 1 s doubled up to 30 s, Retry-After up to 120 s, the
 * cache read, prices not yet known (NAN). */
void llm_settings_init(struct llm_settings *s);

/* The command-line options of the client, the same in every tool that calls an endpoint
 * (kg-propose, kg-relabel): their codes for getopt_long, above any tool's own; the entries of
 * a tool's option table (LLM_LONG_OPTIONS, with <getopt.h>); their lines of its --help, the
 * model's aside (kg-propose has -m for it); and their one parser, with one set of bounds. */
enum llm_option {
	LLM_OPT_API = 0x400, LLM_OPT_BASE_URL, LLM_OPT_MODEL, LLM_OPT_FORMAT, LLM_OPT_TEMPERATURE,
	LLM_OPT_MAX_OUTPUT_TOKENS, LLM_OPT_REASONING_EFFORT, LLM_OPT_TIMEOUT, LLM_OPT_RETRIES, LLM_OPT_BACKOFF,
	LLM_OPT_BACKOFF_MAX, LLM_OPT_RETRY_AFTER_MAX, LLM_OPT_NO_CACHE, LLM_OPT_MAX_CALLS, LLM_OPT_MAX_TOKENS,
	LLM_OPT_PRICE_IN, LLM_OPT_PRICE_OUT,
};
#define llm_is_option(opt) ((opt) >= LLM_OPT_API && (opt) <= LLM_OPT_PRICE_OUT)

#define LLM_LONG_OPTIONS                                                                           \
	{"api", required_argument, NULL, LLM_OPT_API},                                             \
	{"backoff", required_argument, NULL, LLM_OPT_BACKOFF},                                     \
	{"backoff-max", required_argument, NULL, LLM_OPT_BACKOFF_MAX},                             \
	{"base-url", required_argument, NULL, LLM_OPT_BASE_URL},                                   \
	{"format", required_argument, NULL, LLM_OPT_FORMAT},                                       \
	{"max-calls", required_argument, NULL, LLM_OPT_MAX_CALLS},                                 \
	{"max-output-tokens", required_argument, NULL, LLM_OPT_MAX_OUTPUT_TOKENS},                 \
	{"max-tokens", required_argument, NULL, LLM_OPT_MAX_TOKENS},                               \
	{"model", required_argument, NULL, LLM_OPT_MODEL},                                         \
	{"no-cache", no_argument, NULL, LLM_OPT_NO_CACHE},                                         \
	{"price-in", required_argument, NULL, LLM_OPT_PRICE_IN},                                   \
	{"price-out", required_argument, NULL, LLM_OPT_PRICE_OUT},                                 \
	{"reasoning-effort", required_argument, NULL, LLM_OPT_REASONING_EFFORT},                   \
	{"retries", required_argument, NULL, LLM_OPT_RETRIES},                                     \
	{"retry-after-max", required_argument, NULL, LLM_OPT_RETRY_AFTER_MAX},                     \
	{"temperature", required_argument, NULL, LLM_OPT_TEMPERATURE},                             \
	{"timeout", required_argument, NULL, LLM_OPT_TIMEOUT}

#define LLM_OPTIONS_HELP                                                                           \
	"      --api API           chat (Chat Completions, default) or responses (Responses API)\n"    \
	"      --base-url URL      the endpoint (default $OPENAI_BASE_URL, else https://api.openai.com/v1)\n" \
	"      --format F          schema (strict JSON schema, default), json (any JSON object) or none\n" \
	"      --temperature T     sampling temperature (default: not sent)\n"                          \
	"      --max-output-tokens N  per answer (default: not sent)\n"                               \
	"      --reasoning-effort E   minimal, low, medium or high (default: not sent)\n"             \
	"      --timeout S         seconds per request (default 300)\n"                                 \
	"      --retries N         further attempts after 408, 409, 429, 5xx and network errors (default 4)\n" \
	"      --backoff S         first wait between attempts (default 1; doubled each time, jittered)\n" \
	"      --backoff-max S     longest wait (default 30)\n"                                         \
	"      --retry-after-max S longest Retry-After honoured; a longer one ends the request (default 120)\n" \
	"      --no-cache          always call, even when RUN/llm/cache has the answer\n"             \
	"      --max-calls N       stop calling once RUN/llm/calls.jsonl records N calls (default: no cap)\n" \
	"      --max-tokens N      stop calling once it records N tokens (default: no cap)\n"          \
	"      --price-in USD      per million input tokens (default: the model's list price, else 0)\n" \
	"      --price-out USD     per million output tokens (likewise)\n"

/* Sets in s what LLM option opt says with its argument arg (borrowed: it must outlive s, as
 * argv does). Returns NULL, or why arg is refused ("--retries: '500' is not a whole number from
 * 0 to 100"), a usage error, in a string the caller frees. */
char *llm_option(struct llm_settings *s, int opt, const char *arg);

/* Completes s from the environment: api_key from OPENAI_API_KEY; base_url, unless given,
 * from OPENAI_BASE_URL, else OpenAI's; each price still NAN from llm_default_prices. Returns
 * 0, or -1 after reporting that OpenAI's endpoint needs a key (exit status 3). */
int llm_settings_from_env(struct llm_settings *s);

#endif
