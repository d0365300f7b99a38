#!/bin/sh
# bench.sh (GPU): how steady and how cheap kg-bench's measurements are, on the saxpy kernel of
# tests/fixtures/bench at 16,777,216 elements (about 0.1 ms on an H100):
#   - the copy bandwidth --calibrate measures;
#   - the same kernel benched in RUNS separate processes: the spread of the medians;
#   - a variant that reads 3 % more bytes (slower.cu) against the baseline in PAIRS separate
#     processes: how often it is ranked slower (speedup < 1);
#   - the GPU time (sampled kernels) and the wall time one record costs.
# Usage, from the repository root, on the GPU machine: benchmarks/bench.sh [RUNS] [PAIRS]
# (default 10, 20). Writes every record to $OUT (or a temporary folder) and prints a table.
set -eu

runs=${1:-10}
pairs=${2:-20}
work=$(mktemp -d)
out=${OUT:-$work}
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME="$work/cache"
fixtures=tests/fixtures/bench

mkdir "$work/run"
cp "$fixtures/saxpy.cu" "$work/run/"
jq '.KernelSpecification.ProblemSize = [16777216] |
    (.KernelSpecification.Arguments[] | select(.Name == "n") | .FillValue) = 16777216' \
	"$fixtures/spec.json" > "$work/run/spec.json"

bin/kg-bench --calibrate > "$out/calibrate.json"
echo '{"run":"run","candidate":{"id":"baseline"}}' | (cd "$work" && "$OLDPWD/bin/kg-build") |
	(cd "$work" && "$OLDPWD/bin/kg-bench") > "$out/baseline.jsonl"
base=$(jq -r .build.state "$out/baseline.jsonl")

# same KERNEL-FILE ID: a full-source candidate built from a fixture kernel.
same() {
	jq -cn --arg s "$(cat "$fixtures/$1")" --arg b "$base" --arg id "$2" \
		'{run: "run", node: $b, candidate: {id: $id, source: $s}}' | (cd "$work" && "$OLDPWD/bin/kg-build")
}
same saxpy.cu same > "$work/same.jsonl"
same slower.cu slower > "$work/slower.jsonl"

# repeat N RECORDS OUT: benches RECORDS in N separate kg-bench processes, into OUT.
repeat() {
	: > "$3"
	i=0
	while [ "$i" -lt "$1" ]; do
		(cd "$work" && "$OLDPWD/bin/kg-bench" "$2") >> "$3"
		i=$((i + 1))
	done
}
repeat "$runs" same.jsonl "$out/same-runs.jsonl"
repeat "$pairs" slower.jsonl "$out/slower-runs.jsonl"

echo "device: $(jq -r .device "$out/calibrate.json")"
echo "calibrated copy bandwidth: $(jq '.copy_gbps | floor' "$out/calibrate.json") GB/s"
jq -rs '[.[].bench.median_ms] as $m | ($m | sort) as $s |
	"same kernel, \($m | length) runs: medians \($s[0]) to \($s[-1]) ms, spread \((($s[-1] - $s[0]) / $s[($s | length) / 2 | floor]) * 10000 | round / 100) %"' \
	"$out/same-runs.jsonl"
jq -rs '[.[].bench | select(.status == "ok")] as $b |
	"3 % more bytes, \($b | length) runs: ranked slower in \([$b[] | select(.speedup < 1)] | length); speedups \([$b[].speedup] | min) to \([$b[].speedup] | max), median \([$b[].speedup] | sort | .[length / 2 | floor])"' \
	"$out/slower-runs.jsonl"
jq -rs '[.[].bench] as $b |
	"one record of a \($b[0].median_ms) ms kernel: sampled GPU time \([$b[].gpu_ms] | max | round) ms at most, wall time \([$b[].wall_ms] | max | round) ms at most, \([$b[].samples] | max) samples at most"' \
	"$out/same-runs.jsonl"
