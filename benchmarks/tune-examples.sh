#!/bin/sh
# tune-examples.sh (GPU): kg-tune with the built-in rules on each example named (default: all)
# with a budget of BUDGET builds, then the run's baseline checked against an independent
# computation (and cuBLAS timed on the matmuls) by build/release/benchmarks/check-reference.
# Prints one table row per example; the runs (without reference outputs and cubins) go to
# $OUT/runs.tar.gz for kg-report; KG_WORK names where the runs are made (default: a new
# temporary directory).
# Usage, from the repository root: benchmarks/tune-examples.sh BUDGET [NAME]... (KG_BENCH_OPTS:
# kg-bench's)
set -u
budget=$1
shift
out=${OUT:-$(mktemp -d)}
work=${KG_WORK:-$(mktemp -d)} # the runs: outside $OUT, which brings back only a few files
export XDG_CACHE_HOME=$work/cache
bin/kg-bench --calibrate -q >/dev/null
[ $# -gt 0 ] || set -- $(ls examples)
now() { date +%s.%N; }
echo "| example | baseline ms | best ms | speedup | % copy bw | cuBLAS ms | % of cuBLAS | builds | wall s | baseline check |" >"$out/table.md"
for name in "$@"; do
	t0=$(now)
	bin/kg-tune -q --no-llm --budget-builds "$budget" --outdir "$work/runs" --bench-opt "${KG_BENCH_OPTS:-}" \
		"examples/$name/$name.json" >>"$out/summaries.txt"
	echo "$name: kg-tune exit $?"
	wall=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')
	run=$work/runs/kernels/$name
	build/release/benchmarks/check-reference "$run" | tee "$work/$name.check.json" >>"$out/checks.jsonl"
	jq -r --slurpfile check "$work/$name.check.json" --arg name "$name" --arg wall "$wall" -s '
		def r(x): if x == null then "-" else (x * 1e6 | round / 1e6 | tostring) end;
		(map(select(.build.baseline == true and .bench.status == "ok"))[0].bench.median_ms) as $base |
		(map(select(.bench.status == "ok")) | min_by(.bench.median_ms).bench) as $best |
		$check[0] as $c |
		"| \($name) | \(r($base)) | \(r($best.median_ms)) | \(r($base / $best.median_ms))× | \(r($best.pct_peak_bw)) | \(r($c.cublas_ms)) | \(if $c.cublas_ms then r(100 * $c.cublas_ms / $best.median_ms) else "-" end) | \(map(select(.build != null and .build.baseline != true)) | length) | \($wall) | \($c.check) (max abs err \($c.max_abs_err)) |"
	' "$run/events.jsonl" >>"$out/table.md"
done
tar -C "$work" -czf "$out/runs.tar.gz" --exclude reference --exclude '*.cubin' --exclude '*.ptx' runs
cat "$out/table.md"
