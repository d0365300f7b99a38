#!/usr/bin/env bats
# 60-kg-relabel.bats: kg-relabel maps freely named methods onto the catalog (exact, alias,
# by terms, LLM against the mock server, new), grows it under its lock, and proposes merges;
# its accuracy on the held-out phrasings of tests/fixtures/relabel/ keeps its floor.

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
	assert_line --index 0 "Usage: kg-relabel [--catalog FILE] [--threshold T] [--dry-run] [--llm [LLM OPTIONS]] [FILE]"
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
	assert_stderr "$(printf '%s\n' "kg-relabel: --timeout: 'x' is not a number of seconds from 0 to 1000000" "$hint")"
	run_tool 2 kg-relabel --retries 1.5
	assert_stderr "$(printf '%s\n' "kg-relabel: --retries: '1.5' is not a whole number from 0 to 100" "$hint")"
	# the LLM options are lib/llm's, with the bounds kg-propose has too
	run_tool 2 kg-relabel --retries 500
	assert_stderr "$(printf '%s\n' "kg-relabel: --retries: '500' is not a whole number from 0 to 100" "$hint")"
	run_tool 2 kg-relabel --max-calls 0
	assert_stderr "$(printf '%s\n' "kg-relabel: --max-calls: '0' is not a whole number from 1 to 2147483647" "$hint")"
	run_tool 2 kg-relabel --format yaml
	assert_stderr "$(printf '%s\n' "kg-relabel: --format: 'yaml' is not schema, json or none" "$hint")"
	run_tool 2 kg-relabel --merge --dry-run --catalog c.json
	assert_stderr "$(printf '%s\n' "kg-relabel: --merge changes nothing: --dry-run goes with relabelling" "$hint")"
	run_tool 2 kg-relabel --merge --catalog c.json extra
	assert_stderr "$(printf '%s\n' "kg-relabel: --merge reads no records (unexpected argument 'extra')" "$hint")"
	run_tool 3 env -u OPENAI_API_KEY -u OPENAI_BASE_URL kg-relabel --llm
	assert_stderr "kg-relabel: --llm needs OPENAI_API_KEY (or OPENAI_BASE_URL, for a local server that needs no key)"
}

@test "exact names, aliases and matches by terms land on the canonical method; other records pass" {
	{ echo '{"op":"stop"}'; records "Vectorize Global Loads" "float4 loads" "vectorized global load" "Async copy" "enable-async-pipeline"; } > in.jsonl
	run_tool 0 kg-relabel in.jsonl
	assert_stderr_empty
	assert_line --index 0 '{"op":"stop"}'
	[ "$(jq -c 'select(.method) | [.method.label, .method.canonical, .method.how, (.method.score * 100 | round)]' <<<"$output" | tr -d '\n')" = \
		'["Vectorize Global Loads","vectorize_global_loads","exact",100]["float4 loads","vectorize_global_loads","alias",100]["vectorized global load","vectorize_global_loads","fuzzy",100]["Async copy","enable_async_pipeline","alias",100]["enable-async-pipeline","enable_async_pipeline","exact",100]' ]
	# the catalog OUTDIR/methods.json now exists, seeded, and has learned the matched name as an alias
	[ "$(jq '.methods | length' out/methods.json)" -eq 16 ]
	[ "$(jq -c '.methods[] | select(.name == "vectorize_global_loads") | .aliases[-1]' out/methods.json)" = '"vectorized global load"' ]
	# a higher threshold refuses a partial match: the name becomes a new method
	records "vectorized global loads, 8 per thread" > in2.jsonl
	run_tool 0 kg-relabel in2.jsonl
	[ "$(jq -c '.method | [.canonical, .how]' <<<"$output")" = '["vectorize_global_loads","fuzzy"]' ]
	run_tool 0 kg-relabel --catalog strict.json --threshold 0.99 in2.jsonl
	[ "$(jq -c '.method | [.canonical, .how]' <<<"$output")" = '["vectorized_global_loads_8_per_thread","new"]' ]
}

