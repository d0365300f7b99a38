#!/usr/bin/env bats
# 40-mcgs.bats: lib/mcgs reproduces the test vectors of docs/search.md exactly. The expected
# outputs in tests/fixtures/mcgs/ are the text blocks docs/search.md shows under "Test
# vectors" (for T4c, the idempotent backup, the form kernelgraph implements).

load test_helper

vector() {
	run_tool 0 "$LIBTEST" mcgs "$1"
	assert_stderr_empty
	assert_output "$(cat "$FIXTURES/mcgs/$1.txt")"
}

@test "T1: PUCT scores and argmax, with absolute and reduction first-play urgency" { vector T1; }
@test "T1b: the growing exploration constant c(N)" { vector T1b; }
@test "T2: Dirichlet root noise mixed in, and normalized from gamma draws" { vector T2; }
@test "T3: progressive widening counts" { vector T3; }
@test "T4: the diamond graph's idempotent backup, playout by playout, stale values included" { vector T4; }
@test "T4c: the diamond with a trap, stopping at transpositions" { vector T4c; }
@test "T4d: best value below each node (max backup)" { vector T4d; }
@test "T4e: the rank rule keeps the graph acyclic" { vector T4e; }
@test "T5: log2-speedup rewards and their normalization (global, parent and siblings, h)" { vector T5; }
@test "T7d: splitmix64 and the percentile bootstrap interval of a ratio of medians" { vector T7d; }
@test "T8: Laplace and Lidstone transition priors" { vector T8; }
@test "T8b: Beta posteriors of transition success" { vector T8b; }
@test "T8c: back-off to the global method frequency" { vector T8c; }
@test "T8d: tempered priors" { vector T8d; }

@test "widening limits far from the vectors are clamped: at most 2^53, 0 when not positive" {
	run_tool 0 "$LIBTEST" mcgs widen
	assert_stderr_empty
	assert_output "$(printf '%s\n' \
		'N=1e+06 k=1e+09 alpha=1: 1000000000000000' \
		'N=1e+09 k=1e+09 alpha=1: 9007199254740992' \
		'N=1e+09 k=1e+09 alpha=0.5: 31622776601684' \
		'N=10 k=1 alpha=1e+09: 9007199254740992' \
		'N=10 k=1e+09 alpha=1e+09: 9007199254740992' \
		'N=10 k=0 alpha=1e+09: 0' \
		'N=4 k=-2 alpha=0.5: 0' \
		'N=4 k=-1e+09 alpha=1: 0' \
		'N=16 k=1e+09 alpha=0.5: 4000000000')"
}

@test "docs/search.md shows every vector's expected output as the fixtures hold it" {
	for fixture in "$FIXTURES"/mcgs/*.txt; do
		run_tool 0 python3 - "$fixture" "$KG_ROOT/docs/search.md" <<'PY'
import sys
expected, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
sys.exit(0 if "```text\n" + expected + "```\n" in doc else 1)
PY
	done
}
