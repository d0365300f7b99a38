#!/usr/bin/env bats
# 90-examples.bats: every example's spec loads, its space is not empty, its kernel builds in
# the default configuration, and its table recorded on the H100 covers the space (or a large
# sample of it) and replays.

load ../test_helper

setup_file() {
	export XDG_CACHE_HOME="$BATS_FILE_TMPDIR/cache"
}

setup() {
	cd "$BATS_TEST_TMPDIR"
}

# example_run NAME: a run directory NAME of the example NAME (its spec, the matmul's kernel as
# matmul.cu); sets $spec, the example's spec.
example_run() {
	spec=$KG_ROOT/examples/$1/$1.json
	mkdir "$1"
	jq '.KernelSpecification.KernelFile = "matmul.cu"' "$spec" >"$1/spec.json"
	cp "$KG_ROOT/examples/matmul/matmul.cu" "$1/"
}

# entry NAME: $spec's KernelGraph.Patches entry NAME.
entry() {
	jq -c --arg n "$1" '.KernelGraph.Patches[] | select(.Name == $n)' "$spec"
}

# baseline RUN: the state of the kernel of RUN in the default configuration, built for sm_90a.
baseline() {
	jq -cn --arg r "$1" '{run: $r, candidate: {id: "baseline"}}' | kg-build --arch sm_90a | jq -r .build.state
}

# apply RUN NODE NAME: the entry NAME applied at NODE in its Config, built for sm_90a; prints
# the build record.
apply() {
	jq -cn --arg r "$1" --arg b "$2" --arg id "$3" --rawfile p "$(dirname "$spec")/$(entry "$3" | jq -r .PatchFile)" \
		--argjson c "$(entry "$3" | jq -c .Config)" '{run: $r, node: $b, candidate: {id: $id, patch: $p, config: $c}}' |
		kg-build --arch sm_90a
}

@test "every example's spec loads, has a non-empty space and a README" {
	for spec in "$KG_ROOT"/examples/*/*.json; do
		case $spec in *_T4.json) continue ;; esac
		run_tool 0 kg-propose --exhaustive --count --spec "$spec"
		[ "$output" -gt 0 ]
		[ -s "$(dirname "$spec")/README.md" ]
	done
}

@test "the copies of matmul's kernel and patches that other specs' folders hold are identical to matmul's" {
	# a spec may name only files in its folder, so the specs sharing matmul's files hold copies
	for f in matmul.cu tma_to_ws.diff wgmma.diff wgmma_tma_ws.diff wgmma_to_tma.diff wgmma_to_tma_ws.diff; do
		cmp "$KG_ROOT/examples/matmul/$f" "$KG_ROOT/examples/fused_matmul_act/$f"
	done
	cmp "$KG_ROOT/examples/matmul/matmul.cu" "$KG_ROOT/benchmarks/data/matmul_H100/matmul.cu"
	for spec in "$KG_ROOT"/benchmarks/data/matmul_H100/matmul_{1024,2048,4096_sub}.json; do
		run_tool 0 kg-propose --random 1 --spec "$spec"
	done
}

@test "the README's table of examples gives each space's size as kg-propose counts it" {
	rows=0
	while IFS='|' read -r _ name _ size _; do
		name=${name//[\` ]/} size=${size%% (*} size=${size//[, ]/}
		spec=$KG_ROOT/examples/$name/$name.json
		[ -n "$name" ] && [ -f "$spec" ] || continue # not a row of the examples' table
		run_tool 0 kg-propose --exhaustive --count --spec "$spec"
		[ "$size" = "$output" ] || { echo "$name: the README says $size, kg-propose counts $output" >&2; false; }
		rows=$((rows + 1))
	done <"$KG_ROOT/README.md"
	[ "$rows" -eq "$(ls -d "$KG_ROOT"/examples/*/ | wc -l)" ]
}

