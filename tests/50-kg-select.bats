#!/usr/bin/env bats
# 50-kg-select.bats: a small synthetic search through kg-select's command line: the root,
# expansion and evaluation picks, transpositions and the rank rule, failure rewards, the
# incumbent, batches, stopping, parameters kept in the graph, and resuming between steps.

load test_helper
load select_helper

@test "--help, --version, usage errors" {
	run_tool 0 kg-select --help
	assert_line --index 0 "Usage: kg-select [OPTION]... RUN"
	run_tool 0 kg-select --version
	assert_output --regexp '^kg-select \(kernelgraph\) [0-9]+\.[0-9]+\.[0-9]+$'
	run_tool 2 kg-select
	assert_stderr "$(printf '%s\n' "kg-select: no run directory given" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --backup median "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --backup: 'median' is not mean or max" "Try 'kg-select --help' for more information.")"
	# The ranges a loaded graph's parameters are checked against: a negative widening loops
	# for ever, a large negative noise alpha recurses until the stack ends.
	run_tool 2 kg-select --noise-alpha -1e9 "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --noise-alpha: '-1e9': out of range" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --widen-k -1 "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --widen-k: '-1': out of range" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --export --update "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --export and --update do not go together" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select "$RUN" extra
	assert_stderr "$(printf '%s\n' "kg-select: unexpected argument 'extra' (only --update reads a file)" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --update --summary "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --update and --summary do not go together" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --dry-run "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --dry-run goes with --update" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --summary --fill 4 "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --fill goes with picking, not with --summary" "Try 'kg-select --help' for more information.")"
	run_tool 1 kg-select --summary "$RUN"
	assert_stderr "kg-select: $RUN: no graph yet: make the root with kg-select --update and the benched baseline (kg-init does this)"
	run_tool 2 kg-select --builds --export "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --export and --builds do not go together" "Try 'kg-select --help' for more information.")"
	# a run with no graph has evaluated nothing
	run_tool 0 kg-select --builds "$RUN"
	assert_output 0
}

@test "the benched baseline makes the root; without one, selecting is an error" {
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN: no graph yet: make the root with kg-select --update and the benched baseline (kg-init does this)"
	run_tool 1 kg-select --update "$RUN" < <(echo '{"candidate":{"id":"x"},"build":{"status":"ok","state":"S9"}}')
	assert_stderr "kg-select: <stdin>:1: the run has no graph yet: the first record must be the baseline, built and benched ok (kg-init does this)"
	run_tool 0 kg-select --update "$RUN" < <(baseline 2.5)
	[ "$(jq -c .update <<<"$output")" = '{"reward":0,"child":"S0","child_id":0,"root":true,"incumbent":true}' ]
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '[.kernel, .baseline_ms, .incumbent, (.nodes | length), .nodes[0].state, .nodes[0].n]' g.json)" = '["k",2.5,0,1,"S0",1]' ]
	[ "$(readlink "$RUN/best")" = variants/S0 ]
	[ "$(jq -r .state "$RUN/best.json")" = S0 ]
	# the summary of a search that has tried nothing yet
	kg-select --summary "$RUN"
	diff -u - <(tail -7 "$RUN/trace.md") <<'EOF'
## Summary after 0 candidates

**Best**: the baseline itself; no candidate's speedup interval lay above it.

**Failed**: 0 of 0.

The search may go on (it has no build budget).
EOF
}

@test "the root is expanded first; evaluated candidates become children with log2-speedup or failure rewards" {
	start
	run_tool 0 kg-select "$RUN"
	[ "$(jq -c '[.op, .node, .node_id, .path, .path_edges, .depth, .iter, .config, .last_method]' <<<"$output")" = \
		'["expand","S0",0,["S0"],[],0,1,{"x":1},"init"]' ]
	echo "$output" >pick.jsonl
	{
		evaluated pick.jsonl S1 2.0
		evaluated pick.jsonl S2 0 0 unroll
		evaluated pick.jsonl S3 1 1 smem invalid_config
		evaluated pick.jsonl S4 16 16 vec
	} >ev.jsonl
	run_tool 0 kg-select --update "$RUN" ev.jsonl
	assert_stderr_empty
	[ "$(jq -c '.update | [.reward, .child, .incumbent]' <<<"$output" | tr -d '\n')" = \
		'[1,"S1",true][-3,"S2",false][-3,"failed:2",false][3,"S4",true]' ]
	# four candidates evaluated, failed ones too (the baseline is none), as the log has them
	run_tool 0 kg-select --builds "$RUN"
	assert_output 4
	[ "$(jq -n '[inputs | select(.update.child != null and (.update.root | not))] | length' "$RUN/events.jsonl")" -eq 4 ]
	# The root's value is the mean of its own reward and its children's: (0 + 1 - 3 - 3 + 3) / 5.
	kg-select --export "$RUN" >g.json
	[ "$(jq '.nodes[0] | [.n, .q]' -c g.json)" = '[5,-0.4]' ]
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '[.nodes[] | .failed]' g.json)" = '[false,false,true,true,false]' ]
	[ "$(wc -l <"$RUN/events.jsonl")" -eq 5 ]
	[ "$(jq -r '[.from_method, .to_method, .ok, .reward] | @csv' out/regraph_dataset.jsonl | tr '\n' ' ')" = \
		'"init","tile",true,1 "init","unroll",false,-3 "init","smem",false,-3 "init","vec",true,3 ' ]
	grep -Fqx '| 4 | 1 | [baseline](variants/S0/) | `x 1 -> 2` | `vec` | 0.0625 | 16.0x [16.0, 16.1] | [S4](variants/S4/): **new best**, 8.00x as fast as [S1](variants/S1/) (its interval clears 2.00x) |' "$RUN/trace.md"
	# --failure-reward changes what failures earn, and is kept in the graph.
	run_tool 0 kg-select --failure-reward -1 --update "$RUN" < <(evaluated pick.jsonl S5 0 0 x)
	[ "$(jq -c .update.reward <<<"$output")" = -1 ]
	kg-select --export "$RUN" >g.json
	[ "$(jq .params.failure_reward g.json)" = -1 ]
}

# story PICK-FILE: candidates of the pick, one of each kind trace.md tells apart: a new best,
# a slower one, a code edit that did not compile, two incorrect ones, a timeout, an invalid
# configuration and a second new best.
story() {
	jq -c '
		def tried($c; $by; $m): {run, kernel, iter, node, node_id, path_edges, rollout,
		                         candidate: ($c + {proposer: $by, method: $m}), method: {canonical: $m}};
		def ok($s; $config; $ms; $sp; $ci): {build: {status: "ok", state: $s, config: $config},
		                                     bench: {status: "ok", median_ms: $ms, speedup: $sp, speedup_ci: $ci}};
		def built($s): {build: {status: "ok", state: $s}};
		(tried({config: {x: 2, y: 8}}; "rules:neighbour"; "tile") + ok("S1aaaaaaaaaa"; {x: 2, y: 8}; 0.8; 1.25; [1.2, 1.3])),
		(tried({config: {x: 3, y: 16}}; "rules:random"; "retune") + ok("S2bbbbbbbbbb"; {x: 3, y: 16}; 2; 0.5; [0.45, 0.55])),
		(tried({detail: "Stage the tiles | in *shared* memory\nsecond line", config: {x: 1, y: 8},
		        patch: "--- a/k.cu\n+++ b/k.cu\n@@ -1,2 +1,3 @@\n-a\n+b\n+c\n"}; "llm:m/memory"; "shared_memory_tiling")
		 + {build: {status: "compile_failed", state: "S3cccccccccc",
		            error: "NVRTC_ERROR_COMPILATION\nk.cu(3): error: identifier \"tile\" is undefined\n1 error detected"}}),
		(tried({config: {x: 4, y: 8}}; "rules:model"; "retune") + built("S4dddddddddd")
		 + {bench: {status: "incorrect", check: {passed: false, why: "the kernel changed an input it may only read"}}}),
		(tried({config: {x: 5, y: 8}}; "rules:model"; "retune") + built("S5eeeeeeeeee")
		 + {bench: {status: "incorrect", check: {passed: false, argument: "out", bad_elements: 12, max_abs_err: 0.5}}}),
		(tried({config: {x: 6, y: 8}}; "rules:random"; "retune") + built("S6ffffffffff")
		 + {bench: {status: "timeout", error: "the watchdog fired after 10 s"}}),
		(tried({config: {x: 7, y: 8}}; "rules:random"; "retune")
		 + {build: {status: "invalid_config", error: "x * y > 50: the conditions do not hold", config: {x: 7, y: 8}}}),
		(tried({config: {x: 2, y: 16}}; "rules:neighbour"; "tile") + ok("S7gggggggggg"; {x: 2, y: 16}; 0.25; 4; [3.9, 4.2]))
	' "$1"
}

@test "trace.md tells the search: a row per candidate (change, proposer, time, speedup, why it failed, why the best moved); --summary closes it" {
	jq -cn --arg run "$RUN" '{run: $run, kernel: "k", candidate: {id: "baseline"},
		build: {status: "ok", state: "S0", baseline: true, config: {x: 1, y: 8}}, bench: {status: "ok", median_ms: 1, speedup: 1}}' |
		kg-select --update "$RUN" >/dev/null
	kg-select "$RUN" >pick.jsonl
	story pick.jsonl | kg-select --update "$RUN" >/dev/null
	run_tool 0 kg-select --summary "$RUN"
	assert_output ""
	assert_stderr_empty
	diff -u - "$RUN/trace.md" <<'EOF'
# Search of k

The baseline, [baseline](variants/S0/) (`x 1, y 8`), runs in 1.00 ms. One row per candidate: its build (the candidates numbered in the order they were learned, as kg-report numbers them), the iteration that picked it, the variant it changes, the change, its method and who proposed it, its median time, its speedup over the baseline (with the 95 % interval of that ratio when it was measured; a replayed table has none), and what became of it. A candidate becomes the new best only when its interval (its speedup, without one) lies above the best speedup so far.

