#!/bin/bash
# pipelines.sh (GPU): the pipelines end to end on real GPUs:
#   1. a replay table of examples/vector_add (benchmarks/sweep.sh, every configuration);
#   2. kg-tune --gpus 0 on it with a budget of BUDGET builds: wall time, builds, best;
#   3. with two GPUs or more, kg-tune --gpus 0,1: the bench records' device ids and
#      nvidia-smi's utilization sampled every 100 ms show both GPUs busy at once;
#   4. kg-nightly twice on two specs, and a third started during the second (the lock).
# Usage, from the repository root: benchmarks/pipelines.sh [BUDGET] (default 30). Writes the
# runs, logs and tables under $OUT and prints a short table last.
set -u
budget=${1:-30}
out=${OUT:-$(mktemp -d)}
export XDG_CACHE_HOME=$out/cache
example=examples/vector_add/vector_add.json
ngpus=$(nvidia-smi -L | wc -l)
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

bin/kg-bench --calibrate -q >/dev/null
t0=$(now)
benchmarks/sweep.sh "$example" "$out/vector_add_T4.json" --budget 0.3 | tee "$out/sweep.txt"
t_sweep=$(secs "$t0" "$(now)")

t0=$(now)
bin/kg-tune --gpus 0 --no-llm --budget-builds "$budget" --outdir "$out/one" --log "$out/one.jsonl" "$example"
echo "kg-tune --gpus 0 exit $?"
t_one=$(secs "$t0" "$(now)")

t_two=-
if [ "$ngpus" -ge 2 ]; then
	nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader,nounits -lms 100 >"$out/smi.csv" &
	smi=$!
	t0=$(now)
	bin/kg-tune --gpus 0,1 --no-llm --budget-builds "$budget" --outdir "$out/two" --log "$out/two.jsonl" "$example"
	echo "kg-tune --gpus 0,1 exit $?"
	t_two=$(secs "$t0" "$(now)")
	kill "$smi"
	echo "bench records by device id:"
	jq -r 'select(.bench.device_id != null) | "\(.bench.device_id) \(.bench.pci_bus_id)"' "$out/two/kernels/vector_add/events.jsonl" | sort | uniq -c
	# a sample where both GPUs were busy: the timestamps of GPU 0 and 1 lines pair up
	awk -F', ' '{ busy[$1] = busy[$1] + ($3 > 0) } END { for (t in busy) if (busy[t] >= 2) both++; print "utilization samples with both GPUs busy:", both + 0 }' "$out/smi.csv"
fi

# kg-nightly: two specs, two nights; a third run while the second holds the lock.
cp tests/fixtures/build/spec.json tests/fixtures/build/scale.cu tests/fixtures/build/scale_helper.cuh "$out/"
cat >"$out/nightly.json" <<JSON
{"outdir": "night", "budget_builds": 8, "options": ["--no-llm"],
 "specs": ["$PWD/$example", {"spec": "spec.json", "budget_builds": 6}]}
JSON
bin/kg-nightly "$out/nightly.json"; echo "night 1 exit $?"
bin/kg-nightly "$out/nightly.json" & second=$!
sleep 2
t0=$(now)
bin/kg-nightly "$out/nightly.json"; third=$?
t_third=$(secs "$t0" "$(now)")
wait "$second"; echo "night 2 exit $?"
echo "night 3 (during 2) exit $third after $t_third s"
for f in "$out"/night/logs/*.jsonl; do
	jq -e . "$f" >/dev/null && echo "$f: $(wc -l <"$f") valid JSON lines"
done
jq -c 'select(.nightly == "spec") | {spec: (.spec | split("/") | last), status, builds, best}' "$out"/night/logs/*.jsonl

# the runs in one file (the device returns few files), cubins and PTX left out
tar -czf "$out/runs.tar.gz" -C "$out" --exclude='*.cubin' --exclude='*.ptx' one two night 2>/dev/null
rm -rf "$out/one" "$out/two" "$out/night"

echo
echo "| step | wall s | result |"
echo "|---|---|---|"
echo "| sweep vector_add (every configuration) | $t_sweep | $(cat "$out/sweep.txt") |"
echo "| kg-tune --gpus 0, budget $budget | $t_one | $(jq -r '"\(.speedup)x, \(.median_ms) ms"' "$out/one/kernels/vector_add/best.json") |"
[ "$t_two" = - ] || echo "| kg-tune --gpus 0,1, budget $budget | $t_two | $(jq -r '"\(.speedup)x, \(.median_ms) ms"' "$out/two/kernels/vector_add/best.json") |"
echo "| kg-nightly during another | $t_third | exit $third |"
