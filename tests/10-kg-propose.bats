#!/usr/bin/env bats
# 10-kg-propose.bats: kg-propose's command line and its rules: the space listed whole or
# sampled, expand records answered with valid unseen configurations and ready patches.

load test_helper

MINIMAL="$BATS_TEST_DIRNAME/fixtures/t1/minimal.json"

@test "--help prints the usage on stdout and exits 0" {
	run_tool 0 kg-propose --help
	assert_line --index 0 "Usage: kg-propose [--rules | --llm] [OPTIONS] [FILE]"
	assert_stderr_empty
	run_tool 0 kg-propose -h
	assert_line --index 0 "Usage: kg-propose [--rules | --llm] [OPTIONS] [FILE]"
}

@test "--version prints the version" {
	run_tool 0 kg-propose --version
	assert_output --regexp '^kg-propose \(kernelgraph\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "--exhaustive writes one candidate per valid configuration, first parameter slowest" {
	run_tool 0 kg-propose --exhaustive --spec "$MINIMAL"
	assert_stderr_empty
	[ "${#lines[@]}" -eq 14 ]
	assert_line --index 0 '{"v":1,"kernel":"vector_add","candidate":{"id":"exhaustive-1","proposer":"exhaustive","config":{"block_size_x":32,"tile":1}}}'
	assert_line --index 1 '{"v":1,"kernel":"vector_add","candidate":{"id":"exhaustive-2","proposer":"exhaustive","config":{"block_size_x":32,"tile":2}}}'
	assert_line --index 13 '{"v":1,"kernel":"vector_add","candidate":{"id":"exhaustive-14","proposer":"exhaustive","config":{"block_size_x":256,"tile":2}}}'
}

@test "values keep their JSON types: ints, floats, booleans and strings" {
	run_tool 0 kg-propose --exhaustive --spec "$FIXTURES/t1/constructs.json"
	assert_line --index 0 '{"v":1,"kernel":"constructs","candidate":{"id":"exhaustive-1","proposer":"exhaustive","config":{"block_x":32,"block_y":1,"tile":1,"vec":1,"ratio":0.5,"flag":true,"layout":"row","shift":0,"unroll":1}}}'
}

@test "--count prints only the number" {
	run_tool 0 kg-propose -x -c -s "$MINIMAL"
	assert_output 14
	assert_stderr_empty
}

@test "--verbose reports the space on stderr; --quiet silences it" {
	run_tool 0 kg-propose -x -v -s "$MINIMAL"
	assert_stderr "$(printf '%s\n' "kg-propose: $MINIMAL: 2 parameters, 1 conditions, 16 Cartesian points" \
		"kg-propose: $MINIMAL: 14 valid configurations")"
	run_tool 0 kg-propose -x -q -s "$MINIMAL"
	assert_stderr_empty
}

@test "usage errors exit 2 with a hint" {
	run_tool 2 kg-propose --spec "$MINIMAL"
	assert_output ""
	assert_stderr "$(printf '%s\n' "kg-propose: --spec goes with --exhaustive or --random" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --random 0 --spec "$MINIMAL"
	assert_stderr "$(printf '%s\n' "kg-propose: --random: '0' is not a whole number from 1 to 2147483647" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --random 3 --exhaustive --spec "$MINIMAL"
	assert_stderr "$(printf '%s\n' "kg-propose: --exhaustive and --random exclude each other" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --api soap
	assert_stderr "$(printf '%s\n' "kg-propose: --api: 'soap' is not chat or responses" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --persona nobody
	assert_stderr "kg-propose: --persona: 'nobody' is neither a built-in persona (throughput, memory, robustness) nor a prompt file"
	run_tool 2 kg-propose a.jsonl b.jsonl
	assert_stderr "$(printf '%s\n' "kg-propose: unexpected argument 'b.jsonl'" "Try 'kg-propose --help' for more information.")"
	hint="Try 'kg-propose --help' for more information."
	run_tool 2 kg-propose --format yaml
	assert_stderr "$(printf '%s\n' "kg-propose: --format: 'yaml' is not schema, json or none" "$hint")"
	run_tool 2 kg-propose --timeout soon
	assert_stderr "$(printf '%s\n' "kg-propose: --timeout: 'soon' is not a number of seconds from 0 to 1000000" "$hint")"
	# the LLM options are lib/llm's, with the bounds kg-relabel has too
	run_tool 2 kg-propose --retries 500
	assert_stderr "$(printf '%s\n' "kg-propose: --retries: '500' is not a whole number from 0 to 100" "$hint")"
	run_tool 2 kg-propose --backoff 2e6
	assert_stderr "$(printf '%s\n' "kg-propose: --backoff: '2e6' is not a number of seconds from 0 to 1000000" "$hint")"
	run_tool 2 kg-propose --seed -1
	assert_stderr "$(printf '%s\n' "kg-propose: --seed: '-1': not a non-negative integer" "$hint")"
	run_tool 2 kg-propose --random 3
	assert_stderr "$(printf '%s\n' "kg-propose: --random needs --spec FILE" "$hint")"
	run_tool 2 kg-propose --count
	assert_stderr "$(printf '%s\n' "kg-propose: --count goes with --exhaustive or --random" "$hint")"
	run_tool 2 kg-propose --random 2 --count --spec "$MINIMAL"
	assert_stderr "$(printf '%s\n' "kg-propose: --count goes with --exhaustive" "$hint")"
	run_tool 2 kg-propose --max-calls 0
	assert_stderr "$(printf '%s\n' "kg-propose: --max-calls: '0' is not a whole number from 1 to 2147483647" "$hint")"
	run_tool 2 kg-propose --persona /nonexistent/p.txt
	assert_stderr "kg-propose: --persona: cannot read the prompt file '/nonexistent/p.txt': No such file or directory"
	run_tool 2 kg-propose --exhaustive
	assert_stderr "$(printf '%s\n' "kg-propose: --exhaustive needs --spec FILE" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --exhaustive --frobnicate
	assert_stderr "$(printf '%s\n' "kg-propose: unknown option '--frobnicate'" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose -x -Z
	assert_stderr "$(printf '%s\n' "kg-propose: unknown option '-Z'" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --exhaustive --spec
	assert_stderr "$(printf '%s\n' "kg-propose: option '--spec' needs an argument" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose -x -s
	assert_stderr "$(printf '%s\n' "kg-propose: option '-s' needs an argument" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose -x -s "$MINIMAL" extra
	assert_stderr "$(printf '%s\n' "kg-propose: unexpected argument 'extra'" "Try 'kg-propose --help' for more information.")"
}

@test "a full disk is an I/O error, exit 4" {
	[ -w /dev/full ]
	run_tool 4 bash -c "kg-propose -x -s '$MINIMAL' > /dev/full"
	assert_stderr "kg-propose: cannot write to standard output: No space left on device"
	run_tool 4 bash -c "kg-propose -x -s '$FIXTURES/t1/stencil_22m.json' > /dev/full"
	assert_stderr "kg-propose: cannot write to standard output: No space left on device"
}

@test "a reader that stops early ends the writer quietly" {
	run_tool 0 bash -c "set -o pipefail; kg-propose -x -s '$FIXTURES/t1/stencil_22m.json' | head -1 > /dev/null; echo \${PIPESTATUS[0]}"
	assert_output 141
	assert_stderr_empty
}

@test "--random N: N distinct valid configurations, the same for the same seed" {
	cd "$BATS_TEST_TMPDIR"
	run_tool 0 kg-propose --random 5 --seed 7 --spec "$MINIMAL"
	[ "${#lines[@]}" -eq 5 ]
	first="$output"
	[ "$(jq -c .candidate.config <<<"$output" | sort -u | wc -l)" -eq 5 ]
	# each is one of the valid configurations --exhaustive lists
	kg-propose -x -s "$MINIMAL" | jq -c .candidate.config | sort > all
	jq -c .candidate.config <<<"$output" | sort | comm -23 - all > outside
	[ ! -s outside ]
	assert_line --index 0 --regexp '^\{"v":1,"kernel":"vector_add","candidate":\{"id":"random-1","proposer":"random","config":\{'
	run_tool 0 kg-propose --random 5 --seed 7 --spec "$MINIMAL"
	[ "$output" = "$first" ]
	run_tool 0 kg-propose --random 5 --seed 8 --spec "$MINIMAL"
	[ "$output" != "$first" ]
	# more than the space holds: all of it, once each
	run_tool 0 kg-propose --random 100 --spec "$MINIMAL"
	[ "$(jq -c .candidate.config <<<"$output" | sort -u | wc -l)" -eq 14 ]
}