@test "every example has a table recorded on the H100: its whole space, or a sample of 40 or more; all correct; it replays" {
	for spec in "$KG_ROOT"/examples/*/*.json; do
		case $spec in *_T4.json) continue ;; esac
		dir=$(dirname "$spec") name=$(basename "$dir")
		table=$dir/${name}_H100_T4.json
		[ -s "$table" ]
		kg-propose -x -s "$spec" | jq -c .candidate.config | jq -cS . | sort >space
		jq -c '.results[].configuration' "$table" | jq -cS . | sort -u >recorded
		# every recorded configuration is one of the space; a space of 200 or fewer is recorded whole
		[ -z "$(comm -13 space recorded)" ]
		if [ "$(wc -l <space)" -le 200 ]; then diff space recorded; else [ "$(wc -l <recorded)" -ge 40 ]; fi
		[ "$(jq '[.results[] | select(.invalidity != "correct")] | length' "$table")" -eq 0 ]
		run_tool 0 kg-tune -q --no-llm --replay "$table" --budget-builds 10 --outdir "out-$name" "$spec"
		[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | .bench.replayed' "out-$name/kernels/$name/events.jsonl" | sort -u)" = true ]
	done
}

@test "a replayed search ends exhausted only once every configuration of the table was proposed, on every example" {
	for spec in "$KG_ROOT"/examples/*/*.json; do
		case $spec in *_T4.json) continue ;; esac
		dir=$(dirname "$spec") name=$(basename "$dir")
		table=$dir/${name}_H100_T4.json
		run_tool 0 kg-tune --no-llm --replay "$table" --budget-builds 5000 --outdir out "$spec"
		assert_line --regexp "^$name +[0-9]+ .* exhausted "
		jq -c '.results[].configuration' "$table" | jq -cS . | sort -u >recorded
		# the configurations built of the spec's own kernel (code edits apart, which a table keyed
		# by configuration cannot answer)
		jq -c 'select(.build.config != null and (.build.edited | not)) | .build.config' "out/kernels/$name/events.jsonl" |
			jq -cS . | sort -u >proposed
		diff recorded proposed
	done
}

@test "a sampled table replays: kg-tune proposes only its configurations and finds its fastest" {
	table=$KG_ROOT/examples/matmul/matmul_H100_T4.json
	run_tool 0 kg-tune -q --no-llm --replay "$table" --budget-builds 40 --outdir out "$KG_ROOT/examples/matmul/matmul.json"
	events=out/kernels/matmul/events.jsonl
	[ "$(jq -s 'map(select(.build and (.build.baseline | not))) | length' "$events")" -eq 40 ]
	[ "$(jq -r 'select(.bench) | .bench.status' "$events" | sort -u)" = ok ]
	fastest=$(jq '[.results[].measurements[] | select(.name == "time") | .value] | min' "$table")
	[ "$(jq -s 'map(select(.bench.status == "ok") | .bench.median_ms) | min' "$events")" = "$fastest" ]
}

@test "the matmul examples' ready patch wgmma applies to their kernel, compiles for sm_90a and issues wgmma.mma_async" {
	for name in matmul fused_matmul_act; do
		example_run "$name"
		[ "$(entry wgmma | jq -r .Method)" = switch_to_mma_or_wgmma ]
		# the patch's configuration is one of the space
		kg-propose -x -s "$spec" | jq -c '.candidate.config' | jq -cS . >space
		grep -qxF "$(entry wgmma | jq -cS .Config)" space
		base=$(baseline "$name")
		output=$(apply "$name" "$base" wgmma)
		jq -e '.build | .status == "ok" and .materialized == "patch" and .arch == "sm_90a" and .patch.fuzz == [0, 0, 0, 0]' <<<"$output"
		dir=$name/variants/$(jq -r .build.state <<<"$output")
		# the wmma baseline issues mma.sync and no wgmma; the patched kernel the reverse, with the
		# fence, commit and wait around its m64n128k16 products, and no spill
		grep -q 'mma.sync.aligned' "$name/variants/$base/kernel.ptx"
		[ "$(grep -c wgmma "$name/variants/$base/kernel.ptx")" -eq 0 ]
		grep -q 'wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16' "$dir/kernel.ptx"
		for op in wgmma.fence.sync.aligned wgmma.commit_group.sync.aligned 'wgmma.wait_group.sync.aligned 0' fence.proxy.async.shared::cta; do
			grep -qF "$op" "$dir/kernel.ptx"
		done
		[ "$(grep -c 'mma.sync.aligned' "$dir/kernel.ptx")" -eq 0 ]
		grep -q ' 0 bytes spill stores, 0 bytes spill loads' "$dir/build.log"
	done
}

