#!/bin/bash
# tune.sh (GPU): kg-tune --no-llm with BUDGET builds (default 80) on the matmul and fused examples
# at each SIZE^3 (default 2048 and 4096), then each run's baseline checked against cuBLAS by
# check-reference, which times cuBLAS on the same inputs (cublasGemmEx, fp16 in, fp32 accumulate,
# L2 flushed) and, for the fused example, the activation's memory pass. Prints a table row per run:
# the best variant's time, its edits (the ready patches and moves on its path), TFLOP/s and the
# ratio to cuBLAS (+ the pass), both timed with CUDA events after an L2 flush (kg-bench's events
# median; its primary CUPTI median, kernel time alone, is shown too); kg-bench checked the best against the baseline, which
# check-reference checked against cuBLAS. Writes $OUT/tune.md, $OUT/tune.jsonl, $OUT/runs.tar.gz.
# Usage, from the repository root (bin/ and build/release/benchmarks/check-reference built):
# benchmarks/hopper/tune.sh [BUDGET [SIZE]...]; NAMES overrides the examples.
set -u
budget=${1:-80}
shift
[ $# -gt 0 ] || set -- 2048 4096
out=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
export XDG_CACHE_HOME=$work/cache
bin/kg-bench --calibrate -q >/dev/null
echo "| example | size | baseline ms | best ms (CUPTI) | best ms (events) | TFLOP/s (events) | cuBLAS ms (events) | cuBLAS / best (events) | builds | edits of the best (path) | config | check |" >"$out/tune.md"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|" >>"$out/tune.md"
for size in "$@"; do
	for name in ${NAMES:-matmul fused_matmul_act}; do
		spec=examples/$name/${name}_$size.json # beside the original: KernelFile and PatchFile resolve
		jq --argjson n "$size" --arg scalars "M N K" -f benchmarks/resize.jq "examples/$name/$name.json" >"$spec"
		t0=$(date +%s)
		bin/kg-tune -q --no-llm --budget-builds "$budget" --outdir "$work/runs-$size" "$spec" >>"$out/summaries.txt" 2>&1
		echo "$name $size: kg-tune exit $? in $(($(date +%s) - t0)) s"
		rm -f "$spec"
		run=$work/runs-$size/kernels/$name
		build/release/benchmarks/check-reference "$run" >"$work/check.json"
		jq -c -s --slurpfile c "$work/check.json" --arg name "$name" --argjson size "$size" '
			. as $ev |
			def chain($s; $n): if $n == 0 then [] else
				($ev | map(select(.update.child == $s and .node != null and .node != $s))[0]) as $e |
				if $e == null then [] else chain($e.node; $n - 1) + [($e.candidate.library // $e.candidate.method // "?")] end end;
			(map(select(.build.baseline == true and .bench.status == "ok"))[0].bench.median_ms) as $base |
			(map(select(.bench.status == "ok")) | min_by(.bench.median_ms)) as $best |
			{example: $name, size: $size, baseline_ms: $base, best_ms: $best.bench.median_ms, best_events_ms: $best.bench.events_median_ms,
			 flops: $best.bench.flops, timer: $best.bench.timer,
			 best_check: $best.bench.check, config: $best.build.config, edited: $best.build.edited,
			 edits: chain($best.build.state; 50),
			 builds: map(select(.build != null and .build.baseline != true)) | length,
			 failed_builds: map(select(.build != null and .build.status != "ok")) | length,
			 edited_measured: map(select(.build.edited == true and .bench.status == "ok")) | length,
			 cublas_ms: $c[0].cublas_ms, activation_pass_ms: $c[0].activation_pass_ms,
			 reference: ($c[0] | {check, max_abs_err})}
			| .vs_cublas = ((.cublas_ms + (.activation_pass_ms // 0)) / .best_events_ms)' "$run/events.jsonl" | tee -a "$out/tune.jsonl" |
			jq -r 'def r: . * 1e4 | round / 1e4;
				"| \(.example) | \(.size)³ | \(.baseline_ms | r) | \(.best_ms | r) | \(.best_events_ms | r) | \(.flops / .best_events_ms / 1e9 | round) | \(.cublas_ms | r)\(if .activation_pass_ms then " + \(.activation_pass_ms | r)" else "" end) | \(.vs_cublas * 1000 | round / 1000)× | \(.builds) (\(.failed_builds) failed, \(.edited_measured) edited measured) | \(.edits | join(" → ")) | \(.config | to_entries | map("\(.key)=\(.value)") | join(" ")) | baseline vs cuBLAS: \(.reference.check) (max abs err \(.reference.max_abs_err)); best vs baseline: \(.best_check.passed) |"' >>"$out/tune.md"
	done
done
tar -C "$work" -czf "$out/runs.tar.gz" --exclude reference --exclude '*.cubin' --exclude '*.ptx' --exclude cache .
cat "$out/tune.md"
