#!/usr/bin/env bats
# 20-kg-build.bats: kg-build with real NVRTC compiles: baselines, knob changes, diffs (good,
# failing, hostile), full sources, compile errors, invalid configurations, transpositions, cache.

load test_helper

setup() {
	export XDG_CACHE_HOME="$BATS_TEST_TMPDIR/cache"
	cd "$BATS_TEST_TMPDIR"
}

# new_run DIR [JQ-FILTER]: a run directory holding the test kernel, its header and spec.json
# (rewritten by JQ-FILTER when given).
new_run() {
	mkdir -p "$1"
	cp "$FIXTURES"/build/* "$1/"
	if [ -n "${2:-}" ]; then
		jq "$2" "$FIXTURES/build/spec.json" >"$1/spec.json"
	fi
}

# record RUN NODE CANDIDATE-JSON: one input record.
record() {
	jq -cn --arg run "$1" --arg node "$2" --argjson c "$3" \
		'{v: 1, run: $run, candidate: $c} + (if $node == "" then {} else {node: $node} end)'
}

# build_baseline RUN: builds the spec's own kernel and prints its state.
build_baseline() {
	record "$1" "" '{"id":"baseline"}' | kg-build | jq -r .build.state
}

# patch_record RUN NODE ID DIFF: a candidate that carries DIFF as its patch.
patch_record() {
	jq -cn --arg run "$1" --arg node "$2" --arg id "$3" --arg patch "$4" \
		'{v: 1, run: $run, node: $node, candidate: {id: $id, patch: $patch}}'
}

# snapshot: the checksum of every file under the test's directory but the cache and the
# files bats and the test themselves write.
snapshot() {
	find . -path ./cache -prune -o -type f ! -name 'separate-stderr-*' ! -name input.jsonl -print0 |
		sort -z | xargs -0 sha256sum
}

# factor_diff FROM TO FACTOR [LINE]: a diff, with FROM and TO as its file names, that scales
# the result in the kernel's line 10 by FACTOR; its hunk says it starts at LINE (default 8).
factor_diff() {
	printf '%s\n' "--- $1" "+++ $2" "@@ -${4:-8},4 +${4:-8},4 @@" \
		' 	for (int k = 0; k < items_per_thread; k++, i += block_size_x)' ' 		if (i < n)' \
		'-			y[i] = scale_op(x[i]);' "+			y[i] = $3 * scale_op(x[i]);" ' }'
}

# A diff that doubles the result; it places its hunk 2 lines early, which patch reports.
GOOD_DIFF=$(factor_diff a/scale.cu b/scale.cu 2.0f 6)

@test "--help prints the usage on stdout and exits 0; --version the version" {
	run_tool 0 kg-build --help
	assert_line --index 0 "Usage: kg-build [OPTION]... [FILE]"
	assert_line "object is reported and dropped; 2 usage error; 3 NVRTC (for a record to compile) or"
	assert_stderr_empty
	run_tool 0 kg-build --version
	assert_output --regexp '^kg-build \(kernelgraph\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "a baseline build compiles the spec's kernel with its defaults and keeps every artefact" {
	new_run run
	run_tool 0 kg-build < <(record run "" '{"id":"baseline"}')
	assert_stderr_empty
	build=$(jq -c .build <<<"$output")
	state=$(jq -r .state <<<"$build")
	[[ "$state" =~ ^[0-9a-f]{64}$ ]]
	[ "$(jq -c '[.status, .config, .grid, .block, .arch, .function, .reused, .cached, .materialized]' <<<"$build")" = \
		'["ok",{"block_size_x":128,"items_per_thread":1,"use_fma":false},[512,1,1],[128,1,1],"sm_90","scale",false,false,"parent"]' ]
	[ "$(jq -c .options <<<"$build")" = \
		'["-std=c++17","-Dblock_size_x=128","-Ditems_per_thread=1","-Duse_fma=0","--gpu-architecture=sm_90","-lineinfo","--ptxas-options=-v"]' ]
	[ "$(jq -r .dir <<<"$build")" = "variants/$state" ]
	for f in kernel.cu kernel.cubin kernel.ptx build.log build.json; do
		[ -s "run/variants/$state/$f" ]
	done
	# A cubin is an ELF file; the log starts with the options NVRTC got.
	[ "$(head -c 4 "run/variants/$state/kernel.cubin" | od -An -c | tr -d ' ')" = '177ELF' ]
	grep -q -- '--gpu-architecture=sm_90' "run/variants/$state/build.log"
	[ "$(jq '[.registers, .smem_bytes, .spill_bytes, .stack_bytes] | map(type == "number") | all' <<<"$build")" = true ]
	[ "$(jq '.registers > 0 and .compile_ms > 0' <<<"$build")" = true ]
	[ "$(jq -c '.ptx_profile | [.global_loads.scalar, .global_stores.scalar, .fma, .branches]' <<<"$build")" = '[1,1,1,1]' ]
	cmp "run/variants/$state/kernel.cu" run/scale.cu
}

@test "a link planted as the run's variants folder is refused, naming it; nothing is built where it points" {
	new_run run
	mkdir elsewhere
	ln -s ../elsewhere run/variants
	run_tool 1 kg-build <<<'{"run": "run", "candidate": {"id": "baseline"}}'
	[[ "$stderr" == *"cannot create 'run/variants': Too many levels of symbolic links"* ]]
	[ -z "$(ls -A elsewhere)" ]
}

@test "a knob change completes the configuration from the parent and gets its own state" {
	new_run run
	base=$(build_baseline run)
	run_tool 0 kg-build < <(record run "$base" '{"id":"c1","config":{"items_per_thread":4}}')
	assert_stderr_empty
	[ "$(jq -c '.build | [.status, .config, .grid, .materialized]' <<<"$output")" = \
		'["ok",{"block_size_x":128,"items_per_thread":4,"use_fma":false},[128,1,1],"parent"]' ]
	state=$(jq -r .build.state <<<"$output")
	[ "$state" != "$base" ]
	jq -e '.build.options | index("-Ditems_per_thread=4")' <<<"$output"
	cmp "run/variants/$state/kernel.cu" "run/variants/$base/kernel.cu"
}

@test "a good diff is applied to the parent's kernel.cu and kept as candidate.diff" {
	new_run run
	base=$(build_baseline run)
	run_tool 0 kg-build < <(patch_record run "$base" p1 "$GOOD_DIFF")
	assert_stderr_empty
	[ "$(jq -c '.build | [.status, .materialized, .patch]' <<<"$output")" = \
		'["ok","patch",{"hunks":1,"offsets":[2],"fuzz":[0],"recounted":false}]' ]
	state=$(jq -r .build.state <<<"$output")
	grep -q 'y\[i\] = 2.0f \* scale_op(x\[i\]);' "run/variants/$state/kernel.cu"
	[ "$(cat "run/variants/$state/candidate.diff")" = "$GOOD_DIFF" ]
}

@test "a diff that does not apply is patch_failed with patch's own message, and leaves no variant" {
	new_run run
	base=$(build_baseline run)
	diff='--- a/kernel.cu
+++ b/kernel.cu
@@ -8,3 +8,3 @@
 	for (int k = 0; k < items_per_thread; k++, i += block_size_x)
-		if (i < m)
+		if (i < n && i >= 0)
 			y[i] = scale_op(x[i]);'
	run_tool 0 kg-build < <(patch_record run "$base" p2 "$diff")
	assert_stderr_empty
	[ "$(jq -r .build.status <<<"$output")" = patch_failed ]
	# patch's words, the hunk's lines against the parent's most alike, and where the parent is
	diff -u - <(jq -r .build.error <<<"$output") <<EOF
Hunk #1 FAILED at 8.
1 out of 1 hunk FAILED
hunk #1 expected, at line 8:
     8 | 	for (int k = 0; k < items_per_thread; k++, i += block_size_x)
     9 | 		if (i < m)
    10 | 			y[i] = scale_op(x[i]);
the parent's nearest lines, 8 to 10 (2 of 3 alike):
     8 | 	for (int k = 0; k < items_per_thread; k++, i += block_size_x)
     9 | 		if (i < n)
    10 | 			y[i] = scale_op(x[i]);
the parent's kernel: run/variants/$base/kernel.cu
EOF
	[ "$(jq -r '.build.patch.message' <<<"$output")
the parent's kernel: run/variants/$base/kernel.cu" = "$(jq -r .build.error <<<"$output")" ]
	[ "$(ls run/variants)" = "$base" ]
	# a hunk placed at the wrong line, re-indented: the nearest lines are where the text is; the
	# baseline's parent is the spec's kernel file
	diff='--- a/kernel.cu
+++ b/kernel.cu
@@ -2,2 +2,2 @@
 for (int k = 0; k < items_per_thread; k++, i += block_size_x)
-    if (i < n) /* bounds */
+    if (i < n)'
	jq -cn --arg p "$diff" '{v: 1, run: "run", candidate: {id: "p3", patch: $p}}' >input.jsonl
	run_tool 0 kg-build input.jsonl
	[ "$(jq -r .build.error <<<"$output" | sed -n '6p;9p')" = "$(printf '%s\n' \
		"the parent's nearest lines, 8 to 9 (1 of 2 alike):" "the parent's kernel: run/scale.cu")" ]
}

