#!/usr/bin/env bats
# 31-kg-bench-features.bats (GPU): half arguments, a __constant__ Symbol, 64 KB of dynamic
# shared memory and more per configuration (KernelGraph.SharedMemory), Generator fills and
# ReferenceArguments (tests/fixtures/bench/features).

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

@test "a baseline that does not match ReferenceArguments is incorrect" {
	printf '\x00\x3c' | dd of=run/expected.bin bs=1 seek=200 conv=notrunc 2>/dev/null
	run baseline
	[ "$(jq -c '.bench | [.status, .check.argument, .check.first_bad, .check.input_set]' <<<"$output")" = '["incorrect","out",100,0]' ]
}

@test "KernelGraph.SharedMemory: each configuration launches with its own extra bytes; a bad shared_bytes is an error" {
	jq '.KernelGraph.SharedMemory = "block_size_x * 64"' "$FEATURES/spec.json" >run/spec.json
	run baseline
	[ "$(jq -c '[.build.shared_bytes, .bench.status]' <<<"$output")" = '[16384,"ok"]' ]
	base=$(jq -r .build.state <<<"$output")
	# a variant that keeps its ones in the extra bytes, past the 64 KB Local argument
	sed 's/stage\[16383 - threadIdx.x\]/stage[16384 + block_size_x * 16 - 1 - threadIdx.x]/g' "$FEATURES/features.cu" >extra.cu
	! cmp -s extra.cu "$FEATURES/features.cu"
	jq -cn --arg b "$base" --rawfile s extra.cu '{run: "run", node: $b, candidate: {id: "extra", source: $s, config: {block_size_x: 128}}}' |
		timeout 120 kg-build >built.jsonl
	[ "$(jq -r .build.shared_bytes built.jsonl)" = 8192 ]
	jq -c '.candidate.id = "bad" | .build.shared_bytes = "lots"' built.jsonl >>built.jsonl
	run_tool 0 kg-bench --budget 0.1 built.jsonl
	jq -c '[.candidate.id, .bench.status, .bench.error]' <<<"$output" >&3
	[ "$(jq -c '[.bench.status, .bench.check.passed]' <<<"${lines[0]}")" = '["ok",true]' ]
	[ "$(jq -c '[.bench.status, .bench.error]' <<<"${lines[1]}")" = '["error","build.shared_bytes: must be a non-negative number of bytes"]' ]
}
