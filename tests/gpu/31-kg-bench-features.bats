#!/usr/bin/env bats
# 31-kg-bench-features.bats (GPU): half arguments, a __constant__ Symbol, 64 KB of dynamic
# shared memory and more per configuration (KernelGraph.SharedMemory), static and dynamic
# shared memory together, Generator fills and ReferenceArguments
# (tests/fixtures/bench/features), and the GPU's fills equal to the host's, byte for byte.

load ../test_helper

FEATURES="$BATS_TEST_DIRNAME/../fixtures/bench/features"

setup() {
	export XDG_CACHE_HOME="$BATS_TEST_TMPDIR/cache"
	cd "$BATS_TEST_TMPDIR"
	mkdir run
	cp "$FEATURES"/spec.json "$FEATURES"/features.cu "$FEATURES"/expected.bin run/
}

baseline() {
	echo '{"run":"run","candidate":{"id":"baseline"}}' | timeout 120 kg-build | timeout 120 kg-bench --budget 0.1
}

@test "the baseline matches the spec's ReferenceArguments; candidates are checked against it" {
	run baseline
	jq -c .bench <<<"$output" >&3
	[ "$(jq -c '.bench | [.status, .check.passed, .check.input_sets]' <<<"$output")" = '["ok",true,1]' ]
	base=$(jq -r .build.state <<<"$output")
	{
		jq -cn --arg b "$base" '{run: "run", node: $b, candidate: {id: "block128", config: {block_size_x: 128}}}'
		jq -cn --arg b "$base" --rawfile s "$FEATURES/no_coeffs.cu" '{run: "run", node: $b, candidate: {id: "no-coeffs", source: $s}}'
	} | timeout 120 kg-build >built.jsonl
	run_tool 0 kg-bench --budget 0.1 built.jsonl
	jq -c '[.candidate.id, .bench.status, .bench.check]' <<<"$output" >&3
	[ "$(jq -r .bench.status <<<"$output" | tr '\n' ' ')" = 'ok incorrect ' ]
	[ "$(jq -c '.bench.check | [.argument, .first_bad]' <<<"${lines[1]}")" = '["out",1]' ]
}

@test "a baseline that does not match ReferenceArguments is incorrect, and not the run's baseline" {
	printf '\x00\x3c' | dd of=run/expected.bin bs=1 seek=200 conv=notrunc 2>/dev/null
	{
		echo '{"run":"run","candidate":{"id":"baseline"}}'
		jq -cn '{run: "run", candidate: {id: "block128", config: {block_size_x: 128}}}'
	} | timeout 120 kg-build >built.jsonl
	run_tool 0 kg-bench --budget 0.1 built.jsonl
	[ "$(jq -c '.bench | [.status, .check.argument, .check.first_bad, .check.input_set]' <<<"${lines[0]}")" = '["incorrect","out",100,0]' ]
	# the candidate after it, in the same worker, has no baseline to be checked against
	[ "$(jq -c '.bench | [.status, .error]' <<<"${lines[1]}")" = \
		'["error","no baseline in run (run/baseline.json is missing): bench the baseline first, as kg-init does"]' ]
}

@test "KernelGraph.SharedMemory: each configuration launches with its own extra bytes; a bad shared_bytes is an error" {
	jq '.KernelGraph.SharedMemory = "block_size_x * 64"' "$FEATURES/spec.json" >run/spec.json
	run baseline
	[ "$(jq -c '[.build.shared_bytes, .bench.status]' <<<"$output")" = '[16384,"ok"]' ]
	base=$(jq -r .build.state <<<"$output")
	# a variant that keeps its ones in the extra bytes, past the 64 KB Local argument
	sed 's/stage\[16383 - threadIdx.x\]/stage[16384 + block_size_x * 16 - 1 - threadIdx.x]/g' "$FEATURES/features.cu" >extra.cu
	run ! cmp -s extra.cu "$FEATURES/features.cu"
	jq -cn --arg b "$base" --rawfile s extra.cu '{run: "run", node: $b, candidate: {id: "extra", source: $s, config: {block_size_x: 128}}}' |
		timeout 120 kg-build >built.jsonl
	[ "$(jq -r .build.shared_bytes built.jsonl)" = 8192 ]
	jq -c '.candidate.id = "bad" | .build.shared_bytes = "lots"' built.jsonl >>built.jsonl
	run_tool 0 kg-bench --budget 0.1 built.jsonl
	jq -c '[.candidate.id, .bench.status, .bench.error]' <<<"$output" >&3
	[ "$(jq -c '[.bench.status, .bench.check.passed]' <<<"${lines[0]}")" = '["ok",true]' ]
	[ "$(jq -c '[.bench.status, .bench.error]' <<<"${lines[1]}")" = '["error","build.shared_bytes: must be a non-negative number of bytes"]' ]
}

