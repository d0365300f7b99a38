# test_helper.bash: what every bats suite loads: tool paths, the assertion libraries,
# fixture paths and run_tool, which runs a command with a time limit and checks its status.

KG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" # tests/.., for tests/gpu too
KG_BIN_DIR="${KG_BIN_DIR:-$KG_ROOT/bin}"
# The test driver that exposes lib/ (tests/driver/libtest.c and the libtest_*.c beside it).
LIBTEST="${KG_TEST_DRIVER:-$KG_ROOT/build/release/tests/kg-libtest}"
FIXTURES="$KG_ROOT/tests/fixtures"
TOOLS="$KG_ROOT/tests/tools"
PATH="$KG_BIN_DIR:$PATH"

bats_require_minimum_version 1.5.0
load "${BATS_LIB_PATH:-/usr/lib/bats}/bats-support/load"
load "${BATS_LIB_PATH:-/usr/lib/bats}/bats-assert/load"

# run_tool STATUS CMD [ARG]...: runs CMD with stdout in $output and stderr in $stderr,
# failing the test unless it exits with STATUS (a crash is never an expected failure).
run_tool() {
	local status=$1
	shift
	run "-$status" --separate-stderr timeout 120 "$@"
}

# kill_group PID: kill -9 the process group PID leads, then waits until every process of it
# has exited. A killed process closes its files, and so lets its locks go, only at the end of
# its exit, after its memory is released: under ASan, whose shadow is terabytes of mappings,
# well after the group's leader is reaped.
kill_group() {
	local stat rest alive _
	kill -9 -- "-$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	for _ in $(seq 600); do
		alive=
		for stat in /proc/[0-9]*/stat; do
			{ read -r rest <"$stat"; } 2>/dev/null || continue # it may have ended since the glob
			rest=${rest##*) } # after "PID (COMM) ": STATE PPID PGRP ...
			read -r -a rest <<<"$rest"
			[ "${rest[2]}" = "$1" ] && [ "${rest[0]}" != Z ] && alive=1 && break
		done
		[ -n "$alive" ] || return 0
		sleep 0.05
	done
	echo "kill_group: process group $1 still runs 30 s after kill -9" >&2
	return 1
}

# scale_run_template DIR: in DIR, a run at out/kernels/scale made as kg-init makes one: the
# scale kernel's spec and files, the baseline built by kg-build (NVRTC) and made the root by
# kg-select with a measurement given by hand.
scale_run_template() {
	local run=out/kernels/scale
	mkdir -p "$1/$run"
	cp "$FIXTURES"/build/{spec.json,scale.cu,scale_helper.cuh} "$1/$run/"
	(cd "$1" && echo "{\"v\":1,\"run\":\"$run\",\"kernel\":\"scale\",\"candidate\":{\"id\":\"baseline\"}}" | kg-build |
		jq -c '. + {bench: {status: "ok", median_ms: 1.0, speedup: 1}}' | kg-select --update "$run" >/dev/null)
}

# assert_stderr TEXT: stderr is exactly TEXT.
assert_stderr() {
	if [[ "$stderr" != "$1" ]]; then
		printf 'expected stderr: %s\nactual stderr:   %s\n' "$1" "$stderr" >&2
		return 1
	fi
}

# assert_stderr_empty: nothing was written to stderr.
assert_stderr_empty() {
	assert_stderr ""
}

# patched_hgmma NAME ID STATUSES: the records of NAME.jsonl have STATUSES ('ok ok'), and
# ID's, a ready patch's variant built for sm_90a, passed it with a time and issues HGMMA in its
# cubin (where cuobjdump is there to say). For the GPU suites of the Hopper patches.
patched_hgmma() {
	[ "$(jq -r .bench.status "$1.jsonl" | paste -sd' ')" = "$3" ]
	jq -e --arg id "$2" 'select(.candidate.id == $id) | .build.materialized == "patch" and .build.arch == "sm_90a"
		and .bench.check.passed and .bench.median_ms > 0' "$1.jsonl"
	if command -v cuobjdump >/dev/null; then
		cuobjdump -sass "$1/variants/$(jq -r --arg id "$2" 'select(.candidate.id == $id) | .build.state' "$1.jsonl")/kernel.cubin" |
			grep -q HGMMA
	fi
}
