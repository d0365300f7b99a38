#!/usr/bin/env bats
# 35-wgmma-tma-ws.bats (GPU): the matmul examples' ready patch wgmma_tma_ws (TMA copies through
# the spec's KernelGraph.TensorMaps, an mbarrier ring, warp-specialized wgmma, sm_90a), and the
# steps wgmma → tma_after_wgmma → ws_after_tma that reach the same kernel, pass kg-bench's check
# against the spec's own wmma kernel at the example's size and at ragged ones (partial tiles,
# whose out-of-range elements TMA fills with zeros); a wrong descriptor or a wrong tensor map
# does not pass, and a map kg-bench cannot encode is an error naming its field.

load ../test_helper

setup() {
	export XDG_CACHE_HOME="$BATS_TEST_TMPDIR/cache"
	cd "$BATS_TEST_TMPDIR"
}

# new_run NAME [M N K]: a run of the example NAME in directory NAME, at its size or M×N×K.
new_run() {
	local name=$1
	mkdir "$name"
	if [ $# -gt 1 ]; then
		jq --argjson m "$2" --argjson n "$3" --argjson k "$4" '.KernelSpecification.KernelFile = "matmul.cu"
			| .KernelSpecification.ProblemSize = [$m, $n, $k]
			| .KernelSpecification.Arguments |= map(if .Name == "M" then .FillValue = $m
				elif .Name == "N" then .FillValue = $n elif .Name == "K" then .FillValue = $k else . end)' \
			"$KG_ROOT/examples/$name/$name.json" >"$name/spec.json"
	else
		jq '.KernelSpecification.KernelFile = "matmul.cu"' "$KG_ROOT/examples/$name/$name.json" >"$name/spec.json"
	fi
	cp "$KG_ROOT/examples/matmul/matmul.cu" "$name/"
}

# bench_ws NAME PATCHFILE [CONFIG]: the baseline, then the patch in CONFIG (default: its entry's
# Config), built and benched; writes NAME.jsonl.
bench_ws() {
	local name=$1 patch=$2 config=${3:-}
	[ -n "$config" ] || config=$(jq -c '.KernelGraph.Patches[] | select(.Name == "wgmma_tma_ws") | .Config' "$name/spec.json")
	echo '{"run": "'"$name"'", "candidate": {"id": "baseline"}}' | timeout 120 kg-build |
		timeout 300 kg-bench --budget 0.3 >"$name.jsonl"
	jq -cn --arg r "$name" --arg b "$(jq -r .build.state "$name.jsonl")" --rawfile p "$patch" --argjson c "$config" \
		'{run: $r, node: $b, candidate: {id: "ws", patch: $p, config: $c}}' | timeout 120 kg-build |
		timeout 300 kg-bench --budget 0.3 >>"$name.jsonl"
	jq -c '{id: .candidate.id, status: .bench.status, median_ms: .bench.median_ms, tflops: .bench.tflops,
		max_abs_err: .bench.check.max_abs_err, speedup: .bench.speedup, error: .bench.error}' "$name.jsonl" >&3
}

