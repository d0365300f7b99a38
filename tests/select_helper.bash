# select_helper.bash: what kg-select's suites (50-kg-select.bats, check/50-kg-select-e2e.bats)
# share: a synthetic run, its benched baseline and evaluated candidates.

RUN=out/kernels/k

setup() {
	cd "$BATS_TEST_TMPDIR"
	mkdir -p "$RUN"
}

# baseline [MEDIAN]: the benched baseline record that makes the root (state S0).
baseline() {
	jq -cn --arg run "$RUN" --argjson m "${1:-1.0}" \
		'{run: $run, kernel: "k", candidate: {id: "baseline"}, build: {status: "ok", state: "S0", baseline: true, config: {x: 1}},
		  bench: {status: "ok", median_ms: $m, speedup: 1}}'
}

# evaluated PICK-FILE STATE SPEEDUP [CI-LOW] [METHOD] [BUILD-STATUS]: a candidate of the pick
# (one JSON line), built and benched: speedup 0 means the bench found it incorrect.
evaluated() {
	jq -c --arg s "$2" --argjson sp "$3" --argjson lo "${4:-$3}" --arg m "${5:-tile}" --arg bs "${6:-ok}" \
		'{run, kernel, node, node_id, path_edges, rollout, candidate: {id: ("c-" + $s), method: $m}, method: {canonical: $m},
		  build: ({status: $bs, config: {x: 2}} + (if $bs == "ok" or $bs == "compile_failed" then {state: $s} else {} end)),
		  bench: (if $bs != "ok" then null elif $sp == 0 then {status: "incorrect"}
		          else {status: "ok", median_ms: (1 / $sp), speedup: $sp, speedup_ci: [$lo, $sp + 0.1]} end)}
		| if .bench == null then del(.bench) else . end' "$1"
}

start() {
	baseline | kg-select --update "$@" "$RUN" >/dev/null
}