@test "diff headers naming ../../ or absolute paths change nothing outside the variant" {
	new_run run
	base=$(build_baseline run)
	echo 'do not touch' >victim
	abs=$(pwd)/victim
	before=$(snapshot)
	for target in ../../victim "$abs" ../../../../../../etc/passwd ../../scale.cu "$abs/../run/kernel.cu"; do
		patch_record run "$base" "evil" "$(factor_diff "$target" "$target" 3.0f)"
	done >input.jsonl
	run_tool 0 kg-build input.jsonl
	assert_stderr_empty
	# another file is refused; the kernel's own name, in any folder, is the variant's kernel.cu
	[ "$(jq -r .build.status <<<"$output" | paste -sd' ')" = 'patch_failed patch_failed patch_failed ok ok' ]
	[ "$(jq -r .build.error <<<"${lines[2]}")" = \
		"line 1 of the diff: \"--- ../../../../../../etc/passwd\" names another file than the kernel's (kernel.cu or scale.cu)" ]
	state=$(jq -r .build.state <<<"${lines[3]}")
	[ "$(jq -r .build.state <<<"${lines[4]}")" = "$state" ]
	grep -q '3.0f \* scale_op' "run/variants/$state/kernel.cu"
	[ "$(cat victim)" = 'do not touch' ]
	# Every file that existed is unchanged; the only new files are in the new variant.
	[ "$(snapshot | grep -v "variants/$state/")" = "$before" ]
}

@test "a diff for another file than the kernel's is patch_failed, naming its header" {
	new_run run
	base=$(build_baseline run)
	{
		patch_record run "$base" other "$(factor_diff a/other.cu b/other.cu 3.0f)"
		patch_record run "$base" new "$(factor_diff /dev/null b/scale.cu 3.0f)"
		patch_record run "$base" renamed "$(factor_diff a/scale.cu b/scale_v2.cu 3.0f)"
		patch_record run "$base" stamped "$(factor_diff $'a/kernel.cu\t2026-01-01 00:00:00' $'b/kernel.cu\t2026-01-01 00:00:01' 3.0f)"
	} >input.jsonl
	run_tool 0 kg-build input.jsonl
	assert_stderr_empty
	[ "$(jq -r .build.status <<<"$output" | paste -sd' ')" = 'patch_failed patch_failed patch_failed ok' ]
	[ "$(jq -r .build.error <<<"${lines[0]}")" = "line 1 of the diff: \"--- a/other.cu\" names another file than the kernel's (kernel.cu or scale.cu)" ]
	[ "$(jq -r .build.error <<<"${lines[1]}")" = "line 1 of the diff: \"--- /dev/null\" names another file than the kernel's (kernel.cu or scale.cu)" ]
	[ "$(jq -r .build.error <<<"${lines[2]}")" = "line 2 of the diff: \"+++ b/scale_v2.cu\" names another file than the kernel's (kernel.cu or scale.cu)" ]
	[ "$(ls run/variants | wc -l)" -eq 2 ]
}

@test "a diff touching several files, or with no hunks, is refused" {
	new_run run
	base=$(build_baseline run)
	two='--- a/scale.cu
+++ b/scale.cu
@@ -1,1 +1,1 @@
-/* x */
+/* y */
--- a/other.cu
+++ b/other.cu
@@ -1,1 +1,1 @@
-a
+b'
	{
		patch_record run "$base" two "$two"
		patch_record run "$base" none 'just some prose, no diff'
		patch_record run "$base" header $'--- a/x\n+++ b/x\n@@ -a +b @@\n-x\n+y'
	} >input.jsonl
	run_tool 0 kg-build input.jsonl
	[ "$(jq -r .build.error <<<"${lines[0]}")" = "the diff changes 2 files; a candidate may change kernel.cu only" ]
	[ "$(jq -r .build.error <<<"${lines[1]}")" = 'the diff has no hunks (no line starts with "@@")' ]
	[ "$(jq -r .build.error <<<"${lines[2]}")" = 'line 3 of the diff: malformed hunk header "@@ -a +b @@"' ]
	[ "$(jq -r .build.status <<<"$output" | sort -u)" = patch_failed ]
}

@test "hunk line counts are recomputed, bare @@ headers, CRLF and blank context lines are accepted" {
	new_run run
	base=$(build_baseline run)
	wrong_counts=$'--- a/scale.cu\n+++ b/scale.cu\n@@ -8,9 +8,2 @@\n \tfor (int k = 0; k < items_per_thread; k++, i += block_size_x)\n \t\tif (i < n)\n-\t\t\ty[i] = scale_op(x[i]);\n+\t\t\ty[i] = 4.0f * scale_op(x[i]);\n }'
	bare=$'@@\n \t\tif (i < n)\n-\t\t\ty[i] = scale_op(x[i]);\n+\t\t\ty[i] = 5.0f * scale_op(x[i]);\n }'
	crlf=$(printf '%s' "$GOOD_DIFF" | sed 's/$/\r/')
	blank=$'@@ -4,4 +4,5 @@\n\n extern "C" __global__ void scale(float *y, const float *x, int n)\n {\n+\t// a comment\n \tint i = blockIdx.x * (block_size_x * items_per_thread) + threadIdx.x;'
	{
		patch_record run "$base" counts "$wrong_counts"
		patch_record run "$base" bare "$bare"
		patch_record run "$base" crlf "$crlf"
		patch_record run "$base" blank "$blank"
	} >input.jsonl
	run_tool 0 kg-build input.jsonl
	assert_stderr_empty
	[ "$(jq -c '[.candidate.id, .build.status, .build.patch.recounted]' <<<"$output" | tr -d '\n')" = \
		'["counts","ok",true]["bare","ok",true]["crlf","ok",false]["blank","ok",false]' ]
	grep -q '4.0f \* scale_op' "run/variants/$(jq -r .build.state <<<"${lines[0]}")/kernel.cu"
	grep -q '5.0f \* scale_op' "run/variants/$(jq -r .build.state <<<"${lines[1]}")/kernel.cu"
	# Line endings are normalized: the CRLF diff gives the same state as the LF one.
	[ "$(jq -r .build.state <<<"${lines[2]}")" = "$(patch_record run "$base" lf "$GOOD_DIFF" | kg-build | jq -r .build.state)" ]
	grep -q '// a comment' "run/variants/$(jq -r .build.state <<<"${lines[3]}")/kernel.cu"
}

@test "a kernel may include only files in its folder and the toolkit's headers, named plainly" {
	new_run run
	mkdir run/sub
	echo '#define FROM_SUB 1' >run/sub/extra.cuh
	echo 'not the kernel'"'"'s' >outside.h
	ln -s ../outside.h run/link.cuh
	key=sk-include-4c1d-secret
	{
		for d in '#include "/proc/self/environ"' '#include </etc/passwd>' '#include "../outside.h"' \
			'#  include <sub/../../outside.h>' '#include "link.cuh"' '#include "nothere.h"' '#include FILE' \
			$'# /* a comment */ inc\\\nlude "/proc/self/environ"' '%:include_next "/etc/passwd"' \
			'#include "sub/extra.cuh"' '#include <cuda_fp16.h>'; do
			jq -cn --arg s "$(printf '#define FILE "/proc/self/environ"\n%s\n' "$d"; cat run/scale.cu)" \
				'{run: "run", candidate: {id: "inc", source: $s}}'
		done
	} >input.jsonl
	OPENAI_API_KEY=$key run_tool 0 kg-build input.jsonl
	assert_stderr_empty
	only="a kernel may include only files in its folder and the toolkit's headers"
	jq -r '.build | "\(.status) \(.error)"' <<<"$output" >got
	cat >want <<-END
	compile_failed kernel.cu:2: #include "/proc/self/environ": an absolute path; $only
	compile_failed kernel.cu:2: #include </etc/passwd>: an absolute path; $only
	compile_failed kernel.cu:2: #include "../outside.h": a path through ".."; $only
	compile_failed kernel.cu:2: #include <sub/../../outside.h>: a path through ".."; $only
	compile_failed kernel.cu:2: #include "link.cuh": no such file in the kernel's folder '$PWD/run'; $only
	compile_failed kernel.cu:2: #include "nothere.h": no such file in the kernel's folder '$PWD/run'; $only
	compile_failed kernel.cu:2: #include names its file with a macro or not at all; name it in "" or <>
	compile_failed kernel.cu:2: #include "/proc/self/environ": an absolute path; $only
	compile_failed kernel.cu:2: #include_next "/etc/passwd": an absolute path; $only
	ok null
	ok null
	END
	diff want got
	# nothing refused reached NVRTC, the run or the compile cache
	[ "$(ls run/variants | wc -l)" -eq 2 ]
	run ! grep -rF -e "$key" -e 'not the kernel' -e 'root:' run cache
}

