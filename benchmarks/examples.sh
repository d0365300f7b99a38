#!/bin/sh
# examples.sh (GPU): records the replay table of each example named (default: all), every
# configuration measured (benchmarks/sweep.sh), into $OUT/NAME_T4.json, and prints how many
# configurations passed the correctness check and the fastest.
# Usage, from the repository root: benchmarks/examples.sh [NAME]... (KG_BENCH_OPTS: kg-bench's)
set -u
out=${OUT:-.}
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$(mktemp -d)}
bin/kg-bench --calibrate -q >/dev/null
[ $# -gt 0 ] || set -- $(ls examples)
for name in "$@"; do
	start=$(date +%s)
	printf '%s: ' "$name"
	# shellcheck disable=SC2086
	benchmarks/sweep.sh "examples/$name/$name.json" "$out/${name}_T4.json" ${KG_BENCH_OPTS:-}
	jq -r '[.results[].invalidity] | group_by(.) | map("\(.[0]) \(length)") | join(", ")' "$out/${name}_T4.json"
	echo "  $(($(date +%s) - start)) s"
done
