#!/bin/sh
# metrics.sh (GPU): kg-bench --metrics on each example named (default: all): its baseline (by
# kg-init) and the fastest correct configuration of its recorded table (NAME_H100_T4.json),
# in one kg-bench process, twice (the first collection of a process sets the profiler up,
# the second shows what a candidate costs after that). Writes the records to $OUT/metrics-NAME.jsonl and prints a table:
# the time, the main figures, what collecting them cost and the bottleneck model's class.
# Usage, from the repository root: benchmarks/metrics.sh [NAME]...
set -eu
out=${OUT:-.}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME="$work/cache"
libtest=${KG_TEST_DRIVER:-build/release/tests/kg-libtest}
[ $# -gt 0 ] || set -- $(ls examples)
printf '| example | variant | ms | SM %% | DRAM %% | mem %% | occ. ach./theor. %% (limiter) | L1 hit %% | L2 hit %% | bank confl. | tensor %% | FMA %% | IPC | top stall (%%) | cost ms (passes) | bottleneck (confidence) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for name in "$@"; do
	run=$(bin/kg-init -q --bench-opt "--metrics --budget 0.3" "examples/$name/$name.json" "$work/out")
	best=$(jq -c '[.results[] | select(.invalidity == "correct")] | min_by(.measurements[] | select(.name == "time") | .value)
		| .configuration' "examples/$name/${name}_H100_T4.json")
	jq -cn --arg run "$run" --arg b "$(jq -r .state "$run/baseline.json")" --argjson c "$best" \
		'{run: $run, node: $b, candidate: {id: "best", config: $c}}, {run: $run, node: $b, candidate: {id: "again", config: $c}}' |
		bin/kg-build -q | bin/kg-bench -q --metrics --budget 0.3 >"$work/best.jsonl"
	jq -c 'select(.update.root)' "$run/events.jsonl" | cat - "$work/best.jsonl" | while read -r record; do
		# the bottleneck model's verdict on each (lib/bottleneck, through the test driver)
		printf '%s\n' "$record" >"$work/record.json"
		jq .bench.metrics "$work/record.json" >"$work/metrics.json"
		verdict=$("$libtest" bottleneck "$work/metrics.json" "$work/record.json")
		jq -c --argjson b "$verdict" '. + {bottleneck: $b}' "$work/record.json"
	done >"$out/metrics-$name.jsonl"
	jq -r --arg name "$name" -f benchmarks/metrics-row.jq "$out/metrics-$name.jsonl"
done
