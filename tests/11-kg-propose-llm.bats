#!/usr/bin/env bats
# 11-kg-propose-llm.bats: kg-propose's LLM experts against a mock OpenAI-compatible server on
# loopback (tests/tools/mock_llm.py): answers, extraction, corrections, retries, timeouts,
# parallel experts, the cache, spending caps, and the API key kept out of every file.

load test_helper

RUN=out/kernels/scale
KEY=sk-test-4f9a1c-secret

setup_file() {
	scale_run_template "$BATS_FILE_TMPDIR/template"
	(cd "$BATS_FILE_TMPDIR/template" && kg-select "$RUN" >pick.jsonl)
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	cp -r "$BATS_FILE_TMPDIR/template/out" "$BATS_FILE_TMPDIR/template/pick.jsonl" .
	export OPENAI_API_KEY=$KEY
}

teardown() {
	if [ -f mock.pid ]; then kill "$(cat mock.pid)" 2>/dev/null || true; fi
}

# mock SCRIPT-JSON: starts the mock server with these rules (ending the one before); OPENAI_BASE_URL points at it.
mock() {
	if [ -f mock.pid ]; then kill "$(cat mock.pid)" 2>/dev/null || true; fi
	echo "$1" > script.json
	rm -f port
	python3 "$TOOLS/mock_llm.py" script.json requests.jsonl port &
	echo $! > mock.pid
	for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
	export OPENAI_BASE_URL="http://127.0.0.1:$(cat port)/v1"
}

# answer [CONFIG-JSON]: an answer in the requested form, one candidate setting that config.
answer() {
	local c=${1:-}
	[ -n "$c" ] || c='{"block_size_x":256,"items_per_thread":2,"use_fma":true}'
	jq -cn --argjson c "$c" \
		'{candidates: [{think: "fewer blocks, more work each", method: "Thread coarsening", detail: "2 items per thread",
		  patch: null, source: null, config: $c, launch_update: null}]}'
}

# rule MATCH CONTENT [EXTRA-JSON]: a mock rule answering requests whose body contains MATCH.
rule() {
	local extra=${3:-}
	jq -cn --arg m "$1" --arg c "$2" --argjson x "${extra:-null}" '{match: $m, content: $c} + ($x // {})'
}

@test "a well-formed structured answer from each expert becomes a candidate; the request carries the prompt" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)"),
		$(rule 'role: memory' "$(answer '{"block_size_x":64,"items_per_thread":1,"use_fma":false}')"),
		$(rule 'role: robustness' "$(answer '{"block_size_x":128,"items_per_thread":4,"use_fma":false}')")]}"
	run_tool 0 kg-propose --llm pick.jsonl
	assert_stderr_empty
	[ "${#lines[@]}" -eq 3 ]
	jq -c '.candidate | [.id, .proposer, .method, .config]' <<<"$output" > got
	cat > want <<-'END'
	["c1-n0-1","llm:gpt-5-mini/throughput","Thread coarsening",{"block_size_x":256,"items_per_thread":2,"use_fma":true}]
	["c1-n0-2","llm:gpt-5-mini/memory","Thread coarsening",{"block_size_x":64,"items_per_thread":1,"use_fma":false}]
	["c1-n0-3","llm:gpt-5-mini/robustness","Thread coarsening",{"block_size_x":128,"items_per_thread":4,"use_fma":false}]
	END
	diff want got
	[ "$(jq -r '.candidate.think' <<<"${lines[0]}")" = "fewer blocks, more work each" ]
	# one request per expert, to the Chat Completions path, with the key as a bearer token
	[ "$(jq -r '[.path, .authorization] | join(" ")' requests.jsonl | sort -u)" = "/v1/chat/completions Bearer $KEY" ]
	[ "$(jq -s length requests.jsonl)" -eq 3 ]
	body=$(jq -c 'select(.body.messages[1].content | contains("role: memory")) | .body' requests.jsonl)
	[ "$(jq -r .model <<<"$body")" = gpt-5-mini ]
	[ "$(jq -c '[.response_format.type, .response_format.json_schema.name, .response_format.json_schema.strict]' <<<"$body")" = '["json_schema","candidates",true]' ]
	[ "$(jq -c '.response_format.json_schema.schema.properties.candidates.items.properties.config.anyOf[1].properties.block_size_x' <<<"$body")" = '{"enum":[64,128,256]}' ]
	[ "$(jq -r '.messages[0].role' <<<"$body")" = system ]
	prompt=$(jq -r '.messages[1].content' <<<"$body")
	for part in '## Kernel source (kernel.cu)' 'y[i] = scale_op(x[i]);' '- block_size_x: one of [64, 128, 256]; now 128' \
		'- block_size_x * items_per_thread <= 512' 'Current configuration: {"block_size_x":128,"items_per_thread":1,"use_fma":false}' \
		'- registers per thread: ' '- PTX instruction profile (static counts): ' '## Method catalog' '- enable_async_pipeline: ' \
		'## Your role: memory' '"candidates"'; do
		[[ "$prompt" == *"$part"* ]] || { echo "missing from the prompt: $part"; false; }
	done
	# every call is kept, with its tokens and cost
	[ "$(jq -c '[.label, .ok, .cached, .attempts, .http_status]' "$RUN/llm/calls.jsonl" | sort | tr -d '\n')" = \
		'["memory",true,false,1,200]["robustness",true,false,1,200]["throughput",true,false,1,200]' ]
	[ "$(jq -s 'map(.cost_usd > 0 and .tokens_in > 0) | all' "$RUN/llm/calls.jsonl")" = true ]
}

@test "JSON wrapped in prose or a code fence is extracted; values outside the space are dropped with the reason" {
	fenced=$'Here you go:\n```json\n'"$(answer)"$'\n```\nGood luck.'
	prose="I would try this: $(answer '{"block_size_x":64,"items_per_thread":1,"use_fma":false}') -- it should help."
	mock "{\"rules\": [$(rule 'role: throughput' "$fenced"), $(rule 'role: memory' "$prose"),
		$(rule 'role: robustness' "$(answer '{"block_size_x":512,"items_per_thread":1,"use_fma":false}')")]}"
	run_tool 0 kg-propose --llm pick.jsonl
	[ "$(jq -c '[.candidate.proposer, .candidate.config.block_size_x]' <<<"$output" | tr -d '\n')" = \
		'["llm:gpt-5-mini/throughput",256]["llm:gpt-5-mini/memory",64]' ]
	node=$(jq -r .node pick.jsonl)
	assert_stderr "kg-propose: warning: $RUN: node $node: llm:gpt-5-mini/robustness: Thread coarsening: dropped: block_size_x=512 (from the candidate) is not one of the Values of ConfigurationSpace.TuningParameters[0]"
}

