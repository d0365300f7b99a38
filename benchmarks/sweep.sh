#!/bin/sh
# sweep.sh (GPU): records a replay table: every valid configuration of a spec (or N random
# ones) built, checked and timed against the baseline, exported as T4 (kg-bench --t4), so
# that kg-tune --replay runs the same search on any machine.
# Usage, from the repository root: benchmarks/sweep.sh SPEC OUT.json [N] [KG-BENCH OPTION]...
set -eu
spec=$1 table=$2
shift 2
sample=
case ${1:-} in [0-9]*) sample=$1; shift ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=$(bin/kg-init -q --bench-opt "$*" "$spec" "$work/out")
# The baseline is what every configuration is checked against: checked itself where the helper
# is built (make benchtools), against an independent computation.
checker=build/release/benchmarks/check-reference
[ ! -x "$checker" ] || "$checker" "$run"
if [ -n "$sample" ]; then
	bin/kg-propose --random "$sample" --seed 1 --spec "$run/spec.json"
else
	bin/kg-propose --exhaustive --spec "$run/spec.json"
fi | jq -c --arg run "$run" '. + {run: $run} | .candidate.id |= "sweep-\(.)"' |
	bin/kg-build -q --jobs "$(nproc)" | bin/kg-bench -q "$@" > "$work/sweep.jsonl"
# the baseline (from kg-init) and the sweep, as one table
cat "$run/events.jsonl" "$work/sweep.jsonl" | bin/kg-bench --t4 > "$table"
jq -r '"\(.results | length) measurements of \(.results | map(.configuration) | unique | length) configurations: \([.results[] | select(.invalidity == "correct")] | length) correct; fastest \([.results[] | select(.invalidity == "correct") | .measurements[] | select(.name == "time") | .value] | min) ms"' "$table"