| build | iter | from | change | method (proposer) | ms | speedup | result |
|---:|---:|---|---|---|---:|---:|---|
| 1 | 1 | [baseline](variants/S0/) | `x 1 -> 2` | `tile` (rules:neighbour) | 0.800 | 1.25x [1.20, 1.30] | [S1aaaaaa](variants/S1aaaaaaaaaa/): **new best**, 25.0 % faster than [baseline](variants/S0/) (its interval clears 1.00x) |
| 2 | 1 | [baseline](variants/S0/) | `x 1 -> 3, y 8 -> 16` | `retune` (rules:random) | 2.00 | 0.500x [0.450, 0.550] | [S2bbbbbb](variants/S2bbbbbbbbbb/) |
| 3 | 1 | [baseline](variants/S0/) | Stage the tiles \| in \*shared\* memory (+2 -1 in k.cu) | `shared_memory_tiling` (llm:m/memory) | - | - | [S3cccccc](variants/S3cccccccccc/): **compile failed**: `k.cu(3): error: identifier "tile" is undefined` |
| 4 | 1 | [baseline](variants/S0/) | `x 1 -> 4` | `retune` (rules:model) | - | - | [S4dddddd](variants/S4dddddddddd/): **incorrect output**: the kernel changed an input it may only read |
| 5 | 1 | [baseline](variants/S0/) | `x 1 -> 5` | `retune` (rules:model) | - | - | [S5eeeeee](variants/S5eeeeeeeeee/): **incorrect output**: `out`: 12 elements wrong, max abs err 0.500 |
| 6 | 1 | [baseline](variants/S0/) | `x 1 -> 6` | `retune` (rules:random) | - | - | [S6ffffff](variants/S6ffffffffff/): **timed out**: the watchdog fired after 10 s |
| 7 | 1 | [baseline](variants/S0/) | `x 1 -> 7` | `retune` (rules:random) | - | - | no variant: **invalid configuration**: `x * y > 50: the conditions do not hold` |
| 8 | 1 | [baseline](variants/S0/) | `x 1 -> 2, y 8 -> 16` | `tile` (rules:neighbour) | 0.250 | 4.00x [3.90, 4.20] | [S7gggggg](variants/S7gggggggggg/): **new best**, 3.20x as fast as [S1aaaaaa](variants/S1aaaaaaaaaa/) (its interval clears 1.25x) |

## Summary after 8 candidates

**Best**: [S7gggggg](variants/S7gggggggggg/), found at build 8 (iteration 1): 0.250 ms, **4.00x** the baseline's 1.00 ms (interval 3.90x to 4.20x), with `x 2, y 16`, its methods from the baseline `tile`. Its files are in `best/` (a link to its variant's directory), its figures in `best.json`.

**How the best moved**: baseline 1.00x → [S1aaaaaa](variants/S1aaaaaaaaaa/) 1.25x (build 1, iteration 1) → [S7gggggg](variants/S7gggggggggg/) 4.00x (build 8, iteration 1).

**Failed**: 5 of 8: incorrect output 2, compile failed 1, invalid configuration 1, timed out 1.

| method | tried | failed | best speedup |
|---|---:|---:|---:|
| `retune` | 5 | 4 | 0.500x |
| `tile` | 2 | 0 | 4.00x |
| `shared_memory_tiling` | 1 | 1 | - |

| proposer | tried | failed | best speedup | what it is |
|---|---:|---:|---:|---|
| rules:random | 3 | 2 | 0.500x | a random valid configuration |
| rules:model | 2 | 2 | - | the model's pick: the largest expected improvement |
| rules:neighbour | 2 | 0 | 4.00x | one parameter one step up or down |
| llm:m/memory | 1 | 1 | - | an LLM expert: model/persona |

The search may go on (it has no build budget).
EOF
	# best.json keeps the interval that kg-tune's table shows
	[ "$(jq -c .speedup_ci "$RUN/best.json")" = '[3.9,4.2]' ]
	# a search whose budget is spent says so
	kg-select --budget-builds 8 --summary "$RUN"
	[ "$(grep -c '^## Summary after 8 candidates$' "$RUN/trace.md")" -eq 2 ]
	grep -Fqx 'The search is over: its budget of 8 builds is spent.' "$RUN/trace.md"
	# the rows of a search that goes on start a table again below the summary
	kg-select "$RUN" >pick2.jsonl
	jq -c '.candidate = {proposer: "rules:random", method: "tile", config: {x: 9, y: 16}}
		| .build = {status: "ok", state: "S8", config: {x: 9, y: 16}} | .bench = {status: "ok", median_ms: 0.5}' pick2.jsonl |
		kg-select --update "$RUN" >/dev/null
	diff -u - <(tail -3 "$RUN/trace.md") <<'EOF'
| build | iter | from | change | method (proposer) | ms | speedup | result |
|---:|---:|---|---|---|---:|---:|---|
| 9 | 2 | [S7gggggg](variants/S7gggggggggg/) | `x 2 -> 9` | `tile` (rules:random) | 0.500 | 2.00x | [S8](variants/S8/) |
EOF
	# a learned record says in which iteration it was learned (later than picked when the next
	# iteration was picked while it was measured)
	[ "$(tail -1 "$RUN/events.jsonl" | jq -c '[.iter, .update.learned_iter]')" = '[2,2]' ]
	# the summary counts what the log holds: a log it cannot read is an error
	size=$(stat -c %s "$RUN/events.jsonl")
	rm "$RUN/events.jsonl"
	run_tool 4 kg-select --summary "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: warning: $RUN/events.jsonl: 0 bytes, shorter than the $size the graph learned from: not read" \
		"kg-select: cannot open '$RUN/events.jsonl': No such file or directory")"
}

@test "--update --dry-run learns and writes the records as --update does, says what each file would get, and writes nothing" {
	jq -cn --arg run "$RUN" '{run: $run, kernel: "k", candidate: {id: "baseline"},
		build: {status: "ok", state: "S0", baseline: true, config: {x: 1, y: 8}}, bench: {status: "ok", median_ms: 1, speedup: 1}}' |
		kg-select --update "$RUN" >/dev/null
	kg-select "$RUN" >pick.jsonl
	story pick.jsonl >story.jsonl
	tree() {
		find out \( -type f -printf '%p ' -exec sha256sum {} \; \) -o \( -type l -printf '%p -> %l\n' \) | sort
	}
	tree >before
	trace_before=$(wc -l <"$RUN/trace.md")
	run_tool 0 kg-select --update --dry-run "$RUN" story.jsonl
	assert_stderr "$(printf '%s\n' "kg-select: dry run: $RUN/events.jsonl would get 8 records" \
		"kg-select: dry run: out/regraph_dataset.jsonl would get 8 rows" \
		"kg-select: dry run: $RUN/trace.md would get 10 lines" \
		"kg-select: dry run: $RUN/best and best.json would name the incumbent S7gggggggggg (4.00x)" \
		"kg-select: dry run: $RUN/graph.bin and graph.blobs would hold 9 nodes, 8 edges, 8 builds" \
		"kg-select: dry run: nothing was written")"
	dry=$output
	[ "$(jq -c '.update | [.child, .incumbent]' <<<"$dry" | tail -1)" = '["S7gggggggggg",true]' ]
	tree >after
	diff before after
	# -q silences the report, not the records
	run_tool 0 kg-select --update --dry-run -q "$RUN" story.jsonl
	assert_stderr_empty
	[ "$output" = "$dry" ]
	# the update itself writes the same records, and what the dry run said
	run_tool 0 kg-select --update "$RUN" story.jsonl
	assert_stderr_empty
	[ "$output" = "$dry" ]
	[ "$(wc -l <"$RUN/events.jsonl")" -eq 9 ]
	[ "$(wc -l <out/regraph_dataset.jsonl)" -eq 8 ]
	[ "$(wc -l <"$RUN/trace.md")" -eq $((trace_before + 10)) ]
	[ "$(jq -r .state "$RUN/best.json")" = S7gggggggggg ]
	[ "$(kg-select --export "$RUN" | jq -c '[(.nodes | length), (.edges | length), .builds]')" = '[9,8,8]' ]
}

@test "trace.md gives the compiler's first error line, ptxas's (\"error   :\") as NVRTC's, and a diff's first line" {
	start
	kg-select "$RUN" >pick.jsonl
	jq -c '{run, kernel, iter, node, node_id, path_edges, rollout, candidate: {id: "c1", method: "wgmma", config: {x: 2}},
		build: {status: "compile_failed", state: "S1", config: {x: 2},
		        error: "NVRTC_ERROR_COMPILATION\nptxas info    : 0 bytes gmem\nptxas error   : Instruction '"'"'wgmma.fence'"'"' not supported on .target '"'"'sm_90'"'"'\nptxas fatal   : Ptx assembly aborted due to errors"}},
		{run, kernel, iter, node, node_id, path_edges, rollout, candidate: {id: "c2", method: "tile", config: {x: 3}},
		build: {status: "patch_failed", error: "Hunk #1 FAILED at 8.\n1 out of 1 hunk FAILED\nthe parent'"'"'s kernel: k.cu"}}' pick.jsonl |
		kg-select --update "$RUN" >/dev/null
	grep -F "**compile failed**: \`ptxas error   : Instruction 'wgmma.fence' not supported on .target 'sm_90'\`" "$RUN/trace.md"
	grep -F '**patch did not apply**: `Hunk #1 FAILED at 8.`' "$RUN/trace.md"
}

@test "an expansion says how many new children the widening allows the node now" {
	start --widen-k 3
	kg-select "$RUN" >pick.jsonl
	[ "$(jq -c '[.op, .node, .children]' pick.jsonl)" = '["expand","S0",3]' ]
	evaluated pick.jsonl S1 2.0 | kg-select --update "$RUN" >/dev/null
	# two visits: fewer than ceil(3 * 2^0.5) = 5 children, one of which it has
	run_tool 0 kg-select "$RUN"
	[ "$(jq -c '[.op, .node, .children]' <<<"$output")" = '["expand","S0",4]' ]
}

@test "PUCT descends to the best child, which is expanded, and skips dead ends" {
	start
	kg-select "$RUN" >pick.jsonl
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 0; } | kg-select --update "$RUN" >/dev/null
	run_tool 0 kg-select "$RUN"
	[ "$(jq -c '[.op, .node, .path, .path_edges, .depth, .methods, .last_method]' <<<"$output")" = \
		'["expand","S1",["S0","S1"],[0],1,["tile"],"tile"]' ]
}

