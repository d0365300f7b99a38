#!/usr/bin/env bats
# 30-kg-bench.bats: kg-bench without a GPU: its command line, replayed measurements, and the
# argument setup, fills, poisoning and tolerance logic it runs kernels with (lib/kargs).
# tests/gpu/30-kg-bench.bats runs kernels.

load test_helper

REPLAY="$FIXTURES/bench/replay_t4.json"

setup() {
	cd "$BATS_TEST_TMPDIR"
}

# built CONFIG: a record as kg-build leaves it, for replay.
built() {
	jq -cn --argjson c "$1" '{run: "run", candidate: {id: "c"}, build: {status: "ok", config: $c}}'
}

@test "--help prints the usage on stdout and exits 0; --version the version" {
	run_tool 0 kg-bench --help
	assert_line --index 0 "Usage: kg-bench [OPTION]... [FILE]"
	assert_stderr_empty
	run_tool 0 kg-bench --version
	assert_output --regexp '^kg-bench \(kernelgraph\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "without a GPU and without --replay, kg-bench exits 3 and says so at the first record to measure" {
	[ -e /dev/nvidia0 ] && skip "this machine has a GPU"
	run_tool 0 kg-bench </dev/null # nothing to measure: no GPU needed
	assert_stderr_empty
	mkdir run
	built '{"block_size_x":256,"items_per_thread":1}' >input.jsonl
	run_tool 3 kg-bench input.jsonl
	[[ "$stderr" == "kg-bench: no CUDA driver on this machine ("*"); give --replay FILE to answer from recorded measurements" ]]
	assert_output ""
	# --devices lists none: the same exit and message, nothing on stdout
	run_tool 3 kg-bench --devices
	[[ "$stderr" == "kg-bench: no CUDA driver on this machine ("*")"* ]]
	assert_output ""
}

@test "the worker shows the driver its GPU alone: the --device-th of CUDA_VISIBLE_DEVICES, or --device itself" {
	# the driver is a fake one (tests/fixtures/build): four GPUs, each cuInit logged with the
	# CUDA_VISIBLE_DEVICES it saw, and no context. cuInit readies every GPU shown: 1.16 s for
	# four H200s against 0.33 s for one, in every worker started.
	cc -shared -fPIC -o libcuda.so.1 "$FIXTURES/build/fake_libcuda.c"
	export LD_LIBRARY_PATH="$PWD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKE_CUDA_LOG=$PWD/cuda.log FAKE_CUDA_GPUS=4
	unset CUDA_VISIBLE_DEVICES
	run_tool 3 kg-bench --calibrate --device 2
	assert_stderr "kg-bench: cuDevicePrimaryCtxRetain: CUDA_ERROR_NOT_SUPPORTED: operation not supported"
	CUDA_VISIBLE_DEVICES=3,1 run_tool 3 kg-bench --calibrate --device 1
	assert_stderr "kg-bench: cuDevicePrimaryCtxRetain: CUDA_ERROR_NOT_SUPPORTED: operation not supported"
	[ "$(cat cuda.log)" = "$(printf 'cuInit 0 CUDA_VISIBLE_DEVICES=%s\n' 2 1)" ]
	# no such entry: the list as it is, and the driver's count says what is wrong
	rm cuda.log
	CUDA_VISIBLE_DEVICES=3 run_tool 3 kg-bench --calibrate --device 1
	assert_stderr "kg-bench: --device 1: there are 1 GPUs (0 to 0)"
	run_tool 3 kg-bench --calibrate --device 7
	assert_stderr "kg-bench: no GPU: the CUDA driver sees no device; give --replay FILE to answer from recorded measurements (--device 7, shown to the driver alone as CUDA_VISIBLE_DEVICES=7)"
	[ "$(cat cuda.log)" = "$(printf 'cuInit 0 CUDA_VISIBLE_DEVICES=%s\n' 3 7)" ]
	# the context is made under the GPU's lock (kg-tune's kg-benches start while kg-init
	# times the baseline): a worker waiting for it is waited for, alive, and then says why it
	# has no GPU (with the fake, no context) rather than being taken for dead
	lock=$("$LIBTEST" gpu-lock-path 0000:03:00.0) # the fake's GPU 2
	flock "$lock" sleep 1 &
	sleep 0.2
	jq -cn '{run: "run", candidate: {id: "c"}, build: {status: "ok"}}' >built.jsonl
	run_tool 3 kg-bench --device 2 built.jsonl
	wait
	assert_stderr "kg-bench: cuDevicePrimaryCtxRetain: CUDA_ERROR_NOT_SUPPORTED: operation not supported"
}

