#!/bin/sh
# check-cubins.sh: shows that the cubins kg-build writes without a GPU load and run on one.
#   tests/gpu/check-cubins.sh prepare DIR   (no GPU needed) builds every configuration of
#       examples/vector_add, plus a patched variant, into DIR/run; builds DIR/check_cubins;
#       fetches the Debian package of libcjson for a GPU machine that lacks it.
#   tests/gpu/check-cubins.sh run DIR       (on the GPU machine, with bin/ and DIR carried)
#       runs every cubin of DIR/run and checks c = a + b; then builds 16 configurations there,
#       with the architecture taken from the GPU, and runs those too.
set -eu

mode=$1
dir=$2
n=16777216

# cubin_lines RUN RECORDS: "CUBIN FUNCTION GX GY GZ BX BY BZ" for each ok build.
cubin_lines() {
	jq -r --arg run "$1" 'select(.build.status == "ok") |
		"\($run)/\(.build.cubin) \(.build.function) \(.build.grid | join(" ")) \(.build.block | join(" "))"' "$2"
}

new_run() {
	mkdir -p "$1"
	cp examples/vector_add/vector_add.cu "$1/"
	cp examples/vector_add/vector_add.json "$1/spec.json"
}

case $mode in
prepare)
	rm -rf "$dir"
	new_run "$dir/run"
	cc -O2 -o "$dir/check_cubins" tests/gpu/check_cubins.c -I/usr/local/cuda/include \
		-L/usr/local/cuda/lib64/stubs -lcuda -lm
	bin/kg-propose --exhaustive --spec examples/vector_add/vector_add.json |
		bin/kg-build -j 2 --run "$dir/run" > "$dir/built.jsonl"
	base=$(jq -r 'select(.candidate.config == {"block_size_x": 256, "items_per_thread": 1}) | .build.state' "$dir/built.jsonl")
	diff=$(printf '%s\n' '@@ -3,5 +3,5 @@' ' extern "C" __global__ void vector_add(float *c, const float *a, const float *b, int n)' ' {' \
		'-	int i = blockIdx.x * (block_size_x * items_per_thread) + threadIdx.x;' \
		'+	int i = (int)(blockIdx.x * (block_size_x * items_per_thread) + threadIdx.x);' ' #pragma unroll')
	jq -cn --arg b "$base" --arg p "$diff" '{node: $b, candidate: {id: "patched", patch: $p, config: {items_per_thread: 4}}}' |
		bin/kg-build --run "$dir/run" >> "$dir/built.jsonl"
	test "$(jq -r .build.status "$dir/built.jsonl" | sort -u)" = ok
	(cd "$dir" && apt-get download libcjson1 >/dev/null)
	echo "prepared $(wc -l < "$dir/built.jsonl") cubins in $dir/run"
	;;
run)
	mkdir -p /tmp/cjson
	dpkg -x "$dir"/libcjson1_*.deb /tmp/cjson
	export LD_LIBRARY_PATH=/tmp/cjson/usr/lib/x86_64-linux-gnu XDG_CACHE_HOME=/tmp/kg-cache
	nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
	echo "== cubins built without a GPU (sm_90 by default)"
	cubin_lines "$dir/run" "$dir/built.jsonl" | "$dir/check_cubins" "$n"
	echo "== built on the GPU machine, architecture from the GPU"
	rm -rf /tmp/gpu-run
	new_run /tmp/gpu-run
	bin/kg-propose --exhaustive --spec examples/vector_add/vector_add.json | head -16 |
		bin/kg-build -v -j 8 --run /tmp/gpu-run > /tmp/gpu-built.jsonl
	jq -r '.build.arch' /tmp/gpu-built.jsonl | sort | uniq -c
	cubin_lines /tmp/gpu-run /tmp/gpu-built.jsonl | "$dir/check_cubins" "$n"
	;;
*)
	echo "usage: $0 prepare|run DIR" >&2
	exit 2
	;;
esac
