# pipelines_helper.bash: what the pipelines' suites (80-pipelines.bats, and the slow cases of
# check/80-pipelines-e2e.bats) share: the example, its tables, the run, the per-file compile
# cache and the run's evaluated states.

VECTOR_ADD="$KG_ROOT/examples/vector_add/vector_add.json"
TABLE="$FIXTURES/replay/vector_add_H200_T4.json"	   # every configuration, benchmarks/sweep.sh
EVENTS="$FIXTURES/replay/vector_add_H200_events.jsonl" # a kg-tune run's log, with bandwidths
RUN=out/kernels/vector_add

setup_file() {
	export XDG_CACHE_HOME="$BATS_FILE_TMPDIR/cache" # one compile cache for the file
}

setup() {
	cd "$BATS_TEST_TMPDIR"
}

# evaluated RUN: the states evaluated in RUN, one per line.
evaluated() {
	jq -r 'select(.update.child != null and (.update.root | not)) | .build.state' "$1/events.jsonl"
}

# ahead EVENTS [FROM]: how many iterations were picked, at most, after one was picked and
# before it was learned (overlapped iterations: the depth less one), over iterations FROM
# (1) on.
ahead() {
	jq -s --argjson from "${2:-1}" '[.[] | select(.update.child != null and (.update.root | not) and .iter >= $from)
		| .update.learned_iter - .iter] | max' "$1"
}

# same_search DIR1 DIR2: the two runs logged the same records and made the same graph
# (compile times, cache hits and timestamps aside).
same_search() {
	local r=out/kernels/vector_add
	diff <(jq -c 'del(.t, .build.compile_ms, .build.cached, .build.reused)' "$1/$r/events.jsonl") \
		<(jq -c 'del(.t, .build.compile_ms, .build.cached, .build.reused)' "$2/$r/events.jsonl")
	diff <(kg-select --export "$1/$r" | jq -c 'del(.events_len)') <(kg-select --export "$2/$r" | jq -c 'del(.events_len)')
}