@test "the GPU fills every type exactly as the host does (lib/karg_elem.h): Random, Constant, Generator (translated or not)" {
	mkdir fills
	cp "$FIXTURES/bench/fills/spec.json" "$FIXTURES/bench/fills/copy.cu" fills/
	run -0 bash -c 'echo "{\"run\":\"fills\",\"candidate\":{\"id\":\"baseline\"}}" | timeout 120 kg-build | timeout 120 kg-bench --budget 0.05'
	[ "$(jq -r .bench.status <<<"$output")" = ok ]
	for pair in 0:f 2:h 4:d 6:i32 8:b 10:q 12:c 14:g 16:v 18:u; do
		k=${pair%%:*} name=${pair#*:}
		out=$(jq -r ".KernelSpecification.Arguments[$k].Name" fills/spec.json)
		"$LIBTEST" fill fills/spec.json "$name" 0 >host.bin
		cmp host.bin "fills/reference/$k-$out.bin"
	done
}

@test "static shared memory and the spec's dynamic bytes together past 48 KB launch; past the GPU's limit, an error" {
	jq '.KernelGraph.SharedMemory = "32768"' "$BATS_TEST_DIRNAME/../fixtures/bench/spec.json" >run/spec.json
	cp "$BATS_TEST_DIRNAME/../fixtures/bench/saxpy.cu" run/
	run baseline
	[ "$(jq -c '[.build.shared_bytes, .bench.status]' <<<"$output")" = '[32768,"ok"]' ]
	base=$(jq -r .build.state <<<"$output")
	jq -cn --arg b "$base" --rawfile s "$BATS_TEST_DIRNAME/../fixtures/bench/smem_static.cu" \
		'{run: "run", node: $b, candidate: {id: "static", source: $s}}' | timeout 120 kg-build >built.jsonl
	[ "$(jq -r .build.smem_bytes built.jsonl)" = 32768 ]
	jq -c '.candidate.id = "too-much" | .build.shared_bytes = 1000000' built.jsonl >>built.jsonl
	run_tool 0 kg-bench --budget 0.1 built.jsonl
	jq -c '[.candidate.id, .bench.status, .bench.error]' <<<"$output" >&3
	[ "$(jq -c '[.bench.status, .bench.check.passed]' <<<"${lines[0]}")" = '["ok",true]' ]
	[ "$(jq -r .bench.status <<<"${lines[1]}")" = error ]
	jq -r .bench.error <<<"${lines[1]}" | grep -E '^saxpy needs 1032768 bytes of shared memory per block \(32768 static \+ 1000000 dynamic\); .* allows at most [0-9]+$'
}

@test "a Generator that fails on the GPU is an error record that says where, as the host would" {
	mkdir fills
	cp "$FIXTURES/bench/fills/copy.cu" fills/
	jq '.KernelSpecification.Arguments[15].DataSource = "1.0 / (i - 5)"' "$FIXTURES/bench/fills/spec.json" >fills/spec.json
	run -0 bash -c 'echo "{\"run\":\"fills\",\"candidate\":{\"id\":\"baseline\"}}" | timeout 120 kg-build | timeout 120 kg-bench --budget 0.05'
	[ "$(jq -c '.bench | [.status, .error]' <<<"$output")" = \
		'["error","fills/spec.json: KernelSpecification.Arguments[15].DataSource: column 5: float division by zero in \"1.0 / (i - 5)\" (with i=5)"]' ]
}
