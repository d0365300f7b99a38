#!/usr/bin/env bash
# gpus-at-once.sh (GPU): whether GPUs measuring at once, or busy cores beside kg-bench, make the
# same candidates slower to measure: each timed again alone, on every GPU at once, beside load.
# Usage, from the repository root after `make`, on the GPU machine:
#   benchmarks/gpus-at-once.sh SPEC
# SPEC is tuned on GPU 0 for BUILDS (default 60) builds, seed 1; the candidates that passed are
# then given again to kg-bench, phase after phase, a kg-bench of each GPU of the phase on a copy
# of the run of its own: "alone" (GPU 0), "all" (every GPU, each all of them at once), "busy0"
# and "busy10" (GPU 0 beside HOGS busy loops, default three quarters of the cores, at nice 0
# then 10), "alone" again. Prints a markdown table: per phase, the mean of the candidates'
# bench.wall_ms (kg-bench's time a candidate), time_ms (its timing loop), samples, the median
# cv and how many spent the whole GPU-time budget.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: benchmarks/gpus-at-once.sh SPEC" >&2; exit 2; }
spec=$1 builds=${BUILDS:-60} hogs=${HOGS:-$(($(nproc) * 3 / 4))}
die() { echo "gpus-at-once: $*" >&2; exit 1; }
[ -x bin/kg-tune ] || die "no bin/kg-tune: run make first"
devices=$(bin/kg-bench --devices) || die "kg-bench --devices: no GPU"
mapfile -t gpus < <(jq -r .device <<<"$devices")
work=$(mktemp -d "${TMPDIR:-/tmp}/gpus-at-once.XXXXXX")
busy=()
trap 'kill "${busy[@]}" 2>/dev/null || :; rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache

bin/kg-tune -q --no-llm --budget-builds "$builds" --seed 1 --gpus 0 --outdir "$work/out" "$spec" >/dev/null ||
	die "kg-tune failed on $spec"
run=$(echo "$work/out/kernels/"*)

# phase NAME GPU...: the run's candidates that passed, measured anew by a kg-bench of each GPU
phase() {
	local name=$1 g pids=()
	shift
	for g in "$@"; do
		{ rm -rf "$work/run.$g" && cp -r "$run" "$work/run.$g"; } || die "cannot copy $run"
		jq -c --arg r "$work/run.$g" 'select(.build.status == "ok" and .build.baseline != true and .bench.status == "ok")
			| del(.bench, .update) | .run = $r' "$run/events.jsonl" |
			bin/kg-bench -q --device "$g" --run "$work/run.$g" >"$work/$name.$g.jsonl" &
		pids+=($!)
	done
	for g in "${pids[@]}"; do
		wait "$g" || die "a kg-bench failed in phase $name"
	done
	jq -rs --arg name "$name" --argjson gpus $# 'map(.bench | select(.status == "ok")) |
		def mean(f): map(f) | add / length;
		"| \($name) | \($gpus) | \(length) | \(mean(.wall_ms) | round) | \(mean(.time_ms) | round) | \(mean(.samples) * 10 | round / 10) | \(map(.cv) | sort | .[length / 2 | floor] * 1000 | round / 1000) | \(map(select(.gpu_ms >= 0.99 * 1000)) | length) |"' \
		"$work/$name".*.jsonl
}

# spin N NICE: N busy loops at niceness NICE, in busy[]
spin() {
	local i
	busy=()
	for ((i = 0; i < $1; i++)); do
		nice -n "$2" sh -c 'while :; do :; done' &
		busy+=($!)
	done
}

printf '| phase | GPUs | candidates | wall_ms | time_ms | samples | cv | whole budget |\n|---|---|---|---|---|---|---|---|\n'
phase alone 0
phase all "${gpus[@]}"
for n in 0 10; do
	spin "$hogs" "$n"
	phase "busy$n" 0
	kill "${busy[@]}"
	busy=()
done
phase alone 0
