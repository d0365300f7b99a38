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