@test "registered candidates are picked for evaluation; an edge is never evaluated twice" {
	start
	kg-select "$RUN" >pick.jsonl
	jq -c '{node, node_id, path_edges, candidate: {id: "r1", method: "tile", prior: 0.7, config: {x: 3}}}' pick.jsonl |
		kg-select --update "$RUN" >reg.jsonl
	[ "$(jq -c .update reg.jsonl)" = '{"edge":0,"registered":true}' ]
	run_tool 0 kg-select "$RUN"
	[ "$(jq -c '[.op, .edge, .candidate]' <<<"$output")" = '["evaluate",0,{"id":"r1","method":"tile","prior":0.7,"config":{"x":3}}]' ]
	echo "$output" | jq -c '. + {build: {status: "ok", state: "S1"}, bench: {status: "ok", median_ms: 0.5, speedup: 2, speedup_ci: [1.9, 2.1]}}' >ev.jsonl
	run_tool 0 kg-select --update "$RUN" ev.jsonl
	[ "$(jq -c '.update | [.edge, .child, .reward]' <<<"$output")" = '[0,"S1",1]' ]
	run_tool 1 kg-select --update "$RUN" ev.jsonl
	assert_stderr "kg-select: ev.jsonl:1: edge 0 was evaluated already: a record is never evaluated twice"
}

# revisits: S1 and S2 from the root, then from S1 S3 (new) and S0 again (the root's state:
# an ancestor); pick2.jsonl is a pick of S2, for S3 again (a transposition).
revisits() {
	start
	kg-select "$RUN" >pick0.jsonl
	{ evaluated pick0.jsonl S1 2.0; evaluated pick0.jsonl S2 1.5; } | kg-select --update "$RUN" >/dev/null
	jq -c '.node = "S1" | .node_id = 1 | .path_edges = [0]' pick0.jsonl >pick1.jsonl
	{ evaluated pick1.jsonl S3 3.0; evaluated pick1.jsonl S0 1.0; } | kg-select --update "$RUN" >/dev/null
	jq -c '.node = "S2" | .node_id = 2 | .path_edges = [1]' pick0.jsonl >pick2.jsonl
}

@test "transpositions: a state reached again links to its node; the rank rule turns a revert into a fresh node" {
	revisits
	# From S2: S3 again, a transposition.
	run_tool 0 kg-select --update "$RUN" < <(evaluated pick2.jsonl S3 3.0)
	[ "$(jq -c '.update | [.child, .child_id, .transposition]' <<<"$output")" = '["S3",3,true]' ]
	[ "$(tail -1 "$RUN/trace.md")" = '| 5 | 1 | [S2](variants/S2/) | the same configuration | `tile` | 0.333 | 3.00x [3.00, 3.10] | [S3](variants/S3/) (reached before another way) |' ]
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '[.nodes[] | [.state, .rank]]' g.json)" = '[["S0",0],["S1",1],["S2",1],["S3",2],["S0",2]]' ]
	# Every edge goes from a lower rank to a higher one: no cycle can form.
	kg-select --export "$RUN" >g.json
	[ "$(jq '. as $g | [.edges[] | select(.to != null) | $g.nodes[.from].rank < $g.nodes[.to].rank] | all' g.json)" = true ]
	# S3's value counts once, whichever parent reached it.
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '.nodes[3] | [.n, .q]' g.json)" = '[1,1.584962500721156]' ]
}

# draw_run: the transpositions test's graph (S3 reached again from S2, S0 again below S1) and
# three failures from the root: one that compiled wrong (a state), one that is incorrect, an
# invalid configuration (no state: a node "failed:EDGE" of its own).
draw_run() {
	revisits
	evaluated pick2.jsonl S3 3.0 | kg-select --update "$RUN" >/dev/null
	{
		evaluated pick0.jsonl S5 1 1 ptx compile_failed | jq -c '.build.error = "kernel.cu(3): error: no wgmma here"'
		evaluated pick0.jsonl S6 0 0 unroll
		evaluated pick0.jsonl S7 1 1 smem invalid_config
	} | kg-select --update "$RUN" >/dev/null
}

@test "--draw draws from the graph alone: builds, transpositions and failures kept in graph.bin, not read from the log" {
	draw_run
	kg-select --draw dot "$RUN" >drawn.dot
	kg-select --draw json "$RUN" >drawn.json
	# graph.bin keeps each candidate's build, its transposition, a failure's status and reason
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '[.nodes[] | [.build, .status, .reason]]' g.json)" = \
		'[[0,null,null],[1,null,null],[2,null,null],[3,null,null],[4,null,null],[6,"compile_failed","`kernel.cu(3): error: no wgmma here`"],[7,"incorrect",null],[8,"invalid_config",null]]' ]
	[ "$(jq -c '[.edges[] | [.build, .transposition]]' g.json)" = '[[1,false],[2,false],[3,false],[4,false],[5,true],[6,false],[7,false],[8,false]]' ]
	# the failures grey with their status, the transposition dashed
	[ "$(jq -c '[.nodes[] | select(.fill == "#d9d9d9") | [.id, .build, .state, .status]]' drawn.json)" = \
		'[[5,6,"S5","compile_failed"],[6,7,"S6","incorrect"],[7,8,"","invalid_config"]]' ]
	grep -Fqx '  n7 [label="\ninvalid_config\nbuild 8", tooltip="{\"x\":2}", fillcolor="#d9d9d9", style="rounded,filled,dashed", fontcolor="#555555"];' drawn.dot
	grep -Fqx '  n2 -> n3 [label="tile", style=dashed];' drawn.dot
	[ "$(jq -c '[.edges[] | [.from, .to]]' drawn.json)" = '[[0,1],[0,2],[1,3],[1,4],[2,3],[0,5],[0,6],[0,7]]' ]
	# the same drawing with the log moved away, or cut to its first record
	mv "$RUN/events.jsonl" events.jsonl
	run_tool 0 kg-select --draw dot "$RUN"
	assert_stderr_empty
	diff drawn.dot <(printf '%s\n' "$output")
	head -1 events.jsonl >"$RUN/events.jsonl"
	run_tool 0 kg-select --draw json "$RUN"
	diff drawn.json <(printf '%s\n' "$output")
	# a graph.json keeps them too
	cp events.jsonl "$RUN/events.jsonl"
	rm "$RUN/graph.bin" "$RUN/graph.blobs"
	mv g.json "$RUN/graph.json"
	mv "$RUN/events.jsonl" events.jsonl
	run_tool 0 kg-select --draw dot "$RUN"
	diff drawn.dot <(printf '%s\n' "$output")
}

@test "a graph.bin of version 4 is read: --draw numbers it from the log, and the next save writes version 5" {
	draw_run
	kg-select --draw dot "$RUN" >drawn.dot
	# version 4's records, in a checkpoint of their own (an imported graph's first save makes one)
	kg-select --export "$RUN" >"$RUN/graph.json"
	rm "$RUN/graph.bin" "$RUN/graph.blobs"
	kg-select "$RUN" >/dev/null
	rm "$RUN/graph.json"
	python3 "$TOOLS/graph_bin.py" "$RUN/graph.bin" --version-4
	warning="kg-select: warning: $RUN/graph.bin: version 4, without the candidates' build numbers and failures: kg-select --draw reads them from events.jsonl, and the next save writes version 5"
	run_tool 0 kg-select --draw dot "$RUN"
	assert_stderr "$warning"
	diff drawn.dot <(printf '%s\n' "$output")
	# without the log there is nothing to number it from
	mv "$RUN/events.jsonl" events.jsonl
	run_tool 4 kg-select --draw dot "$RUN"
	[ -z "$output" ]
	assert_stderr "$(printf '%s\n' "$warning" "kg-select: cannot open '$RUN/events.jsonl': No such file or directory")"
	mv events.jsonl "$RUN/events.jsonl"
	# a step saves it as version 5; what it learned before still comes from the log when drawn
	run_tool 0 kg-select "$RUN"
	assert_stderr "$warning"
	[ "$(od -An -tu4 -j8 -N4 "$RUN/graph.bin" | tr -d ' ')" = 5 ]
	run_tool 0 kg-select --draw dot "$RUN"
	assert_stderr_empty
	diff drawn.dot <(printf '%s\n' "$output")
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '[.edges[] | .build] | unique' g.json)" = '[0]' ]
}

@test "the incumbent changes only when the speedup interval clears it" {
	start
	kg-select "$RUN" >pick.jsonl
	kg-select --update "$RUN" < <(evaluated pick.jsonl S1 2.0 1.9) >/dev/null
	run_tool 0 kg-select --update "$RUN" < <(evaluated pick.jsonl S2 2.1 1.95)
	[ "$(jq .update.incumbent <<<"$output")" = false ]
	[ "$(jq -r .state "$RUN/best.json")" = S1 ]
	run_tool 0 kg-select --update "$RUN" < <(evaluated pick.jsonl S3 2.6 2.3)
	[ "$(jq .update.incumbent <<<"$output")" = true ]
	[ "$(readlink "$RUN/best")" = variants/S3 ]
	[ "$(jq -c '[.state, .speedup]' "$RUN/best.json")" = '["S3",2.6]' ]
}

