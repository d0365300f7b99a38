# tune-overlap.sh: kg-tune's overlapped iterations on one GPU (overlapped and its ov_
# helpers), sourced by it. They read what kg-tune sets (run, work, log) and call its
# finished; they fill its unlogged (the output files whose records --log has not got yet,
# which its interrupted trap appends), and run kg-iterate's parts.
# shellcheck shell=bash disable=SC2154 # kg-tune sets what it reads (above)

# Overlapped iterations, on one GPU: each in three parts (kg-iterate --front-only, then
# --build-only, then --bench-only), so that iteration K+1 is picked and compiled while
# iteration K is measured:
#
#   bench K:   iteration K's builds are measured as they come (tail -f), in the background,
#              and learned once front K+1 is done (--update-after)
#   front K+1: picked around iteration K (--pending), after K-1 is learned and before K is
#   build K+1: compiled in the background
#
# Iteration K's kg-bench starts as soon as K-1's measurements do, so that its GPU context is
# ready when K-1's records are done: kg-bench's GPU lock keeps one record on the GPU at a
# time. At most one kg-select --update and two kg-builds run at once. Iteration K's records
# are $dir/front.K (picked), built.K (growing while it compiles) and out.K (finished), and
# $dir/learn.K lets it be learned; fstat[K], bstat[K] and pstat[K] are the statuses of its
# parts, bpid[K] its build's process and ppid[K] its measurement's. The ov_ functions work
# on overlapped's locals.

# ov_front K OPTION...: picks iteration K around iteration K-1's records.
ov_front() {
	local i=$1 p=()
	shift
	[ "$i" -eq 1 ] || p=(--pending "$dir/front.$((i - 1))")
	kg-iterate --front-only "${p[@]}" "$@" "$run" >"$dir/front.$i"
	fstat[i]=$?
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
# status is kg-iterate's.
ov_bench() {
	local i=$1
	shift
	[ -n "${bpid[$i]:-}" ] || return 0
	# shellcheck disable=SC2004 # unlogged is kg-tune's associative array: the key is a path
	unlogged[$dir/out.$i]=1
	(
		tail -c +1 -f --pid="${bpid[$i]}" -s 0.02 "$dir/built.$i" 2>/dev/null |
			kg-iterate --from - --bench-only --bench-server "$dir/benches" --update-after "$dir/learn.$i" "$@" "$run" >"$dir/out.$i"
		exit "${PIPESTATUS[1]}"
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

# ov_drain K: when the search ends before iteration K (measuring already) is learned, lets
# it be learned and waits for it: nothing it measured is lost.
ov_drain() {
	local i=$1
	[ -n "${ppid[$i]:-}" ] || return 0
	: >"$dir/learn.$i"
	wait "${ppid[$i]}" "${bpid[$i]}"
	[ -z "$log" ] || cat "$dir/out.$i" >>"$log" || kg_die "$KG_EXIT_IO" "cannot append to $log"
	unset 'unlogged[$dir/out.$i]'
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

# ov_serve OPTION...: starts the kg-bench of each GPU that measures every iteration
# (kg-iterate --serve-benches $dir/benches), kept in $server; ov_served waits until it is
# ready, and returns its status when it ended first. The first iteration is picked and
# compiled while the GPUs' contexts are made.
ov_serve() {
	kg-iterate --serve-benches "$dir/benches" "$@" "$run" &
	server=$!
}

ov_served() {
	until [ -e "$dir/benches/ready" ]; do
		kill -0 "$server" 2>/dev/null || { wait "$server"; local s=$?; server=; return "$s"; }
		sleep 0.01
	done
}

# ov_unserve: lets the kg-benches measure what they were dealt, and end; one that failed is
# said (its records' errors were learned as they came).
ov_unserve() {
	local f
	[ -n "${server:-}" ] || return 0
	: >"$dir/benches/stop"
	wait "$server"
	server=
	for f in "$dir"/benches/status.*; do
		[ ! -s "$f" ] || [ "$(cat "$f")" -eq 0 ] ||
			kg_error "$run: kg-bench of the GPU number ${f##*.} in --gpus ended with status $(cat "$f") (its errors are said above)"
	done
}

# overlapped OPTION...: overlapped iterations until the spec is over.
overlapped() {
	local dir=$work/overlap k=1 next
	local -a fstat=() bstat=() pstat=() bpid=() ppid=()
	# shellcheck disable=SC2034 # kg-tune's, read by its interrupted trap
	unlogged=()
	rm -rf "$dir" && mkdir -p "$dir" || kg_die "$KG_EXIT_IO" "cannot make $dir"
	ov_serve "$@"
	ov_front 1 "$@"
	ov_over 1 || { ov_unserve; return 0; }
	ov_build 1 "$@"
	ov_served || { finished "$?" /dev/null; wait; return 0; }
	while :; do
		# Iteration k is picked and compiling; iteration k-1 may be being measured.
		ov_bench "$k" "$@"
		if [ -n "${ppid[$((k - 1))]:-}" ] && ! ov_done $((k - 1)); then
			ov_drain "$k"
			break
		fi
		next=$((k + 1))
		ov_front "$next" "$@"
		: >"$dir/learn.$k" # iteration k may be learned now
		case ${fstat[$next]} in
		"$KG_EXIT_STOP" | "$KG_EXIT_ENV" | "$KG_EXIT_USAGE")
			ov_done "$k" && ov_over "$next"
			break ;;
		esac
		if [ "${fstat[$next]}" -eq 0 ] && [ ! -s "$dir/front.$next" ] && [ ! -s "$dir/front.$k" ]; then
			kg_error "$run: kg-iterate --front-only picked nothing, with nothing in flight"
			fstat[next]=$KG_EXIT_INPUT # never expected: a failure, not a loop
		fi
		ov_build "$next" "$@"
		[ -n "${ppid[$k]:-}" ] || ov_done "$k" || break # iteration k had nothing to measure
		k=$next
	done
	ov_unserve
	wait # the compiles of an iteration that will not be measured
}
