#!/usr/bin/env bats
# 60-kg-relabel.bats: kg-relabel maps freely named methods onto the catalog (exact, alias,
# fuzzy, LLM against the mock server, new), grows it under its lock, and proposes merges.

load test_helper

RUN=out/kernels/k

setup() {
	cd "$BATS_TEST_TMPDIR"
	mkdir -p "$RUN"
}

teardown() {
	if [ -f mock.pid ]; then kill "$(cat mock.pid)" 2>/dev/null || true; fi
}

# mock ANSWER [EXTRA-JSON]: the mock server answers every relabel request with ANSWER (and
# the rule's EXTRA fields); its port is in ./port.
mock() {
	jq -n --arg c "$1" --argjson x "${2:-null}" '{rules: [{match: "relabel", content: $c} + ($x // {})]}' > script.json
	python3 "$TOOLS/mock_llm.py" script.json requests.jsonl port &
	echo $! > mock.pid
	for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
}

# records NAME...: one candidate record of one expansion per method name.
records() {
	for m in "$@"; do
		jq -cn --arg m "$m" --arg r "$RUN" '{run: $r, node: "n1", iter: 3, candidate: {id: "c", method: $m, detail: ("does " + $m)}}'
	done
}

@test "--help, --version and usage errors" {
	run_tool 0 kg-relabel --help
	assert_line --index 0 "Usage: kg-relabel [--catalog FILE] [--threshold T] [--llm [LLM OPTIONS]] [FILE]"
	run_tool 0 kg-relabel --version
	assert_output --regexp '^kg-relabel \(kernelgraph\) [0-9]+\.[0-9]+\.[0-9]+$'
	hint="Try 'kg-relabel --help' for more information."
	run_tool 2 kg-relabel --threshold 2
	assert_stderr "$(printf '%s\n' "kg-relabel: --threshold: '2' is not a number from 0 to 1" "$hint")"
	run_tool 2 kg-relabel --merge
	assert_stderr "$(printf '%s\n' "kg-relabel: --merge needs --catalog FILE" "$hint")"
	run_tool 2 kg-relabel a b
	assert_stderr "$(printf '%s\n' "kg-relabel: unexpected argument 'b'" "$hint")"
	run_tool 2 kg-relabel --api soap
	assert_stderr "$(printf '%s\n' "kg-relabel: --api: 'soap' is not chat or responses" "$hint")"
	run_tool 2 kg-relabel --timeout x
	assert_stderr "$(printf '%s\n' "kg-relabel: --timeout: 'x' is not a number of seconds" "$hint")"
	run_tool 2 kg-relabel --retries 1.5
	assert_stderr "$(printf '%s\n' "kg-relabel: --retries: '1.5' is not a whole number from 0 to 100" "$hint")"
	run_tool 2 kg-relabel --merge --catalog c.json extra
	assert_stderr "$(printf '%s\n' "kg-relabel: --merge reads no records (unexpected argument 'extra')" "$hint")"
	run_tool 3 env -u OPENAI_API_KEY -u OPENAI_BASE_URL kg-relabel --llm
	assert_stderr "kg-relabel: --llm needs OPENAI_API_KEY (or OPENAI_BASE_URL, for a local server that needs no key)"
}

