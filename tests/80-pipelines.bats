#!/usr/bin/env bats
# 80-pipelines.bats: kg-init, kg-iterate, kg-tune, kg-nightly and kg-report without a GPU:
# real builds (NVRTC) and measurements replayed from tables recorded on an H200.

load test_helper
load pipelines_helper

@test "every pipeline has --help and --version; unknown options and missing arguments are usage errors" {
	version=$(sed -n 's/^VERSION *= *//p' "$KG_ROOT/Makefile") # the C tools' (KG_VERSION)
	for p in kg-init kg-iterate kg-tune kg-nightly kg-nightly-slurm kg-report; do
		run_tool 0 "$p" --help
		assert_line --index 0 --regexp "^Usage: $p "
		assert_line --regexp '^  -V, --version +print the version and exit$'
		assert_stderr_empty
		for v in --version -V; do
			run_tool 0 "$p" "$v"
			assert_output "$p (kernelgraph) $version"
			assert_stderr_empty
		done
		run_tool 2 "$p" --bogus
		assert_stderr "$(printf '%s\n' "$p: unknown option '--bogus'" "Try '$p --help' for more information.")"
	done
	run_tool 2 kg-init "$VECTOR_ADD"
	assert_stderr "$(printf '%s\n' "kg-init: give a spec and an output directory" "Try 'kg-init --help' for more information.")"
	run_tool 2 kg-iterate
	assert_stderr "$(printf '%s\n' "kg-iterate: no run directory given" "Try 'kg-iterate --help' for more information.")"
	run_tool 2 kg-iterate --gpus 0,x out
	assert_stderr "$(printf '%s\n' "kg-iterate: --gpus: '0,x' is not a list of GPU numbers like 0,1" "Try 'kg-iterate --help' for more information.")"
	run_tool 2 kg-tune "$VECTOR_ADD"
	assert_stderr "$(printf '%s\n' "kg-tune: no --outdir given" "Try 'kg-tune --help' for more information.")"
	run_tool 2 kg-tune --outdir out --budget-builds 0 "$VECTOR_ADD"
	assert_stderr "$(printf '%s\n' "kg-tune: --budget-builds: '0' is not a positive whole number" "Try 'kg-tune --help' for more information.")"
	run_tool 2 kg-init --replay
	assert_stderr "$(printf '%s\n' "kg-init: option '--replay' requires an argument" "Try 'kg-init --help' for more information.")"
}

@test "the pipelines' other bad options and arguments are named, exit 2 (kg-report: 1 for a run with nothing measured)" {
	usage() { # usage TOOL MESSAGE: stderr is the message and the hint
		assert_stderr "$(printf '%s\n' "$1: $2" "Try '$1 --help' for more information.")"
	}
	run_tool 2 kg-iterate --batch 0 out
	usage kg-iterate "--batch: '0' is not a positive whole number"
	run_tool 2 kg-iterate --jobs x out
	usage kg-iterate "--jobs: 'x' is not a positive whole number"
	run_tool 2 kg-iterate out more
	usage kg-iterate "unexpected argument 'more'"
	run_tool 2 kg-iterate --front-only --from f.jsonl out
	usage kg-iterate "--front-only and --from exclude each other"
	run_tool 2 kg-iterate --bench-only out
	usage kg-iterate "--bench-only needs --from FILE"
	run_tool 2 kg-iterate --from - --build-only --bench-only out
	usage kg-iterate "--build-only and --bench-only exclude each other"
	run_tool 2 kg-iterate --from - --pending p.jsonl out
	usage kg-iterate "--pending goes with picking, not with --from"
	run_tool 2 kg-iterate --front-only --pending p.jsonl out
	usage kg-iterate "p.jsonl: no such file (--pending and --from name a file of records)"
	run_tool 2 kg-iterate --update-after flag out
	usage kg-iterate "--update-after goes with --from (not --build-only)"
	run_tool 2 kg-iterate --from - --bench-server benches out
	usage kg-iterate "--bench-server goes with --from and --bench-only"
	run_tool 2 kg-iterate --serve-benches benches --front-only out
	usage kg-iterate "--serve-benches runs alone: no --from, --pending, --bench-server or --*-only"
	run_tool 2 kg-tune --outdir out --batch x "$VECTOR_ADD"
	usage kg-tune "--batch: 'x' is not a positive whole number"
	run_tool 2 kg-tune --outdir out --jobs 0 "$VECTOR_ADD"
	usage kg-tune "--jobs: '0' is not a positive whole number"
	run_tool 2 kg-tune --outdir out --max-failures 0 "$VECTOR_ADD"
	usage kg-tune "--max-failures: '0' is not a positive whole number"
	run_tool 2 kg-tune --outdir out --ncu-every 0 "$VECTOR_ADD"
	usage kg-tune "--ncu-every: '0' is not a positive whole number"
	run_tool 2 kg-tune --outdir out --seed -1 "$VECTOR_ADD"
	usage kg-tune "--seed: '-1' is not a whole number"
	run_tool 2 kg-tune --outdir out
	usage kg-tune "no spec given"
	run_tool 2 kg-tune --outdir out "$VECTOR_ADD" "$VECTOR_ADD"
	usage kg-tune "$VECTOR_ADD: a second spec named 'vector_add' (General.BenchmarkName tells them apart)"
	run_tool 2 kg-nightly
	usage kg-nightly "no CONFIG given"
	run_tool 2 kg-nightly missing.json
	assert_stderr "kg-nightly: missing.json: no such file"
	for bad in '{"outdir": "x", "gpus": 0, "specs": ["a"]}|gpus: must be a string like "0,1" or "all"' \
		'{"outdir": "x", "gpus": "0,,1", "specs": ["a"]}|gpus: must be a string like "0,1" or "all"' \
		'{"outdir": "x", "gpus_per_spec": 0, "specs": ["a"]}|gpus_per_spec: must be a positive whole number' \
		'{"outdir": "x", "options": ["--no-llm", 3], "specs": ["a"]}|options: must be a list of strings (kg-tune options)' \
		'{"outdir": "x", "budget_builds": 0, "specs": ["a"]}|budget_builds: must be a positive whole number' \
		'{"outdir": "x", "specs": [{"spec": "a", "budget_builds": "9"}]}|specs[0].budget_builds: must be a positive whole number' \
		'{"outdir": "x", "specs": [{"spec": "a", "budget_builds": 2.5}]}|specs[0].budget_builds: must be a positive whole number' \
		'{"outdir": "x", "specs": [{"spec": "a", "replay": ["t.json"]}]}|specs[0].replay: must be a string (a T4 table, relative to CONFIG)' \
		'{"outdir": "x", "specs": [{"spec": "a", "options": "--seed 2"}]}|specs[0].options: must be a list of strings (kg-tune options)' \
		'{"outdir": "x", "specs": [{"spec": "a", "options": ["-n", "9"]}]}|specs[0].options[0]: -n: kg-nightly sets it (from outdir, budget_builds, gpus or a spec'"'"'s replay)' \
		'{"outdir": "x", "specs": ["a"], "options": ["--replay", "t.json"]}|options[0]: --replay: kg-nightly sets it (from outdir, budget_builds, gpus or a spec'"'"'s replay)' \
		'{"outdir": "x", "specs": [{"spec": "a", "budget": 9}]}|specs[0].budget: unknown key (a spec takes spec, budget_builds, options, replay, reopen_after)' \
		'{"outdir": "x", "specs": ["a"], "spec": "b"}|spec: unknown key (CONFIG takes outdir, gpus, gpus_per_spec, options, budget_builds, reopen_after, specs)' \
		'{"outdir": "x", "specs": [3]}|specs[0]: must be a path or {"spec": path, ...}' \
		'{"outdir": "x", "specs": [{"budget_builds": 2}]}|specs[0].spec: missing or not a string (the spec'"'"'s path)' \
		'{"outdir": "x", "specs": []}|specs: missing or empty' \
		'{"specs": ["a"]}|outdir: missing or not a string' \
		'{"outdir": "x", "specs": ["a"]} {}|(top): must be one JSON object, not 2 values' \
		'[]|(top): must be an object'; do
		echo "${bad%%|*}" >bad.json
		run_tool 2 kg-nightly bad.json
		assert_stderr "kg-nightly: bad.json: ${bad#*|}"
	done
	# the field by its path, wherever it lies in the file
	printf '%s\n' '{"outdir": "x",' ' "specs": [' '  "a.json",' '  {"spec": "b.json",' '   "opts": ["--seed", "2"]},' \
		'  {"spec": "c.json", "options": [' '   "--seed", "2",' '   "--gpus", "1"]},' '  {' '   "budget_builds": 3}]}' >bad.json
	run_tool 2 kg-nightly bad.json
	assert_stderr "kg-nightly: bad.json: specs[1].opts: unknown key (a spec takes spec, budget_builds, options, replay, reopen_after)"
	sed -i '5s/"opts": \["--seed", "2"\]/"budget_builds": 1/' bad.json
	run_tool 2 kg-nightly bad.json
	assert_stderr "kg-nightly: bad.json: specs[2].options[2]: --gpus: kg-nightly sets it (from outdir, budget_builds, gpus or a spec's replay)"
	sed -i '8s/"--gpus", "1"/"--jobs", "1"/' bad.json
	run_tool 2 kg-nightly bad.json
	assert_stderr "kg-nightly: bad.json: specs[3].spec: missing or not a string (the spec's path)"
	printf '{"outdir": "x",\n "specs": ["a"]\n' >bad.json
	run_tool 2 kg-nightly bad.json
	[[ "$stderr" == "kg-nightly: bad.json:3: not JSON ("*", column "*")" ]] # jq's words
	run_tool 2 kg-report --peak-tflops fast out
	usage kg-report "--peak-tflops: 'fast' is not a positive number"
	run_tool 2 kg-report --peak-tflops 0 out
	usage kg-report "--peak-tflops: '0' is not a positive number"
	run_tool 2 kg-report --top 0 out
	usage kg-report "--top: '0' is not a positive whole number"
	run_tool 2 kg-report --graph-nodes x out
	usage kg-report "--graph-nodes: 'x' is not a positive whole number"
	run_tool 2 kg-report
	usage kg-report "no run directory given"
	mkdir -p empty && echo '{"version": 1}' >empty/graph.json
	run_tool 1 kg-report empty
	assert_stderr "kg-report: empty/events.jsonl: no measurements to report"
}

