#!/usr/bin/env bats
# 12-llama-server.bats: kg-propose's LLM experts and a whole kg-tune against a real
# OpenAI-compatible server, llama.cpp's llama-server on a tiny random model (make llm-server).

load ../test_helper

RUN=out/kernels/scale
KEY=sk-llama-7c41d0-secret
MODEL_NAME=tiny

# The server and model `make test` builds (make llm-server). Where they could not be built,
# every test is skipped with the reason (bats skips in setup, not in setup_file), except
# under CI=true, where that is a failure.
SERVER="$(dirname "${KG_TINY_GGUF:-$KG_ROOT/build/llm/tiny.gguf}")/llama-server"
MODEL="${KG_TINY_GGUF:-$KG_ROOT/build/llm/tiny.gguf}"

# no_server: says why there is no server to test with; fails when there is one.
no_server() {
	if [ -x "$SERVER" ] && [ -s "$MODEL" ]; then
		return 1
	fi
	if [ -s "$MODEL.why" ]; then
		echo "make llm-server failed: $(cat "$MODEL.why")"
	else
		echo "no llama-server or tiny model beside $MODEL: run make llm-server"
	fi
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# serve NAME [ARG]...: starts llama-server on the tiny model, on loopback at a free port (or
# $PORT), with the key; NAME.port and NAME.pid say where and who; waits until it is ready (its
# /health).
serve() {
	local name=$1 port=${PORT:-}
	shift
	[ -n "$port" ] || port=$(free_port)
	"$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$port" --api-key "$KEY" --alias "$MODEL_NAME" \
		--threads 1 --no-warmup --no-webui "$@" >"$name.log" 2>&1 &
	echo $! >"$name.pid"
	echo "$port" >"$name.port"
	for _ in $(seq 600); do
		if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
			return 0
		fi
		kill -0 "$(cat "$name.pid")" 2>/dev/null || { tail -n 20 "$name.log" >&2; return 1; }
		sleep 0.1
	done
	echo "llama-server did not get ready in 60 s" >&2
	tail -n 20 "$name.log" >&2
	return 1
}

# stop NAME [SIGNAL]: ends the server NAME started by serve (with SIGNAL: KILL, a crash). A
# server sent TERM while it works on a request exits only once that request's client gives up.
stop() {
	if [ -f "$1.pid" ]; then
		kill -"${2:-TERM}" "$(cat "$1.pid")" 2>/dev/null || true
		wait "$(cat "$1.pid")" 2>/dev/null || true
		rm -f "$1.pid"
	fi
}

setup_file() {
	if KG_LLM_SKIP=$(no_server); then
		if [ "${CI:-}" = true ]; then
			echo "$KG_LLM_SKIP" >&2
			return 1
		fi
		export KG_LLM_SKIP
		return 0
	fi
	scale_run_template "$BATS_FILE_TMPDIR/template"
	(cd "$BATS_FILE_TMPDIR/template" && kg-select "$RUN" >pick.jsonl)
	# One server for the file: three slots, so that the three experts are answered at once.
	cd "$BATS_FILE_TMPDIR"
	serve main --ctx-size 65536 --parallel 3 --seed 38
}

teardown_file() {
	cd "$BATS_FILE_TMPDIR"
	stop main
}

setup() {
	[ -z "${KG_LLM_SKIP:-}" ] || skip "$KG_LLM_SKIP"
	cd "$BATS_TEST_TMPDIR"
	cp -r "$BATS_FILE_TMPDIR/template/out" "$BATS_FILE_TMPDIR/template/pick.jsonl" .
	export OPENAI_API_KEY=$KEY OPENAI_BASE_URL="http://127.0.0.1:$(cat "$BATS_FILE_TMPDIR/main.port")/v1"
}

teardown() {
	stop small
	stop mock
}

# calls: the lines of RUN/llm/calls.jsonl, each as [label, round or null, ok, http_status].
calls() {
	jq -c '[.label, .round, .ok, .http_status]' "$RUN/llm/calls.jsonl"
}

# schema_shaped FILE: the answer of a logged request has the shape of the schema the last
# request of the conversation asked for (FILE's, or LAST's), each value of its configurations
# one of the schema's.
schema_shaped() {
	jq -e --slurpfile last "${2:-$1}" '
		($last[0].request.response_format.json_schema.schema.properties.candidates.items.properties.config.anyOf[1].properties) as $space |
		.response.choices[0].message.content | fromjson | .candidates | length >= 1 and all(
			(keys == ["config", "detail", "launch_update", "method", "patch", "source", "think"]) and
			(.think | type == "string") and (.method | type == "string") and (.detail | type == "string") and
			(.patch | type == "string" or type == "null") and (.source | type == "string" or type == "null") and
			.launch_update == null and (.config == null or ((.config | keys) == ($space | keys) and
				(.config | to_entries | all(.value as $v | $space[.key].enum | index([$v]) != null)))))' "$1" >/dev/null
}

@test "each expert's answer through response_format json_schema has the schema's shape: candidates, or drops with their reason" {
	run -0 --separate-stderr timeout 120 kg-propose --llm --model "$MODEL_NAME" --max-output-tokens 1000 pick.jsonl
	# every request went out with the strict schema, and was answered (3 experts, at most 3 corrections)
	n=$(jq -s length "$RUN/llm/calls.jsonl")
	[ "$n" -ge 3 ] && [ "$n" -le 6 ]
	[ "$(jq -c '[.ok, .http_status, .model, .cached, .attempts]' "$RUN/llm/calls.jsonl" | sort -u)" = '[true,200,"tiny",false,1]' ]
	jq -s -e 'all(.tokens_in > 1000 and .tokens_out > 0 and .cost_usd == 0)' "$RUN/llm/calls.jsonl"
	for f in "$RUN"/llm/*-*.json; do
		[ "$(jq -c '.request.response_format | [.type, .json_schema.name, .json_schema.strict]' "$f")" = '["json_schema","candidates",true]' ]
		[ "$(jq -r '.response.choices[0].finish_reason' "$f")" = stop ]
		schema_shaped "$f" || { echo "not the schema's shape: $f"; false; }
	done
	# nonsense that has the shape: a candidate for each usable answer, a warning for each dropped one
	[ "$(jq -c 'select(.candidate) | .candidate.proposer' <<<"$output" | sort -u | wc -l)" -ge 1 ]
	jq -e 'select(.candidate) | .candidate | (.proposer | test("^llm:tiny/(throughput|memory|robustness)$")) and
		(.method | length > 0) and (.config | type == "object")' <<<"$output" >/dev/null
	[ -z "$stderr" ] || [[ "$stderr" =~ ^(kg-propose:\ warning:\ [^$'\n']*(dropped|malformed\ answer)[^$'\n']*$'\n'?)+$ ]]
}

@test "the tool loop: llama-server's own tool-call ids go back with each result; the last round answers in the schema" {
	run_tool 0 kg-propose --llm --model "$MODEL_NAME" --max-output-tokens 1000 --persona throughput --tool-rounds 2 pick.jsonl
	# rounds 1 and 2 called a function each, round 3 (tool_choice none) answered
	[ "$(calls | head -3 | tr -d '\n')" = '["throughput",1,true,200]["throughput",2,true,200]["throughput",3,true,200]' ]
	[ "$(jq -c '.function_calls' "$RUN/llm/calls.jsonl" | head -3 | tr -d '\n')" = 110 ]
	r1=$(ls "$RUN"/llm/*-throughput-round1.json | head -1) r2=$(ls "$RUN"/llm/*-throughput-round2.json | head -1)
	r3=$(ls "$RUN"/llm/*-throughput-round3.json | head -1)
	id=$(jq -r '.response.choices[0].message.tool_calls[0].id' "$r1")
	# the server's id (random letters and digits), not one of ours
	[[ "$id" =~ ^[A-Za-z0-9]{32}$ ]]
	[ "$(jq -r '.function_calls[0].id' "$r1")" = "$id" ]
	[ "$(jq -r '.response.choices[0].finish_reason' "$r1")" = tool_calls ]
	# round 2 sends it back: the assistant's tool_calls, then the result under that id
	[ "$(jq -c '.request.messages[2:] | map([.role, .tool_call_id // .tool_calls[0].id])' "$r2")" = "[[\"assistant\",\"$id\"],[\"tool\",\"$id\"]]" ]
	[ "$(jq -r '.request.messages[3].content' "$r2")" = "$(jq -r '.function_calls[0].result' "$r1")" ]
	# a round that may call asks for no format (the server's grammar would forbid the call); the last does
	[ "$(jq -c '[.request.tool_choice, .request.response_format.type]' "$r1" "$r2" "$r3" | tr -d '\n')" = '["auto",null]["auto",null]["none","json_schema"]' ]
	schema_shaped "$r3"
}

@test "a prompt over the server's context is shortened to fit and asked again; where it cannot be, a clear error record" {
	cd "$BATS_TEST_TMPDIR"
	serve small --ctx-size 4096 --parallel 1 --seed 38
	export OPENAI_BASE_URL="http://127.0.0.1:$(cat small.port)/v1"
	# a budget above the context, so that the server's report of it (the next test) does not
	# fit the prompt before the server can refuse it
	run --separate-stderr timeout 120 kg-propose --llm --model "$MODEL_NAME" --persona throughput --max-output-tokens 1000 \
		--max-prompt-tokens 100000 pick.jsonl
	# refused (HTTP 400, its context said), then asked again without the sections it could do without
	[ "$(calls | head -2 | tr -d '\n')" = '["throughput",null,false,400]["throughput",null,true,200]' ]
	[[ "$stderr" == *"kg-propose: warning: $RUN: node $(jq -r .node pick.jsonl): throughput: HTTP 400 from $OPENAI_BASE_URL/chat/completions: request ("*" tokens) exceeds the available context size (4096 tokens), try increasing it (1 attempt); asking again with the prompt shortened to 3096 tokens"* ]]
	f=$(jq -r 'select(.ok) | .file' "$RUN/llm/calls.jsonl" | head -1)
	prompt=$(jq -r '.request.messages[1].content' "$RUN/llm/$f")
	for part in '## Goal' '## Kernel source (kernel.cu)' '## Tuning space' '## Your role: throughput' '## Answer'; do
		[[ "$prompt" == *"$part"* ]] || { echo "missing: $part"; false; }
	done
	for part in '## Regions' '## Method catalog' '## History' '## This variant'; do
		[[ "$prompt" != *"$part"* ]] || { echo "not left out: $part"; false; }
	done
	[ "$(jq '.response.usage.prompt_tokens' "$RUN/llm/$f")" -le 3096 ]
	# a status, not a crash: the answer to the shorter prompt is used or is the expert's error
	[ "$status" -eq 0 ] || [ "$(jq -r '.propose.errors[0].error' <<<"$output")" != null ]
	stop small

	# a context too small even for the sections always kept: the server's refusal and why
	serve small --ctx-size 2048 --parallel 1
	export OPENAI_BASE_URL="http://127.0.0.1:$(cat small.port)/v1"
	rm -r "$RUN/llm"
	run_tool 1 kg-propose --llm --model "$MODEL_NAME" --persona throughput --max-output-tokens 400 --max-prompt-tokens 100000 pick.jsonl
	[ "${#lines[@]}" -eq 1 ]
	error=$(jq -r '.propose | select(.status == "error") | .errors[0].error' <<<"$output")
	[[ "$error" =~ ^"HTTP 400 from $OPENAI_BASE_URL/chat/completions: request ("[0-9]+" tokens) exceeds the available context size (2048 tokens), try increasing it (1 attempt); and the prompt is "[0-9]+" tokens (counted by the server) without its sections that may be left out, more than the 1648 it may have"$ ]]
	[ "$(calls)" = '["throughput",null,false,400]' ]
}

@test "without --max-prompt-tokens, llama-server's own report of a slot's context (GET /v1/models) is the budget: no refusal" {
	cd "$BATS_TEST_TMPDIR"
	# two slots of 4096 tokens each
	serve small --ctx-size 8192 --parallel 2 --seed 38
	export OPENAI_BASE_URL="http://127.0.0.1:$(cat small.port)/v1"
	[ "$(curl -sf -H "Authorization: Bearer $KEY" "$OPENAI_BASE_URL/models" | jq -c '.data[0].meta.n_ctx')" = 4096 ]
	run --separate-stderr timeout 120 kg-propose -v --llm --model "$MODEL_NAME" --persona throughput --max-output-tokens 1000 pick.jsonl
	node=$(jq -r .node pick.jsonl)
	[[ "$stderr" == *"kg-propose: $RUN: node $node: the prompt may have 3096 tokens: the context the server reports, 4096 tokens (GET $OPENAI_BASE_URL/models: data[0].meta.n_ctx), less 1000 for the answer"$'\n'* ]]
	[[ "$stderr" == *"kg-propose: $RUN: node $node: the prompt, "*" tokens (counted by the server), is over 3096: left out regions ("* ]]
	# the first request fits: answered, not refused
	[ "$(calls | head -1)" = '["throughput",null,true,200]' ]
	f=$(jq -r .file "$RUN/llm/calls.jsonl" | head -1)
	[ "$(jq '.response.usage.prompt_tokens' "$RUN/llm/$f")" -le 3096 ]
	prompt=$(jq -r '.request.messages[1].content' "$RUN/llm/$f")
	[[ "$prompt" == *'## Kernel source (kernel.cu)'* && "$prompt" != *'## Regions'* ]]
	[ "$status" -eq 0 ] || [ "$(jq -r '.propose.errors[0].error' <<<"$output")" != null ]
	run ! grep -rl -- "$KEY" .
}

@test "the mock of the fast suite (tests/tools/mock_llm.py) answers as llama-server: 401, 404, the model list, /tokenize, a prompt over the context" {
	cd "$BATS_TEST_TMPDIR"
	serve small --ctx-size 2048 --parallel 2 --seed 38
	echo "{\"n_ctx\": 1024, \"api_key\": \"$KEY\", \"model\": \"$MODEL_NAME\", \"rules\": []}" >script.json
	python3 "$TOOLS/mock_llm.py" script.json requests.jsonl port &
	echo $! >mock.pid
	for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
	long=$(jq -cn --arg x "$(head -c 4000 /dev/zero | tr '\0' x)" '{model: "tiny", messages: [{role: "user", content: $x}]}')
	for server in "127.0.0.1:$(cat small.port)" "127.0.0.1:$(cat port)"; do
		url="http://$server" auth="Authorization: Bearer $KEY"
		{
			curl -s "$url/v1/models"
			echo
			curl -s -H "$auth" "$url/v1/nothing"
			echo
			curl -s -H "$auth" "$url/v1/models" | jq -c '[keys, (.data[0] | keys), (.data[0].meta | keys), .data[0].id, .data[0].meta.n_ctx]'
			curl -s -H "$auth" "$url/props" | jq -c '.default_generation_settings.n_ctx'
			curl -s -H "$auth" "$url/tokenize" -d '{"content": "hello world"}' | jq -c '[keys, (.tokens | type), (.tokens | length > 0)]'
			# the prompt's size in tokens is each tokenizer's own
			curl -s -H "$auth" "$url/v1/chat/completions" -d "$long" |
				jq -c '.error | [keys_unsorted, .code, .type, .n_ctx, .n_prompt_tokens > 1024,
					(.message | sub("^request \\([0-9]+ tokens\\)"; "request (M tokens)"))]'
		} >"answers-${server##*:}"
	done
	diff "answers-$(cat small.port)" "answers-$(cat port)"
	[ "$(sed -n 1p "answers-$(cat port)")" = '{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}' ]
	[ "$(sed -n 4p "answers-$(cat port)")" = 1024 ]
	[ "$(sed -n 6p "answers-$(cat port)")" = '[["code","message","type","n_prompt_tokens","n_ctx"],400,"exceed_context_size_error",1024,true,"request (M tokens) exceeds the available context size (1024 tokens), try increasing it"]' ]
}

@test "--max-prompt-tokens: sections are left out, least needed first, counted by the server's /tokenize" {
	run_tool 0 kg-propose -v --llm --model "$MODEL_NAME" --persona memory --max-output-tokens 1000 --max-prompt-tokens 4000 pick.jsonl
	[[ "$stderr" == *"kg-propose: $RUN: node $(jq -r .node pick.jsonl): the prompt, "*" tokens (counted by the server), is over 4000: left out regions ("*"), method catalog ("*")"$'\n'* ]]
	f=$(ls "$RUN"/llm/*-memory.json | head -1)
	[ "$(jq '.response.usage.prompt_tokens' "$f")" -le 4000 ]
	prompt=$(jq -r '.request.messages[1].content' "$f")
	[[ "$prompt" == *'## History of this search'* && "$prompt" != *'## Method catalog'* && "$prompt" != *'## Regions'* ]]
	# the count was the server's: what is left is what it was sent, give or take the template's framing
	n=$(jq '.response.usage.prompt_tokens' "$f")
	[[ "$stderr" =~ "the prompt, "([0-9]+)" tokens (counted by the server), is over 4000: left out regions ("([0-9]+)"), method catalog ("([0-9]+)")" ]]
	kept=$((BASH_REMATCH[1] - BASH_REMATCH[2] - BASH_REMATCH[3]))
	[ "$kept" -ge $((n - 32)) ] && [ "$kept" -le $((n + 32)) ]
	# a budget the sections always kept do not fit: each expert's error, and no request
	rm -r "$RUN/llm"
	run_tool 1 kg-propose --llm --model "$MODEL_NAME" --persona memory --max-prompt-tokens 100 pick.jsonl
	[[ "$(jq -r '.propose.errors[0].error' <<<"$output")" =~ ^"the prompt is "[0-9]+" tokens (counted by the server) without its sections that may be left out, more than the 100 it may have"$ ]]
	[ ! -e "$RUN/llm/calls.jsonl" ]
}

@test "the key: sent to a server started with --api-key, in no file or output; without it, the server's 401 is a clear error" {
	run_tool 0 kg-propose --llm --model "$MODEL_NAME" --max-output-tokens 1000 --persona memory pick.jsonl
	run ! grep -rl -- "$KEY" . "$BATS_FILE_TMPDIR/template"
	[[ "$output$stderr" != *"$KEY"* ]]
	unset OPENAI_API_KEY
	run_tool 1 kg-propose --llm --model "$MODEL_NAME" --persona memory --no-cache pick.jsonl
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "HTTP 401 from $OPENAI_BASE_URL/chat/completions: Invalid API Key (1 attempt)" ]
	export OPENAI_API_KEY=sk-wrong-key
	run_tool 1 kg-propose --llm --model "$MODEL_NAME" --persona memory --no-cache pick.jsonl
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "HTTP 401 from $OPENAI_BASE_URL/chat/completions: Invalid API Key (1 attempt)" ]
	run ! grep -rl -- sk-wrong-key .
}

@test "the cache answers a repeat without a request; the costs are the server's token counts at the given prices" {
	run_tool 0 kg-propose --llm --model "$MODEL_NAME" --max-output-tokens 1000 --persona robustness \
		--price-in 1.5 --price-out 4 pick.jsonl
	first=$output
	n=$(jq -s length "$RUN/llm/calls.jsonl")
	jq -s -e 'all(.cost_usd == (.tokens_in * 1.5 + .tokens_out * 4) / 1e6 and .cost_usd > 0)' "$RUN/llm/calls.jsonl"
	# the token counts are the server's usage figures
	for f in "$RUN"/llm/*-robustness.json; do
		[ "$(jq -c '.response.usage | [.prompt_tokens > 1000, .completion_tokens > 0]' "$f")" = '[true,true]' ]
	done
	run_tool 0 kg-propose --llm --model "$MODEL_NAME" --max-output-tokens 1000 --persona robustness \
		--price-in 1.5 --price-out 4 pick.jsonl
	[ "$output" = "$first" ]
	[ "$(jq -s 'length' "$RUN/llm/calls.jsonl")" -eq $((2 * n)) ]
	jq -s -e --argjson n "$n" '.[$n:] | all(.cached and .attempts == 0 and .cost_usd == 0)' "$RUN/llm/calls.jsonl"
}

@test "a whole kg-tune with LLM experts on a replayed vector_add: schema-valid nonsense is relabelled, fails to build or to measure, and the budget is spent" {
	export XDG_CACHE_HOME="$BATS_TEST_TMPDIR/cache"
	# an iteration whose code edit the table cannot answer fails (kg-bench exits 1): the search
	# goes on to its budget, however many of the nonsense edits come in a row
	run_tool 0 kg-tune --llm-model "$MODEL_NAME" --propose-opt "--max-output-tokens 1000" --seed 1 --max-failures 7 \
		--replay "$FIXTURES/replay/vector_add_H200_T4.json" --budget-builds 6 --outdir tune "$KG_ROOT/examples/vector_add/vector_add.json"
	assert_line --regexp '^vector_add +6 .* budget +- +tune/kernels/vector_add/best$'
	run_dir=tune/kernels/vector_add
	# the six candidates evaluated are the experts', each with its method relabelled onto the catalog
	[ "$(jq -c 'select(.build.baseline | not) | .candidate.proposer' "$run_dir/events.jsonl" | grep -c '^"llm:tiny/')" -eq 6 ]
	jq -e 'select(.build.baseline | not) | (.method.canonical | length > 0) and (.method.how | type == "string") and
		(.build.status | IN("ok", "patch_failed", "invalid_config", "compile_failed")) and
		(.build.status != "ok" or (.bench.status | IN("ok", "error")))' "$run_dir/events.jsonl" >/dev/null
	# every call was answered; nothing was spent
	[ "$(jq -c '[.ok, .http_status, .cost_usd]' "$run_dir/llm/calls.jsonl" | sort -u)" = '[true,200,0]' ]
	[ -s "$run_dir/trace.md" ] && [ -f "$run_dir/best.json" ]
	# the README's "A local server" shows these very commands
	for line in '--threads 1 --no-warmup --no-webui --ctx-size 65536 --parallel 3 --seed 38' \
		'kg-tune --llm-model tiny --propose-opt "--max-output-tokens 1000" --seed 1 \' \
		'--replay tests/fixtures/replay/vector_add_H200_T4.json --budget-builds 6 --outdir tune \'; do
		grep -qF -- "$line" "$KG_ROOT/README.md" || { echo "not in README.md: $line"; false; }
	done
}

@test "a server that comes up, or restarts, while the requests are retried answers them; one slower than --timeout is a clear error" {
	cd "$BATS_TEST_TMPDIR"
	PORT=$(free_port)
	export OPENAI_BASE_URL="http://127.0.0.1:$PORT/v1"
	# nothing listens yet: the first attempts cannot connect, and are retried
	kg-propose --llm --model "$MODEL_NAME" --persona throughput --max-output-tokens 1000 --retries 8 --backoff 0.5 \
		--backoff-max 1 pick.jsonl >late.jsonl 2>late.err &
	pid=$!
	sleep 1.5
	PORT=$PORT serve small --parallel 1 --ctx-size 16384 --seed 38
	wait "$pid" || [ "$(jq -r '.propose.errors[0].error' late.jsonl)" != null ]
	line=$(head -1 "$RUN/llm/calls.jsonl")
	[ "$(jq -c '[.ok, .http_status, .attempts > 1]' <<<"$line")" = '[true,200,true]' ]
	f=$(jq -r .file <<<"$line")
	[[ "$(jq -r '.attempts[0].error' "$RUN/llm/$f")" == "$OPENAI_BASE_URL/chat/completions: "*"onnect"* ]]
	[ "$(jq -c '.attempts[-1].http_status' "$RUN/llm/$f")" = 200 ]

	# a server that crashes while it reads a long prompt (a persona of 12,000 bytes: as many
	# tokens), then comes back: the attempt it dropped is retried
	stop small
	PORT=$PORT serve small --parallel 1 --ctx-size 32768 --seed 38
	head -c 12000 /dev/zero | tr '\0' 'x' >long.txt
	kg-propose --llm --model "$MODEL_NAME" --persona long.txt --max-output-tokens 1000 --retries 8 --backoff 0.5 \
		--backoff-max 1 pick.jsonl >restart.jsonl 2>restart.err &
	pid=$!
	for _ in $(seq 200); do grep -q 'launch_slot_' small.log && break; sleep 0.05; done
	stop small KILL
	sleep 1
	PORT=$PORT serve small --parallel 1 --ctx-size 32768 --seed 38
	wait "$pid" || [ "$(jq -r '.propose.errors[0].error' restart.jsonl)" != null ]
	line=$(jq -c 'select(.label == "long")' "$RUN/llm/calls.jsonl" | head -1)
	[ "$(jq -c '[.ok, .http_status, .attempts > 1]' <<<"$line")" = '[true,200,true]' ]
	f=$RUN/llm/$(jq -r .file <<<"$line")
	[ "$(jq -c '.attempts[0].http_status' "$f")" = 0 ]
	[[ "$(jq -r '.attempts[0].error' "$f")" == "$OPENAI_BASE_URL/chat/completions: "* ]]

	# an attempt that outlasts --timeout is given up, retried, then the expert's error
	run_tool 1 kg-propose --llm --model "$MODEL_NAME" --persona memory --timeout 0.05 --retries 1 --backoff 0.01 pick.jsonl
	[ "$(jq -r '.propose.errors[0].error' <<<"$output")" = "no answer from $OPENAI_BASE_URL/chat/completions within 0.05 s (--timeout) (2 attempts)" ]
	# the server is not left busy with what was given up: it answers the next request
	run_tool 0 kg-propose --llm --model "$MODEL_NAME" --persona memory --max-output-tokens 1000 --no-cache pick.jsonl
}

@test "the Responses API on llama-server: the tool loop's function_call items and the correction go through; text.format is not applied" {
	run --separate-stderr timeout 120 kg-propose --llm --api responses --model "$MODEL_NAME" --persona memory \
		--max-output-tokens 300 --tool-rounds 1 pick.jsonl
	# every request was taken (an assistant's input message says "type": "message")
	[ "$(jq -c '[.round, .ok, .http_status]' "$RUN/llm/calls.jsonl" | tr -d '\n')" = '[1,true,200][2,true,200][1,true,200][2,true,200]' ]
	r1=$(ls "$RUN"/llm/*-memory-round1.json | head -1) r2=$(ls "$RUN"/llm/*-memory-round2.json | head -1)
	id=$(jq -r '.response.output[] | select(.type == "function_call") | .call_id' "$r1")
	[ -n "$id" ] && [ "$(jq -r '.function_calls[0].id' "$r1")" = "$id" ]
	[ "$(jq -r --arg id "$id" '.request.input[] | select(.type == "function_call_output") | .call_id' "$r2")" = "$id" ]
	# the answer round asked for the schema, which the server does not apply to this API: the model
	# writes on until --max-output-tokens, which the server calls "completed"; kernelgraph, unfinished
	[ "$(jq -r '.request.text.format.type' "$r2")" = json_schema ]
	[ "$(jq -c '[.response.status, .response.usage.output_tokens]' "$r2")" = '["completed",300]' ]
	[ "$status" -eq 1 ]
	[[ "$(jq -r '.propose.errors[0].error' <<<"$output")" == "malformed answer after one correction: the answer stopped at --max-output-tokens 300, unfinished: "* ]]
}