# billion_points CONDITION FILE: a spec of 1.1 billion points (p0 to p8) whose one condition
# reads every parameter, so that no subspace can be skipped.
billion_points() {
	jq --arg c "$1" '.ConfigurationSpace = {
		"TuningParameters": ([{"Name": "p0", "Type": "int", "Values": "list(range(11))"}] +
			[range(1; 9) | {"Name": "p\(.)", "Type": "int", "Values": "list(range(10))"}]),
		"Conditions": [{"Parameters": [range(9) | "p\(.)"], "Expression": $c}]}
		| .KernelSpecification.GlobalSize.X = "1024" | .KernelSpecification.LocalSize.X = "32"' "$MINIMAL" > "$2"
}

@test "--random on a 1.1-billion-point space stops counting once it is too large to list" {
	# Counting it all took 11 minutes, and the rules (and --random) only ask whether it
	# exceeds what they list.
	billion_points "p0 + p1 + p2 + p3 + p4 + p5 + p6 + p7 + p8 >= 0" "$BATS_TEST_TMPDIR/big.json"
	run -0 --separate-stderr timeout 20 kg-propose -v --random 3 --seed 1 --spec "$BATS_TEST_TMPDIR/big.json"
	[ "${#lines[@]}" -eq 3 ]
	[ "$(jq -c .candidate.config <<<"$output" | sort -u | wc -l)" -eq 3 ]
	[[ "$stderr" == *"1100000000 Cartesian points"* ]]
}

@test "a sparse space of 1.1 billion points counts as too large to list after 16 x the limit of tries, not a walk of all" {
	# The sum of nine parameters at most 3: 220 valid points among 1.1 billion.
	billion_points "p0 + p1 + p2 + p3 + p4 + p5 + p6 + p7 + p8 <= 3" "$BATS_TEST_TMPDIR/sparse.json"
	run_tool 0 timeout 20 "$KG_TEST_DRIVER" t1-count "$BATS_TEST_TMPDIR/sparse.json" 200000
	[ "$output" = more ]
	jq '.ConfigurationSpace.TuningParameters |= map(.Values = "list(range(4))")' "$BATS_TEST_TMPDIR/sparse.json" > "$BATS_TEST_TMPDIR/small.json"
	run_tool 0 "$KG_TEST_DRIVER" t1-count "$BATS_TEST_TMPDIR/small.json" 200000
	[ "$output" = 220 ]
}

@test "a sparse space random draws miss is walked instead, and says so: 112 valid points among 12.8 million" {
	jq '.ConfigurationSpace.TuningParameters += [range(5) | {Name: "p\(.)", Type: "int", Values: "list(range(10))", Default: 9}]
		| .ConfigurationSpace.Conditions += [{Parameters: ["p0", "p1", "p2", "p3", "p4"], Expression: "p0 + p1 + p2 + p3 + p4 == 45"}]' \
		"$KG_ROOT/examples/vector_add/vector_add.json" >"$BATS_TEST_TMPDIR/sparse.json"
	run_tool 0 kg-propose --exhaustive --count --spec "$BATS_TEST_TMPDIR/sparse.json"
	assert_output 112
	run_tool 0 kg-propose --random 3 --seed 1 --spec "$BATS_TEST_TMPDIR/sparse.json"
	[ "$(jq -c .candidate.config <<<"$output" | sort -u | wc -l)" -eq 3 ]
	[ "$(jq -r '.candidate.config | .p0 + .p1 + .p2 + .p3 + .p4' <<<"$output" | sort -u)" = 45 ]
	assert_stderr "kg-propose: warning: $BATS_TEST_TMPDIR/sparse.json: ConfigurationSpace: 3000 random draws found no valid configuration (a sparse space); drawing from the 112 a walk of the whole space listed"
	# an empty space is still one
	jq '.ConfigurationSpace.Conditions[1].Expression = "p0 + p1 + p2 + p3 + p4 == 46"' "$BATS_TEST_TMPDIR/sparse.json" >"$BATS_TEST_TMPDIR/none.json"
	run_tool 1 kg-propose --random 1 --spec "$BATS_TEST_TMPDIR/none.json"
	assert_stderr "kg-propose: $BATS_TEST_TMPDIR/none.json: ConfigurationSpace: no configuration satisfies the conditions (of 12800000 Cartesian points)"
}

@test "a condition just under the limit of one evaluation exhausts the spec's budget of expression work in seconds, not minutes" {
	jq '.ConfigurationSpace.Conditions += [{Parameters: ["block_size_x"],
		Expression: "len([x for x in range(9*10**6) if x < block_size_x]) >= 0"}]' \
		"$KG_ROOT/examples/vector_add/vector_add.json" >"$BATS_TEST_TMPDIR/costly.json"
	# CPU seconds, not the wall clock: the suite runs its files at once, on a loaded machine too
	TIMEFORMAT='%U %S'
	{ time run_tool 1 kg-propose --random 1 --spec "$BATS_TEST_TMPDIR/costly.json"; } 2>"$BATS_TEST_TMPDIR/cpu"
	awk '{ exit !($1 + $2 <= 10) }' "$BATS_TEST_TMPDIR/cpu" # 25 s when each evaluation had its own limit alone
	[[ "$stderr" == "kg-propose: $BATS_TEST_TMPDIR/costly.json: ConfigurationSpace.Conditions[1].Expression: column 35: the spec's budget of expression work exceeded: more than 200000000 steps beyond the first 10000 of each evaluation in \"len("*"(with block_size_x="* ]]
	run_tool 1 kg-propose --exhaustive --count --spec "$BATS_TEST_TMPDIR/costly.json"
	[[ "$stderr" == *"the spec's budget of expression work exceeded"* ]]
}

# The run scale_run_template makes (test_helper.bash).
RUN=out/kernels/scale

setup_file() {
	scale_run_template "$BATS_FILE_TMPDIR/template"
}

# fresh_run: a copy of the template run in the test's directory.
fresh_run() {
	cd "$BATS_TEST_TMPDIR"
	cp -r "$BATS_FILE_TMPDIR/template/out" .
}

# expansion: kg-select's next expand record, without the cap its widening puts on the children
# (the tests below look at every candidate of an expansion).
expansion() {
	kg-select "$RUN" | jq -c 'del(.children)'
}

# measure: builds the candidates on stdin, gives each a measurement and updates the graph.
measure() {
	kg-build | jq -c '. + {bench: {status: "ok", median_ms: 0.9, speedup: 1.1, speedup_ci: [1.05, 1.15]}}' |
		kg-select --update "$RUN" >/dev/null
}