@test "a malformed answer gets one corrective retry; a second malformed one is the expert's error" {
	mock "{\"rules\": [$(rule 'could not be used' "$(answer)"), $(rule 'role: throughput' 'I think {"candidates": [oops'),
		$(rule 'role: memory' '{"candidates": [{"method": "x"}]}'), $(rule 'role: robustness' 'no JSON here')]}"
	run_tool 0 kg-propose --llm --persona throughput pick.jsonl
	[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
	[ "$(jq -s length requests.jsonl)" -eq 2 ]
	second=$(jq -c 'select(.n == 2) | .body.messages' requests.jsonl)
	[ "$(jq -c 'map(.role)' <<<"$second")" = '["system","user","assistant","user"]' ]
	[ "$(jq -r '.[2].content' <<<"$second")" = 'I think {"candidates": [oops' ]
	[ "$(jq -r '.[3].content' <<<"$second")" = 'Your answer could not be used: no JSON object with "candidates" in the answer. Answer again with only one JSON object {"candidates": [...]} as specified, no prose and no code fences.' ]
	node=$(jq -r .node pick.jsonl)
	assert_stderr "kg-propose: warning: $RUN: node $node: throughput: malformed answer (no JSON object with \"candidates\" in the answer); asking once more"
	# an answer that parses but holds no usable candidate is corrected too, then given up
	echo '{"rules": [{"match": "role: memory", "content": "{\"candidates\": [{\"method\": \"x\"}]}"}]}' > script.json
	kill "$(cat mock.pid)"
	rm requests.jsonl
	mock "$(cat script.json)"
	run_tool 1 kg-propose --llm --persona memory pick.jsonl
	[ "$(jq -c '.propose | [.status, .errors[0].persona]' <<<"$output")" = '["error","memory"]' ]
	[[ "$(jq -r '.propose.errors[0].error' <<<"$output")" == "malformed answer after one correction: candidates[0]: changes nothing: no patch, source or config (see $RUN/llm/"*"-memory.json)" ]]
	[ "$(grep -c '"n"' requests.jsonl)" -eq 2 ]
}

@test "429 with Retry-After is honoured, then the answer comes" {
	mock "{\"rules\": [{\"match\": \"role: throughput\", \"times\": 1, \"status\": 429, \"headers\": {\"Retry-After\": \"1\"},
		\"body\": \"{\\\"error\\\": {\\\"message\\\": \\\"Rate limit reached\\\"}}\"}, $(rule 'role: throughput' "$(answer)")]}"
	run_tool 0 kg-propose --llm --persona throughput --backoff 0.01 pick.jsonl
	[ "$(jq -c .candidate.proposer <<<"$output")" = '"llm:gpt-5-mini/throughput"' ]
	[ "$(jq -s 'map(.status)' requests.jsonl | tr -d ' \n')" = '[429,200]' ]
	# the second request came a second after the first was refused, not 0.01 s
	jq -s -e '.[1].start - .[0].end >= 0.95' requests.jsonl
	[ "$(jq -c '.attempts' "$RUN/llm/calls.jsonl")" = 2 ]
	[ "$(jq -c '.attempts[0] | [.http_status, .retry_after_s]' "$RUN"/llm/*-throughput.json)" = '[429,1]' ]
}

@test "repeated 500s end in a clear error record and exit 1; client errors are not retried" {
	mock '{"rules": [{"match": "role: throughput", "status": 500, "body": "{\"error\": {\"message\": \"The server had an error\"}}"},
		{"match": "role: memory", "status": 401, "body": "{\"error\": {\"message\": \"Incorrect API key provided\"}}"}]}'
	run_tool 1 kg-propose --llm --persona throughput --persona memory --retries 2 --backoff 0.01 pick.jsonl
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -c 'del(.propose)' <<<"$output")" = "$(cat pick.jsonl)" ]
	url="$OPENAI_BASE_URL/chat/completions"
	[ "$(jq -c .propose <<<"$output")" = "$(jq -cn --arg u "$url" '{status: "error", dropped: 0, errors: [
		{persona: "throughput", error: ("HTTP 500 from " + $u + ": The server had an error (3 attempts)")},
		{persona: "memory", error: ("HTTP 401 from " + $u + ": Incorrect API key provided (1 attempt)")}]}')" ]
	node=$(jq -r .node pick.jsonl)
	assert_stderr "$(printf '%s\n' \
		"kg-propose: $RUN: node $node: expert throughput: HTTP 500 from $url: The server had an error (3 attempts)" \
		"kg-propose: $RUN: node $node: expert memory: HTTP 401 from $url: Incorrect API key provided (1 attempt)")"
	[ "$(jq -s 'map(.status) | sort' requests.jsonl | tr -d ' \n')" = '[401,500,500,500]' ]
}

@test "a slow server runs into the timeout; a dropped connection is a network error" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)" '{"delay": 5}'), {\"match\": \"role: memory\", \"close\": true}]}"
	run_tool 1 kg-propose --llm --persona throughput --persona memory --timeout 0.5 --retries 1 --backoff 0.01 pick.jsonl
	url="$OPENAI_BASE_URL/chat/completions"
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "no answer from $url within 0.5 s (--timeout) (2 attempts)" ]
	[[ "$(jq -r '.propose.errors[1].error' <<<"$output")" == "$url: "*"(2 attempts)" ]]
}

@test "libcurl that cannot be loaded fails each expert's request with the loader's reason, and nothing is sent" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	KG_LIBCURL_LIBRARY=/nonexistent/libcurl.so.4 run_tool 1 kg-propose --llm --persona throughput --retries 2 pick.jsonl
	[ "$(jq -c '.propose | [.status, (.errors | length)]' <<<"$output")" = '["error",1]' ]
	why="cannot load libcurl (KG_LIBCURL_LIBRARY): /nonexistent/libcurl.so.4: cannot open shared object file: No such file or directory"
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "$why" ]
	assert_stderr "kg-propose: $RUN: node $(jq -r .node pick.jsonl): expert throughput: $why"
	[ ! -s requests.jsonl ]
}

@test "the experts are asked at once: their requests overlap in time" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)" '{"delay": 1}'),
		$(rule 'role: memory' "$(answer '{"block_size_x":64,"items_per_thread":1,"use_fma":false}')" '{"delay": 1}'),
		$(rule 'role: robustness' "$(answer '{"block_size_x":128,"items_per_thread":4,"use_fma":false}')" '{"delay": 1}')]}"
	run_tool 0 kg-propose --llm pick.jsonl
	[ "${#lines[@]}" -eq 3 ]
	# every request had started before any had been answered
	jq -s -e '(map(.start) | max) < (map(.end) | min)' requests.jsonl
}

