#!/bin/sh
# enumerate.sh: times kg-propose on a 22.2-million-point tuning space with five conditions
# (the size of the BAT hotspot space), counting only and writing every candidate record.
# Usage, from the repository root after make: benchmarks/enumerate.sh [RUNS] (default 5).
# Prints, per mode, the median, minimum and maximum wall time and the largest peak RSS.
set -eu

runs=${1:-5}
spec=tests/fixtures/t1/stencil_22m.json
out=$(mktemp)
trap 'rm -f "$out"' EXIT

printf '%-8s %10s %10s %10s %12s %10s\n' mode median_s min_s max_s peak_rss_mb records
for mode in count write; do
	case $mode in
	count) set -- bin/kg-propose --exhaustive --count --spec "$spec" ;;
	write) set -- bin/kg-propose --exhaustive --spec "$spec" ;;
	esac
	"$@" > /dev/null # warm-up: the file cache, not the tool, should differ between runs
	: > "$out"
	i=0
	while [ "$i" -lt "$runs" ]; do
		/usr/bin/time -a -o "$out" -f '%e %M' "$@" > /dev/null
		i=$((i + 1))
	done
	records=$("$@" | wc -l)
	sort -n "$out" | awk -v mode="$mode" -v records="$records" '
		{ t[NR] = $1; if ($2 > rss) rss = $2 }
		END {
			median = NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
			printf "%-8s %10.3f %10.3f %10.3f %12.1f %10d\n", mode, median, t[1], t[NR], rss / 1024, records
		}'
done