@test "a run made on a table (RUN/replay.table) is answered from it with no option; --replay overrides it" {
	mkdir run
	cp "$REPLAY" run/replay.table
	{ built '{"block_size_x":256,"items_per_thread":1}'; built '{"block_size_x":1,"items_per_thread":1}'; } >input.jsonl
	run_tool 1 kg-bench input.jsonl
	[ "$(jq -c '.bench | [.status, .replayed]' <<<"$output" | paste -sd ' ')" = '["ok",true] ["error",true]' ]
	assert_stderr 'kg-bench: input.jsonl:2: configuration {"block_size_x":1,"items_per_thread":1} is not in the replay table run/replay.table'
	jq '.results |= map(select(.configuration.block_size_x != 256))' "$REPLAY" >other.json
	run_tool 1 kg-bench --replay other.json input.jsonl
	[[ "$stderr" == 'kg-bench: input.jsonl:1: configuration {"block_size_x":256,"items_per_thread":1} is not in the replay table other.json'* ]]
	echo 'not a table' >run/replay.table
	run_tool 1 kg-bench input.jsonl
	[[ "$stderr" == *"kg-bench: input.jsonl:1: the run's replay table run/replay.table cannot be read (see above)"* ]]
}

@test "usage errors exit 2" {
	run_tool 2 kg-bench --budget 0
	assert_stderr "$(printf '%s\n' "kg-bench: --budget: '0': out of range" "Try 'kg-bench --help' for more information.")"
	run_tool 2 kg-bench --noise x
	assert_stderr "$(printf '%s\n' "kg-bench: --noise: 'x': not a number" "Try 'kg-bench --help' for more information.")"
	run_tool 2 kg-bench --gpu-wait -1
	assert_stderr "$(printf '%s\n' "kg-bench: --gpu-wait: '-1': out of range" "Try 'kg-bench --help' for more information.")"
	run_tool 2 kg-bench --calibrate --replay x
	assert_stderr "$(printf '%s\n' "kg-bench: --calibrate takes no input and no --replay" "Try 'kg-bench --help' for more information.")"
	for other in --calibrate --t4 "--replay x" input.jsonl; do
		run_tool 2 kg-bench --devices $other
		assert_stderr "$(printf '%s\n' "kg-bench: --devices lists the GPUs: it takes no input and no other mode" "Try 'kg-bench --help' for more information.")"
	done
	run_tool 2 kg-bench --replay /nonexistent.json </dev/null
	assert_stderr "kg-bench: cannot read '/nonexistent.json': No such file or directory"
}

@test "--metrics and --metrics-every: their usage errors exit 2" {
	for bad in 0 -1 x 1000001; do
		run_tool 2 kg-bench --metrics-every "$bad" </dev/null
		[[ "${stderr_lines[0]}" == "kg-bench: --metrics-every: '$bad': "* ]]
	done
	run_tool 2 kg-bench --metrics --metrics-every 3 </dev/null
	assert_stderr "$(printf '%s\n' "kg-bench: --metrics and --metrics-every: give one, once" "Try 'kg-bench --help' for more information.")"
	run_tool 2 kg-bench --metrics-every 2 --metrics-every 3 </dev/null
	assert_stderr "$(printf '%s\n' "kg-bench: --metrics and --metrics-every: give one, once" "Try 'kg-bench --help' for more information.")"
	for other in --t4 --calibrate; do
		run_tool 2 kg-bench --metrics "$other" </dev/null
		assert_stderr "$(printf '%s\n' "kg-bench: --metrics and --metrics-every profile candidates: not with --t4 or --calibrate" "Try 'kg-bench --help' for more information.")"
	done
	run_tool 2 kg-bench --metrics-every </dev/null
	[ "${stderr_lines[0]}" = "kg-bench: option '--metrics-every' needs an argument" ]
}