@test "--rules answers an expand record with the neighbours and random configurations; other records pass" {
	fresh_run
	expansion > pick.jsonl
	{ echo '{"op":"stop","reason":"x"}'; cat pick.jsonl; echo '{"other":1}'; } > in.jsonl
	run_tool 0 kg-propose --rules --model-picks 0 in.jsonl
	assert_stderr_empty
	[ "${#lines[@]}" -eq 8 ]
	assert_line --index 0 '{"op":"stop","reason":"x"}'
	assert_line --index 7 '{"other":1}'
	# the expand record, whole, with a candidate each
	[ "$(sed -n 2p <<<"$output" | jq -c 'del(.candidate)')" = "$(cat pick.jsonl)" ]
	jq -c '.candidate | [.id, .proposer, .method, .detail, .config, .prior]' <<<"$output" | sed -n 2,7p > got
	cat > want <<-'END'
	["c1-n0-1","rules:neighbour","change_block_sizes","block_size_x 128 -> 64",{"block_size_x":64,"items_per_thread":1,"use_fma":false},1]
	["c1-n0-2","rules:neighbour","change_block_sizes","block_size_x 128 -> 256",{"block_size_x":256,"items_per_thread":1,"use_fma":false},1]
	["c1-n0-3","rules:neighbour","change_work_per_thread","items_per_thread 1 -> 2",{"block_size_x":128,"items_per_thread":2,"use_fma":false},1]
	["c1-n0-4","rules:neighbour","switch_algorithm","use_fma false -> true",{"block_size_x":128,"items_per_thread":1,"use_fma":true},1]
	END
	head -4 got | diff want -
	[ "$(sed -n 5,6p got | jq -r '.[1]' | sort -u)" = "rules:random" ]
	# a random move is named by what it changed: one kind of parameter, or several
	sed -n 5,6p got | jq -r '.[2]' | grep -qxE 'change_block_sizes|change_work_per_thread|switch_algorithm|retune_configuration'
	# without a key the rules are the default; --rules-random 0 leaves the neighbours alone
	run_tool 0 env -u OPENAI_API_KEY kg-propose -v --model-picks 0 --rules-random 0 pick.jsonl
	assert_line --partial --index 0 '"candidate":{"id":"c1-n0-1","proposer":"rules:neighbour"'
	[ "${#lines[@]}" -eq 4 ]
	[ "$(head -1 <<<"$stderr")" = "kg-propose: proposing with the rules" ]
	# kg-select's "budget_left" caps the expansion: the first candidates are kept
	jq -c '. + {budget_left: 2}' pick.jsonl >budget.jsonl
	run_tool 0 kg-propose -v --rules --model-picks 0 budget.jsonl
	[ "$(jq -r .candidate.id <<<"$output" | tr '\n' ' ')" = "c1-n0-1 c1-n0-2 " ]
	[[ "$stderr" == *": 2 candidates (0 dropped, 4 left out by the build budget, 0 by the widening)"* ]]
	# its "children" (what the widening allows now) caps the rules' candidates too
	jq -c '. + {children: 3}' pick.jsonl >widening.jsonl
	run_tool 0 kg-propose -v --rules --model-picks 0 widening.jsonl
	[ "$(jq -r .candidate.id <<<"$output" | tr '\n' ' ')" = "c1-n0-1 c1-n0-2 c1-n0-3 " ]
	[[ "$stderr" == *": 3 candidates (0 dropped, 0 left out by the build budget, 3 by the widening)"* ]]
}

@test "batch_budget: a batch's picks share the builds left, in order; one past them is not proposed, and its node not marked exhausted" {
	fresh_run
	expansion | kg-propose --rules --model-picks 0 | head -2 | measure
	# kg-select's batch at the budget's end: three picks of one build each, two for the batch
	kg-select --batch 3 --budget-builds "$(($(kg-select --export "$RUN" | jq .builds) + 2))" "$RUN" >picks.jsonl
	[ "$(jq -c '[.op, .budget_left, .batch_budget]' picks.jsonl | sort -u)" = '["expand",1,2]' ]
	[ "$(wc -l <picks.jsonl)" -eq 3 ]
	{
		cat picks.jsonl
		sed -n 1p picks.jsonl | jq -c '. + {op: "evaluate", edge: 0, candidate: {id: "e", method: "m"}} | del(.children)'
		sed -n 1p picks.jsonl | jq -c '.iter += 1 | .batch_budget = 1' # the next batch has its own
	} >batch.jsonl
	run_tool 0 kg-propose --rules --model-picks 0 batch.jsonl
	assert_stderr_empty
	[ "${#lines[@]}" -eq 5 ]
	[ "$(jq -r '.candidate.id // .propose.status // "none"' <<<"$output" | sed 's/-.*-/-/' | tr '\n' ' ')" = \
		"c2-1 c2-1 over_budget none c3-1 " ]
	# the evaluation past the budget is passed on without its candidate (nothing to build)
	[ "$(sed -n 4p <<<"$output" | jq -c '[.op, .edge, has("candidate")]')" = '["evaluate",0,false]' ]
	# kg-select --update learns nothing from the pick past the budget: its node may be expanded again
	node=$(sed -n 3p <<<"$output" | jq .node_id)
	sed -n 3p <<<"$output" | kg-select --update "$RUN" >/dev/null
	[ "$(kg-select --export "$RUN" | jq ".nodes[$node].exhausted")" = null ]
	# (as an expansion kg-propose found nothing new for is)
	sed -n 3p <<<"$output" | jq -c '.propose.status = "empty"' | kg-select --update "$RUN" >/dev/null
	[ "$(kg-select --export "$RUN" | jq ".nodes[$node].exhausted")" = '"exhausted"' ]
	# without batch_budget each pick keeps to its own budget_left alone
	run_tool 0 kg-propose --rules --model-picks 0 <(sed -n 1,3p batch.jsonl | jq -c 'del(.batch_budget)')
	[ "$(jq -r .candidate.id <<<"$output" | sed 's/-.*-/-/' | tr '\n' ' ')" = "c2-1 c2-1 c2-1 " ]
}

@test "a configuration move is named by the spec's KernelGraph.Methods, else by the parameter's name and values" {
	fresh_run
	jq '.KernelGraph.Methods = {"block_size_x": "change_occupancy"}' "$RUN/spec.json" >spec.json && mv spec.json "$RUN/spec.json"
	expansion > pick.jsonl
	run_tool 0 kg-propose --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -r .candidate.method <<<"$output" | paste -sd' ')" = \
		'change_occupancy change_occupancy change_work_per_thread switch_algorithm' ]
}

@test "--within: the rules propose only configurations the table measured (a replay can answer)" {
	fresh_run
	expansion > pick.jsonl
	jq -n '{results: [[128, 1, false], [256, 1, false], [64, 4, true]] | map({configuration: {block_size_x: .[0],
		items_per_thread: .[1], use_fma: .[2]}, times: {runtimes: [1.0]}, invalidity: "correct", correctness: 1,
		measurements: []})}' > t4.json
	run_tool 0 kg-propose --rules --model-picks 0 --within t4.json pick.jsonl
	# the one neighbour the table holds, then the one recorded configuration left, drawn at random
	[ "$(jq -c '.candidate | [.proposer, .config]' <<<"$output" | paste -sd' ')" = \
		'["rules:neighbour",{"block_size_x":256,"items_per_thread":1,"use_fma":false}] ["rules:random",{"block_size_x":64,"items_per_thread":4,"use_fma":true}]' ]
	# an events.jsonl is a table too: here it holds the root alone, so nothing is left to propose
	run_tool 0 kg-propose --rules --model-picks 0 --within "$RUN/events.jsonl" pick.jsonl
	[ "$(jq -r .propose.status <<<"$output")" = empty ]
	run_tool 2 kg-propose --within /nonexistent.json pick.jsonl
	assert_stderr "$(printf '%s\n' "kg-propose: cannot read '/nonexistent.json': No such file or directory" \
		"kg-propose: --within: '/nonexistent.json' is not a table of measurements" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --within t4.json --exhaustive --spec "$RUN/spec.json"
	assert_stderr "$(printf '%s\n' "kg-propose: --within goes with the proposers, not with --exhaustive" "Try 'kg-propose --help' for more information.")"
}

@test "--pending: candidates in flight are not proposed again; the same seed and file give the same candidates" {
	fresh_run
	expansion > pick.jsonl
	kg-propose --rules --model-picks 0 --seed 3 pick.jsonl > first.jsonl
	[ "$(wc -l < first.jsonl)" -eq 6 ]
	# the same expansion asked again while the first answer is in flight: nothing of it again
	run_tool 0 kg-propose --rules --model-picks 0 --seed 3 --pending first.jsonl pick.jsonl
	assert_stderr_empty
	[ "${#lines[@]}" -ge 1 ]
	jq -c .candidate.config first.jsonl | sort > flying
	[ "$(jq -c 'select(.candidate) | .candidate.config' <<<"$output" | sort | comm -12 - flying)" = "" ]
	echo "$output" > again.jsonl
	kg-propose --rules --model-picks 0 --seed 3 --pending first.jsonl pick.jsonl | cmp - again.jsonl
	# without --pending, or with records of another run, the first answer again
	kg-propose --rules --model-picks 0 --seed 3 pick.jsonl | cmp - first.jsonl
	jq -c '.run = "elsewhere"' first.jsonl > other.jsonl
	kg-propose --rules --model-picks 0 --seed 3 --pending other.jsonl pick.jsonl | cmp - first.jsonl
	# a bad line is named and the rest still counts; an unreadable file is a usage error
	{ echo 'not json'; head -3 first.jsonl; } > bad.jsonl
	run_tool 1 kg-propose --rules --model-picks 0 --seed 3 --pending bad.jsonl pick.jsonl
	assert_stderr "kg-propose: bad.jsonl:1: invalid JSON at column 1"
	[ "$(jq -c 'select(.candidate) | .candidate.config' <<<"$output" | sort | comm -12 - <(head -3 first.jsonl | jq -c .candidate.config | sort))" = "" ]
	run_tool 2 kg-propose --rules --model-picks 0 --pending missing.jsonl pick.jsonl
	assert_stderr "kg-propose: cannot open 'missing.jsonl': No such file or directory"
	run_tool 2 kg-propose --pending first.jsonl --random 2 --spec "$RUN/spec.json"
	assert_stderr "$(printf '%s\n' "kg-propose: --pending goes with the proposers, not with --random" "Try 'kg-propose --help' for more information.")"
}

