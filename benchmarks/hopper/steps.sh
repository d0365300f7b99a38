#!/bin/bash
# steps.sh (GPU): the matmul's ready patches as steps, each built by kg-build on the state the one
# before built (the wmma baseline → wgmma → tma_after_wgmma → ws_after_tma, each in its entry's
# Config, and the TMA kernel in three more configurations), timed by kg-bench (CUPTI median and
# the CUDA events median after an L2 flush) and checked against the baseline, which
# check-reference checks against cuBLAS and times cuBLAS beside (events, L2 flushed). Prints a
# table row per variant; writes $OUT/steps.md and $OUT/steps.jsonl.
# Usage, from the repository root (bin/ and build/release/benchmarks/check-reference built):
# benchmarks/hopper/steps.sh [SIZE]... (default 4096 2048).
set -u
[ $# -gt 0 ] || set -- 4096 2048
out=${OUT:-$(mktemp -d)}
root=$PWD
work=$(mktemp -d)
export XDG_CACHE_HOME=$work/cache
spec=$root/examples/matmul/matmul.json
entry() { jq -c --arg n "$1" '.KernelGraph.Patches[] | select(.Name == $n)' "$spec"; }
# step NODE ID ENTRY [CONFIG]: ENTRY's patch at NODE in CONFIG (default its Config): a build record
step() {
	local config=${4:-$(entry "$3" | jq -c .Config)}
	jq -cn --arg b "$1" --arg id "$2" --rawfile p "$root/examples/matmul/$(entry "$3" | jq -r .PatchFile)" \
		--argjson c "$config" '{run: "matmul", node: $b, candidate: {id: $id, patch: $p, config: $c}}' | "$root/bin/kg-build"
}
state() { jq -r .build.state "$1"; }
echo "| size | step | configuration | registers | CUPTI ms | events ms | cuBLAS / it (events) | check |" >"$out/steps.md"
echo "|---|---|---|---|---|---|---|---|" >>"$out/steps.md"
for size in "$@"; do
	d=$work/$size
	mkdir -p "$d/matmul"
	jq --argjson n "$size" --arg scalars "M N K" -f "$root/benchmarks/resize.jq" "$spec" |
		jq '.KernelSpecification.KernelFile = "matmul.cu"' >"$d/matmul/spec.json"
	cp "$root/examples/matmul/matmul.cu" "$d/matmul/"
	cd "$d" || exit 1
	echo '{"run": "matmul", "candidate": {"id": "baseline"}}' | "$root/bin/kg-build" >base.b
	step "$(state base.b)" wgmma wgmma >wgmma.b
	step "$(state wgmma.b)" tma_after_wgmma tma_after_wgmma >tma.b
	step "$(state wgmma.b)" tma_after_wgmma tma_after_wgmma '{"block_m": 128, "block_n": 256, "block_k": 64, "num_warps": 8, "num_stages": 3, "group_m": 8}' >tma3.b
	step "$(state wgmma.b)" tma_after_wgmma tma_after_wgmma '{"block_m": 128, "block_n": 128, "block_k": 64, "num_warps": 8, "num_stages": 4, "group_m": 8}' >tma4.b
	step "$(state wgmma.b)" tma_after_wgmma tma_after_wgmma '{"block_m": 64, "block_n": 256, "block_k": 64, "num_warps": 4, "num_stages": 4, "group_m": 8}' >tma5.b
	step "$(state tma.b)" ws_after_tma ws_after_tma >ws.b
	cat base.b wgmma.b tma.b tma3.b tma4.b tma5.b ws.b | "$root/bin/kg-bench" --budget 1 >bench.jsonl
	"$root/build/release/benchmarks/check-reference" "$d/matmul" >check.json
	jq -c --slurpfile c check.json --argjson size "$size" '{size: $size, step: .candidate.id, config: .build.config,
		registers: .build.registers, status: .bench.status, cupti_ms: .bench.median_ms, events_ms: .bench.events_median_ms,
		check: .bench.check.passed, max_abs_err: .bench.check.max_abs_err, cublas_ms: $c[0].cublas_ms,
		reference: ($c[0] | {check, max_abs_err})} | .vs_cublas = (if .events_ms then .cublas_ms / .events_ms else null end)' \
		bench.jsonl | tee -a "$out/steps.jsonl" |
		jq -r 'def r: . * 1e4 | round / 1e4;
			"| \(.size)³ | \(.step) | \(.config | "\(.block_m)×\(.block_n)×\(.block_k), \(.num_warps) warps, \(.num_stages) stages, group_m \(.group_m)") | \(.registers) | \(.cupti_ms // "-" | if type == "number" then r else . end) | \(.events_ms // "-" | if type == "number" then r else . end) | \(if .vs_cublas then "\(.vs_cublas * 1000 | round / 1000)×" else .status end) | \(if .step == "baseline" then "vs cuBLAS: \(.reference.check) (max abs err \(.reference.max_abs_err)), cuBLAS \(.cublas_ms | r) ms" else "vs baseline: \(.check) (max abs err \(.max_abs_err))" end) |"' >>"$out/steps.md"
	cd "$root" || exit 1
done
cat "$out/steps.md"
