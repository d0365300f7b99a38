# tune-overlap.sh: kg-tune's overlapped iterations on one GPU (overlapped and its ov_
# helpers), sourced by it. They read what kg-tune sets (run, work, log) and call its
# finished; they fill its unlogged (the output files whose records --log has not got yet,
# which its interrupted trap appends), and run kg-iterate's parts.
# shellcheck shell=bash disable=SC2154 # kg-tune sets what it reads (above)

# Overlapped iterations: each in three parts (kg-iterate --front-only, then --build-only,
# then --bench-only), so that iteration K+1 is picked and compiled while iterations K and K-1
# (depth - 1 of them) are compiled and measured:
#
#   bench K:   iteration K's builds go to the GPUs' kg-benches (the bench server) as they
#              come (tail -f), in the background, and are learned once front K+depth-1 is
#              done (--update-after)
#   front K+1: picked around iterations K-depth+2 to K (--pending), after K-depth+1 is
#              learned and before K-depth+2 is
#   build K+1: compiled in the background
#
# A pick waits for the compiles and measurements of the iterations before it, so with one
# iteration in flight (depth 2) the GPUs idle while it is picked and its first compile ends;
# with two (depth 3) they measure the one before. Each iteration is learned in order, and
# with a depth that does not change each pick sees the same learned iterations whatever the
# GPUs take: a seed gives one search. Depth 3 is enough where measuring an iteration takes
# longer than picking it and its slowest compile; N GPUs measure it N times as fast, so where
# compiles outlast measuring the depth grows, up to 2N + 1 (ov_depth; on two H200s the
# compile-bound matmul's GPUs gave 1.23x one GPU's candidates per minute at depth 3, 1.38x at
# 5: BENCHMARKS.md). Where measuring outlasts them, a deeper pipeline only makes picks on
# staler results: at 5 on two GPUs the kernel-time-bound matmul's candidates took 0.41 s to
# measure, against 0.34 to 0.38 s at 3. A search starts at 3 until an iteration is learned
# (started at 2N + 1, its initial design, random draws while the model waits for it, grew,
# and was slower to measure, for no gain). A replay has no times to go by: its depth stays
# 3, and its search on N GPUs is that on one (with the same --batch).
# At most one kg-select --update and depth kg-builds run at once. Iteration K's records are
# $dir/front.K (picked), built.K (growing while it compiles) and out.K (finished), and
# $dir/learn.K lets it be learned; fstat[K], bstat[K] and pstat[K] are the statuses of its
# parts, bpid[K] its build's process and ppid[K] its measurement's, pick_ms[K] its pick's
# time; iterations up to $settled are learned and finished, up to $released may be learned.
# The ov_ functions work on overlapped's locals.

