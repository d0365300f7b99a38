#!/usr/bin/env bats
# 06-bottleneck.bats: the bottleneck model (lib/bottleneck.c) through kg-libtest on the metrics
# of known kernels, the PTX-only guess, malformed metrics; and its two users: kg-select's edge
# priors (only a node with metrics.json moves them) and the symptoms of kg-propose's prompt.

load test_helper

B="$FIXTURES/bottleneck"

setup() {
	cd "$BATS_TEST_TMPDIR"
}

teardown() {
	if [ -f mock.pid ]; then kill "$(cat mock.pid)" 2>/dev/null || true; fi
}

# verdict METRICS [BUILD]: class, from, confidence, evidence and favoured methods, one line.
verdict() {
	"$LIBTEST" bottleneck "$@" | jq -c '[.class, .from, .confidence, .evidence, .favoured]'
}

@test "each known kernel's metrics give its class, the evidence that decided it and the moves it favours" {
	cat >want <<-'END'
	["gmem_bandwidth","metrics",1,"dram_throughput_pct 90.3 (near the roof from 80)",["vectorize_global_loads","cache_policy_cg","grouped_gemm_colmajor","change_vector_width","change_block_sizes","change_work_per_thread","pad_tail_and_mask","softmax_math_fusion"]]
	["tensor","metrics",0.97,"tensor_pipe_pct 68.1 (busy from 60)",["change_block_sizes","enable_async_pipeline","change_pipeline_depth","switch_to_mma_or_wgmma","change_work_per_thread","grouped_gemm_colmajor"]]
	["smem","metrics",1,"shared_bank_conflicts / shared_wavefronts 0.909 (high from 0.4); stalls.mio_throttle 36.7% (high from 30)",["switch_algorithm","change_block_sizes","change_vector_width","change_work_per_thread","switch_to_mma_or_wgmma"]]
	["atomics","metrics",0.9159,"global_atomics / instructions_issued 0.0833 (high from 0.05)",["avoid_atomics_reduce","change_work_per_thread","switch_algorithm","change_block_sizes","enable_async_pipeline"]]
	["sfu","metrics",1,"sfu_pipe_pct 62.4 (busy from 50)",["softmax_math_fusion","change_work_per_thread","change_vector_width","switch_algorithm"]]
	["latency","metrics",1,"achieved_occupancy_pct 11.8 (low below 20), limited by shared_memory; stalls.long_scoreboard 55.1% (high from 50); busiest unit memory_throughput_pct 22.4 (far from its roof below 30)",["change_block_sizes","enable_async_pipeline","change_work_per_thread","change_unrolling","change_pipeline_depth","vectorize_global_loads"]]
	["smem","metrics",1,"memory_throughput_pct 82 (near the roof from 80) with dram_throughput_pct 10: the busiest memory unit is on chip (L1/shared memory or L2)",["switch_algorithm","change_block_sizes","change_vector_width","change_work_per_thread","switch_to_mma_or_wgmma"]]
	END
	# (matmul_h100_baseline: kg-bench --metrics on the matmul example's baseline, an H100)
	for k in copy wmma_matmul transpose_conflicts histogram_atomics softmax_sfu latency_lowocc matmul_h100_baseline; do
		run_tool 0 "$LIBTEST" bottleneck "$B/$k.metrics.json"
		assert_stderr_empty
		jq -c '[.class, .from, .confidence, .evidence, .favoured]' <<<"$output"
	done >got
	diff want got
	# The histogram also waits on its loads, far enough from every roof to score a little.
	[ "$("$LIBTEST" bottleneck "$B/histogram_atomics.metrics.json" | jq -c .scores)" = \
		'{"atomics":1,"tensor":0,"sfu":0,"smem":0,"compute":0,"gmem_bandwidth":0,"overlap":0.1682,"latency":0.1584}' ]
}

