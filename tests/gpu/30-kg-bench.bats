#!/usr/bin/env bats
# 30-kg-bench.bats (GPU): kg-bench passes a correct kernel and fails the ways kernels cheat:
# an off-by-one, half an output, a constant output, an untouched output, a written input, a
# write past or before a buffer, a kernel right only for its first launches, an input
# changed only while timed; a faulting and a hanging kernel are crashed and timeout, and
# the next record still runs.

load ../test_helper

BENCH="$BATS_TEST_DIRNAME/../fixtures/bench"

setup() {
	export XDG_CACHE_HOME="$BATS_TEST_TMPDIR/cache"
	cd "$BATS_TEST_TMPDIR"
	mkdir run
	cp "$BENCH"/spec.json "$BENCH"/saxpy.cu run/
	echo '{"run":"run","candidate":{"id":"baseline"}}' | timeout 120 kg-build | timeout 120 kg-bench --budget 0.2 >baseline.jsonl
	BASE=$(jq -r .build.state baseline.jsonl)
}

# candidate ID FILE [CONFIG]: a full-source candidate made of a fixture kernel.
candidate() {
	local config=${3:-'{}'}
	jq -cn --arg id "$1" --rawfile s "$BENCH/$2" --arg b "$BASE" --argjson c "$config" \
		'{run: "run", node: $b, candidate: {id: $id, source: $s, config: $c}}'
}

@test "the baseline is benched, kept as the run's baseline, and its outputs as the reference" {
	[ "$(jq -r '.bench.status' baseline.jsonl)" = ok ]
	[ "$(jq -r '.build.baseline' baseline.jsonl)" = true ]
	[ "$(jq '.bench | .samples >= 10 and .median_ms > 0 and .speedup == 1' baseline.jsonl)" = true ]
	[ "$(jq -r .state run/baseline.json)" = "$BASE" ]
	# the device, as kg-propose's prompt describes it
	[ "$(jq -r '.device.name' run/baseline.json)" = "$(jq -r .bench.device baseline.jsonl)" ]
	jq -e '.device | (.architecture | test("^sm_[0-9]+$")) and .multiprocessors > 0 and .shared_memory_per_block_optin >= .shared_memory_per_block
		and .registers_per_block > 0 and .l2_cache_bytes > 0' run/baseline.json
	[ -s run/reference/0-y.bin ]
	[ "$(stat -c %s run/reference/0-y.bin)" -eq $((4194304 * 4)) ]
	[ -s "run/variants/$BASE/bench.json" ]
}

@test "a correct kernel passes and is timed against the baseline" {
	run_tool 0 kg-bench --budget 0.3 < <(candidate good saxpy.cu '{"items_per_thread":2}' | timeout 120 kg-build)
	jq -c .bench <<<"$output" >&3
	[ "$(jq -r '.bench.status' <<<"$output")" = ok ]
	[ "$(jq '.bench.check | .passed and .input_sets == 3 and .max_abs_err == 0' <<<"$output")" = true ]
	[ "$(jq '.bench | .samples >= 10 and .baseline_ms > 0 and .speedup > 0 and (.speedup_ci | length) == 2' <<<"$output")" = true ]
	# timed launches verified too, and where the time went
	[ "$(jq '.bench.check.timed_checks >= 3' <<<"$output")" = true ]
	jq -e '.bench | [.wait_ms, .setup_ms, .load_ms, .fill_ms, .check_ms, .warmup_ms, .time_ms, .gpu_ms, .write_ms, .wall_ms]
		| all(type == "number" and . >= 0)' <<<"$output"
	[ "$(jq '.bench | .speedup_ci[0] <= .speedup and .speedup <= .speedup_ci[1]' <<<"$output")" = true ]
	[ "$(jq -r '.bench.timer' <<<"$output")" = cupti ]
	[ "$(jq '.bench | .bytes == 4194304 * 12 and .gbps > 100' <<<"$output")" = true ]
	state=$(jq -r .build.state <<<"$output")
	[ "$(jq '.candidate_ms.cupti_ms | length >= 10' "run/variants/$state/bench.json")" = true ]
}

@test "kernels that cheat or are wrong fail the check" {
	{
		candidate off-by-one off_by_one.cu
		candidate half half_output.cu
		candidate constant constant.cu
		candidate untouched untouched.cu
		candidate writes-input writes_input.cu
	} | timeout 120 kg-build >built.jsonl
	run_tool 0 kg-bench --budget 0.2 built.jsonl
	jq -c '[.candidate.id, .bench.status, .bench.check]' <<<"$output" >&3
	[ "$(jq -r .bench.status <<<"$output" | sort -u)" = incorrect ]
	[ "$(jq -r '.bench.check.argument' <<<"$output" | tr '\n' ' ')" = 'y y y y z ' ]
	[ "$(jq '.bench.check.first_bad' <<<"${lines[0]}")" -eq 4194303 ]
	[ "$(jq '.bench.check.first_bad' <<<"${lines[1]}")" -eq 2097152 ]
	[ "$(jq '.bench.check.first_bad' <<<"${lines[3]}")" -eq 0 ]
}

