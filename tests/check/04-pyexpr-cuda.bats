#!/usr/bin/env bats
# 04-pyexpr-cuda.bats: expressions translated to CUDA device functions (lib/pyexpr_cuda.c),
# run on the CPU through the host C++ compiler against pyexpr_eval, bit for bit, and
# compiled by NVRTC for sm_90 as kg-bench compiles them.

load ../test_helper

# The globals cuda-corpus.txt reads besides the index i.
CORPUS_LETS=(--let 'ProblemSize=[1024, 768, -3, 2**62, 0, 7]' --let 'Mixed=[1, 2.5, True, -0.0]'
	--let 'Floats=[0.5, -1e300, 1e-300]' --let 'Empty=[]' --let n=5 --let x=2.5 --let flag=True
	--let big=2**62 --let inf=1e400 --let nan=1e400-1e400)

# index_values N: -N..N, then 2**31, 2**53 and 2**62 and their negations, each with the
# two integers either side, and the ends of int64.
index_values() {
	seq -- "-$1" "$1"
	for e in 31 53 62; do
		for d in -2 -1 0 1 2; do
			printf '%s\n' "$(( (1 << e) + d ))" "$(( -(1 << e) + d ))"
		done
	done
	printf '%s\n' 9223372036854775807 9223372036854775806 -9223372036854775807 "$(( -9223372036854775807 - 1 ))"
}

# host_program SOURCE BINARY: compiles a generated program as the device runs it, without
# contraction, and with UBSan watching the prelude's integer arithmetic (unoptimised, which
# compiles fastest and computes the same doubles). -fno-builtin-pow keeps g++ from turning
# pow(x, -1.0) into 1.0 / x, which pyexpr (calling glibc) does not do: pow is the documented
# exception, and this tests everything else.
host_program() {
	g++ -std=c++17 -DKGPY_HOST -ffp-contract=off -fno-builtin-pow -O0 -Wall -Wextra -Werror \
		-fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all -o "$2" "$1"
}