@test "the priors are a distribution over the fifteen canonical methods; PTX figures lower moves made already" {
	run_tool 0 "$LIBTEST" bottleneck "$B/copy.metrics.json"
	[ "$(jq -c '.priors | keys_unsorted' <<<"$output")" = \
		'["enable_async_pipeline","vectorize_global_loads","switch_to_mma_or_wgmma","pad_tail_and_mask","change_block_sizes","cache_policy_cg","avoid_atomics_reduce","grouped_gemm_colmajor","softmax_math_fusion","change_work_per_thread","change_pipeline_depth","change_vector_width","change_unrolling","switch_algorithm","retune_configuration"]' ]
	[ "$(jq '[.priors[]] | add | . * 1000 | round' <<<"$output")" = 1000 ]
	[ "$(jq -c '.priors | [.vectorize_global_loads, .cache_policy_cg, .switch_to_mma_or_wgmma]' <<<"$output")" = '[0.1753,0.134,0.0103]' ]
	# The matmul already pipelines with cp.async and uses wmma: those moves are worth less.
	without=$("$LIBTEST" bottleneck "$B/wmma_matmul.metrics.json" | jq -c '.priors | [.enable_async_pipeline, .switch_to_mma_or_wgmma, .change_pipeline_depth]')
	with=$("$LIBTEST" bottleneck "$B/wmma_matmul.metrics.json" "$B/matmul.build.json" | jq -c '.priors | [.enable_async_pipeline, .switch_to_mma_or_wgmma, .change_pipeline_depth]')
	[ "$without" = '[0.1556,0.1504,0.154]' ]
	[ "$with" = '[0.0577,0.0984,0.1873]' ]
}

@test "without metrics, the PTX figures alone make a weaker guess, said as such; with neither, unclassified" {
	cat >want <<-'END'
	["gmem_bandwidth","ptx",0.25,"PTX: flop_instructions 1 for 3 global loads and stores (streaming from 2 or fewer a load or store)",["vectorize_global_loads","cache_policy_cg","grouped_gemm_colmajor","change_vector_width","change_block_sizes","change_work_per_thread","pad_tail_and_mask","softmax_math_fusion"]]
	["tensor","ptx",0.3,"PTX: mma 8, wgmma 0",["change_block_sizes","change_pipeline_depth","grouped_gemm_colmajor","change_work_per_thread","switch_to_mma_or_wgmma"]]
	["overlap","ptx",0.2,"PTX: loops 5, barriers 4, global loads 11, no async copy",["enable_async_pipeline","change_pipeline_depth","change_block_sizes","change_unrolling","change_work_per_thread"]]
	END
	# a whole build record (vector_add, matmul) or a build object (softmax's build.json)
	for k in vector_add matmul softmax; do verdict absent.json "$B/$k.build.json"; done >got
	diff want got
	# "status": "unavailable" is no metrics either
	echo '{"status": "unavailable", "why": "CUPTI profiling needs root (ERR_NVGPUCTRPERM)", "values": {}}' >off.json
	[ "$(verdict off.json "$B/matmul.build.json")" = "$(sed -n 2p want)" ]
	run_tool 0 "$LIBTEST" bottleneck absent.json
	[ "$(jq -c '[.class, .from, .confidence, .evidence, .favoured, ([.priors[]] | unique)]' <<<"$output")" = \
		'["unclassified","nothing",0,"neither metrics nor PTX figures",[],[0.0667]]' ]
	# Some figures missing ("unavailable" names them): the rest still decide.
	echo '{"status": "ok", "values": {"dram_throughput_pct": null, "memory_throughput_pct": 85}, "unavailable": {"dram_throughput_pct": "no counter"}}' >partial.json
	[ "$(verdict partial.json)" = '["gmem_bandwidth","metrics",1,"memory_throughput_pct 85 (near the roof from 80)",["vectorize_global_loads","cache_policy_cg","grouped_gemm_colmajor","change_vector_width","change_block_sizes","change_work_per_thread","pad_tail_and_mask","softmax_math_fusion"]]' ]
	# Figures that pass no threshold: nothing stands out, priors stay uniform.
	echo '{"status": "ok", "values": {"sm_throughput_pct": 45, "dram_throughput_pct": 40, "achieved_occupancy_pct": 60}}' >flat.json
	[ "$(verdict flat.json)" = '["unclassified","metrics",0,"no score reaches 0.2",[]]' ]
}

