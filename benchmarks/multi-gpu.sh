#!/usr/bin/env bash
# multi-gpu.sh (GPU): what several GPUs of one host give kg-tune: candidates per minute and
# each GPU's busy fraction, for 1, 2, 4 (8) GPUs, the same specs, budget and seed.
# Usage, from the repository root after `make`, on the GPU machine:
#   benchmarks/multi-gpu.sh [SPEC...]
# Default specs: examples/matmul/matmul.json (4096^3, compile-bound: NVRTC takes longer than
# kg-bench) and the same at 8192^3 (kernel-time-bound: the baseline takes 7 ms a launch).
# BUDGET (default 120) builds a run; COUNTS (default "1 2 4 8", those the host has) the GPU
# counts; each run from an empty compile cache. Prints a markdown table; with $OUT set, each
# run's events.jsonl and summary go there too (SPEC-NGPUS.*).
#
# Columns: per_min, kg-tune's candidates per minute of the run; busy, per GPU, the sum of its
# records' bench.wall_ms over the time from kg-init's end (the baseline's record) to the
# run's end; compile s, NVRTC's time summed over the builds that compiled (not from a
# cache), which --jobs cores share; x by GPU time, the GPUs' bench.wall_ms summed over N x
# kg-tune's time (candidates / per_min), over one GPU's: the ratio had the runs measured
# equally slow candidates (a search on N GPUs picks otherwise, and may measure slower ones);
# x measuring, the candidates per minute from the first candidate's kg-bench start to the
# last one's end, over one GPU's: the rate once measuring, without the fixed costs of a run's
# start (kg-init, the first compiles) and end (the GPUs' kg-benches closing).
set -euo pipefail
budget=${BUDGET:-120}
counts=${COUNTS:-1 2 4 8}
die() { echo "multi-gpu: $*" >&2; exit 1; }
bin=${KG_BIN:-bin} # (KG_BIN: another folder of the tools, e.g. wrappers that time them)
[[ -x $bin/kg-tune && -x $bin/kg-bench ]] || die "no $bin/kg-tune: run make first"
have=$("$bin/kg-bench" --devices | wc -l) || die "kg-bench --devices: no GPU"
work=$(mktemp -d "${TMPDIR:-/tmp}/multi-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
# (jq: an event's time in seconds, events.jq's secs; a run's candidates' records)
defs='include "events";
	def candidates: map(select(.build.baseline != true and .update.child != null));'

specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
	# the matmul example at 8192^3 (its patches beside it): 8 times the work, compiled the same
	mkdir "$work/mm8192"
	if ! cp examples/matmul/* "$work/mm8192/" ||
		! jq --argjson n 8192 --arg scalars "M N K" -f benchmarks/resize.jq examples/matmul/matmul.json |
		jq '.General.BenchmarkName = "matmul_8192"' >"$work/mm8192/matmul_8192.json"; then
		die "cannot write the matmul at 8192"
	fi
	specs=(examples/matmul/matmul.json "$work/mm8192/matmul_8192.json")
fi

printf '| spec | GPUs | builds | wall s | per_min | x one GPU | x by GPU time | x measuring | busy per GPU %% | compile s |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for spec in "${specs[@]}"; do
	name=$(basename "$spec" .json) one='' one_share='' one_steady=''
	for n in $counts; do
		[ "$n" -le "$have" ] || continue
		gpus=$(seq -s, 0 $((n - 1)))
		dir=$work/$name-$n
		export XDG_CACHE_HOME=$dir/cache
		t0=$(now)
		"$bin/kg-tune" --no-llm --budget-builds "$budget" --seed 1 --gpus "$gpus" --outdir "$dir/out" "$spec" \
			>"$dir.summary" 2>"$dir.err" || { echo "| $name | $n | failed: $(tail -1 "$dir.err") |"; continue; }
		t1=$(now)
		events=$(echo "$dir/out/kernels/"*/events.jsonl)
		per_min=$(awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "per_min") c = i } NR == 2 { print $c }' "$dir.summary")
		# the GPUs' share of kg-tune's time measuring: bench time / (N x candidates / per_min);
		# candidates per minute while the GPUs measure: from the first candidate's start to the
		# last one's end, leaving out kg-init, the first compiles and the GPUs' closing
		read -r gpu_share steady < <(jq -L "${0%/*}" -rs --argjson n "$n" --argjson per_min "$per_min" "$defs"'
			candidates as $c
			| (([$c[].bench.wall_ms // 0] | add // 0) / 1000 / ($n * ($c | length) * 60 / $per_min)) as $share
			| [$c[].bench | select(.started) | (.started | secs) as $s | [$s, $s + .wall_ms / 1000]]
			| "\($share) \(length * 60 / ((map(.[1]) | max) - (map(.[0]) | min)))"' "$events")
		[ -n "$one" ] || one=$per_min one_share=$gpu_share one_steady=$steady
		jq -L "${0%/*}" -rs --arg t1 "$t1" --argjson n "$n" --arg wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" \
			--arg name "$name" --arg per_min "$per_min" --arg one "$one" \
			--argjson share "$gpu_share" --argjson one_share "$one_share" \
			--argjson steady "$steady" --argjson one_steady "$one_steady" "$defs"'
			(map(select(.build.baseline == true))[0].t | secs) as $init |
			(($t1 | tonumber) - $init) as $span |
			candidates as $c |
			[range($n) as $g | [$c[] | select(.bench.gpu == $g) | .bench.wall_ms // 0] | add // 0
			 | . / 1000 / $span * 100 | round] as $busy |
			"| \($name) | \($n) | \($c | length) | \($wall) | \($per_min) | \(($per_min | tonumber) / ($one | tonumber) * 100 | round / 100) | \($n * $share / $one_share * 100 | round / 100) | \($steady / $one_steady * 100 | round / 100) | \($busy | map(tostring) | join(" / ")) | \([$c[].build | select(.cached != true and .reused != true) | .compile_ms // 0] | add / 1000 * 10 | round / 10) |"
		' "$events"
		[ -z "${OUT:-}" ] || cp "$events" "$OUT/$name-$n.events.jsonl"
		[ -z "${OUT:-}" ] || cp "$dir.summary" "$OUT/$name-$n.summary"
	done
done