@test "the cache answers a repeated request without a call; --no-cache calls again" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	kg-propose --llm --persona throughput pick.jsonl > first.jsonl
	run_tool 0 kg-propose --llm --persona throughput pick.jsonl
	# the run has no new edge, so the same prompt: answered from RUN/llm/cache
	[ "$output" = "$(cat first.jsonl)" ]
	[ "$(jq -s length requests.jsonl)" -eq 1 ]
	[ "$(jq -c '[.cached, .attempts, .cost_usd > 0]' "$RUN/llm/calls.jsonl" | tr -d '\n')" = '[false,1,true][true,0,false]' ]
	ls "$RUN"/llm/cache/*.json
	run_tool 0 kg-propose --llm --persona throughput --no-cache pick.jsonl
	[ "$(jq -s length requests.jsonl)" -eq 2 ]
}

@test "--max-calls and --max-tokens stop calling once RUN/llm/calls.jsonl records that much" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)" '{"prompt_tokens": 900, "completion_tokens": 100}')]}"
	kg-propose --llm --persona throughput pick.jsonl > /dev/null
	run_tool 1 kg-propose --llm --persona throughput --no-cache --max-calls 1 pick.jsonl
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "--max-calls 1 reached (1 calls in $RUN/llm/calls.jsonl)" ]
	run_tool 1 kg-propose --llm --persona throughput --no-cache --max-tokens 1000 pick.jsonl
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "--max-tokens 1000 reached (1000 tokens in $RUN/llm/calls.jsonl)" ]
	[ "$(jq -s length requests.jsonl)" -eq 1 ]
	# the list price of the model unless given: 900 x 0.25 + 100 x 2.00 per million
	[ "$(head -1 "$RUN/llm/calls.jsonl" | jq .cost_usd)" = 0.000425 ]
}

@test "the API key is in no file written and no output, even when the server echoes it" {
	mock "{\"rules\": [{\"match\": \"role: throughput\", \"status\": 403, \"echo_auth\": true,
		\"body\": \"{\\\"error\\\": {\\\"message\\\": \\\"key {auth} is not allowed\\\"}}\"},
		$(rule 'role: memory' "$(answer) {auth}" '{"echo_auth": true}')]}"
	run_tool 0 kg-propose -vv --llm --persona throughput --persona memory pick.jsonl
	[[ "$stderr" == *"expert throughput: HTTP 403 from $OPENAI_BASE_URL/chat/completions: key Bearer [redacted] is not allowed (1 attempt)"* ]]
	[ "$(jq -r .candidate.proposer <<<"$output")" = llm:gpt-5-mini/memory ]
	said="$output$stderr"
	run ! grep -r -- "$KEY" out
	run ! grep -- "$KEY" <<<"$said"
	grep -rlF -- '[redacted]' "$RUN/llm" > /dev/null
}

@test "the key is cut from every field of an answer and from an error body before it is cut to 200 bytes" {
	keyed=$(jq -cn '{candidates: [{think: "think {auth}", method: "Tiling {auth}", detail: "detail {auth}", patch: null,
		source: "// {auth}\n", config: {block_size_x: 256, items_per_thread: 2, use_fma: true}, launch_update: null}]}')
	# not JSON: the message is the body's first 200 bytes, which end 15 bytes into the key
	cut="$(printf 'x%.0s' {1..178}){auth} after the key"
	mock "{\"rules\": [$(rule 'role: throughput' "$keyed" '{"echo_auth": true}'),
		$(jq -cn --arg b "$cut" '{match: "role: memory", status: 400, echo_auth: true, body: $b}')]}"
	run_tool 0 kg-propose -vv --llm --persona throughput --persona memory pick.jsonl
	[ "$(jq -c '.candidate | [.think, .method, .detail, .source]' <<<"$output")" = \
		'["think Bearer [redacted]","Tiling Bearer [redacted]","detail Bearer [redacted]","// Bearer [redacted]\n"]' ]
	url="$OPENAI_BASE_URL/chat/completions"
	[[ "$stderr" == *"expert memory: HTTP 400 from $url: $(printf 'x%.0s' {1..178})Bearer [redacted] afte (1 attempt)"* ]]
	proposed=$output
	said="$output$stderr"
	run ! grep -rF -- "${KEY:0:14}" out
	run ! grep -F -- "${KEY:0:14}" <<<"$said"
	grep -qF -- '[redacted]' "$RUN"/llm/cache/*.json
	# the method goes on to the catalog as a new method, named by the answer
	kg-relabel <<<"$proposed" > relabeled.jsonl
	[ "$(jq -r .method.label relabeled.jsonl)" = 'Tiling Bearer [redacted]' ]
	grep -qF -- 'Tiling Bearer [redacted]' out/methods.json
	run ! grep -rF -- "${KEY:0:14}" out relabeled.jsonl
}

@test "the key is cut after parsing too: escaped (\\u) in the answer's JSON or in the envelope, half escaped, split across parts" {
	# candidates' fields holding the key \u-escaped inside the answer, wholly or from half way
	fields() {
		jq -cn --arg a "$1" --argjson bx "${2:-256}" '{candidates: [{think: ("think " + $a), method: ("Tiling " + $a),
			detail: ("detail " + $a), patch: null, source: ("// " + $a + "\n"),
			config: {block_size_x: $bx, items_per_thread: 2, use_fma: true},
			launch_update: null}]}'
	}
	# the same escaped in the envelope the answer comes in (the first parse decodes it)
	envelope=$(jq -cn --arg c "$(fields '{auth}' 128)" '{id: "x", object: "chat.completion", model: "m",
		choices: [{index: 0, message: {role: "assistant", content: $c}, finish_reason: "stop"}],
		usage: {prompt_tokens: 1, completion_tokens: 1, total_tokens: 2}}' | sed 's/{auth}/{auth_u}/g')
	mock "{\"rules\": [$(rule 'role: throughput' "$(fields '{auth_u}')" '{"echo_auth": true}'),
		$(rule 'role: memory' "$(fields '{auth_half_u}' 64)" '{"echo_auth": true}'),
		$(jq -cn --arg b "$envelope" '{match: "role: robustness", echo_auth: true, body: $b}')]}"
	run_tool 0 kg-propose --llm pick.jsonl
	[ "$(jq -c '.candidate | [.think, .method, .detail, .source]' <<<"$output" | sort -u)" = \
		'["think Bearer [redacted]","Tiling Bearer [redacted]","detail Bearer [redacted]","// Bearer [redacted]\n"]' ]
	[ "$(wc -l <<<"$output")" -eq 3 ]
	proposed=$output
	kg-relabel <<<"$proposed" > relabeled.jsonl
	grep -qF -- 'Tiling Bearer [redacted]' out/methods.json
	# the Responses API's output_text parts, joined by the client, with the key across two
	mock "{\"rules\": [$(rule 'role: latency' "$(fields "${KEY:0:9}{split}${KEY:9}")")]}"
	printf 'You are the latency expert.\n' > latency.txt
	run_tool 0 kg-propose --llm --api responses --persona latency.txt pick.jsonl
	[ "$(jq -c '.candidate | [.think, .method]' <<<"$output")" = '["think [redacted]","Tiling [redacted]"]' ]
	said="$proposed$output$stderr"
	run ! grep -F -- "$KEY" <<<"$said"
	run ! grep -rF -- "$KEY" out relabeled.jsonl
}

@test "a link planted as the run's llm folder is refused: nothing is logged or cached where it points" {
	mkdir elsewhere
	ln -s ../../../elsewhere "$RUN/llm"
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	run_tool 0 kg-propose --llm --persona throughput pick.jsonl
	[ "$(jq -r .candidate.proposer <<<"$output")" = llm:gpt-5-mini/throughput ]
	[[ "$stderr" == *"cannot create '$RUN/llm': Too many levels of symbolic links"* ]]
	[ -z "$(ls -A elsewhere)" ]
}

@test "a cache entry written before the key was cut from answers is served without it" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer | sed 's/Thread coarsening/{auth}/')" '{"echo_auth": true}')]}"
	kg-propose --llm --persona throughput pick.jsonl > /dev/null
	sed -i "s/\[redacted\]/$KEY/g" "$RUN"/llm/cache/*.json
	grep -qF -- "$KEY" "$RUN"/llm/cache/*.json
	run_tool 0 kg-propose --llm --persona throughput --max-calls 1 pick.jsonl
	[ "$(jq -c '.cached' "$RUN/llm/calls.jsonl" | tr -d '\n')" = falsetrue ]
	[ "$(jq -r .candidate.method <<<"$output")" = 'Bearer [redacted]' ]
	run ! grep -rF -- "$KEY" "$RUN/llm/calls.jsonl" "$RUN"/llm/*-throughput.json
	run ! grep -F -- "$KEY" <<<"$output$stderr"
}

@test "a candidate whose patch or source is over 1 MiB is not usable: the model is asked once more, then it is the expert's error" {
	jq -cn '{rules: [{match: "role: throughput", content: ({candidates: [{think: "t", method: "Huge", detail: "d",
		patch: null, source: ("// " + "x" * 1048576), config: null, launch_update: null}]} | tojson)}]}' > big.json
	mock "$(cat big.json)"
	run_tool 1 kg-propose --llm --persona throughput pick.jsonl
	[[ "$(jq -r '.propose.errors[0].error' <<<"$output")" == "malformed answer after one correction: candidates[0]: source: larger than 1 MiB, the most a source may have (see $RUN/llm/"*"-throughput.json)" ]]
	[ "$(jq -s length requests.jsonl)" -eq 2 ]
}

@test "an answer larger than 4 MiB is refused, kept nowhere, and not asked again" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)" '{"pad": 4194304}')]}"
	run_tool 1 kg-propose --llm --persona throughput --retries 2 pick.jsonl
	url="$OPENAI_BASE_URL/chat/completions"
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "the answer from $url is larger than 4 MiB, the limit of an answer (1 attempt)" ]
	[ "$(jq -s length requests.jsonl)" -eq 1 ]
	[ ! -e "$RUN/llm/cache" ] || [ -z "$(ls "$RUN/llm/cache")" ]
	[ "$(jq -c .response "$RUN"/llm/*-throughput.json)" = null ]
	[ "$(stat -c %s "$RUN"/llm/*-throughput.json)" -lt 100000 ]
}

@test "the Responses API, a custom persona from a prompt file, and --llm without a key or endpoint" {
	printf 'You are the latency expert. Cut the critical path.\n' > latency.txt
	mock "{\"rules\": [$(rule 'role: latency' "$(answer)")]}"
	run_tool 0 kg-propose --llm --api responses --persona latency.txt --model gpt-5 pick.jsonl
	[ "$(jq -c .candidate.proposer <<<"$output")" = '"llm:gpt-5/latency"' ]
	[ "$(jq -r .path requests.jsonl)" = /v1/responses ]
	[ "$(jq -c '.body | [.model, .input[0].role, .text.format.type, .text.format.name, .text.format.strict]' requests.jsonl)" = \
		'["gpt-5","system","json_schema","candidates",true]' ]
	[[ "$(jq -r '.body.input[1].content' requests.jsonl)" == *$'## Your role: latency\nYou are the latency expert.'* ]]
	run_tool 3 env -u OPENAI_API_KEY -u OPENAI_BASE_URL kg-propose --llm pick.jsonl
	assert_stderr "kg-propose: --llm needs OPENAI_API_KEY (or OPENAI_BASE_URL, for a local server that needs no key)"
	# a local server needs no key: no Authorization header is sent
	run_tool 0 env -u OPENAI_API_KEY kg-propose --llm --api responses --persona latency.txt --no-cache pick.jsonl
	[ "$(jq -r 'select(.n == 2) | .authorization' requests.jsonl)" = null ]
}

@test "--regraph: an edge without success_mean has the Beta prior's mean, as kg-regraph and kg-select read it" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	run_tool 0 kg-propose --llm --persona throughput --regraph "$FIXTURES/regraph/no-success-mean.json" pick.jsonl
	assert_stderr_empty
	prompt=$(jq -r '.body.messages[1].content' requests.jsonl)
	# alpha0 1, beta0 3: tile's success rate is 0.25, so vec (0.2 x 0.9) comes first
	[[ "$prompt" == *$'(ReGraph)\n- vec: probability 0.2, success rate 0.9, 2 transitions, mean reward 0.3\n- tile: probability 0.6, success rate 0.25, 6 transitions, mean reward 0.1\n'* ]]
}

@test "--regraph-filter keeps only candidates whose method the ReGraph allows after the last one" {
	jq -cn '{version: 1, nodes: [], edges: [
		{from: "init", to: "vectorize_global_loads", count: 4, probability: 0.6, success_mean: 0.7, mean_reward: 0.3},
		{from: "init", to: "cache_policy_cg", count: 1, probability: 0.2, success_mean: 0.5, mean_reward: 0.1},
		{from: "tile", to: "change_block_sizes", count: 9, probability: 0.9, success_mean: 0.9, mean_reward: 0.5}]}' > out/regraph.json
	two=$(jq -cn '{candidates: [
		{think: "t", method: "Vectorized loads", detail: "float4", patch: null, source: null,
		 config: {block_size_x: 64, items_per_thread: 1, use_fma: false}, launch_update: null},
		{think: "t", method: "Thread coarsening", detail: "more per thread", patch: null, source: null,
		 config: {block_size_x: 128, items_per_thread: 2, use_fma: false}, launch_update: null}]}')
	mock "{\"rules\": [$(rule 'role: throughput' "$two")]}"
	run_tool 0 kg-propose --llm --persona throughput --regraph-filter pick.jsonl
	[ "$(jq -c '.candidate.method' <<<"$output")" = '"Vectorized loads"' ]
	node=$(jq -r .node pick.jsonl)
	assert_stderr "kg-propose: warning: $RUN: node $node: llm:gpt-5-mini/throughput: Thread coarsening: dropped: its method change_work_per_thread is not one the ReGraph allows next (--regraph-filter: vectorize_global_loads cache_policy_cg)"
	prompt=$(jq -r '.body.messages[1].content' requests.jsonl)
	[[ "$prompt" == *$'## What worked next after "init" in earlier searches (ReGraph)\n- vectorize_global_loads: probability 0.6, success rate 0.7, 4 transitions, mean reward 0.3\n- cache_policy_cg: '* ]]
	[[ "$prompt" == *"Choose each candidate's \"method\" among these; others are dropped (--regraph-filter)."* ]]
	# --regraph-top 1 allows the most promising alone; a method the ReGraph never left is not filtered
	run_tool 0 kg-propose --llm --persona throughput --regraph-filter --regraph-top 1 pick.jsonl
	[[ "$stderr" == *"(--regraph-filter: vectorize_global_loads)"* ]]
	jq -c '.last_method = "unroll"' pick.jsonl > other.jsonl
	run_tool 0 kg-propose --llm --persona throughput --regraph-filter -v other.jsonl
	[ "${#lines[@]}" -eq 2 ]
	[[ "$stderr" == *"out/regraph.json: no transition out of 'unroll' in the ReGraph: every method is allowed"* ]]
}

# call_id N K: the id the mock gives the K-th function call (from 0) of its N-th request: 32
# letters and digits, as llama-server's (the Responses API's call_id is "call_" and it).
call_id() {
	local head="R$1C$2x"
	printf '%s%0*d' "$head" $((32 - ${#head})) 0
}

# calls RULE-MATCH CALLS-JSON: a mock rule answering once with these function calls.
calls() {
	jq -cn --argjson m "$1" --argjson c "$2" '{match: $m, times: 1, tool_calls: $c}'
}

# variant: the picked node's variant directory.
variant() {
	echo "$RUN/variants/$(jq -r .node pick.jsonl)"
}

# An illustration of kg-bench --metrics' metrics.json, written by hand.
METRICS='{"status":"ok","source":"cupti-range-profiler","device":"NVIDIA H100 80GB HBM3","cost_ms":41,
	"values":{"dram_throughput_pct":91.5,"sm_throughput_pct":12.25,"achieved_occupancy_pct":88,
	"occupancy_limiter":"threads","stalls":{"long_scoreboard":61.5,"barrier":0,"wait":12}},
	"unavailable":{"l1_hit_rate_pct":"not supported by this CUPTI"}}'

@test "the prompt has the variant's regions with their kernel.cu lines, and its metrics only when measured" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	run_tool 0 kg-propose --llm --persona throughput pick.jsonl
	prompt=$(jq -r '.body.messages[1].content' requests.jsonl)
	# one region: the load and the store of line 10 (scale_op, inlined from the header, counts
	# as line 10), the bounds check's branch of line 9
	[[ "$prompt" == *"$(printf '%s\n' '' '## Regions of the PTX (regions.json: static counts per thread, a loop body counted once)' \
		'Regions 1, stages 1, loops 0, barriers 0, async waits 0. The heaviest (bytes and FLOPs, weighted by loop depth), in program order:' \
		'- region 0 (stage 0, loop depth 0; kernel.cu lines 5, 7, 9-11): global loads 4 B, global stores 4 B, FLOPs 2, predicated branches 1; ends at end' \
		'' '## History')"* ]]
	[[ "$prompt" != *"## Hardware metrics"* ]]
	[[ "$prompt" != *"## Functions"* ]]
	echo "$METRICS" > "$(variant)/metrics.json"
	run_tool 0 kg-propose --llm --persona throughput pick.jsonl
	prompt=$(jq -r 'select(.n == 2) | .body.messages[1].content' requests.jsonl)
	[[ "$prompt" == *"$(printf '%s\n' \
		'## Hardware metrics of this variant (cupti-range-profiler)' '- DRAM throughput: 91.5 % of peak' \
		'- SM throughput: 12.25 % of peak' '- achieved occupancy: 88 %' '- occupancy limited by: threads' \
		'- warp stall reasons (share of stalls): long_scoreboard 61.5 %, wait 12 %, barrier 0 %' \
		'- unavailable (not measured; do not assume): l1_hit_rate_pct')"* ]]
	# metrics that could not be collected say why, and nothing else
	echo '{"status":"unavailable","why":"CUPTI: insufficient privileges (ERR_NVGPUCTRPERM)"}' > "$(variant)/metrics.json"
	run_tool 0 kg-propose --llm --persona throughput pick.jsonl
	prompt=$(jq -r 'select(.n == 3) | .body.messages[1].content' requests.jsonl)
	[[ "$prompt" == *$'## Hardware metrics of this variant (kg-bench --metrics)\n- not collected: CUPTI: insufficient privileges (ERR_NVGPUCTRPERM)\n\n## History'* ]]
	# a malformed file is reported, naming it, and shows nothing; arrays where objects belong show no values
	echo '{"status": "ok", "values": ' > "$(variant)/metrics.json"
	run_tool 0 kg-propose --llm --persona throughput --no-cache pick.jsonl
	assert_stderr "kg-propose: $(variant)/metrics.json:1:28: invalid JSON"
	prompt=$(jq -r 'select(.n == 4) | .body.messages[1].content' requests.jsonl)
	[[ "$prompt" != *"## Hardware metrics"* ]]
	echo '{"status": "ok", "values": [1, 2], "unavailable": ["x"]}' > "$(variant)/metrics.json"
	run_tool 0 kg-propose --llm --persona throughput pick.jsonl
	prompt=$(jq -r 'select(.n == 5) | .body.messages[1].content' requests.jsonl)
	[[ "$prompt" == *$'## Hardware metrics of this variant (kg-bench --metrics)\n\n## History'* ]]
}

@test "--tool-rounds: two rounds of function calls, then the answer; each function's result goes back to the model" {
	echo "$METRICS" > "$(variant)/metrics.json"
	mock "{\"rules\": [$(calls '"role: throughput"' '[{"name": "source_lines", "arguments": {"start": 9, "end": 11}},
			{"name": "region_detail", "arguments": {"id": 0}}]'),
		$(calls '["R1C0x", "R1C1x"]' '[{"name": "metrics", "arguments": {"names": ["dram_throughput_pct", "l1_hit_rate_pct", "stalls", "bogus"]}},
			{"name": "ptx_for_lines", "arguments": {"start": 10, "end": 10}}]'),
		$(rule 'R2C1x' "$(answer)")]}"
	run_tool 0 kg-propose --llm --persona throughput --tool-rounds 3 -v pick.jsonl
	[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
	[[ "$stderr" == *"throughput answered in "*" ms (3 rounds, 4 function calls, "* ]]
	[ "$(jq -s length requests.jsonl)" -eq 3 ]
	# the functions are offered in every round, and the prompt says so; a round that may call
	# asks for no answer format (llama-server's grammar would then forbid the calls: the mock
	# answers such a request with content, as the server does)
	[ "$(jq -c '.body.response_format' requests.jsonl | sort -u)" = null ]
	[ "$(jq -c '.body | [.tool_choice, (.tools | map(.type + ":" + .function.name + ":" + (.function.strict | tostring)))]' requests.jsonl | sort -u)" = \
		'["auto",["function:metrics:true","function:region_detail:true","function:source_lines:true","function:ptx_for_lines:true"]]' ]
	[[ "$(jq -r 'select(.n == 1) | .body.messages[1].content' requests.jsonl)" == *$'## Functions\nBefore you answer, you may call functions to look closer at this variant (at most 3 rounds of calls)'* ]]
	# the third request: the conversation with both rounds' calls and results
	last=$(jq -c 'select(.n == 3) | .body.messages' requests.jsonl)
	[ "$(jq -c 'map(.role)' <<<"$last")" = '["system","user","assistant","tool","tool","assistant","tool","tool"]' ]
	[ "$(jq -c '[.[2].content, (.[2].tool_calls | map(.id + " " + .function.name + " " + .function.arguments))]' <<<"$last")" = \
		"$(jq -cn --arg a "$(call_id 1 0)" --arg b "$(call_id 1 1)" '["", [$a + " source_lines {\"start\": 9, \"end\": 11}", $b + " region_detail {\"id\": 0}"]]')" ]
	[ "$(jq -r '.[3, 4, 6, 7].tool_call_id' <<<"$last" | tr '\n' ' ')" = "$(call_id 1 0) $(call_id 1 1) $(call_id 2 0) $(call_id 2 1) " ]
	[[ "$(call_id 1 0)" =~ ^[A-Za-z0-9]{32}$ ]] # as llama-server's: not call_...
	# source_lines: numbered
	[ "$(jq -r '.[3].content' <<<"$last")" = "$(printf '%s\n' '   9  		if (i < n)' '  10  			y[i] = scale_op(x[i]);' '  11  }')" ]
	# region_detail: the region of regions.json with its edges and loops
	[ "$(jq -r '.[4].content' <<<"$last" | jq -cS .)" = \
		"$(jq -cS '.regions[0] + {next: [.edges[] | select(.from == 0 and .kind == "next") | .to], loops_back_to: [],
			in_loops: [.loops[] | select(.regions | index(0)) | .id]}' "$(variant)/regions.json")" ]
	# metrics: what was asked, the unavailable ones and unknown names said so, with the names there are
	[ "$(jq -r '.[6].content' <<<"$last")" = '{"status":"ok","source":"cupti-range-profiler","device":"NVIDIA H100 80GB HBM3","values":{"dram_throughput_pct":91.5,"stalls":{"long_scoreboard":61.5,"barrier":0,"wait":12}},"unavailable":{"l1_hit_rate_pct":"not supported by this CUPTI","bogus":"not a metric of metrics.json"},"metrics":["dram_throughput_pct","sm_throughput_pct","achieved_occupancy_pct","occupancy_limiter","stalls","l1_hit_rate_pct"]}' ]
	# ptx_for_lines: the PTX compiled from line 10, as lib/ptx_lines maps it, each with its lines
	ptx="$(variant)/kernel.ptx"
	result=$(jq -r '.[7].content' <<<"$last")
	[ "$(head -1 <<<"$result")" = 'kernel.ptx line, kernel.cu line, PTX (kernel.cu lines 10 to 10):' ]
	"$LIBTEST" ptx-lines "$ptx" 10 10 | jq -r '.lines[] | "\(.[0]) \(.[1])"' > want
	tail -n +2 <<<"$result" | awk '{print $1, $2}' > got
	diff want got
	[ "$(wc -l < got)" -ge 3 ]
	tail -n +2 <<<"$result" | while read -r n line text; do [ "$(sed -n "${n}p" "$ptx" | sed 's/^[ \t]*//')" = "$text" ]; done
	grep -q 'ld.global' <<<"$result"
	grep -q 'st.global' <<<"$result"
	grep -q 'add.f32\|fma.rn.f32\|mul' <<<"$result"
}