@test "spelling, stemming, synonyms and aliases bring an LLM's phrasings onto the canonical methods" {
	records "use cp.async" "smem tiling" "vectorise loads float4" "Unroll loops" "loop unrolling" "TMA loads" \
		"Switch to WGMMA" "threads per block" "use a persistent kernel with a work queue" > in.jsonl
	run_tool 0 kg-relabel --catalog cat.json in.jsonl
	[ "$(jq -r '.method | "\(.label): \(.canonical) \(.how) \(.score * 100 | round)"' <<<"$output")" = "$(cat <<-'EOF'
		use cp.async: enable_async_pipeline fuzzy 100
		smem tiling: shared_memory_tiling alias 100
		vectorise loads float4: vectorize_global_loads fuzzy 100
		Unroll loops: change_unrolling fuzzy 100
		loop unrolling: change_unrolling alias 100
		TMA loads: enable_async_pipeline fuzzy 90
		Switch to WGMMA: switch_to_mma_or_wgmma fuzzy 100
		threads per block: change_block_sizes fuzzy 100
		use a persistent kernel with a work queue: use_a_persistent_kernel_with_a_work_queue new 26
		EOF
	)" ]
}

@test "accuracy on the held-out phrasings keeps its floor; a new idea stays new" {
	# measured: 64 of 71 (90 %) held out, 66 of 71 (93 %) in the development half
	run_tool 0 "$TOOLS/relabel_accuracy.sh" "$FIXTURES/relabel/phrasings.tsv" held-out
	read -r correct total <<<"${lines[-1]}"
	[ "$total" -eq 71 ]
	[ "$correct" -ge 61 ] || { printf '%s\n' "${lines[@]}" >&2; false; }
	# the script itself fails a phrasing that lands elsewhere
	printf '%s\t%s\n' NEW "smem tiling" change_unrolling "smem tiling" enable_async_pipeline "use cp.async" > three.tsv
	run_tool 0 "$TOOLS/relabel_accuracy.sh" three.tsv dev
	assert_output "$(printf '%s\n' "miss: smem tiling: want NEW, got shared_memory_tiling (alias 1)" "1 2")"
	run_tool 0 "$TOOLS/relabel_accuracy.sh" three.tsv held-out
	assert_output "$(printf '%s\n' "miss: smem tiling: want change_unrolling, got shared_memory_tiling (alias 1)" "0 1")"
}

@test "members it does not own pass through as written, numbers a double cannot hold included" {
	echo '{"op":"note","id":9007199254740993,"x":[1e400,0.30000000000000004]}' > in.jsonl
	records "float4 loads" | jq -c '.trace = 0' | sed 's/"trace":0/"trace":12345678901234567890/' >> in.jsonl
	run_tool 0 kg-relabel in.jsonl
	assert_line --index 0 '{"op":"note","id":9007199254740993,"x":[1e400,0.30000000000000004]}'
	assert_line --index 1 --partial '"trace":12345678901234567890,"method":{"label":"float4 loads"'
}