@test "--batch K picks K distinct things" {
	start --widen-k 3
	run_tool 0 kg-select --batch 2 "$RUN"
	[ "${#lines[@]}" -eq 1 ] # only the root exists: one expansion
	echo "${lines[0]}" >pick.jsonl
	for s in S1 S2 S3; do
		jq -c '{node, node_id, path_edges, candidate: {id: "'$s'", method: "m'$s'"}}' pick.jsonl
	done | kg-select --update "$RUN" >/dev/null
	run_tool 0 kg-select --batch 3 "$RUN"
	[ "$(jq -c '[.op, .edge]' <<<"$output" | tr -d '\n')" = '["evaluate",0]["evaluate",1]["evaluate",2]' ]
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '[.edges[].n]' g.json)" = '[0,0,0]' ] # virtual visits are not kept
	# under a budget of 2 builds, a batch of 3 makes 3 picks of one build each that share the
	# 2 (kg-propose builds the first two that make one: a pick may find nothing new)
	run_tool 0 kg-select --batch 3 --budget-builds 2 "$RUN"
	[ "$(jq -c '[.edge, .budget_left, .batch_budget]' <<<"$output" | tr -d '\n')" = '[0,1,2][1,1,2][2,1,2]' ]
	# 5 left over 3 picks: shares 2, 2, 1
	run_tool 0 kg-select --batch 3 --budget-builds 5 "$RUN"
	[ "$(jq -c .budget_left <<<"$output" | tr -d '\n')" = '221' ]
	# a batch whose first pick expands the best leaf goes elsewhere for the second
	rm -rf "$RUN" && mkdir -p "$RUN" && start
	kg-select "$RUN" >pick.jsonl
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 1.5; } | kg-select --update "$RUN" >/dev/null
	run_tool 0 kg-select --batch 2 "$RUN"
	[ "$(jq -c '[.op, .node]' <<<"$output" | tr -d '\n')" = '["expand","S1"]["expand","S2"]' ]
}

@test "--fill N: at least --batch picks, ceil(N / c) with c the log's candidates per pick, at most 16" {
	start --widen-k 3
	run_tool 0 kg-select -v --fill 6 "$RUN" # the log has no picks yet: --batch alone
	[ "${#lines[@]}" -eq 1 ]
	[[ "$stderr" == *"kg-select: $RUN: --fill 6: no picks in the log"* ]]
	echo "${lines[0]}" >pick.jsonl
	for s in S1 S2 S3; do # one pick, three candidates: c = 3
		jq -c '. + {candidate: {id: "'$s'", method: "m'$s'"}}' pick.jsonl
	done | kg-select --update "$RUN" >/dev/null
	for fill in 3 4 6 7; do
		run_tool 0 kg-select -v --fill "$fill" "$RUN"
		echo "$output" >"picks.$fill"
		[[ "$stderr" == *"--fill $fill: 3 candidates per pick in the log: $(((fill + 2) / 3)) picks"* ]]
	done
	[ "$(jq -c '[.op, .edge]' picks.3 picks.4 picks.6 picks.7 | tr -d '\n')" = \
		'["evaluate",0]["evaluate",0]["evaluate",1]["evaluate",0]["evaluate",1]["evaluate",0]["evaluate",1]["evaluate",2]' ]
	run_tool 0 kg-select --batch 3 --fill 1 "$RUN" # --batch is the least
	[ "${#lines[@]}" -eq 3 ]
	run_tool 0 kg-select -v --fill 100 "$RUN" # at most 16, of which there are 4: 3 edges, 1 expansion
	[[ "$stderr" == *"--fill 100: 3 candidates per pick in the log: 16 picks"* ]]
	[ "$(jq -c '[.op, .edge]' <<<"$output" | tr -d '\n')" = '["evaluate",0]["evaluate",1]["evaluate",2]["expand",null]' ]
	# only the last 200 lines count: 50 picks of 4 candidates, after 300 picks of none (in a
	# log of 250 KB: kg-select reads it back from the end)
	pad=$(printf '%0500d' 0)
	{
		for i in $(seq 300); do printf '{"iter":%d,"op":"expand","node_id":0,"pad":"%s"}\n' "$i" "$pad"; done
		for i in $(seq 200); do printf '{"iter":%d,"op":"expand","node_id":0,"candidate":{},"pad":"%s"}\n' "$((1000 + i % 50))" "$pad"; done
	} >events
	cp events "$RUN/events.jsonl"
	run_tool 0 kg-select -v --fill 6 "$RUN"
	[[ "$stderr" == *"--fill 6: 4 candidates per pick in the log: 2 picks"* ]]
	head -n 300 events >"$RUN/events.jsonl"
	run_tool 0 kg-select -v --fill 6 "$RUN"
	[[ "$stderr" == *"--fill 6: 0 candidates per pick in the log: 16 picks"* ]]
	# a line that is not JSON is named (its line from the top of the log, though only the
	# tail is read) and left out: 199 candidates of 50 picks
	{ cat events; echo 'not json'; } >"$RUN/events.jsonl"
	run_tool 0 kg-select --fill 6 "$RUN"
	# (the graph learned another log: the catch-up's warning comes first)
	[ "${stderr##*$'\n'}" = "kg-select: $RUN/events.jsonl:501: invalid JSON at column 1" ]
	[ "${#lines[@]}" -eq 2 ]
	run_tool 0 kg-select -v --fill 6 "$RUN"
	[[ "$stderr" == *"--fill 6: 3.98 candidates per pick in the log: 2 picks"* ]]
	run_tool 2 kg-select --update --fill 2 "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --fill goes with picking, not with --update" "Try 'kg-select --help' for more information.")"
	run_tool 2 kg-select --fill 0 "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --fill: '0': out of range" "Try 'kg-select --help' for more information.")"
}

@test "--pending: picks in flight count as picks of the batch: their nodes and edges are not picked again" {
	start --widen-k 3
	kg-select "$RUN" >pick.jsonl
	for s in S1 S2 S3; do
		jq -c '{node, node_id, path_edges, candidate: {id: "'$s'", method: "m'$s'"}}' pick.jsonl
	done | kg-select --update "$RUN" >/dev/null
	kg-select --batch 3 "$RUN" | jq -c '[.op, .edge]' >batch.txt
	[ "$(tr -d '\n' <batch.txt)" = '["evaluate",0]["evaluate",1]["evaluate",2]' ]
	# the batch's first pick, in flight: the next picks are the batch's others
	kg-select "$RUN" >first.jsonl
	run_tool 0 kg-select --pending first.jsonl --batch 2 "$RUN"
	assert_stderr_empty
	[ "$(jq -c '[.op, .edge]' <<<"$output")" = "$(sed -n '2,3p' batch.txt)" ]
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '[.edges[].n]' g.json)" = '[0,0,0]' ] # the pending picks' virtual visits are not kept
	# expansions: a pending expansion of the best leaf (as kg-propose's candidates) sends
	# the pick to the next one, as the second pick of a batch goes there
	rm -rf "$RUN" && mkdir -p "$RUN" && start
	kg-select "$RUN" >pick.jsonl
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 1.5; } | kg-select --update "$RUN" >/dev/null
	[ "$(kg-select --batch 2 "$RUN" | jq -c '[.op, .node]' | tr -d '\n')" = '["expand","S1"]["expand","S2"]' ]
	kg-select "$RUN" >leaf.jsonl
	[ "$(jq -c '[.op, .node]' leaf.jsonl)" = '["expand","S1"]' ]
	jq -c '. + {candidate: {id: "a", config: {x: 5}}}, . + {candidate: {id: "b", config: {x: 6}}}' leaf.jsonl >pending.jsonl
	run_tool 0 kg-select --pending pending.jsonl "$RUN"
	[ "$(jq -c '[.op, .node]' <<<"$output")" = '["expand","S2"]' ]
	run_tool 0 kg-select "$RUN"
	[ "$(jq -c '[.op, .node]' <<<"$output")" = '["expand","S1"]' ] # without --pending, S1 again
	# a stop record, or an empty file, is nothing in flight
	echo '{"op": "stop", "reason": "budget"}' >stop.jsonl
	: >none.jsonl
	run_tool 0 kg-select --pending stop.jsonl "$RUN"
	[ "$(jq -c '[.op, .node]' <<<"$output")" = '["expand","S1"]' ]
	run_tool 0 kg-select --pending none.jsonl "$RUN"
	[ "$(jq -c '[.op, .node]' <<<"$output")" = '["expand","S1"]' ]
	# a pending pick's path counts as visited, as a batch's pick's does: below S1, whose
	# edge has a pending visit, S2 is the better choice now
	rm -rf "$RUN" && mkdir -p "$RUN" && start
	kg-select "$RUN" >pick.jsonl
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 1.9; } | kg-select --update "$RUN" >/dev/null
	kg-select "$RUN" >leaf.jsonl
	for s in A B; do jq -c '{node, node_id, path_edges, candidate: {id: "'$s'", method: "m"}}' leaf.jsonl; done |
		kg-select --update "$RUN" >/dev/null
	kg-select --batch 3 "$RUN" | jq -c '[.op, .node, .edge]' >batch.txt
	[ "$(tr -d '\n' <batch.txt)" = '["evaluate","S1",2]["evaluate","S1",3]["expand","S2",null]' ]
	kg-select "$RUN" >first.jsonl
	run_tool 0 kg-select --pending first.jsonl --batch 2 "$RUN"
	[ "$(jq -c '[.op, .node, .edge]' <<<"$output")" = "$(sed -n '2,3p' batch.txt)" ]
}

@test "--pending: pending candidates count against the budget; with nothing left to pick, no output and exit 0" {
	start --budget-builds 5
	kg-select "$RUN" >pick.jsonl
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 1.5; } | kg-select --update "$RUN" >/dev/null
	kg-select "$RUN" >leaf.jsonl
	[ "$(jq -c '[.node, .budget_left]' leaf.jsonl)" = '["S1",3]' ]
	# two of the three builds left are in flight: one is left, shared by the batch's two picks
	jq -c '. + {candidate: {id: "a"}}, . + {candidate: {id: "b"}}' leaf.jsonl >two.jsonl
	run_tool 0 kg-select --pending two.jsonl --batch 2 "$RUN"
	[ "$(jq -c '[.op, .node, .budget_left, .batch_budget]' <<<"$output" | tr -d '\n')" = '["expand","S2",1,1]["expand","S0",1,1]' ]
	# an expansion kg-propose has not answered yet holds its whole share
	run_tool 0 kg-select --pending leaf.jsonl --batch 2 "$RUN"
	assert_output ""
	# all three in flight: nothing to pick, nothing written, not an iteration
	iter=$(kg-select --export "$RUN" | jq .iter)
	jq -c '. + {candidate: {id: "c"}}' leaf.jsonl | cat two.jsonl - >three.jsonl
	run_tool 0 kg-select --pending three.jsonl "$RUN"
	assert_output ""
	assert_stderr_empty
	[ "$(kg-select --export "$RUN" | jq .iter)" = "$iter" ]
	# the search stops on the builds made, not on the pending ones
	evaluated leaf.jsonl S3 1.2 | jq -c '.node = "S1" | .node_id = 1 | .path_edges = [0]' >s3.jsonl
	{ cat s3.jsonl; evaluated s3.jsonl S4 1.1; evaluated s3.jsonl S5 1.1; } | kg-select --update "$RUN" >/dev/null
	run_tool 5 kg-select --pending three.jsonl "$RUN"
	[ "$(jq -c '[.op, .reason, .builds]' <<<"$output")" = '["stop","budget",5]' ]
}

