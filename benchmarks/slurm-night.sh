#!/bin/bash
# slurm-night.sh (CPU, root): a night of every example through Slurm: the one-node test
# cluster of tests/slurm/cluster.sh (this machine's CPUs, two GPUs that are files), the
# examples' recorded tables replayed (no GPU), BUDGET builds a spec:
#   1. kg-nightly --slurm on the seven examples: submission time, then the wall time until
#      the end job's last line, the tasks' states, builds and nodes, the ReGraph rebuilt;
#   2. every run's evaluated states: none twice;
#   3. the same night run here by kg-nightly (one spec after the other), for comparison.
# Usage, from the repository root after make: benchmarks/slurm-night.sh [BUDGET] (default
# 40). Writes the cluster, the runs and the logs under $OUT; prints a short table last.
set -u
budget=${1:-40}
out=${OUT:-$(mktemp -d)}
export XDG_CACHE_HOME=$out/cache
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

tests/slurm/cluster.sh start "$out/cluster" || exit 1
export SLURM_CONF=$out/cluster/slurm.conf
trap 'tests/slurm/cluster.sh stop "$out/cluster"' EXIT

# the night's config: every example with its table
for night in slurm here; do
	jq -n --arg ex "$PWD/examples" --arg out "$out/$night" --argjson b "$budget" '{outdir: $out, budget_builds: $b, options: ["--no-llm"],
		specs: [$ARGS.positional[] | {spec: "\($ex)/\(.)/\(.).json", replay: "\($ex)/\(.)/\(.)_H100_T4.json"}]}' \
		--args vector_add softmax transpose reduction matmul fused_matmul_act lora_expand >"$out/$night.json"
done

t0=$(now)
line=$(bin/kg-nightly --slurm --gpus-per-task 1 "$out/slurm.json") || exit 1
t_submit=$(secs "$t0" "$(now)")
echo "$line"
log=${line##* logs in }
until jq -e 'select(.nightly == "end")' "$log" >/dev/null 2>&1; do sleep 0.2; done
t_night=$(secs "$t0" "$(now)")

t0=$(now)
bin/kg-nightly "$out/here.json"
echo "kg-nightly here: exit $?"
t_here=$(secs "$t0" "$(now)")

echo "tasks (array task, state, builds, node, CUDA_VISIBLE_DEVICES, seconds):"
jq -r 'select(.nightly == "spec") | "\(.slurm.array_task_id) \(.run | split("/") | last) \(.builds) \(.slurm.node) \(.slurm.cuda_visible_devices) \(.seconds)"' "$log" | sort -n
jq -r 'select(.nightly == "task") | "\(.slurm.array_task_id) \(.slurm.state) \(.slurm.exit_code)"' "$log"
jq -c 'select(.nightly == "end") | del(.t)' "$log"
twice=0 evaluated=0
for run in "$out"/slurm/kernels/*/; do
	states=$(jq -r 'select(.update.child != null and (.update.root | not)) | .build.state' "$run/events.jsonl")
	[ -n "$states" ] || continue
	twice=$((twice + $(sort <<<"$states" | uniq -d | wc -l)))
	evaluated=$((evaluated + $(wc -l <<<"$states")))
done
printf '\n| step | wall s | result |\n|---|---|---|\n'
printf '| kg-nightly --slurm (submission) | %s | %s |\n' "$t_submit" "${line%%;*}"
printf '| the night, submission to the end job'"'"'s last line | %s | %s tasks, %s builds, %s states evaluated twice |\n' \
	"$t_night" "$(jq -s '[.[] | select(.nightly == "task")] | length' "$log")" "$evaluated" "$twice"
printf '| kg-nightly here, the same night | %s | %s builds |\n' "$t_here" \
	"$(jq -s '[.[] | select(.nightly == "spec") | .builds] | add' "$(ls "$out"/here/logs/*.jsonl)")"