@test "--tool-rounds: bad calls get an error back as their result, not a crash; results are cut to --tool-result-bytes" {
	mock "{\"rules\": [$(calls '"role: throughput"' '[{"name": "disassemble", "arguments": {}},
			{"name": "source_lines", "arguments": "{\"start\": 1,"},
			{"name": "source_lines", "arguments": {"start": 0, "end": 4}},
			{"name": "source_lines", "arguments": {"start": 9, "end": 99}},
			{"name": "region_detail", "arguments": {"id": 7}},
			{"name": "region_detail", "arguments": {"id": "first"}},
			{"name": "metrics", "arguments": {"names": ["dram_throughput_pct"]}},
			{"name": "ptx_for_lines", "arguments": {"start": 1, "end": 4}},
			{"name": "ptx_for_lines", "arguments": {"start": 1, "end": 11}}]'),
		$(rule 'R1C8x' "$(answer)")]}"
	run_tool 0 kg-propose --llm --persona throughput --tool-rounds 1 --tool-result-bytes 200 pick.jsonl
	[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
	jq -r 'select(.n == 2) | .body.messages[] | select(.role == "tool") | .content' requests.jsonl > got
	cat > want <<-'END'
	error: there is no function 'disassemble'; the functions are metrics, region_detail, source_lines, ptx_for_lines
	error: the arguments of source_lines are not a JSON object: {"start": 1,
	error: lines 0 to 4 are not a range of kernel.cu, whose lines are 1 to 11
	   9  		if (i < n)
	  10  			y[i] = scale_op(x[i]);
	  11  }

	error: there is no region 7; the regions are 0 to 0
	error: id must be a whole number
	{"status":"unavailable","why":"no hardware metrics were collected for this variant (kg-bench --metrics writes variants/STATE/metrics.json)"}
	no PTX instruction comes from kernel.cu lines 1 to 4
	END
	head -n "$(wc -l < want)" got | diff want -
	# the last result is longer than 200 bytes: cut at a line's end, with a note
	tail -n +"$(($(wc -l < want) + 2))" got > cut
	[ "$(head -1 cut)" = 'kernel.ptx line, kernel.cu line, PTX (kernel.cu lines 1 to 11):' ]
	[[ "$(tail -1 cut)" =~ ^\[cut:\ the\ first\ [0-9]+\ of\ [0-9]+\ bytes\;\ ask\ for\ less\]$ ]]
	[ "$(head -n -1 cut | wc -c)" -le 201 ]
}

