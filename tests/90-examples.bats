#!/usr/bin/env bats
# 90-examples.bats: every example's spec loads, its space is not empty, its kernel builds in
# the default configuration, and its recorded table covers the space and replays.

load test_helper

setup_file() {
	export XDG_CACHE_HOME="$BATS_FILE_TMPDIR/cache"
}

setup() {
	cd "$BATS_TEST_TMPDIR"
}

@test "every example's spec loads, has a non-empty space and a README" {
	for spec in "$KG_ROOT"/examples/*/*.json; do
		case $spec in *_T4.json) continue ;; esac
		run_tool 0 kg-propose --exhaustive --count --spec "$spec"
		[ "$output" -gt 0 ]
		[ -s "$(dirname "$spec")/README.md" ]
	done
}

@test "every recorded table holds every configuration of its example's space, each correct, and replays in kg-tune" {
	for table in "$KG_ROOT"/examples/*/*_T4.json; do
		dir=$(dirname "$table") name=$(basename "$(dirname "$table")")
		kg-propose -x -s "$dir/$name.json" | jq -c .candidate.config | jq -cS . | sort >space
		jq -c '.results[].configuration' "$table" | jq -cS . | sort -u >recorded
		diff space recorded
		[ "$(jq '[.results[] | select(.invalidity != "correct")] | length' "$table")" -eq 0 ]
		run_tool 0 kg-tune -q --no-llm --replay "$table" --budget-builds 10 --outdir "out-$name" "$dir/$name.json"
		[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | .bench.replayed' "out-$name/kernels/$name/events.jsonl" | sort -u)" = true ]
	done
}
