#!/bin/sh
# overhead.sh (GPU): what kg-bench costs around the GPU time it samples. For each example
# named: its run made by kg-init, then N random configurations built and benched in one
# kg-bench process; prints, per example, the median of wall_ms - gpu_ms (the host and the
# unsampled GPU work of a record: fills, checks, warm-up, flushes) and of each phase.
# Usage, from the repository root, on the GPU machine: benchmarks/overhead.sh N NAME...
# Records go to $OUT/NAME.benched.jsonl (or a temporary folder).
set -eu
n=$1
shift
work=${KG_WORK:-$(mktemp -d)}
out=${OUT:-$work}
export XDG_CACHE_HOME="$work/cache"
now() { date +%s.%N; }
printf '| example | candidates | ok | median wall - gpu ms | p90 | fill | check | warmup | time | gpu | setup (first) | kg-bench s |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for name in "$@"; do
	bin/kg-init -q "examples/$name/$name.json" "$work/runs" >/dev/null
	run=$work/runs/kernels/$name
	bin/kg-propose --random "$n" --seed 1 --spec "$run/spec.json" | jq -c --arg run "$run" '.run = $run' |
		bin/kg-build -q -j "$(nproc)" >"$work/$name.built.jsonl"
	t0=$(now)
	bin/kg-bench -q --run "$run" "$work/$name.built.jsonl" >"$out/$name.benched.jsonl"
	t1=$(now)
	jq -rs --arg name "$name" --arg secs "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" '
		def med: sort | .[length / 2 | floor];
		def p90: sort | .[(length * 9 / 10) | floor];
		def r: . * 10 | round / 10;
		[.[].bench | select(.gpu_ms != null)] as $b |
		"| \($name) | \(length) | \([.[] | select(.bench.status == "ok")] | length) | \([$b[] | .wall_ms - .gpu_ms] | med | r) | \([$b[] | .wall_ms - .gpu_ms] | p90 | r) | \([$b[].fill_ms] | med | r) | \([$b[].check_ms] | med | r) | \([$b[].warmup_ms] | med | r) | \([$b[].time_ms] | med | r) | \([$b[].gpu_ms] | med | r) | \($b[0].setup_ms | r) | \($secs) |"
	' "$out/$name.benched.jsonl"
done