@test "kg-build forgets the LLM's key and endpoint: they are in neither its environment nor the one it started with" {
	new_run run
	base=$(build_baseline run)
	mkdir fake
	# a patch that notes the environment it got, and its parent's (kg-build's) first one
	printf '#!/bin/sh\nenv >"%s/env.txt"\ntr "\\0" "\\n" </proc/$PPID/environ >"%s/parent.txt"\nexec "%s" "$@"\n' \
		"$PWD" "$PWD" "$(command -v patch)" >fake/patch
	chmod +x fake/patch
	OPENAI_API_KEY=sk-build-4c1d-secret OPENAI_BASE_URL=http://user:pw@llm.example/v1 PATH="$PWD/fake:$PATH" \
		run_tool 0 kg-build < <(patch_record run "$base" p1 "$GOOD_DIFF")
	[ "$(jq -r .build.status <<<"$output")" = ok ]
	grep -q '^PATH=' env.txt
	grep -q '^PATH=' parent.txt
	run ! grep -E 'sk-build-4c1d-secret|user:pw|OPENAI' env.txt
	run ! grep -E 'sk-build-4c1d-secret|user:pw' parent.txt
}

@test "a patch or source over 1 MiB, or a patch that makes the kernel so large, is refused before anything is stored" {
	new_run run
	jq -cn --rawfile s run/scale.cu '{run: "run", candidate: {id: "600k", source: ($s + "// " + "x" * 600000 + "\n")}}' >parent.jsonl
	run_tool 0 kg-build parent.jsonl
	[ "$(jq -r .build.status <<<"$output")" = ok ]
	parent=$(jq -r .build.state <<<"$output")
	before=$(snapshot)
	{
		jq -cn --arg b "$parent" '{run: "run", node: $b, candidate: {id: "patch", patch: ("@@ -1,1 +1,1 @@\n-x\n+" + "x" * 1048576)}}'
		jq -cn --arg b "$parent" '{run: "run", node: $b, candidate: {id: "source", source: ("// " + "x" * 1048576)}}'
		jq -cn --arg b "$parent" --arg first "$(head -1 run/scale.cu)" \
			'{run: "run", node: $b, candidate: {id: "grown", patch: ("@@ -1,1 +1,2 @@\n+// " + "y" * 500000 + "\n " + $first + "\n")}}'
	} >input.jsonl
	run_tool 0 kg-build input.jsonl
	assert_stderr_empty
	jq -r '.build | "\(.status) \(.error)"' <<<"$output" >got
	cat >want <<-'END'
	patch_failed candidate.patch: larger than 1 MiB, the most a patch may have
	compile_failed candidate.source: larger than 1 MiB, the most a source may have
	compile_failed kernel.cu: larger than 1 MiB after the patch, the most a source may have
	END
	diff want got
	[ "$(snapshot | grep -v -e ' ./got$' -e ' ./want$')" = "$before" ]
}

@test "a full-source candidate is used as is; with a failing patch the source is the fallback" {
	new_run run
	base=$(build_baseline run)
	src=$(sed 's/scale_op(x\[i\])/-scale_op(x[i])/' run/scale.cu)
	{
		jq -cn --arg s "$src" --arg b "$base" '{run: "run", node: $b, candidate: {id: "s1", source: $s}}'
		jq -cn --arg s "$src" --arg b "$base" '{run: "run", node: $b, candidate: {id: "s2", source: $s, patch: "@@ -1,1 +1,1 @@\n-nothing like this\n+x"}}'
	} >input.jsonl
	run_tool 0 kg-build input.jsonl
	assert_stderr_empty
	[ "$(jq -c '[.build.status, .build.materialized, .build.reused]' <<<"$output" | tr -d '\n')" = \
		'["ok","source",false]["ok","source_after_patch_failed",true]' ]
	state=$(jq -r .build.state <<<"${lines[0]}")
	grep -q -- '-scale_op(x\[i\])' "run/variants/$state/kernel.cu"
}

@test "build.ptx_profile counts vector widths, shared memory, async copies, barriers, loops, atomics" {
	new_run run
	run_tool 0 kg-build < <(jq -cn --rawfile s run/profile.cu '{run: "run", candidate: {id: "p", source: $s}}')
	assert_stderr_empty
	[ "$(jq -c '.build.ptx_profile | [.global_loads.v4, .global_stores.v4, .shared_stores.v4, .shared_loads.v4,
		.shared_loads.scalar, .cp_async, .barriers, .loops >= 1, .atomics, .shuffles, .fma >= 1, .mma, .wgmma]' <<<"$output")" = \
		'[1,1,1,1,1,1,1,true,1,1,true,0,0]' ]
}

@test "a kernel that does not compile is compile_failed with the compiler's message, and is not compiled twice" {
	new_run run
	base=$(build_baseline run)
	diff='@@ -10,1 +10,1 @@
-			y[i] = scale_op(x[i]);
+			y[i] = scale_op(x[i]) + undefined_thing;'
	run_tool 0 kg-build < <(patch_record run "$base" bad "$diff")
	assert_stderr_empty
	[ "$(jq -r .build.status <<<"$output")" = compile_failed ]
	jq -r .build.error <<<"$output" | grep -q '^NVRTC_ERROR_COMPILATION$'
	jq -r .build.error <<<"$output" | grep -q 'identifier "undefined_thing" is undefined'
	state=$(jq -r .build.state <<<"$output")
	grep -q 'undefined_thing' "run/variants/$state/build.log"
	[ ! -e "run/variants/$state/kernel.cubin" ]
	run_tool 0 kg-build < <(patch_record run "$base" bad-again "$diff")
	[ "$(jq -c '.build | [.status, .state == "'"$state"'", .reused]' <<<"$output")" = '["compile_failed",true,true]' ]
}

@test "too much static shared memory: the error is ptxas's own line, not its resource report" {
	new_run run
	src=$(sed 's/^\tint i = /\t__shared__ char s[0x11490];\n\ts[threadIdx.x] = 1;\n\ty[threadIdx.x] = s[threadIdx.x ^ 1];\n&/' run/scale.cu)
	run_tool 0 kg-build < <(jq -cn --arg s "$src" '{run: "run", candidate: {id: "smem", source: $s}}')
	assert_stderr_empty
	[ "$(jq -c '.build | [.status, .error]' <<<"$output")" = \
		"[\"compile_failed\",\"NVRTC_ERROR_COMPILATION\\nptxas error   : Entry function 'scale' uses too much shared data (0x11490 bytes, 0xc000 max)\"]" ]
	# the log keeps both compiles: the report, then the error
	log="run/$(jq -r .build.log <<<"$output")"
	grep -q '^ptxas info    : Used .* 70800 bytes smem' "$log"
	grep -q "^ptxas error   : Entry function 'scale' uses too much shared data" "$log"
}