@test "the matmul examples' ready patch wgmma_tma_ws applies, compiles for sm_90a and issues TMA copies, mbarrier waits and wgmma m64n256k16" {
	for name in matmul fused_matmul_act; do
		example_run "$name"
		[ "$(entry wgmma_tma_ws | jq -r .Method)" = enable_async_pipeline ]
		kg-propose -x -s "$spec" | jq -c '.candidate.config' | jq -cS . >space
		grep -qxF "$(entry wgmma_tma_ws | jq -cS .Config)" space
		output=$(apply "$name" "$(baseline "$name")" wgmma_tma_ws)
		jq -e '.build | .status == "ok" and .materialized == "patch" and .arch == "sm_90a" and (.patch.fuzz | all(. == 0))' <<<"$output"
		ptx=$name/variants/$(jq -r .build.state <<<"$output")/kernel.ptx
		# the tensor maps arrive as two 128-byte, 64-aligned parameters after the six arguments
		[ "$(grep -cE '\.param \.align 64 \.b8 matmul_param_[67]\[128\]' "$ptx")" -eq 2 ]
		grep -q 'cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes' "$ptx"
		grep -q 'wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16' "$ptx"
		for op in mbarrier.init.shared::cta.b64 mbarrier.arrive.expect_tx.shared::cta.b64 mbarrier.try_wait.parity.shared::cta.b64 \
			'setmaxnreg.dec.sync.aligned.u32 40' 'setmaxnreg.inc.sync.aligned.u32 232' 'wgmma.wait_group.sync.aligned 1'; do
			grep -qF "$op" "$ptx"
		done
		[ "$(grep -c 'mma.sync.aligned\|cp.async.cg' "$ptx")" -eq 0 ]
		grep -q ' 0 bytes spill stores, 0 bytes spill loads' "$(dirname "$ptx")/build.log"
		# the fused example's activation is in the epilogue: LeakyReLU's compare and multiply
		if [ "$name" = fused_matmul_act ]; then grep -q 'mul.f32.*0f3C23D70A' "$ptx"; fi
	done
}

@test "the matmul examples' ready patches tma_after_wgmma and ws_after_tma apply in turn after wgmma, compile for sm_90a and issue TMA copies and mbarrier waits, the producer warpgroup's setmaxnreg only in the last" {
	for name in matmul fused_matmul_act; do
		example_run "$name"
		# step NODE NAME: the entry NAME applied at NODE, its build record in $output
		step() { output=$(apply "$name" "$1" "$2"); }
		kg-propose -x -s "$spec" | jq -c '.candidate.config' | jq -cS . >space
		for n in tma_after_wgmma ws_after_tma; do
			[ "$(entry $n | jq -r .Method)" = enable_async_pipeline ]
			grep -qxF "$(entry $n | jq -cS .Config)" space
		done
		[ "$(entry tma_after_wgmma | jq -r .After)" = wgmma ]
		[ "$(entry ws_after_tma | jq -r .After)" = tma_after_wgmma ]
		base=$(baseline "$name")
		step "$base" wgmma
		wgmma=$(jq -r .build.state <<<"$output")
		step "$wgmma" tma_after_wgmma
		jq -e '.build | .status == "ok" and .materialized == "patch" and .arch == "sm_90a" and (.patch.fuzz | all(. == 0))' <<<"$output"
		tma=$(jq -r .build.state <<<"$output")
		ptx=$name/variants/$tma/kernel.ptx
		# the tensor maps as parameters after the six arguments; TMA copies completing on the
		# slots' mbarriers; the wgmma kernel's m64n128k16 products, one group left in flight;
		# no cp.async left, and no producer warpgroup yet (no setmaxnreg)
		[ "$(grep -cE '\.param \.align 64 \.b8 matmul_param_[67]\[128\]' "$ptx")" -eq 2 ]
		grep -q 'cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes' "$ptx"
		grep -q 'wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16' "$ptx"
		for op in mbarrier.init.shared::cta.b64 mbarrier.arrive.expect_tx.shared::cta.b64 mbarrier.try_wait.parity.shared::cta.b64 \
			mbarrier.arrive.shared::cta.b64 'wgmma.wait_group.sync.aligned 1'; do
			grep -qF "$op" "$ptx"
		done
		[ "$(grep -c 'mma.sync.aligned\|cp.async.cg\|setmaxnreg' "$ptx")" -eq 0 ]
		grep -q ' 0 bytes spill stores, 0 bytes spill loads' "$name/variants/$tma/build.log"
		step "$tma" ws_after_tma
		jq -e '.build | .status == "ok" and .materialized == "patch" and .arch == "sm_90a" and (.patch.fuzz | all(. == 0))' <<<"$output"
		ptx=$name/variants/$(jq -r .build.state <<<"$output")/kernel.ptx
		grep -q 'wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16' "$ptx"
		for op in cp.async.bulk.tensor.2d 'setmaxnreg.dec.sync.aligned.u32 40' 'setmaxnreg.inc.sync.aligned.u32 232'; do
			grep -qF "$op" "$ptx"
		done
		# each applies to the kernel it names only: not to the wgmma kernel, nor to the spec's
		step "$wgmma" ws_after_tma
		jq -e '.build.status == "patch_failed"' <<<"$output"
		step "$base" tma_after_wgmma
		jq -e '.build.status == "patch_failed"' <<<"$output"
	done
}

