#!/usr/bin/env bats
# 81-kg-report.bats: kg-report's outputs pinned on a stored run (tests/fixtures/report: 40
# builds of examples/vector_add replayed with a fixed seed, and two failures; make.sh there
# remakes it), so that moving its parts around (the graph into kg-select, the page and the
# plots apart from what they show) changes no byte of what it writes.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	cp -r "$FIXTURES/report/run" report-run
}

# same_page EXPECTED ACTUAL: index.html is byte-identical; under other gnuplot or Graphviz
# versions than drew the fixture's, the SVGs inlined in it (their drawings of what the
# fixture pins elsewhere) are left out of the comparison, and the rest must still match.
same_page() {
	if [ "$({ gnuplot --version; dot -V 2>&1; })" = "$(cat "$FIXTURES/report/expected/versions")" ]; then
		cmp "$1" "$2"
	else
		echo "# gnuplot or dot differ from the fixture's: index.html compared without its SVGs" >&3
		diff <(sed '/^<figure/,/<\/figure>$/d' "$1") <(sed '/^<figure/,/<\/figure>$/d' "$2")
	fi
}

@test "kg-report writes today's graph.dot, index.html, trace.md and table, byte for byte" {
	run_tool 0 kg-report report-run
	assert_stderr_empty
	diff "$FIXTURES/report/expected/stdout" <(printf '%s\n' "$output")
	cmp "$FIXTURES/report/expected/graph.dot" report-run/report/graph.dot
	cmp "$FIXTURES/report/expected/trace.md" report-run/trace.md
	same_page "$FIXTURES/report/expected/index.html" report-run/report/index.html
}

@test "kg-report --graph-nodes 8: the incumbent's path and the fastest with what leads to them, byte for byte" {
	run_tool 0 kg-report -q --graph-nodes 8 --report-dir capped report-run
	assert_stderr_empty
	cmp "$FIXTURES/report/expected/graph-8.dot" capped/graph.dot
	# the picture is capped, and the failures are grey in the full one
	[ "$(grep -c '^  n[0-9]* \[label=' capped/graph.dot)" -eq 8 ]
	[ "$(grep -c 'fillcolor="#d9d9d9"' "$FIXTURES/report/expected/graph.dot")" -eq 2 ]
}

@test "kg-select --draw json: the nodes and edges of the DOT, with their fills, builds and the incumbent's path" {
	run_tool 0 kg-select --draw json report-run
	assert_stderr_empty
	drawing=$output
	dot=$FIXTURES/report/expected/graph.dot
	# a node per variant with the DOT's fill, an edge per evaluated candidate
	diff <(jq -r '.nodes[] | "n\(.id) \(.fill)"' <<<"$drawing") \
		<(sed -n 's/^  \(n[0-9]*\) \[label=.*fillcolor="\(#[0-9a-f]*\)".*/\1 \2/p' "$dot")
	diff <(jq -r '.edges[] | "n\(.from) -> n\(.to)"' <<<"$drawing") <(grep -o '^  n[0-9]* -> n[0-9]*' "$dot" | sed 's/^  //')
	[ "$(jq -r '.incumbent' <<<"$drawing")" = "$(jq -r '.incumbent' report-run/graph.json)" ]
	[ "$(jq -c '[.nodes[] | select(.on_path) | .id]' <<<"$drawing")" = '[0,4,6,8,11]' ]
	[ "$(jq -c '[.nodes[] | select(.fill == "#d9d9d9") | [.build, .status]]' <<<"$drawing")" = '[[41,"compile_failed"],[42,"incorrect"]]' ]
	[ "$(jq -r '.nodes_total' <<<"$drawing")" -eq 43 ]
	run_tool 0 kg-select --draw json --graph-nodes 8 report-run
	[ "$(jq '.nodes | length' <<<"$output")" -eq 8 ]
}

@test "kg-select --draw: a transposition's edge is dashed; its usage errors" {
	jq -c 'if .update.child_id == 13 then .update.transposition = true else . end' report-run/events.jsonl >e &&
		mv e report-run/events.jsonl
	run_tool 0 kg-select --draw dot report-run
	assert_line '  n1 -> n13 [label="retune_configuration\nblock_size_x 1024 → 128, items_per_thread 2 → 8", style=dashed];'
	[ "$(grep -c 'style=dashed];$' <<<"$output")" -eq 1 ]
	run_tool 2 kg-select --draw svg report-run
	assert_stderr "$(printf '%s\n' "kg-select: --draw: 'svg' is not dot or json" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --graph-nodes 3 report-run
	assert_stderr "$(printf '%s\n' "kg-select: --graph-nodes goes with --draw" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --draw dot --graph-nodes 0 report-run
	assert_stderr "$(printf '%s\n' "kg-select: --graph-nodes: '0': out of range" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --export --draw dot report-run
	assert_stderr "$(printf '%s\n' "kg-select: --export and --draw do not go together" "Try 'kg-select --help' for more information.")"
	# the log is what it draws from: without it, nothing is drawn
	rm report-run/events.jsonl
	run_tool 4 kg-select --draw dot report-run
	[ -z "$output" ]
	[[ $stderr == *events.jsonl* ]]
}

@test "kg-report draws no graph itself (kg-select --draw does) and reads the run's log in one place" {
	run ! grep -n 'child_id' "$KG_ROOT/pipelines/kg-report" "$KG_ROOT"/pipelines/report-*.sh
	# the plots and the page read what kg-report computed, never the log
	run ! grep -n 'events\.jsonl' "$KG_ROOT"/pipelines/report-*.sh
	# kg-report reads it once (rows.jsonl); else it only checks it is there and has kg-bench export it
	run grep -n '"$run/events.jsonl"' "$KG_ROOT/pipelines/kg-report"
	[ "${#lines[@]}" -eq 3 ]
	assert_line --regexp '^[0-9]+:	"\$run/events.jsonl" >"\$rows" \|\| '
	assert_line --regexp '^[0-9]+:\[ -s "\$run/events.jsonl" \] \|\| '
	assert_line --regexp '^[0-9]+:kg-bench --t4 "\$run/events.jsonl" '
}