@test "--metrics without a GPU: exit 3 as without it; with --replay the answers carry no metrics" {
	built '{"block_size_x":256,"items_per_thread":1}' >input.jsonl
	if [ ! -e /dev/nvidia0 ]; then
		mkdir run
		run_tool 3 kg-bench --metrics input.jsonl
		[[ "$stderr" == "kg-bench: no CUDA driver on this machine ("*"); give --replay FILE to answer from recorded measurements" ]]
		assert_output ""
		run_tool 3 kg-bench --metrics-every 5 input.jsonl
		[[ "$stderr" == "kg-bench: no CUDA driver on this machine ("*")"* ]]
	fi
	run_tool 0 kg-bench --metrics --replay "$REPLAY" input.jsonl
	assert_stderr_empty
	[ "$(jq -c '.bench | [.status, .replayed, has("metrics")]' <<<"$output")" = '["ok",true,false]' ]
	# --help says where the lines of the PC samples go, and that failing to take them changes nothing
	run_tool 0 kg-bench --help
	[[ "$output" == *"into variants/STATE/lines.json"* && "$output" == *"(bench.metrics.lines.why)"* ]]
}

@test "--replay answers from a T4 table: summaries of its runtimes, failures by their invalidity" {
	{
		built '{"block_size_x":256,"items_per_thread":1}'
		built '{"block_size_x":256,"items_per_thread":2}'
		built '{"block_size_x":64,"items_per_thread":4}'
		built '{"items_per_thread":4,"block_size_x":128}'
		echo '{"candidate":{"id":"not built"},"build":{"status":"compile_failed"}}'
	} >input.jsonl
	run_tool 0 kg-bench --replay "$REPLAY" input.jsonl
	assert_stderr_empty
	[ "$(jq -c .bench <<<"${lines[0]}")" = '{"status":"ok","median_ms":0.3,"p10_ms":0.14,"p90_ms":0.46,"mean_ms":0.3,"stdev_ms":0.158113883008419,"cv":0.52704627669473,"min_ms":0.1,"samples":5,"replayed":true}' ]
	[ "$(jq -c '.bench | [.status, .median_ms, .samples]' <<<"${lines[1]}")" = '["ok",0.225,4]' ]
	[ "$(jq -c '.bench | [.status, .replayed]' <<<"${lines[2]}")" = '["incorrect",true]' ]
	[ "$(jq -c '.bench.status' <<<"${lines[3]}")" = '"timeout"' ]
	[ "${lines[4]}" = '{"candidate":{"id":"not built"},"build":{"status":"compile_failed"}}' ]
}

@test "--replay carries a T4 result's throughputs and the table's device (kg-report draws the roofline with them)" {
	jq '.metadata.hardware.hardware_description = "NVIDIA H100 80GB HBM3"
	    | .results[0].measurements = [{name: "time", value: 0.3, unit: "ms"}, {name: "gbps", value: 2500, unit: "GB/s"},
	                                  {name: "pct_peak_bw", value: 83, unit: "%"}, {name: "tflops", value: 0.5, unit: "TFLOP/s"}]
	    | .results[2].measurements = [{name: "gbps", value: 1, unit: "GB/s"}]' "$REPLAY" >table.json
	run_tool 0 kg-bench --replay table.json < <(built '{"block_size_x":256,"items_per_thread":1}'; built '{"block_size_x":256,"items_per_thread":2}'; built '{"block_size_x":64,"items_per_thread":4}')
	assert_stderr_empty
	[ "$(jq -c '.bench | [.median_ms, .gbps, .pct_peak_bw, .tflops, .device]' <<<"${lines[0]}")" = '[0.3,2500,83,0.5,"NVIDIA H100 80GB HBM3"]' ]
	# a result that recorded none has none; a failed one keeps no figure, only the device
	[ "$(jq -c '.bench | [has("gbps"), has("tflops"), .device]' <<<"${lines[1]}")" = '[false,false,"NVIDIA H100 80GB HBM3"]' ]
	[ "$(jq -c '.bench | [.status, has("gbps"), .device]' <<<"${lines[2]}")" = '["incorrect",false,"NVIDIA H100 80GB HBM3"]' ]
}