@test "--pending: with nothing else to pick the nodes in flight are expanded again, nothing while only edges are, stop (exhausted) when none is" {
	start
	kg-select "$RUN" >root.jsonl
	jq -c '. + {candidate: {id: "a", config: {x: 2}}}' root.jsonl >candidate.jsonl
	iter=$(kg-select --export "$RUN" | jq .iter)
	# the root's expansion in flight is all there is (a search's start): the root is expanded
	# again, and kg-propose proposes around what is in flight
	run_tool 0 kg-select -v --pending candidate.jsonl --batch 4 "$RUN"
	[ "$(jq -c '[.op, .node, .iter]' <<<"$output")" = "[\"expand\",\"S0\",$((iter + 1))]" ]
	grep -Fx "kg-select: $RUN: nothing else to pick: nodes in flight expanded again: 1" <<<"$stderr"
	# so is one that kg-propose failed on and is not learned yet
	jq -c '. + {propose: {status: "error"}}' root.jsonl >error.jsonl
	run_tool 0 kg-select -q --pending error.jsonl "$RUN"
	[ "$(jq -c '[.op, .node]' <<<"$output")" = '["expand","S0"]' ]
	# an expansion kg-propose found nothing for opens nothing: the search is exhausted
	jq -c '. + {propose: {status: "empty"}}' root.jsonl >empty.jsonl
	run_tool 5 kg-select --pending empty.jsonl "$RUN"
	[ "$(jq -c '[.op, .reason]' <<<"$output")" = '["stop","exhausted"]' ]
	# only an edge's evaluation in flight, its node exhausted: nothing to pick, nothing
	# written, not an iteration
	rm -rf "$RUN" && mkdir -p "$RUN" && start
	kg-select "$RUN" >root.jsonl
	{ jq -c '{node, node_id, path_edges, candidate: {id: "r", method: "m"}}' root.jsonl
	  jq -c '. + {propose: {status: "empty"}}' root.jsonl; } | kg-select --update "$RUN" >/dev/null
	kg-select "$RUN" >edge.jsonl
	[ "$(jq -c '[.op, .edge]' edge.jsonl)" = '["evaluate",0]' ]
	iter=$(kg-select --export "$RUN" | jq .iter)
	run_tool 0 kg-select -v --pending edge.jsonl --batch 4 "$RUN"
	assert_output ""
	grep -Fx "kg-select: $RUN: nothing to pick while 1 pending records are in flight" <<<"$stderr"
	[ "$(kg-select --export "$RUN" | jq .iter)" = "$iter" ]
	# a budget split among the picks made: a batch of 3 that finds one pick gives it all
	rm -rf "$RUN" && mkdir -p "$RUN" && start --budget-builds 6
	run_tool 0 kg-select --batch 3 "$RUN"
	[ "$(jq -c '[.op, .budget_left]' <<<"$output")" = '["expand",6]' ]
}

@test "--pending: a pending rollout step holds the rollout back until its result is learned" {
	start --rollout-depth 3 --rollout-epsilon 0
	kg-select "$RUN" >pick0.jsonl
	kg-select --update "$RUN" < <(evaluated pick0.jsonl S1 2.0) >/dev/null
	kg-select "$RUN" >step1.jsonl
	[ "$(jq -c '[.op, .node, .rollout]' step1.jsonl)" = '["expand","S1",1]' ]
	jq -c '. + {candidate: {id: "a"}}' step1.jsonl >pending.jsonl
	run_tool 0 kg-select --pending pending.jsonl "$RUN"
	[ "$(jq -c '[.op, .node, .rollout]' <<<"$output")" = '["expand","S0",0]' ]
	[ "$(kg-select --export "$RUN" | jq -c '.rollout | [.node, .step]')" = '[1,1]' ]
}

@test "--pending: bad lines are named with FILE:LINE, exit 1 and nothing picked; an unreadable file is exit 2" {
	start --widen-k 3
	kg-select "$RUN" >pick.jsonl
	for s in S1 S2; do
		jq -c '{node, node_id, path_edges, candidate: {id: "'$s'", method: "m"}}' pick.jsonl
	done | kg-select --update "$RUN" >/dev/null
	evaluated pick.jsonl S3 2.0 | jq -c '.edge = 1' | kg-select --update "$RUN" >/dev/null
	iter=$(kg-select --export "$RUN" | jq .iter)
	{
		echo 'not json'
		echo '{"node_id": 0}'
		echo '{"op": "expand", "node_id": 7, "path_edges": []}'
		echo '{"op": "expand", "node": "S9", "node_id": 0, "path_edges": []}'
		echo '{"op": "evaluate", "node_id": 0, "edge": 1, "path_edges": []}'
		echo '{"op": "evaluate", "node_id": 0, "edge": 9, "path_edges": []}'
		echo '{"op": "expand", "node_id": 1, "path_edges": [0]}'
		echo '{"op": "expand", "node_id": 0, "path_edges": [], "candidate": {"id": "fine"}}'
	} >bad.jsonl
	run_tool 1 kg-select --pending bad.jsonl "$RUN"
	assert_output ""
	assert_stderr "$(printf '%s\n' \
		'kg-select: bad.jsonl:1: invalid JSON at column 1' \
		'kg-select: bad.jsonl:2: op: missing (a pending record is a pick: expand or evaluate)' \
		'kg-select: bad.jsonl:3: node_id: 7 is not a node of the graph' \
		'kg-select: bad.jsonl:4: node: S9 is not the state of node 0' \
		'kg-select: bad.jsonl:5: edge 1 was evaluated already: it is not pending' \
		'kg-select: bad.jsonl:6: edge: 9 is not an edge out of node 0' \
		'kg-select: bad.jsonl:7: path_edges: not a path of the graph from the root to node 1')"
	[ "$(kg-select --export "$RUN" | jq .iter)" = "$iter" ]
	run_tool 2 kg-select --pending missing.jsonl "$RUN"
	[[ "$stderr" == "kg-select: "*"missing.jsonl"* ]]
	run_tool 2 kg-select --update --pending bad.jsonl "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: --pending goes with picking, not with --update" "Try 'kg-select --help' for more information.")"
}

@test "stopping: the build budget, and convergence without improvement; exit 5 with a stop record" {
	start --budget-builds 2
	kg-select "$RUN" >pick.jsonl
	[ "$(jq -c .budget_left pick.jsonl)" = 2 ]
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 1.5; } | kg-select --update "$RUN" >/dev/null
	run_tool 5 kg-select "$RUN"
	[ "$(jq -c '[.op, .reason, .builds, .incumbent, .speedup]' <<<"$output")" = '["stop","budget",2,"S1",2]' ]

	rm -rf "$RUN" && mkdir -p "$RUN"
	start --converge 2
	run_tool 0 kg-select "$RUN"
	run_tool 0 kg-select "$RUN"
	run_tool 5 kg-select "$RUN"
	[ "$(jq -c '[.op, .reason, .iter]' <<<"$output")" = '["stop","converged",2]' ]
}

@test "an expansion kg-propose found nothing for is not expanded again; with nothing left anywhere, exit 5 exhausted" {
	start
	kg-select "$RUN" >pick.jsonl
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 0; } | kg-select --update "$RUN" >/dev/null
	# S1 is picked; kg-propose has nothing new for it
	kg-select "$RUN" | jq -c '. + {propose: {status: "empty", dropped: 3, errors: []}}' >empty.jsonl
	[ "$(jq -r .node empty.jsonl)" = S1 ]
	run_tool 0 kg-select --update "$RUN" empty.jsonl
	[ "$(jq -c .update <<<"$output")" = '{"exhausted":1}' ]
	[ "$(tail -1 "$RUN/events.jsonl" | jq -c '[.op, .update.exhausted]')" = '["expand",1]' ]
	grep -Fqx '| | 2 | [S1](variants/S1/) | | | | | nothing new to try from here: not expanded again |' "$RUN/trace.md"
	# S1 is a leaf with nothing new (spent): the root is expanded instead, until it too has nothing
	run_tool 0 kg-select "$RUN"
	[ "$(jq -c '[.op, .node]' <<<"$output")" = '["expand","S0"]' ]
	jq -c '. + {propose: {status: "empty"}}' <<<"$output" | kg-select --update "$RUN" >/dev/null
	[ "$(kg-select --export "$RUN" | jq -c '[.nodes[] | [.state, .exhausted]]')" = '[["S0","exhausted"],["S1","spent"],["S2",null]]' ]
	run_tool 5 kg-select "$RUN"
	[ "$(jq -c '[.op, .reason, .builds, .incumbent]' <<<"$output")" = '["stop","exhausted",2,"S1"]' ]
	[ "$(kg-select --export "$RUN" | jq -c '[.nodes[] | .exhausted]')" = '["spent","spent",null]' ]
	# a stop record or a record without a node is not an expansion to mark
	run_tool 0 kg-select --update "$RUN" <<<'{"op": "stop", "reason": "exhausted"}'
	run_tool 1 kg-select --update "$RUN" <<<'{"op": "expand", "node": "S9", "propose": {"status": "empty"}}'
	assert_stderr "kg-select: <stdin>:1: node: S9 is not in the graph"
}

@test "an update started before the pick that feeds it waits for its input, not on the lock the pick needs" {
	start
	# the update is first to run: it must leave the run's lock to the pick
	run_tool 0 timeout 10 bash -c "{ sleep 0.3; kg-select '$RUN'; } | kg-select --update '$RUN'"
	[ "$(jq -r .op <<<"$output")" = expand ]
}