@test "the wmma kernel refuses a warp count it cannot lay out (12: the warp-specialized patch's) at compile time" {
	mkdir matmul
	cp "$KG_ROOT/examples/matmul/matmul.json" matmul/spec.json
	cp "$KG_ROOT/examples/matmul/matmul.cu" matmul/
	run_tool 0 kg-build --arch sm_90a <<<'{"run": "matmul", "candidate": {"id": "w12", "config": {"block_m": 128, "block_n": 256, "block_k": 64, "num_warps": 12, "num_stages": 4, "group_m": 8}}}'
	jq -e '.build.status == "compile_failed"' <<<"$output"
	grep -q 'no split of num_warps gives every warp whole 16x16 fragments' matmul/variants/*/build.log
}

@test "the matmul's ready patches compose: wgmma then tma_ws_after_wgmma, and wgmma, tma_after_wgmma, ws_after_tma, build the very variant wgmma_tma_ws builds" {
	example_run matmul
	build() { apply matmul "$@"; }
	[ "$(entry tma_ws_after_wgmma | jq -r .After)" = wgmma ]
	base=$(baseline matmul)
	direct=$(build "$base" wgmma_tma_ws)
	wgmma=$(build "$base" wgmma)
	jq -e '.build.status == "ok"' <<<"$wgmma"
	chained=$(build "$(jq -r .build.state <<<"$wgmma")" tma_ws_after_wgmma)
	jq -e '.build | .status == "ok" and .materialized == "patch" and (.patch.fuzz | all(. == 0))' <<<"$chained"
	# the same source and configuration: one state, so the graph merges the two paths
	[ "$(jq -r .build.state <<<"$chained")" = "$(jq -r .build.state <<<"$direct")" ]
	# the third route, through the TMA kernel without a producer warpgroup: the same source
	tma=$(build "$(jq -r .build.state <<<"$wgmma")" tma_after_wgmma)
	jq -e '.build.status == "ok"' <<<"$tma"
	stepped=$(build "$(jq -r .build.state <<<"$tma")" ws_after_tma)
	jq -e '.build | .status == "ok" and .materialized == "patch" and (.patch.fuzz | all(. == 0))' <<<"$stepped"
	[ "$(jq -r .build.state <<<"$stepped")" = "$(jq -r .build.state <<<"$direct")" ]
	# on the spec's own kernel it does not apply, and kg-build says so
	jq -e '.build.status == "patch_failed"' <<<"$(build "$base" tma_ws_after_wgmma)"
}

@test "the README's two nights without a GPU: kg-nightly examples/nightly.json twice, 20 builds a spec a night, then a report" {
	# the README's commands, in a copy of the examples (the runs go to ../out/nightly of the config)
	for line in '    bin/kg-nightly examples/nightly.json     # night 1: starts both runs; prints nothing' \
		'    bin/kg-nightly examples/nightly.json     # night 2: resumes them, 20 more builds each' \
		'    bin/kg-report out/nightly/kernels/vector_add'; do
		grep -qxF -- "$line" "$KG_ROOT/README.md"
	done
	cp -r "$KG_ROOT/examples" .
	run_tool 0 kg-nightly examples/nightly.json
	assert_output ""
	run_tool 0 kg-nightly examples/nightly.json
	assert_output ""
	[ "$(ls out/nightly/logs/*.log | wc -l)" -eq 2 ]
	for log in out/nightly/logs/*.log; do
		[ "$(cat "$log")" = "$(printf '%s\n' "kg-nightly: $PWD/examples/vector_add/vector_add.json: exit status 0, 20 builds" \
			"kg-nightly: $PWD/examples/reduction/reduction.json: exit status 0, 20 builds")" ]
	done
	for name in vector_add reduction; do
		[ "$(jq -r .bench.replayed out/nightly/kernels/$name/events.jsonl | sort -u)" = true ]
		[ "$(jq -s '[.[] | select(.update.child != null and (.update.root | not))] | length' out/nightly/kernels/$name/events.jsonl)" -eq 40 ]
	done
	run_tool 0 kg-report out/nightly/kernels/vector_add
	assert_line "Report: out/nightly/kernels/vector_add/report/index.html"
}