@test "--t4 exports measured and refused records with their raw samples; the export replays to the same answers" {
	mkdir -p run/variants/v1 run/variants/v2
	{
		jq -cn '{run: "run", kernel: "scale", t: "2026-11-21T01:02:03Z", candidate: {id: "a"},
		         build: {status: "ok", state: "v1", dir: "variants/v1", config: {block_size_x: 256, items_per_thread: 1}, compile_ms: 12.5}}'
		jq -cn '{run: "run", candidate: {id: "b"}, build: {status: "ok", state: "v2", dir: "variants/v2", config: {block_size_x: 64, items_per_thread: 4}}}'
	} | kg-bench --replay "$REPLAY" >benched.jsonl
	# the replayed answer keeps the table's samples where a measured one keeps its own
	[ "$(jq -c '.candidate_ms' run/variants/v1/bench.json)" = '{"recorded_ms":[0.5,0.4,0.3,0.2,0.1]}' ]
	{
		cat benched.jsonl
		echo '{"candidate":{"id":"c"},"build":{"status":"invalid_config","config":{"block_size_x":512,"items_per_thread":4}}}'
		echo '{"op":"expand","node":"x"}'
		echo '{"candidate":{"id":"d"},"build":{"status":"ok","config":{"block_size_x":32,"items_per_thread":1}}}'
	} >events.jsonl
	run_tool 0 kg-bench --t4 events.jsonl
	assert_stderr_empty
	echo "$output" >t4.json
	[ "$(jq -c '[.schema_version, .metadata.timeunit, .metadata.kernel, (.results | length)]' t4.json)" = '["1.0.0","milliseconds","scale",3]' ]
	[ "$(jq -c '.results[0] | [.timestamp, .configuration, .times, .invalidity, .correctness, .objectives]' t4.json)" = \
		'["2026-11-21T01:02:03Z",{"block_size_x":256,"items_per_thread":1},{"compilation_time":12.5,"runtimes":[0.5,0.4,0.3,0.2,0.1]},"correct",1,["time"]]' ]
	[ "$(jq -c '.results[0].measurements | map({(.name): .value}) | add | [.time, .state]' t4.json)" = '[0.3,"v1"]' ]
	[ "$(jq -c '[.results[1:][] | [.invalidity, .correctness, .times.runtimes]]' t4.json)" = '[["correctness",0,[]],["constraints",0,[]]]' ]
	# what the export says replays to what was answered
	run_tool 0 kg-bench --replay t4.json < <(built '{"block_size_x":256,"items_per_thread":1}'; built '{"block_size_x":64,"items_per_thread":4}')
	[ "$(jq -c .bench <<<"$output")" = "$(jq -c .bench benched.jsonl)" ]
	# bad lines are reported; the rest is exported
	printf '%s\n' '{"build": {"status": "compile_failed", "config": {"a": 1}}}' 'nonsense' >bad.jsonl
	run_tool 1 kg-bench --t4 bad.jsonl
	[ "$(jq -c '[.results[].invalidity]' <<<"$output")" = '["compile"]' ]
	assert_stderr "kg-bench: bad.jsonl:2: invalid JSON at column 1"
	run_tool 2 kg-bench --t4 --replay "$REPLAY"
	assert_stderr "$(printf '%s\n' "kg-bench: --t4 measures nothing: it takes no --replay or --calibrate" "Try 'kg-bench --help' for more information.")"
}

@test "--replay: a configuration missing from the table is an error record, never a guess; exit 1" {
	run_tool 1 kg-bench --replay "$REPLAY" < <(built '{"block_size_x":512,"items_per_thread":1}')
	msg="configuration {\"block_size_x\":512,\"items_per_thread\":1} is not in the replay table $REPLAY"
	assert_stderr "kg-bench: <stdin>:1: $msg"
	[ "$(jq -c .bench <<<"$output")" = "$(jq -cn --arg m "$msg" '{status: "error", error: $m, replayed: true}')" ]
}

@test "--replay reads an earlier run's events.jsonl too; the last measurement of a configuration wins" {
	{
		echo '{"build":{"status":"ok","config":{"b":1}},"bench":{"status":"ok","median_ms":2.0}}'
		echo '{"build":{"status":"ok","config":{"b":2}},"bench":{"status":"incorrect"}}'
		echo '{"build":{"status":"ok","config":{"b":1}},"bench":{"status":"ok","median_ms":1.5}}'
		echo '{"op":"expand"}'
	} >events.jsonl
	run_tool 0 kg-bench --replay events.jsonl < <(built '{"b":1}'; built '{"b":2}')
	[ "$(jq -c .bench <<<"$output" | tr -d '\n')" = '{"status":"ok","median_ms":1.5,"replayed":true}{"status":"incorrect","replayed":true}' ]
	echo '{"results": [{"configuration": {"b": 1}, "times": {"runtimes": []}, "invalidity": "correct"}]}' >bad_t4.json
	run_tool 2 kg-bench --replay bad_t4.json </dev/null
	assert_stderr "kg-bench: bad_t4.json: results[0].times.runtimes: a correct result needs its runtimes"
}

