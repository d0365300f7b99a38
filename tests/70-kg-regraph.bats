#!/usr/bin/env bats
# 70-kg-regraph.bats: kg-regraph build, neighbors and dot on a fixture dataset of two kernels
# (one long run, one short), their options, and bad input.

load test_helper

DATASET="$FIXTURES/regraph/dataset.jsonl"

setup() {
	cd "$BATS_TEST_TMPDIR"
}

@test "--help, --version and usage errors" {
	run_tool 0 kg-regraph --help
	assert_line --index 0 "Usage: kg-regraph build DATASET [-o FILE] [--lambda L] [--alpha0 A] [--beta0 B] [--improve D]"
	assert_line "share a weight of 1 (docs/search.md); in success rates and means each kernel's rows share an"
	run_tool 0 kg-regraph --version
	assert_output --regexp '^kg-regraph \(kernelgraph\) [0-9]+\.[0-9]+\.[0-9]+$'
	hint="Try 'kg-regraph --help' for more information."
	run_tool 2 kg-regraph
	assert_stderr "$(printf '%s\n' "kg-regraph: no command given: build, neighbors or dot" "$hint")"
	run_tool 2 kg-regraph draw x
	assert_stderr "$(printf '%s\n' "kg-regraph: 'draw' is not a command: build, neighbors or dot" "$hint")"
	run_tool 2 kg-regraph build
	assert_stderr "$(printf '%s\n' "kg-regraph: build needs a DATASET" "$hint")"
	run_tool 2 kg-regraph neighbors rg.json
	assert_stderr "$(printf '%s\n' "kg-regraph: neighbors needs --from METHOD" "$hint")"
	run_tool 2 kg-regraph dot -o x rg.json
	assert_stderr "$(printf '%s\n' "kg-regraph: -o goes with build" "$hint")"
	run_tool 2 kg-regraph build --lambda -1 "$DATASET"
	assert_stderr "$(printf '%s\n' "kg-regraph: --lambda: '-1' is not a number of at least 0" "$hint")"
	run_tool 2 kg-regraph neighbors --from a --top 0 x
	assert_stderr "$(printf '%s\n' "kg-regraph: --top: '0' is not a number of at least 1" "$hint")"
	run_tool 2 kg-regraph dot a b
	assert_stderr "$(printf '%s\n' "kg-regraph: unexpected argument 'b'" "$hint")"
	run_tool 2 kg-regraph build missing.jsonl
	assert_stderr "kg-regraph: cannot open 'missing.jsonl': No such file or directory"
}

@test "build: counts, kernel weights, backoff probabilities and Beta posteriors" {
	run_tool 0 kg-regraph build "$DATASET"
	assert_stderr_empty
	echo "$output" > rg.json
	[ "$(jq -c '[.version, .rows, .kernels, .parameters]' rg.json)" = '[1,8,2,{"lambda":4,"alpha0":1,"beta0":1,"improve":0.01}]' ]
	jq -c '.edges[] | [.from, .to, .count, .successes, .failures, (.weight * 1e6 | round), (.probability * 1e6 | round),
		(.success_mean * 1e6 | round), (.beta | map(. * 1e6 | round)), (.mean_reward * 1e6 | round)]' rg.json > got
	# matmul: 3 rows from init and 3 from tile, each 1/3 of its origin's weight; softmax: 1 and 1.
	# P(tile|init) = (2/3 + 4 * (5/3 + 1)/(4 + 3)) / (2 + 4); Beta over kernel-balanced successes
	# (matmul rows 8/12 each, softmax rows 8/4).
	cat > want <<-'END'
	["init","tile",2,2,0,666667,365079,700000,[2333333,1000000],423998]
	["init","vectorize",2,1,1,1333333,507937,642857,[3000000,1666667],711999]
	["tile","vectorize",2,1,1,666667,476190,500000,[1666667,1666667],-18263]
	["tile","unroll",1,0,1,333333,219048,375000,[1000000,1666667],7196]
	["vectorize","tile",1,0,1,1000000,504762,250000,[1000000,3000000],-1000000]
	END
	diff want got
	[ "$(jq -c '.nodes[] | [.method, .count, .successes, (.frequency * 1e6 | round), .out_weight]' rg.json | tr -d '\n')" = \
		'["init",0,0,0,2]["tile",3,2,380952,1]["vectorize",4,2,428571,1]["unroll",1,0,190476,0]' ]
	# -o writes the same document, pretty
	run_tool 0 kg-regraph build -o file.json "$DATASET"
	[ "$(jq -c . file.json)" = "$(jq -c . rg.json)" ]
	# the parameters change the figures and are kept
	run_tool 0 kg-regraph build --lambda 0 --alpha0 0.5 --beta0 0.5 --improve 0.5 "$DATASET"
	[ "$(jq -c '.edges[0] | [.successes, (.probability * 1e6 | round), .beta]' <<<"$output")" = '[0,333333,[0.5,1.8333333333333333]]' ]
}

