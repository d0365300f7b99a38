#!/usr/bin/env bats
# 33-kg-bench-lines.bats (GPU): kg-bench --metrics samples the kernel's PCs after its metrics,
# leaving its timing and metrics as they were, and maps them to kernel.cu lines: a kernel whose
# time is one line's FMA chain has most samples on that line.

load ../test_helper

METRICS="$BATS_TEST_DIRNAME/../fixtures/bench/metrics"

setup_file() {
	export XDG_CACHE_HOME="$BATS_FILE_TMPDIR/cache"
	cd "$BATS_FILE_TMPDIR"
	mkdir -p hot
	cp "$METRICS/hotline.json" hot/spec.json
	cp "$METRICS/hotline.cu" hot/
	echo '{"run": "hot", "candidate": {"id": "baseline"}}' | timeout 120 kg-build |
		timeout 300 kg-bench --metrics --budget 0.2 >hot.jsonl
}

setup() {
	cd "$BATS_FILE_TMPDIR"
	LINES="hot/variants/$(jq -r .build.state hot.jsonl)/lines.json"
}

@test "--metrics: lines.json and bench.metrics.lines; the timing and the metrics as without" {
	jq -c '.bench | [.status, .median_ms, .metrics.status, .metrics.lines]' hot.jsonl >&3
	jq -c 'del(.lines)' "$LINES" >&3
	jq -e '.bench | .status == "ok" and .samples >= 10 and .check.passed and .metrics.status == "ok"' hot.jsonl
	[ "$(jq -cS . "hot/variants/$(jq -r .build.state hot.jsonl)/metrics.json")" = "$(jq -cS .bench.metrics hot.jsonl)" ]
	jq -e '.status == "ok" and .source == "cupti-pc-sampling" and .samples >= 10000 and .launches >= 1
		and .sampling_period_cycles >= 512 and .cost_ms > 0' "$LINES"
	# every sample is on a line or unmapped; lines sorted, each with its stalls
	jq -e '.samples == ([.lines[].samples] | add) + .unmapped and ([.lines[].line] | . == sort and . == unique)
		and all(.lines[]; (.stalls | add) == .samples and .share_pct > 0)' "$LINES"
	# the summary names the hottest lines of the file
	[ "$(jq -c '[.lines | sort_by(-.samples)[:3][] | .line]' "$LINES")" = "$(jq -c '[.bench.metrics.lines.hottest[].line]' hot.jsonl)" ]
	jq -e '.bench.metrics.lines | .status == "ok" and .samples > 0 and (.hottest | length) == 3 and (.hottest[0].stall | type == "string")' hot.jsonl
}

@test "the FMA chain's line holds most samples" {
	jq -c '.lines[] | [.line, .share_pct, (.stalls | to_entries | max_by(.value) | .key)]' "$LINES" >&3
	# the chain's line first, waiting on its FMAs' fixed latency; the rest is the entry and the
	# index (warps ready to issue there but not selected), none outside kernel.cu
	jq -e '.lines | max_by(.samples) | .line == 10 and .share_pct > 50 and (.stalls | to_entries | max_by(.value) | .key) == "wait"' "$LINES"
	jq -e '.unmapped == 0 and all(.lines[]; .line >= 3 and .line <= 12)' "$LINES"
}