@test "--replay: a code edit is an error record, never the unedited kernel's time; the records around it are answered; exit 1" {
	c='{"block_size_x":256,"items_per_thread":1}'
	edit() { # BUILD-FIELDS [CANDIDATE-FIELDS]: a built candidate of configuration $c
		jq -cn --argjson c "$c" --argjson b "$1" --argjson k "${2:-"{}"}" \
			'{run: "run", candidate: ({id: "e"} + $k), build: ({status: "ok", config: $c} + $b)}'
	}
	{
		built "$c"
		edit '{"state": "s1", "edited": true}' # as kg-build says it
		# as records built before kg-build said so show it
		edit '{"materialized": "patch"}' '{"patch": "--- a\n+++ b\n"}'
		edit '{"materialized": "source"}' '{"source": "__global__ void k() {}"}'
		edit '{"edited": false, "materialized": "source"}' # the spec's kernel given whole
	} >input.jsonl
	run_tool 1 kg-bench --replay "$REPLAY" input.jsonl
	msg="the replay table $REPLAY holds configurations of the unedited kernel; this variant's source differs (a code edit) and the table has no measurement of its state"
	assert_stderr "$(printf 'kg-bench: input.jsonl:%d: %s\n' 2 "$msg" 3 "$msg" 4 "$msg")"
	[ "${#lines[@]}" -eq 5 ]
	for i in 1 2 3; do
		[ "$(jq -c .bench <<<"${lines[$i]}")" = "$(jq -cn --arg m "$msg" '{status: "error", error: $m, replayed: true}')" ]
	done
	for i in 0 4; do
		[ "$(jq -c '.bench | [.status, .median_ms]' <<<"${lines[$i]}")" = '["ok",0.3]' ]
	done
}

@test "--replay of an events.jsonl: measured code edits answer by their state only; configurations answer for the unedited kernel" {
	{
		echo '{"build":{"status":"ok","state":"u1","config":{"b":1},"edited":false},"bench":{"status":"ok","median_ms":2.0}}'
		echo '{"build":{"status":"ok","state":"e1","config":{"b":1},"edited":true},"bench":{"status":"ok","median_ms":1.0}}'
		# built before kg-build said "edited": a patch of its own, then a variant below it
		echo '{"node":"u1","candidate":{"patch":"x"},"build":{"status":"ok","state":"e2","config":{"b":2},"materialized":"patch"},"bench":{"status":"ok","median_ms":0.5}}'
		echo '{"node":"e2","candidate":{"config":{"b":3}},"build":{"status":"ok","state":"e3","config":{"b":3},"materialized":"parent"},"bench":{"status":"ok","median_ms":0.25}}'
	} >events.jsonl
	query() { # CONFIG [STATE EDITED]
		jq -cn --argjson c "$1" --arg s "${2:-}" --argjson e "${3:-false}" \
			'{candidate: {id: "q"}, build: ({status: "ok", config: $c, edited: $e} + if $s == "" then {} else {state: $s} end)}'
	}
	{
		query '{"b":1}'              # the unedited kernel: not the edit measured after it
		query '{"b":1}' e1 true      # the edit, by its state
		query '{"b":1}' u1           # the unedited variant, by its state
		query '{"b":3}' e3 true      # below an edit, by its state
		query '{"b":1}' e9 true      # an edit the table never measured
		query '{"b":2}'              # only an edit measured b=2
		query '{"b":3}'
	} >input.jsonl
	run_tool 1 kg-bench --replay events.jsonl input.jsonl
	[ "$(jq -c '[.bench.status, .bench.median_ms]' <<<"$output" | paste -sd' ')" = \
		'["ok",2] ["ok",1] ["ok",2] ["ok",0.25] ["error",null] ["error",null] ["error",null]' ]
	[[ "${lines[4]}" == *"this variant's source differs (a code edit)"* ]]
	[[ "${lines[5]}" == *'configuration {\"b\":2} is not in the replay table events.jsonl'* ]]
	# exported as T4 ("edited" among the measurements), it answers the same
	kg-bench --t4 events.jsonl >t4.json
	[ "$(jq -c '[.results[] | .measurements | map({(.name): .value}) | add | [.state, .edited]]' t4.json)" = \
		'[["u1",0],["e1",1],["e2",1],["e3",1]]' ]
	replayed=$output
	run_tool 1 kg-bench --replay t4.json input.jsonl
	[ "$(jq -c '[.bench.status, .bench.median_ms]' <<<"$output")" = "$(jq -c '[.bench.status, .bench.median_ms]' <<<"$replayed")" ]
}