@test "a damaged line of the run's log is named and skipped; the rest of the log still counts" {
	fresh_run
	expansion > pick.jsonl
	kg-propose --rules --model-picks 0 --seed 3 pick.jsonl | measure
	expansion > pick.jsonl
	kg-propose --rules --model-picks 0 --seed 3 pick.jsonl > good.jsonl
	n=$(wc -l < "$RUN/events.jsonl")
	echo '{"op": "expand", "build": {' >> "$RUN/events.jsonl"
	run_tool 0 kg-propose --rules --model-picks 0 --seed 3 pick.jsonl
	assert_stderr "kg-propose: $RUN/events.jsonl:$((n + 1)): invalid JSON at column 27"
	[ "$output" = "$(cat good.jsonl)" ]
}

@test "--rules proposes only valid, unseen configurations, and the same seed gives the same candidates" {
	fresh_run
	kg-propose -x -s "$RUN/spec.json" | jq -c .candidate.config | sort > valid
	: > proposed
	for i in $(seq 12); do
		expansion > pick.jsonl
		kg-propose --rules --model-picks 0 --seed 3 pick.jsonl > c.jsonl
		kg-propose --rules --model-picks 0 --seed 3 pick.jsonl | cmp c.jsonl -
		if jq -e .propose c.jsonl >/dev/null; then break; fi
		jq -c .candidate.config c.jsonl | sort | comm -23 - valid > outside
		[ ! -s outside ]
		# never a configuration a node of the run already has (one source throughout)
		jq -c '.build.config // empty' "$RUN/events.jsonl" | sort -u > built
		jq -c .candidate.config c.jsonl | sort | comm -12 - built > again
		[ ! -s again ]
		jq -c .candidate.config c.jsonl >> proposed
		measure < c.jsonl
	done
	[ "$(sort proposed | uniq -d | wc -l)" -eq 0 ]
	# the whole space is built, then an expansion has nothing left and says so
	[ "$(jq -c '.build.config // empty' "$RUN/events.jsonl" | sort -u | cmp - valid && echo same)" = same ]
	[ "$(jq -c .propose c.jsonl)" = '{"status":"empty","dropped":4,"errors":[]}' ]
}

@test "--rules offers a ready patch only where the run can build it: its Arch of the node's generation (sm_90a on sm_90), not another's; kg-build gives it that Arch" {
	fresh_run
	patch=$'--- a/scale.cu\n+++ b/scale.cu\n@@ -9 +9 @@\n-\t\t\ty[i] = scale_op(x[i]);\n+\t\t\ty[i] = scale_op(__ldg(&x[i]));\n'
	jq --arg p "$patch" '. + {KernelGraph: {Patches: [{Name: "ampere", Arch: "sm_80", Patch: $p}, {Name: "hopper", Arch: "sm_90a", Patch: $p}]}}' \
		"$RUN/spec.json" > s && mv s "$RUN/spec.json"
	expansion > pick.jsonl
	[ "$(jq -r .arch "$RUN/variants/$(jq -r .node pick.jsonl)/build.json")" = sm_90 ] # no GPU: the default
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -r 'select(.candidate.library) | .candidate.library' <<<"$output")" = hopper ]
	[[ "$stderr" == *"rules:library: ampere: needs sm_80, and the run builds for sm_90: not offered"* ]]
	# built, it gets sm_90a, and so do the variants below it; the others keep the run's sm_90
	jq -c 'select(.candidate.library)' <<<"$output" >two.jsonl
	jq -c 'select(.candidate.library | not)' <<<"$output" | head -1 >>two.jsonl
	kg-build two.jsonl >built.jsonl
	[ "$(jq -c '[.candidate.library, .build.status, .build.arch]' built.jsonl | paste -sd' ')" = '["hopper","ok","sm_90a"] [null,"ok","sm_90"]' ]
	grep -q -- '--gpu-architecture=sm_90a' <(jq -r 'select(.candidate.library) | .build.options[]' built.jsonl)
	hopper=$(jq -r 'select(.candidate.library) | .build.state' built.jsonl)
	jq -cn --arg run "$RUN" --arg n "$hopper" '{v: 1, run: $run, node: $n, candidate: {id: "below", config: {block_size_x: 64}}}' | kg-build >below.jsonl
	[ "$(jq -c '[.build.status, .build.arch]' below.jsonl)" = '["ok","sm_90a"]' ]
}

# replayed_run DEVICE: in the test's directory, the run $RUN as kg-init --replay makes it, its
# table (every valid configuration, measured on DEVICE) answering kg-bench, and the ready
# patches "ampere" (Arch sm_80) and "hopper" (Arch sm_90a) in its spec.
replayed_run() {
	cd "$BATS_TEST_TMPDIR"
	mkdir -p "$RUN"
	cp "$FIXTURES"/build/{scale.cu,scale_helper.cuh} "$RUN/"
	patch=$'--- a/scale.cu\n+++ b/scale.cu\n@@ -9 +9 @@\n-\t\t\ty[i] = scale_op(x[i]);\n+\t\t\ty[i] = scale_op(__ldg(&x[i]));\n'
	jq --arg p "$patch" '. + {KernelGraph: {Patches: [{Name: "ampere", Arch: "sm_80", Patch: $p}, {Name: "hopper", Arch: "sm_90a", Patch: $p}]}}' \
		"$FIXTURES/build/spec.json" >"$RUN/spec.json"
	kg-propose --exhaustive --spec "$RUN/spec.json" | jq -s --arg d "$1" '{schema_version: "1.0.0",
		metadata: {timeunit: "milliseconds", hardware: {hardware_description: $d}},
		results: map({configuration: .candidate.config, times: {runtimes: [1.0, 1.1, 0.9]}, invalidity: "correct",
			correctness: 1, objectives: ["time"], measurements: []})}' >"$RUN/replay.table"
	jq -cn --arg run "$RUN" '{v: 1, run: $run, kernel: "scale", candidate: {id: "baseline"}}' | kg-build | kg-bench |
		kg-select --update "$RUN" >/dev/null
}

@test "a replayed run offers the ready patches its table's GPU can build, built for it, with no option and no GPU" {
	replayed_run 'NVIDIA A100-SXM4-80GB'
	expansion >pick.jsonl
	[ "$(jq -r .arch "$RUN/variants/$(jq -r .node pick.jsonl)/build.json")" = sm_80 ]
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -r 'select(.candidate.library) | .candidate.library' <<<"$output")" = ampere ]
	node=$(jq -r .node pick.jsonl)
	assert_stderr "$(printf '%s\n' "kg-propose: proposing with the rules" \
		"kg-propose: $RUN: node $node: rules:library: hopper: needs sm_90a, and the run builds for sm_80: not offered" \
		"kg-propose: $RUN: node $node: 5 candidates (0 dropped, 0 left out by the build budget, 0 by the widening)")"
	[ "$(jq -c 'select(.candidate.library) | [.candidate.library, .build.status, .build.arch]' < <(kg-build <<<"$output"))" = '["ampere","ok","sm_80"]' ]
	# an H100's table: sm_90a for the run, the Hopper patch offered, the Ampere one not
	rm -rf "$BATS_TEST_TMPDIR/out"
	replayed_run 'NVIDIA H100 80GB HBM3'
	expansion >pick.jsonl
	[ "$(jq -r .arch "$RUN/variants/$(jq -r .node pick.jsonl)/build.json")" = sm_90a ]
	run_tool 0 kg-propose --rules --model-picks 0 --rules-random 0 pick.jsonl
	assert_stderr_empty
	[ "$(jq -r 'select(.candidate.library) | .candidate.library' <<<"$output")" = hopper ]
	[ "$(jq -c 'select(.candidate.library) | [.candidate.library, .build.status, .build.arch]' < <(kg-build <<<"$output"))" = '["hopper","ok","sm_90a"]' ]
}