@test "parameters are kept in the graph; given again, they replace the kept ones" {
	start --c-puct 2 --widen-k 2 --backup max --seed 7
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '.params | [.c_init, .widen_k, .backup_max, .reward_clip]' g.json)" = '[2,2,true,3]' ]
	kg-select --export "$RUN" >g.json
	[ "$(jq -r .rng g.json)" = 0000000000000007 ]
	kg-select --widen-k 1 "$RUN" >/dev/null
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '.params | [.c_init, .widen_k, .backup_max]' g.json)" = '[2,1,true]' ]
}

@test "an update interrupted between two records resumes to the same graph; no record is lost" {
	start
	kg-select "$RUN" >pick.jsonl
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 0; evaluated pick.jsonl S3 1.5; } >ev.jsonl
	cp -r out whole && kg-select --update whole/kernels/k ev.jsonl >/dev/null
	# The same records, one process each, as after a kill between them.
	for i in 1 2 3; do sed -n "${i}p" ev.jsonl | kg-select --update "$RUN" >/dev/null; done
	kg-select --export "$RUN" >g.json
	kg-select --export whole/kernels/k >whole.json
	[ "$(jq -c 'del(.rng) | .nodes[].created_iter = 0' g.json)" = "$(jq -c 'del(.rng) | .nodes[].created_iter = 0' whole.json)" ]
	[ "$(wc -l <"$RUN/events.jsonl")" -eq 4 ]
}

@test "with --seed and Dirichlet noise, two searches make identical graphs" {
	for r in a b; do
		mkdir -p "$r/kernels/k"
		jq -c --arg run "$r/kernels/k" '.run = $run' < <(baseline) | kg-select --update --seed 42 --noise 0.25 --widen-k 3 "$r/kernels/k" >/dev/null
		kg-select "$r/kernels/k" >"$r.pick"
		for s in S1 S2 S3; do evaluated "$r.pick" "$s" 1.5; done | kg-select --update "$r/kernels/k" >/dev/null
		kg-select --batch 2 "$r/kernels/k" | jq -c 'del(.run)' >"$r.out"
	done
	cmp a.out b.out
	kg-select --export a/kernels/k >a.json
	kg-select --export b/kernels/k >b.json
	[ "$(jq -c 'del(.run)' a.json | sed 's/a\/kernels/X/g')" = "$(jq -c 'del(.run)' b.json | sed 's/b\/kernels/X/g')" ]
}

@test "rollouts: an improving child is expanded greedily for --rollout-depth steps, ending at the first failure" {
	start --rollout-depth 3 --rollout-epsilon 0
	kg-select "$RUN" >pick0.jsonl
	kg-select --update "$RUN" < <(evaluated pick0.jsonl S1 2.0) >/dev/null
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '.rollout | [.node, .steps_left]' g.json)" = '[1,3]' ]
	run_tool 0 kg-select "$RUN"
	[ "$(jq -c '[.op, .node, .rollout, .path]' <<<"$output")" = '["expand","S1",1,["S0","S1"]]' ]
	echo "$output" >pick1.jsonl
	{ evaluated pick1.jsonl S2 3.0; evaluated pick1.jsonl S3 2.5; } | kg-select --update "$RUN" >/dev/null
	# Greedy on mean reward minus lambda * visits: S2 (log2 3 - 0.5) over S3 (log2 2.5 - 0.5).
	run_tool 0 kg-select "$RUN"
	[ "$(jq -c '[.op, .node, .rollout, .path]' <<<"$output")" = '["expand","S2",2,["S0","S1","S2"]]' ]
	echo "$output" >pick2.jsonl
	kg-select --update "$RUN" < <(evaluated pick2.jsonl S4 0) >/dev/null
	kg-select --export "$RUN" >g.json
	[ "$(jq .rollout g.json)" = null ]
	grep -Fqx '| | 3 | [S2](variants/S2/) | | | | | the rollout from here ended (a candidate failed) after 2 expansions, best 3.00x |' "$RUN/trace.md"
	run_tool 0 kg-select "$RUN"
	[ "$(jq .rollout <<<"$output")" = 0 ]
}

@test "--regraph: new edges get the ReGraph's transition probability times its success rate as prior" {
	start --regraph "$FIXTURES/select/regraph.json"
	kg-select "$RUN" >pick.jsonl
	for m in vec tile unroll; do
		jq -c --arg m "$m" '{node, node_id, path_edges, candidate: {id: $m, method: $m}}' pick.jsonl
	done | kg-select --update "$RUN" >/dev/null
	kg-select --export "$RUN" >g.json
	[ "$(jq -c '[.edges[] | [.method, .prior]]' g.json)" = '[["vec",0.18],["tile",0.3],["unroll",1]]' ]
	kg-select --export "$RUN" >g.json
	[ "$(jq -r .regraph g.json)" = "$FIXTURES/select/regraph.json" ]
	# With no visits yet, the higher prior wins among the ReGraph's methods; unknown methods keep 1.
	run_tool 0 kg-select "$RUN"
	[ "$(jq -c '[.op, .edge, .candidate.method]' <<<"$output")" = '["evaluate",2,"unroll"]' ]
	run_tool 0 kg-select --batch 2 "$RUN"
	[ "$(jq -c '.candidate.method' <<<"$output" | tr -d '\n')" = '"unroll""tile"' ]
	# A proposer's own prior is weighed by the ReGraph's; a method it never saw keeps its own.
	jq -c '{node, node_id, path_edges, candidate: {id: "v2", method: "vec", prior: 0.5}}' pick.jsonl |
		kg-select --update "$RUN" >/dev/null
	jq -c '{node, node_id, path_edges, candidate: {id: "u2", method: "unroll", prior: 0.5}}' pick.jsonl |
		kg-select --update "$RUN" >/dev/null
	[ "$(kg-select --export "$RUN" | jq -c '[.edges[3:][] | [.method, .prior]]')" = '[["vec",0.09],["unroll",0.5]]' ]
}

@test "--regraph: an edge without success_mean has the Beta prior's mean, as kg-regraph and kg-propose read it" {
	start --regraph "$FIXTURES/regraph/no-success-mean.json"
	kg-select "$RUN" >pick.jsonl
	for m in vec tile unroll; do
		jq -c --arg m "$m" '{node, node_id, path_edges, candidate: {id: $m, method: $m}}' pick.jsonl
	done | run_tool 0 kg-select --update "$RUN"
	assert_stderr_empty
	# alpha0 1, beta0 3: tile's prior is 0.6 x 0.25
	[ "$(kg-select --export "$RUN" | jq -c '[.edges[] | [.method, .prior]]')" = '[["vec",0.18],["tile",0.15],["unroll",1]]' ]
}

@test "bad records and damaged graphs are reported with the file, line or field; exit 1" {
	start
	{
		echo '{"node_id":99,"candidate":{"id":"a"}}'
		echo '{"node":"SX","node_id":0,"candidate":{"id":"b"}}'
		echo '{"node":"SZ","candidate":{"id":"c"}}'
		echo '{"node_id":0,"edge":5,"candidate":{"id":"d"},"build":{"status":"ok","state":"S1"}}'
		echo 'not json'
		echo '{"node_id":0,"candidate":{"id":"fine"}}'
	} >bad.jsonl
	run_tool 1 kg-select --update "$RUN" bad.jsonl
	assert_stderr "$(printf '%s\n' \
		'kg-select: bad.jsonl:1: node_id: 99 is not a node of the graph' \
		'kg-select: bad.jsonl:2: node: SX is not the state of node 0' \
		'kg-select: bad.jsonl:3: node: SZ is not in the graph' \
		'kg-select: bad.jsonl:4: edge: 5 is not an edge out of node 0' \
		'kg-select: bad.jsonl:5: invalid JSON at column 1')"
	[ "${#lines[@]}" -eq 5 ]
	[ "$(jq -c .update <<<"${lines[4]}")" = '{"edge":0,"registered":true}' ]
	cp "$RUN/graph.bin" good.bin
	# Damaged graph.bin and graph.blobs.
	head -c 300 good.bin >"$RUN/graph.bin"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: cut short"
	echo 'not a graph' >"$RUN/graph.bin"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: not a kg-select graph"
	cp good.bin "$RUN/graph.bin"
	printf '\011' | dd of="$RUN/graph.bin" bs=1 seek=8 conv=notrunc status=none
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: version 9, but this kg-select reads version 5 (and 4)"
	cp good.bin "$RUN/graph.bin"
	printf '\001\002\003\004' | dd of="$RUN/graph.bin" bs=1 seek=12 conv=notrunc status=none
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: written on a machine of the other byte order: export it there (kg-select --export)"
	cp good.bin "$RUN/graph.bin"
	mv "$RUN/graph.blobs" good.blobs
	head -c 3 good.blobs >"$RUN/graph.blobs"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: nodes[0]: state, config or methods outside graph.blobs"
	head -c 1 good.blobs >"$RUN/graph.blobs"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: the kernel's name or the regraph path is outside graph.blobs"
	cp good.blobs "$RUN/graph.blobs"
	printf x | dd of="$RUN/graph.blobs" bs=1 seek=$(($(stat -c %s good.blobs) - 1)) conv=notrunc status=none
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: graph.blobs does not match it"
	# A checkpoint that holds the edge (an imported graph's first save), the edge's from set past the nodes.
	cp good.blobs "$RUN/graph.blobs"
	kg-select --export "$RUN" >"$RUN/graph.json"
	rm "$RUN/graph.bin" "$RUN/graph.blobs"
	kg-select "$RUN" >/dev/null
	rm "$RUN/graph.json"
	cp "$RUN/graph.bin" imported.bin
	python3 "$TOOLS/graph_bin.py" "$RUN/graph.bin" 'edges[0].from' 9223372036854775807
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: nodes[0]: nout 1 does not match its out-edges (edge 0)"
	cp imported.bin "$RUN/graph.bin" # now node 0's first out-edge past the edges
	python3 "$TOOLS/graph_bin.py" "$RUN/graph.bin" 'nodes[0].first_out' 9
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: nodes[0]: nout 1 does not match its out-edges (edge 9)"
	# Damaged graph.json, read only without graph.bin.
	rm "$RUN/graph.bin" "$RUN/graph.blobs"
	echo '{"version": 2}' >"$RUN/graph.json"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.json: version 2, but this kg-select reads version 1"
	echo '[]' >"$RUN/graph.json"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.json: not a graph (a JSON object)"
	echo '{"version": 1, "nodes": [{"rank": 0}]}' >"$RUN/graph.json"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.json: nodes[0].state: missing"
	run_tool 2 kg-select "/nonexistent/run"
	assert_stderr "kg-select: cannot lock the run '/nonexistent/run': No such file or directory"
}