# bench_chain NAME CONFIG ENTRY...: the baseline built and benched, then the spec's ready patches
# ENTRY... applied in turn, each at the state the one before built, each in its entry's Config but
# the last in CONFIG (empty: its Config too); the last benched as candidate "ws". Writes NAME.jsonl.
bench_chain() {
	local name=$1 config=$2 node entry c
	shift 2
	echo '{"run": "'"$name"'", "candidate": {"id": "baseline"}}' | timeout 120 kg-build |
		timeout 300 kg-bench --budget 0.3 >"$name.jsonl"
	node=$(jq -r .build.state "$name.jsonl")
	while [ $# -gt 0 ]; do
		entry=$(jq -c --arg n "$1" '.KernelGraph.Patches[] | select(.Name == $n)' "$KG_ROOT/examples/$name/$name.json")
		c=$(jq -c .Config <<<"$entry")
		[ $# -gt 1 ] || [ -z "$config" ] || c=$config
		jq -cn --arg r "$name" --arg b "$node" --arg id "$([ $# -gt 1 ] && echo "$1" || echo ws)" \
			--rawfile p "$KG_ROOT/examples/$name/$(jq -r .PatchFile <<<"$entry")" --argjson c "$c" \
			'{run: $r, node: $b, candidate: {id: $id, patch: $p, config: $c}}' | timeout 120 kg-build >"$name.build"
		jq -e '.build.status == "ok"' "$name.build"
		node=$(jq -r .build.state "$name.build")
		shift
	done
	timeout 300 kg-bench --budget 0.3 <"$name.build" >>"$name.jsonl"
	jq -c '{id: .candidate.id, status: .bench.status, median_ms: .bench.median_ms, tflops: .bench.tflops,
		max_abs_err: .bench.check.max_abs_err, speedup: .bench.speedup, error: .bench.error}' "$name.jsonl" >&3
}

@test "matmul: the wgmma_tma_ws patch is correct at 4096^3 and faster than the wmma baseline" {
	new_run matmul
	bench_ws matmul "$KG_ROOT/examples/matmul/wgmma_tma_ws.diff"
	patched_hgmma matmul ws 'ok ok'
	jq -e 'select(.candidate.id == "ws") | .bench.speedup > 2' matmul.jsonl
}

@test "fused_matmul_act: the wgmma_tma_ws patch is correct at 4096^3 with its LeakyReLU in the epilogue" {
	new_run fused_matmul_act
	bench_ws fused_matmul_act "$KG_ROOT/examples/matmul/wgmma_tma_ws.diff"
	patched_hgmma fused_matmul_act ws 'ok ok'
}

@test "matmul: the wgmma_tma_ws patch is correct on ragged sizes (partial tiles in M, N and K) and in other shapes" {
	new_run matmul 1100 1016 1048
	bench_ws matmul "$KG_ROOT/examples/matmul/wgmma_tma_ws.diff"
	patched_hgmma matmul ws 'ok ok'
	mv matmul.jsonl ragged.jsonl
	rm -r matmul
	# 256 x 128 tiles (two m64n128 tiles a consumer), 3 stages, at 2048^3
	new_run matmul 2048 2048 2048
	bench_ws matmul "$KG_ROOT/examples/matmul/wgmma_tma_ws.diff" \
		'{"block_m": 256, "block_n": 128, "block_k": 64, "num_warps": 12, "num_stages": 3, "group_m": 4}'
	patched_hgmma matmul ws 'ok ok'
}

@test "matmul and fused_matmul_act: wgmma then tma_after_wgmma (TMA, swizzle, mbarrier ring, no producer warpgroup) is correct at 4096^3" {
	for name in matmul fused_matmul_act; do
		new_run $name
		bench_chain $name '' wgmma tma_after_wgmma
		patched_hgmma $name ws 'ok ok'
		jq -e 'select(.candidate.id == "ws") | .bench.speedup > 2' $name.jsonl
	done
}

@test "matmul: tma_after_wgmma is correct on ragged sizes and in 4-warp and 2-stage configurations" {
	for shape in "1100 1016 1048:" "2048 2048 2048:{\"block_m\": 64, \"block_n\": 128, \"block_k\": 64, \"num_warps\": 4, \"num_stages\": 3, \"group_m\": 1}" \
		"1100 1016 1048:{\"block_m\": 128, \"block_n\": 128, \"block_k\": 64, \"num_warps\": 8, \"num_stages\": 2, \"group_m\": 4}"; do
		new_run matmul ${shape%%:*}
		bench_chain matmul "${shape#*:}" wgmma tma_after_wgmma
		patched_hgmma matmul ws 'ok ok'
		rm -r matmul matmul.jsonl
	done
}

@test "matmul: wgmma, tma_after_wgmma, ws_after_tma is correct at 4096^3 and on ragged sizes, the state wgmma_tma_ws builds" {
	new_run matmul
	bench_chain matmul '' wgmma tma_after_wgmma ws_after_tma
	patched_hgmma matmul ws 'ok ok'
	jq -e 'select(.candidate.id == "ws") | .bench.speedup > 2' matmul.jsonl
	chained=$(jq -r 'select(.candidate.id == "ws") | .build.state' matmul.jsonl)
	bench_ws matmul "$KG_ROOT/examples/matmul/wgmma_tma_ws.diff"
	[ "$(jq -r 'select(.candidate.id == "ws") | .build.state' matmul.jsonl)" = "$chained" ]
	rm -r matmul matmul.jsonl
	new_run matmul 1100 1016 1048
	bench_chain matmul '' wgmma tma_after_wgmma ws_after_tma
	patched_hgmma matmul ws 'ok ok'
}

@test "a wrong descriptor does not pass: the wgmma_tma_ws patch with B's LBO and SBO swapped is incorrect" {
	new_run matmul
	sed 's/desc_sw128(sb + kk \* 2048, 8192, 1024)/desc_sw128(sb + kk * 2048, 1024, 8192)/' \
		"$KG_ROOT/examples/matmul/wgmma_tma_ws.diff" >swapped.diff
	[ "$(grep -c 'desc_sw128(sb + kk \* 2048, 1024, 8192)' swapped.diff)" -eq 1 ]
	bench_ws matmul swapped.diff
	[ "$(jq -r 'select(.candidate.id == "ws") | .build.status' matmul.jsonl)" = ok ]
	[[ "$(jq -r 'select(.candidate.id == "ws") | .bench.status' matmul.jsonl)" =~ ^(incorrect|crashed)$ ]]
}

@test "a wrong tensor map does not pass: with A's map over B, the patched kernel's output is incorrect" {
	new_run matmul
	jq '.KernelGraph.TensorMaps[0].Argument = "B"' matmul/spec.json >s && mv s matmul/spec.json
	bench_ws matmul "$KG_ROOT/examples/matmul/wgmma_tma_ws.diff"
	[ "$(jq -r 'select(.candidate.id == "ws") | .bench.status' matmul.jsonl)" = incorrect ]
}

@test "kg-bench: a tensor map's box over 256 is an error naming the spec's field" {
	new_run matmul
	jq '.KernelGraph.TensorMaps[0].Box[1] = "2 * block_m"' matmul/spec.json >s && mv s matmul/spec.json
	bench_ws matmul "$KG_ROOT/examples/matmul/wgmma_tma_ws.diff" \
		'{"block_m": 256, "block_n": 128, "block_k": 64, "num_warps": 12, "num_stages": 3, "group_m": 4}'
	# the baseline's own configuration (block_m 64) encodes; the candidate's does not
	[ "$(jq -r .bench.status matmul.jsonl | paste -sd' ')" = 'ok error' ]
	jq -r 'select(.candidate.id == "ws") | .bench.error' matmul.jsonl |
		grep -F 'KernelGraph.TensorMaps[0].Box[1]: "2 * block_m" gives 512, more than 256'
}

@test "kg-bench: tensor-map dimensions past the argument's buffer, or rows not a multiple of 16 bytes, are errors naming the field" {
	new_run matmul
	cp matmul/spec.json spec.orig
	jq '.KernelGraph.TensorMaps[0].Dims[1] = "ProblemSize[0] + 1"' spec.orig >matmul/spec.json
	echo '{"run": "matmul", "candidate": {"id": "baseline"}}' | timeout 120 kg-build | timeout 300 kg-bench --budget 0.2 >past.jsonl
	jq -c '.bench | {status, error}' past.jsonl >&3
	[ "$(jq -r .bench.status past.jsonl)" = error ]
	jq -r .bench.error past.jsonl | grep -F 'KernelGraph.TensorMaps[0].Dims: 16781312 elements, more than A holds (16777216)'
	jq '.KernelGraph.TensorMaps[0].Dims[0] = "ProblemSize[2] - 4"' spec.orig >matmul/spec.json
	echo '{"run": "matmul", "candidate": {"id": "baseline"}}' | timeout 120 kg-build | timeout 300 kg-bench --budget 0.2 >ragged.jsonl
	jq -c '.bench | {status, error}' ragged.jsonl >&3
	[ "$(jq -r .bench.status ragged.jsonl)" = error ]
	jq -r .bench.error ragged.jsonl | grep -F "KernelGraph.TensorMaps[0].Dims: dimension 1's stride, 8184 bytes, is not a multiple of 16"
}
