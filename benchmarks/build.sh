#!/bin/sh
# build.sh: times kg-build on every valid configuration of examples/vector_add (112 records):
# cold (nothing cached) with -j 1 and -j N, then rebuilt from the compile cache in a fresh run,
# then rebuilt in the same run (variants reused).
# Usage, from the repository root after make: benchmarks/build.sh [RUNS] [JOBS] [PARENT]
# (default 3, 2, $TMPDIR or /tmp); the runs and the cache live in a new folder under PARENT,
# so /dev/shm separates kg-build's own cost from the file system's.
# Prints, per mode, the median, minimum and maximum wall time, and the ratios the issue asks for.
set -eu

runs=${1:-3}
jobs=${2:-2}
work=$(mktemp -d -p "${3:-${TMPDIR:-/tmp}}")
trap 'rm -rf "$work"' EXIT

bin/kg-propose --exhaustive --spec examples/vector_add/vector_add.json > "$work/records.jsonl"
records=$(wc -l < "$work/records.jsonl")

# new_run DIR: a run directory holding the example's spec and kernel.
new_run() {
	mkdir -p "$1"
	cp examples/vector_add/vector_add.cu "$1/"
	cp examples/vector_add/vector_add.json "$1/spec.json"
}

# timed MODE CMD...: appends "MODE SECONDS" to the times file; every build must be ok.
timed() {
	mode=$1
	shift
	sync # dirty pages of the previous mode are not this mode's cost
	start=$(date +%s.%N)
	"$@" < "$work/records.jsonl" > "$work/out.jsonl"
	end=$(date +%s.%N)
	if [ "$(jq -r .build.status "$work/out.jsonl" | sort -u)" != ok ]; then
		echo "build.sh: $mode: some build failed" >&2
		exit 1
	fi
	awk -v m="$mode" -v a="$start" -v b="$end" 'BEGIN { printf "%s %.3f\n", m, b - a }' >> "$work/times"
}

: > "$work/times"
# Nothing is deleted until the end: removing thousands of files slows a disk file system's
# next operations, which would be charged to whichever mode came next.
i=0
while [ "$i" -lt "$runs" ]; do
	new_run "$work/$i/1"; new_run "$work/$i/2"; new_run "$work/$i/3"
	export XDG_CACHE_HOME="$work/$i/cache-a"
	timed cold_j1 bin/kg-build -j 1 --run "$work/$i/1"
	export XDG_CACHE_HOME="$work/$i/cache-b"
	timed "cold_j$jobs" bin/kg-build -j "$jobs" --run "$work/$i/2"
	timed cache bin/kg-build -j 1 --run "$work/$i/3"
	timed reuse bin/kg-build -j 1 --run "$work/$i/3"
	i=$((i + 1))
done

printf '%-8s %10s %10s %10s %10s\n' mode median_s min_s max_s records
for mode in cold_j1 "cold_j$jobs" cache reuse; do
	grep "^$mode " "$work/times" | cut -d' ' -f2 | sort -n | awk -v mode="$mode" -v n="$records" '
		{ t[NR] = $1 }
		END {
			median = NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
			printf "%-8s %10.3f %10.3f %10.3f %10d\n", mode, median, t[1], t[NR], n
		}'
done | tee "$work/table"
awk -v jobs="$jobs" '
	{ m[$1] = $2 }
	END {
		printf "cold -j 1 / cached rebuild:  %.1fx\n", m["cold_j1"] / m["cache"]
		printf "cold -j 1 / reused variants: %.1fx\n", m["cold_j1"] / m["reuse"]
		printf "cold -j 1 / cold -j %d:       %.2fx\n", jobs, m["cold_j1"] / m["cold_j" jobs]
	}' "$work/table"