@test "--tool-rounds: the round after the last must answer (tool_choice none); calls there are the expert's error" {
	mock "{\"rules\": [$(calls '"role: throughput"' '[{"name": "source_lines", "arguments": {"start": 1, "end": 2}}]'),
		$(jq -cn '{match: ["R1C0x", "\"tool_choice\":\"none\""], times: 1, ignore_format: true,
			tool_calls: [{name: "source_lines", arguments: {start: 3, end: 4}}]}')]}"
	run_tool 1 kg-propose --llm --persona throughput --tool-rounds 1 pick.jsonl
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = 'the model still called functions in round 2, after the 1 round that may' ]
	[ "$(jq -c '.body.tool_choice' requests.jsonl | tr -d '\n')" = '"auto""none"' ]
	# a conversation whose results reach --tool-total-bytes is refused further calls and must answer
	rm requests.jsonl
	kill "$(cat mock.pid)"
	mock "{\"rules\": [$(calls '"role: throughput"' '[{"name": "source_lines", "arguments": {"start": 1, "end": 11}},
			{"name": "source_lines", "arguments": {"start": 1, "end": 2}}]'),
		$(jq -cn --argjson a "$(answer)" '{match: ["R1C1x", "\"tool_choice\":\"none\""], times: 1, content: ($a | tojson)}')]}"
	run_tool 0 kg-propose --llm --persona throughput --tool-rounds 4 --tool-total-bytes 200 pick.jsonl
	[ "$(jq -r 'select(.n == 2) | .body.messages[-1].content' requests.jsonl)" = \
		'error: the results of this conversation reached their limit (200 bytes): this call and the 0 after it were not run; answer now with what you have' ]
}