# damaged FIELD VALUE MESSAGE: graph.bin as checkpointed in good.bin with FIELD set to VALUE (and
# its checksum written again, as a bug would write it) is refused with MESSAGE, exit 1.
damaged() {
	cp good.bin "$RUN/graph.bin"
	python3 "$TOOLS/graph_bin.py" "$RUN/graph.bin" "$1" "$2"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: $3"
	[ -z "$output" ]
}

# checkpointed: RUN's graph.bin made one checkpoint holding the whole graph (an imported
# graph's first save: --export, then graph.json read back by a pick), kept in good.bin.
checkpointed() {
	kg-select --export "$RUN" >good.json
	cp good.json "$RUN/graph.json"
	rm "$RUN/graph.bin" "$RUN/graph.blobs"
	kg-select "$RUN" >/dev/null
	rm "$RUN/graph.json"
	cp "$RUN/graph.bin" good.bin
}

@test "a damaged graph.bin is refused, naming the file and what is wrong: checksums, chains, parameters, counters" {
	start
	kg-select "$RUN" >pick.jsonl
	{ evaluated pick.jsonl S1 2.0; jq -c '{node, node_id, path_edges, candidate: {id: "r", method: "unroll"}}' pick.jsonl; } |
		kg-select --update "$RUN" >/dev/null
	# One checkpoint holding it all (an imported graph's first save); unchanged, it loads.
	checkpointed
	python3 "$TOOLS/graph_bin.py" "$RUN/graph.bin"
	cmp good.bin "$RUN/graph.bin"
	run_tool 0 kg-select --export "$RUN"
	# Cut short, and one byte flipped (the root's visits): the checksum.
	head -c $(($(stat -c %s good.bin) / 2)) good.bin >"$RUN/graph.bin"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: cut short"
	cp good.bin "$RUN/graph.bin"
	nodes_at=$(od -An -t u8 -j 40 -N 8 good.bin | tr -d ' ')
	printf '\177' | dd of="$RUN/graph.bin" bs=1 seek=$((nodes_at + 15)) conv=notrunc status=none
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: damaged: its checkpoint does not match its checksum"
	# What passes the checksum but would overflow, recurse, loop or wrap.
	damaged 'nodes[0].nout' 5 'nodes[0]: nout 5 and last_out do not match its 2 out-edges'
	damaged 'nodes[0].nout' 1 'nodes[0]: nout 1 does not match its out-edges (edge 1)'
	damaged 'edges[0].next_out' 0 'nodes[0]: nout 2 does not match its out-edges (edge 0)'
	damaged 'edges[0].to' 0 'edges[0]: to 0 is not a node of a higher rank than from 0'
	damaged 'nodes[1].rank' -1 'nodes[1]: rank -1 is not in [0, 2) (0 for the root)'
	damaged params.noise_alpha -1e300 'params.noise_alpha: -1e+300 is not a number in [0, 1e+09] (what --noise-alpha accepts)'
	damaged params.widen_k nan 'params.widen_k: nan is not a number in [0, 1e+09] (what --widen-k accepts)'
	damaged params.budget_builds 1e300 'params.budget_builds: 1e+300 is not a whole number in [0, 1e+15] (what --budget-builds accepts)'
	damaged params.backup_max 2 'params.backup_max: 2 is not 0 (mean) or 1 (max)'
	damaged 'nodes[0].q' nan 'nodes[0]: u 0, n 2, q nan: not finite, or n not a count of visits'
	damaged 'edges[1].prior' inf 'edges[1]: n 0, prior inf: not a count of visits, or not finite'
	damaged builds -9223372036854775808 'iter 2, builds -9223372036854775808, last_improvement 1, events_len '"$(stat -c %s "$RUN/events.jsonl")"': not counts in [0, 1e15] with last_improvement at most iter'
	damaged builds 2 'builds: 2, but 1 edges are evaluated'
	damaged incumbent 7 'incumbent: 7 is not a node'
	# A delta that is whole but fails its checksum is damage, not a kill: refused, not dropped.
	cp good.bin "$RUN/graph.bin"
	kg-select "$RUN" >/dev/null
	size=$(stat -c %s "$RUN/graph.bin")
	printf x | dd of="$RUN/graph.bin" bs=1 seek=$((size - 1)) conv=notrunc status=none
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: damaged: the delta at byte $(stat -c %s good.bin): it does not match its checksum (truncating the file there goes back to the graph before it, and the next kg-select learns the rest again from events.jsonl)"
	# graph.json is checked the same way.
	rm "$RUN/graph.bin" "$RUN/graph.blobs"
	jq '.params.noise_alpha = -1e300' good.json >"$RUN/graph.json"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.json: params.noise_alpha: -1e+300 is not a number in [0, 1e+09] (what --noise-alpha accepts)"
	jq '.builds = -1' good.json >"$RUN/graph.json"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.json: iter 1, builds -1, last_improvement 1, events_len $(stat -c %s "$RUN/events.jsonl"): not counts in [0, 1e15] with last_improvement at most iter"
	jq '.edges[0].to = 0' good.json >"$RUN/graph.json"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.json: edges[0]: to 0 is not a node of a higher rank than from 0"
}

# damaged_delta FIELD VALUE MESSAGE: graph.bin as good.bin and the delta of one more pick, that
# delta's FIELD set to VALUE and its checksum written again, is refused with MESSAGE, exit 1.
damaged_delta() {
	cp with_delta.bin "$RUN/graph.bin"
	python3 "$TOOLS/graph_bin.py" "$RUN/graph.bin" --delta "$1" "$2"
	run_tool 1 kg-select "$RUN"
	assert_stderr "kg-select: $RUN/graph.bin: damaged: the delta at byte $(stat -c %s good.bin): $3 (truncating the file there goes back to the graph before it, and the next kg-select learns the rest again from events.jsonl)"
	[ -z "$output" ]
}

@test "a delta's counts are bounded by its bytes: a huge one is reported as damage, not an out-of-memory exit" {
	start
	kg-select "$RUN" >pick.jsonl
	# A checkpoint of the root alone (an imported graph's first save) ...
	checkpointed
	# ... and the delta of the update that adds its child; graph_bin.py --delta alone keeps it.
	evaluated pick.jsonl S1 2.0 | kg-select --update "$RUN" >/dev/null
	cp "$RUN/graph.bin" with_delta.bin
	python3 "$TOOLS/graph_bin.py" "$RUN/graph.bin" --delta
	cmp with_delta.bin "$RUN/graph.bin"
	# The fuzzer's find: a node count past anything the file holds sized the arrays, and
	# kg-select died "out of memory" (naming no file).
	damaged_delta nnodes 768612373040856086 "768612373040856086 nodes, but the graph before it has 1 and it changes 2"
	damaged_delta nedges 4611686018427387904 "4611686018427387904 edges, but the graph before it has 0 and it changes 1"
	# A rollout path whose byte count wraps to the bytes the delta has left (2^61 x 8 = 0).
	damaged_delta rollout_len 2305843009213693952 "a rollout path of 2305843009213693952 edges, but 0 bytes hold it"
	# Fewer nodes than the graph before it; a new node the delta does not hold.
	damaged_delta nnodes 0 "0 nodes, but the graph before it has 1 and it changes 2"
	damaged_delta nnodes 3 "3 nodes, but it holds 1 of the 2 new ones"
	damaged_delta changed_nodes 1000000 "1000000 changed nodes and 1 changed edges do not fit in its 944 bytes"
}

@test "a kill between the log and the graph: the next update learns the logged records again, once" {
	start
	kg-select "$RUN" >pick.jsonl
	cp "$RUN/graph.bin" "$RUN/graph.blobs" .
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 0; } | kg-select --update "$RUN" >/dev/null
	cp "$RUN/events.jsonl" events.before
	cp "$RUN/trace.md" trace.before
	want=$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state], .incumbent, .events_len]')
	# the graph as it was before the update; the log as it is after it
	cp graph.bin graph.blobs "$RUN/"
	[ "$(kg-select --export "$RUN" | jq .builds)" = 0 ]
	# --builds counts the log's records past the graph too, and changes nothing (kg-nightly's
	# Slurm end job counted one short a task cancelled between the two)
	run_tool 0 kg-select --builds "$RUN"
	assert_output "$(jq '.[0]' <<<"$want")"
	assert_stderr_empty
	[ "$(jq '.[0]' <<<"$want")" -eq 2 ]
	cmp "$RUN/graph.bin" graph.bin
	run_tool 0 kg-select --update "$RUN" </dev/null
	assert_stderr "kg-select: warning: $RUN/events.jsonl: $(($(wc -c <events.before) - $(head -1 events.before | wc -c))) bytes of the log are not in the graph (a run stopped between the two): learning them again"
	[ "$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state], .incumbent, .events_len]')" = "$want" ]
	# nothing written twice
	cmp "$RUN/events.jsonl" events.before
	cmp "$RUN/trace.md" trace.before
	run_tool 0 kg-select --update "$RUN" </dev/null
	assert_stderr_empty
}

