#!/usr/bin/env bash
# gpu-open.sh (GPU): how long a kg-bench takes to open its GPU, alone and on every GPU at once
# (as kg-tune's GPUs' kg-benches start), with kg-bench's harness compiled or cached.
# Usage, from the repository root after `make`, on a GPU machine:
#   benchmarks/gpu-open.sh SPEC
# kg-init makes a run of SPEC on GPU 0; then, twice, each trial starts kg-bench on its GPUs at
# once, each given the run's baseline record at once (on a copy of the run of its own), and
# prints for each GPU when its measurement started after the launch (its GPU opened, its
# context made, the run readied), its wall_ms and setup_ms. Trials: all-cold (every GPU
# kg-bench --devices lists, an empty cache: each compiles kg-bench's harness), all-warm (the
# harness cached, as any use after a machine's first finds it), one-cold and one-warm (GPU 0
# alone).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: benchmarks/gpu-open.sh SPEC" >&2; exit 2; }
die() { echo "gpu-open: $*" >&2; exit 1; }
[ -x bin/kg-init ] || die "no bin/kg-init: run make first"
devices=$(bin/kg-bench --devices) || die "kg-bench --devices: no GPU"
mapfile -t gpus < <(jq -r .device <<<"$devices")
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-open.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/warm
run=$(bin/kg-init -q --device 0 "$1" "$work/out") || die "kg-init failed on $1"
jq -c 'select(.build.baseline == true) | del(.bench, .update)' "$run/events.jsonl" | head -1 >"$work/baseline.jsonl"

# trial NAME CACHE GPU...
trial() {
	local name=$1 cache=$2 g t0 pids=()
	shift 2
	for g in "$@"; do
		{ rm -rf "$work/run.$g" && cp -r "$run" "$work/run.$g" &&
			jq -c --arg r "$work/run.$g" '.run = $r' "$work/baseline.jsonl" >"$work/in.$g"; } ||
			die "cannot copy $run"
	done
	t0=$EPOCHREALTIME
	for g in "$@"; do
		XDG_CACHE_HOME=$cache bin/kg-bench -q --device "$g" --run "$work/run.$g" <"$work/in.$g" >"$work/out.$g" &
		pids+=($!)
	done
	for g in "${pids[@]}"; do
		wait "$g" || die "a kg-bench failed in $name"
	done
	for g in "$@"; do
		jq -L "${0%/*}" -r --arg t0 "$t0" --arg name "$name" --arg g "$g" 'include "events"; .bench |
			"| \($name) | \($g) | \(((.started | secs) - ($t0 | tonumber)) * 1000 | round) | \(.wall_ms | round) | \(.setup_ms | round) |"' \
			"$work/out.$g"
	done
}

printf '| trial | GPU | started, ms after the launch | wall_ms | setup_ms |\n|---|---|---|---|---|\n'
for k in 1 2; do
	trial "all-cold" "$work/coldall.$k" "${gpus[@]}"
	trial "all-warm" "$work/warm" "${gpus[@]}"
	trial "one-cold" "$work/cold1.$k" 0
	trial "one-warm" "$work/warm" 0
done
