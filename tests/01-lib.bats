#!/usr/bin/env bats
# 01-lib.bats: the shared library through the test driver: JSON lines, number parsing,
# SHA-256, atomic writes, the directory lock and the T4 writer.

load test_helper

@test "jsonl: records pass through with every field, blank lines skipped" {
	run_tool 0 "$LIBTEST" jsonl "$FIXTURES/jsonl/good.jsonl"
	assert_stderr_empty
	assert_output "$(printf '%s\n' '{"a":1,"b":[1,2,{"c":"x"}],"keep":{"nested":true}}' '{"z":"é","n":null}')"
}

@test "jsonl: numbers a double cannot hold come back as they were written; strings untouched" {
	for n in 9007199254740993 -9007199254740993 12345678901234567890 1e400 -1e400 1e-400 0.1 \
		0.30000000000000004 1.0 1E2 -0 9007199254740992 7; do
		line="{\"n\":$n,\"deep\":[1,[{\"m\":$n,\"s\":\"$n 1e400\"}],$n],\"k\":\"\\\"$n\"}"
		run_tool 0 "$LIBTEST" jsonl - <<<"$line"
		assert_output "$line"
		printf '%s\n' "$line" > "$BATS_TEST_TMPDIR/doc.json"
		run_tool 0 "$LIBTEST" json "$BATS_TEST_TMPDIR/doc.json"
		assert_output "$line"
	done
}

@test "jsonl: a number kept as written is read as a number; one set is written as set" {
	run_tool 0 "$LIBTEST" number n 2.5 <<<'{"n":9007199254740993,"big":12345678901234567890}'
	assert_output "$(printf '%s\n' 9007199254740992 '{"n":2.5,"big":12345678901234567890}')"
	run_tool 0 "$LIBTEST" number n <<<'{"n":1e400}'
	assert_output inf
	run_tool 0 "$LIBTEST" number n <<<'{"n":0.30000000000000004}'
	assert_output 0.30000000000000004
}

@test "jsonl: CRLF line ends and a missing final newline are read" {
	run_tool 0 "$LIBTEST" jsonl "$FIXTURES/jsonl/crlf.jsonl"
	assert_output "$(printf '%s\n' '{"a":1}' '{"b":2}')"
	run_tool 0 "$LIBTEST" jsonl "$FIXTURES/jsonl/no-newline.jsonl"
	assert_output '{"last":true}'
}

@test "jsonl: a line of 5 MB is read whole" {
	long=$(head -c 5000000 /dev/zero | tr '\0' 'x')
	printf '{"long":"%s"}\n' "$long" > "$BATS_TEST_TMPDIR/long.jsonl"
	run_tool 0 "$LIBTEST" jsonl "$BATS_TEST_TMPDIR/long.jsonl"
	[ "${#output}" -eq 5000011 ]
}

@test "jsonl: bad lines are reported with file, line and column; the rest pass; exit 1" {
	run_tool 1 "$LIBTEST" jsonl "$FIXTURES/jsonl/bad.jsonl"
	assert_output "$(printf '%s\n' '{"ok":1}' '{"ok":2}')"
	assert_stderr "$(printf '%s\n' \
		"kg-libtest: $FIXTURES/jsonl/bad.jsonl:2: invalid JSON at column 9" \
		"kg-libtest: $FIXTURES/jsonl/bad.jsonl:3: a record must be a JSON object" \
		"kg-libtest: $FIXTURES/jsonl/bad.jsonl:4: invalid JSON at column 9")"
}

@test "events: append stamps t; event_kind names each record; a bad line is named FILE:LINE and skipped; exit 1" {
	cd "$BATS_TEST_TMPDIR"
	mkdir run
	printf '%s\n' '{"candidate":{"id":"baseline"},"build":{"baseline":true}}' '{"candidate":{"id":"c1"},"build":{"status":"ok"}}' \
		'{"candidate":{"id":"c2"}}' '{"op":"expand","propose":{"status":"empty"}}' '{"op":"stop"}' '{"op":"expand"}' >in.jsonl
	run_tool 0 "$LIBTEST" events run append <in.jsonl
	assert_output ""
	assert_stderr_empty
	[ "$(jq -r '.t | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z$")' run/events.jsonl | sort -u)" = true ]
	[ "$(jq -c 'del(.t)' run/events.jsonl | head -2)" = "$(printf '%s\n' '{"candidate":{"id":"baseline"},"build":{"baseline":true}}' \
		'{"candidate":{"id":"c1"},"build":{"status":"ok"}}')" ]
	{ echo; echo '{"candidate":{"id":"c3"},"build":{"stat'; echo '{"candidate":{"id":"c4"},"build":null}'; } >>run/events.jsonl
	run_tool 1 "$LIBTEST" events run from 0
	assert_output "$(printf '%s\n' '1 root baseline' '2 evaluated c1' '3 registered c2' '4 exhausted -' '5 stop -' '6 other -' \
		'9 evaluated c4' "offset $(wc -c <run/events.jsonl) bad 1")"
	assert_stderr "kg-libtest: run/events.jsonl:8: invalid JSON at column 36"
	# a log that does not exist has no records
	run_tool 0 "$LIBTEST" events absent from 0
	assert_output "offset 0 bad 0"
	assert_stderr_empty
}