@test "malformed metrics: an error naming the file and the field, exit 1" {
	bad() {
		echo "$1" >m.json
		run_tool 1 "$LIBTEST" bottleneck m.json
		assert_stderr "kg-libtest: $2"
		[ -z "$output" ]
	}
	bad '{"status": "ok", "values": {"dram_throughput_pct": "high"}}' 'm.json: values.dram_throughput_pct: must be a number'
	bad '{"status": "ok", "values": {"sm_throughput_pct": 250}}' 'm.json: values.sm_throughput_pct: must be a percentage from 0 to 110'
	bad '{"status": "ok", "values": {"stalls": {"barrier": -3}}}' 'm.json: values.stalls.barrier: must be a percentage from 0 to 110'
	bad '{"status": "ok", "values": {"stalls": [1, 2]}}' 'm.json: values.stalls: must be an object of percentages'
	bad '{"status": "ok", "values": {"global_atomics": -1}}' 'm.json: values.global_atomics: must not be negative'
	bad '{"status": "ok", "values": {"occupancy_limiter": "warps"}}' 'm.json: values.occupancy_limiter: must be registers, shared_memory, threads, blocks or null'
	bad '{"status": "ok"}' 'm.json: values: must be an object ("status" is "ok")'
	bad '{"values": {}}' 'm.json: status: must be "ok" or "unavailable"'
	bad '[1]' 'm.json: must be a JSON object (kg-bench --metrics writes it)'
	bad '{"status": "ok", "values": {}} x' 'm.json: not a JSON document'
	bad '' 'm.json: not a JSON document'
	# A small overshoot of 100 is a counter read a moment late: taken as 100.
	echo '{"status": "ok", "values": {"dram_throughput_pct": 100.4}}' >m.json
	[ "$(verdict m.json | jq -c '.[0:4]')" = '["gmem_bandwidth","metrics",1,"dram_throughput_pct 100 (near the roof from 80)"]' ]
	run_tool 2 "$LIBTEST" bottleneck
}

RUN=out/kernels/k

# register NODE-STATE METHOD...: candidates of the root, registered as edges (no build yet).
register() {
	for m in "$@"; do
		jq -cn --arg m "$m" '{node: "S0", node_id: 0, path_edges: [], candidate: {id: $m, method: $m}}'
	done | kg-select --update "$RUN" >/dev/null
}

# first_pick METRICS-FIXTURE|-: a fresh run whose root has that metrics.json (or none), two
# candidates registered, and the method of the edge kg-select evaluates first.
first_pick() {
	rm -rf out
	mkdir -p "$RUN/variants/S0"
	cp "$B/matmul.build.json" "$RUN/variants/S0/build.json"
	[ "$1" = - ] || cp "$1" "$RUN/variants/S0/metrics.json"
	jq -cn --arg run "$RUN" '{run: $run, kernel: "k", candidate: {id: "baseline"},
		build: {status: "ok", state: "S0", baseline: true, config: {x: 1}}, bench: {status: "ok", median_ms: 1, speedup: 1}}' |
		kg-select --update "$RUN" >/dev/null
	register change_pipeline_depth vectorize_global_loads
	kg-select "$RUN" | jq -r '[.op, .candidate.method] | join(" ")'
}

@test "kg-select: the root's metrics.json reorders its edges (gmem_bandwidth against tensor); without it nothing moves" {
	# Without metrics (the PTX figures of build.json alone do not count) the priors stay 1.
	[ "$(first_pick -)" = "evaluate change_pipeline_depth" ]
	[ "$(kg-select --export "$RUN" | jq -c '[.edges[].prior]')" = '[1,1]' ]
	# A copy kernel at the DRAM roof: wider loads first.
	[ "$(first_pick "$B/copy.metrics.json")" = "evaluate vectorize_global_loads" ]
	[ "$(kg-select --export "$RUN" | jq -c '[.edges[].prior | . * 1000 | round]')" = '[577,1814]' ]
	# The tensor pipe busy: a deeper pipeline first.
	[ "$(first_pick "$B/wmma_matmul.metrics.json")" = "evaluate change_pipeline_depth" ]
	[ "$(kg-select --export "$RUN" | jq -c '[.edges[].prior | . * 1000 | round]')" = '[1635,598]' ]
	# A proposer's prior is weighed, not replaced; a method outside the catalog keeps it.
	jq -cn '{node: "S0", node_id: 0, candidate: {id: "p", method: "vectorize_global_loads", prior: 0.5}},
		{node: "S0", node_id: 0, candidate: {id: "q", method: "my_own_trick", prior: 0.5}}' |
		kg-select --update "$RUN" >/dev/null
	[ "$(kg-select --export "$RUN" | jq -c '[.edges[2:][].prior | . * 1000 | round]')" = '[299,500]' ]
	# -v says which bottleneck weighed them.
	rm -rf out
	mkdir -p "$RUN/variants/S0"
	cp "$B/copy.metrics.json" "$RUN/variants/S0/metrics.json"
	jq -cn --arg run "$RUN" '{run: $run, kernel: "k", candidate: {id: "baseline"},
		build: {status: "ok", state: "S0", baseline: true, config: {x: 1}}, bench: {status: "ok", median_ms: 1, speedup: 1}}' |
		kg-select --update "$RUN" >/dev/null
	run_tool 0 kg-select -v --update "$RUN" < <(jq -cn '{node: "S0", node_id: 0, candidate: {id: "a", method: "cache_policy_cg"}}')
	[ "${stderr%%$'\n'*}" = "kg-select: $RUN/variants/S0/metrics.json: bottleneck gmem_bandwidth (confidence 1.00) weighs the priors of new edges" ]
}