@test "a kernel right only for its first K launches (K = 1 to 64) is never ok" {
	for k in $(seq 1 64); do
		sed "s/CHEAT_AFTER/$k/" "$BENCH/counter.cu" >counter-$k.cu
		jq -cn --arg id "after-$k" --rawfile s counter-$k.cu --arg b "$BASE" \
			'{run: "run", node: $b, candidate: {id: $id, source: $s, config: {}}}'
	done | timeout 300 kg-build -j 8 >built.jsonl
	[ "$(jq -r .build.status built.jsonl | sort -u)" = ok ]
	run_tool 0 kg-bench --budget 0.2 built.jsonl
	jq -c '[.candidate.id, .bench.status, .bench.check.input_set, .bench.check.why]' <<<"$output" >&3
	[ "$(jq -r .bench.status <<<"$output" | sort -u)" = incorrect ]
	[ "$(jq -s 'map(select(.bench.speedup != null and .bench.status == "ok")) | length' <<<"$output")" -eq 0 ]
	# caught by the checks while K is below the checked launches (2 fresh sets and the
	# spec's), by the verified timed launches after
	[ "$(jq -s '[.[2:][] | .bench.check.why | test("^timed launch [0-9]+ of [0-9]+ left outputs that differ")] | all' <<<"$output")" = true ]
}

@test "a write past an output's end or before its start, an input changed only while timed: incorrect, and said so" {
	{
		candidate past writes_past.cu
		candidate before writes_before.cu
		candidate late writes_input_late.cu
		candidate good saxpy.cu '{"items_per_thread":4}'
	} | timeout 120 kg-build >built.jsonl
	run_tool 0 kg-bench --budget 0.2 built.jsonl
	jq -c '[.candidate.id, .bench.status, .bench.check]' <<<"$output" >&3
	[ "$(jq -r .bench.status <<<"$output" | tr '\n' ' ')" = 'incorrect incorrect incorrect ok ' ]
	[ "$(jq -r .bench.check.why <<<"${lines[0]}")" = "the kernel wrote outside its buffers: from 8 bytes past the end of the output buffer of 'y' (1 8-byte words of guard bytes changed)" ]
	[ "$(jq -r .bench.check.why <<<"${lines[1]}")" = "the kernel wrote outside its buffers: before the start of the output buffer of 'y' (1 8-byte words of guard bytes changed)" ]
	[ "$(jq -c '.bench.check | [.argument, .why]' <<<"${lines[2]}")" = '["x","the kernel changed an input it may only read while it was timed"]' ]
}

# gpu_lock: the lock file kg-bench takes for the baseline's GPU, computed as kg-bench computes
# it (gpu_lock_path: the system folder, else $XDG_RUNTIME_DIR/kernelgraph, else the cache's).
gpu_lock() {
	"$LIBTEST" gpu-lock-path "$(jq -r .bench.pci_bus_id baseline.jsonl)"
}

@test "one record at a time on a GPU: a record waits for the GPU's lock, alive, and is measured once it has it" {
	lock=$(gpu_lock)
	# held 5 s: the record's build and its worker's start take up to 1.5 s of them (a host of
	# four H200s), and it must still wait over 2 s
	flock "$lock" sleep 5 &
	sleep 0.5
	# the watchdog (2 s) does not fire while the record waits: the worker says it is alive
	run_tool 0 kg-bench --budget 0.1 --watchdog 2 < <(candidate waits saxpy.cu '{"items_per_thread":2}' | timeout 120 kg-build)
	wait
	jq -c '.bench | [.status, .wait_ms, .wall_ms]' <<<"$output" >&3
	[ "$(jq '.bench | .status == "ok" and .wait_ms >= 2000 and .wall_ms < 2000' <<<"$output")" = true ]
}