@test "invalid configurations name the parameter, the Default or the condition" {
	new_run run
	base=$(build_baseline run)
	{
		record run "$base" '{"id":"v","config":{"items_per_thread":3}}'
		record run "$base" '{"id":"c","config":{"block_size_x":256,"items_per_thread":4}}'
		record run "$base" '{"id":"u","config":{"tile":2}}'
		record run "$base" '{"id":"t","config":{"block_size_x":"128"}}'
	} >input.jsonl
	run_tool 0 kg-build input.jsonl
	assert_stderr_empty
	[ "$(jq -r .build.status <<<"$output" | sort -u)" = invalid_config ]
	[ "$(jq -r .build.error <<<"${lines[0]}")" = 'items_per_thread=3 (from the candidate) is not one of the Values of ConfigurationSpace.TuningParameters[1]' ]
	[ "$(jq -r .build.error <<<"${lines[1]}")" = 'ConfigurationSpace.Conditions[0].Expression does not hold: "block_size_x * items_per_thread <= 512" (with block_size_x=256, items_per_thread=4)' ]
	[ "$(jq -c .build.config <<<"${lines[1]}")" = '{"block_size_x":256,"items_per_thread":4,"use_fma":false}' ]
	[ "$(jq -r .build.error <<<"${lines[2]}")" = "'tile' is not a tuning parameter of this kernel (its parameters: block_size_x items_per_thread use_fma)" ]
	[ "$(jq -r .build.error <<<"${lines[3]}")" = 'block_size_x="128" (from the candidate) is not one of the Values of ConfigurationSpace.TuningParameters[0]' ]
	[ "$(ls run/variants)" = "$base" ]

	new_run bad-default '.ConfigurationSpace.TuningParameters[1].Default = 3'
	run_tool 0 kg-build < <(record bad-default "" '{"id":"baseline"}')
	[ "$(jq -r .build.error <<<"$output")" = 'ConfigurationSpace.TuningParameters[1].Default: items_per_thread=3 is not one of its Values' ]
	# every bad Default is named, not only the first
	new_run bad-defaults '.ConfigurationSpace.TuningParameters[0].Default = 100 | .ConfigurationSpace.TuningParameters[1].Default = 3
		| .ConfigurationSpace.TuningParameters[2].Default = "yes"'
	run_tool 0 kg-build < <(record bad-defaults "" '{"id":"baseline"}')
	[ "$(jq -r .build.error <<<"$output")" = 'ConfigurationSpace.TuningParameters[0].Default: block_size_x=100 is not one of its Values; ConfigurationSpace.TuningParameters[1].Default: items_per_thread=3 is not one of its Values; ConfigurationSpace.TuningParameters[2].Default: use_fma="yes" is not one of its Values' ]

	new_run big-block '.KernelSpecification.LocalSize = {"X": "block_size_x", "Y": "16"}'
	run_tool 0 kg-build < <(record big-block "" '{"id":"baseline","config":{"block_size_x":256}}')
	[ "$(jq -r .build.error <<<"$output")" = 'LocalSize gives 4096 threads per block (256 x 16 x 1); CUDA allows at most 1024' ]

	# a list is described, not written out: its items may be one list shared 10**6 times
	new_run list-grid '.KernelSpecification.GlobalSize.X = "[[0]*10**6]*10**6"'
	run_tool 0 kg-build < <(record list-grid "" '{"id":"baseline"}')
	[ "$(jq -r .build.error <<<"$output")" = 'KernelSpecification.GlobalSize.X: "[[0]*10**6]*10**6" gives a list of 1000000 items, not a positive integer below 2**31' ]

	new_run zero-grid '.KernelSpecification.GlobalSize.X = "ProblemSize[0] // 1000000"'
	run_tool 0 kg-build < <(record zero-grid "" '{"id":"baseline"}')
	[ "$(jq -r .build.error <<<"$output")" = 'KernelSpecification.GlobalSize.X: "ProblemSize[0] // 1000000" gives 0, not a positive integer below 2**31 (with ProblemSize=[65536])' ]
}

@test "launch geometry: GlobalSizeType OpenCL counts threads, rounded up to whole blocks" {
	new_run run '.KernelSpecification.GlobalSizeType = "OpenCL" | .KernelSpecification.GlobalSize = {"X": "ProblemSize[0] + 1", "Y": "3"} |
		.KernelSpecification.LocalSize = {"X": "block_size_x", "Y": "2"}'
	run_tool 0 kg-build < <(record run "" '{"id":"baseline"}')
	[ "$(jq -c '.build | [.grid, .block]' <<<"$output")" = '[[513,2,1],[128,2,1]]' ]
}

@test "KernelGraph.SharedMemory gives each configuration its dynamic shared memory, part of its state" {
	new_run run '.KernelGraph.SharedMemory = "block_size_x * 8"'
	run_tool 0 kg-build < <(record run "" '{"id":"baseline"}'; record run "" '{"id":"c1","config":{"block_size_x":64}}')
	[ "$(jq -c '[.build.config.block_size_x, .build.shared_bytes]' <<<"$output" | paste -sd' ')" = '[128,1024] [64,512]' ]
	[ "$(jq -r .shared_bytes run/variants/*/build.json | sort -n | paste -sd' ')" = '512 1024' ]
	# without it no shared_bytes is written, and the state is the one it always was
	new_run plain
	new_run zero '.KernelGraph.SharedMemory = 0'
	run_tool 0 kg-build < <(record plain "" '{"id":"baseline"}'; record zero "" '{"id":"baseline"}')
	[ "$(jq -c '.build.shared_bytes' <<<"$output" | sort -u)" = null ]
	[ "$(jq -r '.build.state' <<<"$output" | sort -u | wc -l)" -eq 1 ]
	new_run bad '.KernelGraph.SharedMemory = "block_size_x - 1000"'
	run_tool 0 kg-build < <(record bad "" '{"id":"baseline"}')
	[ "$(jq -r .build.status <<<"$output")" = invalid_config ]
	[[ "$(jq -r .build.error <<<"$output")" == 'KernelGraph.SharedMemory: "block_size_x - 1000" gives -872, not a non-negative integer below 2**31'* ]]
}

@test "a kernel without extern \"C\" is found through its lowered name" {
	new_run run '.KernelSpecification.KernelFile = "scale_cpp.cu"'
	run_tool 0 kg-build < <(record run "" '{"id":"baseline"}')
	assert_stderr_empty
	[ "$(jq -c '.build | [.status, .function]' <<<"$output")" = '["ok","_Z5scalePfPKfi"]' ]
	[ "$(jq '.build.registers > 0' <<<"$output")" = true ]
}

@test "kernels can include CUB: the toolkit's CCCL headers are on the include path" {
	new_run run
	run_tool 0 kg-build < <(jq -cn --rawfile s run/cub_reduce.cu '{run: "run", candidate: {id: "cub", source: $s}}')
	assert_stderr_empty
	[ "$(jq -r .build.status <<<"$output")" = ok ]
}

@test "two candidates that reach the same source and configuration share one state" {
	new_run run
	base=$(build_baseline run)
	# A config change, and a whitespace-only diff with the same config change.
	ws=$'@@ -6,1 +6,1 @@\n-{\n+{   \t'
	{
		record run "$base" '{"id":"knob","config":{"block_size_x":64}}'
		jq -cn --arg b "$base" --arg p "$ws" '{run: "run", node: $b, candidate: {id: "ws", patch: $p, config: {block_size_x: 64}}}'
	} >input.jsonl
	run_tool 0 kg-build -j 2 input.jsonl
	assert_stderr_empty
	[ "$(jq -c '[.candidate.id, .build.status, .build.reused]' <<<"$output" | tr -d '\n')" = \
		'["knob","ok",false]["ws","ok",true]' ]
	[ "$(jq -r .build.state <<<"${lines[0]}")" = "$(jq -r .build.state <<<"${lines[1]}")" ]
	[ "$(ls run/variants | wc -l)" -eq 2 ]
	# Built again from its own variant, the first is reused from the run.
	run_tool 0 kg-build < <(record run "$base" '{"id":"knob2","config":{"block_size_x":64}}')
	[ "$(jq -c '.build | [.reused, .cached]' <<<"$output")" = '[true,false]' ]
}

@test "headers beside the kernel are part of the state" {
	new_run a
	new_run b
	echo '// changed' >>b/scale_helper.cuh
	[ "$(build_baseline a)" != "$(build_baseline b)" ]
}

@test "the compile cache serves another run without compiling; --no-cache bypasses it" {
	new_run first
	record first "" '{"id":"baseline"}' | kg-build >first.jsonl
	new_run second
	run_tool 0 kg-build < <(record second "" '{"id":"baseline"}')
	assert_stderr_empty
	[ "$(jq -c '.build | [.status, .cached, .reused]' <<<"$output")" = '["ok",true,false]' ]
	[ "$(jq .build.compile_ms <<<"$output")" = "$(jq .build.compile_ms first.jsonl)" ]
	state=$(jq -r .build.state <<<"$output")
	cmp "second/variants/$state/kernel.cubin" "first/variants/$state/kernel.cubin"
	ls cache/kernelgraph/nvrtc | grep -Eq '^[0-9a-f]{64}$'
	new_run third
	run_tool 0 kg-build --no-cache < <(record third "" '{"id":"baseline"}')
	[ "$(jq .build.cached <<<"$output")" = false ]
	new_run fourth
	run_tool 0 kg-build --cache-dir "$BATS_TEST_TMPDIR/other" < <(record fourth "" '{"id":"baseline"}')
	[ "$(jq .build.cached <<<"$output")" = false ]
	[ "$(ls other/nvrtc)" = "$(ls cache/kernelgraph/nvrtc)" ]
}