@test "--replay keeps a large table in the cache, compact: the same answers, read again when the table changes" {
	export XDG_CACHE_HOME="$PWD/cache"
	# 3000 configurations of 20 samples: 600 KB of JSON, cached (a small table is not)
	table() {
		jq -n --argjson k "$1" '{schema_version: "1.0.0", results: [range(3000) as $i | {configuration: {a: $i, b: "x"},
			times: {runtimes: [range(20) | $k * ($i + . / 100)]}, invalidity: (if $i == 7 then "runtime" else "correct" end),
			measurements: [{name: "state", value: "s\($i)", unit: ""}]}]}'
	}
	table 1 >big.json
	[ "$(stat -c %s big.json)" -gt 262144 ]
	queries() {
		for a in 0 7 2999 3000; do jq -cn --argjson a "$a" '{run: "run", candidate: {id: "q"}, build: {status: "ok", config: {b: "x", a: $a}}}'; done
		jq -cn '{candidate: {id: "q"}, build: {status: "ok", state: "s5", edited: true, config: {a: 0, b: "x"}}}'
	}
	queries >input.jsonl
	mkdir -p run/variants
	run_tool 1 kg-bench -v --replay big.json input.jsonl
	[[ "$stderr" == *"kg-bench: replay table kept in the cache '$PWD/cache/kernelgraph/replay/"*".txt'"* ]]
	first=$output
	[ "$(jq -c '[.bench.status, .bench.median_ms, .bench.samples]' <<<"$first" | paste -sd' ')" = \
		'["ok",0.095,20] ["crashed",null,null] ["ok",2999.095,20] ["error",null,null] ["ok",5.095,20]' ]
	run_tool 1 kg-bench -v --replay big.json input.jsonl
	[[ "$stderr" == *"kg-bench: big.json: 3000 measurements, read from the cache '$PWD/cache/kernelgraph/replay/"*".txt'"* ]]
	[ "$output" = "$first" ]
	# kg-propose --within reads it too
	run_tool 0 kg-propose -v --within big.json --help
	[[ "$stderr" == "kg-propose: big.json: 3000 measurements, read from the cache '$PWD/cache/kernelgraph/replay/"*".txt'" ]]
	# and without a cache directory the table is read as it is
	run_tool 1 env -u XDG_CACHE_HOME -u HOME kg-bench --replay big.json input.jsonl
	[ "$output" = "$first" ]
	# a changed table is read again
	table 2 >big.json
	run_tool 1 kg-bench -v --replay big.json input.jsonl
	[[ "$stderr" == *"kg-bench: the replay cache '$PWD/cache/kernelgraph/replay/"*".txt' is stale or damaged: made again"* ]]
	[ "$(jq -c '.bench.median_ms' <<<"$output" | paste -sd' ')" = '0.19 null 5998.19 null 10.19' ]
	# a cache cut short is made again
	cache=$(ls cache/kernelgraph/replay/*.txt)
	truncate -s -10 "$cache"
	run_tool 1 kg-bench -v --replay big.json input.jsonl
	[[ "$stderr" == *"is stale or damaged: made again"* ]]
	[ "$(jq -c '.bench.median_ms' <<<"$output" | paste -sd' ')" = '0.19 null 5998.19 null 10.19' ]
	[ "$(ls cache/kernelgraph/replay)" = "${cache##*/}" ]
	table 1 >small.json
	jq '.results |= .[:10]' small.json >small2.json
	run_tool 0 kg-bench --replay small2.json </dev/null
	[ "$(ls cache/kernelgraph/replay)" = "${cache##*/}" ]
}