@test "--rules offers the spec's ready patches until one is applied on the path" {
	fresh_run
	patch=$'--- a/scale.cu\n+++ b/scale.cu\n@@ -9 +9 @@\n-\t\t\ty[i] = scale_op(x[i]);\n+\t\t\ty[i] = scale_op(__ldg(&x[i]));\n'
	jq --arg p "$patch" '. + {KernelGraph: {Patches: [{Name: "ldg", Method: "read_only_cache", Detail: "loads through the read-only cache", Patch: $p},
		{Name: "broken"}]}}' "$RUN/spec.json" > s && mv s "$RUN/spec.json"
	# a patch file that is not there, and a library that is not a list, are warned about and skipped
	jq '.KernelGraph.Patches += [{Name: "gone", PatchFile: "gone.diff"}]' "$RUN/spec.json" > s
	cp -r out keep && mv s "$RUN/spec.json"
	expansion > pick.jsonl
	run_tool 0 kg-propose --rules --model-picks 0 --rules-random 0 pick.jsonl
	[[ "$stderr" == *"kg-propose: warning: $RUN/spec.json: KernelGraph.Patches[2].PatchFile: cannot read '$RUN/gone.diff': No such file or directory"* ]]
	# an After that names no other entry, or is not a string
	jq '.KernelGraph.Patches += [{Name: "orphan", Patch: .KernelGraph.Patches[0].Patch, After: "nothing"},
		{Name: "self", Patch: .KernelGraph.Patches[0].Patch, After: "self"}, {Name: "typed", Patch: .KernelGraph.Patches[0].Patch, After: 3}]' \
		"$RUN/spec.json" > s && mv s "$RUN/spec.json"
	run_tool 0 kg-propose --rules --model-picks 0 --rules-random 0 pick.jsonl
	for k in 3 4 5; do
		[[ "$stderr" == *"kg-propose: warning: $RUN/spec.json: KernelGraph.Patches[$k].After: must be the Name of another entry; ignored"* ]]
	done
	[ "$(jq -r 'select(.candidate.library) | .candidate.library' <<<"$output")" = ldg ]
	jq '.KernelGraph.Patches = {}' "$RUN/spec.json" > s && mv s "$RUN/spec.json"
	run_tool 0 kg-propose --rules --model-picks 0 --rules-random 0 pick.jsonl
	assert_stderr "kg-propose: warning: $RUN/spec.json: KernelGraph.Patches: must be an array of patches; ignored"
	[ "${#lines[@]}" -eq 4 ]
	rm -rf out && mv keep out
	expansion > pick.jsonl
	run_tool 0 kg-propose --rules --model-picks 0 --rules-random 0 pick.jsonl
	assert_stderr "kg-propose: warning: $RUN/spec.json: KernelGraph.Patches[1]: needs a Name, a Patch or PatchFile, and Config (if any) an object; ignored"
	[ "$(jq -c 'select(.candidate.library) | .candidate | [.id, .proposer, .method, .detail, .library, .prior, .config]' <<<"$output")" = \
		'["c1-n0-5","rules:library","read_only_cache","loads through the read-only cache","ldg",1,{"block_size_x":128,"items_per_thread":1,"use_fma":false}]' ]
	[ "$(jq -r 'select(.candidate.library) | .candidate.patch' <<<"$output")" = "${patch%$'\n'}" ]
	# built and measured, it is on the path of its child, which is not offered it again
	jq -c 'select(.candidate.library)' <<<"$output" > ldg.jsonl
	measure < ldg.jsonl
	[ "$(jq -r 'select(.candidate.library) | .build.status' "$RUN/events.jsonl")" = ok ]
	child=$(jq -r 'select(.candidate.library) | .update.child' "$RUN/events.jsonl")
	root=$(jq -r .node pick.jsonl)
	jq -c --arg c "$child" --arg r "$root" '.node = $c | .node_id = 1 | .path = [$r, $c]' pick.jsonl > child.jsonl
	run_tool 0 kg-propose --rules --model-picks 0 --rules-random 0 child.jsonl
	[ "$(jq -c 'select(.candidate.library)' <<<"$output")" = "" ]
	[ "${#lines[@]}" -eq 4 ]
	# measured once, it is offered again only at the incumbent (here the patched child); and
	# not twice from one node
	[ "$(jq -r .state "$RUN/best.json")" = "$child" ]
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -c 'select(.candidate.library)' <<<"$output")" = "" ]
	[[ "$stderr" == *"node $root: rules:library: ldg: tried elsewhere in the run; offered again only at the incumbent"* ]]
	jq --arg r "$root" '.state = $r' "$RUN/best.json" > b && mv b "$RUN/best.json"
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -c 'select(.candidate.library)' <<<"$output")" = "" ]
	[[ "$stderr" == *"rules:library: loads through the read-only cache: dropped: already proposed"* ]]
	# a patch that failed to build counts as tried too: a GPU that cannot compile it at one
	# node cannot at another
	jq -c 'if .candidate.library then del(.bench) | .build.status = "compile_failed" else . end' "$RUN/events.jsonl" > e
	mv e "$RUN/events.jsonl"
	jq --arg c "$child" '.state = $c' "$RUN/best.json" > b && mv b "$RUN/best.json"
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -c 'select(.candidate.library)' <<<"$output")" = "" ]
	[[ "$stderr" == *"node $root: rules:library: ldg: tried elsewhere in the run; offered again only at the incumbent"* ]]
}

@test "--rules offers a ready patch only where GNU patch applies it to the node's kernel" {
	fresh_run
	patch=$'--- a/scale.cu\n+++ b/scale.cu\n@@ -9 +9 @@\n-\t\t\ty[i] = scale_op(x[i]);\n+\t\t\ty[i] = scale_op(__ldg(&x[i]));\n'
	# a diff of another kernel: the line it changes is not in this one
	stale=${patch//scale_op(x/twice(x}
	jq --arg p "$patch" --arg s "$stale" '. + {KernelGraph: {Patches: [{Name: "ldg", Method: "read_only_cache", Patch: $p},
		{Name: "stale", Method: "read_only_cache", Patch: $s}]}}' "$RUN/spec.json" > s && mv s "$RUN/spec.json"
	expansion > pick.jsonl
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -r 'select(.candidate.library) | .candidate.library' <<<"$output")" = ldg ]
	[[ "$stderr" == *"rules:library: stale: does not apply to the node's kernel: Hunk #1 FAILED at 9."* ]]
	# nothing is left behind in TMPDIR
	mkdir tmp
	TMPDIR=$PWD/tmp run_tool 0 kg-propose --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ -z "$(ls -A tmp)" ]
	# where it cannot be tried (no directory to try it in), it is offered, saying so
	TMPDIR=$PWD/missing run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -r 'select(.candidate.library) | .candidate.library' <<<"$output" | paste -sd' ')" = "ldg stale" ]
	[[ "$stderr" == *"rules:library: stale: not tried on the node's kernel, offered: cannot make a directory to try it in (No such file or directory)"* ]]
}