# check_same FILE EXPECTED ACTUAL: fails listing each "LINE I RESULT" of EXPECTED (from
# pyexpr_eval) that ACTUAL (from the generated code) does not repeat, with the expression.
check_same() {
	[ -s "$2" ]
	if [ "$(wc -l < "$2")" -ne "$(wc -l < "$3")" ]; then
		echo "pyexpr gave $(wc -l < "$2") results, the generated code $(wc -l < "$3")" >&2
		return 1
	fi
	mismatches=$(paste -d ' ' "$2" "$3" | awk 'NR == FNR { expr[NR] = $0; next }
		$1 != $4 || $2 != $5 || $3 != $6 {
			print "line " $1 ": " expr[$1] "  with i=" $2 ": pyexpr " $3 ", generated " $6 " (line " $4 ", i=" $5 ")"
		}' "$1" -)
	if [ -n "$mismatches" ]; then
		printf '%s\n' "$mismatches" | head -40 >&2
		return 1
	fi
}

# compare_on_host FILE VALUES [--index NAME] [--let NAME=EXPR]...: translates each line of
# FILE (skipping refused ones), runs the functions on the CPU for each index in VALUES and
# compares every result with pyexpr_eval's: the double's bits, "nan", or "failed".
compare_on_host() {
	local file=$1 values=$2
	shift 2
	"$LIBTEST" cuda program "$@" < "$file" > "$BATS_TEST_TMPDIR/prog.cpp"
	host_program "$BATS_TEST_TMPDIR/prog.cpp" "$BATS_TEST_TMPDIR/prog"
	"$LIBTEST" cuda eval "$@" "$file" < "$values" > "$BATS_TEST_TMPDIR/expected"
	"$BATS_TEST_TMPDIR/prog" < "$values" > "$BATS_TEST_TMPDIR/actual"
	check_same "$file" "$BATS_TEST_TMPDIR/expected" "$BATS_TEST_TMPDIR/actual"
}

@test "every line of the GPU corpus translates" {
	run_tool 0 "$LIBTEST" cuda refuse "${CORPUS_LETS[@]}" < "$FIXTURES/expr/cuda-corpus.txt"
	[ "$(printf '%s\n' "$output" | grep -c '^ok$')" -eq "$(wc -l < "$FIXTURES/expr/cuda-corpus.txt")" ]
}

@test "the GPU corpus gives pyexpr_eval's results bit for bit for 4000 indices and the int64 edges" {
	index_values 2000 > "$BATS_TEST_TMPDIR/values"
	compare_on_host "$FIXTURES/expr/cuda-corpus.txt" "$BATS_TEST_TMPDIR/values" "${CORPUS_LETS[@]}"
	# Both values and failures were compared, on nearly every line.
	grep -q ' failed$' "$BATS_TEST_TMPDIR/expected"
	grep -q ' nan$' "$BATS_TEST_TMPDIR/expected"
	[ "$(grep -c ' [0-9a-f]\{16\}$' "$BATS_TEST_TMPDIR/expected")" -gt 800000 ]
}

@test "the comparison notices one wrong bit, a wrong failure and a missing result" {
	printf '%s\n' 'i + 0.5' 'i // 2' > "$BATS_TEST_TMPDIR/two.txt"
	index_values 3 > "$BATS_TEST_TMPDIR/values"
	compare_on_host "$BATS_TEST_TMPDIR/two.txt" "$BATS_TEST_TMPDIR/values"
	expected="$BATS_TEST_TMPDIR/expected"
	sed '5s/.$/x/' "$expected" > "$BATS_TEST_TMPDIR/bit"
	run check_same "$BATS_TEST_TMPDIR/two.txt" "$expected" "$BATS_TEST_TMPDIR/bit"
	assert_failure
	assert_output --partial 'line 1: i + 0.5  with i=1: pyexpr'
	sed '$s/ [^ ]*$/ failed/' "$expected" > "$BATS_TEST_TMPDIR/failed"
	run check_same "$BATS_TEST_TMPDIR/two.txt" "$expected" "$BATS_TEST_TMPDIR/failed"
	assert_failure
	sed '$d' "$expected" > "$BATS_TEST_TMPDIR/short"
	run check_same "$BATS_TEST_TMPDIR/two.txt" "$expected" "$BATS_TEST_TMPDIR/short"
	assert_failure
}

@test "2000 random expressions give pyexpr_eval's results, the index standing for a" {
	python3 "$TOOLS/exprgen.py" 4 2000 > "$BATS_TEST_TMPDIR/random.txt"
	index_values 40 > "$BATS_TEST_TMPDIR/values"
	compare_on_host "$BATS_TEST_TMPDIR/random.txt" "$BATS_TEST_TMPDIR/values" --index a --let b=-0.5 --let c=2**62
	# exprgen writes a few lines Python cannot parse; every other one was compared.
	[ "$(cut -d ' ' -f 1 "$BATS_TEST_TMPDIR/expected" | uniq | wc -l)" -gt 1960 ]
}

@test "the translatable lines of the CPU corpus give pyexpr_eval's results" {
	index_values 40 > "$BATS_TEST_TMPDIR/values"
	compare_on_host "$FIXTURES/expr/corpus.txt" "$BATS_TEST_TMPDIR/values" --index a --let b=-2.5 --let 'c=[1, 2]'
	[ "$(cut -d ' ' -f 1 "$BATS_TEST_TMPDIR/expected" | uniq | wc -l)" -ge 140 ]
}

@test "deep nesting translates, compiles and agrees" {
	python3 - > "$BATS_TEST_TMPDIR/deep.txt" <<'EOF'
print(" else ".join(f"{k} if i < {k * 10 - 1000} else {k}.5 if i % {k + 2} == 0" for k in range(1, 95)) + " else i")
print(" + ".join(["(i % 7)"] * 999))
print("(" * 190 + "i" + " * 3 + 1) % 1000003" * 190)
print(" or ".join(f"(i % {k + 2} == 0 and {k}.5)" for k in range(300)) + " or -1")
print("min(" * 150 + "i" + ", i % 13 - 6.5)" * 150)
print(" < ".join(f"i % {k + 7} + {k}" for k in range(50)))
print("-" * 199 + "i")
print("not " * 199 + "i")
EOF
	index_values 300 > "$BATS_TEST_TMPDIR/values"
	compare_on_host "$BATS_TEST_TMPDIR/deep.txt" "$BATS_TEST_TMPDIR/values"
	[ "$(cut -d ' ' -f 1 "$BATS_TEST_TMPDIR/expected" | uniq | wc -l)" -eq 8 ]
	run_tool 0 "$LIBTEST" cuda nvrtc sm_90 < "$BATS_TEST_TMPDIR/deep.txt"
	assert_output 'compiled 8 functions for sm_90'
}

@test "NVRTC compiles the prelude, every corpus function and a kernel each for sm_90 with --fmad=false, silently" {
	run_tool 0 "$LIBTEST" cuda nvrtc "${CORPUS_LETS[@]}" sm_90 < "$FIXTURES/expr/cuda-corpus.txt"
	assert_output "compiled $(wc -l < "$FIXTURES/expr/cuda-corpus.txt") functions for sm_90"
	run_tool 0 "$LIBTEST" cuda nvrtc sm_90 <<< 'i * 2'
	assert_output 'compiled 1 functions for sm_90'
}

@test "int / int beyond 2**53 rounds twice, as the host's long double does" {
	# Quotients within half a 64-bit ulp below a 53-bit midpoint: x87 rounds them up to the
	# midpoint and then to even, away from the correctly rounded result, for every odd i.
	printf '%s\n' '((2199023255552 + i) * 2097153 + 1536) / 2097153' \
		'-((2199023255552 + i) * 2097153 + 1536) / 2097153' '((2199023255552 + i) * 2097153 + 1536) / -2097153' \
		'(4611686018427387904 + i) / 3' '9223372036854775807 / (i or 1)' > "$BATS_TEST_TMPDIR/div.txt"
	index_values 3000 > "$BATS_TEST_TMPDIR/values"
	compare_on_host "$BATS_TEST_TMPDIR/div.txt" "$BATS_TEST_TMPDIR/values"
	run_tool 0 "$LIBTEST" expr <<< '((2199023255552 + 7) * 2097153 + 1536) / 2097153'
	assert_output '2199023255559.001'
}

@test "static types: plain int code stays long long; mixed branches use kgpy_val" {
	run_tool 0 "$LIBTEST" cuda function --let 'ProblemSize=[4, 8]' 'ProblemSize[i % 2] * i // 3 + (i > 2)'
	refute_output --partial kgpy_val
	assert_output --partial 'switch ('
	assert_output --partial '__device__ double kgfn_1(long long i, int *failed)'
	run_tool 0 "$LIBTEST" cuda function 'i * 0.5 - 1'
	refute_output --partial kgpy_val
	run_tool 0 "$LIBTEST" cuda function '1 if i % 2 else 0.5'
	assert_output --partial 'kgpy_val t'
	run_tool 0 "$LIBTEST" cuda function '3.0 * 2'
	assert_output --partial '(void)i;'
	assert_output --partial '(void)failed;'
}

@test "constructs outside the GPU subset are refused with their position" {
	run_tool 1 "$LIBTEST" cuda refuse --let 'ProblemSize=[1024, 768, -3, 2**62, 0, 7]' --let "Name='abc'" \
		--let Nothing=None --let 'Span=range(3)' --let 'Nested=[[1], 2]' --let 'Huge=list(range(5000))' \
		< "$FIXTURES/expr/cuda-refused.txt"
	assert_output "$(cat "$FIXTURES/expr/cuda-refused.expected")"
	assert_stderr_empty
}