@test "-j 4 writes the records in input order, passing others through unchanged" {
	new_run run
	{
		for b in 64 128 256; do
			for t in 1 2; do
				record run "" "{\"id\":\"b$b-t$t\",\"config\":{\"block_size_x\":$b,\"items_per_thread\":$t}}"
			done
			echo '{"op":"note","text":"passes through","x":[1,2.5,null]}'
		done
	} >input.jsonl
	run_tool 0 kg-build -j 4 input.jsonl
	assert_stderr_empty
	[ "${#lines[@]}" -eq 9 ]
	[ "$(jq -r '.candidate.id // .op' <<<"$output" | tr '\n' ' ')" = 'b64-t1 b64-t2 note b128-t1 b128-t2 note b256-t1 b256-t2 note ' ]
	[ "${lines[2]}" = '{"op":"note","text":"passes through","x":[1,2.5,null]}' ]
	[ "$(jq -r '.build.status // empty' <<<"$output" | sort -u)" = ok ]
}

@test "--as-ready writes a record as soon as it is built: what needs no compile passes the compiles before it" {
	new_run run
	{
		record run "" '{"id":"compiles","config":{"block_size_x":64,"items_per_thread":1}}'
		record run "" '{"id":"invalid","config":{"block_size_x":3}}'
		echo '{"op":"note"}'
		record run "" '{"id":"compiles-too","config":{"block_size_x":128,"items_per_thread":1}}'
	} >input.jsonl
	run_tool 0 kg-build -j 2 --as-ready input.jsonl
	assert_stderr_empty
	[ "$(jq -r '.candidate.id // .op' <<<"$output" | tr '\n' ' ')" = 'invalid note compiles compiles-too ' ] ||
		[ "$(jq -r '.candidate.id // .op' <<<"$output" | tr '\n' ' ')" = 'invalid note compiles-too compiles ' ]
	[ "$(jq -r 'select(.candidate.id == "invalid") | .build.status' <<<"$output")" = invalid_config ]
	# without it, input order
	run_tool 0 kg-build -j 2 input.jsonl
	[ "$(jq -r '.candidate.id // .op' <<<"$output" | tr '\n' ' ')" = 'compiles invalid note compiles-too ' ]
}

@test "records that cannot be handled are reported with their line and passed on, a line that is not JSON dropped; exit 1" {
	new_run run
	mkdir empty-run
	{
		echo '{"candidate":{"id":"no-run"}}'
		echo 'not json'
		record run "0123" '{"id":"short-node"}'
		record run "$(printf 'a%.0s' {1..64})" '{"id":"missing-node"}'
		echo '{"run":"run","candidate":{"patch":42}}'
		echo '{"run":"run","candidate":{"config":[1]}}'
		echo '{"run":"empty-run","candidate":{}}'
		echo '{"run":"run","candidate":"x"}'
		echo '{"run":7,"candidate":{}}'
		echo '{"run":"run","node":1,"candidate":{}}'
		echo '{"run":"run","candidate":{"source":["x"]}}'
		record run "" '{"id":"fine"}'
	} >input.jsonl
	run_tool 1 kg-build input.jsonl
	assert_stderr "$(printf '%s\n' \
		'kg-build: input.jsonl:1: run: missing (give the record a "run" or kg-build --run DIR)' \
		'kg-build: input.jsonl:2: invalid JSON at column 1' \
		"kg-build: input.jsonl:3: node: '0123' is not a state hash (64 hex digits)" \
		"kg-build: input.jsonl:4: node: $(printf 'a%.0s' {1..64}) has no built variant in run/variants (kernel.cu is missing)" \
		'kg-build: input.jsonl:5: candidate.patch: must be a string (a unified diff) or null' \
		'kg-build: input.jsonl:6: candidate.config: must be an object of tuning parameters' \
		"kg-build: cannot read 'empty-run/spec.json': No such file or directory" \
		"kg-build: input.jsonl:7: run 'empty-run' has no usable spec.json (see above)" \
		'kg-build: input.jsonl:8: candidate: must be an object' \
		'kg-build: input.jsonl:9: run: must be a string (a run directory)' \
		'kg-build: input.jsonl:10: node: must be a string (a state hash) or null' \
		'kg-build: input.jsonl:11: candidate.source: must be a string (a whole kernel file) or null')"
	[ "${#lines[@]}" -eq 11 ]
	[ "${lines[0]}" = '{"candidate":{"id":"no-run"}}' ]
	refute_line 'not json' # no record: passing it on would break the next tool's input
	[ "$(jq -r '.build.status // "none"' <<<"$output" | tr '\n' ' ')" = 'none none none none none none none none none none ok ' ]
	# --run supplies the run of records that have none.
	run_tool 0 kg-build --run run < <(echo '{"candidate":{"id":"no-run"}}')
	[ "$(jq -r .build.status <<<"$output")" = ok ]
}

@test "the architecture comes from --arch, then the spec, and must be one NVRTC supports" {
	new_run run '.KernelGraph = {"Arch": "sm_80"}'
	run_tool 0 kg-build < <(record run "" '{"id":"b"}')
	[ "$(jq -r .build.arch <<<"$output")" = sm_80 ]
	run_tool 0 kg-build --arch sm_90a < <(record run "" '{"id":"b"}')
	[ "$(jq -r .build.arch <<<"$output")" = sm_90a ]
	new_run opt '.KernelSpecification.CompilerOptions = ["-std=c++17", "--gpu-architecture", "compute_86"]'
	run_tool 0 kg-build < <(record opt "" '{"id":"b"}')
	[ "$(jq -c '.build | [.arch, .options[0:2]]' <<<"$output")" = '["sm_86",["-std=c++17","-Dblock_size_x=128"]]' ]
	new_run old '.KernelGraph = {"Arch": "sm_35"}'
	run_tool 1 kg-build < <(record old "" '{"id":"b"}')
	[[ "$stderr" == "kg-build: <stdin>:1: KernelGraph.Arch: sm_35 is not supported by NVRTC "*" (it supports "*" 90 "* ]]
	new_run junk '.KernelGraph = {"Arch": "hopper"}'
	run_tool 1 kg-build < <(record junk "" '{"id":"b"}')
	assert_stderr "kg-build: <stdin>:1: junk/spec.json: KernelGraph.Arch: 'hopper' is not an architecture like sm_90 or sm_90a"
}

@test "a compile past --timeout is compile_failed and kept neither in the run nor the cache" {
	new_run run
	run_tool 0 kg-build --timeout 0.001 < <(record run "" '{"id":"slow"}')
	[ "$(jq -c '.build | [.status, .error, has("dir")]' <<<"$output")" = \
		'["compile_failed","the compiler ran past the time limit and was killed",false]' ]
	[ -z "$(ls run/variants)" ]
	[ ! -d cache/kernelgraph/nvrtc ] || [ -z "$(ls cache/kernelgraph/nvrtc)" ]
	run_tool 0 kg-build < <(record run "" '{"id":"slow"}')
	[ "$(jq -r .build.status <<<"$output")" = ok ]
}