@test "exact names, aliases and fuzzy matches land on the canonical method; other records pass" {
	{ echo '{"op":"stop"}'; records "Vectorize Global Loads" "float4 loads" "vectorized global load" "Async copy" "enable-async-pipeline"; } > in.jsonl
	run_tool 0 kg-relabel in.jsonl
	assert_stderr_empty
	assert_line --index 0 '{"op":"stop"}'
	[ "$(jq -c 'select(.method) | [.method.label, .method.canonical, .method.how, (.method.score * 100 | round)]' <<<"$output" | tr -d '\n')" = \
		'["Vectorize Global Loads","vectorize_global_loads","exact",100]["float4 loads","vectorize_global_loads","alias",100]["vectorized global load","vectorize_global_loads","fuzzy",91]["Async copy","enable_async_pipeline","alias",100]["enable-async-pipeline","enable_async_pipeline","exact",100]' ]
	# the catalog OUTDIR/methods.json now exists, seeded, and has learned the fuzzy name as an alias
	[ "$(jq '.methods | length' out/methods.json)" -eq 15 ]
	[ "$(jq -c '.methods[] | select(.name == "vectorize_global_loads") | .aliases[-1]' out/methods.json)" = '"vectorized global load"' ]
	# a higher threshold refuses the fuzzy match: the name becomes a new method
	records "vectorized global stores" > in2.jsonl
	run_tool 0 kg-relabel --threshold 0.99 in2.jsonl
	[ "$(jq -c '.method | [.canonical, .how]' <<<"$output")" = '["vectorized_global_stores","new"]' ]
}

@test "members it does not own pass through as written, numbers a double cannot hold included" {
	echo '{"op":"note","id":9007199254740993,"x":[1e400,0.30000000000000004]}' > in.jsonl
	records "float4 loads" | jq -c '.trace = 0' | sed 's/"trace":0/"trace":12345678901234567890/' >> in.jsonl
	run_tool 0 kg-relabel in.jsonl
	assert_line --index 0 '{"op":"note","id":9007199254740993,"x":[1e400,0.30000000000000004]}'
	assert_line --index 1 --partial '"trace":12345678901234567890,"method":{"label":"float4 loads"'
}

@test "unknown names grow the catalog; a like name later in the expansion lands on the new one" {
	records "Shared Memory Tiling 2D" "shared memory tiling" > in.jsonl
	run_tool 0 kg-relabel --catalog cat.json in.jsonl
	[ "$(jq -c '.method | [.canonical, .how]' <<<"$output" | tr -d '\n')" = '["shared_memory_tiling_2d","new"]["shared_memory_tiling_2d","fuzzy"]' ]
	[ "$(jq -c '.methods[-1]' cat.json)" = '{"name":"shared_memory_tiling_2d","description":"does Shared Memory Tiling 2D","aliases":["Shared Memory Tiling 2D","shared memory tiling"]}' ]
	# the next run finds it by alias
	records "shared memory tiling" | kg-relabel --catalog cat.json | jq -e '.method.how == "alias"'
	run_tool 0 kg-relabel --merge --catalog cat.json
	assert_output ""
	# --merge proposes look-alikes for a person to merge
	records "shared memory tile 2d" | kg-relabel --catalog cat.json --threshold 0.99 > /dev/null
	run_tool 0 kg-relabel --merge --catalog cat.json
	assert_output '{"merge":["shared_memory_tiling_2d","shared_memory_tile_2d"],"score":0.86956521739130432}'
	[ "$(jq '.methods | length' cat.json)" -eq 17 ]
}

@test "two relabels running at once both keep their additions" {
	for i in $(seq 8); do records "alpha trick $i"; done > a.jsonl
	for i in $(seq 8); do records "beta move $i" | jq -c ".iter = $i"; done > b.jsonl
	for i in $(seq 8); do records "alpha trick $i" | jq -c ".iter = $i"; done > a.jsonl
	kg-relabel --threshold 1 a.jsonl > a.out & kg-relabel --threshold 1 b.jsonl > b.out & wait
	[ "$(jq '.methods | length' out/methods.json)" -eq 31 ]
	[ "$(jq -r '.methods[].name' out/methods.json | grep -c '^alpha_trick_')" -eq 8 ]
	[ "$(jq -r '.methods[].name' out/methods.json | grep -c '^beta_move_')" -eq 8 ]
}