@test "kg-select: a malformed metrics.json is warned about, and the priors stay as given" {
	rm -rf out
	mkdir -p "$RUN/variants/S0"
	echo '{"status": "ok", "values": {"tensor_pipe_pct": "busy"}}' >"$RUN/variants/S0/metrics.json"
	jq -cn --arg run "$RUN" '{run: $run, kernel: "k", candidate: {id: "baseline"},
		build: {status: "ok", state: "S0", baseline: true, config: {x: 1}}, bench: {status: "ok", median_ms: 1, speedup: 1}}' |
		kg-select --update "$RUN" >/dev/null
	run_tool 0 kg-select --update "$RUN" < <(jq -cn '{node: "S0", node_id: 0, candidate: {id: "a", method: "cache_policy_cg"}}')
	assert_stderr "kg-select: warning: $RUN/variants/S0/metrics.json: values.tensor_pipe_pct: must be a number: the priors of its node stay as given"
	[ "$(kg-select --export "$RUN" | jq -c '[.edges[].prior]')" = '[1]' ]
}

@test "kg-propose: the prompt's symptoms name the class, its evidence and the favoured methods" {
	local run=out/kernels/scale
	mkdir -p "$run"
	cp "$FIXTURES"/build/{spec.json,scale.cu,scale_helper.cuh} "$run/"
	echo "{\"v\":1,\"run\":\"$run\",\"kernel\":\"scale\",\"candidate\":{\"id\":\"baseline\"}}" | kg-build |
		jq -c '. + {bench: {status: "ok", median_ms: 1.0, speedup: 1}}' | kg-select --update "$run" >/dev/null
	kg-select "$run" >pick.jsonl
	state=$(jq -r .node pick.jsonl)
	answer=$(jq -cn '{candidates: [{think: "t", method: "m", detail: "d", patch: null, source: null,
		config: {block_size_x: 256, items_per_thread: 2, use_fma: true}, launch_update: null}]}')
	echo "{\"rules\": [$(jq -cn --arg c "$answer" '{match: "role: throughput", content: $c}')]}" >script.json
	python3 "$TOOLS/mock_llm.py" script.json requests.jsonl port 3>&- &
	echo $! >mock.pid
	for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
	export OPENAI_API_KEY=sk-test OPENAI_BASE_URL="http://127.0.0.1:$(cat port)/v1"
	prompt() {
		run_tool 0 kg-propose --llm --no-cache --persona throughput pick.jsonl
		tail -n 1 requests.jsonl | jq -r '.body.messages[1].content' | grep -E '^- (bottleneck|methods this)'
	}
	# No metrics: the guess from the PTX, said as such.
	[ "$(prompt)" = "$(printf '%s\n' \
		'- bottleneck (guessed from the PTX alone, without hardware metrics): gmem_bandwidth, confidence 0.25: PTX: flop_instructions 1 for 2 global loads and stores (streaming from 2 or fewer a load or store)' \
		'- methods this bottleneck favours: vectorize_global_loads (prior 0.16), cache_policy_cg (prior 0.13), grouped_gemm_colmajor (prior 0.13)')" ]
	cp "$B/softmax_sfu.metrics.json" "$run/variants/$state/metrics.json"
	[ "$(prompt)" = "$(printf '%s\n' \
		'- bottleneck (from hardware metrics): sfu, confidence 1.00: sfu_pipe_pct 62.4 (busy from 50)' \
		'- methods this bottleneck favours: softmax_math_fusion (prior 0.38), change_work_per_thread (prior 0.16), change_vector_width (prior 0.13)')" ]
}
