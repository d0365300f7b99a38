#!/bin/sh
# tune-busy.sh (GPU): how busy kg-tune keeps one GPU: the same search run with iterations
# overlapped (the default) and one after the other (--no-overlap), each from empty caches,
# while nvidia-smi samples the GPU's utilization every 100 ms. Prints wall time, candidates
# per minute (kg-tune's per_min), the utilization's mean over each run, how long kg-init took
# (to the baseline's record) and the share of the time after it that kg-bench spent on
# records (the sum of their wall_ms; the GPU is otherwise idle).
# Usage, from the repository root, on the GPU machine: benchmarks/tune-busy.sh SPEC BUDGET
# With $OUT set, each run's events.jsonl goes there (MODE-BUDGET.events.jsonl), for timelines
# (every bench record says when it started and how long it took).
set -eu
spec=$1
budget=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
printf '| mode | builds | wall s | per_min | GPU utilization, mean %% | kg-init s | benching after kg-init %% |\n|---|---|---|---|---|---|---|\n'
for mode in overlap no-overlap; do
	opt=
	[ "$mode" = overlap ] || opt=--no-overlap
	export XDG_CACHE_HOME="$work/$mode-cache"
	nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$work/$mode.util" &
	smi=$!
	t0=$(now)
	bin/kg-tune $opt --no-llm --budget-builds "$budget" --seed 1 --outdir "$work/$mode" "$spec" >"$work/$mode.summary"
	t1=$(now)
	kill "$smi"
	wait "$smi" 2>/dev/null || true
	# seconds since the epoch of the baseline's "t" (events.jq's secs), and of the start
	busy=$(jq -L "${0%/*}" -rs --arg t0 "$t0" --arg t1 "$t1" 'include "events";
		(map(select(.build.baseline == true))[0].t | secs) as $init |
		[.[] | select(.build.baseline != true and .bench.wall_ms != null) | .bench.wall_ms] as $w |
		"\(($init - ($t0 | tonumber)) * 10 | round / 10) | \(((($w | add) // 0) / 1000 / (($t1 | tonumber) - $init)) * 100 | round)"
	' "$work/$mode/kernels/"*/events.jsonl)
	[ -z "${OUT:-}" ] || cp "$work/$mode/kernels/"*/events.jsonl "$OUT/$mode-$budget.events.jsonl"
	awk -v mode="$mode" -v wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" \
		-v builds="$(awk 'NR == 2 { print $2 }' "$work/$mode.summary")" -v busy="$busy" \
		-v per_min="$(awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "per_min") c = i } NR == 2 { print $c }' "$work/$mode.summary")" \
		'{ s += $1; n++ } END { printf "| %s | %s | %s | %s | %.0f | %s |\n", mode, builds, wall, per_min, s / n, busy }' "$work/$mode.util"
done