@test "--rules keeps each node's proposals to the configurations its kernel takes: KernelGraph.Conditions, a ready patch's Conditions" {
	fresh_run
	patch=$'--- a/scale.cu\n+++ b/scale.cu\n@@ -9 +9 @@\n-\t\t\ty[i] = scale_op(x[i]);\n+\t\t\ty[i] = scale_op(__ldg(&x[i]));\n'
	# the spec's kernel takes use_fma false only; the patched one true only
	jq --arg p "$patch" '. + {KernelGraph: {Conditions: [{Expression: "not use_fma"}],
		Patches: [{Name: "ldg", Method: "read_only_cache", Patch: $p, Config: {use_fma: true}, Conditions: [{Parameters: ["use_fma"], Expression: "use_fma"}]}]}}' \
		"$RUN/spec.json" > s && mv s "$RUN/spec.json"
	expansion > pick.jsonl
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 20 pick.jsonl
	# 7 configurations of the spec's kernel besides the root's, and the patch in its Config
	[ "$(jq -c 'select(.candidate.library == null) | .candidate.config.use_fma' <<<"$output" | sort | uniq -c | tr -s ' ')" = ' 7 false' ]
	[ "$(jq -c 'select(.candidate.library) | .candidate.config' <<<"$output")" = '{"block_size_x":128,"items_per_thread":1,"use_fma":true}' ]
	# the neighbour that turns use_fma on is not offered: the spec's kernel does not take it
	[ "$(jq -c 'select(.candidate.proposer == "rules:neighbour") | .candidate.detail' <<<"$output" | grep -c use_fma)" -eq 0 ]
	jq -c 'select(.candidate.library)' <<<"$output" | measure
	child=$(jq -r 'select(.candidate.library) | .update.child' "$RUN/events.jsonl")
	jq -c --arg c "$child" --arg r "$(jq -r .node pick.jsonl)" '.node = $c | .node_id = 1 | .path = [$r, $c] | .config.use_fma = true' \
		pick.jsonl > child.jsonl
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 20 child.jsonl
	# below the patch, only use_fma true: the 7 others of the patched kernel
	[ "$(jq -c '.candidate.config.use_fma' <<<"$output" | sort | uniq -c | tr -s ' ')" = ' 7 true' ]
	# a ready patch whose Config its own kernel does not take is dropped, saying which condition failed
	jq '.KernelGraph.Patches += [{Name: "off", Patch: .KernelGraph.Patches[0].Patch, Detail: "off", Config: {use_fma: false},
		Conditions: [{Expression: "use_fma"}]}]' "$RUN/spec.json" > s && mv s "$RUN/spec.json"
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -c 'select(.candidate.library == "off")' <<<"$output")" = "" ]
	[[ "$stderr" == *'rules:library: off: dropped: a configuration its kernel does not take: KernelGraph.Patches[1].Conditions[0].Expression does not hold: "use_fma" (with use_fma=False)'* ]]
	# a patch of the patched kernel (After): only below that patch, and its Conditions are the
	# kernel's from there on, the latest patch's that states some
	wide=$'--- a/scale.cu\n+++ b/scale.cu\n@@ -10 +10 @@\n-\t\t\ty[i] = scale_op(__ldg(&x[i]));\n+\t\t\ty[i] = scale_op(__ldg(x + i));\n'
	jq --arg p "$wide" '.KernelGraph.Patches += [{Name: "wide", After: "ldg", Patch: $p, Detail: "wide",
		Config: {block_size_x: 256}, Conditions: [{Expression: "use_fma and block_size_x == 256"}]}]' "$RUN/spec.json" > s && mv s "$RUN/spec.json"
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 pick.jsonl
	[ "$(jq -c 'select(.candidate.library == "wide")' <<<"$output")" = "" ]
	[[ "$stderr" == *"node $(jq -r .node pick.jsonl): rules:library: wide: applies after ldg, which is not on the path"* ]]
	run_tool 0 kg-propose -v --rules --model-picks 0 --rules-random 0 child.jsonl
	[ "$(jq -c 'select(.candidate.library == "wide") | .candidate.config' <<<"$output")" = '{"block_size_x":256,"items_per_thread":1,"use_fma":true}' ]
	jq -c 'select(.candidate.library == "wide")' <<<"$output" | measure
	grandchild=$(jq -r 'select(.candidate.library == "wide") | .update.child' "$RUN/events.jsonl")
	jq -c --arg g "$grandchild" --arg c "$child" --arg r "$(jq -r .node pick.jsonl)" '.node = $g | .node_id = 2 | .path = [$r, $c, $g]
		| .config = {block_size_x: 256, items_per_thread: 1, use_fma: true}' pick.jsonl > grandchild.jsonl
	[ "$(jq -r 'select(.candidate.library == "wide") | .build.status' "$RUN/events.jsonl")" = ok ]
	run_tool 0 kg-propose --rules --model-picks 0 --rules-random 20 grandchild.jsonl
	# block_size_x 256 with use_fma: items_per_thread 2 is the one other configuration
	[ "$(jq -c '.candidate.config' <<<"$output")" = '{"block_size_x":256,"items_per_thread":2,"use_fma":true}' ]
}

# measure_by_formula: like measure, with a time that depends on the configuration (fastest at
# block_size_x 256, items_per_thread 4) and a failure for one configuration.
measure_by_formula() {
	kg-build | jq -c '.build.config as $c | . + {bench: (if $c == {block_size_x: 64, items_per_thread: 4, use_fma: true}
		then {status: "incorrect"} else {status: "ok", median_ms: (1.0 * 128 / $c.block_size_x + 1.0 / $c.items_per_thread
		+ (if $c.use_fma then 0.1 else 0 end))} end)}' | kg-select --update "$RUN" >/dev/null
}

