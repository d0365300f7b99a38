# metrics-row.jq: one row of benchmarks/metrics.sh's table from a record benched with --metrics.
def f: if . == null then "–" else (. * 10 | round / 10 | tostring) end;
.bench as $b | ($b.metrics.values // {}) as $v |
[$name,
 (if .build.baseline then "baseline" elif .candidate.id == "again" then "the same, again" else "best " + (.build.config | to_entries | map("\(.key)=\(.value)") | join(",")) end),
 ($b.median_ms * 1000 | round / 1000 | tostring),
 ($v.sm_throughput_pct | f), ($v.dram_throughput_pct | f), ($v.memory_throughput_pct | f),
 "\($v.achieved_occupancy_pct | f)/\($v.theoretical_occupancy_pct | f) (\($v.occupancy_limiter // "none"))",
 ($v.l1_hit_rate_pct | f), ($v.l2_hit_rate_pct | f), ($v.shared_bank_conflicts // "–" | tostring),
 ($v.tensor_pipe_pct | f), ($v.fma_pipe_pct | f), ($v.ipc | f),
 ($v.stalls // {} | to_entries | if length > 0 then max_by(.value) | "\(.key) \(.value | f)" else "–" end),
 "\($b.metrics.cost_ms // 0 | round) (\($b.metrics.passes // "–"))",
 "\(.bottleneck.class // "–") (\(.bottleneck.confidence // 0 | . * 100 | round / 100))"]
| "| " + join(" | ") + " |"