@test "arguments: types, vector lanes, Size with tunables bound to their lists, fills, poison, tolerances" {
	run_tool 0 "$LIBTEST" kargs "$FIXTURES/kargs/spec.json"
	assert_stderr_empty
	assert_line --index 0 "dynamic_smem 2048"
	assert_line --index 1 "out: float x1 count 4000 bytes 16000 Vector WriteOnly Constant output tol 0.001 0.0001"
	assert_line --index 3 "  poisoned -nan -nan -nan -nan ... sum -nan"
	assert_line --index 5 "  data -0.766349 0.530461 0.103066 0.215443 ... sum 2.98838"
	assert_line --index 6 "v4: float x4 count 10 bytes 160 Vector ReadOnly Constant tol 0.001 0.0001"
	assert_line --index 7 "  data 1.5 1.5 1.5 1.5 ... sum 60"
	assert_line --index 8 "h: half x1 count 8 bytes 16 Vector ReadWrite Generator output tol 0.001 0.0001"
	assert_line --index 9 "  data 1000 1000.5 1001 1001.5 ... sum 8014"
	assert_line --index 13 "raw: uint8 x1 count 4 bytes 4 Vector ReadOnly BinaryRaw tol 0.001 0.0001"
	assert_line --index 14 "  data 1 2 3 255 ... sum 261"
	assert_line --index 16 "  data 0.25 ... sum 0.25"
	assert_line --index 19 "scratch: float x1 count 256 bytes 1024 Local ReadWrite Constant tol 0.001 0.0001"
	assert_line --index 21 "  data 0 1 2 3 ... sum 120"
	assert_line --index 22 "flags: bool x1 count 64 bytes 64 Vector ReadWrite Random output tol 0 0.0001"
	assert_line --index 24 "  poisoned 165 165 165 165 ... sum 10560"
	# ReferenceArguments: the expected output, and the target's tolerance from the threshold.
	assert_line --index 25 "d: double x1 count 4 bytes 32 Vector WriteOnly Constant output tol 0 0.01"
	assert_line --index 28 "reference d_expected for d: Generator, tol 0 0.01"
	assert_line --index 29 "  data 0 2 4 6 ... sum 12"
	# Random fills are reproducible for a set, and differ from set to set; integers stay in [0, FillValue].
	first=$("$LIBTEST" kargs "$FIXTURES/kargs/spec.json" 0 | sed -n 6p)
	[ "$("$LIBTEST" kargs "$FIXTURES/kargs/spec.json" 0 | sed -n 6p)" = "$first" ]
	[ "$("$LIBTEST" kargs "$FIXTURES/kargs/spec.json" 5 | sed -n 6p)" != "$first" ]
	[ "$("$LIBTEST" kargs "$FIXTURES/kargs/spec.json" 5 | sed -n 13p)" = "  data 1 10 2 7 ... sum 4958" ]
}

@test "kg-bench's device code compiles for the GPUs NVRTC knows, without a warning" {
	for arch in sm_75 sm_90 sm_100 compute_75; do
		run_tool 0 "$LIBTEST" harness "$arch"
		assert_output "compiled for $arch"
	done
}

@test "Random data is Philox4x32-10: Random123's known answers" {
	run_tool 0 "$LIBTEST" philox 0 0 0 0 0 0
	assert_output "6627e8d5 e169c58d bc57ac4c 9b00dbd8"
	run_tool 0 "$LIBTEST" philox 0xffffffff 0xffffffff 0xffffffff 0xffffffff 0xffffffff 0xffffffff
	assert_output "408f276d 41c83b0e a20bc7c6 6d5451fd"
	run_tool 0 "$LIBTEST" philox 0x243f6a88 0x85a308d3 0x13198a2e 0x03707344 0xa4093822 0x299f31d0
	assert_output "d16cfe09 94fdcceb 5001e420 24126ea1"
}

