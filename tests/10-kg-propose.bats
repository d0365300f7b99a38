#!/usr/bin/env bats
# 10-kg-propose.bats: kg-propose's command line: options, records, messages, exit codes.

load test_helper

MINIMAL="$BATS_TEST_DIRNAME/fixtures/t1/minimal.json"

@test "--help prints the usage on stdout and exits 0" {
	run_tool 0 kg-propose --help
	assert_line --index 0 "Usage: kg-propose --exhaustive --spec FILE [--count]"
	assert_stderr_empty
	run_tool 0 kg-propose -h
	assert_line --index 0 "Usage: kg-propose --exhaustive --spec FILE [--count]"
}

@test "--version prints the version" {
	run_tool 0 kg-propose --version
	assert_output --regexp '^kg-propose \(kernelgraph\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "--exhaustive writes one candidate per valid configuration, first parameter slowest" {
	run_tool 0 kg-propose --exhaustive --spec "$MINIMAL"
	assert_stderr_empty
	[ "${#lines[@]}" -eq 14 ]
	assert_line --index 0 '{"v":1,"kernel":"vector_add","candidate":{"id":"exhaustive-1","proposer":"exhaustive","config":{"block_size_x":32,"tile":1}}}'
	assert_line --index 1 '{"v":1,"kernel":"vector_add","candidate":{"id":"exhaustive-2","proposer":"exhaustive","config":{"block_size_x":32,"tile":2}}}'
	assert_line --index 13 '{"v":1,"kernel":"vector_add","candidate":{"id":"exhaustive-14","proposer":"exhaustive","config":{"block_size_x":256,"tile":2}}}'
}

@test "values keep their JSON types: ints, floats, booleans and strings" {
	run_tool 0 kg-propose --exhaustive --spec "$FIXTURES/t1/constructs.json"
	assert_line --index 0 '{"v":1,"kernel":"constructs","candidate":{"id":"exhaustive-1","proposer":"exhaustive","config":{"block_x":32,"block_y":1,"tile":1,"vec":1,"ratio":0.5,"flag":true,"layout":"row","shift":0,"unroll":1}}}'
}

@test "--count prints only the number" {
	run_tool 0 kg-propose -x -c -s "$MINIMAL"
	assert_output 14
	assert_stderr_empty
}

@test "--verbose reports the space on stderr; --quiet silences it" {
	run_tool 0 kg-propose -x -v -s "$MINIMAL"
	assert_stderr "$(printf '%s\n' "kg-propose: $MINIMAL: 2 parameters, 1 conditions, 16 Cartesian points" \
		"kg-propose: $MINIMAL: 14 valid configurations")"
	run_tool 0 kg-propose -x -q -s "$MINIMAL"
	assert_stderr_empty
}

@test "usage errors exit 2 with a hint" {
	run_tool 2 kg-propose --spec "$MINIMAL"
	assert_output ""
	assert_stderr "$(printf '%s\n' "kg-propose: no proposer chosen: give --exhaustive" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --exhaustive
	assert_stderr "$(printf '%s\n' "kg-propose: --exhaustive needs --spec FILE" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --exhaustive --frobnicate
	assert_stderr "$(printf '%s\n' "kg-propose: unknown option '--frobnicate'" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose -x -Z
	assert_stderr "$(printf '%s\n' "kg-propose: unknown option '-Z'" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --exhaustive --spec
	assert_stderr "$(printf '%s\n' "kg-propose: option '--spec' needs an argument" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose -x -s
	assert_stderr "$(printf '%s\n' "kg-propose: option '-s' needs an argument" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose -x -s "$MINIMAL" extra
	assert_stderr "$(printf '%s\n' "kg-propose: unexpected argument 'extra'" "Try 'kg-propose --help' for more information.")"
}

@test "a full disk is an I/O error, exit 4" {
	[ -w /dev/full ]
	run_tool 4 bash -c "kg-propose -x -s '$MINIMAL' > /dev/full"
	assert_stderr "kg-propose: cannot write to standard output: No space left on device"
	run_tool 4 bash -c "kg-propose -x -s '$FIXTURES/t1/stencil_22m.json' > /dev/full"
	assert_stderr "kg-propose: cannot write to standard output: No space left on device"
}

@test "a reader that stops early ends the writer quietly" {
	run_tool 0 bash -c "set -o pipefail; kg-propose -x -s '$FIXTURES/t1/stencil_22m.json' | head -1 > /dev/null; echo \${PIPESTATUS[0]}"
	assert_output 141
	assert_stderr_empty
}
