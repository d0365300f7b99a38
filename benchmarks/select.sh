#!/bin/bash
# select.sh: times RUNS consecutive MCGS steps, each one pick (kg-select) and one update
# (kg-select --update) with a new child, on a synthetic graph of NODES nodes (default 10000)
# made by tests/tools/make_graph.py: load RUN/graph.bin, decide, save (a delta, or now and
# then a new checkpoint: the max shows those).
# Usage, from the repository root after make: benchmarks/select.sh [NODES] [RUNS]
# Times are wall clock from bash's EPOCHREALTIME (no process of its own), process start and
# exit included.
set -eu

nodes=${1:-10000}
runs=${2:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run="$work/out/kernels/k"
mkdir -p "$run"
python3 tests/tools/make_graph.py "$nodes" 42 > "$run/graph.json"
echo "graph: $nodes nodes, $(jq '.edges | length' "$run/graph.json") edges, $(wc -c < "$run/graph.json") bytes of JSON"
# The first step imports graph.json into graph.bin; it is not timed.
bin/kg-select "$run" > /dev/null
rm "$run/graph.json"
echo "graph.bin: $(wc -c < "$run/graph.bin") bytes, graph.blobs: $(wc -c < "$run/graph.blobs") bytes"

# Each line of times: the pick and the update, in microseconds.
: > "$work/times"
i=0
while [ "$i" -lt "$runs" ]; do
	start=${EPOCHREALTIME/./}
	bin/kg-select -v "$run" > "$work/pick.jsonl" 2>> "$work/log"
	mid=${EPOCHREALTIME/./}
	jq -c --arg i "$i" '. + {candidate: {id: "new", method: "tile"}, build: {status: "ok", state: ("NEW" + $i), config: {x: 1}},
		bench: {status: "ok", median_ms: 0.9, speedup: 1.1, speedup_ci: [1.05, 1.15]}}' "$work/pick.jsonl" |
		head -1 > "$work/ev.jsonl"
	mid2=${EPOCHREALTIME/./}
	bin/kg-select -v --update "$run" "$work/ev.jsonl" > /dev/null 2>> "$work/log"
	end=${EPOCHREALTIME/./}
	echo "$((mid - start)) $((end - mid2))" >> "$work/times"
	i=$((i + 1))
done
# median, min and max of column COL of the timings, in milliseconds
summary() {
	awk -v col="$1" '{ print $col }' "$work/times" | sort -n |
		awk -v name="$2" '{ t[NR] = $1 } END { printf "%-12s median %.2f ms, min %.2f ms, max %.2f ms\n", name, t[int((NR + 1) / 2)] / 1000, t[1] / 1000, t[NR] / 1000 }'
}
awk '{ print $1, $2, $1 + $2 }' "$work/times" > "$work/times3" && mv "$work/times3" "$work/times"
summary 1 pick:
summary 2 update:
summary 3 pick+update:
# The decision alone (kg-select -v): the odd lines are picks, the even ones updates.
sed -n 's/.*loaded in \([0-9.]*\) ms, decided in \([0-9.]*\) ms, saved in \([0-9.]*\) ms/\1 \2 \3/p' "$work/log" |
	awk 'NR % 2 { pl += $1; pd += $2; ps += $3; n++ } !(NR % 2) { ul += $1; ud += $2; us += $3 }
	END { printf "mean of %d: pick load %.2f, decide %.3f, save %.2f ms; update load %.2f, decide %.3f, save %.2f ms\n",
	      n, pl / n, pd / n, ps / n, ul / n, ud / n, us / n }'