@test "--rules: random configurations first, then a Gaussian process proposes and prices the moves" {
	fresh_run
	expansion > pick.jsonl
	# the initial design: random configurations (4: with the default, the 5 the model needs)
	run_tool 0 kg-propose -v --rules pick.jsonl
	[ "$(jq -r .candidate.proposer <<<"$output" | sort | uniq -c | tr -s ' ')" = " 4 rules:random" ]
	[[ "$stderr" == *"no model yet (1 configurations measured, 1 correct; 5 needed)"* ]]
	# it goes out whole, whatever the widening allows (the model waits for all of it)
	run_tool 0 kg-propose --rules <(jq -c '. + {children: 1}' pick.jsonl)
	[ "$(jq -r .candidate.proposer <<<"$output" | sort | uniq -c | tr -s ' ')" = " 4 rules:random" ]
	measure_by_formula <<<"$output"
	expansion > pick.jsonl
	run_tool 0 kg-propose -v --rules pick.jsonl
	[[ "$stderr" == *": model of 5 configurations ("*" correct) over 3 parameters, 0 alignments and 2 launch figures, best "* ]]
	[[ "$stderr" == *": the model proposes 4 of 11 configurations (0 in flight)"* ]]
	echo "$output" > first.jsonl
	# its four picks, none measured, each with a prediction; every move priced by the model,
	# the most promising first (the order kg-select widens in)
	[ "$(jq -r 'select(.candidate.proposer == "rules:model") | .candidate.id' first.jsonl | wc -l)" -eq 4 ]
	jq -r '.candidate.detail' first.jsonl | grep -q ': predicted [0-9.]* ms ([0-9.]* to [0-9.]*)$'
	[ "$(jq -s 'map(.candidate.prior) | . == (sort | reverse) and all(. >= 0.001 and . != 1 and . != 0.5)' first.jsonl)" = true ]
	jq -c '.candidate.config' first.jsonl | sort > picked
	jq -c '.build.config // empty' "$RUN/events.jsonl" | sort -u | comm -12 - picked > again
	[ ! -s again ]
	# at the incumbent, its most promising neighbour goes first (the best region refined)
	jq -c --arg s "$(jq -r .state "$RUN/best.json")" --argjson c "$(jq -c .config "$RUN/best.json")" \
		'.node = $s | .config = $c' pick.jsonl > incumbent.jsonl
	run_tool 0 kg-propose --rules incumbent.jsonl
	[ "$(head -1 <<<"$output" | jq -r .candidate.proposer)" = rules:neighbour ]
	[ "$(jq -r .candidate.proposer <<<"$output" | grep -c rules:model)" -ge 1 ]
	# the same seed and run give the same candidates; with them in flight (--pending), the
	# model believes them at their predicted times and picks others
	kg-propose --rules pick.jsonl | cmp - first.jsonl
	# a batch's picks of one kernel see the same measurements: the hyperparameters are fitted
	# and the pool (the whole space) predicted once, and the second pick's model is the one it fits alone (the same predictions and
	# priors for a configuration both answers hold; the batch sends none twice)
	run_tool 0 kg-propose -v -v --rules <(cat pick.jsonl incumbent.jsonl)
	[ "$(grep -c 'the hyperparameters fitted to these 5 points before are used again' <<<"$stderr")" -eq 1 ]
	[ "$(grep -c "the pool's [0-9]* predictions of the same model are used again" <<<"$stderr")" -eq 1 ]
	[ "$(head -n "$(wc -l <first.jsonl)" <<<"$output")" = "$(cat first.jsonl)" ]
	tail -n +"$(($(wc -l <first.jsonl) + 1))" <<<"$output" | jq -c '.candidate | [.config, .detail, .prior]' | sort >batched
	kg-propose --rules incumbent.jsonl | jq -c '.candidate | [.config, .detail, .prior]' | sort | comm -12 - batched >both
	[ "$(wc -l <both)" -ge 1 ]
	jq -c 'select(.candidate.proposer == "rules:model")' first.jsonl > flying.jsonl
	run_tool 0 kg-propose -v --rules --pending flying.jsonl pick.jsonl
	[[ "$stderr" == *": the model proposes 2 of 11 configurations (4 in flight)"* ]]
	[ "$(jq -c 'select(.candidate.proposer == "rules:model") | .candidate.config' <<<"$output" | sort | comm -12 - picked)" = "" ]
	# the whole answer in flight: nothing is left that the model would pick
	run_tool 0 kg-propose -v --rules --pending first.jsonl pick.jsonl
	[[ "$stderr" == *": the model proposes 0 of 11 configurations (9 in flight)"* ]]
	# --model-picks 0 turns the model off
	run_tool 0 kg-propose --rules --model-picks 0 pick.jsonl
	[ "$(jq -r .candidate.proposer <<<"$output" | sort -u | paste -sd' ')" = "rules:neighbour rules:random" ]
	[ "$(jq -r .candidate.prior <<<"$output" | sort -u | paste -sd' ')" = "0.5 1" ]
	# --min-pred-gain: a rules' move that even an optimistic prediction makes too little
	# faster goes; the model's own picks (the largest expected improvement) stay
	run_tool 0 kg-propose -v --rules --min-pred-gain 100 pick.jsonl
	[ "$(jq -r .candidate.proposer <<<"$output" | sort | uniq -c | tr -s ' ')" = " 4 rules:model" ]
	[ "$(grep -c 'rules:neighbour: .*: dropped: the model expects too little gain' <<<"$stderr")" -gt 0 ]
	[ "$(grep -c 'rules:random: .*: dropped: the model expects too little gain' <<<"$stderr")" -gt 0 ]
	# the endgame: with at most 6 builds left and nothing expected to gain --min-pred-gain,
	# the model picks by the lowest predicted time, and its picks go first
	run_tool 0 kg-propose -v --rules --min-pred-gain 100 <(jq -c '.budget_left = 7' incumbent.jsonl)
	[[ "$stderr" == *": the model proposes 4 of 11 configurations (0 in flight)"* ]]
	[[ "$stderr" != *"(the endgame)"* ]]
	run_tool 0 kg-propose -v --rules --min-pred-gain 100 <(jq -c '.budget_left = 6' incumbent.jsonl)
	[[ "$stderr" == *": the model proposes 4 of 11 configurations (0 in flight), the lowest predicted times (the endgame)"* ]]
	[ "$(jq -r .candidate.proposer <<<"$output" | paste -sd' ')" = "rules:model rules:model rules:model rules:model" ]
	jq -r '.candidate.detail | capture("predicted (?<ms>[0-9.e-]+) ms").ms' <<<"$output" > predicted
	sort -g predicted | cmp - predicted
	# a search still exploring (the gain it expects is worth a build) keeps its order
	run_tool 0 kg-propose -v --rules --min-pred-gain 0 <(jq -c '.budget_left = 6' incumbent.jsonl)
	[[ "$stderr" != *"(the endgame)"* ]]
	run_tool 2 kg-propose --min-pred-gain -1 pick.jsonl
	assert_stderr "$(printf '%s\n' "kg-propose: --min-pred-gain: '-1': out of range" "Try 'kg-propose --help' for more information.")"
	run_tool 2 kg-propose --model-picks x pick.jsonl
	assert_stderr "$(printf '%s\n' "kg-propose: --model-picks: 'x' is not a whole number from 0 to 1000" "Try 'kg-propose --help' for more information.")"
}

@test "--rules: the model learns that the powers of two among a parameter's values are fast, apart from the values beside them" {
	fresh_run
	# the scale kernel with a block side of any multiple of 16 up to 256 (five of them powers of
	# two), the other parameters fixed
	jq '.ConfigurationSpace.TuningParameters |= (.[0].Values = "[16 * i for i in range(1, 17)]" |
		.[1].Values = "[1]" | .[2].Values = "[False]")' "$RUN/spec.json" >spec.json
	mv spec.json "$RUN/spec.json"
	root=$(kg-select "$RUN" | jq -r .node)
	# measured: the powers of two 16 and 128 (the baseline) fast, every other value tried ten times slower
	for x in 16 48 80 112 144 176 208 240; do
		jq -nc --arg run "$RUN" --arg node "$root" --argjson x "$x" '{v: 1, run: $run, kernel: "scale", node: $node,
			candidate: {id: "c\($x)", proposer: "test", config: {block_size_x: $x, items_per_thread: 1, use_fma: false}}}'
	done | kg-build | jq -c '.build.config.block_size_x as $x | . + {bench: {status: "ok",
		median_ms: (if [16, 32, 64, 128, 256] | any(. == $x) then 1.0 else 10.0 end)}}' |
		kg-select --update "$RUN" >/dev/null
	run_tool 0 kg-propose -v --rules --model-picks 3 --rules-random 0 <(expansion)
	[[ "$stderr" == *"over 1 parameters, 1 alignments and 2 launch figures"* ]]
	# its first picks are 64 and 256, both predicted fast though they lie beside slow values
	# (32 is the neighbours' pick); any other value is predicted slow
	jq -r 'select(.candidate.proposer == "rules:model") | .candidate | [.config.block_size_x,
		(.detail | capture("predicted (?<ms>[0-9.e-]+) ms").ms)] | @tsv' <<<"$output" >picks
	[ "$(head -2 picks | cut -f1 | paste -sd' ')" = "64 256" ]
	awk '{ if (($1 == 64 || $1 == 256) ? $2 > 1.5 : $2 < 5) exit 1 }' picks
}

# measure_times ROOT CONFIG=MS...: measures each configuration (block_size_x,items_per_thread,
# use_fma) at its time, in the order given, as children of ROOT.
measure_times() {
	local root=$1 c
	shift
	for c in "$@"; do
		IFS=, read -r x i f <<<"${c%=*}"
		jq -nc --arg run "$RUN" --arg node "$root" --argjson x "$x" --argjson i "$i" --argjson f "$f" --arg id "$c" \
			'{v: 1, run: $run, kernel: "scale", node: $node, candidate: {id: $id, proposer: "test",
			  config: {block_size_x: $x, items_per_thread: $i, use_fma: $f}}}'
	done | kg-build | jq -c '. + {bench: {status: "ok", median_ms: (.candidate.id | split("=")[1] | tonumber)}}' |
		kg-select --update "$RUN" >/dev/null
}

@test "--rules: a search that measured as many configurations as it has parameters without a gain proposes an untried move of its best first" {
	fresh_run
	root=$(kg-select "$RUN" | jq -r .node)
	# the best (64, 2, true) fifth of the baseline and four more, then two slower
	measure_times "$root" 256,1,false=2.0 64,4,true=2.5 256,2,true=3.0 64,2,true=0.5 128,4,false=2.2 128,2,true=1.8
	run_tool 0 kg-propose -v --rules --model-picks 2 --rules-random 0 <(expansion)
	[[ "$stderr" == *": the model proposes 2 of "*" configurations (0 in flight)"$'\n'* ]]
	[ "$(jq -r 'select(.candidate.detail | test("a move of the best")) | .candidate.id' <<<"$output")" = "" ]
	# a third slower one: three parameters, three configurations without a gain
	measure_times "$root" 256,1,true=2.1
	expansion > pick.jsonl
	# expanding the root, the model's first pick is a move of the best the run has not
	# measured, (64, 1, true) or (64, 2, false), and it goes first
	jq -c --arg s "$root" '.node = $s | .config = {block_size_x: 128, items_per_thread: 1, use_fma: false}' pick.jsonl > root.jsonl
	run_tool 0 kg-propose -v --rules --model-picks 2 --rules-random 0 root.jsonl
	[[ "$stderr" == *": the model proposes 2 of "*" configurations (0 in flight), the first a move of the best"* ]]
	first=$(head -1 <<<"$output")
	[ "$(jq -r .candidate.proposer <<<"$first")" = rules:model ]
	[[ "$(jq -r .candidate.detail <<<"$first")" == *"; a move of the best, 3 configurations measured since it" ]]
	[[ "$(jq -c '.candidate.config | [.block_size_x, .items_per_thread, .use_fma]' <<<"$first")" =~ ^(\[64,1,true\]|\[64,2,false\])$ ]]
	# expanding the best, where the neighbours' rule has that move too: it goes first all the same
	jq -c --arg s "$(jq -r .state "$RUN/best.json")" '.node = $s | .config = {block_size_x: 64, items_per_thread: 2, use_fma: true}' \
		pick.jsonl > best.jsonl
	run_tool 0 kg-propose -v --rules --model-picks 2 --rules-random 0 best.jsonl
	[[ "$stderr" == *", the first a move of the best"* ]]
	[ "$(head -1 <<<"$output" | jq -c '.candidate.config | [.block_size_x, .items_per_thread, .use_fma]')" = \
		"$(jq -c '.candidate.config | [.block_size_x, .items_per_thread, .use_fma]' <<<"$first")" ]
}

