#!/bin/bash
# run.sh (GPU): builds configurations of the wgmma_tma_ws patch of examples/matmul/matmul.cu with
# nvcc (bench_ws.cu) and times each against cuBLAS at 2048^3 and 4096^3, on the full grid and on a
# grid of 132 blocks (one per H100 SXM multiprocessor, the kernel looping over its tiles). Results
# to $OUT/results.txt. Usage, from anywhere: benchmarks/hopper/run.sh; VARIANTS overrides the list
# ("name:-Dblock_m=.. ..." a line), SIZES the sizes ("M N K" a line).
cd "$(dirname "$0")"
OUTD=${OUT:-/tmp}
tmp=$(mktemp -d)
patch -s -o "$tmp/matmul_ws.cu" ../../examples/matmul/matmul.cu ../../examples/matmul/wgmma_tma_ws.diff || exit 1
# the epilogue's cost: the same kernel with its stores never taken (timing only, fails the check)
sed 's/if (row < M \&\& col < N)$/if (row < M \&\& col < N \&\& M < 0)/' "$tmp/matmul_ws.cu" >"$tmp/matmul_nostore.cu"
build() { # name, defines...
	local n=$1
	shift
	nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$tmp" -DVARIANT="\"$n\"" "$@" bench_ws.cu \
		-o "$tmp/bin_$n" -lcublas -lcuda -Xptxas -v >"$tmp/build_$n.log" 2>&1 || {
		echo "BUILD FAIL $n"
		tail -5 "$tmp/build_$n.log"
	}
}
W="-Dblock_k=64 -Dnum_warps=12 -DKFILE=\"matmul_ws.cu\""
V=${VARIANTS:-"128x256s4g8:-Dblock_m=128 -Dblock_n=256 $W -Dnum_stages=4 -Dgroup_m=8
128x256s3g8:-Dblock_m=128 -Dblock_n=256 $W -Dnum_stages=3 -Dgroup_m=8
128x256s4g4:-Dblock_m=128 -Dblock_n=256 $W -Dnum_stages=4 -Dgroup_m=4
256x128s4g8:-Dblock_m=256 -Dblock_n=128 $W -Dnum_stages=4 -Dgroup_m=8
nostore128x256s4g8:-Dblock_m=128 -Dblock_n=256 -Dblock_k=64 -Dnum_warps=12 -DKFILE=\"matmul_nostore.cu\" -Dnum_stages=4 -Dgroup_m=8"}
SIZES=${SIZES:-"1100 1016 1048 5
2048 2048 2048
4096 4096 4096"}
IFS=$'\n'
for v in $V; do build "${v%%:*}" $(echo "${v#*:}" | tr ' ' '\n') & done
wait
for v in $V; do
	n=${v%%:*}
	[ -x "$tmp/bin_$n" ] || continue
	grep -h "registers\|spill" "$tmp/build_$n.log" | tr -s ' ' | head -2 | sed "s/^/$n: /" >>"$OUTD/ptxas.txt"
	for s in $SIZES; do
		IFS=' ' read -r -a a <<<"$s"
		"$tmp/bin_$n" "${a[@]}"
		GRID=132 "$tmp/bin_$n" "${a[@]}"
	done
done 2>&1 | tee "$OUTD/results.txt"