@test "events: a read from a byte offset gives what was appended since and where it stopped; lines named from the top" {
	cd "$BATS_TEST_TMPDIR"
	mkdir run
	printf '%s\n' '{"candidate":{"id":"c1"},"build":{}}' '{"candidate":{"id":"c2"},"build":{}}' >run/events.jsonl
	run_tool 0 "$LIBTEST" events run from 0
	stopped=${lines[2]#offset }
	stopped=${stopped% bad 0}
	[ "$stopped" -eq "$(wc -c <run/events.jsonl)" ]
	printf '%s\n' 'not json' '{"candidate":{"id":"c3"}}' >>run/events.jsonl
	run_tool 1 "$LIBTEST" events run from "$stopped"
	assert_output "$(printf '%s\n' '4 registered c3' "offset $(wc -c <run/events.jsonl) bad 1")"
	assert_stderr "kg-libtest: run/events.jsonl:3: invalid JSON at column 1"
	# at the end: nothing; inside a line, or past the end: no record starts there
	run_tool 0 "$LIBTEST" events run from "$(wc -c <run/events.jsonl)"
	assert_output "offset $(wc -c <run/events.jsonl) bad 0"
	run_tool 0 "$LIBTEST" events run from 5
	assert_output "not at a record"
	run_tool 0 "$LIBTEST" events run from 1000
	assert_output "not at a record"
	assert_stderr_empty
}

@test "events: the last N records, read back from the end of a long log; blank lines are not records" {
	cd "$BATS_TEST_TMPDIR"
	mkdir run
	pad=$(printf '%0900d' 0)
	for i in $(seq 300); do printf '{"candidate":{"id":"c%d"},"build":{},"pad":"%s"}\n\n' "$i" "$pad"; done >run/events.jsonl
	run_tool 0 "$LIBTEST" events run last 2
	assert_output "$(printf '%s\n' '597 evaluated c299' '599 evaluated c300' "offset $(wc -c <run/events.jsonl) bad 0")"
	# more than 64 kB back (the first read), and more than the log holds
	run_tool 0 "$LIBTEST" events run last 100
	[ "${lines[0]}" = '401 evaluated c201' ]
	[ "${#lines[@]}" -eq 101 ]
	run_tool 0 "$LIBTEST" events run last 1000
	[ "${lines[0]}" = '1 evaluated c1' ]
	[ "${#lines[@]}" -eq 301 ]
	# a bad line among them is named by its line in the whole log, and is one of the N
	echo 'not json' >>run/events.jsonl
	run_tool 1 "$LIBTEST" events run last 2
	assert_output "$(printf '%s\n' '599 evaluated c300' "offset $(wc -c <run/events.jsonl) bad 1")"
	assert_stderr "kg-libtest: run/events.jsonl:601: invalid JSON at column 1"
	run_tool 0 "$LIBTEST" events run last 0
	assert_output "offset $(wc -c <run/events.jsonl) bad 0"
}

@test "stream: a record the tool cannot handle is reported with file and line and passed on; a full output stops the loop; exit 1, 4" {
	cd "$BATS_TEST_TMPDIR"
	printf '%s\n' '{"a":1}' '{"bad":1}' 'not json' '{"a":2}' >in.jsonl
	run_tool 1 "$LIBTEST" jsonl in.jsonl bad
	assert_output "$(printf '%s\n' '{"a":1}' '{"bad":1}' '{"a":2}')"
	assert_stderr "$(printf '%s\n' "kg-libtest: in.jsonl:2: bad: a record the tool cannot handle" \
		"kg-libtest: in.jsonl:3: invalid JSON at column 1")"
	# a bad line does not hide the failed write: 4, reported once, with the system's reason
	run_tool 4 bash -c "'$LIBTEST' jsonl in.jsonl bad >/dev/full"
	assert_stderr "$(printf '%s\n' "kg-libtest: in.jsonl:2: bad: a record the tool cannot handle" \
		"kg-libtest: in.jsonl:3: invalid JSON at column 1" "kg-libtest: cannot write to standard output: No space left on device")"
	# once a write fails (past the first buffer of 200 kB of records) nothing more is read:
	# the bad line at the end is never reached
	{ for i in $(seq 2000); do printf '{"pad":"%0100d"}\n' "$i"; done; echo 'not json'; } >big.jsonl
	run_tool 4 bash -c "'$LIBTEST' jsonl big.jsonl >/dev/full"
	assert_stderr "kg-libtest: cannot write to standard output: No space left on device"
}

@test "exit_status_merge: I/O over environment over usage over input; 5 and 6 below every failure" {
	for case in "0 0:0" "1 0:1" "0 1:1" "1 3:3" "3 1:3" "4 3:4" "3 4:4" "2 1:2" "1 2:2" "3 2:3" "4 1 3:4" \
		"5 1:1" "1 5:1" "0 5:5" "5 0:5" "6 4:4" "5 6:5"; do
		run_tool 0 "$LIBTEST" exit-status ${case%%:*}
		[ "$output" = "${case#*:}" ] || { echo "$case gave $output"; false; }
	done
}

@test "jsonl: stdin is named <stdin>" {
	run_tool 1 bash -c "printf '{\"a\":\n' | '$LIBTEST' jsonl -"
	assert_stderr "kg-libtest: <stdin>:1: invalid JSON at column 5"
}

@test "jsonl: a missing file is reported with its reason" {
	run_tool 2 "$LIBTEST" jsonl "$BATS_TEST_TMPDIR/absent.jsonl"
	assert_stderr "kg-libtest: cannot open '$BATS_TEST_TMPDIR/absent.jsonl': No such file or directory"
}

@test "json: a document error names line and column" {
	printf '{\n  "a": 1,\n  "b": [1, 2,]\n}\n' > "$BATS_TEST_TMPDIR/doc.json"
	run_tool 1 "$LIBTEST" json "$BATS_TEST_TMPDIR/doc.json"
	assert_stderr "kg-libtest: $BATS_TEST_TMPDIR/doc.json:3:14: invalid JSON"
}

@test "parse: integers and doubles are range-checked and junk is refused" {
	run_tool 0 "$LIBTEST" parse int64 42 0 100
	assert_output 42
	run_tool 2 "$LIBTEST" parse int64 101 0 100
	assert_stderr "kg-libtest: '101': out of range"
	run_tool 2 "$LIBTEST" parse int64 12abc 0 100
	assert_stderr "kg-libtest: '12abc': not an integer"
	run_tool 2 "$LIBTEST" parse int64 " 7" 0 100
	assert_stderr "kg-libtest: ' 7': not an integer"
	run_tool 2 "$LIBTEST" parse int64 99999999999999999999 0 100
	assert_stderr "kg-libtest: '99999999999999999999': out of range"
	run_tool 2 "$LIBTEST" parse uint64 -1 0 100
	assert_stderr "kg-libtest: '-1': not a non-negative integer"
	run_tool 0 "$LIBTEST" parse double 0.25 0 1
	assert_output 0.25
	run_tool 2 "$LIBTEST" parse double nan 0 1
	assert_stderr "kg-libtest: 'nan': not a finite number"
	run_tool 2 "$LIBTEST" parse double "" 0 1
	assert_stderr "kg-libtest: '': not a number"
}

@test "sha256: digests match the FIPS 180-2 test vectors" {
	printf 'abc' > "$BATS_TEST_TMPDIR/abc"
	run_tool 0 "$LIBTEST" sha256 "$BATS_TEST_TMPDIR/abc"
	assert_output ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
	: > "$BATS_TEST_TMPDIR/empty"
	run_tool 0 "$LIBTEST" sha256 "$BATS_TEST_TMPDIR/empty"
	assert_output e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
	head -c 1000000 /dev/zero | tr '\0' 'a' > "$BATS_TEST_TMPDIR/million"
	run_tool 0 "$LIBTEST" sha256 "$BATS_TEST_TMPDIR/million"
	assert_output cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0
}

@test "atomic write: replaces the file whole and leaves no temporary behind" {
	dir="$BATS_TEST_TMPDIR/out"
	mkdir "$dir"
	printf 'old' > "$dir/f"
	run_tool 0 bash -c "printf 'new contents' | '$LIBTEST' atomic-write '$dir/f'"
	[ "$(cat "$dir/f")" = "new contents" ]
	[ "$(ls -A "$dir")" = "f" ]
	[ "$(stat -c %a "$dir/f")" = "$(printf '%o' $((0644 & ~$(umask))))" ]
}

@test "atomic write: an unwritable directory is an error and the old file stays" {
	run_tool 4 bash -c "printf 'x' | '$LIBTEST' atomic-write '$BATS_TEST_TMPDIR/no/such/dir/f'"
	assert_stderr "kg-libtest: cannot write '$BATS_TEST_TMPDIR/no/such/dir/f': No such file or directory"
}

@test "dirlock: a second holder waits or, without waiting, is refused" {
	dir="$BATS_TEST_TMPDIR/run"
	mkdir "$dir"
	"$LIBTEST" lock "$dir" sleep 3 &
	holder=$!
	sleep 0.5
	run_tool 1 "$LIBTEST" lock --nowait "$dir" true
	assert_stderr "kg-libtest: '$dir' is locked by another process"
	start=$(date +%s%N)
	run_tool 0 "$LIBTEST" lock "$dir" true
	waited=$(( ($(date +%s%N) - start) / 1000000 ))
	wait "$holder"
	[ "$waited" -ge 1000 ]
	run_tool 0 "$LIBTEST" lock --nowait "$dir" true
}

@test "run-file writers never follow a symbolic link or write into a FIFO; the link is an error naming the file" {
	cd "$BATS_TEST_TMPDIR"
	mkdir run
	printf 'keep' > victim
	mkfifo run/fifo
	for how in write append tail atomic; do
		ln -sf ../victim run/f
		run_tool 4 bash -c "printf 'planted' | '$LIBTEST' write $how run/f"
		assert_stderr "kg-libtest: cannot write 'run/f': Too many levels of symbolic links"
		[ "$(cat victim)" = keep ]
		[ -L run/f ]
		ln -sf ../nowhere run/g
		run_tool 4 bash -c "printf 'planted' | '$LIBTEST' write $how run/g"
		[ ! -e nowhere ]
	done
	for how in write append tail; do
		run_tool 4 bash -c "printf 'x' | '$LIBTEST' write $how run/fifo"
		[[ "$stderr" == "kg-libtest: cannot write 'run/fifo': "* ]]
	done
	for how in write append tail atomic; do
		run_tool 0 bash -c "printf 'plain' | '$LIBTEST' write $how run/$how"
		[ "$(cat run/$how)" = plain ]
	done
}

@test "dirlock: a link planted as the lock is refused, never created through" {
	cd "$BATS_TEST_TMPDIR"
	mkdir run
	ln -s ../created run/.lock
	run_tool 4 "$LIBTEST" lock run true
	assert_stderr "kg-libtest: cannot lock 'run': Too many levels of symbolic links"
	[ ! -e created ]
	rm run/.lock && mkfifo run/.lock
	run_tool 4 "$LIBTEST" lock run true
	assert_stderr "kg-libtest: cannot lock 'run': Invalid argument"
}

@test "GPU lock: a safe folder (system, else XDG_RUNTIME_DIR), no link followed, a bounded wait that names the holder" {
	cd "$BATS_TEST_TMPDIR"
	# The system folder, when it exists, is used by every user; a link or an unsafe one is refused.
	mkdir sys && chmod 0755 sys
	run_tool 0 "$LIBTEST" gpu-lock "$PWD/sys" 0000:01:00.0 0 true
	assert_output "$PWD/sys/gpu-0000:01:00.0.lock"
	[ "$(stat -c %a sys/gpu-0000:01:00.0.lock)" = 644 ]
	chmod 0777 sys
	run_tool 3 "$LIBTEST" gpu-lock "$PWD/sys" 0000:01:00.0 0 true
	assert_stderr "kg-libtest: '$PWD/sys' is not a safe folder for the GPU locks (it must be a folder of root's or yours, writable by others only with the sticky bit: mode 0777, owner $(id -u))"
	chmod 1777 sys
	run_tool 0 "$LIBTEST" gpu-lock "$PWD/sys" 0000:01:00.0 0 true
	ln -s sys linked
	run_tool 3 "$LIBTEST" gpu-lock "$PWD/linked" 0000:01:00.0 0 true
	[[ "$stderr" == *"'$PWD/linked' is not a safe folder for the GPU locks"* ]]
	# A link planted as the lock file is refused: nothing is created where it points.
	ln -s "$PWD/created" sys/gpu-0000:02:00.0.lock
	run_tool 4 "$LIBTEST" gpu-lock "$PWD/sys" 0000:02:00.0 0 true
	assert_stderr "kg-libtest: cannot lock '$PWD/sys/gpu-0000:02:00.0.lock': Too many levels of symbolic links"
	[ ! -e created ]
	# Without the system folder: the user's runtime folder, made where missing.
	XDG_RUNTIME_DIR="$PWD/xdg" run_tool 0 "$LIBTEST" gpu-lock "$PWD/none" 0000:01:00.0 0 true
	assert_output "$PWD/xdg/kernelgraph/gpu-0000:01:00.0.lock"
	# gpu-lock-path: the file this build's kg-bench locks (what tests/gpu hold with flock(1)),
	# from the same function on its system folder (KG_LOCK_DIR, absent here unless installed).
	if [ ! -e /run/kernelgraph ]; then
		XDG_RUNTIME_DIR="$PWD/xdg" run_tool 0 "$LIBTEST" gpu-lock-path 0000:01:00.0
		assert_output "$PWD/xdg/kernelgraph/gpu-0000:01:00.0.lock"
	fi
	# A holder that never lets go: the wait ends, and the error names it.
	"$LIBTEST" gpu-lock "$PWD/sys" 0000:01:00.0 0 sleep 5 >/dev/null &
	holder=$!
	sleep 0.5
	start=$(date +%s%N)
	run_tool 1 "$LIBTEST" gpu-lock "$PWD/sys" 0000:01:00.0 1 true
	waited=$(( ($(date +%s%N) - start) / 1000000 ))
	kill "$holder"
	wait "$holder" || true
	[ "$waited" -ge 1000 ] && [ "$waited" -lt 4000 ]
	[[ "$stderr" == "kg-libtest: '$PWD/sys/gpu-0000:01:00.0.lock' is held by pid "[0-9]*" (kg-libtest, user $(id -un))" ]]
}

@test "t4: results are written in the T4 schema's shape" {
	printf '%s\n' \
		'{"configuration":{"bx":32,"mode":"a"},"objectives":["time"],"compilation_ms":412.5,"runtimes_ms":[0.041,0.0412],"framework_ms":1.5,"invalidity":"correct","correctness":1,"measurements":[{"name":"time","value":0.0412,"unit":"ms"}],"timestamp":"2026-11-21T10:00:00Z"}' \
		'{"configuration":{"bx":64,"mode":"b"},"invalidity":"compile","correctness":0}' \
		'{"configuration":{"bx":96,"mode":"b"},"invalidity":"correctness","correctness":0.25,"runtimes_ms":[0.5]}' |
		"$LIBTEST" t4 "$BATS_TEST_TMPDIR/t4.json"
	run_tool 0 jq -c . "$BATS_TEST_TMPDIR/t4.json"
	first='{"timestamp":"2026-11-21T10:00:00Z","configuration":{"bx":32,"mode":"a"},"objectives":["time"],"times":{"compilation_time":412.5,"runtimes":[0.041,0.0412],"framework":1.5},"invalidity":"correct","correctness":1,"measurements":[{"name":"time","value":0.0412,"unit":"ms"}]}'
	run_tool 0 jq -c '.results[0]' "$BATS_TEST_TMPDIR/t4.json"
	assert_output "$first"
	run_tool 0 jq -c '{schema_version, metadata, n: (.results | length), inv: [.results[].invalidity], corr: [.results[].correctness]}' "$BATS_TEST_TMPDIR/t4.json"
	assert_output '{"schema_version":"1.0.0","metadata":{"timeunit":"milliseconds"},"n":3,"inv":["correct","compile","correctness"],"corr":[1,0,0.25]}'
	# What results-schema.json 1.0.0 requires of every result.
	run_tool 0 jq -e '[.results[] | has("configuration") and has("times") and has("invalidity") and has("correctness")
		and (.times | type == "object") and (.times.runtimes | type == "array")
		and (.timestamp | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"))] | all' "$BATS_TEST_TMPDIR/t4.json"
}

@test "method-terms: spelling, the suffix stemmer, the domain's synonyms and dropped filler" {
	run_tool 0 "$LIBTEST" method-terms "Unroll loops" "loop unrolling" "unrolled" "tile" "tiled" "tiling" \
		"Vectorisation" "neighbouring" "padding" "predicated" "predication" "analysis" "bypass" \
		"use cp.async" "smem" "TMA" "float4" "Switch to WGMMA" "threads per block" "increase the block size to 256"
	assert_output "$(printf '%s\n' "loop unroll" "loop unroll" unroll til til til vector neighbor pad predic predic \
		analysis bypass "async copy" "memory shar" "async copy" vector "mma switch" "block siz" "block siz")"
}
