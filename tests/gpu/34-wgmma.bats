#!/usr/bin/env bats
# 34-wgmma.bats (GPU): the matmul examples' ready patch wgmma (wgmma.mma_async, sm_90a) gives
# output that passes kg-bench's check against the spec's own wmma kernel, at the example's size;
# its time is printed against the wmma default and the fastest wmma configuration of the
# recorded H100 table.

load ../test_helper

# bench_patch NAME: builds and benches, in run NAME, the baseline (the spec's own wmma kernel,
# whose outputs become the reference), the recorded table's fastest wmma configuration, and the
# spec's wgmma patch in its Config; writes NAME.jsonl.
bench_patch() {
	local name=$1 dir=$KG_ROOT/examples/$1
	mkdir "$name"
	jq '.KernelSpecification.KernelFile = "matmul.cu"' "$dir/$name.json" >"$name/spec.json"
	cp "$KG_ROOT/examples/matmul/matmul.cu" "$name/"
	local entry best
	entry=$(jq -c '.KernelGraph.Patches[] | select(.Name == "wgmma")' "$name/spec.json")
	best=$(jq -c '.results | min_by(.measurements[] | select(.name == "time") | .value) | .configuration' \
		"$KG_ROOT/examples/matmul/matmul_H100_T4.json")
	echo '{"run": "'"$name"'", "candidate": {"id": "baseline"}}' | timeout 120 kg-build |
		timeout 300 kg-bench --budget 0.5 >"$name.jsonl"
	local base
	base=$(jq -r .build.state "$name.jsonl")
	{
		jq -cn --arg r "$name" --arg b "$base" --argjson c "$best" '{run: $r, node: $b, candidate: {id: "wmma-best", config: $c}}'
		jq -cn --arg r "$name" --arg b "$base" --rawfile p "$dir/$(jq -r .PatchFile <<<"$entry")" \
			--argjson c "$(jq -c .Config <<<"$entry")" '{run: $r, node: $b, candidate: {id: "wgmma", patch: $p, config: $c}}'
	} | timeout 300 kg-build | timeout 300 kg-bench --budget 0.5 >>"$name.jsonl"
	jq -c '{id: .candidate.id, status: .bench.status, median_ms: .bench.median_ms, tflops: .bench.tflops,
		max_abs_err: .bench.check.max_abs_err, speedup: .bench.speedup, arch: .build.arch}' "$name.jsonl" >&3
}

setup() {
	export XDG_CACHE_HOME="$BATS_TEST_TMPDIR/cache"
	cd "$BATS_TEST_TMPDIR"
}

@test "matmul: the wgmma patch is correct at 4096^3, timed against wmma" {
	bench_patch matmul
	patched_hgmma matmul wgmma 'ok ok ok'
}

@test "fused_matmul_act: the wgmma patch is correct at 4096^3 with its LeakyReLU, timed against wmma" {
	bench_patch fused_matmul_act
	patched_hgmma fused_matmul_act wgmma 'ok ok ok'
}

@test "a wrong descriptor does not pass: the wgmma patch with B's LBO and SBO swapped is incorrect or crashes" {
	mkdir matmul
	cp "$KG_ROOT/examples/matmul/matmul.json" matmul/spec.json
	cp "$KG_ROOT/examples/matmul/matmul.cu" matmul/
	sed 's/B_CORES_N \* 128, 128);/128, B_CORES_N * 128);/' "$KG_ROOT/examples/matmul/wgmma.diff" >swapped.diff
	[ "$(grep -c "128, B_CORES_N \* 128);" swapped.diff)" -eq 1 ]
	echo '{"run": "matmul", "candidate": {"id": "baseline"}}' | timeout 120 kg-build | timeout 300 kg-bench --budget 0.2 >base.jsonl
	jq -cn --arg b "$(jq -r .build.state base.jsonl)" --rawfile p swapped.diff \
		--argjson c "$(jq -c '.KernelGraph.Patches[0].Config' matmul/spec.json)" \
		'{run: "matmul", node: $b, candidate: {id: "swapped", patch: $p, config: $c}}' | timeout 120 kg-build |
		timeout 300 kg-bench --budget 0.2 >swapped.jsonl
	jq -c '.bench | {status, check}' swapped.jsonl >&3
	[ "$(jq -r .build.status swapped.jsonl)" = ok ]
	# read past its stage, the product faults (crashed, as on the H100) or is wrong (incorrect)
	[[ "$(jq -r .bench.status swapped.jsonl)" =~ ^(incorrect|crashed)$ ]]
}
