#!/usr/bin/env bats
# 32-kg-bench-metrics.bats (GPU): kg-bench --metrics gives the contract's object after the
# timing, left as it was; the figures say what is known of the kernels (a copy at the DRAM
# roof, FMA chains at the SM's, a transpose whose shared tile conflicts unless padded) and
# match Nsight Compute's on the same kernels; --metrics-every picks the records it should.

load ../test_helper

METRICS="$BATS_TEST_DIRNAME/../fixtures/bench/metrics"
EXAMPLES="$BATS_TEST_DIRNAME/../../examples"

# new_run DIR SPEC KERNEL: a run of SPEC in DIR.
new_run() {
	mkdir -p "$1"
	cp "$2" "$1/spec.json"
	cp "$3" "$1/"
}

# bench_metrics RUN OUT [CONFIG]: the baseline of RUN, or a candidate of CONFIG after it, built
# and benched with --metrics into OUT.
bench_metrics() {
	if [ $# -eq 2 ]; then
		jq -cn --arg r "$1" '{run: $r, candidate: {id: "baseline"}}'
	else
		jq -cn --arg r "$1" --arg b "$(jq -r .state "$1/baseline.json")" --argjson c "$3" \
			'{run: $r, node: $b, candidate: {id: "c", config: $c}}'
	fi | timeout 120 kg-build | timeout 300 kg-bench --metrics --budget 0.2 >"$2"
}

setup_file() {
	export XDG_CACHE_HOME="$BATS_FILE_TMPDIR/cache"
	cd "$BATS_FILE_TMPDIR"
	new_run copy "$METRICS/copy.json" "$METRICS/copy.cu"
	new_run compute "$METRICS/compute.json" "$METRICS/compute.cu"
	new_run transpose "$EXAMPLES/transpose/transpose.json" "$EXAMPLES/transpose/transpose.cu"
	bench_metrics copy copy.jsonl
	bench_metrics compute compute.jsonl
	bench_metrics transpose conflicted.jsonl
	bench_metrics transpose padded.jsonl '{"tile": 32, "padding": 1, "elements_per_thread": 1}'
	cc -O2 -o launch_cubin "$BATS_TEST_DIRNAME/launch_cubin.c" -I"${CUDA_HOME:-/usr/local/cuda}/include" \
		-L"${CUDA_HOME:-/usr/local/cuda}/lib64/stubs" -lcuda
}

setup() {
	cd "$BATS_FILE_TMPDIR"
}

# ncu_against NAME RUN RECORDS ARG...: ncu on the record's kernel (launch_cubin, with ARG...),
# compared with its bench.metrics by ncu_compare.py.
ncu_against() {
	local name=$1 run=$2 rec=$3
	shift 3
	command -v ncu >/dev/null || { echo "ncu is not on the PATH" >&2; return 1; }
	jq .bench.metrics "$rec" >"$name.metrics.json"
	# shellcheck disable=SC2046
	timeout 300 ncu --csv --print-units base --cache-control all --clock-control none \
		--metrics "$("$BATS_TEST_DIRNAME/ncu_compare.py" --metrics)" -c 1 \
		./launch_cubin "$run/$(jq -r .build.cubin "$rec")" "$(jq -r .build.function "$rec")" \
		$(jq -r '.build.grid + .build.block | join(" ")' "$rec") "$@" >"$name.ncu.csv"
	echo "# $name" >&3
	"$BATS_TEST_DIRNAME/ncu_compare.py" "$name.ncu.csv" "$name.metrics.json" | tee /dev/fd/3
}

@test "--metrics: the contract's object in bench.metrics and variants/STATE/metrics.json; the timing as without" {
	for f in copy compute conflicted padded; do
		jq -c '.bench.metrics | del(.values.stalls, .unavailable)' "$f.jsonl" >&3
		[ "$(jq -r .bench.status "$f.jsonl")" = ok ]
		jq -e '.bench | .samples >= 10 and .median_ms > 0 and .check.passed' "$f.jsonl"
		jq -e '.bench.metrics | .status == "ok" and .source == "cupti-range-profiler" and (.device | startswith("NVIDIA"))
			and .cost_ms > 0 and .passes >= 1 and (.replay == "user" or .replay == "kernel")' "$f.jsonl"
		# every figure of the contract is there or said to be unavailable, never both
		jq -e '.bench.metrics as $m | ["sm_throughput_pct", "dram_throughput_pct", "memory_throughput_pct",
			"achieved_occupancy_pct", "theoretical_occupancy_pct", "occupancy_limiter", "l1_hit_rate_pct",
			"l2_hit_rate_pct", "shared_bank_conflicts", "shared_wavefronts", "tensor_pipe_pct", "fma_pipe_pct",
			"sfu_pipe_pct", "global_atomics", "instructions_issued", "ipc"]
			| all(. as $k | ($m.values | has($k)) != ($m.unavailable | has($k)))' "$f.jsonl"
		jq -e '.bench.metrics.values | [.[] | numbers] | all(. >= 0)' "$f.jsonl"
		jq -e '.bench.metrics.values.stalls | length >= 8 and ([.[]] | all(. >= 0 and . <= 100))
			and (.long_scoreboard | type == "number")' "$f.jsonl"
		state=$(jq -r .build.state "$f.jsonl")
		run=$(jq -r .run "$f.jsonl")
		[ "$(jq -cS . "$run/variants/$state/metrics.json")" = "$(jq -cS .bench.metrics "$f.jsonl")" ]
	done
	# the kernels' occupancy, from the driver: 256 threads of few registers fill an SM
	[ "$(jq -c '.bench.metrics.values | [.theoretical_occupancy_pct, .occupancy_limiter]' copy.jsonl)" = '[100,null]' ]
}

