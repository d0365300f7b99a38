#!/bin/sh
# sizes.sh (GPU): an example at several problem sizes, for the kernels (the matmuls) whose
# correctness must hold at more than one: per size, a spec of that size (ProblemSize and the
# scalars named in SCALARS set to it), its baseline checked against an independent computation
# and the same random sample of configurations checked and timed (benchmarks/sweep.sh), into
# $OUT/NAME_SIZE_T4.json.
# Usage, from the repository root: benchmarks/sizes.sh NAME SAMPLE "SCALARS" SIZE...
#   e.g. KG_BENCH_OPTS="--budget 0.1" benchmarks/sizes.sh matmul 48 "M N K" 1024 2048 4096
set -u
name=$1 sample=$2 scalars=$3
shift 3
out=${OUT:-.}
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$(mktemp -d)}
bin/kg-bench --calibrate -q >/dev/null
specs=$(mktemp -d)
spec=examples/$name/$name.json
for size in "$@"; do
	start=$(date +%s)
	# A spec may name only files in its folder: the example's files go beside the sized spec.
	cp "$(dirname "$spec")"/* "$specs"/ &&
		jq --argjson n "$size" --arg scalars "$scalars" -f benchmarks/resize.jq "$spec" > "$specs/${name}_$size.json" ||
		{ echo "$name $size: cannot write the sized spec"; exit 1; }
	printf '%s %s: ' "$name" "$size"
	# shellcheck disable=SC2086
	benchmarks/sweep.sh "$specs/${name}_$size.json" "$out/${name}_${size}_T4.json" "$sample" ${KG_BENCH_OPTS:-} ||
		{ echo "$name $size: the sweep failed; larger sizes skipped"; exit 1; }
	jq -r '[.results[].invalidity] | group_by(.) | map("\(.[0]) \(length)") | join(", ")' "$out/${name}_${size}_T4.json"
	echo "  $(($(date +%s) - start)) s"
done
rm -rf "$specs"
