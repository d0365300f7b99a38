#!/usr/bin/env bats
# 50-kg-select-e2e.bats: kg-select's long cases (make check; tests/50-kg-select.bats has the
# rest): hundreds of updates through the checkpoint and its deltas.

load ../test_helper
load ../select_helper

@test "deltas are folded into a new checkpoint once they outgrow it; export and import round-trip" {
	start
	kg-select "$RUN" >pick.jsonl
	shrank=0 last=0
	for i in $(seq 1 160); do
		jq -c --arg i "$i" '{node, node_id, candidate: {id: ("c" + $i), method: "tile"}}' pick.jsonl | kg-select --update "$RUN" >/dev/null
		size=$(stat -c %s "$RUN/graph.bin")
		[ "$size" -lt "$last" ] && shrank=1
		last=$size
	done
	[ "$shrank" = 1 ]
	kg-select --export "$RUN" >exported.json
	[ "$(jq '.edges | length' exported.json)" = 160 ]
	# More new edges in one process than the checkpoint left room for: the arrays move to the heap.
	for i in $(seq 1 400); do
		jq -c --arg i "$i" '{node, node_id, candidate: {id: ("d" + $i), method: "unroll"}}' pick.jsonl
	done | kg-select --update "$RUN" >/dev/null
	kg-select --export "$RUN" >exported.json
	[ "$(jq '[.edges[] | select(.method == "unroll")] | length' exported.json)" = 400 ]
	[ "$(jq -r '.edges[559].candidate.id' exported.json)" = d400 ]
	mkdir -p copy/kernels/k
	cp exported.json copy/kernels/k/graph.json
	[ "$(kg-select --export copy/kernels/k)" = "$(cat exported.json)" ]
	kg-select copy/kernels/k >/dev/null # a pick saves: the imported graph is in graph.bin from now on
	rm copy/kernels/k/graph.json
	[ "$(kg-select --export copy/kernels/k | jq -c 'del(.iter)')" = "$(jq -c 'del(.iter)' exported.json)" ]
}