@test "neighbors: the next methods by prior, unseen ones backed off to the overall frequency" {
	kg-regraph build -o rg.json "$DATASET"
	run_tool 0 kg-regraph neighbors --from init rg.json
	assert_stderr_empty
	[ "$(jq -c '[.to, (.prior * 1e6 | round), (.probability * 1e6 | round), (.success_mean * 1e6 | round), .count, .mean_reward != null]' <<<"$output" | tr -d '\n')" = \
		'["vectorize",505796,507937,642857,2,true]["tile",395855,365079,700000,2,true]["unroll",98349,126984,500000,0,false]' ]
	run_tool 0 kg-regraph neighbors -f tile -k 1 rg.json
	[ "$(jq -c '[.from, .to]' <<<"$output")" = '["tile","vectorize"]' ]
	run_tool 0 kg-regraph neighbors --from nothing --top 2 rg.json
	[ "$(jq -c '[.to, .probability, .count]' <<<"$output" | tr -d '\n')" = '["vectorize",0.42857142857142855,0]["tile",0.380952380952381,0]' ]
	assert_stderr "kg-regraph: warning: rg.json: no transition from 'nothing' yet: the methods' overall frequency ranks them"
}

@test "neighbors: an edge without success_mean has the Beta prior's mean, as kg-select and kg-propose read it" {
	run_tool 0 kg-regraph neighbors --from init "$FIXTURES/regraph/no-success-mean.json"
	assert_stderr_empty
	# alpha0 1, beta0 3: tile's success is 0.25, so vec (0.2 x 0.9) ranks above tile (0.6 x 0.25)
	[ "$(jq -c '[.to, .success_mean, (.prior * 1e6 | round)]' <<<"$output" | tr -d '\n')" = '["vec",0.9,545455]["tile",0.25,454545]' ]
}

@test "dot: every method and transition, width by count, colour by mean reward" {
	kg-regraph build -o rg.json "$DATASET"
	run_tool 0 kg-regraph dot rg.json
	assert_stderr_empty
	cat > want <<-'END'
	digraph regraph {
		rankdir=LR;
		node [shape=box, style=rounded];
		"init" [label="init\nn=0"];
		"tile" [label="tile\nn=3"];
		"vectorize" [label="vectorize\nn=4"];
		"unroll" [label="unroll\nn=1"];
		"init" -> "tile" [penwidth=5.00, color="#1a9850", label="2, p=0.37"];
		"init" -> "vectorize" [penwidth=5.00, color="#1a9850", label="2, p=0.51"];
		"tile" -> "vectorize" [penwidth=5.00, color="#999999", label="2, p=0.48"];
		"tile" -> "unroll" [penwidth=3.00, color="#999999", label="1, p=0.22"];
		"vectorize" -> "tile" [penwidth=3.00, color="#d73027", label="1, p=0.50"];
	}
	END
	diff want <(sed 's/^\t//' <<<"$output")
	# names are quoted for DOT
	jq -c '.from_method = "a \"b\"" ' "$DATASET" > quoted.jsonl
	kg-regraph build -o q.json quoted.jsonl
	run_tool 0 kg-regraph dot q.json
	assert_line --index 3 '	"a \"b\"" [label="a \"b\"\nn=0"];'
}

@test "bad rows are reported with their line and skipped; a bad ReGraph is refused" {
	{ sed -n 1p "$DATASET"; echo '{"kernel":"k","from_method":"init","ok":true,"reward":0}'; echo '{"kernel":"k","from_method":"init","to_method":"x","ok":"yes","reward":0}';
	  echo '{"from_method":"init","to_method":"x","ok":true,"reward":0}'; echo '{"kernel":"k","from_method":"init","to_method":"x","ok":true}'; echo 'oops'; } > bad.jsonl
	run_tool 1 kg-regraph build bad.jsonl
	assert_stderr "$(printf '%s\n' "kg-regraph: bad.jsonl:2: to_method: must be a non-empty string" \
		"kg-regraph: bad.jsonl:3: ok: must be true or false" "kg-regraph: bad.jsonl:4: kernel: must be a string" \
		"kg-regraph: bad.jsonl:5: reward: must be a number" "kg-regraph: bad.jsonl:6: invalid JSON at column 1")"
	[ "$(jq -c '[.rows, (.edges | length)]' <<<"$output")" = '[1,1]' ]
	echo '{"nodes": [], "edges": [{"from": "a"}]}' > broken.json
	run_tool 1 kg-regraph neighbors --from a broken.json
	assert_stderr "kg-regraph: broken.json: edges[0].to: must be a string"
	echo '{"nodes": [{"method": "b", "frequency": 1}], "edges": [{"from": "a", "to": "b", "probability": 1, "success_mean": "high"}]}' > broken.json
	run_tool 1 kg-regraph neighbors --from a broken.json
	assert_stderr "kg-regraph: broken.json: edges[0].success_mean: must be a number"
	echo '{"nodes": [{"method": "b"}], "edges": []}' > broken.json
	run_tool 1 kg-regraph dot broken.json
	assert_stderr "kg-regraph: broken.json: nodes[0].frequency: must be a number"
	echo '{"edges": []}' > no-nodes.json
	run_tool 1 kg-regraph dot no-nodes.json
	assert_stderr "kg-regraph: no-nodes.json: must have \"nodes\" and \"edges\" arrays (kg-regraph build writes it)"
	run_tool 2 kg-regraph dot missing.json
	assert_stderr "kg-regraph: cannot read 'missing.json': No such file or directory"
}