@test "--metrics on a GPU other than the first: CUPTI is asked of the GPU the worker was shown alone" {
	[ "$(kg-bench --devices | wc -l)" -ge 2 ] || skip "one GPU"
	# each worker shows the driver its own GPU alone, which is then CUDA's device 0
	new_run copy1 "$METRICS/copy.json" "$METRICS/copy.cu"
	jq -cn '{run: "copy1", candidate: {id: "baseline"}}' | timeout 120 kg-build |
		timeout 300 kg-bench --device 1 --metrics --budget 0.2 >copy1.jsonl
	jq -e '.bench | .status == "ok" and .device_id == 1 and .gpu == 1 and .metrics.status == "ok"' copy1.jsonl
}

@test "a copy runs at the DRAM roof, FMA chains at the SM's" {
	jq -c '.bench | [.gbps, .metrics.values.dram_throughput_pct, .metrics.values.sm_throughput_pct]' copy.jsonl >&3
	jq -c '.bench.metrics.values | [.sm_throughput_pct, .fma_pipe_pct, .dram_throughput_pct, .stalls.math_pipe_throttle]' compute.jsonl >&3
	jq -e '.bench.metrics.values | .dram_throughput_pct > 70 and .sm_throughput_pct < .dram_throughput_pct
		and .dram_bytes > 0.9 * 2 * 268435456' copy.jsonl
	jq -e '.bench.metrics.values | .sm_throughput_pct > 70 and .fma_pipe_pct > 60 and .dram_throughput_pct < 10
		and .tensor_pipe_pct < 1' compute.jsonl
}

@test "a transposed tile in shared memory: bank conflicts without padding, next to none with it" {
	jq -c '.bench.metrics.values | [.shared_bank_conflicts, .shared_wavefronts]' conflicted.jsonl padded.jsonl >&3
	jq -e '.bench.metrics.values | .shared_bank_conflicts > 0.5 * .shared_wavefronts' conflicted.jsonl
	jq -e '.bench.metrics.values | .shared_bank_conflicts < 0.1 * .shared_wavefronts' padded.jsonl
	# the same tile moved: the padded one has a fiftieth of the conflicts, a fraction of the wavefronts
	jq -se 'map(.bench.metrics.values) | .[0].shared_bank_conflicts > 50 * .[1].shared_bank_conflicts
		and .[0].shared_wavefronts > 4 * .[1].shared_wavefronts' conflicted.jsonl padded.jsonl
}

@test "the figures match Nsight Compute's on the same kernels" {
	ncu_against copy copy copy.jsonl buf:268435456 buf:268435456 i32:16777216
	ncu_against compute compute compute.jsonl buf:4194304 buf:4194304 i32:1048576
	ncu_against conflicted transpose conflicted.jsonl buf:268435456 buf:268435456 i32:8192 i32:8192
	ncu_against padded transpose padded.jsonl buf:268435456 buf:268435456 i32:8192 i32:8192
}

@test "--metrics-every 3: the baseline, every third candidate and each that beats the run's best" {
	new_run every "$BATS_TEST_DIRNAME/../fixtures/bench/spec.json" "$BATS_TEST_DIRNAME/../fixtures/bench/saxpy.cu"
	echo '{"run":"every","candidate":{"id":"baseline"}}' | timeout 120 kg-build |
		timeout 120 kg-bench --metrics-every 3 --budget 0.1 >every-base.jsonl
	jq -e '.bench.metrics.status == "ok"' every-base.jsonl
	base=$(jq -r .build.state every-base.jsonl)
	for c in '{"block_size_x":64,"items_per_thread":1}' '{"block_size_x":64,"items_per_thread":4}' \
		'{"block_size_x":128,"items_per_thread":2}' '{"block_size_x":512,"items_per_thread":1}' \
		'{"block_size_x":128,"items_per_thread":4}' '{"block_size_x":512,"items_per_thread":4}' \
		'{"block_size_x":256,"items_per_thread":2}'; do
		jq -cn --arg b "$base" --argjson c "$c" '{run: "every", node: $b, candidate: {id: "c", config: $c}}'
	done | timeout 120 kg-build | timeout 300 kg-bench --metrics-every 3 --budget 0.1 >every.jsonl
	jq -c '[.bench.status, .bench.speedup, (.bench.metrics.status // null)]' every.jsonl >&3
	# collected for the 3rd and 6th, and for any other faster than every one before it (and the baseline)
	jq -se 'reduce .[] as $r ({i: 0, best: 1, ok: true};
		.i += 1 | ($r.bench.speedup) as $s
		| (.i % 3 == 0 or $s > .best) as $want
		| .ok = (.ok and (($r.bench | has("metrics")) == $want))
		| .best = ([.best, $s] | max)) | .ok' every.jsonl
	# each collection in the one worker maps its samples to saxpy's lines: CUPTI hands a function
	# name again in later collections, and one kg-bench had freed read as another function's
	for state in $(jq -r 'select(.bench.metrics) | .build.state' every.jsonl); do
		jq -e '.status == "ok" and .samples > 0 and .unmapped <= 0.1 * .samples' "every/variants/$state/lines.json"
	done
}