@test "--tool-total-bytes bounds what goes back: 25,000 calls in one answer get one short refusal, not 25,000 (Chat; Responses)" {
	# (25,000 calls with llama-server's 32-character ids, and 15,000 of the Responses API's larger items, stay
	# within the 4 MiB of an answer)
	for api in chat:25000 responses:15000; do
		jq -cn --argjson a "$(answer)" --argjson n "${api#*:}" '{rules: [{match: "role: throughput", times: 1,
			tool_calls: [range($n) | {name: "source_lines", arguments: {start: 1, end: 2}}]},
			{match: "R1C", content: ($a | tojson)}]}' > many.json
		api=${api%:*}
		rm -f requests.jsonl
		mock "$(cat many.json)"
		run_tool 0 kg-propose --llm --api $api --no-cache --persona throughput --tool-rounds 4 --tool-total-bytes 2000 pick.jsonl
		[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
		first=$(jq -c 'select(.n == 1) | .body' requests.jsonl | wc -c)
		second=$(jq -c 'select(.n == 2) | .body' requests.jsonl | wc -c)
		# the conversation grew by the limit and a fixed margin (8 MB when every call went back)
		[ $((second - first)) -le $((2000 + 1500)) ]
		if [ $api = chat ]; then
			msgs=$(jq -c 'select(.n == 2) | .body.messages' requests.jsonl)
			# every call sent back has its result; the last kept is the refusal, for it and all after it
			[ "$(jq '[.[] | select(.role == "tool")] | length' <<<"$msgs")" = "$(jq '.[2].tool_calls | length' <<<"$msgs")" ]
			[[ "$(jq -r '.[-1].content' <<<"$msgs")" =~ ^error:\ the\ results\ of\ this\ conversation\ reached\ their\ limit\ \(2000\ bytes\):\ this\ call\ and\ the\ [0-9]+\ after\ it\ were\ not\ run ]]
		else
			input=$(jq -c 'select(.n == 2) | .body.input' requests.jsonl)
			[ "$(jq '[.[] | select(.type == "function_call")] | length' <<<"$input")" = "$(jq '[.[] | select(.type == "function_call_output")] | length' <<<"$input")" ]
		fi
	done
}

# An illustration of kg-bench --metrics' lines.json, written by hand.
LINES='{"status":"ok","source":"cupti-pc-sampling","sampling_period_cycles":512,"launches":1,"samples":1000,
	"dropped":0,"unmapped":50,"cost_ms":420,"lines":[{"line":9,"samples":100,"share_pct":10,"stalls":{"branch_resolving":100}},
	{"line":10,"samples":800,"share_pct":80,"stalls":{"long_scoreboard":700,"selected":100}},
	{"line":11,"samples":50,"share_pct":5,"stalls":{}}]}'