@test "a kill between the log and the graph: the next pick learns the logged records first; no builds or edges handed out twice" {
	start --budget-builds 4
	jq -c '{node, node_id, path_edges, candidate: {id: ("c-" + ("a", "b", "c")), method: "tile"}}' \
		< <(kg-select "$RUN") | kg-select --update "$RUN" >/dev/null
	kg-select --batch 3 "$RUN" >pick.jsonl
	[ "$(jq -r .candidate.id pick.jsonl | sort | tr '\n' ' ')" = 'c-a c-b c-c ' ]
	cp "$RUN/graph.bin" "$RUN/graph.blobs" .
	learned=$(stat -c %s "$RUN/events.jsonl")
	# Two of the three evaluated; then the graph as it was before the update, the log as after.
	{ evaluated <(sed -n 1p pick.jsonl) S1 2.0 | jq -c '.edge = 0 | .candidate.id = "c-a"'
	  evaluated <(sed -n 2p pick.jsonl) S2 1.5 | jq -c '.edge = 1 | .candidate.id = "c-b"'; } |
		kg-select --update "$RUN" >/dev/null
	want=$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state], .events_len]')
	cp graph.bin graph.blobs "$RUN/"
	[ "$(kg-select --export "$RUN" | jq .builds)" = 0 ]
	run_tool 0 kg-select --batch 3 "$RUN"
	assert_stderr "kg-select: warning: $RUN/events.jsonl: $(($(stat -c %s "$RUN/events.jsonl") - learned)) bytes of the log are not in the graph (a run stopped between the two): learning them again"
	# What is left of the budget, shared by the batch; the evaluated edges are not picked again.
	[ "$(jq -c .batch_budget <<<"$output" | sort -u)" = 2 ]
	[ "$(jq -r 'select(.op == "evaluate") | .candidate.id' <<<"$output" | grep -c -e c-a -e c-b)" = 0 ]
	[ "$(jq -r 'select(.op == "evaluate") | .candidate.id' <<<"$output")" = c-c ]
	[ "$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state], .events_len]')" = "$want" ]
	# A log that no longer ends a record where the graph's part of it ends is not read.
	cp graph.bin graph.blobs "$RUN/"
	{ printf x; cat "$RUN/events.jsonl"; } >events.shifted && cp events.shifted "$RUN/events.jsonl"
	run_tool 0 kg-select --batch 3 "$RUN"
	assert_stderr "kg-select: warning: $RUN/events.jsonl: byte $learned, where the graph's part of it ends, ends no record: not read"
}

@test "catching up with the log: a damaged line past the graph's part is named by its line in the whole log and skipped" {
	start --budget-builds 4
	jq -c '{node, node_id, path_edges, candidate: {id: ("c-" + ("a", "b")), method: "tile"}}' \
		< <(kg-select "$RUN") | kg-select --update "$RUN" >/dev/null
	kg-select --batch 2 "$RUN" >pick.jsonl
	cp "$RUN/graph.bin" "$RUN/graph.blobs" .
	{ evaluated <(sed -n 1p pick.jsonl) S1 2.0 | jq -c '.edge = 0 | .candidate.id = "c-a"'
	  evaluated <(sed -n 2p pick.jsonl) S2 1.5 | jq -c '.edge = 1 | .candidate.id = "c-b"'; } |
		kg-select --update "$RUN" >/dev/null
	want=$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state]]')
	# the graph before the update; a line a kill cut short between the two records it lacks
	cp graph.bin graph.blobs "$RUN/"
	{ sed -n 1,4p "$RUN/events.jsonl"; echo '{"op": "evaluate", "bui'; sed -n 5p "$RUN/events.jsonl"; } >events.damaged
	cp events.damaged "$RUN/events.jsonl"
	run_tool 0 kg-select --batch 2 "$RUN"
	assert_stderr "$(printf '%s\n' "kg-select: warning: $RUN/events.jsonl: $(($(wc -c <events.damaged) - $(head -3 events.damaged | wc -c))) bytes of the log are not in the graph (a run stopped between the two): learning them again" \
		"kg-select: $RUN/events.jsonl:5: invalid JSON at column 21")"
	[ "$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state]]')" = "$want" ]
	[ "$(kg-select --export "$RUN" | jq .events_len)" = "$(wc -c <events.damaged)" ]
}

@test "a save cut short by a kill leaves the previous graph, and the next save goes on from it" {
	start
	kg-select "$RUN" >pick.jsonl
	evaluated pick.jsonl S1 2.0 | kg-select --update "$RUN" >/dev/null
	kg-select --export "$RUN" >before.json
	size=$(stat -c %s "$RUN/graph.bin")
	evaluated pick.jsonl S2 1.5 | kg-select --update "$RUN" >/dev/null
	[ "$(stat -c %s "$RUN/graph.bin")" -gt "$size" ]
	# The last delta, cut 10 bytes short, as by a kill -9 inside write(2).
	truncate -s -10 "$RUN/graph.bin"
	run_tool 0 kg-select --export "$RUN"
	assert_stderr "kg-select: warning: $RUN/graph.bin: dropping $(($(stat -c %s "$RUN/graph.bin") - size)) bytes after the last whole delta (a step was killed while saving)"
	[ "$output" = "$(cat before.json)" ]
	evaluated pick.jsonl S2 1.5 | kg-select --update "$RUN" >/dev/null 2>&1
	run_tool 0 kg-select --export "$RUN"
	assert_stderr ""
	[ "$(jq -c '[.nodes[].state]' <<<"$output")" = '["S0","S1","S2"]' ]
}

@test "a full disk: the log is cut back to its last whole line, the record is not learned and still goes out; exit 4" {
	start
	kg-select "$RUN" >pick.jsonl
	# a record of 3 kB, the log a line of 300 bytes: a file size limit (1 kB blocks) half
	# way into the record stands for a disk that fills there
	evaluated pick.jsonl S1 2.0 | jq -c --arg pad "$(printf '%03000d' 0)" '.candidate.pad = $pad' >one.jsonl
	cp "$RUN/events.jsonl" events.before
	want=$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state], .events_len]')
	limit=$((($(wc -c <"$RUN/events.jsonl") + $(wc -c <one.jsonl) / 2) / 1024))
	run bash -c "trap '' XFSZ; ulimit -f $limit; kg-select --update '$RUN' <one.jsonl 2>err"
	[ "$status" -eq 4 ]
	[ "$(jq -r .candidate.id <<<"$output")" = c-S1 ]
	grep -qx "kg-select: <stdin>:1: not learned: the run's log could not hold it (the graph stays as the log has it)" err
	cmp "$RUN/events.jsonl" events.before
	# no dataset row for the record the log refused
	[ ! -s out/regraph_dataset.jsonl ]
	[ "$(kg-select --export "$RUN" | jq -c '[.builds, [.nodes[].state], .events_len]')" = "$want" ]
	# with space again, the same record is learned whole
	run_tool 0 kg-select --update "$RUN" <one.jsonl
	[ "$(kg-select --export "$RUN" | jq .builds)" = 1 ]
	jq -e . "$RUN/events.jsonl" >/dev/null
	[ "$(jq -r .candidate_id out/regraph_dataset.jsonl)" = c-S1 ]
}

@test "a kill between the log and the dataset row: the catch-up writes the rows the dataset lacks, by candidate id, once" {
	start
	kg-select "$RUN" >pick.jsonl
	cp "$RUN/graph.bin" "$RUN/graph.blobs" .
	{ evaluated pick.jsonl S1 2.0; evaluated pick.jsonl S2 0; } | kg-select --update "$RUN" >/dev/null
	[ "$(jq -r .candidate_id out/regraph_dataset.jsonl | paste -sd' ')" = "c-S1 c-S2" ]
	# killed after S1's row, before S2's: the graph as before the update, the log as after
	head -1 out/regraph_dataset.jsonl >rows && cp rows out/regraph_dataset.jsonl
	cp graph.bin graph.blobs "$RUN/"
	run_tool 0 kg-select --update "$RUN" </dev/null
	[ "$(jq -r .candidate_id out/regraph_dataset.jsonl | paste -sd' ')" = "c-S1 c-S2" ]
	# the row learned again carries the logged time, and the same fields
	[ "$(sed -n 2p out/regraph_dataset.jsonl | jq -r .t)" = "$(sed -n 3p "$RUN/events.jsonl" | jq -r .t)" ]
	[ "$(sed -n 2p out/regraph_dataset.jsonl | jq -c '[.kernel, .from_method, .to_method, .ok, .reward]')" = '["k","init","tile",false,-3]' ]
	# rows present are not written again
	cp out/regraph_dataset.jsonl rows.after
	cp graph.bin graph.blobs "$RUN/"
	run_tool 0 kg-select --update "$RUN" </dev/null
	cmp out/regraph_dataset.jsonl rows.after
}

@test "a link planted where a run file should be is an error naming it; nothing is written where it points" {
	start
	kg-select "$RUN" >pick.jsonl
	printf 'keep\n' >victim
	for f in "$RUN/events.jsonl" "$RUN/trace.md" out/regraph_dataset.jsonl "$RUN/graph.bin" "$RUN/graph.blobs"; do
		[ ! -e "$f" ] || mv "$f" saved
		ln -s "$PWD/victim" "$f"
		run --separate-stderr kg-select --update "$RUN" < <(evaluated pick.jsonl S1 2.0)
		# the graph's files are read first, and the victim is no graph: refused before any
		# write; the trace is a warning (exit 0), as any trace that cannot be written is
		[[ $f == *trace.md ]] || [ "$status" -ne 0 ]
		[[ $f == *graph* ]] || [[ "$stderr" == *"'$f': Too many levels of symbolic links"* ]]
		[ "$(cat victim)" = keep ]
		rm "$f"
		[ ! -e saved ] || mv saved "$f"
	done
	# the run lock, beside the run's files
	rm "$RUN/.lock" && ln -s "$PWD/created" "$RUN/.lock"
	run_tool 2 kg-select --update "$RUN" < <(evaluated pick.jsonl S1 2.0)
	assert_stderr "kg-select: cannot lock the run '$RUN': Too many levels of symbolic links"
	[ ! -e created ]
}

@test "a dataset row that cannot be appended is an I/O error, exit 4: the record is learned, logged and goes out" {
	start
	kg-select "$RUN" >pick.jsonl
	mkdir out/regraph_dataset.jsonl # where a file is expected: no row can be appended
	run_tool 4 kg-select --update "$RUN" < <(evaluated pick.jsonl S1 2.0)
	assert_stderr "kg-select: cannot append to 'out/regraph_dataset.jsonl': Is a directory"
	[ "$(jq -r .candidate.id <<<"$output")" = c-S1 ]
	[ "$(tail -1 "$RUN/events.jsonl" | jq -r .candidate.id)" = c-S1 ]
	[ "$(kg-select --export "$RUN" | jq .builds)" = 1 ]
}