@test "--llm: one call per expansion maps the names no rule matches, onto the catalog or as new" {
	answer='{"mappings":[{"label":"stage the tiles through smem with cp.async","canonical":"enable_async_pipeline","new_name":null},{"label":"persistent CTAs","canonical":null,"new_name":"Persistent Kernel"}]}'
	mock "$answer"
	records "float4 loads" "stage the tiles through smem with cp.async" "persistent CTAs" > in.jsonl
	OPENAI_API_KEY=sk-relabel-key OPENAI_BASE_URL="http://127.0.0.1:$(cat port)/v1" run_tool 0 kg-relabel --llm in.jsonl
	[ "$(jq -c '.method | [.canonical, .how]' <<<"$output" | tr -d '\n')" = \
		'["vectorize_global_loads","alias"]["enable_async_pipeline","llm"]["persistent_kernel","new"]' ]
	# one request, for the two names no rule matched, with the catalog in the prompt
	[ "$(jq -s length requests.jsonl)" -eq 1 ]
	prompt=$(jq -r '.body.messages[1].content' requests.jsonl)
	[[ "$prompt" == *'- label "stage the tiles through smem with cp.async": does stage the tiles through smem with cp.async'* ]]
	[[ "$prompt" == *'- label "persistent CTAs"'* ]]
	[[ "$prompt" != *'label "float4 loads"'* ]]
	[[ "$prompt" == *'- enable_async_pipeline: overlap global-memory loads'* ]]
	[ "$(jq -c '.methods[-1] | [.name, .aliases]' out/methods.json)" = '["persistent_kernel",["persistent CTAs"]]' ]
	[ "$(jq -c '.label' "$RUN/llm/calls.jsonl")" = '"relabel"' ]
	run ! grep -r sk-relabel-key out
}

@test "--llm: a key the server echoes into its answer reaches neither the catalog nor the records" {
	mock '{"mappings":[{"label":"persistent CTAs","canonical":null,"new_name":"persistent {auth}"}]}' '{"echo_auth": true}'
	records "persistent CTAs" > in.jsonl
	OPENAI_API_KEY=sk-relabel-key OPENAI_BASE_URL="http://127.0.0.1:$(cat port)/v1" run_tool 0 kg-relabel --llm in.jsonl
	[ "$(jq -c '.method | [.canonical, .how]' <<<"$output")" = '["persistent_bearer_redacted","new"]' ]
	said="$output$stderr"
	# the key as sent, or as a method name makes it
	run ! grep -rE 'sk.relabel.key' out
	run ! grep -E 'sk.relabel.key' <<<"$said"
}

@test "bad records and a bad catalog are reported; the records pass through" {
	printf '%s\n' '{"candidate":{"method":""}}' '{"candidate":{"method":5}}' 'nope' > in.jsonl
	run_tool 1 kg-relabel --catalog cat.json in.jsonl
	assert_stderr "$(printf '%s\n' "kg-relabel: in.jsonl:1: candidate.method: must be a non-empty string" \
		"kg-relabel: in.jsonl:2: candidate.method: must be a non-empty string" "kg-relabel: in.jsonl:3: invalid JSON at column 1")"
	[ "${#lines[@]}" -eq 2 ]
	echo '{"methods": [{"description": "x"}]}' > bad.json
	records "tile" > one.jsonl
	run_tool 1 kg-relabel --catalog bad.json one.jsonl
	assert_stderr "kg-relabel: bad.json: methods[0].name: must be a string"
	echo '{"methods": {}}' > bad.json
	run_tool 1 kg-relabel --catalog bad.json one.jsonl
	assert_stderr "kg-relabel: bad.json: methods: must be an array of methods"
	mkdir dir.json
	run_tool 1 kg-relabel --catalog dir.json one.jsonl
	assert_stderr "kg-relabel: cannot read the method catalog 'dir.json': Is a directory"
	[ "$(jq -c 'has("method")' <<<"$output")" = false ]
	echo '{"candidate":{"method":"tile"}}' > no-run.jsonl
	run_tool 1 kg-relabel no-run.jsonl
	assert_stderr "kg-relabel: no-run.jsonl:1: run: missing, so no catalog (give the record a run, or --catalog FILE)"
	assert_output '{"candidate":{"method":"tile"}}'
}