@test "unknown names grow the catalog; a like name later in the expansion lands on the new one" {
	records "persistent kernel with a work queue" "persistent kernels pulling from a work queue" > in.jsonl
	run_tool 0 kg-relabel --catalog cat.json in.jsonl
	[ "$(jq -c '.method | [.canonical, .how]' <<<"$output" | tr -d '\n')" = \
		'["persistent_kernel_with_a_work_queue","new"]["persistent_kernel_with_a_work_queue","fuzzy"]' ]
	[ "$(jq -c '.methods[-1]' cat.json)" = '{"name":"persistent_kernel_with_a_work_queue","description":"does persistent kernel with a work queue","aliases":["persistent kernel with a work queue","persistent kernels pulling from a work queue"]}' ]
	# the next run finds it by alias
	records "persistent kernels pulling from a work queue" | kg-relabel --catalog cat.json | jq -e '.method.how == "alias"'
	run_tool 0 kg-relabel --merge --catalog cat.json
	assert_output ""
	# --merge proposes look-alikes for a person to merge
	records "persistent thread blocks with a work queue" | kg-relabel --catalog cat.json --threshold 1 > /dev/null
	run_tool 0 kg-relabel --merge --catalog cat.json
	assert_output '{"merge":["persistent_kernel_with_a_work_queue","persistent_thread_blocks_with_a_work_queue"],"score":0.82258863695198559}'
	[ "$(jq '.methods | length' cat.json)" -eq 18 ]
	run_tool 0 kg-relabel --merge --threshold 0.9 --catalog cat.json
	assert_output ""
}

# tree: the checksum of every file and link under out/ (what a dry run must leave as it was).
tree() {
	find out \( -type f -printf '%p ' -exec sha256sum {} \; \) -o \( -type l -printf '%p -> %l\n' \) | sort
}

@test "--dry-run relabels as without it and says what the catalog would get, writing nothing" {
	records "Use smem tiling" "persistent kernel with a work queue" "change_block_sizes" > in.jsonl
	# no catalog yet: none is made, nor its lock
	run_tool 0 kg-relabel --dry-run in.jsonl
	assert_stderr "$(printf '%s\n' 'kg-relabel: dry run: out/methods.json would get "Use smem tiling" as an alias of shared_memory_tiling' \
		'kg-relabel: dry run: out/methods.json would get the method persistent_kernel_with_a_work_queue' \
		'kg-relabel: dry run: out/methods.json would get "persistent kernel with a work queue" as an alias of persistent_kernel_with_a_work_queue' \
		'kg-relabel: dry run: nothing was written')"
	dry=$output
	[ -z "$(ls -A out)" ] || [ "$(find out -type f | wc -l)" -eq 0 ]
	# the records are those a real run writes, and the catalog then holds what was said
	run_tool 0 kg-relabel in.jsonl
	assert_stderr_empty
	[ "$output" = "$dry" ]
	[ "$(jq -c '.methods[-1] | [.name, .aliases]' out/methods.json)" = '["persistent_kernel_with_a_work_queue",["persistent kernel with a work queue"]]' ]
	jq -e '.methods[] | select(.name == "shared_memory_tiling") | .aliases | index("Use smem tiling")' out/methods.json
	# a catalog that exists stays byte for byte as it was, under -q too, which silences the report
	tree > before
	records "xylophone quantum widget" > more.jsonl
	run_tool 0 kg-relabel --dry-run more.jsonl
	assert_stderr "$(printf '%s\n' 'kg-relabel: dry run: out/methods.json would get the method xylophone_quantum_widget' \
		'kg-relabel: dry run: out/methods.json would get "xylophone quantum widget" as an alias of xylophone_quantum_widget' \
		'kg-relabel: dry run: nothing was written')"
	[ "$(jq -c '.method | [.canonical, .how]' <<<"$output")" = '["xylophone_quantum_widget","new"]' ]
	run_tool 0 kg-relabel --dry-run -q in.jsonl
	assert_stderr_empty
	tree > after
	diff before after
}

