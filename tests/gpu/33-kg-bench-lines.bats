#!/usr/bin/env bats
# 33-kg-bench-lines.bats (GPU): kg-bench --metrics samples the kernel's PCs after its metrics,
# leaving its timing and metrics as they were, and maps them to kernel.cu lines: a kernel whose
# time is one line's FMA chain has most samples on that line, as Nsight Compute's source page has.

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
	cc -O2 -o launch_cubin "$BATS_TEST_DIRNAME/launch_cubin.c" -I"${CUDA_HOME:-/usr/local/cuda}/include" \
		-L"${CUDA_HOME:-/usr/local/cuda}/lib64/stubs" -lcuda
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
	jq -e '[.lines[] | select(.line == 10) | .share_pct] | add > 80' "$LINES"
	jq -e '[.lines[] | select(.line == 9 or .line == 10) | .share_pct] | add > 95' "$LINES"
}

@test "the same line is the hottest in Nsight Compute's source page" {
	command -v ncu >/dev/null || { echo "ncu is not on the PATH" >&2; return 1; }
	rec=hot.jsonl
	# shellcheck disable=SC2046
	timeout 300 ncu --section SourceCounters --clock-control none -c 1 -f -o hot \
		./launch_cubin "hot/$(jq -r .build.cubin "$rec")" "$(jq -r .build.function "$rec")" \
		$(jq -r '.build.grid + .build.block | join(" ")' "$rec") buf:4194304 buf:4194304 i32:1048576
	# the line info names kernel.cu as NVRTC was given it: relative to where ncu reads the report
	cp "hot/variants/$(jq -r .build.state "$rec")/kernel.cu" .
	timeout 120 ncu --import hot.ncu-rep --page source --csv --print-source cuda >hot.source.csv
	"$BATS_TEST_DIRNAME/ncu_lines.py" hot.source.csv >ncu.json
	jq -c .lines ncu.json >&3
	jq -e '.lines["10"] > 80' ncu.json
	# within 10 points of ours on the hot line
	jq -en --slurpfile n ncu.json --slurpfile o "$LINES" \
		'($o[0].lines[] | select(.line == 10) | .share_pct) - $n[0].lines["10"] | fabs < 10'
}