@test "a variant kg-build found unedited has the baseline's source, also in a run without baseline.json (replayed): its kernel.cu is not read" {
	fresh_run
	[ ! -e "$RUN/baseline.json" ]
	run_tool 0 kg-propose --rules <(expansion)
	measure_by_formula <<<"$output"
	expansion > pick.jsonl
	[ "$(jq -r .node pick.jsonl)" != "$(jq -r 'select(.build.baseline) | .build.state' "$RUN/events.jsonl")" ]
	run_tool 0 kg-propose --rules pick.jsonl
	want=$output
	# a thousand-build run read a thousand files per call, each the baseline's text
	# (but the node's own, which kg-propose reads for what it holds)
	jq -r --arg node "$(jq -r .node pick.jsonl)" 'select(.build.edited == false and (.build.baseline | not)
		and .build.state != $node) | .build.state' "$RUN/events.jsonl" > unedited
	[ "$(wc -l <unedited)" -ge 3 ]
	while read -r state; do
		rm "$RUN/variants/$state/kernel.cu"
		mkfifo "$RUN/variants/$state/kernel.cu" # reading one waits for a writer
	done <unedited
	run -0 --separate-stderr timeout 10 kg-propose --rules pick.jsonl
	[ "$output" = "$want" ]
}

@test "--history: a table that ranks the run well leads from the first build; one that ranks it wrong loses its weight" {
	fresh_run
	expansion > pick.jsonl
	# yesterday's table of the same kernel on another GPU: every configuration, half of today's formula
	kg-propose -x -s "$RUN/spec.json" | jq -s '{results: map(.candidate.config | {configuration: ., times: {runtimes:
		[0.5 * (128 / .block_size_x + 1 / .items_per_thread + (if .use_fma then 0.1 else 0 end))]},
		invalidity: "correct", correctness: 1, measurements: []})}' > yesterday.json
	# the run has measured its baseline alone: no model of its own, but the history's best goes first
	run_tool 0 kg-propose -v --rules --history yesterday.json pick.jsonl
	[[ "$stderr" == *": model of 1 configurations (1 correct; too few for a model of the run's own) over 3 parameters, 0 alignments and 2 launch figures, best "* ]]
	[[ "$stderr" == *": history yesterday.json: 16 configurations, weight 0.500 (0 % of the run's order misordered)"* ]]
	[ "$(head -1 <<<"$output" | jq -c '.candidate | [.proposer, .config]')" = \
		'["rules:model",{"block_size_x":256,"items_per_thread":2,"use_fma":false}]' ]
	jq -r 'select(.candidate.proposer == "rules:model") | .candidate.detail' <<<"$output" | grep -q '; history weight 0.50$'
	# the trust is kept for kg-tune's table and trace.md
	[ "$(jq -c '[.observations, .run_weight, (.sources[] | .file, .configurations, .weight)]' "$RUN/history.json")" = \
		'[1,0.5,"yesterday.json",16,0.5]' ]
	# with measurements of its own, a table in the run's order gains weight and one in the
	# reverse order loses it all (the baseline was not timed by the formula: exact.json has
	# it fastest, as the run measured it)
	run_tool 0 kg-propose --rules pick.jsonl
	measure_by_formula <<<"$output"
	jq '.results[].times.runtimes[0] *= 2' yesterday.json > today.json
	jq '(.results[] | select(.configuration == {block_size_x: 128, items_per_thread: 1, use_fma: false})
		| .times.runtimes[0]) = 0.01' today.json > exact.json
	jq '.results[].times.runtimes[0] |= 1 / .' exact.json > reversed.json
	run_tool 0 kg-propose -v --rules --history exact.json --history reversed.json pick.jsonl
	# (its weight is at most the evidence five measurements give: tau 1 less 1/6, tau's
	# variance for five independent ranks)
	[[ "$stderr" == *": history exact.json: 16 configurations, weight 0.833 (0 % of the run's order misordered)"* ]]
	[[ "$stderr" == *": history reversed.json: 16 configurations, weight 0.000 (100 % of the run's order misordered)"* ]]
	jq -e '.sources[0].weight > 0.5 and .sources[1].weight == 0' "$RUN/history.json"
	# a table that misorders the baseline's four pairs of the run's ten, the largest differences
	# (the run measured it fastest, the table has it slowest), does worse than chance
	run_tool 0 kg-propose -v --rules --history today.json --history reversed.json pick.jsonl
	[[ "$stderr" == *": history today.json: 16 configurations, weight 0.000 (50 % of the run's order misordered)"* ]]
	# a table that misorders three pairs of near times among the run's five (1.1, 1.25 and 1.35
	# ms) ranks better than chance, but gets no weight while nothing else vouches for it: its
	# Kendall tau on them, 0.4, is what chance reaches on five
	jq '(.results[] | select(.configuration == {block_size_x: 128, items_per_thread: 1, use_fma: false})
		| .times.runtimes[0]) = 1.0 | (.results[] | select(.configuration == {block_size_x: 256, items_per_thread: 2, use_fma: true})
		| .times.runtimes[0]) = 1.35 | (.results[] | select(.configuration == {block_size_x: 128, items_per_thread: 4, use_fma: true})
		| .times.runtimes[0]) = 1.1' today.json > near.json
	jq '.results[].times.runtimes[0] *= 3' near.json > near-elsewhere.json
	run_tool 0 kg-propose -v --rules --history near.json --history reversed.json pick.jsonl
	[[ "$stderr" == *": history near.json: 16 configurations, weight 0.000 (20 % of the run's order misordered)"* ]]
	# another GPU's table that ranks the space alike vouches for it: the two share the draws
	run_tool 0 kg-propose -v --rules --history near.json --history near-elsewhere.json --history reversed.json pick.jsonl
	jq -e '.sources[0].agreement > 0.9 and .sources[0].weight > 0.3 and .sources[1].weight > 0.3 and .sources[2].weight == 0' \
		"$RUN/history.json"
	run_tool 2 kg-propose --history missing.json pick.jsonl
	assert_stderr "$(printf '%s\n' "kg-propose: cannot read 'missing.json': No such file or directory" \
		"kg-propose: --history: 'missing.json' is not a table of measurements" "Try 'kg-propose --help' for more information.")"
}

@test "expand records that cannot be answered are reported, passed through, and exit 1" {
	fresh_run
	expansion > pick.jsonl
	jq -c 'del(.run)' pick.jsonl > no-run.jsonl
	jq -c '.run = "elsewhere"' pick.jsonl > bad-run.jsonl
	jq -c '.node = "f00d"' pick.jsonl > bad-node.jsonl
	jq -c 'del(.node)' pick.jsonl > no-node.jsonl
	jq -c '.config = {block_size_x: 100}' pick.jsonl > bad-config.jsonl
	jq -c '.batch_budget = -1' pick.jsonl > bad-budget.jsonl
	cat no-run.jsonl bad-run.jsonl bad-node.jsonl no-node.jsonl bad-config.jsonl bad-budget.jsonl > in.jsonl
	echo 'not json' >> in.jsonl
	run_tool 1 kg-propose --rules in.jsonl
	[ "$output" = "$(head -6 in.jsonl)" ]
	assert_stderr "$(printf '%s\n' \
		"kg-propose: in.jsonl:1: run: missing (an expand record names its run directory)" \
		"kg-propose: cannot read 'elsewhere/spec.json': No such file or directory" \
		"kg-propose: in.jsonl:2: run: elsewhere has no usable spec.json (cannot read it; kg-init makes run directories)" \
		"kg-propose: in.jsonl:3: node: f00d has no variant (cannot read $RUN/variants/f00d/kernel.cu: No such file or directory)" \
		"kg-propose: in.jsonl:4: node: missing (an expand record names the node to expand, as kg-select writes it)" \
		"kg-propose: in.jsonl:5: config: the node's configuration is not one of the space: block_size_x=100 (from the candidate) is not one of the Values of ConfigurationSpace.TuningParameters[0]" \
		"kg-propose: in.jsonl:6: batch_budget: not a number of builds (a whole number, 0 or more)" \
		"kg-propose: in.jsonl:7: invalid JSON at column 1")"
	run_tool 2 kg-propose missing.jsonl
	assert_stderr "kg-propose: cannot open 'missing.jsonl': No such file or directory"
}
