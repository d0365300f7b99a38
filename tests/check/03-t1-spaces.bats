#!/usr/bin/env bats
# 03-t1-spaces.bats: the configuration space of large specs agrees with CPython's own count and
# order (make check; tests/03-t1.bats has the spec loading and its errors).

load ../test_helper

@test "counts of the construct-coverage spec agree with CPython" {
	run_tool 0 kg-propose --exhaustive --count --spec "$FIXTURES/t1/constructs.json"
	assert_output 17820
	run python3 "$TOOLS/t1count.py" "$FIXTURES/t1/constructs.json"
	assert_output "725760 17820"
}

@test "the configurations themselves, in order, agree with CPython's itertools.product" {
	python3 "$TOOLS/t1count.py" --list "$FIXTURES/t1/constructs.json" | jq -c . > "$BATS_TEST_TMPDIR/python.jsonl"
	kg-propose --exhaustive --spec "$FIXTURES/t1/constructs.json" | jq -c .candidate.config > "$BATS_TEST_TMPDIR/ours.jsonl"
	[ "$(wc -l < "$BATS_TEST_TMPDIR/ours.jsonl")" -eq 17820 ]
	cmp "$BATS_TEST_TMPDIR/python.jsonl" "$BATS_TEST_TMPDIR/ours.jsonl"
}

@test "a 22.2-million-point space with five conditions counts 349853, as CPython does" {
	# Expected value from: python3 tests/tools/t1count.py tests/fixtures/t1/stencil_22m.json
	# (brute force over all 22200000 points; 92 s on the development machine).
	run_tool 0 kg-propose --exhaustive --count --spec "$FIXTURES/t1/stencil_22m.json"
	assert_output 349853
	run_tool 0 kg-propose --exhaustive --spec "$FIXTURES/t1/stencil_22m.json"
	[ "${#lines[@]}" -eq 349853 ]
}