@test "argument errors name the spec and the field" {
	cp "$FIXTURES/kargs/spec.json" "$FIXTURES/kargs/bytes.bin" .
	jq '.KernelSpecification.Arguments[5].Size = 5' spec.json >short.json
	run_tool 1 "$LIBTEST" kargs short.json
	[[ "$stderr" == *"KernelSpecification.Arguments[5].DataSource: '"*"/bytes.bin' holds 4 bytes; raw needs 5 (5 elements of 1 bytes)" ]]
	jq '.KernelSpecification.Arguments[1].Size = "ProblemSize[0] // 0"' spec.json >div.json
	run_tool 1 "$LIBTEST" kargs div.json
	assert_stderr 'kg-libtest: div.json: KernelSpecification.Arguments[1].Size: column 16: integer division or modulo by zero in "ProblemSize[0] // 0"'
	jq 'del(.KernelSpecification.Arguments[1].Size)' spec.json >nosize.json
	run_tool 1 "$LIBTEST" kargs nosize.json
	assert_stderr 'kg-libtest: nosize.json: KernelSpecification.Arguments[1]: Size: missing (a Vector argument needs one)'
	jq '.KernelSpecification.ReferenceArguments[0].TargetName = "x"' spec.json >ref.json
	run_tool 1 "$LIBTEST" kargs ref.json
	assert_stderr "kg-libtest: ref.json: KernelSpecification.ReferenceArguments[0].TargetName: 'x' is not an output argument"
	jq '.KernelSpecification.Arguments[3].DataSource = "j + 1"' spec.json >gen.json
	run_tool 1 "$LIBTEST" kargs gen.json
	assert_stderr "kg-libtest: gen.json: KernelSpecification.Arguments[3].DataSource: column 1: name 'j' is not defined in \"j + 1\""
	# a BinaryRaw file in the spec's folder only, as its KernelFile
	only="a spec may name only files in its folder, as a kernel may include only files in its"
	jq '.KernelSpecification.Arguments[5].DataSource = "/etc/passwd"' spec.json >host.json
	run_tool 1 "$LIBTEST" kargs host.json
	assert_stderr "kg-libtest: host.json: KernelSpecification.Arguments[5].DataSource: '/etc/passwd': an absolute path; $only"
	jq '.KernelSpecification.Arguments[5].DataSource = "../bytes.bin"' spec.json >up.json
	run_tool 1 "$LIBTEST" kargs up.json
	assert_stderr "kg-libtest: up.json: KernelSpecification.Arguments[5].DataSource: '../bytes.bin': a path through \"..\"; $only"
	# a link in the folder that leads out of it
	mkdir sub && mv bytes.bin sub/
	mkdir in && cp spec.json in/ && ln -s ../sub/bytes.bin in/bytes.bin
	run_tool 1 "$LIBTEST" kargs in/spec.json
	[[ "$stderr" == *"KernelSpecification.Arguments[5].DataSource: 'bytes.bin': no such file in the folder of the spec; $only" ]]
}

@test "comparison: |out - ref| <= atol + rtol |ref|; NaN where the reference is finite fails; integers exact" {
	run_tool 0 "$LIBTEST" compare float 1e-3 1e-4 "1 2.0015 nan 4" "1 2 3 4"
	assert_output "passed 0 bad 2 first_bad 1 max_abs_err inf max_rel_err inf ref_max 4"
	run_tool 0 "$LIBTEST" compare float 1e-3 1e-4 "1 2.0011 3 4" "1 2 3 4"
	assert_output "passed 1 bad 0 first_bad 0 max_abs_err 0.00110006 max_rel_err 0.000550032 ref_max 4"
	run_tool 0 "$LIBTEST" compare float 1e-3 1e-4 "nan inf" "nan inf"
	assert_output "passed 1 bad 0 first_bad 0 max_abs_err 0 max_rel_err 0 ref_max 0"
	run_tool 0 "$LIBTEST" compare float 1e-3 1e-4 "1 -inf" "1 inf"
	assert_output "passed 0 bad 1 first_bad 1 max_abs_err inf max_rel_err inf ref_max 1"
	run_tool 0 "$LIBTEST" compare int32 0 0 "1 2 4" "1 2 3"
	assert_output "passed 0 bad 1 first_bad 2 max_abs_err 1 max_rel_err 0.333333 ref_max 3"
	run_tool 0 "$LIBTEST" compare half 1e-2 1e-2 "100 0.5" "100.5 0.5"
	assert_output "passed 1 bad 0 first_bad 0 max_abs_err 0.5 max_rel_err 0.00497512 ref_max 100.5"
	# An all-zero reference makes a weak test: ref_max tells kg-bench so.
	run_tool 0 "$LIBTEST" compare float 1e-3 1e-4 "0 0" "0.0001 0"
	assert_output "passed 1 bad 0 first_bad 0 max_abs_err 0.0001 max_rel_err 1 ref_max 0.0001"
}

@test "half precision rounds to nearest even exactly as CPython's struct 'e' does" {
	values="1 0.1 65504 65519 1e-8 6e-8 2.98e-8 -2.5 0.333333 1e-5 6.1e-5 -0 inf -inf 1.00048828125 1.00146484375"
	run_tool 0 "$LIBTEST" half 65520
	assert_output "65520 0x7c00 inf" # CPython refuses to round to infinity; IEEE rounds up
	run_tool 0 "$LIBTEST" half $values
	expected=$(python3 -c '
import struct, sys
for v in sys.argv[1:]:
    b = struct.pack("<e", float(v))
    h = struct.unpack("<H", b)[0]
    print("%s 0x%04x %.9g" % (v, h, struct.unpack("<e", b)[0]))
' $values 2>&1)
	[ "$output" = "$expected" ]
}