@test "--merge at its default merges the fragments of one method and no two of different ones" {
	# the catalog the rules alone once grew: the seeds, and each phrasing of the fixture as a method
	records "zzz" | kg-relabel --catalog seeds.json > /dev/null
	run_tool 0 kg-relabel --merge --catalog seeds.json
	assert_output ""
	grep -v '^#' "$FIXTURES/relabel/phrasings.tsv" | jq -Rn --slurpfile seeds seeds.json '{methods: ($seeds[0].methods[:-1] +
		[inputs | split("\t") | {name: (.[1] | ascii_downcase | gsub("[^a-z0-9]+"; "_") | gsub("^_|_$"; "")), description: .[1], want: .[0]}])}' > cat.json
	run_tool 0 kg-relabel --merge --catalog cat.json
	verdicts=$(jq -r --slurpfile c cat.json '($c[0].methods | map({key: .name, value: (.want // .name)}) | from_entries) as $want |
		.merge as [$a, $b] | if $want[$a] == $want[$b] and $want[$a] != "NEW" then "true" else "false: \($a) + \($b)" end' <<<"$output")
	[[ "$output" == *'{"merge":["unroll_loops","loop_unrolling"],"score":1}'* ]]
	# measured: 85 true pairs, no false one
	[ "$(grep -c '^true' <<<"$verdicts")" -ge 80 ]
	run ! grep '^false' <<<"$verdicts"
}

@test "two relabels running at once both keep their additions" {
	# words, not numbers: the matcher drops numbers, and "alpha trick 1" is "alpha trick 2"
	colours=(red green blue cyan magenta yellow black white)
	for i in $(seq 8); do records "beta move ${colours[i - 1]}" | jq -c ".iter = $i"; done > b.jsonl
	for i in $(seq 8); do records "alpha trick ${colours[i - 1]}" | jq -c ".iter = $i"; done > a.jsonl
	kg-relabel --threshold 1 a.jsonl > a.out & kg-relabel --threshold 1 b.jsonl > b.out & wait
	[ "$(jq '.methods | length' out/methods.json)" -eq 32 ]
	[ "$(jq -r '.methods[].name' out/methods.json | grep -c '^alpha_trick_')" -eq 8 ]
	[ "$(jq -r '.methods[].name' out/methods.json | grep -c '^beta_move_')" -eq 8 ]
}

@test "--llm: one call per expansion maps the names no rule matches, onto the catalog or as new" {
	answer='{"mappings":[{"label":"hide global memory latency behind the math","canonical":"enable_async_pipeline","new_name":null},{"label":"persistent CTAs","canonical":null,"new_name":"Persistent Kernel"}]}'
	mock "$answer"
	records "float4 loads" "hide global memory latency behind the math" "persistent CTAs" > in.jsonl
	# --dry-run asks the model as well, but writes nothing: no catalog, no call logged or
	# cached in the run
	OPENAI_API_KEY=sk-relabel-key OPENAI_BASE_URL="http://127.0.0.1:$(cat port)/v1" run_tool 0 kg-relabel --llm --dry-run in.jsonl
	assert_stderr "$(printf '%s\n' 'kg-relabel: dry run: out/methods.json would get "hide global memory latency behind the math" as an alias of enable_async_pipeline' \
		'kg-relabel: dry run: out/methods.json would get the method persistent_kernel' \
		'kg-relabel: dry run: out/methods.json would get "persistent CTAs" as an alias of persistent_kernel' \
		'kg-relabel: dry run: nothing was written')"
	dry=$output
	[ "$(jq -s length requests.jsonl)" -eq 1 ]
	[ "$(find out -type f | wc -l)" -eq 0 ]
	OPENAI_API_KEY=sk-relabel-key OPENAI_BASE_URL="http://127.0.0.1:$(cat port)/v1" run_tool 0 kg-relabel --llm in.jsonl
	[ "$output" = "$dry" ]
	[ "$(jq -c '.method | [.canonical, .how]' <<<"$output" | tr -d '\n')" = \
		'["vectorize_global_loads","alias"]["enable_async_pipeline","llm"]["persistent_kernel","new"]' ]
	# one request a run, for the two names no rule matched, with the catalog in the prompt
	[ "$(jq -s length requests.jsonl)" -eq 2 ]
	prompt=$(jq -r '.body.messages[1].content' requests.jsonl)
	[[ "$prompt" == *'- label "hide global memory latency behind the math": does hide global memory latency behind the math'* ]]
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