@test "lines.json: the hottest kernel.cu lines in the prompt, each line's share beside it in source_lines" {
	echo "$METRICS" > "$(variant)/metrics.json"
	echo "$LINES" > "$(variant)/lines.json"
	mock "{\"rules\": [$(calls '"role: throughput"' '[{"name": "source_lines", "arguments": {"start": 8, "end": 10}}]'),
		$(rule 'R1C0x' "$(answer)")]}"
	run_tool 0 kg-propose --llm --persona throughput --tool-rounds 1 pick.jsonl
	prompt=$(jq -r 'select(.n == 1) | .body.messages[1].content' requests.jsonl)
	[[ "$prompt" == *"$(printf '%s\n' '- warp stall reasons (share of stalls): long_scoreboard 61.5 %, wait 12 %, barrier 0 %' \
		'- hottest kernel.cu lines (share of PC samples, top stall): line 10 80 % (long_scoreboard), line 9 10 % (branch_resolving), line 11 5 %' \
		'- unavailable (not measured; do not assume): l1_hit_rate_pct')"* ]]
	[ "$(jq -r '.[0].result' <<<"$(jq -c '.function_calls' "$RUN"/llm/*-throughput-round1.json)")" = "$(printf '%s\n' \
		'line, share of the PC samples (lines.json) and top stall, source:' \
		"   8                             $(sed -n 8p "$(variant)/kernel.cu")" \
		"   9   10.0 % branch_resolving    $(sed -n 9p "$(variant)/kernel.cu")" \
		"  10   80.0 % long_scoreboard     $(sed -n 10p "$(variant)/kernel.cu")")" ]
	# sampling that failed: neither
	echo '{"status":"unavailable","why":"cuptiPCSamplingEnable: CUPTI_ERROR_NOT_SUPPORTED","source":"cupti-pc-sampling"}' > "$(variant)/lines.json"
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	run_tool 0 kg-propose --llm --persona throughput pick.jsonl
	prompt=$(jq -rs '.[-1].body.messages[1].content' requests.jsonl)
	[[ "$prompt" == *"- warp stall reasons"* && "$prompt" != *"hottest kernel.cu lines"* ]]
}

@test "--tool-rounds: every round is logged and cached; a rerun is answered by the cache round after round" {
	mock "{\"rules\": [$(calls '"role: throughput"' '[{"name": "source_lines", "arguments": {"start": 10, "end": 10}}]'),
		$(calls '"R1C0x"' '[{"name": "region_detail", "arguments": {"id": 0}}]'),
		$(rule 'R2C0x' "$(answer)")]}"
	kg-propose --llm --persona throughput --tool-rounds 2 pick.jsonl > first.jsonl
	[ "$(jq -c '[.label, .round, .function_calls, .ok, .cached, .attempts]' "$RUN/llm/calls.jsonl" | tr -d '\n')" = \
		'["throughput",1,1,true,false,1]["throughput",2,1,true,false,1]["throughput",3,0,true,false,1]' ]
	ls "$RUN"/llm/*-throughput-round{1,2,3}.json
	[ "$(jq -c '[.round, .function_calls[0].name, .function_calls[0].result]' "$RUN"/llm/*-throughput-round1.json)" = \
		'[1,"source_lines","  10  \t\t\ty[i] = scale_op(x[i]);\n"]' ]
	[ "$(jq -c '.response.choices[0].message.tool_calls[0].function.name' "$RUN"/llm/*-throughput-round2.json)" = '"region_detail"' ]
	[ "$(jq -c '[.round, .function_calls, .response.choices[0].message.content != null]' "$RUN"/llm/*-throughput-round3.json)" = '[3,null,true]' ]
	[ "$(ls "$RUN"/llm/cache | wc -l)" -eq 3 ]
	run_tool 0 kg-propose --llm --persona throughput --tool-rounds 2 -v pick.jsonl
	[ "$output" = "$(cat first.jsonl)" ]
	[ "$(jq -s length requests.jsonl)" -eq 3 ]
	[[ "$stderr" == *"throughput answered in "*" ms (cached, 3 rounds, 2 function calls, "* ]]
	[ "$(jq -c 'select(.cached) | .round' "$RUN/llm/calls.jsonl" | tr -d '\n')" = 123 ]
}

@test "--tool-rounds with the Responses API: function_call items answered by function_call_output inputs" {
	mock "{\"rules\": [$(calls '"role: throughput"' '[{"name": "source_lines", "arguments": {"start": 5, "end": 5}}]'),
		$(rule 'R1C0x' "$(answer)")]}"
	run_tool 0 kg-propose --llm --api responses --persona throughput --tool-rounds 1 pick.jsonl
	[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
	[ "$(jq -r .path requests.jsonl | sort -u)" = /v1/responses ]
	[ "$(jq -c 'select(.n == 1) | .body | [.tool_choice, (.tools | map([.type, .name, .strict, .parameters.required]))]' requests.jsonl)" = \
		'["auto",[["function","metrics",true,["names"]],["function","region_detail",true,["id"]],["function","source_lines",true,["start","end"]],["function","ptx_for_lines",true,["start","end"]]]]' ]
	[ "$(jq -c 'select(.n == 2) | .body | [.tool_choice, (.input | map(.role // .type)), .input[2].call_id, .input[2].name,
		.input[2].arguments, .input[3].call_id, .input[3].output]' requests.jsonl)" = \
		"$(jq -cn --arg id "call_$(call_id 1 0)" '["none", ["system", "user", "function_call", "function_call_output"], $id, "source_lines",
			"{\"start\": 5, \"end\": 5}", $id, "   5  extern \"C\" __global__ void scale(float *y, const float *x, int n)\n"]')" ]
}

@test "an answer that stops at --max-output-tokens is said to be unfinished, in either API" {
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	run_tool 1 kg-propose --llm --persona throughput --max-output-tokens 10 pick.jsonl
	[ "$(jq -c '.body.max_completion_tokens' requests.jsonl | sort -u)" = 10 ]
	[[ "$(jq -r '.propose.errors[0].error' <<<"$output")" == 'malformed answer after one correction: the answer stopped at --max-output-tokens 10, unfinished: no JSON object with "candidates" in the answer (see '* ]]
	[ "$(jq -r '.response.choices[0].finish_reason' "$RUN"/llm/*-throughput.json | sort -u)" = length ]
	run_tool 1 kg-propose --llm --api responses --persona throughput --max-output-tokens 10 pick.jsonl
	[[ "$(jq -r '.propose.errors[0].error' <<<"$output")" == 'malformed answer after one correction: the answer stopped at --max-output-tokens 10, unfinished: '* ]]
	# a limit the answer fits in changes nothing
	run_tool 0 kg-propose --llm --persona throughput --max-output-tokens 1000 pick.jsonl
	[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
}

@test "a prompt the server refuses as longer than its context is shortened to fit, estimated where the server has no /tokenize" {
	# OpenAI's and vLLM's refusal; a server without /tokenize, whose model list reports no context
	mock "{\"tokenize\": false, \"rules\": [{\"match\": \"## Method catalog\", \"status\": 400,
		\"body\": \"{\\\"error\\\": {\\\"message\\\": \\\"This model's maximum context length is 4000 tokens. However, your messages resulted in 4400 tokens.\\\", \\\"type\\\": \\\"invalid_request_error\\\"}}\"},
		$(rule 'role: throughput' "$(answer)")]}"
	run_tool 0 kg-propose -v --llm --persona throughput pick.jsonl
	[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
	# the refusal, then the shorter prompt; the mock has no /tokenize (404): estimated, at the
	# bytes a token of the prompt refused (its bytes over the 4400 tokens the server said)
	[ "$(jq -c '[.path, .status]' requests.jsonl | uniq | tr -d '\n')" = '["/v1/chat/completions",400]["/tokenize",404]["/v1/chat/completions",200]' ]
	second=$(jq -r 'select(.status == 200) | .body.messages[1].content' requests.jsonl)
	[[ "$second" == *'## Kernel source (kernel.cu)'* && "$second" != *'## Method catalog'* && "$second" != *'## Regions'* ]]
	node=$(jq -r .node pick.jsonl)
	[[ "$stderr" == *"kg-propose: $RUN: node $node: the prompt, "*" tokens (estimated at 1."*" bytes a token), is over 3000: left out regions ("*"), method catalog ("*")"* ]]
	[[ "$stderr" == *"kg-propose: warning: $RUN: node $node: throughput: HTTP 400 from $OPENAI_BASE_URL/chat/completions: This model's maximum context length is 4000 tokens. However, your messages resulted in 4400 tokens. (1 attempt); asking again with the prompt shortened to 3000 tokens"* ]]
	# with --max-prompt-tokens, the prompt fits from the start: no refusal
	kill "$(cat mock.pid)"
	rm requests.jsonl
	mock "$(cat script.json)"
	run_tool 0 kg-propose --llm --persona throughput --no-cache --max-prompt-tokens 1200 pick.jsonl
	[ "$(jq -c '[.path, .status]' requests.jsonl | uniq | tr -d '\n')" = '["/tokenize",404]["/v1/chat/completions",200]' ]
}

@test "without --max-prompt-tokens, the context the server reports (llama-server's /v1/models) is the budget, counted by its /tokenize" {
	# the mock as llama-server with --api-key and a slot of 1600 tokens: the whole prompt (about
	# 2000 of its tokens, 3 bytes each) would be refused
	mock "{\"n_ctx\": 1600, \"api_key\": \"$KEY\", \"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	run_tool 0 kg-propose -v --llm --persona throughput --max-output-tokens 200 pick.jsonl
	[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
	# asked once, with the key (llama-server checks it there too); the sections counted by the
	# server; one request, which fits: no refusal
	[ "$(jq -c '[.path, .status, .authorization]' requests.models.jsonl)" = "[\"/v1/models\",200,\"Bearer $KEY\"]" ]
	[ "$(jq -c '[.path, .status]' requests.jsonl | uniq | tr -d '\n')" = '["/tokenize",200]["/v1/chat/completions",200]' ]
	node=$(jq -r .node pick.jsonl)
	[[ "$stderr" == *"kg-propose: $RUN: node $node: the prompt may have 1400 tokens: the context the server reports, 1600 tokens (GET $OPENAI_BASE_URL/models: data[0].meta.n_ctx), less 200 for the answer"$'\n'* ]]
	[[ "$stderr" == *"kg-propose: $RUN: node $node: the prompt, "*" tokens (counted by the server), is over 1400: left out regions ("* ]]
	prompt=$(jq -r 'select(.path == "/v1/chat/completions") | .body.messages[1].content' requests.jsonl)
	[[ "$prompt" == *'## Kernel source (kernel.cu)'* && "$prompt" != *'## Regions'* ]]
	# each process asks once; nothing on disk holds the key
	run_tool 0 kg-propose --llm --persona throughput --max-output-tokens 200 --no-cache pick.jsonl
	[ "$(jq -s length requests.models.jsonl)" -eq 2 ]
	run ! grep -r -- "$KEY" out
	# a server that reports no context (OpenAI's model list): no budget, nothing counted, as before
	kill "$(cat mock.pid)"
	rm requests.jsonl
	mock "{\"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	run_tool 0 kg-propose -v --llm --persona throughput --no-cache pick.jsonl
	[ "$(jq -c '[.path, .status]' requests.jsonl | tr -d '\n')" = '["/v1/chat/completions",200]' ]
	[[ "$stderr" == *"the prompt has no token budget (no --max-prompt-tokens, and the server reports no context: GET $OPENAI_BASE_URL/models: data[0] has no meta.n_ctx or max_model_len)"* ]]
}

@test "llama-server's refusal of a prompt over its context (exceed_context_size_error: n_ctx, n_prompt_tokens) shortens it to fit" {
	mock "{\"n_ctx\": 1600, \"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	# a budget above the server's context: the model list is not asked, and the server refuses
	run_tool 0 kg-propose -v --llm --persona throughput --max-output-tokens 200 --max-prompt-tokens 100000 pick.jsonl
	[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
	[ ! -s requests.models.jsonl ]
	[ "$(jq -c '[.path, .status]' requests.jsonl | uniq | tr -d '\n')" = '["/v1/chat/completions",400]["/tokenize",200]["/v1/chat/completions",200]' ]
	refused=$(jq -c 'select(.http_status == 400) | .response.error' "$RUN"/llm/*-throughput.json)
	[ "$(jq -c '[.code, .type, .n_ctx, .n_prompt_tokens > 1600]' <<<"$refused")" = '[400,"exceed_context_size_error",1600,true]' ]
	n=$(jq .n_prompt_tokens <<<"$refused")
	[[ "$stderr" == *"kg-propose: warning: $RUN: node $(jq -r .node pick.jsonl): throughput: HTTP 400 from $OPENAI_BASE_URL/chat/completions: request ($n tokens) exceeds the available context size (1600 tokens), try increasing it (1 attempt); asking again with the prompt shortened to 1400 tokens"* ]]
	[[ "$stderr" == *" tokens (counted by the server), is over 1400: left out regions ("* ]]
}

@test "llama-server's 401 (a missing or wrong key): Invalid API Key, the expert's error, not retried; no context is reported" {
	mock "{\"n_ctx\": 1600, \"api_key\": \"$KEY\", \"rules\": [$(rule 'role: throughput' "$(answer)")]}"
	url="$OPENAI_BASE_URL/chat/completions"
	OPENAI_API_KEY=sk-wrong-key run_tool 1 kg-propose -v --llm --persona throughput --retries 2 pick.jsonl
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "HTTP 401 from $url: Invalid API Key (1 attempt)" ]
	[ "$(jq -c '.response' "$RUN"/llm/*-throughput.json)" = '{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}' ]
	[[ "$stderr" == *"the server reports no context: GET $OPENAI_BASE_URL/models: HTTP 401)"* ]]
	[ "$(jq -c '[.path, .status]' requests.jsonl | tr -d '\n')" = '["/v1/chat/completions",401]' ]
	run_tool 1 env -u OPENAI_API_KEY kg-propose --llm --persona throughput --retries 2 pick.jsonl
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "HTTP 401 from $url: Invalid API Key (1 attempt)" ]
	[ "$(jq -r '.authorization' requests.models.jsonl | tr '\n' ' ')" = 'Bearer sk-wrong-key null ' ]
	run ! grep -r -- sk-wrong-key out
}

@test "the Responses API's correction quotes the answer as an input message of type message, as llama-server needs" {
	mock "{\"rules\": [$(rule 'could not be used' "$(answer)"), $(rule 'role: throughput' 'no JSON here')]}"
	run_tool 0 kg-propose --llm --api responses --persona throughput pick.jsonl
	[ "$(jq -c .candidate.config <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
	[ "$(jq -c '[.path, .status]' requests.jsonl | tr -d '\n')" = '["/v1/responses",200]["/v1/responses",200]' ]
	[ "$(jq -c 'select(.n == 2) | .body.input | map([.type, .role])' requests.jsonl)" = \
		'[["message","system"],["message","user"],["message","assistant"],["message","user"]]' ]
}