@test "a GPU lock held past --gpu-wait: the record is an error naming the holder, after a bounded wait" {
	# The lock is taken after the driver is opened (its name is the GPU's bus id), so this
	# needs a GPU; kg-libtest gpu-lock checks the library's bounded wait without one.
	candidate held saxpy.cu '{"items_per_thread":2}' | timeout 120 kg-build >built.jsonl
	lock=$(gpu_lock)
	flock "$lock" sleep 30 &
	holder=$!
	sleep 0.5
	start=$(date +%s%N)
	run_tool 0 kg-bench --budget 0.1 --gpu-wait 1 built.jsonl
	waited=$(( ($(date +%s%N) - start) / 1000000 ))
	kill "$holder"
	wait "$holder" || true
	jq -c '.bench | [.status, .error]' <<<"$output" >&3
	[ "$(jq -r .bench.status <<<"$output")" = error ]
	[ "$(jq -r .bench.error <<<"$output")" = "the GPU's lock '$lock' is held by pid $holder (flock, user $(id -un)): waited 1 s (--gpu-wait)" ]
	# bounded: the wait, and the worker's start around it, not the holder's 30 s
	[ "$waited" -ge 1000 ] && [ "$waited" -lt 15000 ]
}

@test "a faulting kernel is crashed, a hanging one timeout, and the records after them are benched" {
	{
		candidate fault fault.cu
		candidate after-fault saxpy.cu '{"items_per_thread":4}'
		candidate hang hang.cu
		candidate after-hang saxpy.cu '{"block_size_x":128}'
	} | timeout 120 kg-build >built.jsonl
	run_tool 0 kg-bench --budget 0.2 --watchdog 5 built.jsonl
	jq -c '[.candidate.id, .bench.status, .bench.error]' <<<"$output" >&3
	[ "$(jq -r '.bench.status' <<<"$output" | tr '\n' ' ')" = 'crashed ok timeout ok ' ]
	jq -r '.bench.error' <<<"${lines[0]}" | grep -q CUDA_ERROR_ILLEGAL_ADDRESS
	[ "$(jq -r '.bench.error' <<<"${lines[2]}")" = 'no progress for 5 s: the kernel hung and its process was killed' ]
}

@test "records without a successful build pass through; --calibrate measures the copy bandwidth" {
	echo '{"candidate":{"id":"x"},"build":{"status":"compile_failed","error":"e"}}' >failed.jsonl
	run_tool 0 kg-bench failed.jsonl
	[ "$output" = "$(cat failed.jsonl)" ]
	run_tool 0 kg-bench --calibrate
	jq -c . <<<"$output" >&3
	[ "$(jq '.copy_gbps > 500' <<<"$output")" = true ]
	ls cache/kernelgraph/devices/*.json
	run_tool 0 kg-bench --budget 0.2 < <(candidate again saxpy.cu '{"items_per_thread":2}' | timeout 120 kg-build)
	[ "$(jq '.bench.pct_peak_bw > 0' <<<"$output")" = true ]
}

@test "a build kg-build --no-compile made is refused with an error record, exit 1; the records around it are benched" {
	{
		candidate before saxpy.cu '{"items_per_thread":2}' | timeout 120 kg-build
		candidate uncompiled saxpy.cu '{"items_per_thread":4}' | timeout 120 kg-build --no-compile
		candidate after saxpy.cu '{"block_size_x":128}' | timeout 120 kg-build
	} >input.jsonl
	[ "$(jq -c .build.compiled input.jsonl | paste -sd' ')" = 'null false null' ]
	run_tool 1 kg-bench --budget 0.2 input.jsonl
	msg="this variant was not compiled (kg-build --no-compile): only --replay can answer it; build it again without --no-compile to measure it"
	[[ "$stderr" == *"kg-bench: input.jsonl:2: $msg"* ]]
	[ "$(jq -c '.bench | [.status, .error]' <<<"${lines[1]}")" = "$(jq -cn --arg m "$msg" '["error", $m]')" ]
	[ "$(jq -r .bench.status <<<"${lines[0]}")" = ok ]
	[ "$(jq -r .bench.status <<<"${lines[2]}")" = ok ]
	# compiled, it is measured
	run_tool 0 kg-bench --budget 0.2 < <(candidate uncompiled saxpy.cu '{"items_per_thread":4}' | timeout 120 kg-build)
	[ "$(jq -r .bench.status <<<"$output")" = ok ]
}

@test "a record without a run is reported and passed on (exit 1); one before the baseline is an error record" {
	mkdir other
	cp "$BENCH"/spec.json "$BENCH"/saxpy.cu other/
	jq -cn '{run: "other", candidate: {id: "c", config: {items_per_thread: 2}}}' | timeout 120 kg-build >nobase.jsonl
	jq -c 'del(.run)' nobase.jsonl >norun.jsonl
	run_tool 1 kg-bench norun.jsonl
	assert_stderr 'kg-bench: norun.jsonl:1: run: missing (give the record a "run" or kg-bench --run DIR)'
	[ "$output" = "$(cat norun.jsonl)" ]
	run_tool 0 kg-bench nobase.jsonl
	[ "$(jq -c '.bench | [.status, .error]' <<<"$output")" = \
		'["error","no baseline in other (other/baseline.json is missing): bench the baseline first, as kg-init does"]' ]
}
