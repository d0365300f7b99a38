#!/usr/bin/env bats
# 80-pipelines-e2e.bats: the slow end-to-end cases of the pipelines without a GPU (make check;
# tests/80-pipelines.bats has the rest): kills at any moment, whole searches compared, two
# nights, the report in a browser and without Graphviz.

load ../test_helper
load ../pipelines_helper

@test "kg-init killed (kill -9) at any moment: kg-init, or kg-tune --resume, starts it again" {
	for delay in 0.02 0.05 0.08 0.11 0.14 0.17 0.2 0.23 0.26 0.29 0.32 0.35 0.4; do
		rm -rf out
		setsid kg-init -q --replay "$TABLE" "$VECTOR_ADD" out >/dev/null 2>&1 &
		pid=$!
		sleep "$delay"
		kill_group "$pid"
		# a directory there is a run whole, or one with its spec whose baseline was cut short
		[ ! -e "$RUN" ] || [ -f "$RUN/spec.json" ]
		run_tool 0 kg-tune -q --no-llm --replay "$TABLE" --resume --budget-builds 1 --outdir out "$VECTOR_ADD"
		[ "$(evaluated "$RUN" | wc -l)" -eq 1 ]
	done
}

@test "kg-tune overlaps iterations on N GPUs (simulated by a replay): each GPU's kg-bench measures its share, learned in build order; the same seed gives the same search" {
	# kg-bench, logging the records each GPU got
	mkdir fake
	ln -s "$KG_BIN_DIR/kg-tune" "$KG_BIN_DIR/kg-init" "$KG_BIN_DIR/kg-iterate" fake/
	printf '#!/bin/sh\nd=0 prev=\nfor a; do [ "$prev" != --device ] || d=$a; prev=$a; done\ntee -a "%s/got.$d" | exec "%s/kg-bench" "$@"\n' \
		"$PWD" "$KG_BIN_DIR" >fake/kg-bench
	chmod +x fake/kg-bench
	for d in a b; do
		mkdir "$d"
		rm -f got.*
		(cd "$d" && ../fake/kg-tune -q --overlap --no-llm --gpus 0,1,2,3 --replay "$TABLE" --budget-builds 23 --seed 5 --jobs 4 \
			--batch 4 --outdir out "$VECTOR_ADD")
		[ "$(evaluated "$d/$RUN" | wc -l)" -eq 23 ]
	done
	same_search a b
	# which GPU measures what changes nothing: with the same batch, one GPU searches the same
	# (a replay has no times to size the pipeline by: two iterations in flight, as on one GPU)
	mkdir c
	(cd c && kg-tune -q --overlap --no-llm --gpus 0 --replay "$TABLE" --budget-builds 23 --seed 5 --jobs 4 --batch 4 --outdir out "$VECTOR_ADD")
	same_search a c
	[ "$(ahead "a/$RUN/events.jsonl")" -eq 2 ]
	# every GPU measured candidates (of b's search), none twice; iterations were learned after the next was picked
	for d in 0 1 2 3; do [ "$(jq -s 'map(select(.build.status == "ok")) | length' "got.$d")" -gt 0 ]; done
	[ "$(cat got.* | jq -r 'select(.build.status == "ok") | .candidate.id' | sort | uniq -d)" = "" ]
	[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | select(.update.learned_iter == .iter + 1) | .iter' \
		"a/$RUN/events.jsonl" | wc -l)" -gt 0 ]
	# each iteration learned in the order its candidates were built (dealt round the GPUs)
	jq -r 'select(.update.child != null and (.update.root | not)) | "\(.iter) \(.candidate.id)"' "a/$RUN/events.jsonl" >learned
	[ "$(sort -s -n -k1,1 learned)" = "$(cat learned)" ]
	# --gpus all has no GPUs to count in a replay; without a replay kg-bench --devices finds none here
	run_tool 2 kg-tune --gpus all --no-llm --replay "$TABLE" --outdir f "$VECTOR_ADD"
	assert_stderr "$(printf '%s\n' "kg-tune: --gpus all: a replay has no GPUs; name as many as it should simulate, e.g. --gpus 0,1,2,3" "Try 'kg-tune --help' for more information.")"
	run_tool 2 kg-tune --gpus 0,x --no-llm --outdir f "$VECTOR_ADD"
	assert_stderr "$(printf '%s\n' "kg-tune: --gpus: '0,x' is not all or a list of GPU numbers like 0,1" "Try 'kg-tune --help' for more information.")"
	if ! kg-bench --devices >/dev/null 2>&1; then
		run_tool 3 kg-tune --gpus 0,1 --no-llm --outdir f "$VECTOR_ADD"
		[[ "$stderr" == "kg-bench: no "* ]]
		[ ! -e f ]
	fi
}

@test "kg-tune's overlapped iterations: as many in flight as compiling outlasts measuring, from two to two per GPU" {
	# the replay's records given a compile and a measuring time (kg-build's, kg-bench's): once
	# the first is learned, the iteration K learned once K+F is picked, F = ceil(GPUs x (pick +
	# slowest compile) / the GPUs' time of an iteration), at least 2, at most 2 x GPUs
	mkdir fake
	ln -s "$KG_BIN_DIR/kg-tune" "$KG_BIN_DIR/kg-init" "$KG_BIN_DIR/kg-iterate" fake/
	# (CACHED=1: builds from the compile cache, which compiled nothing, however long the first)
	printf '#!/bin/bash\n"%s/kg-build" "$@" | jq -c --unbuffered --argjson c "${CACHED:-0}" '"'"'if .build then .build.compile_ms = (if $c == 1 then 1e7 else 400 end) | .build.cached = ($c == 1) else . end'"'"'\nexit "${PIPESTATUS[0]}"\n' \
		"$KG_BIN_DIR" >fake/kg-build
	printf '#!/bin/bash\n"%s/kg-bench" "$@" | jq -c --unbuffered --argjson w "$WALL" '"'"'if .bench then .bench.wall_ms = $w else . end'"'"'\nexit "${PIPESTATUS[0]}"\n' \
		"$KG_BIN_DIR" >fake/kg-bench
	chmod +x fake/kg-build fake/kg-bench
	for case in "0 5 2" "0,1 5 4" "0,1 100000 2" "0,1,2 1 6" "0,1 2000 2 1"; do
		read -r gpus wall want cached <<<"$case"
		rm -rf out
		CACHED=$cached WALL=$wall run_tool 0 fake/kg-tune -q --overlap --no-llm --gpus "$gpus" --replay "$TABLE" --budget-builds 60 --seed 5 --jobs 4 \
			--batch 2 --outdir out "$VECTOR_ADD"
		[ "$(evaluated "$RUN" | wc -l)" -eq 60 ]
		[ "$(ahead "$RUN/events.jsonl" 8)" -eq "$want" ] # (from the depth the first iterations learned gave)
	done
}

@test "kg-tune on four simulated GPUs killed (kill -9) at any moment resumes: the budget exact, nothing evaluated twice" {
	for delay in 0.3 0.7 1.1 1.5 1.9; do
		rm -rf out
		setsid kg-tune -q --overlap --no-llm --gpus 0,1,2,3 --replay "$TABLE" --budget-builds 40 --jobs 4 --outdir out "$VECTOR_ADD" \
			>/dev/null 2>&1 &
		pid=$!
		sleep "$delay"
		kill_group "$pid" # (it fails when anything of the group outlives kill -9)
		run_tool 0 kg-tune -q --overlap --no-llm --gpus 0,1,2,3 --replay "$TABLE" --resume --budget-builds 40 --jobs 4 \
			--outdir out "$VECTOR_ADD"
		[ "$(evaluated "$RUN" | wc -l)" -eq 40 ]
		[ "$(evaluated "$RUN" | sort | uniq -d)" = "" ]
	done
}

@test "kg-tune --history: the other runs of the same tuning parameters under OUTDIR by default, the files given, or none; the table and trace.md say how far they were trusted" {
	jq '.General.BenchmarkName = "vector_add_b"' "$VECTOR_ADD" > b.json
	jq '.General.BenchmarkName = "vector_add_c"' "$VECTOR_ADD" > c.json
	jq '.General.BenchmarkName = "vector_add_d"' "$VECTOR_ADD" > d.json
	jq '.General.BenchmarkName = "other" | .ConfigurationSpace.TuningParameters[1].Values = "[1, 2, 4]"' "$VECTOR_ADD" > e.json
	cp "$KG_ROOT/examples/vector_add/vector_add.cu" .
	run_tool 0 kg-tune --no-llm --replay "$TABLE" --budget-builds 12 --outdir out "$VECTOR_ADD"
	assert_line --index 1 --regexp ' +budget +- +out/kernels/vector_add/best$'
	[ ! -e "$RUN/history.json" ]
	# a second kernel of the same space learns from the first run's log, from its first build
	run_tool 0 kg-tune --no-llm --replay "$TABLE" --budget-builds 6 --outdir out b.json
	[[ "$stderr" == *"kg-tune: out/kernels/vector_add_b: history: out/kernels/vector_add/events.jsonl"* ]]
	assert_line --index 1 --regexp '^vector_add_b +6 .* +budget +1 file, [01](\.[0-9]+)? +out/kernels/vector_add_b/best$'
	[ "$(jq -r '.sources[0].file' out/kernels/vector_add_b/history.json)" = out/kernels/vector_add/events.jsonl ]
	grep -q '^\*\*History\*\*: at its last fit ([0-9]* of the run.s configurations), the model weighed `out/kernels/vector_add/events.jsonl` (13 configurations) at ' \
		out/kernels/vector_add_b/trace.md
	[ "$(jq -r 'select(.candidate.proposer == "rules:model") | .candidate.detail' out/kernels/vector_add_b/events.jsonl |
		head -1 | grep -c '; history weight ')" -eq 1 ]
	# --no-history: the run's own measurements alone
	run_tool 0 kg-tune --no-llm --no-history --replay "$TABLE" --budget-builds 6 --outdir out c.json
	assert_line --index 1 --regexp ' +budget +- +out/kernels/vector_add_c/best$'
	[[ "$stderr" != *"history:"* ]]
	# --history FILE: those files alone (a table of another GPU, a log)
	run_tool 0 kg-tune --no-llm --history "$TABLE" --history "$EVENTS" --replay "$TABLE" --budget-builds 6 --outdir out d.json
	assert_line --index 1 --regexp ' +budget +2 files, [01](\.[0-9]+)? +out/kernels/vector_add_d/best$'
	[ "$(jq -c '[.sources[].file]' out/kernels/vector_add_d/history.json)" = "$(jq -cn --arg a "$TABLE" --arg b "$EVENTS" '[$a, $b]')" ]
	# the same seed, history and options give the same search
	run_tool 0 kg-tune --no-llm --history "$TABLE" --history "$EVENTS" --replay "$TABLE" --budget-builds 6 --outdir again d.json
	[ "$(jq -c 'select(.update.child != null) | .build.config' again/kernels/vector_add_d/events.jsonl)" = \
		"$(jq -c 'select(.update.child != null) | .build.config' out/kernels/vector_add_d/events.jsonl)" ]
	# a spec of other tuning parameters takes none of them
	run_tool 0 kg-tune --no-llm --replay "$TABLE" --budget-builds 2 --outdir out e.json
	[[ "$stderr" != *"history:"* ]]
	run_tool 2 kg-tune --no-llm --history missing.json --outdir out "$VECTOR_ADD"
	assert_stderr "$(printf '%s\n' "kg-tune: --history: cannot read 'missing.json'" "Try 'kg-tune --help' for more information.")"
}

@test "kg-tune overlaps iterations on one GPU: the same seed gives the same search twice, exactly the budget" {
	for d in a b; do
		mkdir "$d"
		(cd "$d" && kg-tune -q --overlap --no-llm --replay "$TABLE" --budget-builds 23 --seed 5 --jobs 4 --outdir out "$VECTOR_ADD")
		[ "$(evaluated "$d/$RUN" | wc -l)" -eq 23 ]
		[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | .build.config | tojson' "$d/$RUN/events.jsonl" | sort | uniq -d)" = "" ]
	done
	same_search a b
	# iterations were picked while others were in flight: records picked in iteration K
	# were learned once iteration K+1 was picked (the pick's iteration is the record's "iter",
	# the graph's when kg-select --update learned it "update.learned_iter")
	picked_learned() {
		jq -r 'select(.update.child != null and (.update.root | not)) | "\(.iter) \(.update.learned_iter)"' "$1/$RUN/events.jsonl"
	}
	[ "$(picked_learned a | awk '$2 == $1 + 1' | wc -l)" -gt 0 ]
	# several picks per iteration once the log shows how many candidates a pick makes
	# (one here, as the widening allows: ceil(4 / 1) = 4 picks for 4 compile slots)
	[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | "\(.iter) \(.node_id)"' "a/$RUN/events.jsonl" | sort -u | cut -d' ' -f1 | uniq -d | wc -l)" -gt 0 ]
	# --no-overlap: one iteration after the other, the same budget
	mkdir c
	(cd c && kg-tune -q --no-overlap --no-llm --replay "$TABLE" --budget-builds 23 --seed 5 --jobs 4 --outdir out "$VECTOR_ADD")
	[ "$(evaluated "c/$RUN" | wc -l)" -eq 23 ]
	[ "$(picked_learned c | awk '$2 != $1' | wc -l)" -eq 0 ]
	# a replay has no GPU time to hide compiles behind: one iteration after the other unless
	# --overlap
	mkdir e
	(cd e && kg-tune -q --no-llm --replay "$TABLE" --budget-builds 23 --seed 5 --jobs 4 --outdir out "$VECTOR_ADD")
	[ "$(picked_learned e | awk '$2 != $1' | wc -l)" -eq 0 ]
	same_search c e
	# kg-bench fails in every iteration (the table it answers from has the baseline alone):
	# given up after --max-failures iterations, the one picked meanwhile never measured
	jq '.results |= map(select(.configuration == {block_size_x: 256, items_per_thread: 1}))' "$TABLE" >baseline.json
	run_tool 1 kg-tune --no-llm --replay "$TABLE" --bench-opt "--replay baseline.json" --max-failures 2 --outdir d "$VECTOR_ADD"
	assert_line --index 1 --regexp ' failed \(1, 2 iterations in a row\) +- +d/kernels/vector_add/best$'
	[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | .iter' d/kernels/vector_add/events.jsonl | sort -u | tr '\n' ' ')" = "1 2 " ]
	[ "$(grep -c 'kg-iterate: kg-bench failed (exit status 1)' <<<"$stderr")" -eq 2 ]
}

@test "kg-nightly: two nights on three recorded tables (per-spec replay): the second resumes each run and uses the first's ReGraph; true log lines" {
	ln -s "$KG_ROOT/examples" ex
	# paths relative to the config; softmax with its own budget, transpose with its own options
	mkdir conf elsewhere
	jq -n '{outdir: "../night", budget_builds: 5, options: ["--no-llm"], specs: [
		{spec: "../ex/vector_add/vector_add.json", replay: "../ex/vector_add/vector_add_H100_T4.json"},
		{spec: "../ex/softmax/softmax.json", replay: "../ex/softmax/softmax_H100_T4.json", budget_builds: 4},
		{spec: "../ex/transpose/transpose.json", replay: "../ex/transpose/transpose_H100_T4.json", options: ["--seed", "3"]}]}' >conf/nightly.json
	cd elsewhere
	run_tool 0 kg-nightly ../conf/nightly.json
	assert_output ""
	assert_stderr_empty
	for k in vector_add softmax transpose; do evaluated "../night/kernels/$k" >"../$k.1"; done
	[ "$(kg-select --export ../night/kernels/vector_add | jq .regraph)" = null ] # no transition before it
	sleep 1 # a night's logs are named by the second it starts
	run_tool 0 kg-nightly ../conf/nightly.json
	assert_output ""
	assert_stderr_empty
	cd ..
	# each night evaluated each spec's budget, the second going on from the first: nothing twice
	[ "$(wc -l <vector_add.1) $(wc -l <softmax.1) $(wc -l <transpose.1)" = "5 4 5" ]
	for k in vector_add softmax transpose; do
		evaluated "night/kernels/$k" >"$k.2"
		[ "$(wc -l <"$k.2")" -eq $((2 * $(wc -l <"$k.1"))) ]
		[ "$(head -n "$(wc -l <"$k.1")" "$k.2")" = "$(cat "$k.1")" ]
		[ "$(sort "$k.2" | uniq -d)" = "" ]
		[ "$(kg-select --export "night/kernels/$k" | jq -r .regraph)" = "$PWD/night/regraph.json" ]
	done
	# the night's own log lines, without their times: what each spec did, the ReGraph it
	# used (the one the specs before it had rebuilt; night 2's first spec, the one night 1
	# rebuilt at its end), and the ReGraph each night rebuilt last
	ex=$PWD/ex night=$PWD/night
	expected() { # expected NIGHT ROWS...: the log lines of night NIGHT, with the ReGraph's rows
		jq -cn --arg config ../conf/nightly.json --arg ex "$ex" --arg night "$night" --argjson n "$1" --argjson rows "[$(IFS=,; echo "${*:2}")]" '
			def spec(k; b; i): {nightly: "spec", spec: "\($ex)/\(k)/\(k).json", run: "\($night)/kernels/\(k)",
				replay: "\($ex)/\(k)/\(k)_H100_T4.json", status: 0, builds: b,
				regraph: (if $rows[i] == null then null else {file: "\($night)/regraph.json", rows: $rows[i], kernels: ([i + 3 * ($n - 1), 3] | min)} end),
				end: "budget", converged: null};
			{nightly: "start", config: $config, outdir: $night, specs: 3},
			spec("vector_add"; 5; 0), spec("softmax"; 4; 1), spec("transpose"; 5; 2),
			{nightly: "end", failed: 0, regraph: {file: "\($night)/regraph.json", rows: $rows[3], kernels: 3}, regraph_status: 0}'
	}
	logs=(night/logs/*.jsonl)
	[ "${#logs[@]}" -eq 2 ]
	[ "$(jq -c 'select(.nightly) | del(.t, .pid, .seconds, .best, .fingerprint)' "${logs[0]}")" = "$(expected 1 null 5 9 14)" ]
	[ "$(jq -c 'select(.nightly) | del(.t, .pid, .seconds, .best, .fingerprint)' "${logs[1]}")" = "$(expected 2 14 19 23 28)" ]
	# every other line is a record kg-tune --log appended: each candidate evaluated, and
	# each search's stop; the best is the run's
	[ "$(jq -r 'select(.nightly | not) | if .op == "stop" then "stop \(.reason)" else "\(.kernel) \(.update.child != null)" end' "${logs[0]}" | uniq -c | tr -s ' ' | tr '\n' ,)" = \
		" 5 vector_add true, 1 stop budget, 4 softmax true, 1 stop budget, 5 transpose true, 1 stop budget," ]
	[ "$(jq -c 'select(.nightly == "spec") | .best' "${logs[1]}" | tail -1)" = "$(jq -c '{median_ms, baseline_ms, speedup}' night/kernels/transpose/best.json)" ]
	[ "$(cat "${logs[1]%.jsonl}.log")" = "$(printf 'kg-nightly: %s: exit status 0, %s builds\n' \
		"$ex/vector_add/vector_add.json" 5 "$ex/softmax/softmax.json" 4 "$ex/transpose/transpose.json" 5)" ]
	# a third night: a spec that fails and a ReGraph that cannot be written are said, and
	# the end line names no ReGraph; the other specs still run; exit 1
	jq '.specs += ["missing.json"]' conf/nightly.json >conf/failing.json
	rm night/regraph.json && mkdir night/regraph.json
	sleep 1
	run_tool 1 kg-nightly conf/failing.json
	log=$(ls night/logs/*.jsonl | tail -1)
	assert_stderr "$(printf '%s\n' "kg-nightly: 1 of 4 specs failed; see $PWD/$log and $PWD/${log%.jsonl}.log" \
		"kg-nightly: $PWD/night/regraph.json: not rebuilt (kg-regraph build, exit status 4); see $PWD/${log%.jsonl}.log")"
	[ "$(jq -c 'select(.nightly == "spec") | [.status, .builds, .run, .regraph]' "$log" | tr -d '\n')" = '[0,5,"'"$night"'/kernels/vector_add",null][0,4,"'"$night"'/kernels/softmax",null][0,5,"'"$night"'/kernels/transpose",null][2,0,null,null]' ]
	[ "$(jq -c 'select(.nightly == "end") | del(.t)' "$log")" = '{"nightly":"end","failed":1,"regraph":null,"regraph_status":4}' ]
	[ "$(evaluated night/kernels/vector_add | wc -l)" -eq 15 ]
}

@test "kg-report on replayed tables: the roofline from the table's figures, both roofs and where they came from" {
	# matmul: KernelGraph.Flops, half data, one arithmetic intensity for every configuration
	kg-tune -q --no-llm --replay "$KG_ROOT/examples/matmul/matmul_H100_T4.json" --budget-builds 5 --outdir mm "$KG_ROOT/examples/matmul/matmul.json" >/dev/null
	run_tool 0 kg-report mm/kernels/matmul
	assert_stderr_empty
	svg=mm/kernels/matmul/report/roofline.svg
	grep -q '<text>memory roof 3008 GB/s: the copy bandwidth kg-bench --calibrate measured on the NVIDIA H100 80GB HBM3</text>' "$svg"
	grep -q '<text>compute roof 989.4 TFLOP/s: FP16 tensor-core peak of the NVIDIA H100 80GB HBM3 (datasheet, dense)</text>' "$svg"
	grep -q "<text>all $(($(evaluated mm/kernels/matmul | wc -l) + 1)) variants share one arithmetic intensity, 1365 FLOP/byte</text>" "$svg"
	grep -q '<text>best: [0-9.]* TFLOP/s, [0-9]*% of the roof</text>' "$svg"
	# both roofs are on the axes: each plot's path is more than its key's sample line
	for roof in 4 5; do
		[ "$(awk -v g="gnuplot_plot_$roof\"" '/<g id="gnuplot_plot_/ { n = index($0, g) > 0 } n' "$svg" | grep -o ' L[0-9]' | wc -l)" -gt 10 ]
	done
	kg-report -q --peak-tflops 500 mm/kernels/matmul >/dev/null
	grep -q '<text>compute roof 500 TFLOP/s: --peak-tflops</text>' "$svg"
	# a device with no datasheet peak known: the memory roof alone, and what would draw the other
	jq '.metadata.hardware.hardware_description = "NVIDIA GeForce RTX 4090"' "$KG_ROOT/examples/reduction/reduction_H100_T4.json" >rtx.json
	kg-tune -q --no-llm --replay rtx.json --budget-builds 3 --outdir rtx "$KG_ROOT/examples/reduction/reduction.json" >/dev/null
	run_tool 0 kg-report rtx/kernels/reduction
	grep -q '<text>no compute roof: no datasheet peak known for the NVIDIA GeForce RTX 4090 (--peak-tflops draws one)</text>' rtx/kernels/reduction/report/roofline.svg
	grep -q '<text>memory roof [0-9]* GB/s: the copy bandwidth kg-bench --calibrate measured on the NVIDIA GeForce RTX 4090</text>' rtx/kernels/reduction/report/roofline.svg
	# a table without bandwidths: no roofline, said so
	jq '.results[].measurements |= map(select(.name == "time" or .name == "state"))' "$TABLE" >times.json
	kg-tune -q --no-llm --replay times.json --budget-builds 3 --outdir t4 "$VECTOR_ADD" >/dev/null
	run_tool 0 kg-report t4/kernels/vector_add
	assert_stderr "kg-report: t4/kernels/vector_add: the measurements carry no bandwidth (gbps): no roofline plot"
	[ "$(ls t4/kernels/vector_add/report)" = "$(printf '%s\n' convergence.svg graph.dot graph.svg index.html vector_add_T4.json)" ]
	grep -q '<p>No roofline: the measurements carry no bandwidth.</p>' t4/kernels/vector_add/report/index.html
}

@test "kg-report's HTML page in a headless browser: the tables, three inline SVGs, the diffs escaped, a picture" {
	command -v chromium >/dev/null || fail "chromium is not installed (make deps installs it)"
	kg-tune -q --no-llm --replay "$TABLE" --budget-builds 6 --outdir out "$VECTOR_ADD" >/dev/null
	# the fastest variant's kernel as a code edit would leave it, with text HTML must escape
	fastest=$(jq -rs 'map(select(.update.child != null and (.update.root | not) and .bench.status == "ok")) | min_by(.bench.median_ms) | .build.state' "$RUN/events.jsonl")
	{ cat "$RUN/variants/$fastest/kernel.cu"; echo '// <b>not bold</b> & i < n'; } >kernel.cu
	mv kernel.cu "$RUN/variants/$fastest/kernel.cu"
	kg-report -q --top 3 "$RUN" >/dev/null
	chrome=(chromium --headless --disable-gpu --no-sandbox --user-data-dir="$PWD/chromium" --hide-scrollbars)
	"${chrome[@]}" --dump-dom "file://$PWD/$RUN/report/index.html" >dom.html 2>/dev/null
	grep -q '<title>kernelgraph report: vector_add</title>' dom.html
	# self-contained: nothing to load, from a file or the network
	run ! grep -qE '<(link|script|img|iframe|object)[ >]|src=|url\([^#]' "$RUN/report/index.html"
	[ "$(grep -o '<svg' dom.html | wc -l)" -eq 3 ]
	[ "$(grep -o '<table class="summary">' dom.html | wc -l)" -eq 1 ]
	[ "$(sed -n '/<table class="fastest">/,/<\/table>/p' dom.html | grep -o '<tr>' | wc -l)" -eq 4 ]
	[ "$(grep -o '<h3>build [0-9]*, [0-9a-f]\{8\}: [0-9.]* ms, [0-9.]*x</h3>' dom.html | wc -l)" -eq 3 ]
	grep -q "<h3>build [0-9]*, ${fastest:0:8}: " dom.html
	grep -q '^+// &lt;b&gt;not bold&lt;/b&gt; &amp; i &lt; n</pre>$' dom.html
	[ "$(grep -c '<b>' dom.html)" -eq 0 ]
	grep -q '<pre class="diff">configuration: [a-z_]* [0-9]* → [0-9]*' dom.html
	# rendered, the page is a picture, not a blank
	"${chrome[@]}" --force-device-scale-factor=0.5 --window-size=1000,2000 --screenshot="$PWD/page.png" "file://$PWD/$RUN/report/index.html" 2>/dev/null
	[ "$(python3 "$TOOLS/png_colors.py" page.png)" -gt 100 ]
}

@test "kg-report without Graphviz: graph.dot alone, said so" {
	mkdir nodot
	for f in /usr/bin/* /bin/*; do [ "${f##*/}" = dot ] || ln -sf "$f" "nodot/${f##*/}"; done
	kg-tune -q --no-llm --replay "$TABLE" --budget-builds 3 --outdir out "$VECTOR_ADD" >/dev/null
	run_tool 0 env PATH="$KG_BIN_DIR:$PWD/nodot" kg-report "$RUN"
	assert_stderr "kg-report: dot (Graphviz) is not installed: $RUN/report/graph.dot is not drawn"
	[ ! -e "$RUN/report/graph.svg" ]
	grep -q '^digraph search {$' "$RUN/report/graph.dot"
	grep -q '<p>Graphviz (dot) is not installed: the graph is in <code>graph.dot</code>.</p>' "$RUN/report/index.html"
}
