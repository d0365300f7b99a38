#!/bin/sh
# select.sh: times one pick (kg-select) and one update (kg-select --update) on a synthetic
# graph of NODES nodes (default 10000) made by tests/tools/make_graph.py, the way each MCGS
# iteration uses them: load RUN/graph.json, decide, save it.
# Usage, from the repository root after make: benchmarks/select.sh [NODES] [RUNS]
set -eu

nodes=${1:-10000}
runs=${2:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run="$work/out/kernels/k"
mkdir -p "$run"
python3 tests/tools/make_graph.py "$nodes" 42 > "$run/graph.json"
cp "$run/graph.json" "$work/graph.orig"
echo "graph: $nodes nodes, $(jq '.edges | length' "$run/graph.json") edges, $(wc -c < "$run/graph.json") bytes"

# best-of and median of RUNS timings of CMD (reading stdin from FILE), in milliseconds
: > "$work/times"
i=0
while [ "$i" -lt "$runs" ]; do
	cp "$work/graph.orig" "$run/graph.json"
	start=$(date +%s%N)
	bin/kg-select -v "$run" > "$work/pick.jsonl" 2>> "$work/log"
	mid=$(date +%s%N)
	jq -c '. + {candidate: {id: "new", method: "tile"}, build: {status: "ok", state: "NEW", config: {x: 1}},
		bench: {status: "ok", median_ms: 0.9, speedup: 1.1, speedup_ci: [1.05, 1.15]}}' "$work/pick.jsonl" |
		head -1 > "$work/ev.jsonl"
	mid2=$(date +%s%N)
	bin/kg-select -v --update "$run" "$work/ev.jsonl" > /dev/null 2>> "$work/log"
	end=$(date +%s%N)
	echo "$(( (mid - start) / 1000 )) $(( (end - mid2) / 1000 ))" >> "$work/times"
	i=$((i + 1))
done
sort -n "$work/times" | awk '{ p[NR] = $1 } END { printf "pick:   median %.2f ms, min %.2f ms\n", p[int((NR + 1) / 2)] / 1000, p[1] / 1000 }'
sort -n -k2 "$work/times" | awk '{ u[NR] = $2 } END { printf "update: median %.2f ms, min %.2f ms\n", u[int((NR + 1) / 2)] / 1000, u[1] / 1000 }'
# The decision alone (kg-select -v): the odd lines are picks, the even ones updates.
sed -n 's/.*loaded in \([0-9.]*\) ms, decided in \([0-9.]*\) ms, saved in \([0-9.]*\) ms/\1 \2 \3/p' "$work/log" |
	awk 'NR % 2 { pl += $1; pd += $2; ps += $3; n++ } !(NR % 2) { ul += $1; ud += $2; us += $3 }
	END { printf "mean of %d: pick load %.2f, decide %.3f, save %.2f ms; update load %.2f, decide %.3f, save %.2f ms\n",
	      n, pl / n, pd / n, ps / n, ul / n, ud / n, us / n }'