# ov_front K OPTION...: picks iteration K around the records of the iterations in flight
# (those after $settled), gathered in $dir/pending.K.
ov_front() {
	local i=$1 j p=() t0=${EPOCHREALTIME//[!0-9]/}
	shift
	: >"$dir/pending.$i" || kg_die "$KG_EXIT_IO" "cannot write $dir/pending.$i"
	for ((j = settled + 1; j < i; j++)); do
		cat "$dir/front.$j" >>"$dir/pending.$i" || kg_die "$KG_EXIT_IO" "cannot write $dir/pending.$i"
	done
	[ "$i" -eq 1 ] || p=(--pending "$dir/pending.$i")
	kg-iterate --front-only "${p[@]}" "$@" "$run" >"$dir/front.$i"
	fstat[i]=$?
	pick_ms[i]=$(((${EPOCHREALTIME//[!0-9]/} - t0) / 1000))
}

# ov_depth: the depth for the iterations learned so far: 1 + F, F the iterations in flight
# whose measuring on the GPUs lasts as long as picking and compiling one, ceil(N x latency /
# GPU time), over those of the last OV_WINDOW iterations learned that measured on a GPU
# (latency: the pick and the slowest compile; GPU time: bench.wall_ms summed); at least 2,
# as on one GPU, at most 2N. Without those figures (a replay, none learned yet), 3.
OV_WINDOW=8
ov_depth() {
	local j latency=0 busy=0 f
	for ((j = settled; j >= 1 && j > settled - OV_WINDOW; j--)); do
		[ -n "${busy_ms[$j]:-}" ] || continue
		latency=$((latency + lat_ms[j])) busy=$((busy + busy_ms[j]))
	done
	depth=3
	[ "$busy" -gt 0 ] || return 0
	f=$(((ngpus * latency + busy - 1) / busy))
	[ "$f" -le $((2 * ngpus)) ] || f=$((2 * ngpus))
	[ "$f" -ge 2 ] || f=2
	depth=$((f + 1))
}

# ov_learned K: iteration K learned and finished (ov_done); its figures for ov_depth (ov_bench
# wrote them), when it measured anything on a GPU. Returns ov_done's status.
ov_learned() {
	local i=$1 compile wall
	ov_done "$i" || return
	[ -s "$dir/figures.$i" ] && read -r compile wall <"$dir/figures.$i" && [ "$wall" -gt 0 ] || return 0
	lat_ms[i]=$((pick_ms[i] + compile)) busy_ms[i]=$wall
}

# ov_build K OPTION...: compiles iteration K in the background.
ov_build() {
	local i=$1
	shift
	: >"$dir/built.$i"
	[ -s "$dir/front.$i" ] || return 0
	kg-iterate --from "$dir/front.$i" --build-only "$@" "$run" >"$dir/built.$i" &
	bpid[i]=$!
}

# ov_bench K OPTION...: measures iteration K's builds as kg-build writes them, in the
# background, and learns them once iteration K+1 is picked ($dir/learn.K exists); the
# status is kg-iterate's. Then, with several GPUs (one's depth is 3 whatever they say), its
# figures for ov_depth go to $dir/figures.K, reckoned here rather than on the next pick's
# path: its slowest compile (a build from the compile cache, or reused, compiled nothing:
# its compile_ms is the first compile's) and its measuring time.
ov_bench() {
	local i=$1
	shift
	[ -n "${bpid[$i]:-}" ] || return 0
	# shellcheck disable=SC2004 # unlogged is kg-tune's associative array: the key is a path
	unlogged[$dir/out.$i]=1
	(
		tail -c +1 -f --pid="${bpid[$i]}" -s 0.02 "$dir/built.$i" 2>/dev/null |
			kg-iterate --from - --bench-only --bench-server "$dir/benches" --update-after "$dir/learn.$i" "$@" "$run" >"$dir/out.$i"
		s=${PIPESTATUS[1]}
		[ "$ngpus" -eq 1 ] || jq -rs '[(map(select(.build.cached != true and .build.reused != true) | .build.compile_ms // 0)
			| max // 0), (map(.bench.wall_ms // 0) | add // 0)] | map(round) | @tsv' "$dir/out.$i" >"$dir/figures.$i" 2>/dev/null
		exit "$s"
	) &
	ppid[i]=$!
}

# ov_done K: waits for iteration K, then finished with the first failure among its parts.
# A front that wrote nothing (all its picks were in flight) was no iteration.
ov_done() {
	local i=$1 s part
	if [ -n "${ppid[$i]:-}" ]; then
		wait "${ppid[$i]}"
		pstat[i]=$?
		wait "${bpid[$i]}"
		bstat[i]=$?
	fi
	[ -f "$dir/out.$i" ] || : >"$dir/out.$i"
	s=${fstat[$i]}
	for part in "${bstat[$i]:-0}" "${pstat[$i]:-0}"; do
		[ "$s" -ne 0 ] || s=$part
	done
	[ "$s" -ne 0 ] || [ -s "$dir/front.$i" ] || return 0
	finished "$s" "$dir/out.$i"
}

# ov_drain FROM TO: when the search ends before iterations FROM to TO (measuring already)
# are learned, lets each be learned, in order, and waits for it: nothing measured is lost.
ov_drain() {
	local i
	for ((i = $1; i <= $2; i++)); do
		[ -n "${ppid[$i]:-}" ] || continue
		: >"$dir/learn.$i"
		wait "${ppid[$i]}" "${bpid[$i]}"
		[ -z "$log" ] || cat "$dir/out.$i" >>"$log" || kg_die "$KG_EXIT_IO" "cannot append to $log"
		unset 'unlogged[$dir/out.$i]'
	done
}

# ov_settle FROM TO: iterations FROM to TO learned and finished, one after the other; after
# one that failed, the rest are learned and logged (ov_drain). Returns 1 when one failed.
ov_settle() {
	local i
	for ((i = $1 < 1 ? 1 : $1; i <= $2; i++)); do
		: >"$dir/learn.$i"
		ov_done "$i" && continue
		ov_drain $((i + 1)) "$2"
		return 1
	done
}

# ov_over K: whether the front of iteration K ended the search (5) or cannot go on (2, 3);
# then it is finished (returns 1).
ov_over() {
	case ${fstat[$1]} in
	"$KG_EXIT_STOP") finished "${fstat[$1]}" "$dir/front.$1" ;;
	"$KG_EXIT_ENV" | "$KG_EXIT_USAGE") finished "${fstat[$1]}" /dev/null ;;
	*) return 0 ;;
	esac
	return 1
}

# ov_start OPTION...: makes the folder of the overlapped iterations ($work/overlap) and starts
# in it the kg-bench of each GPU that measures every iteration (kg-iterate --serve-benches
# overlap/benches), kept in $server, unless they run already: for a new run kg-tune starts
# them before kg-init, so that they open their GPUs while the baseline is built (2 s on a
# host of four H200s, which the first iteration waited for), and kg-init measures it with the
# first GPU's (--bench-server): a kg-bench of its own opened the GPU a second time, and
# waited for the server's context, made under the GPU's lock. ov_served waits until they
# are ready, and returns their status when they ended first.
ov_start() {
	[ -z "${server:-}" ] || return 0
	# (benches/ made here: ov_unserve's stop may come before kg-iterate has started)
	rm -rf "$work/overlap" && mkdir -p "$work/overlap/benches" || kg_die "$KG_EXIT_IO" "cannot make $work/overlap"
	kg-iterate --serve-benches "$work/overlap/benches" "$@" "$run" &
	server=$!
}

ov_served() {
	until [ -e "$work/overlap/benches/ready" ]; do
		kill -0 "$server" 2>/dev/null || { wait "$server"; local s=$?; server=; return "$s"; }
		sleep 0.01
	done
}

# ov_unserve: lets the kg-benches measure what they were dealt, and end; one that failed is
# said (its records' errors were learned as they came).
ov_unserve() {
	local f
	[ -n "${server:-}" ] || return 0
	: >"$work/overlap/benches/stop"
	wait "$server"
	server=
	for f in "$work"/overlap/benches/status.*; do
		[ ! -s "$f" ] || [ "$(cat "$f")" -eq 0 ] ||
			kg_error "$run: kg-bench of the GPU number ${f##*.} in --gpus ended with status $(cat "$f") (its errors are said above)"
	done
}

# overlapped OPTION...: overlapped iterations until the spec is over.
overlapped() {
	local dir=$work/overlap k=1 next j depth=3 settled=0 released=0 ngpus gpu_list
	IFS=, read -ra gpu_list <<<"${gpus:-0}"
	ngpus=${#gpu_list[@]}
	local -a fstat=() bstat=() pstat=() bpid=() ppid=() pick_ms=() lat_ms=() busy_ms=()
	# shellcheck disable=SC2034 # kg-tune's, read by its interrupted trap
	unlogged=()
	ov_start "$@"
	ov_front 1 "$@"
	ov_over 1 || { ov_unserve; return 0; }
	ov_build 1 "$@"
	ov_served || { finished "$?" /dev/null; wait; return 0; }
	while :; do
		# Iteration k is picked and compiling; iterations settled+1 to k-1 may be in flight.
		ov_bench "$k" "$@"
		ov_depth
		# the iterations released, and more when the pipeline got shallower, learned first:
		# the pick sees them all (an evaluation both pending and learned is an error)
		while [ "$settled" -lt "$released" ] || [ "$settled" -lt $((k - depth + 1)) ]; do
			j=$((settled + 1))
			[ "$released" -ge "$j" ] || { : >"$dir/learn.$j"; released=$j; }
			if [ -n "${ppid[$j]:-}" ] && ! ov_learned "$j"; then
				ov_drain $((j + 1)) "$k"
				break 2
			fi
			settled=$j
		done
		next=$((k + 1))
		ov_front "$next" "$@"
		# those the pick after next sees may be learned now, while next compiles
		for ((j = released + 1; j <= next + 1 - depth; j++)); do
			: >"$dir/learn.$j"
			released=$j
		done
		case ${fstat[$next]} in
		"$KG_EXIT_STOP" | "$KG_EXIT_ENV" | "$KG_EXIT_USAGE")
			ov_settle $((settled + 1)) "$k" && ov_over "$next"
			break ;;
		esac
		if [ "${fstat[$next]}" -eq 0 ] && [ ! -s "$dir/front.$next" ] && [ ! -s "$dir/pending.$next" ]; then
			kg_error "$run: kg-iterate --front-only picked nothing, with nothing in flight"
			fstat[next]=$KG_EXIT_INPUT # never expected: a failure, not a loop
		fi
		ov_build "$next" "$@"
		if [ -z "${ppid[$k]:-}" ] && ! ov_done "$k"; then # iteration k, with nothing to measure, failed
			ov_drain $((settled + 1)) $((k - 1))
			break
		fi
		k=$next
	done
	ov_unserve
	wait # the compiles of an iteration that will not be measured
}