@test "NVRTC's builtins are opened from beside NVRTC, outside the loader's path; NVRTC's own failure is neither kept nor cached" {
	# A fresh Debian root has the toolkit only in CUDA_HOME: no ld.so.conf.d line finds its
	# libraries. Here the loader's cache is hidden (a mount namespace), and NVRTC is a link
	# in a folder of the test's, with and then without its builtins beside it.
	[ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null || skip "needs root and unshare -m"
	lib=${CUDA_HOME:-/usr/local/cuda}/lib64
	mkdir nvrtc
	ln -s "$(ls "$lib"/libnvrtc.so.[0-9]* | head -n 1)" nvrtc/
	export KG_NVRTC_LIBRARY=$(ls "$PWD"/nvrtc/libnvrtc.so.*)
	hidden='mount --bind /dev/null /etc/ld.so.cache && exec kg-build "$@"'
	new_run run
	run_tool 0 unshare -m sh -c "$hidden" sh < <(record run "" '{"id":"baseline"}')
	[ "$(jq -c '.build | [.status, has("dir")]' <<<"$output")" = '["compile_failed",false]' ]
	jq -r .build.error <<<"$output" | grep -q '^NVRTC_ERROR_BUILTIN_OPERATION_FAILURE$'
	[ -z "$(ls run/variants)" ]
	[ ! -d cache/kernelgraph/nvrtc ] || [ -z "$(ls cache/kernelgraph/nvrtc)" ]
	ln -s "$(ls "$lib"/libnvrtc-builtins.so.[0-9]*.[0-9]* | head -n 1)" nvrtc/
	run_tool 0 unshare -m sh -c "$hidden" sh < <(record run "" '{"id":"baseline"}')
	[ "$(jq -c '.build | [.status, .cached]' <<<"$output")" = '["ok",false]' ]
}

@test "--no-compile: the state a compiled build gets, the variant's kernel.cu and build.json, no cubin, no NVRTC" {
	new_run a '.KernelGraph.SharedMemory = "block_size_x * 8"'
	new_run b '.KernelGraph.SharedMemory = "block_size_x * 8"'
	# steps RUN CMD...: the baseline, a knob change and a diff, built by CMD
	steps() {
		local run=$1 base
		shift
		record "$run" "" '{"id":"baseline"}' | "$@" >"$run.base"
		base=$(jq -r .build.state "$run.base")
		{ record "$run" "$base" '{"id":"c1","config":{"items_per_thread":4}}'; patch_record "$run" "$base" p1 "$GOOD_DIFF"; } |
			"$@" >"$run.children"
		cat "$run.base" "$run.children"
	}
	compiled=$(steps a kg-build)
	# no NVRTC is needed, and none is loaded; nor is the compile cache used
	output=$(steps b env KG_NVRTC_LIBRARY=/nonexistent/libnvrtc.so XDG_CACHE_HOME="$PWD/nc-cache" kg-build --no-compile 2>err)
	[ ! -s err ]
	[ ! -e nc-cache ]
	[ "$(jq -r .build.state <<<"$output")" = "$(jq -r .build.state <<<"$compiled")" ]
	[ "$(jq -r .build.state <<<"$output" | sort -u | wc -l)" -eq 3 ]
	[ "$(jq -c '.build | [.status, .compiled, .materialized, .edited, .shared_bytes]' <<<"$output" | paste -sd' ')" = \
		'["ok",false,"parent",false,1024] ["ok",false,"parent",false,1024] ["ok",false,"patch",true,1024]' ]
	# what the state is made of is the same; what NVRTC makes is not there
	common='[.state, .dir, .arch, .config, .grid, .block, .shared_bytes, .options, .kernel_file, .baseline, .edited]'
	[ "$(jq -c ".build | $common" <<<"$output")" = "$(jq -c ".build | $common" <<<"$compiled")" ]
	[ "$(jq -sc 'map(.build | .cubin, .ptx, .log, .nvrtc, .function, .registers, .compile_ms, .cached, .ptx_profile, .regions) | unique' <<<"$output")" = '[null]' ]
	for state in $(jq -r .build.state <<<"$output"); do
		[ "$(ls "b/variants/$state" | paste -sd' ')" = "$(ls "a/variants/$state" | grep -x -e build.json -e kernel.cu -e candidate.diff | paste -sd' ')" ]
		cmp "a/variants/$state/kernel.cu" "b/variants/$state/kernel.cu"
		[ "$(jq -c .compiled "b/variants/$state/build.json")" = false ]
	done
	# --compile undoes an earlier --no-compile
	new_run c
	run_tool 0 kg-build --no-compile --compile < <(record c "" '{"id":"baseline"}')
	[ -s "c/variants/$(jq -r .build.state <<<"$output")/kernel.cubin" ]
	[ "$(jq -c .build.compiled <<<"$output")" = null ]
}

@test "a compiled build takes the place of a variant --no-compile made; --no-compile reuses a compiled one" {
	new_run run
	run_tool 0 kg-build --no-compile < <(record run "" '{"id":"baseline"}')
	state=$(jq -r .build.state <<<"$output")
	[ ! -e "run/variants/$state/kernel.cubin" ]
	run_tool 0 kg-build < <(record run "" '{"id":"baseline"}')
	[ "$(jq -c '.build | [.state, .status, .compiled, .reused, .cubin]' <<<"$output")" = \
		"[\"$state\",\"ok\",null,false,\"variants/$state/kernel.cubin\"]" ]
	[ -s "run/variants/$state/kernel.cubin" ]
	[ "$(jq -c .compiled "run/variants/$state/build.json")" = null ]
	[ "$(ls -A run/variants)" = "$state" ] # nothing left aside
	run_tool 0 kg-build --no-compile < <(record run "" '{"id":"baseline"}')
	[ "$(jq -c '.build | [.status, .compiled, .reused, .cubin]' <<<"$output")" = "[\"ok\",null,true,\"variants/$state/kernel.cubin\"]" ]
}

@test "build.edited: a code edit, and every variant below one, differs from the spec's kernel; the kernel given whole does not" {
	new_run run
	base=$(record run "" '{"id":"baseline"}' | kg-build --no-compile | jq -r .build.state)
	patched=$(patch_record run "$base" p1 "$GOOD_DIFF" | kg-build --no-compile | jq -r .build.state)
	crlf=$(sed 's/$/\r/' run/scale.cu)
	run_tool 0 kg-build --no-compile < <(
		record run "$base" '{"id":"knob","config":{"items_per_thread":2}}'
		record run "$patched" '{"id":"below","config":{"items_per_thread":2}}'
		jq -cn --arg s "$crlf" '{run: "run", candidate: {id: "whole", source: $s}}'
		jq -cn --arg s "$crlf// a comment" '{run: "run", candidate: {id: "commented", source: $s}}')
	[ "$(jq -c '.build | [.materialized, .edited]' <<<"$output" | paste -sd' ')" = \
		'["parent",false] ["parent",true] ["source",false] ["source",true]' ]
	# the kernel given whole, CRLF and all, is the baseline's state
	[ "$(jq -r 'select(.candidate.id == "whole") | .build.state' <<<"$output")" = "$base" ]
}

@test "temporary directories of killed builds are removed" {
	new_run run
	mkdir -p run/variants/.tmp-999999-abcdef
	build_baseline run >/dev/null
	[ ! -e run/variants/.tmp-999999-abcdef ]
}

@test "usage errors exit 2; missing NVRTC exits 3" {
	run_tool 2 kg-build --jobs 0
	assert_stderr "$(printf '%s\n' "kg-build: --jobs: '0': must be at least 1" "Try 'kg-build --help' for more information.")"
	run_tool 2 kg-build --arch hopper
	assert_stderr "$(printf '%s\n' "kg-build: --arch: 'hopper' is not an architecture like sm_90 or sm_90a" "Try 'kg-build --help' for more information.")"
	run_tool 2 kg-build a b
	assert_stderr "$(printf '%s\n' "kg-build: unexpected argument 'b'" "Try 'kg-build --help' for more information.")"
	run_tool 2 kg-build no-such-file.jsonl
	assert_stderr "kg-build: cannot open 'no-such-file.jsonl': No such file or directory"
	# NVRTC is loaded for the first record that needs a compile: none, no NVRTC needed
	KG_NVRTC_LIBRARY=/nonexistent/libnvrtc.so run_tool 0 kg-build </dev/null
	assert_stderr_empty
	new_run run
	record run "" '{"id":"baseline"}' >input.jsonl
	KG_NVRTC_LIBRARY=/nonexistent/libnvrtc.so run_tool 3 kg-build input.jsonl
	assert_stderr "$(printf '%s\n' "kg-build: cannot load NVRTC (install the CUDA toolkit, set CUDA_HOME or KG_NVRTC_LIBRARY): /nonexistent/libnvrtc.so: cannot open shared object file: No such file or directory (KG_NVRTC_LIBRARY)" \
		"kg-build: input.jsonl:1: NVRTC cannot be loaded (said above): nothing of this run can be compiled")"
	assert_output "$(cat input.jsonl)"
}

@test "a run made on a table (RUN/replay.table) is built without compiling, with no option and no NVRTC; --compile compiles it" {
	new_run run
	cp "$FIXTURES/bench/replay_t4.json" run/replay.table
	record run "" '{"id":"baseline"}' >input.jsonl
	KG_NVRTC_LIBRARY=/nonexistent/libnvrtc.so run_tool 0 kg-build input.jsonl
	assert_stderr_empty
	[ "$(jq -c '.build | [.status, .compiled]' <<<"$output")" = '["ok",false]' ]
	state=$(jq -r .build.state <<<"$output")
	[ ! -e "run/variants/$state/kernel.cubin" ]
	# the same state as a compiled build's, which --compile makes
	run_tool 0 kg-build --compile input.jsonl
	[ "$(jq -c '.build | [.status, .state, has("compiled")]' <<<"$output")" = "[\"ok\",\"$state\",false]" ]
	[ -s "run/variants/$state/kernel.cubin" ]
}

# t4_on DEVICE: the replay fixture as a T4 table measured on DEVICE ("" for none).
t4_on() {
	jq --arg d "$1" 'if $d == "" then . else .metadata.hardware = {hardware_description: $d} end' \
		"$FIXTURES/bench/replay_t4.json"
}

@test "a run is built for what its baseline was built for (no driver asked), else for --device's GPU; --device is checked" {
	new_run run
	record run "" '{"id":"baseline"}' >input.jsonl
	run_tool 0 kg-build -v input.jsonl
	assert_stderr "kg-build: run: building for sm_90 (the default; no GPU found)"
	# kg-bench keeps the baseline's build in baseline.json; what it names is every variant's
	jq -n '{build: {arch: "sm_80", status: "ok"}, median_ms: 1}' >run/baseline.json
	run_tool 0 kg-build -v --device 3 input.jsonl
	assert_stderr "kg-build: run: building for sm_80 (the run's baseline)"
	[ "$(jq -r .build.arch <<<"$output")" = sm_80 ]
	# one kg-build cannot use is left aside, as if there were none
	jq -n '{build: {arch: "gfx90a"}, median_ms: 1}' >run/baseline.json
	run_tool 0 kg-build -v input.jsonl
	assert_stderr "kg-build: run: building for sm_90 (the default; no GPU found)"
	run_tool 2 kg-build --device -1 input.jsonl
	assert_stderr "$(printf '%s\n' "kg-build: --device: '-1': out of range" "Try 'kg-build --help' for more information.")"
}

@test "with a GPU, a run without a baseline is built for it; a replayed run never asks the driver" {
	# the driver is a fake one: a GPU of compute capability 8.6, its cuInit calls logged
	cc -shared -fPIC -o libcuda.so.1 "$FIXTURES/build/fake_libcuda.c"
	export LD_LIBRARY_PATH="$PWD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKE_CUDA_LOG=$PWD/cuda.log
	new_run run
	record run "" '{"id":"baseline"}' >input.jsonl
	run_tool 0 kg-build -v --no-compile input.jsonl
	assert_stderr "kg-build: run: building for sm_86 (the GPU)"
	[ "$(cat cuda.log)" = "cuInit 0 CUDA_VISIBLE_DEVICES=0" ] # the GPU alone: a quicker cuInit
	# on a host of several GPUs cuInit costs each build seconds; a replay's builds pay none
	rm cuda.log
	t4_on 'Imaginary GPU 9000' >run/replay.table
	run_tool 0 kg-build -v input.jsonl
	assert_stderr "$(printf '%s\n' "kg-build: run: the run's replay.table was measured on 'Imaginary GPU 9000', a GPU kg-build does not know: building for sm_90 (the default; a replayed run does not ask the GPU; --arch or KernelGraph.Arch to choose)" \
		"kg-build: run: building for sm_90 (the default; a replayed run does not ask the GPU)")"
	[ ! -e cuda.log ]
}

@test "a replayed run is built as its table's variants were, else for the GPU it was measured on, unless --arch or the spec say otherwise" {
	new_run run
	record run "" '{"id":"baseline"}' >input.jsonl
	for pair in 'NVIDIA H100 80GB HBM3=sm_90a' 'NVIDIA A100-SXM4-80GB=sm_80' 'Tesla T4=sm_75' 'NVIDIA A10G=sm_86' \
		'NVIDIA RTX A6000=sm_86' 'NVIDIA L4=sm_89' 'NVIDIA GeForce RTX 4090=sm_89' 'NVIDIA B200=sm_100'; do
		t4_on "${pair%=*}" >run/replay.table
		run_tool 0 kg-build -v input.jsonl
		assert_stderr "kg-build: run: building for ${pair#*=} (the GPU of the run's replay.table)"
		[ "$(jq -c '.build | [.status, .arch, .compiled, (.arch as $a | .options | index("--gpu-architecture=" + $a) != null)]' <<<"$output")" = \
			"[\"ok\",\"${pair#*=}\",false,true]" ]
	done
	# what the table's variants were built for comes first (their states hash it): an
	# events.jsonl's build.arch, the "arch" kg-bench --t4 writes; else the device it names
	t4_on 'NVIDIA A100-SXM4-80GB' >run/replay.table
	run_tool 0 kg-build input.jsonl
	jq -c '. + {bench: {status: "ok", median_ms: 1, device: "Tesla T4"}}' <<<"$output" >events.jsonl
	cp events.jsonl run/replay.table
	run_tool 0 kg-build -v input.jsonl
	assert_stderr "kg-build: run: building for sm_80 (the run's replay.table, as its variants were built)"
	jq -c 'del(.build.arch)' events.jsonl >run/replay.table
	run_tool 0 kg-build -v input.jsonl
	assert_stderr "kg-build: run: building for sm_75 (the GPU of the run's replay.table)"
	run_tool 0 kg-bench --t4 events.jsonl
	jq '.results[0].measurements | map(select(.name == "arch"))' <<<"$output" | jq -ce '. == [{"name": "arch", "value": "sm_80", "unit": ""}]'
	cp <(echo "$output") run/replay.table
	run_tool 0 kg-build -v input.jsonl
	assert_stderr "kg-build: run: building for sm_80 (the run's replay.table, as its variants were built)"
	# --arch, then the spec, win over the table
	t4_on 'NVIDIA A100-SXM4-80GB' >run/replay.table
	run_tool 0 kg-build -v --arch sm_90 input.jsonl
	assert_stderr "kg-build: run: building for sm_90 (--arch)"
	[ "$(jq -r .build.arch <<<"$output")" = sm_90 ]
	jq '.KernelGraph = {"Arch": "sm_90a"}' "$FIXTURES/build/spec.json" >run/spec.json
	run_tool 0 kg-build -v input.jsonl
	assert_stderr "kg-build: run: building for sm_90a (KernelGraph.Arch)"
	# a table of an unknown GPU, or of none, leaves the default: a replay never asks the GPU
	cp "$FIXTURES/build/spec.json" run/spec.json
	t4_on 'Imaginary GPU 9000' >run/replay.table
	run_tool 0 kg-build -v input.jsonl
	assert_stderr "$(printf '%s\n' "kg-build: run: the run's replay.table was measured on 'Imaginary GPU 9000', a GPU kg-build does not know: building for sm_90 (the default; a replayed run does not ask the GPU; --arch or KernelGraph.Arch to choose)" \
		"kg-build: run: building for sm_90 (the default; a replayed run does not ask the GPU)")"
	t4_on '' >run/replay.table
	run_tool 0 kg-build -v input.jsonl
	assert_stderr "$(printf '%s\n' "kg-build: run: the run's replay.table names no GPU: building for sm_90 (the default; a replayed run does not ask the GPU; --arch or KernelGraph.Arch to choose)" \
		"kg-build: run: building for sm_90 (the default; a replayed run does not ask the GPU)")"
	[ "$(jq -r .build.arch <<<"$output")" = sm_90 ]
	# a table that cannot be read builds nothing of the run
	echo '{"results": 1}' >run/replay.table
	run_tool 1 kg-build input.jsonl
	assert_stderr "$(printf '%s\n' "kg-build: run/replay.table: results: missing (not a T4 file)" \
		"kg-build: input.jsonl:1: run/replay.table: the run's replay table cannot be read (see above)")"
	[ "$(jq -c '.build' <<<"$output")" = null ]
}

# build_source RUN FIXTURE: builds the fixture kernel as a full-source candidate; the record
# in $output.
build_source() {
	run_tool 0 kg-build < <(jq -cn --arg run "$1" --rawfile s "$1/$2" '{run: $run, candidate: {id: "r", source: $s}}')
	assert_stderr_empty
}

# regions_of: the variant's regions.json, named by the build record in $output.
regions_of() {
	jq . "run/$(jq -r .build.regions.file <<<"$output")"
}

@test "build.regions: a loop with a barrier is two regions in the loop and one back edge, kept in regions.json" {
	new_run run
	build_source run regions_loop.cu
	state=$(jq -r .build.state <<<"$output")
	[ "$(jq -r .build.regions.file <<<"$output")" = "variants/$state/regions.json" ]
	[ "$(jq -c '.build.regions | [.regions, .stages, .loops, .barriers, .async_waits]' <<<"$output")" = '[4,2,1,1,0]' ]
	graph=$(regions_of)
	[ "$(jq -c '.loops | map(.regions)' <<<"$graph")" = '[[1,2]]' ]
	[ "$(jq -c '.edges | map(select(.kind == "loop_back") | [.from, .to])' <<<"$graph")" = '[[2,1]]' ]
	[ "$(jq -c '[.edges[] | select(.kind == "next") | .to - .from] | unique' <<<"$graph")" = '[1]' ]
	# up to the barrier: the global load and the shared store (line 12); after it the shared
	# load and the fma (line 14), then the branch back
	[ "$(jq -c '.regions[] | [.end, .loop_depth, .global_load_bytes, .shared_store_bytes, .shared_load_bytes,
		.flops, .barriers]' <<<"$graph" | paste -sd' ')" = \
		'["loop_start",0,0,0,0,0,0] ["barrier",1,4,4,0,0,1] ["loop_back",1,0,0,4,2,0] ["end",0,0,0,0,0,0]' ]
	jq -e '.regions[1].lines | any(.[0] <= 12 and 12 <= .[1])' <<<"$graph"
	jq -e '.regions[2].lines | any(.[0] <= 14 and 14 <= .[1])' <<<"$graph"
	[ "$(jq -c '.build.regions.most_flops | [.region, .flops, .tensor_flops]' <<<"$output")" = '[2,2,0]' ]
	[ "$(jq -c '.build.regions.most_global_bytes | [.region, .global_load_bytes]' <<<"$output")" = '[1,4]' ]
	# build.json keeps the summary
	[ "$(jq -c .regions "run/variants/$state/build.json")" = "$(jq -c .build.regions <<<"$output")" ]
}

@test "build.regions: each wait for cp.async copies ends a stage" {
	new_run run
	build_source run regions_pipeline.cu
	[ "$(jq -c '.build.regions | [.regions, .stages, .loops, .barriers, .async_waits]' <<<"$output")" = '[3,3,0,0,2]' ]
	graph=$(regions_of)
	[ "$(jq -c '.regions[] | [.stage, .end, .cp_async, .cp_async_bytes, .shared_load_bytes, .global_store_bytes,
		.flops, .async_waits, .lines]' <<<"$graph" | paste -sd' ')" = \
		'[0,"async_wait",2,32,0,0,0,1,[[7,7],[10,15]]] [1,"async_wait",0,0,16,0,0,1,[[16,17]]] [2,"end",0,0,16,4,7,0,[[18,20]]]' ]
	[ "$(jq -c '.edges | map([.from, .to, .kind])' <<<"$graph")" = '[[0,1,"next"],[1,2,"next"]]' ]
}

@test "build.regions: a guarded store is a predicated branch" {
	new_run run
	build_source run regions_branch.cu
	graph=$(regions_of)
	[ "$(jq -c '[.regions[] | .predicated_branches] | add' <<<"$graph")" = 1 ]
	[ "$(jq -c '[.regions[] | [.global_load_bytes, .global_store_bytes]] | transpose | map(add)' <<<"$graph")" = '[4,4]' ]
	jq -e '[.regions[].lines[]] | any(.[0] <= 10 and 10 <= .[1])' <<<"$graph"
	# the same kernel storing from every thread has no branch
	sed -i 's/if (threadIdx.x % 2)//' run/regions_branch.cu
	build_source run regions_branch.cu
	[ "$(regions_of | jq -c '[.regions[] | .predicated_branches] | add')" = 0 ]
}

@test "ptx_regions splits hand-written PTX at syncs and loops and counts bytes and FLOPs exactly" {
	run_tool 0 "$LIBTEST" ptx-regions "$FIXTURES/build/regions.ptx" tiled
	assert_stderr_empty
	[ "$(jq -c '.entry' <<<"$output")" = '"tiled"' ]
	[ "$(jq -c '.regions[] | [.id, .stage, .loop_depth, .ptx_lines, .lines, .instructions, .global_load_bytes,
		.global_store_bytes, .shared_load_bytes, .shared_store_bytes, .cp_async, .cp_async_bytes, .bulk_copies,
		.bulk_copy_bytes, .flops, .tensor_flops, .barriers, .async_waits, .fences, .predicated_branches, .end]' \
		<<<"$output")" = "$(printf '%s\n' \
		'[0,0,0,[22,32],[[10,12]],9,24,0,0,0,2,20,0,0,3,0,0,1,0,0,"async_wait"]' \
		'[1,1,1,[35,37],[[14,14]],3,0,0,4,16,0,0,0,0,0,0,1,0,0,0,"barrier"]' \
		'[2,2,1,[39,44],[[15,15]],6,0,0,32,0,0,0,0,0,4,4096,0,0,0,1,"loop_back"]' \
		'[3,2,0,[46,51],[[18,18]],4,0,4,0,0,0,0,0,0,0,0,0,0,1,1,"fence"]' \
		'[4,3,0,[52,52],[[18,18]],1,0,0,0,0,0,0,1,1024,0,0,0,0,0,0,"loop_start"]' \
		'[5,3,1,[55,55],[[20,20]],1,0,0,0,0,0,0,0,0,0,0,0,1,0,0,"async_wait"]' \
		'[6,4,1,[56,56],[[20,20]],1,0,0,0,0,0,0,0,0,0,0,0,0,0,1,"loop_back"]' \
		'[7,4,0,[57,60],[[20,20]],4,0,36,0,0,0,0,0,0,0,65536,0,0,0,0,"end"]')" ]
	[ "$(jq -c '[.edges[] | select(.kind == "loop_back") | [.from, .to]], [.loops[] | [.header, .regions]]' \
		<<<"$output" | paste -sd' ')" = '[[2,1],[6,5]] [["$L__BB0_1",[1,2]],["$L__BB0_5",[5,6]]]' ]
	[ "$(jq -c '[.edges[] | select(.kind == "next")] | length' <<<"$output")" = 7 ]
	[ "$(jq -c .summary <<<"$output")" = '{"regions":8,"stages":5,"loops":2,"barriers":1,"async_waits":2,"most_global_bytes":{"region":7,"global_load_bytes":0,"global_store_bytes":36,"lines":[20,20]},"most_flops":{"region":7,"flops":0,"tensor_flops":65536,"lines":[20,20]}}' ]
	# without a name, the first entry; lines of another file named like the kernel are not its own
	run_tool 0 "$LIBTEST" ptx-regions "$FIXTURES/build/regions.ptx"
	[ "$(jq -c '[.entry, (.regions | map([.global_load_bytes, .lines]))]' <<<"$output")" = '["other",[[4,[]]]]' ]
	run_tool 1 "$LIBTEST" ptx-regions "$FIXTURES/build/regions.ptx" missing
	assert_stderr "kg-libtest: '$FIXTURES/build/regions.ptx' has no such entry"
}

@test "ptx_lines maps PTX lines to kernel.cu lines and back, through inlining, only the kernel's .file" {
	run_tool 0 "$LIBTEST" ptx-lines "$FIXTURES/build/regions.ptx" 11 14
	assert_stderr_empty
	# line 11: code of helper.cuh (.file 2) inlined at kernel line 11; 12 holds a label; the
	# entry "other" (.file 3, named notkernel.cu) has none
	[ "$output" = '{"file":1,"lines":[[26,11],[27,11],[29,12],[30,12],[31,12],[32,12],[33,12],[35,14],[36,14],[37,14]]}' ]
	run_tool 0 "$LIBTEST" ptx-lines "$FIXTURES/build/regions.ptx" 0 9
	[ "$output" = '{"file":1,"lines":[]}' ]
	# NVRTC's -lineinfo: the loop's global load and shared store come from line 12, the
	# barrier from 13, the shared load and fma from 14
	new_run run
	build_source run regions_loop.cu
	ptx="run/variants/$(jq -r .build.state <<<"$output")/kernel.ptx"
	for line in 12 13 14; do
		run_tool 0 "$LIBTEST" ptx-lines "$ptx" "$line" "$line"
		jq -r '.lines[] | .[0]' <<<"$output" | while read -r n; do sed -n "${n}p" "$ptx"; done > "ptx-$line"
	done
	grep -q 'ld.global' ptx-12
	grep -q 'st.shared' ptx-12
	grep -q 'bar.sync' ptx-13
	grep -q 'ld.shared' ptx-14
	grep -q 'fma.rn.f32' ptx-14
	run ! grep -q 'bar.sync' ptx-12 ptx-14
}