@test "a spec may name only files in its folder: a host file, \"..\" or a link out is refused, naming the spec and field; nothing is copied" {
	mkdir src
	cp "$FIXTURES"/build/{scale.cu,scale_helper.cuh} src/
	echo 'outside' >secret.cu
	ln -s ../secret.cu src/link.cu
	only="a spec may name only files in its folder, as a kernel may include only files in its"
	for k in /etc/passwd /proc/self/environ ../secret.cu sub/../../secret.cu; do
		jq --arg k "$k" '.KernelSpecification.KernelFile = $k' "$FIXTURES/build/spec.json" >src/spec.json
		run_tool 1 kg-init --replay none.json src/spec.json out
		why=$([[ $k == /* ]] && echo 'an absolute path' || echo 'a path through ".."')
		assert_stderr "kg-propose: src/spec.json: KernelSpecification.KernelFile: '$k': $why; $only"
		# kg-build refuses it in a run's spec too
		mkdir -p run && cp src/spec.json run/spec.json
		run_tool 1 kg-build <<<'{"run": "run", "candidate": {"id": "baseline"}}'
		[[ "$stderr" == *"run/spec.json: KernelSpecification.KernelFile: '$k': $why; $only"* ]]
	done
	jq '.KernelSpecification.KernelFile = "link.cu"' "$FIXTURES/build/spec.json" >src/spec.json
	run_tool 1 kg-init --replay none.json src/spec.json out
	assert_stderr "kg-init: src/spec.json: KernelSpecification.KernelFile: 'link.cu': no such file in the folder 'src'; $only"
	jq '.KernelSpecification.KernelFile = "scale.cu" | .KernelGraph.Patches = [{Name: "p", PatchFile: "/etc/passwd"}]' \
		"$FIXTURES/build/spec.json" >src/spec.json
	run_tool 1 kg-init --replay none.json src/spec.json out
	assert_stderr "kg-propose: src/spec.json: KernelGraph.Patches[0].PatchFile: '/etc/passwd': an absolute path; $only"
	[ ! -e out/kernels/scale ] && [ ! -e out/kernels/.scale.init ]
	# a link out of a run is no kernel for kg-build either
	mkdir -p run2 && cp "$FIXTURES/build/spec.json" run2/ && ln -s ../secret.cu run2/scale.cu
	run_tool 1 kg-build <<<'{"run": "run2", "candidate": {"id": "baseline"}}'
	assert_stderr "kg-build: <stdin>:1: run2/spec.json: KernelSpecification.KernelFile: 'scale.cu': no such file in the folder 'run2'; $only"
}

@test "kg-init copies the spec and what it needs into the run, benches the baseline and makes it the root" {
	mkdir -p src/inc
	cp "$FIXTURES"/build/{scale.cu,scale_helper.cuh} src/inc/
	echo '#include "scale_helper.cuh"' >src/inc/wrapper.cuh
	sed -i 's/#include "scale_helper.cuh"/#include "wrapper.cuh"/' src/inc/scale.cu
	echo 'not a real patch' >src/tile.diff
	# the kernel in a folder below the spec's, a patch file beside the spec
	jq '.KernelSpecification.KernelFile = "inc/scale.cu"
		| .KernelGraph.Patches = [{Name: "tile", PatchFile: "tile.diff"}]' "$FIXTURES/build/spec.json" >src/spec.json
	kg-propose -x -s src/spec.json | jq -cs '{schema_version: "1.0.0", results: [.[] |
		{configuration: .candidate.config, times: {runtimes: [1.5, 1.4, 1.6]}, invalidity: "correct", correctness: 1}]}' >table.json
	run_tool 0 kg-init --replay table.json --seed 3 --select-opt '--c-puct 2' src/spec.json out
	assert_output out/kernels/scale
	assert_stderr "kg-init: out/kernels/scale: baseline 1.5 ms; ready"
	# the run holds its own copies: the kernel at its path, the headers it includes, the patch
	[ "$(cd out/kernels/scale && ls)" = "$(printf '%s\n' best best.json events.jsonl graph.bin graph.blobs inc replay.table spec.json tile.diff trace.md variants)" ]
	[ "$(cd out/kernels/scale/inc && ls)" = "$(printf '%s\n' scale.cu scale_helper.cuh wrapper.cuh)" ]
	[ "$(jq -r '.KernelSpecification.KernelFile, .KernelGraph.Patches[0].PatchFile' out/kernels/scale/spec.json)" = "$(printf 'inc/scale.cu\ntile.diff')" ]
	[ "$(jq -c '[.update.root, .build.baseline, .bench.median_ms]' out/kernels/scale/events.jsonl)" = '[true,true,1.5]' ]
	[ "$(kg-select --export out/kernels/scale | jq -c .params.c_init)" = 2 ]
	# a run is never made twice
	run_tool 2 kg-init --replay table.json src/spec.json out
	assert_stderr "kg-init: out/kernels/scale: a run exists already; kg-tune --resume continues it"
	# a BinaryRaw DataSource is a file to copy; a Generator's is an expression, left alone
	jq -cn '{schema_version: "1.0.0", results: [{configuration: {block_size_x: 256}, times: {runtimes: [1]}, invalidity: "correct", correctness: 1}]}' >features.json
	run_tool 0 kg-init -q --replay features.json "$FIXTURES/bench/features/spec.json" out
	[ "$(cd out/kernels/features && ls expected.bin features.cu)" = "$(printf 'expected.bin\nfeatures.cu')" ]
	[ "$(jq -c '[.KernelSpecification.Arguments[1].DataSource, .KernelSpecification.ReferenceArguments[0].DataSource]' out/kernels/features/spec.json)" = '["i % 7","expected.bin"]' ]
	# a kg-init cut short (no graph yet) is started again
	rm out/kernels/scale/graph.bin out/kernels/scale/graph.blobs
	run_tool 0 kg-init -q --replay table.json src/spec.json out
	assert_stderr_empty
	[ "$(wc -l <out/kernels/scale/events.jsonl)" -eq 1 ]
}

@test "kg-init: a missing or wrong spec, a header outside the kernel's folder, a baseline that fails, no GPU, a table that cannot be read" {
	# the table: said, no run left, none named as ready
	run_tool 2 kg-init --replay missing_T4.json "$VECTOR_ADD" out
	assert_output ""
	assert_stderr "kg-bench: cannot read 'missing_T4.json': No such file or directory"
	[ ! -e "$RUN" ]
	rm -r out
	run_tool 1 kg-init nothing.json out
	assert_stderr "kg-init: nothing.json: no such spec (a T1 JSON file)"
	echo '{"KernelSpecification": {}}' >nameless.json
	run_tool 1 kg-init nameless.json out
	assert_stderr "kg-init: nameless.json: not a T1 spec with General.BenchmarkName or KernelSpecification.KernelName"
	jq '.ConfigurationSpace.TuningParameters[0].Values = "[1, 2"' "$FIXTURES/build/spec.json" >broken.json
	run_tool 1 kg-init broken.json out
	[[ "$stderr" == "kg-propose: broken.json: ConfigurationSpace.TuningParameters[0].Values: "* ]]
	[ ! -e out ]
	mkdir -p k/sub
	cp "$FIXTURES/build/scale_helper.cuh" k/
	sed 's/#include "scale_helper.cuh"/#include "..\/scale_helper.cuh"/' "$FIXTURES/build/scale.cu" >k/sub/scale.cu
	jq '.KernelSpecification.KernelFile = "sub/scale.cu"' "$FIXTURES/build/spec.json" >k/spec.json
	run_tool 1 kg-init k/spec.json out
	assert_stderr "kg-init: k/sub/scale.cu includes \"../scale_helper.cuh\", outside the kernel's folder: put it beside the kernel so the run can hold a copy"
	# a baseline that does not compile: NVRTC's message (--replay compiles nothing unless asked)
	cp "$FIXTURES/build/spec.json" k/
	echo 'extern "C" __global__ void scale(float *y) { not cuda }' >k/scale.cu
	run_tool 1 kg-init --replay "$TABLE" --build-opt --compile k/spec.json out
	[[ "${stderr%%$'\n'*}" == "kg-init: k/spec.json: the baseline did not build (compile_failed): NVRTC_ERROR_COMPILATION" ]]
	[ ! -e out/kernels/scale/graph.bin ]
	# a configuration the table lacks: the bench's error
	run_tool 1 kg-init --replay "$TABLE" "$FIXTURES/build/spec.json" out2
	[[ "$stderr" == *"kg-init: $FIXTURES/build/spec.json: the baseline error: configuration {\"block_size_x\":128,\"items_per_thread\":1,\"use_fma\":false} is not in the replay table out2/kernels/scale/replay.table" ]]
	# no GPU and no table: kg-bench says so, exit 3
	run_tool 3 kg-init "$VECTOR_ADD" out3
	[[ "$stderr" == "kg-bench: no CUDA driver on this machine ("*"); give --replay FILE to answer from recorded measurements" ]]
}

@test "a run made with kg-init --replay records its table; every stage follows it: the README's one-iteration pipe runs on it as printed, without NVRTC or a GPU" {
	run_tool 0 kg-init --replay "$TABLE" "$VECTOR_ADD" out
	assert_output "$RUN"
	cmp "$TABLE" "$RUN/replay.table"
	[ "$(jq -c '.build | [.compiled, .baseline]' "$RUN/events.jsonl")" = '[false,true]' ]
	# the pipe exactly as the README prints it, RUN being the run
	pipe=$(grep -x '    kg-select RUN | kg-propose | kg-relabel | kg-build | kg-bench | kg-select --update RUN' "$KG_ROOT/README.md" | head -1)
	[ -n "$pipe" ]
	export KG_NVRTC_LIBRARY=/nonexistent/libnvrtc.so # nothing is compiled, so NVRTC is never loaded
	for i in 1 2 3; do
		run_tool 0 bash -o pipefail -c "${pipe//RUN/$RUN}"
		assert_stderr_empty
	done
	# every candidate measured, answered from the table, each a configuration the table holds
	[ "$(jq -c 'select(.build.baseline | not) | select(.bench != null) | [.build.status, .build.compiled, .bench.status, .bench.replayed]' "$RUN/events.jsonl" | sort -u)" = '["ok",false,"ok",true]' ]
	[ "$(jq -c 'select(.bench != null) | .build.config' "$RUN/events.jsonl" | wc -l)" -gt 3 ]
	jq -c '.results[].configuration | to_entries | sort_by(.key) | from_entries' "$TABLE" | sort -u >table.txt
	jq -c 'select(.bench != null) | .build.config | to_entries | sort_by(.key) | from_entries' "$RUN/events.jsonl" | sort -u >measured.txt
	[ -z "$(comm -13 table.txt measured.txt)" ]
	# kg-iterate and kg-tune --resume take no --replay either
	run_tool 0 kg-iterate -q "$RUN"
	run_tool 0 kg-tune -q --resume --budget-builds 12 --outdir out "$VECTOR_ADD"
	[ "$(jq -c 'select(.bench != null) | .bench.replayed' "$RUN/events.jsonl" | sort -u)" = true ]
}

@test "kg-init killed between the baseline's log line and the graph's first save: the root is made from the log, not measured again" {
	run_tool 0 kg-init -q --replay "$TABLE" "$VECTOR_ADD" out
	cp "$RUN/events.jsonl" events.before
	want=$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state], .events_len]')
	# what the kill leaves: the log has the root; the graph was never saved
	rm "$RUN/graph.bin" "$RUN/graph.blobs"
	run_tool 0 kg-init --replay "$TABLE" "$VECTOR_ADD" out
	assert_output "$RUN"
	[[ "$stderr" == "kg-init: $RUN: the baseline was measured and logged before kg-init stopped; the root is made from the log"* ]]
	cmp "$RUN/events.jsonl" events.before
	[ "$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state], .events_len]')" = "$want" ]
	# and kg-tune --resume goes on from it
	rm "$RUN/graph.bin" "$RUN/graph.blobs"
	run_tool 0 kg-tune -q --no-llm --replay "$TABLE" --resume --budget-builds 2 --outdir out "$VECTOR_ADD"
	[ "$(head -1 "$RUN/events.jsonl")" = "$(head -1 events.before)" ]
	[ "$(evaluated "$RUN" | wc -l)" -eq 2 ]
}

@test "a full or closed standard output is exit 4 with the system's reason, from the tools and the pipelines" {
	for tool in kg-build "kg-bench --replay $TABLE"; do
		for out in '>/dev/full:No space left on device' '>&-:Bad file descriptor'; do
			run bash -c "echo '{\"v\": 1}' | $tool ${out%%:*}"
			[ "$status" -eq 4 ]
			[ "${output##*$'\n'}" = "${tool%% *}: cannot write to standard output: ${out#*:}" ]
		done
	done
	run bash -c "kg-init -q --replay '$TABLE' '$VECTOR_ADD' out >&-"
	[ "$status" -eq 4 ]
	[ "$output" = "kg-init: cannot write to standard output (the run is ready: $RUN)" ]
	run bash -c "kg-tune --no-llm --replay '$TABLE' --resume --budget-builds 2 --outdir out '$VECTOR_ADD' >&- 2>err"
	[ "$status" -eq 4 ]
	[ "$(tail -1 err)" = "kg-tune: cannot write the summary to standard output" ]
	# trace.md still gets its closing summary, and nothing says it has none
	run ! grep -e 'no closing summary' -e 'kg-select: cannot write' err
	[ "$(grep -c '^The search is over' "$RUN/trace.md")" -eq 1 ]
}

@test "kg-iterate: one iteration through every tool; stages' failures reach the caller by name and status" {
	kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null
	run_tool 0 kg-iterate -q --replay "$TABLE" "$RUN"
	assert_stderr_empty
	# every record went through kg-propose, kg-relabel, kg-build, kg-bench and kg-select --update
	[ "$(jq -c '[.op, .candidate.proposer[:6], .method.how, .build.status, .bench.replayed, (.update.edge | type)]' <<<"$output" | sort -u)" = '["expand","rules:","exact","ok",true,"number"]' ]
	[ "$(evaluated "$RUN" | wc -l)" -eq "${#lines[@]}" ]
	# a stage that fails in the middle: its name and status, and the status is kg-iterate's
	run_tool 2 kg-iterate -q --replay "$TABLE" --propose-opt --bogus "$RUN"
	[ "${stderr##*$'\n'}" = "kg-iterate: kg-propose failed (exit status 2)" ]
	# ... even when the stage before it dies of SIGPIPE for writing to it (a kg-select that
	# writes on and on, beside kg-iterate, which runs the tools found beside it first)
	mkdir fake && ln -s "$KG_BIN_DIR/kg-iterate" fake/
	cat >fake/kg-select <<-EOF
	#!/bin/sh
	case " \$* " in *" --update "*) exec "$KG_BIN_DIR/kg-select" "\$@" ;; esac
	sleep 0.2
	exec yes {}
	EOF
	chmod +x fake/kg-select
	run_tool 2 fake/kg-iterate -q --replay "$TABLE" --propose-opt --bogus "$RUN"
	[ "${stderr##*$'\n'}" = "kg-iterate: kg-propose failed (exit status 2)" ]
	rm fake/kg-select
	# measurements missing from the table kg-bench answers from (kg-propose proposes from the
	# whole one, the later --replay wins in kg-bench; this one holds the baseline alone): its
	# error records still reach the graph
	jq '.results |= map(select(.configuration == {block_size_x: 256, items_per_thread: 1}))' "$TABLE" >partial.json
	builds=$(evaluated "$RUN" | wc -l)
	run_tool 1 kg-iterate -q --replay "$TABLE" --bench-opt "--replay partial.json" "$RUN"
	[ "${stderr##*$'\n'}" = "kg-iterate: kg-bench failed (exit status 1)" ]
	[ "$(jq -c 'select(.bench.status == "error") | .update.reward' <<<"$output" | sort -u)" = -3 ]
	[ "$(evaluated "$RUN" | wc -l)" -eq $((builds + ${#lines[@]})) ]
	# no run there
	run_tool 1 kg-iterate elsewhere
	assert_stderr "kg-iterate: elsewhere: not a run (kg-init SPEC OUTDIR makes one)"
	# the search is over: exit 5 and the stop record
	run_tool 5 kg-iterate -q --replay "$TABLE" --select-opt '--budget-builds 1' "$RUN"
	[ "$(jq -c '[.op, .reason]' <<<"$output")" = '["stop","budget"]' ]
}

# fake_stage TOOL SCRIPT: a TOOL in fake/, beside a link to kg-iterate (which runs the tools
# found beside it first), that runs SCRIPT with sh.
fake_stage() {
	mkdir -p fake
	[ -e fake/kg-iterate ] || ln -s "$KG_BIN_DIR/kg-iterate" fake/
	printf '#!/bin/sh\n%s\n' "$2" >"fake/$1"
	chmod +x "fake/$1"
}

@test "kg-iterate: a stage that stops reading is named, never the one killed by SIGPIPE for writing to it; a lost output is status 4" {
	kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null
	# kg-relabel writes more than a pipe holds, to a kg-build that reads nothing
	fake_stage kg-relabel "exec yes '{}'"
	for gpus in 0 0,1; do
		fake_stage kg-build 'exit 3'
		run_tool 3 fake/kg-iterate -q --gpus "$gpus" --replay "$TABLE" "$RUN"
		assert_stderr "kg-iterate: kg-build failed (exit status 3)"
		fake_stage kg-build 'exit 0'
		run_tool 4 fake/kg-iterate -q --gpus "$gpus" --replay "$TABLE" "$RUN"
		assert_stderr "kg-iterate: kg-build stopped reading its input (kg-relabel was killed by SIGPIPE)"
	done
	rm fake/kg-relabel fake/kg-build
	# kg-build writes on and on to a kg-bench that fails, or quits, without reading (one GPU)
	fake_stage kg-build "exec yes '{}'"
	fake_stage kg-bench 'exit 3'
	run_tool 3 fake/kg-iterate -q --replay "$TABLE" "$RUN"
	assert_stderr "kg-iterate: kg-bench failed (exit status 3)"
	fake_stage kg-bench 'exit 0'
	run_tool 4 fake/kg-iterate -q --replay "$TABLE" "$RUN"
	assert_stderr "kg-iterate: kg-bench stopped reading its input (kg-build was killed by SIGPIPE)"
	rm fake/kg-build fake/kg-bench
	# several GPUs: a kg-bench or the kg-select --update that fails is named
	fake_stage kg-bench 'exit 3'
	run_tool 3 fake/kg-iterate -q --gpus 0,1 --replay "$TABLE" "$RUN"
	assert_stderr "kg-iterate: kg-bench failed (exit status 3)"
	rm fake/kg-bench
	fake_stage kg-select "case \" \$* \" in *\" --update \"*) exit 3 ;; esac; exec '$KG_BIN_DIR/kg-select' \"\$@\""
	run_tool 3 fake/kg-iterate -q --gpus 0,1 --replay "$TABLE" "$RUN"
	assert_stderr "kg-iterate: kg-select --update failed (exit status 3)"
	# kg-iterate's own reader goes away (kg-select --update dies of SIGPIPE), or its output
	# is closed
	for gpus in 0 0,1; do
		run_tool 4 bash -c "kg-iterate -q --gpus $gpus --replay '$TABLE' '$RUN' | true; exit \${PIPESTATUS[0]}"
		assert_stderr "kg-iterate: cannot write the output of kg-select --update"
	done
	for gpus in 0 0,1; do
		run_tool 4 bash -c "kg-iterate -q --gpus $gpus --replay '$TABLE' '$RUN' >&-"
		[ "${stderr##*$'\n'}" = "kg-iterate: kg-select --update failed (exit status 4)" ]
	done
}

@test "kg-tune starts the GPUs' kg-benches before kg-init, to open the GPUs while it works; a kg-init that fails stops them" {
	# kg-init waits (10 s at most) for kg-iterate --serve-benches to have started, and says so
	mkdir fake
	ln -s "$KG_BIN_DIR/kg-tune" fake/
	printf '#!/bin/sh\ncase " $* " in *" --serve-benches "*) : >"%s/served" ;; esac\nexec "%s/kg-iterate" "$@"\n' \
		"$PWD" "$KG_BIN_DIR" >fake/kg-iterate
	printf '#!/bin/sh\nfor i in $(seq 100); do [ -e "%s/served" ] && break; sleep 0.1; done\n%s\n%s\nexec "%s/kg-init" "$@"\n' \
		"$PWD" "[ ! -e '$PWD/served' ] || echo \"the GPUs' kg-benches started\" >'$PWD/init.log'" \
		'[ -z "$FAIL" ] || exit "$FAIL"' "$KG_BIN_DIR" >fake/kg-init
	chmod +x fake/kg-iterate fake/kg-init
	run_tool 0 fake/kg-tune -q --no-llm --replay "$TABLE" --overlap --gpus 0,1 --budget-builds 8 --outdir out "$VECTOR_ADD"
	[ "$(cat init.log)" = "the GPUs' kg-benches started" ]
	[ "$(evaluated "$RUN" | wc -l)" -eq 8 ]
	rm -rf out served init.log
	FAIL=1 run_tool 1 fake/kg-tune --no-llm --replay "$TABLE" --overlap --gpus 0,1 --outdir "$PWD/out" "$VECTOR_ADD"
	[ "$(cat init.log)" = "the GPUs' kg-benches started" ]
	[[ $output == *"init failed (1)"* ]]
	run ! pgrep -f -- "--serve-benches $PWD/out"
}

@test "kg-iterate on two GPUs: a slow GPU is not dealt a queue; the records go to the GPUs as they free up" {
	kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null
	for batch in 1 8 8 8; do kg-iterate -q --batch "$batch" --replay "$TABLE" "$RUN" >/dev/null; done
	kg-iterate -q --batch 16 --front-only --replay "$TABLE" "$RUN" >front
	n=$(jq -s 'map(select(.candidate)) | length' front)
	[ "$n" -ge 12 ]
	# GPU 0 takes 1 s a record, GPU 1 0.05 s; each logs what it was dealt
	fake_stage kg-bench "d=0 prev=; for a; do [ \"\$prev\" != --device ] || d=\$a; prev=\$a; done
t=0.05; [ \$d != 0 ] || t=1
while IFS= read -r l; do sleep \$t; printf '%s\\n' \"\$l\"; done | tee -a got.\$d | exec '$KG_BIN_DIR/kg-bench' \"\$@\""
	run_tool 0 fake/kg-iterate -q --gpus 0,1 --from front --replay "$TABLE" "$RUN"
	[ "$(jq -s 'map(select(.update.child != null)) | length' <<<"$output")" -eq "$n" ]
	# dealt by count as they were built (at once: the front was read from a file), each GPU
	# had half; now GPU 0 holds two at most (the one it measures and the next), and GPU 1
	# takes the rest as it frees up
	[ "$(jq -s length got.0)" -le 5 ]
	[ "$(jq -s length got.1)" -ge $((n - 5)) ]
}

@test "kg-iterate in parts (--front-only, then --from; or --build-only, then --bench-only) is kg-iterate whole" {
	mkdir whole parts
	(cd whole && kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null)
	(cd parts && kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null)
	for it in 1 2 3; do
		(cd whole && kg-iterate -q --batch 2 --replay "$TABLE" "$RUN" >"out.$it")
		cd parts
		run_tool 0 kg-iterate -q --batch 2 --front-only --replay "$TABLE" "$RUN"
		echo "$output" >"front.$it"
		[ "$(jq -c 'select(.candidate) | [.op, .method.how, (.build | type)]' "front.$it" | sort -u)" = '["expand","exact","null"]' ]
		if [ "$it" -lt 3 ]; then
			kg-iterate -q --from "front.$it" --replay "$TABLE" "$RUN" >"out.$it"
		else
			run_tool 0 kg-iterate -q --from "front.$it" --build-only --replay "$TABLE" "$RUN"
			[ "$(jq -r '.build.status' <<<"$output" | sort -u)" = ok ]
			[ "$(jq -r '.bench' <<<"$output" | sort -u)" = null ]
			kg-iterate -q --from - --bench-only --replay "$TABLE" "$RUN" <<<"$output" >"out.$it"
		fi
		cd ..
		diff <(jq -c 'del(.t, .build.compile_ms, .build.cached, .build.reused)' "whole/out.$it") \
			<(jq -c 'del(.t, .build.compile_ms, .build.cached, .build.reused)' "parts/out.$it")
	done
	same_search whole parts
	# --update-after: measured at once, learned once the file exists
	cd parts
	kg-iterate -q --front-only --replay "$TABLE" "$RUN" >front.5
	kg-iterate -q --from front.5 --build-only --replay "$TABLE" "$RUN" >built.5
	cp "$RUN/events.jsonl" events.before
	kg-iterate -q --from built.5 --bench-only --update-after picked --replay "$TABLE" "$RUN" >out.5 &
	for state in $(jq -r .build.dir built.5); do
		for _ in $(seq 200); do [ -f "$RUN/$state/bench.json" ] && break; sleep 0.05; done
		[ -f "$RUN/$state/bench.json" ]
	done
	sleep 0.3
	cmp "$RUN/events.jsonl" events.before
	touch picked
	wait $!
	[ "$(jq -c 'select(.update.child != null)' out.5 | wc -l)" -eq "$(wc -l <built.5)" ]
	# a front whose picks are all in flight: nothing, exit 0; a front past the budget: exit 5
	builds=$(evaluated "$RUN" | wc -l)
	kg-iterate -q --front-only --replay "$TABLE" --select-opt "--budget-builds $((builds + 2))" "$RUN" >front.4
	flying=$(jq -c 'select(.candidate)' front.4 | wc -l)
	[ "$flying" -ge 1 ] && [ "$flying" -le 2 ]
	run_tool 0 kg-iterate -q --front-only --replay "$TABLE" --select-opt "--budget-builds $((builds + flying))" --pending front.4 "$RUN"
	assert_output ""
	run_tool 5 kg-iterate -q --front-only --replay "$TABLE" --select-opt '--budget-builds 1' "$RUN"
	[ "$(jq -c '[.op, .reason]' <<<"$output")" = '["stop","budget"]' ]
}

@test "kg-iterate --bench-only deals each built record to a GPU as it comes, not once the build ends (mawk reads a pipe by the buffer)" {
	kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null
	kg-iterate -q --front-only --batch 4 --replay "$TABLE" "$RUN" >front
	kg-iterate -q --from front --build-only --replay "$TABLE" "$RUN" >built
	[ "$(wc -l <built)" -ge 4 ]
	# measured_soon N OPTION...: the Nth built record is measured within 4 s, while the
	# records after it are still 6 s away
	measured_soon() {
		local n=$1 state
		state=$(sed -n "${n}p" built | jq -r .build.dir)
		shift
		{ sed -n "${n}p" built; sleep 6; sed -n "$((n + 1)),\$p" built; } |
			kg-iterate -q --from - --bench-only --gpus 0,1 --replay "$TABLE" "$@" "$RUN" >/dev/null &
		for _ in $(seq 80); do [ -f "$RUN/$state/bench.json" ] && break; sleep 0.05; done
		[ -f "$RUN/$state/bench.json" ] || { wait $!; return 1; }
		wait $!
	}
	measured_soon 1
	# the server and the iterations share the run's lock, as kg-tune's do
	exec {lock}>>out/kernels/.vector_add.lock
	flock -n "$lock"
	export KG_RUN_LOCK_FD=$lock
	kg-iterate --serve-benches benches --gpus 0,1 --replay "$TABLE" "$RUN" 3>&- &
	server=$!
	# the server is stopped whatever the outcome (bats would wait for it)
	measured_soon 3 --bench-server benches || { touch benches/stop; wait "$server"; false; }
	touch benches/stop
	wait "$server"
}

@test "kg-iterate's default batch gives every compile slot a candidate: max(GPUs, ceil(jobs / candidates per pick))" {
	kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null
	picks() { jq -r '"\(.op) \(.node_id) \(.edge)"' <<<"$output" | sort -u | wc -l; }
	run_tool 0 kg-iterate -q --jobs 12 --front-only --replay "$TABLE" "$RUN"
	[ "$(picks)" -eq 1 ] # no history: one per GPU
	# a wide first expansion without the model (the rules' neighbours and random draws)
	kg-iterate -q --jobs 12 --replay "$TABLE" --select-opt "--widen-k 5" --propose-opt "--model-picks 0" "$RUN" >/dev/null
	[ "$(jq -c 'select(.update.child != null and (.update.root | not))' "$RUN/events.jsonl" | wc -l)" -eq 5 ] # 5 per pick
	kg-select --widen-k 1 "$RUN" >/dev/null # back to the default widening
	run_tool 0 kg-iterate -q --jobs 5 --front-only --replay "$TABLE" "$RUN"
	[ "$(picks)" -eq 1 ]
	run_tool 0 kg-iterate -q --jobs 6 --front-only --replay "$TABLE" "$RUN"
	[ "$(picks)" -eq 2 ]
	run_tool 0 kg-iterate -q --jobs 12 --front-only --replay "$TABLE" "$RUN"
	[ "$(picks)" -eq 3 ]
	run_tool 0 kg-iterate -q --jobs 12 --gpus 0,1,2,3 --front-only --replay "$TABLE" "$RUN"
	[ "$(picks)" -eq 4 ]
	run_tool 0 kg-iterate -q --jobs 12 --batch 1 --front-only --replay "$TABLE" "$RUN"
	[ "$(picks)" -eq 1 ]
}

@test "kg-init --bench-server DIR: the baseline measured by the kg-bench of the server's first GPU, none of its own; a server that is not there, or ended, is said" {
	run_tool 2 kg-init -q --bench-server nowhere --replay "$TABLE" "$VECTOR_ADD" out
	assert_stderr "kg-init: --bench-server nowhere: no bench server there (kg-iterate --serve-benches DIR keeps one)
Try 'kg-init --help' for more information."
	# each kg-bench says it started
	fake_stage kg-bench "echo \"\$*\" >>'$BATS_TEST_TMPDIR/started'; exec '$KG_BIN_DIR/kg-bench' \"\$@\""
	ln -s "$KG_BIN_DIR/kg-init" fake/
	mkdir -p out/kernels
	exec {lock}>>out/kernels/.vector_add.lock
	flock -n "$lock"
	export KG_RUN_LOCK_FD=$lock
	fake/kg-iterate --serve-benches benches --gpus 0,1 --replay "$TABLE" "$RUN" 3>&- &
	server=$!
	for _ in $(seq 100); do [ -e benches/ready ] && [ -s started ] && [ "$(wc -l <started)" -eq 2 ] && break; sleep 0.05; done
	# (the server is stopped whatever kg-init does: bats would wait for it)
	s=0
	fake/kg-init -q --bench-server benches --replay "$TABLE" "$VECTOR_ADD" out >ran || s=$?
	touch benches/stop
	wait "$server"
	[ "$s" -eq 0 ]
	[ "$(cat ran)" = "$RUN" ]
	[ "$(grep -o -- '--device [0-9]' started | sort | tr '\n' ' ')" = "--device 0 --device 1 " ]
	# its record, from the first GPU's queue, is the root
	[ "$(jq -r .candidate.id benches/queue.0)" = baseline ]
	[ ! -s benches/queue.1 ]
	[ "$(jq -r .bench.status benches/measured.0)" = ok ]
	[ "$(jq -r 'select(.update.root) | .bench.median_ms' "$RUN/events.jsonl")" = "$(jq -r .bench.median_ms benches/measured.0)" ]
	# the server ended, its first GPU's kg-bench with status 3: kg-init fails with it
	rm -rf out
	echo 3 >benches/status.0
	run_tool 3 kg-init -q --bench-server benches --replay "$TABLE" "$VECTOR_ADD" out
	assert_stderr ""
	[ ! -e "$RUN" ]
	# the server died without a word (its lock free, no status): said, and 3
	rm benches/status.0
	run_tool 3 kg-init -q --bench-server benches --replay "$TABLE" "$VECTOR_ADD" out
	assert_stderr "kg-init: the kg-benches of benches ended before measuring what they were dealt"
	[ ! -e "$RUN" ]
}

@test "kg-iterate --gpus 0,1: a batch of two picks, split between two kg-bench, every record updated once" {
	kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null
	run_tool 0 kg-iterate -q --replay "$TABLE" "$RUN"
	run_tool 0 kg-iterate -q --gpus 0,1 --jobs 2 --replay "$TABLE" "$RUN" # batch: max(2, ceil(2 / 5))
	[ "$(jq -r .node_id <<<"$output" | sort -u | wc -l)" -eq 2 ] # two expansions at once
	[ "$(evaluated "$RUN" | sort | uniq -d)" = "" ]
	[ "$(jq -c 'select(.update.child != null) | .iter' <<<"$output" | sort -u)" = 2 ]
}

@test "kg-tune --gpus: the GPUs listed are checked (there, once each, one model); kg-init measures the baseline on the first" {
	# kg-bench --devices lists what $DEVICES holds; kg-init says what it was given, and stops
	fake_stage kg-bench "printf '%s\\n' \"\$DEVICES\""
	fake_stage kg-init "echo \"\$*\" >'$BATS_TEST_TMPDIR/init-args'; exit 3"
	ln -s "$KG_BIN_DIR/kg-tune" fake/
	h200='"name": "NVIDIA H200", "capability": "9.0"'
	export DEVICES="{\"device\": 0, $h200}
{\"device\": 1, $h200}
{\"device\": 2, \"name\": \"NVIDIA A100-SXM4-80GB\", \"capability\": \"8.0\"}"
	run_tool 3 fake/kg-tune -q --no-llm --gpus 1,0 --outdir out "$VECTOR_ADD"
	[ "$(sed 's|out/.work-kg-tune[^/]*/|WORK/|' init-args)" = "-q --device 1 --bench-server WORK/overlap/benches --seed 0 --select-opt --budget-builds 100   $VECTOR_ADD out" ]
	run_tool 2 fake/kg-tune --no-llm --gpus 0,2 --outdir out "$VECTOR_ADD"
	assert_stderr "kg-tune: --gpus 0,2: GPUs of different models (NVIDIA A100-SXM4-80GB: 2; NVIDIA H200: 0): tune each model as a run of its own"
	run_tool 2 fake/kg-tune --no-llm --gpus 0,0 --outdir out "$VECTOR_ADD"
	assert_stderr "kg-tune: --gpus: '0,0' names a GPU twice"
	run_tool 2 fake/kg-tune --no-llm --gpus 0,3 --outdir out "$VECTOR_ADD"
	assert_stderr "kg-tune: --gpus: there is no GPU 3 (CUDA sees 3)"
	# one GPU: nothing to pool, nothing listed
	rm init-args
	DEVICES='not JSON' run_tool 3 fake/kg-tune -q --no-llm --gpus 2 --outdir out "$VECTOR_ADD"
	[ "$(sed 's|out/.work-kg-tune[^/]*/|WORK/|' init-args)" = "-q --device 2 --bench-server WORK/overlap/benches --seed 0 --select-opt --budget-builds 100   $VECTOR_ADD out" ]
}

@test "kg-tune --ncu-every N hands every kg-bench --metrics-every N: kg-init's and each iteration's" {
	fake_stage kg-bench "echo \"\$*\" >>'$BATS_TEST_TMPDIR/bench-args'; exec '$KG_BIN_DIR/kg-bench' \"\$@\""
	ln -s "$KG_BIN_DIR/kg-tune" "$KG_BIN_DIR/kg-init" fake/
	run_tool 0 fake/kg-tune -q --no-llm --replay "$TABLE" --budget-builds 4 --ncu-every 2 --outdir out "$VECTOR_ADD"
	[ "$(wc -l <bench-args)" -ge 2 ]
	run ! grep -v -e '--metrics-every 2' bench-args
}

@test "kg-tune --replay on the recorded table gets within 5 % of the table's optimum within its budget, builds exactly the budget" {
	optimum=$(jq '[.results[] | select(.invalidity == "correct") | .measurements[] | select(.name == "time") | .value] | min' "$TABLE")
	run_tool 0 kg-tune --no-llm --replay "$TABLE" --budget-builds 40 --jobs 2 --outdir out --log log.jsonl "$VECTOR_ADD"
	[ "$(jq --argjson o "$optimum" '.median_ms <= 1.05 * $o' "$RUN/best.json")" = true ]
	[ "$(evaluated "$RUN" | wc -l)" -eq 40 ]
	[ "$(evaluated "$RUN" | sort | uniq -d)" = "" ]
	# times and speedups to 3 digits (a replayed table has no interval), where the best is,
	# what to run next; trace.md closes with the summary
	assert_line --index 0 --regexp '^kernel +builds +per_min +baseline_ms +best_ms +speedup +end +history +best$'
	assert_line --index 1 --regexp '^vector_add +40 +[0-9]+\.[0-9] +0\.06[0-9]{2} +0\.0[56][0-9]{2} +1\.[01][0-9]x +budget +- +out/kernels/vector_add/best$'
	assert_line --index 2 'next: kg-report out/kernels/vector_add (plots, and a summary atop out/kernels/vector_add/trace.md)'
	[ "${#lines[@]}" -eq 3 ]
	grep -Fqx '## Summary after 40 candidates' "$RUN/trace.md"
	grep -Fqx 'The search is over: its budget of 40 builds is spent.' "$RUN/trace.md"
	[ "$(readlink "$RUN/best")" = "$(jq -r .dir "$RUN/best.json")" ]
	# the log holds every finished record, as JSON lines
	jq -e . log.jsonl >/dev/null
	[ "$(jq -c 'select(.update.child != null)' log.jsonl | wc -l)" -eq 40 ]
	# each with when it was learned, as events.jsonl has it
	[ "$(jq -r '.t | test("^20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-9:.]+Z$")' log.jsonl | sort -u)" = true ]
	# nothing was compiled, the baseline included
	[ "$(jq -c 'select(.build.status == "ok") | .build.compiled' "$RUN/events.jsonl" | sort -u)" = false ]
	[ -z "$(find "$RUN/variants" -name 'kernel.cubin' -o -name 'kernel.ptx')" ]
	# an existing run without --resume is an error; with it, a larger budget carries on
	run_tool 2 kg-tune --no-llm --replay "$TABLE" --outdir out "$VECTOR_ADD"
	assert_stderr "$(printf '%s\n' "kg-tune: out/kernels/vector_add: a run exists already; --resume continues it" "Try 'kg-tune --help' for more information.")"
	run_tool 0 kg-tune --no-llm --replay "$TABLE" --resume --budget-builds 45 --outdir out "$VECTOR_ADD"
	[ "$(evaluated "$RUN" | wc -l)" -eq 45 ]
	# per_min counts what this kg-tune evaluated: 5 candidates, in well under a minute
	per_min=$(awk 'NR == 2 { print $3 }' <<<"$output")
	awk -v p="$per_min" 'BEGIN { exit !(p > 5) }'
	# measured speedups have an interval: the table and trace.md show it
	run_tool 0 kg-tune --no-llm --replay "$EVENTS" --budget-builds 6 --outdir ev "$VECTOR_ADD"
	assert_line --index 1 --regexp ' [01]\.[0-9]{2,3}x \[[01]\.[0-9]{2,3}, [01]\.[0-9]{2,3}\] +budget +- +ev/kernels/vector_add/best$'
	grep -Eq '^\*\*Best\*\*: .* \(interval [01]\.[0-9]{2,3}x to [01]\.[0-9]{2,3}x\)' ev/kernels/vector_add/trace.md
	# a spec that failed with no candidate evaluated gets no "next: kg-report" (nothing to report)
	run_tool 1 kg-tune --no-llm --replay "$TABLE" --budget-builds 3 --propose-opt --bogus --outdir out3 "$VECTOR_ADD"
	assert_line --index 1 --regexp '^vector_add +0 .* failed \(2\) '
	refute_output --partial 'next: kg-report'
	# a missing spec stops everything before anything runs
	run_tool 2 kg-tune --no-llm --outdir out2 "$VECTOR_ADD" missing.json
	assert_stderr "$(printf '%s\n' "kg-tune: missing.json: no such spec" "Try 'kg-tune --help' for more information.")"
	[ ! -e out2 ]
}

@test "a replayed search ends exhausted only once every configuration of the table was proposed, the model's weak moves last (tests/check/90-examples.bats: every example)" {
	ex=$KG_ROOT/examples/transpose
	run_tool 0 kg-tune --no-llm --replay "$ex/transpose_H100_T4.json" --budget-builds 500 --outdir out "$ex/transpose.json"
	assert_line --regexp '^transpose +27 .* exhausted '
	diff <(jq -c '.results[].configuration' "$ex/transpose_H100_T4.json" | jq -cS . | sort -u) \
		<(jq -c 'select(.build.config != null) | .build.config' out/kernels/transpose/events.jsonl | jq -cS . | sort -u)
}

@test "kg-tune learns from the logged transitions: --regraph-autobuild rebuilds the ReGraph the search's priors use" {
	run_tool 0 kg-tune --no-llm --replay "$TABLE" --budget-builds 12 --jobs 2 --outdir out "$VECTOR_ADD"
	[ ! -e out/regraph.json ]
	[ "$(kg-select --export "$RUN" | jq .regraph)" = null ]
	# rules name what a move changes: the dataset holds more than one method
	jq -r .to_method out/regraph_dataset.jsonl | sort -u >methods
	[ "$(wc -l <methods)" -gt 1 ]
	run_tool 0 kg-tune --no-llm --replay "$TABLE" --resume --regraph-autobuild --budget-builds 20 --jobs 2 --outdir out "$VECTOR_ADD"
	# rebuilt before the search went on: it holds every method logged until then
	[ "$(jq -r '.nodes[].method' out/regraph.json | sort -u | comm -13 - methods)" = "" ]
	[ "$(kg-select --export "$RUN" | jq -r .regraph)" = "$(readlink -f out/regraph.json)" ]
	# the edges made after it weigh their priors by it: their priors are no longer the rules' 1 and 0.5
	[ "$(kg-select --export "$RUN" | jq '[.edges[] | .prior] | map(select(. != 1 and . != 0.5)) | length > 0')" = true ]
	# --no-regraph: none
	run_tool 0 kg-tune --no-llm --replay "$TABLE" --budget-builds 5 --jobs 2 --no-regraph --outdir out3 "$VECTOR_ADD"
	cp out/regraph.json out3/regraph.json
	run_tool 0 kg-tune --no-llm --replay "$TABLE" --resume --budget-builds 8 --jobs 2 --no-regraph --outdir out3 "$VECTOR_ADD"
	[ "$(kg-select --export out3/kernels/vector_add | jq .regraph)" = null ]
}

@test "kg_work_dir's clean-up never makes a lock file in another's work directory" {
	# A folder whose lock file is gone is being removed by its owner (or was half removed):
	# flock(1) made the lock file again there, and the owner's removal failed ("rm: cannot
	# remove '…/.work-kg-iterate.…': Directory not empty", once in 20 replays on 4 GPUs).
	KG_SELF=test kg_real=$KG_ROOT/pipelines/kg-tune
	. "$KG_ROOT/pipelines/common.sh"
	mkdir -p going live dead
	: >going/got.0
	: >dead/lock
	exec {held}>>live/lock
	flock "$held"
	kg_work_dir_dead going
	[ ! -e going/lock ]
	kg_work_dir_dead dead
	run ! kg_work_dir_dead live
	exec {held}>&-
	kg_work_dir_dead live
}

@test "kg-tune killed with kill -9 in the middle resumes: every finished record kept, none evaluated twice, no work directory left" {
	mkdir tmp
	export TMPDIR=$PWD/tmp
	setsid kg-tune -q --no-llm --replay "$TABLE" --budget-builds 60 --outdir out "$VECTOR_ADD" >/dev/null 2>&1 &
	pid=$!
	for _ in $(seq 600); do
		[ "$(evaluated "$RUN" 2>/dev/null | wc -l)" -ge 12 ] && break
		sleep 0.05
	done
	kill_group "$pid"
	cp "$RUN/events.jsonl" before.jsonl
	[ "$(evaluated "$RUN" | wc -l)" -lt 60 ]
	# the killed kg-tune's work directory is in OUTDIR, not in TMPDIR, for the next to remove;
	# one whose lock is held (a live kg-tune's) is left alone
	[ "$(ls -A tmp)" = "" ]
	[ "$(cd out && echo .work-kg-tune.*)" != ".work-kg-tune.*" ]
	mkdir out/.work-kg-tune.live
	exec {live}>>out/.work-kg-tune.live/lock
	flock "$live"
	run_tool 0 kg-tune -q --no-llm --replay "$TABLE" --resume --outdir out "$VECTOR_ADD"
	exec {live}>&-
	[ "$(cd out && echo .work-kg-*)" = ".work-kg-tune.live" ]
	[ "$(ls -A tmp)" = "" ]
	# what was finished before the kill is still there, first, and as it was
	head -c "$(wc -c <before.jsonl)" "$RUN/events.jsonl" | cmp - before.jsonl
	[ "$(evaluated "$RUN" | wc -l)" -eq 60 ]
	[ "$(evaluated "$RUN" | sort | uniq -d)" = "" ]
	[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | .build.config | tojson' "$RUN/events.jsonl" | sort | uniq -d)" = "" ]
}

@test "one search per run: kg-tune, kg-iterate and kg-init exit 6 at once while another holds the run's lock" {
	run_tool 0 kg-tune -q --no-llm --replay "$TABLE" --budget-builds 4 --outdir out "$VECTOR_ADD"
	cp "$RUN/events.jsonl" before.jsonl
	exec {holder}>>out/kernels/.vector_add.lock
	flock -n "$holder"
	run_tool 6 kg-tune -q --no-llm --replay "$TABLE" --resume --budget-builds 8 --outdir out "$VECTOR_ADD"
	assert_stderr "kg-tune: out/kernels/vector_add: already running: another kg-tune, kg-iterate or kg-init holds out/kernels/.vector_add.lock"
	run_tool 6 kg-iterate "$RUN"
	assert_stderr "kg-iterate: $RUN: already running: another kg-tune, kg-iterate or kg-init holds out/kernels/.vector_add.lock"
	run_tool 6 kg-init "$VECTOR_ADD" out
	cmp "$RUN/events.jsonl" before.jsonl
	exec {holder}>&-
	# a kg-tune holds the lock itself, and its kg-init and kg-iterates go on under it
	run_tool 0 kg-tune -q --no-llm --replay "$TABLE" --resume --budget-builds 8 --outdir out "$VECTOR_ADD"
	[ "$(evaluated "$RUN" | wc -l)" -eq 8 ]
}

@test "a link planted at the run's lock or kg-nightly's files is refused, exit 4, naming it; nothing is made where it points" {
	run_tool 0 kg-tune -q --no-llm --replay "$TABLE" --budget-builds 2 --outdir out "$VECTOR_ADD"
	rm -f out/kernels/.vector_add.lock
	ln -s "$PWD/created" out/kernels/.vector_add.lock
	run_tool 4 kg-tune -q --no-llm --replay "$TABLE" --resume --budget-builds 4 --outdir out "$VECTOR_ADD"
	assert_stderr "kg-tune: out/kernels/.vector_add.lock: a symbolic link is there, where a run file should be: not followed"
	run_tool 4 kg-iterate "$RUN"
	assert_stderr "kg-iterate: out/kernels/.vector_add.lock: a symbolic link is there, where a run file should be: not followed"
	[ ! -e created ]
	mkdir night
	echo '{"outdir": "night", "specs": ["none.json"]}' >nightly.json
	ln -s "$PWD/created" night/nightly.lock
	run_tool 4 kg-nightly nightly.json
	assert_stderr "kg-nightly: $PWD/night/nightly.lock: a symbolic link is there, where a run file should be: not followed"
	[ ! -e created ]
}

@test "kg-tune's overlapped iterations: a bench server that cannot start ends the spec with its status, never a wait" {
	mkdir broken && ln -s "$KG_BIN_DIR/kg-tune" "$KG_BIN_DIR/kg-init" broken/
	cat >broken/kg-iterate <<-EOF
	#!/bin/sh
	case " \$* " in *" --serve-benches "*) echo "kg-iterate: no GPU here" >&2; exit 3 ;; esac
	exec "$KG_BIN_DIR/kg-iterate" "\$@"
	EOF
	chmod +x broken/kg-iterate
	run_tool 3 timeout 60 broken/kg-tune --overlap --no-llm --replay "$TABLE" --budget-builds 8 --outdir out "$VECTOR_ADD"
	assert_line --index 1 --regexp '^vector_add +0 .* failed \(3\) '
	[[ "$stderr" == *"kg-iterate: no GPU here"* ]]
}

@test "kg-tune interrupted (TERM) while it appends an iteration to --log: the records are there once" {
	# jq, which sends kg-tune TERM the first time it is asked to stamp records for --log
	mkdir fakejq
	cat >fakejq/jq <<-EOF
	#!/bin/sh
	case "\$*" in *'.t //= \$t'*) [ -e '$PWD/once' ] || { touch '$PWD/once'; kill -TERM \$PPID; } ;; esac
	exec $(command -v jq) "\$@"
	EOF
	chmod +x fakejq/jq
	PATH=$PWD/fakejq:$PATH run_tool 130 kg-tune -q --no-llm --replay "$TABLE" --budget-builds 20 --outdir out --log tune.jsonl "$VECTOR_ADD"
	[ -e once ]
	[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | .build.state' tune.jsonl)" = "$(evaluated "$RUN")" ]
}

@test "kg-tune interrupted (TERM) while picking finishes the iteration in flight, logs it (--log), exits 130, leaves nothing running" {
	# the signal comes while a front is picking (a kg-iterate beside kg-tune makes it slow
	# once asked to): the iteration being measured waits for that pick before it is learned
	mkdir slow && ln -s "$KG_BIN_DIR/kg-tune" slow/
	cat >slow/kg-iterate <<-EOF
	#!/bin/sh
	case " \$* " in *" --front-only "*) [ ! -e go ] || { touch picking; sleep 1; } ;; esac
	exec "$KG_BIN_DIR/kg-iterate" "\$@"
	EOF
	chmod +x slow/kg-iterate
	setsid slow/kg-tune -q --overlap --no-llm --replay "$TABLE" --budget-builds 40 --outdir out --log tune.jsonl "$VECTOR_ADD" >/dev/null 2>err &
	pid=$!
	for _ in $(seq 600); do
		[ "$(evaluated "$RUN" 2>/dev/null | wc -l)" -ge 8 ] && break
		sleep 0.05
	done
	touch go
	for _ in $(seq 600); do [ -e picking ] && break; sleep 0.02; done
	kill -TERM "$pid"
	ended=0
	for _ in $(seq 600); do
		kill -0 "$pid" 2>/dev/null || { ended=1; break; }
		sleep 0.05
	done
	[ "$ended" -eq 1 ] || { kill -9 -- "-$pid"; false; } # it must not wait forever
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 130 ]
	[ "$(cat err)" = "kg-tune: interrupted; finishing the iteration in flight; kg-tune --resume carries on" ]
	run ! pgrep -g "$pid"
	# every record learned is in --log, the iterations in flight's too
	[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | .build.state' tune.jsonl | sort)" = "$(evaluated "$RUN" | sort)" ]
	run_tool 0 kg-tune -q --no-llm --replay "$TABLE" --resume --outdir out "$VECTOR_ADD"
	[ "$(evaluated "$RUN" | wc -l)" -eq 40 ]
	[ "$(evaluated "$RUN" | sort | uniq -d)" = "" ]
}

@test "kg-tune --gpus 0,1 spreads the benches over two workers; a spec whose baseline fails makes the exit 1" {
	cp "$FIXTURES/build/spec.json" "$FIXTURES/build/scale_helper.cuh" .
	echo 'extern "C" __global__ void scale(float *y) { not cuda }' >scale.cu
	run_tool 1 kg-tune -q --no-llm --gpus 0,1 --replay "$TABLE" --budget-builds 12 --outdir out "$VECTOR_ADD" spec.json
	[ "$(evaluated "$RUN" | wc -l)" -eq 12 ]
	# not compiled (--replay): the table has no measurement of its configuration
	[[ "$stderr" == *"kg-init: spec.json: the baseline error: configuration "*" is not in the replay table out/kernels/scale/replay.table"* ]]
}

@test "kg-nightly with gpus_per_spec tunes the specs at once, each on a group of GPUs of its own; the night's logs get each spec's lines whole" {
	ln -s "$KG_ROOT/examples" ex
	for n in a b c; do jq --arg n "$n" '.General.BenchmarkName = "va_" + $n' "$VECTOR_ADD" >"ex_$n.json"; done
	cp "$KG_ROOT/examples/vector_add/vector_add.cu" .
	# kg-tune, noting when it ran and on which GPUs (simulated: the specs are replayed)
	mkdir fake
	ln -s "$KG_BIN_DIR/kg-nightly" fake/
	printf '#!/bin/sh\necho "start $(date +%%s.%%N) $*" >>"%s/tunes"\nsleep 1\n"%s/kg-tune" "$@"\ns=$?\necho "end $(date +%%s.%%N)" >>"%s/tunes"\nexit $s\n' \
		"$PWD" "$KG_BIN_DIR" "$PWD" >fake/kg-tune
	chmod +x fake/kg-tune
	jq -n '{outdir: "night", gpus: "0,1,2", gpus_per_spec: 2, budget_builds: 3, options: ["--no-llm"],
		specs: [{spec: "ex_a.json", replay: "ex/vector_add/vector_add_H100_T4.json"},
		        {spec: "ex_b.json", replay: "ex/vector_add/vector_add_H100_T4.json"}]}' >two.json
	run_tool 0 fake/kg-nightly two.json
	# groups of two of three GPUs: one group, one spec after the other; the third GPU said unused
	assert_stderr "kg-nightly: warning: two.json: 3 GPUs (0,1,2) in groups of 2: GPU 2 unused"
	[ "$(grep -c -- '--gpus 0,1 ' tunes)" -eq 2 ]
	jq '.gpus = "0,1,2,3" | .gpus_per_spec = 1 | .specs += [{spec: "ex_c.json", replay: "ex/vector_add/vector_add_H100_T4.json"}]' two.json >four.json
	rm tunes
	run_tool 0 fake/kg-nightly four.json
	assert_stderr_empty
	# three kg-tunes at once, on GPUs 0, 1 and 2, each started before any ended
	[ "$(head -3 tunes | cut -d' ' -f1 | sort -u)" = start ]
	[ "$(grep -o -- '--gpus [0-9]*' tunes | sort | tr '\n' ' ')" = "--gpus 0 --gpus 1 --gpus 2 " ]
	log=$(ls -t night/logs/*.jsonl | head -1)
	[ "$(jq -r 'select(.nightly == "spec") | "\(.status) \(.builds) \(.gpus)"' "$log" | sort | tr '\n' ' ')" = "0 3 0 0 3 1 0 3 2 " ]
	# each spec's records come whole, as a block, between the start and the end lines
	[ "$(jq -r '.nightly // .kernel' "$log" | uniq | sed -n '1p;$p' | tr '\n' ' ')" = "start end " ]
	[ "$(jq -r 'select(.kernel != null) | .kernel' "$log" | uniq | wc -l)" -eq 3 ]
	[ "$(jq -c 'select(.nightly == "end") | .failed' "$log")" = 0 ]
	[ ! -e "$(ls -d night/logs/.* 2>/dev/null | grep -v '/\.\.\?$')" ]
	# three groups asked of two GPUs: the config is refused before anything runs
	jq '.gpus = "0,1" | .gpus_per_spec = 3' two.json >big.json
	run_tool 2 kg-nightly big.json
	assert_stderr "kg-nightly: big.json: gpus_per_spec: 3 is more than the 2 GPUs of gpus (0,1)"
}

@test "kg-nightly: a night killed before its end line is said to be unfinished by the next night, on stderr and in its log" {
	mkdir -p night/logs
	ln -s "$KG_ROOT/examples" ex
	jq -n '{outdir: "night", budget_builds: 2, options: ["--no-llm"],
		specs: [{spec: "ex/vector_add/vector_add.json", replay: "ex/vector_add/vector_add_H100_T4.json"}]}' >nightly.json
	printf '%s\n' '{"t":"2026-11-01T00:00:00Z","nightly":"start","pid":1,"specs":1}' \
		'{"t":"2026-11-01T00:00:01Z","nightly":"spec","status":0}' >night/logs/20261101T000000Z.jsonl
	run_tool 0 kg-nightly nightly.json
	[[ "$stderr" == *"kg-nightly: warning: the night 20261101T000000Z did not finish: $PWD/night/logs/20261101T000000Z.jsonl has its start line and no end line (killed, or its machine stopped)"* ]]
	log=$(ls night/logs/*.jsonl | grep -v 20261101T000000Z)
	[ "$(jq -c 'select(.nightly == "unfinished") | .night' "$log")" = '"20261101T000000Z"' ]
	# a night that ended is not reported again
	sleep 1
	run_tool 0 kg-nightly nightly.json
	assert_stderr_empty
}

@test "kg-nightly: a spec that converged says so and when it is tried again; reopen_after N reopens it after N idle nights, a changed kernel at once" {
	cp -r "$KG_ROOT/examples/transpose" ex
	mkdir conf
	printf '%s\n' '{"outdir": "../night", "options": ["--no-llm", "--converge", "2"], "budget_builds": 20, "reopen_after": 1,' \
		' "specs": [{"spec": "../ex/transpose.json", "replay": "../ex/transpose_H100_T4.json"}]}' >conf/nightly.json
	spec=$PWD/ex/transpose.json
	night() { # night N: the Nth night (a second apart: the logs are named by the second); its spec line's text and JSON
		[ "$1" -eq 1 ] || sleep 1
		run_tool 0 kg-nightly conf/nightly.json
		text=$(tail -1 "$(ls night/logs/*.log | tail -1)")
		json=$(jq -c 'select(.nightly == "spec") | [.builds > 0, .end, .converged.idle_nights, .converged.reopened]' "$(ls night/logs/*.jsonl | tail -1)")
	}
	night 1 # converges within its budget
	[ "$text" = "kg-nightly: $spec: exit status 0, $(jq -s 'map(select(.nightly == "spec"))[0].builds' night/logs/*.jsonl) builds; converged tonight: no improvement in its last 2 iterations" ]
	[ "$json" = '[true,"converged",null,null]' ]
	night 2 # converged before it: nothing built, said why and when it is tried again
	[ "$text" = "kg-nightly: $spec: exit status 0, 0 builds; converged before tonight: no improvement in its last 2 iterations (--converge 2), idle 1 night; tried again after 1 idle nights (reopen_after) or when its spec, kernel, table or GPUs change" ]
	[ "$json" = '[false,"converged",1,null]' ]
	night 3 # reopen_after 1: tried again, given 2 more iterations
	[[ "$text" == "kg-nightly: $spec: exit status 0, "*" builds; reopened: converged before tonight, idle 1 night (reopen_after 1): 2 more iterations without improvement" ]]
	[ "$json" = '[true,"converged",0,"idle 1 night (reopen_after 1)"]' ]
	# reopen_after 0 (the default): never by age; a changed kernel reopens it at once
	jq '.reopen_after = 0' conf/nightly.json >c && mv c conf/nightly.json
	night 4
	[[ "$text" == *"; converged before tonight: "*"; tried again (reopen_after: 0, never by age) only when its spec, kernel, table or GPUs change" ]]
	night 5
	[ "$json" = '[false,"converged",2,null]' ]
	echo '// a comment' >>ex/transpose.cu
	night 6
	[ "$json" = '[true,"converged",0,"its spec, kernel, table or GPUs changed"]' ]
	# a reopen_after that is not a count of nights is named
	jq '.specs[0].reopen_after = -1' conf/nightly.json >c && mv c conf/nightly.json
	run_tool 2 kg-nightly conf/nightly.json
	assert_stderr "kg-nightly: conf/nightly.json: specs[0].reopen_after: must be a whole number of nights (0: never)"
}

@test "kg-nightly exits at once, exit 6, while another holds the lock" {
	mkdir night
	echo '{"outdir": "night", "specs": ["none.json"]}' >nightly.json
	exec {holder}>>night/nightly.lock # (a background flock's child would keep bats waiting)
	flock "$holder"
	# the lock is held for good: one that waited for it would be killed (124), not exit 6
	run -6 --separate-stderr timeout 30 kg-nightly nightly.json
	assert_stderr "kg-nightly: another kg-nightly is running on $PWD/night (it holds $PWD/night/nightly.lock); not starting"
	[ ! -e night/logs/*.jsonl ]
	exec {holder}>&-
}

@test "kg-nightly --slurm --dry-run prints the scripts it would submit and how, writes nothing; the Slurm options' bad values are named, exit 2" {
	mkdir conf
	echo '{"outdir": "../night", "specs": ["a.json", "b.json", "c.json"]}' >conf/nightly.json
	run_tool 0 kg-nightly --slurm --dry-run --partition gpu --account lab --gpus-per-task 4 --time 2:00:00 --max-tasks 2 \
		--sbatch-opt '--qos=high --constraint=h100' --sbatch-opt --exclusive conf/nightly.json
	assert_stderr_empty
	[[ ${lines[0]} =~ ^#\ $PWD/night/logs/([0-9]{8}T[0-9]{6}Z)\.slurm/array\.sh: ]]
	night=$PWD/night/logs/${BASH_REMATCH[1]}.slurm
	assert_output "$(printf '%s\n' "# $night/array.sh: sbatch --parsable $night/array.sh" '#!/bin/sh' \
		"# kg-nightly --slurm: $PWD/night, a task per spec ($night/night.json)" \
		'#SBATCH --job-name=kg-nightly' '#SBATCH --array=0-2%2' "#SBATCH --output=$night/task-%a.out" '#SBATCH --open-mode=append' \
		'#SBATCH --partition=gpu' '#SBATCH --account=lab' '#SBATCH --gres=gpu:4' '#SBATCH --time=2:00:00' '#SBATCH --signal=B:USR1@120' \
		'#SBATCH --qos=high --constraint=h100' '#SBATCH --exclusive' "exec $KG_BIN_DIR/kg-nightly-slurm --task $night" \
		"# $night/end.sh: sbatch --parsable --dependency=afterany:ARRAY_JOB_ID $night/end.sh" '#!/bin/sh' \
		"# kg-nightly --slurm: $PWD/night, once every task has ended" \
		'#SBATCH --job-name=kg-nightly-end' "#SBATCH --output=$night/end.out" '#SBATCH --open-mode=append' \
		'#SBATCH --partition=gpu' '#SBATCH --account=lab' '#SBATCH --qos=high --constraint=h100' '#SBATCH --exclusive' \
		"exec $KG_BIN_DIR/kg-nightly-slurm --end $night")"
	[ ! -e night ]
	# no GPU asked (a replayed night), no time limit, no partition: Slurm's defaults
	run_tool 0 kg-nightly --slurm --dry-run --gpus-per-task 0 conf/nightly.json
	[ "$(grep -c '^#SBATCH' <<<"$output")" -eq 8 ]
	[ "$(grep -E '^#SBATCH --(gres|time|partition|account)' <<<"$output")" = "" ]
	usage() { # usage MESSAGE: stderr is the message and the hint, nothing on stdout
		assert_output ""
		assert_stderr "$(printf '%s\n' "kg-nightly: $1" "Try 'kg-nightly --help' for more information.")"
	}
	for bad in "--partition|a b|--partition: 'a b' is not a Slurm name" \
		"--account||--account: '' is not a Slurm name" \
		"--gpus-per-task|x|--gpus-per-task: 'x' is not a whole number" \
		"--time|1h|--time: '1h' is not a Slurm time limit (MINUTES, MM:SS, H:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS)" \
		"--max-tasks|0|--max-tasks: '0' is not a positive whole number" \
		"--sbatch-opt|qos=high|--sbatch-opt: 'qos=high' is not an sbatch option on one line" \
		"--sbatch-opt|--qos=high"$'\n'"exit|--sbatch-opt: '--qos=high"$'\n'"exit' is not an sbatch option on one line" \
		"--sbatch-opt|--array=0-9|--sbatch-opt: '--array=0-9': kg-nightly sets --array itself" \
		"--sbatch-opt|--exclusive -o x.out|--sbatch-opt: '--exclusive -o x.out': kg-nightly sets -o itself" \
		"--sbatch-opt|--dependency after:1|--sbatch-opt: '--dependency after:1': kg-nightly sets --dependency itself"; do
		IFS='|' read -r -d '' option value message <<<"$bad" || true
		run_tool 2 kg-nightly --slurm "$option" "$value" conf/nightly.json
		usage "${message%$'\n'}"
	done
	for option in --time --partition --sbatch-opt; do
		run_tool 2 kg-nightly --slurm conf/nightly.json "$option"
		usage "option '$option' requires an argument"
	done
	run_tool 2 kg-nightly --dry-run --partition gpu conf/nightly.json
	usage "--dry-run --partition: only with --slurm"
	run_tool 2 kg-nightly --time 5 conf/nightly.json
	usage "--time: only with --slurm"
	run_tool 2 kg-nightly --slurm --dry-run conf/missing.json
	assert_stderr "kg-nightly: conf/missing.json: no such file"
}

@test "kg-nightly-slurm --task: the GPUs of CUDA_VISIBLE_DEVICES as CUDA numbers them, the task's Slurm ids in its spec line; a run another holds is exit 6; --end: sacct's states, the tasks' lines moved into the night's logs; misuse is exit 2, a night never submitted exit 1; kg-nightly --slurm-task and --slurm-end run it (a night submitted before it)" {
	ex=$KG_ROOT/examples
	night=$PWD/night/logs/20261126T020000Z.slurm
	mkdir -p "$night"
	# a night as kg-nightly --slurm writes it (its submission needs a cluster: tests/check/85-slurm.bats)
	jq -n --arg ex "$ex" --arg out "$PWD/night" '{config: "nightly.json", outdir: $out, stamp: "20261126T020000Z", gpus: "0",
		options: ["--no-llm"], specs: [{spec: "\($ex)/vector_add/vector_add.json", budget_builds: 3,
		replay: "\($ex)/vector_add/vector_add_H100_T4.json", options: []}]}' >"$night/night.json"
	CUDA_VISIBLE_DEVICES=GPU-5f0e,GPU-77a1 SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_JOB_ID=40 SLURM_JOB_ID=41 SLURMD_NODENAME=n7 \
		SLURM_CPUS_ON_NODE=2 run_tool 0 kg-nightly-slurm --task "$night"
	assert_output "kg-nightly: $ex/vector_add/vector_add.json: exit status 0, 3 builds"
	assert_stderr_empty
	[ "$(jq -c 'select(.nightly) | del(.t, .seconds, .best, .fingerprint)' "$night/task-0.jsonl")" = "$(jq -cn --arg ex "$ex" --arg run "$PWD/night/kernels/vector_add" '
		{nightly: "spec", spec: "\($ex)/vector_add/vector_add.json", run: $run, replay: "\($ex)/vector_add/vector_add_H100_T4.json",
		 status: 0, builds: 3, regraph: null, end: "budget", converged: null, slurm: {job_id: 41, array_job_id: 40, array_task_id: 0, node: "n7",
		 cuda_visible_devices: "GPU-5f0e,GPU-77a1", gpus: "0,1", restarts: 0}}')" ]
	[ "$(cat "$night/task-0.before")" = 0 ]
	[ "$(evaluated night/kernels/vector_add | wc -l)" -eq 3 ]
	# while another holds the run: nothing tuned, exit 6, said in the task's log
	exec {holder}>>night/kernels/.vector_add.lock
	flock "$holder"
	SLURM_ARRAY_TASK_ID=0 run_tool 6 kg-nightly-slurm --task "$night"
	exec {holder}>&-
	assert_output "$(printf '%s\n' "kg-nightly-slurm: $PWD/night/kernels/vector_add: already running: another kg-tune, kg-iterate or kg-init holds $PWD/night/kernels/.vector_add.lock" \
		"kg-nightly: $ex/vector_add/vector_add.json: exit status 6, 0 builds")"
	[ "$(jq -c 'select(.nightly) | [.status, .builds, .slurm.gpus, .slurm.cuda_visible_devices]' "$night/task-0.jsonl" | tail -1)" = '[6,0,"0",null]' ]
	usage() { # usage MESSAGE
		assert_output ""
		assert_stderr "$(printf '%s\n' "kg-nightly-slurm: $1" "Try 'kg-nightly-slurm --help' for more information.")"
	}
	run_tool 2 env -u SLURM_ARRAY_TASK_ID kg-nightly-slurm --task "$night"
	usage "--task: not run by Slurm as a task of the night's array (SLURM_ARRAY_TASK_ID is not set)"
	SLURM_ARRAY_TASK_ID=1 run_tool 2 kg-nightly-slurm --task "$night"
	usage "--task: task 1, but the night $night has 1 specs"
	SLURM_ARRAY_TASK_ID=0 run_tool 2 kg-nightly-slurm --task nowhere
	usage "nowhere: not a night kg-nightly --slurm submitted (no night.json)"
	run_tool 2 kg-nightly-slurm --task "$night" nightly.json
	usage "unexpected argument 'nightly.json'"
	run_tool 2 kg-nightly-slurm --task "$night" --end "$night"
	usage "--task and --end do not go together"
	run_tool 2 kg-nightly-slurm
	usage "give --task NIGHT or --end NIGHT"
	run_tool 2 kg-nightly-slurm --end nowhere
	usage "nowhere: not a night kg-nightly --slurm submitted (no night.json)"
	# kg-nightly runs it for the array.sh and end.sh of a night submitted before it did
	SLURM_ARRAY_TASK_ID=1 run_tool 2 kg-nightly --slurm-task "$night"
	usage "--task: task 1, but the night $night has 1 specs"
	run_tool 2 kg-nightly --slurm-end "$night" nightly.json
	assert_stderr "$(printf '%s\n' "kg-nightly: --slurm-task and --slurm-end take no CONFIG" "Try 'kg-nightly --help' for more information.")"
	run_tool 1 kg-nightly --slurm-end "$night"
	assert_stderr "kg-nightly-slurm: $night/night.json: no slurm.array_job_id (the night was not submitted)"
	run_tool 1 kg-nightly-slurm --end "$night"
	assert_stderr "kg-nightly-slurm: $night/night.json: no slurm.array_job_id (the night was not submitted)"
	# the end job on a cluster with accounting: sacct's word for each task (a stand-in here;
	# tests/check/85-slurm.bats has a real cluster's scontrol), two tasks that never started in one
	# range; the task's lines moved into the night's logs
	jq --arg ex "$ex" '.slurm = {array_job_id: 40, end_job_id: 42}
		| .specs += [{spec: "\($ex)/softmax/softmax.json", budget_builds: 3, replay: null, options: []},
		             {spec: "nowhere.json", budget_builds: 3, replay: null, options: []}]' "$night/night.json" >night.json
	mv night.json "$night/night.json"
	mkdir fake
	printf '#!/bin/sh\n[ "$*" = "-n -P -X -j 40 -o JobIDRaw,JobID,State,ExitCode" ] || exit 1\nprintf "41|40_0|COMPLETED|0:0\\n40|40_[1-2]|CANCELLED by 0|0:0\\n"\n' >fake/sacct
	chmod +x fake/sacct
	PATH=$PWD/fake:$PATH run_tool 1 kg-nightly-slurm --end "$night"
	log=night/logs/20261126T020000Z
	assert_stderr "kg-nightly-slurm: 2 of 3 specs failed; see $PWD/$log.jsonl and $PWD/$log.log"
	[ "$(jq -c 'select(.nightly) | del(.t, .seconds, .best, .fingerprint, .slurm.node, .slurm.job_id, .slurm.array_job_id)' "$log.jsonl")" = "$(jq -cn --arg ex "$ex" --arg night "$PWD/night" '
		{nightly: "spec", spec: "\($ex)/vector_add/vector_add.json", run: "\($night)/kernels/vector_add",
		 replay: "\($ex)/vector_add/vector_add_H100_T4.json", status: 0, builds: 3, regraph: null, end: "budget", converged: null,
		 slurm: {array_task_id: 0, cuda_visible_devices: "GPU-5f0e,GPU-77a1", gpus: "0,1", restarts: 0}},
		{nightly: "spec", spec: "\($ex)/vector_add/vector_add.json", run: "\($night)/kernels/vector_add",
		 replay: "\($ex)/vector_add/vector_add_H100_T4.json", status: 6, builds: 0, regraph: null,
		 slurm: {array_task_id: 0, cuda_visible_devices: null, gpus: "0", restarts: 0}},
		{nightly: "task", spec: "\($ex)/vector_add/vector_add.json", run: "\($night)/kernels/vector_add", builds: 3,
		 slurm: {array_task_id: 0, state: "COMPLETED", exit_code: "0:0"}},
		{nightly: "task", spec: "\($ex)/softmax/softmax.json", run: "\($night)/kernels/softmax", builds: 0,
		 slurm: {array_task_id: 1, state: "CANCELLED", exit_code: "0:0"}},
		{nightly: "task", spec: "nowhere.json", run: null, builds: 0,
		 slurm: {array_task_id: 2, state: "CANCELLED", exit_code: "0:0"}},
		{nightly: "end", failed: 2, regraph: {file: "\($night)/regraph.json", rows: 3, kernels: 1}, regraph_status: 0}')" ]
	[ "$(jq -c 'select(.nightly == "task") | [.slurm.job_id, .slurm.array_job_id]' "$log.jsonl" | tr -d '\n')" = '[41,40][40,40][40,40]' ]
	[ "$(jq -c 'select(.update.child != null)' "$log.jsonl" | wc -l)" -eq 3 ]
	[ "$(tail -n 3 "$log.log")" = "$(printf '%s\n' "kg-nightly: task 0 (job 41): COMPLETED, 3 builds: $ex/vector_add/vector_add.json" \
		"kg-nightly: task 1 (job 40): CANCELLED, 0 builds: $ex/softmax/softmax.json" "kg-nightly: task 2 (job 40): CANCELLED, 0 builds: nowhere.json")" ]
	[ ! -e "$night/task-0.jsonl" ] && [ ! -e "$night/task-0.out" ]
}

@test "kg-select --update appends to OUTDIR's ReGraph dataset under its flock: an append another holds it for (a Slurm task on another node) is waited for, none lost" {
	run_tool 0 kg-init -q --replay "$KG_ROOT/examples/vector_add/vector_add_H100_T4.json" --select-opt '--budget-builds 10' "$KG_ROOT/examples/vector_add/vector_add.json" out
	touch out/regraph_dataset.jsonl
	flock out/regraph_dataset.jsonl sleep 2 >/dev/null 2>&1 &
	sleep 0.3
	SECONDS=0
	run_tool 0 kg-iterate --rules --replay "$KG_ROOT/examples/vector_add/vector_add_H100_T4.json" out/kernels/vector_add
	[ "$SECONDS" -ge 1 ]
	wait
	[ "$(wc -l <out/regraph_dataset.jsonl)" -eq "$(evaluated out/kernels/vector_add | wc -l)" ]
	[ "$(wc -l <out/regraph_dataset.jsonl)" -gt 0 ]
	jq -e . out/regraph_dataset.jsonl >/dev/null
}

@test "kg-report: trace.md summary kept current, plots, the search graph, the HTML page, the T4 export, the table" {
	kg-init -q --replay "$EVENTS" "$VECTOR_ADD" out >/dev/null
	for _ in 1 2 3; do kg-iterate -q --replay "$EVENTS" "$RUN" >/dev/null || true; done
	run_tool 0 kg-report "$RUN"
	assert_stderr_empty
	assert_line --index 0 '| builds | baseline ms | best ms | speedup | outcomes |'
	assert_line --index 2 --regexp "^\| $(($(evaluated "$RUN" | wc -l))) \| 0\.066048 \| $(jq -r .median_ms "$RUN/best.json") \| 1\.[0-9]{2}x \| " # three significant digits, as kg-tune and trace.md
	assert_line "Report: $RUN/report/index.html"
	# outcomes count the candidates, as builds does: the baseline is none of them
	n=$(evaluated "$RUN" | wc -l)
	outcomes=$(sed -n 3p <<<"$output" | awk -F' [|] ' '{ print $5 }' | grep -o '[0-9]*' | awk '{ s += $1 } END { print s }')
	[ "$outcomes" -eq "$(jq -s '[.[] | select(.update.child != null and (.update.root | not))] | length' "$RUN/events.jsonl")" ]
	# the page says the run was replayed and on what the table was measured, links trace.md,
	# and lists the failures by kind with the first reason
	page=$RUN/report/index.html
	grep -qE '; replayed: no kernel ran; the times are a table(&apos;|&#39;)s, measured on the NVIDIA H200. The search candidate by candidate: <a href="../trace.md">trace.md</a>.</p>' "$page"
	grep -q '^<h2 id="failures">Failures</h2>$' "$page"
	# why it stopped, as trace.md closes; who proposed what: tried, failed, best speedup
	# (kg-iterate alone: no closing summary yet; kg-select --summary, which kg-tune runs, writes one)
	grep -qx '<p id="stopped"><strong>The search has no closing summary in trace.md yet (kg-select --summary writes it).</strong></p>' "$page"
	kg-select -q --summary "$RUN"
	kg-report -q "$RUN" >/dev/null
	grep -qx "<p id=\"stopped\"><strong>$(grep -E '^The search (is over|may go on)' "$RUN/trace.md" | tail -1)</strong></p>" "$page"
	# a search that went on after its closing summary is not said to be over
	cp -a out went-on
	kg-select --budget-builds 1000 "went-on/kernels/vector_add" | kg-propose | kg-relabel | kg-build | kg-bench |
		kg-select --update "went-on/kernels/vector_add" >went-on.jsonl
	more=$(jq -s '[.[] | select(.update.child != null)] | length' went-on.jsonl)
	[ "$more" -gt 0 ]
	kg-report -q went-on/kernels/vector_add >/dev/null
	grep -qx "<p id=\"stopped\"><strong>The search went on after the last closing summary of trace.md: $more build$([ "$more" -eq 1 ] || echo s) since (kg-select --summary RUN closes it again).</strong></p>" went-on/kernels/vector_add/report/index.html
	tried=$(sed -n 's|^<tr><td>rules:[a-z]*</td><td>\([0-9]*\)</td><td>[0-9]*</td><td>[-0-9.x]*</td></tr>$|\1|p' "$page" | awk '{ s += $1 } END { print s }')
	[ "$tried" -eq "$n" ]
	# the graph's speedups as the tables': three significant digits
	grep -q '^  n0 \[label="baseline 92624367\\n0.066048 ms, 1.00x\\nbuild 0"' "$RUN/report/graph.dot"
	[ "$n" -gt 0 ]
	[ "$(ls "$RUN/report")" = "$(printf '%s\n' convergence.svg graph.dot graph.svg index.html roofline.svg vector_add_T4.json)" ]
	# no KernelGraph.Flops: achieved bandwidth under the memory roof, which says where it came from
	grep -q 'memory roof 4247 GB/s: the copy bandwidth kg-bench --calibrate measured on the NVIDIA H200<' "$RUN/report/roofline.svg"
	grep -q '>best (build [0-9]*): [0-9]* GB/s, [0-9]*% of the memory roof<' "$RUN/report/roofline.svg"
	# titles as written: an underscore is not a subscript
	grep -q '<text>vector_add: the fastest median so far, by build</text>' "$RUN/report/convergence.svg"
	grep -q '<text>vector_add: achieved bandwidth (no KernelGraph.Flops: no arithmetic intensity)</text>' "$RUN/report/roofline.svg"
	[ "$(jq '.results | length' "$RUN/report/vector_add_T4.json")" -eq "$(($(evaluated "$RUN" | wc -l) + 1))" ]
	# the graph: a node per variant, an edge per candidate, the incumbent's path thick from the root
	dot=$RUN/report/graph.dot
	[ "$(grep -c '^  n[0-9]* \[label=' "$dot")" -eq "$(($(evaluated "$RUN" | wc -l) + 1))" ]
	[ "$(grep -c '^  n[0-9]* -> n[0-9]* ' "$dot")" -eq "$(evaluated "$RUN" | wc -l)" ]
	grep -q '^  n0 \[label="baseline 92624367\\n0.066048 ms, 1.00x\\nbuild 0"' "$dot"
	# one numbering: the build that made the best, in trace.md's summary, the graph and the page
	build=$(grep -o 'found at build [0-9]*' "$RUN/trace.md" | tail -1 | grep -o '[0-9]*$')
	grep -q "^<h3>build $build, $(jq -r '.state[:8]' "$RUN/best.json"): " "$page"
	grep -q "^  n[0-9]* \[label=\"best $(jq -r '.state[:8]' "$RUN/best.json")\\\\n[^\"]*\\\\nbuild $build\"" "$dot"
	grep -q "^  n[0-9]* \[label=\"best $(jq -r '.state[:8]' "$RUN/best.json")" "$dot"
	[ "$(grep -c ' -> .*penwidth=3' "$dot")" -eq "$(jq '.methods | length' "$RUN/best.json")" ]
	grep -q '<svg' "$RUN/report/graph.svg"
	# the summary tops trace.md once, however often it is refreshed; the narrative stays
	narrative=$(grep -c '^| [0-9]' "$RUN/trace.md")
	kg-report "$RUN" >/dev/null
	[ "$(grep -c '^<!-- kg-report -->$' "$RUN/trace.md")" -eq 1 ]
	[ "$(head -1 "$RUN/trace.md")" = '<!-- kg-report -->' ]
	grep -q '^Report: \[index.html\](report/index.html); plots: \[convergence\](report/convergence.svg), \[roofline\](report/roofline.svg), \[search graph\](report/graph.svg); ' "$RUN/trace.md"
	[ "$(grep -c '^| [0-9]' "$RUN/trace.md")" -eq "$narrative" ]
	# --graph-nodes: the incumbent's path and the fastest with what leads to them, said so
	kg-report -q --graph-nodes 2 "$RUN" >/dev/null
	path=$(($(jq '.methods | length' "$RUN/best.json") + 1))
	[ "$(grep -c '^  n[0-9]* \[label=' "$dot")" -eq "$((path > 2 ? path : 2))" ]
	grep -q "search graph, $((path > 2 ? path : 2)) of $(($(evaluated "$RUN" | wc -l) + 1)) nodes: the incumbent's path and the fastest" "$dot"
	run_tool 1 kg-report nowhere
	assert_stderr "kg-report: nowhere: not a run (kg-init SPEC OUTDIR makes one)"
}

@test "kg-report's page lists the failures by kind with the compiler's first error line; a measured run says so" {
	kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null
	kg-iterate -q "$RUN" >/dev/null
	kg-select "$RUN" >pick.jsonl
	jq -c '{run, kernel, iter, node, node_id, path_edges, rollout, candidate: {id: "c-ptx", method: "wgmma", config: {block_size_x: 64}},
		build: {status: "compile_failed", state: ("f" * 64), config: {block_size_x: 64, items_per_thread: 1},
		        error: "NVRTC_ERROR_COMPILATION\nptxas error   : Instruction '"'"'wgmma.fence'"'"' not supported on .target '"'"'sm_90'"'"'\nptxas fatal   : Ptx assembly aborted due to errors"}}' \
		pick.jsonl | head -1 | kg-select --update "$RUN" >/dev/null
	run_tool 0 kg-report -q "$RUN"
	# (jq's @html writes a quote as &#39; or &apos;, by version)
	sed -e "s/&#39;/'/g" -e "s/&apos;/'/g" "$RUN/report/index.html" |
		grep -qF "<tr><td>compile_failed</td><td>1</td><td><code>ptxas error   : Instruction 'wgmma.fence' not supported on .target 'sm_90'</code></td></tr>"
	# a run measured on a GPU: the device, no "replayed"
	jq -c 'if .update.root then .bench |= (del(.replayed) + {device: "NVIDIA H100"}) else . end' "$RUN/events.jsonl" >e && mv e "$RUN/events.jsonl"
	run_tool 0 kg-report -q "$RUN"
	grep -qF '; measured on the NVIDIA H100. The search candidate by candidate:' "$RUN/report/index.html"
}

@test "under umask 000 the pipelines make nothing others may write" {
	(umask 000 && kg-tune -q --no-llm --replay "$TABLE" --budget-builds 3 --outdir out "$VECTOR_ADD" >/dev/null &&
		kg-report -q "$RUN" >/dev/null)
	[ -s "$RUN/events.jsonl" ] && [ -s "$RUN/report/index.html" ]
	[ "$(find out \( -type f -o -type d \) -perm -o+w)" = "" ]
}

@test "kg-report --report-dir: a run it may not write is reported elsewhere, the run left as it was" {
	kg-init -q --replay "$EVENTS" "$VECTOR_ADD" out >/dev/null
	kg-iterate -q --replay "$EVENTS" "$RUN" >/dev/null || true
	(cd "$RUN" && find . -type f -exec sha256sum {} + | sort -k2) >before
	run_tool 0 kg-report --report-dir elsewhere "$RUN"
	assert_line "Report: elsewhere/index.html"
	[ "$(ls elsewhere)" = "$(printf '%s\n' convergence.svg graph.dot graph.svg index.html roofline.svg summary.md vector_add_T4.json)" ]
	[ "$(head -1 elsewhere/summary.md)" = '<!-- kg-report -->' ]
	(cd "$RUN" && find . -type f -exec sha256sum {} + | sort -k2) | diff before -
	[ ! -e "$RUN/report" ]
}

@test "kg-tune --llm-model: the LLM experts propose (a mock OpenAI-compatible server); --no-llm: the rules" {
	answer=$(jq -cn '{candidates: [{think: "more work per thread", method: "Thread coarsening", detail: "4 items",
		patch: null, source: null, config: {block_size_x: 64, items_per_thread: 4}, launch_update: null}]}')
	jq -n --arg c "$answer" '{rules: [{match: "", content: $c}]}' >script.json
	python3 "$TOOLS/mock_llm.py" script.json requests.jsonl port &
	mock=$!
	for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
	run_tool 0 env OPENAI_API_KEY=test-key OPENAI_BASE_URL="http://127.0.0.1:$(cat port)/v1" \
		kg-tune -q --llm-model mock-model --replay "$TABLE" --budget-builds 1 --outdir out "$VECTOR_ADD"
	kill "$mock"
	[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | [.candidate.proposer, .method.canonical, (.build.config | tojson)] | join(" ")' "$RUN/events.jsonl")" = \
		'llm:mock-model/throughput change_work_per_thread {"block_size_x":64,"items_per_thread":4}' ]
	[ "$(jq -r .body.model requests.jsonl | sort -u)" = mock-model ]
	run_tool 0 env OPENAI_API_KEY=test-key kg-tune -q --no-llm --replay "$TABLE" --budget-builds 1 --outdir rules "$VECTOR_ADD"
	[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | .candidate.proposer' rules/kernels/vector_add/events.jsonl)" = rules:random ]
}
