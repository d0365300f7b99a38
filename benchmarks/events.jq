# events.jq: what the benchmark scripts read in a run's events.jsonl (jq -L benchmarks
# 'include "events"; ...'): an event's time ("2026-11-28T17:54:26.124Z": the log's "t",
# kg-bench's bench.started) in seconds since the epoch.
def secs: (.[0:19] + "Z" | fromdate) + (.[20:23] | tonumber) / 1000;
