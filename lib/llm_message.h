/* llm_message.h: the bodies and answers of lib/llm's requests (llm_message.c), for llm.c
 * alone: one call as llm_run carries it, what its request says, and what its answer holds. */
#ifndef KG_LLM_MESSAGE_H
#define KG_LLM_MESSAGE_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "llm.h"
#include "sha256.h"
#include "xalloc.h"

struct session;

/* What one request goes through, attempt after attempt and, with tools, round after round. */
struct call {
	struct llm_request *req;
	const struct llm_settings *s;
	struct session *session;
	size_t index;		/* in llm_run's batch: names its log files */
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

	/* Function calling (req->tools); without it, one round. */
	cJSON *conversation;	/* the messages, then each round's calls and their results */
	int round;		/* from 1 */
	int answered;		/* this round succeeded: with an answer, or with calls to run */
	int has_calls;		/* its answer asks for function calls */
	cJSON *ran;		/* for the round's log: {"id", "name", "arguments", "result"} of each */
	size_t tool_bytes;	/* of the results sent back so far */
	int cached_rounds;
	/* This round alone, for its log and calls.jsonl. */
	int round_attempts, round_cached;
	double round_in, round_out, round_cost, round_started_ms;
};
/* Whether the round about to be sent may call functions: within the rounds, and results left. */
int llm_may_call(const struct call *c);
/* The request body of c's round, in the API's form; the caller deletes it. */
cJSON *llm_request_body(const struct call *c);
/* The token counts of a response body doc, input and output. */
void llm_usage_of(const struct llm_settings *s, const cJSON *doc, double *in, double *out);
/* The answer's text and token counts from a response body doc, and whether the length cut it
 * (*cut). Returns the text (the caller frees it), or NULL with *why set. */
char *llm_answer_text(const struct llm_settings *s, const cJSON *doc, double *in, double *out, int *cut, char **why);
/* The server's own words about an error: error.message of a JSON body, else its start, on
 * one line; the caller frees it. */
char *llm_server_message(const char *body);
/* The context a server said a prompt overflowed, and the prompt's size, in tokens; 0 where
 * the body says none. */
void llm_context_of(const char *body, long *context, long *prompt);
/* The function calls a response doc asks for, as [{"id", "name", "arguments"}] (empty when
 * none); the caller deletes it. */
cJSON *llm_calls_asked(const struct llm_settings *s, const cJSON *doc);
/* Runs the calls doc asks for into c's conversation (and c->ran, for the round's log). */
void llm_run_calls(struct call *c, const cJSON *doc);

#endif
