# nightly.sh: what kg-nightly (the night here, and its submission to Slurm) and
# kg-nightly-slurm (the night's array tasks and end job) share, sourced by both: a night's
# log lines, one spec's night (tune_spec: kg-tune --resume, its "spec" line, a converged
# search reopened or not), the ReGraph rebuilt at the end and the night's exit status.
# They read what the script sets: outdir, log, text, options, tune_verbosity ("-q" or "-v",
# for kg-tune), tune_in_background (non-empty in a Slurm task: kg-tune runs in the
# background, so that the task's USR1 trap runs while it works) and reopen_after.
# shellcheck shell=bash disable=SC2154 # the scripts set what it reads (above)

tune_verbosity=-q spec_note='' reopen_after=0 tune_in_background=''

# event NAME [JQ-ARGS...]: one line of kg-nightly's own in the JSONL log $log; an empty
# --arg is null (not known, or none).
event() {
	local name=$1
	shift
	jq -cn --arg t "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg event "$name" "$@" \
		'{t: $t, nightly: $event} + ($ARGS.named | del(.t, .event) | map_values(if . == "" then null else . end))' >>"$log" ||
		kg_die "$KG_EXIT_IO" "cannot append to $log"
}

# regraph_in FILE: what the ReGraph FILE was built from, {file, rows, kernels}; null when
# there is none.
regraph_in() {
	jq -c --arg file "$1" '{file: $file, rows, kernels}' "$1" 2>/dev/null || echo null
}

# tune_spec SPEC BUDGET REPLAY OPTIONS GPUS [JQ-ARGS...]: the night of one spec: kg-tune
# --resume on it with $options (the config's), then the spec's OPTIONS (JSON), BUDGET builds
# more than its run had at $before (counted here when empty), its records appended to $log
# and what it prints to $text; then its "spec" line (JQ-ARGS add to it). Sets $status (kg-tune's)
# and $run (empty when the spec names none).
tune_spec() {
	local spec=$1 budget=$2 replay=$3 gpus=$5 name after regraph=null best=null t0 spec_options=() fp end converged=null
	local reopen_opts=()
	mapfile -t spec_options < <(jq -r '.[]' <<<"$4")
	shift 5
	[ -z "$replay" ] || spec_options=(--replay "$replay" "${spec_options[@]}")
	name=$(kg_spec_name "$spec" 2>>"$text") || name=
	run=
	[ -z "$name" ] || { run=$outdir/kernels/$name; [ -n "$before" ] || before=$(kg_builds "$run"); }
	before=${before:-0}
	fp=$(fingerprint "$spec" "$replay")
	spec_note=
	[ -z "$run" ] || ! kg_is_run "$run" || reopen_converged "$spec" "$run" "$fp"
	local log_at
	log_at=$(stat -c %s "$log" 2>/dev/null || echo 0)
	t0=$(date +%s)
	local tune=(kg-tune --resume --regraph-autobuild --outdir "$outdir" --gpus "$gpus" --budget-builds $((before + budget))
		--log "$log" "$tune_verbosity" "${options[@]}" "${spec_options[@]}" "${reopen_opts[@]}" "$spec")
	if [ -z "$tune_in_background" ]; then
		"${tune[@]}" </dev/null >>"$text" 2>&1
		status=$?
	else # a Slurm task's, in the background: a trap (USR1) runs only once the foreground command ends
		"${tune[@]}" </dev/null >>"$text" 2>&1 &
		tune_pid=$!
		wait "$tune_pid"
		status=$?
		while kill -0 "$tune_pid" 2>/dev/null; do # the trap interrupted the wait
			wait "$tune_pid"
			status=$?
		done
		tune_pid=
	fi
	after=$before
	if [ -n "$run" ] && kg_is_run "$run"; then
		after=$(kg_builds "$run")
		best=$(jq -c '{median_ms, baseline_ms, speedup}' "$run/best.json" 2>/dev/null || echo null)
		# the ReGraph its search weighed its priors by: the one its graph names, as it is now
		# (kg-tune --regraph-autobuild rebuilt it before the spec and nothing since)
		regraph=$(regraph_in "$(kg-select --export "$run" 2>/dev/null | jq -r '.regraph // empty')")
	fi
	# why its search stopped tonight: its last stop record in the night's log
	end=$(tail -c +$((log_at + 1)) "$log" | jq -r --arg k "$name" 'select(.op == "stop" and .kernel == $k) | .reason' 2>/dev/null | tail -1)
	[ "$end" != converged ] || [ -n "$spec_note" ] ||
		spec_note="converged tonight: no improvement in its last $(jq -r '.params.converge_iters' <(kg-select --export "$run" 2>/dev/null)) iterations"
	spec_line "$spec" "$run" "$replay" "$status" $((after - before)) $(($(date +%s) - t0)) "$best" "$regraph" \
		--arg end "$end" --arg fingerprint "$fp" --argjson converged "$converged" "$@"
}

# fingerprint SPEC REPLAY: what reopens a converged search when it changes: the spec, its
# kernel file, the table it replays and the GPUs (nvidia-smi -L, where there is one).
fingerprint() {
	local kernel
	kernel=$(jq -r '.KernelSpecification.KernelFile // empty' "$1" 2>/dev/null)
	{
		cat -- "$1"
		[ -z "$kernel" ] || cat -- "$(dirname "$1")/$kernel"
		[ -z "$2" ] || cat -- "$2"
		nvidia-smi -L 2>/dev/null
	} 2>/dev/null | sha256sum | cut -c1-16
}

# reopen_converged SPEC RUN FINGERPRINT: for a run whose search converged (--converge K: K
# iterations without improvement) before tonight: how many nights it has been idle, from
# the spec's last line in the nights before; whether it is tried again tonight, after
# $reopen_after idle nights (0: never by age) or because its spec, kernel, table or GPUs
# changed (their fingerprint), given K more iterations (kg-select --converge). Sets
# $converged (the spec line's "converged"), $spec_note and $reopen_opts.
reopen_converged() {
	local k since prev idle why='' base
	read -r k since < <(kg-select --export "$2" 2>/dev/null | jq -r '(.iter - .last_improvement) as $s
		| select(.params.converge_iters > 0 and $s >= .params.converge_iters) | "\(.params.converge_iters) \($s)"')
	[ -n "${k:-}" ] || return 0
	prev=$(find "$outdir/logs" -maxdepth 1 -name '*.jsonl' ! -name "$(basename "$log")" 2>/dev/null | sort | tail -n 60 |
		xargs -r cat 2>/dev/null | jq -c --arg s "$1" 'select(.nightly == "spec" and .spec == $s)' 2>/dev/null | tail -1)
	idle=$(jq -r 'if .converged != null and .converged.reopened == null then .converged.idle_nights + 1 else 1 end' \
		<<<"${prev:-"{}"}" 2>/dev/null || echo 1)
	# the --converge the search was given before any reopening raised it
	base=$(jq -r '.converged.converge_given // empty' <<<"${prev:-"{}"}" 2>/dev/null)
	base=${base:-$k}
	if [ -n "$prev" ] && [ "$(jq -r '.fingerprint // empty' <<<"$prev")" != "$3" ] && [ -n "$(jq -r '.fingerprint // empty' <<<"$prev")" ]; then
		why="its spec, kernel, table or GPUs changed"
	elif [ "$reopen_after" -gt 0 ] && [ "$idle" -gt "$reopen_after" ]; then
		why="idle $((idle - 1)) night$([ "$idle" -eq 2 ] || echo s) (reopen_after $reopen_after)"
	fi
	converged=$(jq -cn --argjson k "$k" --argjson b "$base" --argjson s "$since" --argjson i "$idle" --argjson r "$reopen_after" \
		--arg why "$why" '{converge: $k, converge_given: $b, iterations_since_improvement: $s,
		  idle_nights: (if $why == "" then $i else 0 end), reopen_after: $r, reopened: (if $why == "" then null else $why end)}')
	if [ -n "$why" ]; then
		reopen_opts=(--select-opt "--converge $((since + base))")
		spec_note="reopened: converged before tonight, $why: $base more iterations without improvement"
	else
		spec_note="converged before tonight: no improvement in its last $since iterations (--converge $k), idle $idle night$([ "$idle" -eq 1 ] || echo s); tried again $(
			[ "$reopen_after" -gt 0 ] && echo "after $reopen_after idle nights (reopen_after) or" || echo "(reopen_after: 0, never by age) only")"
		spec_note+=" when its spec, kernel, table or GPUs change"
	fi
}

# spec_line SPEC RUN REPLAY STATUS BUILDS SECONDS BEST REGRAPH [JQ-ARGS...]: the spec's line
# in $log and its line in $text.
spec_line() {
	event spec --arg spec "$1" --arg run "$2" --arg replay "$3" --argjson status "$4" --argjson builds "$5" \
		--argjson seconds "$6" --argjson best "$7" --argjson regraph "$8" "${@:9}"
	echo "kg-nightly: $1: exit status $4, $5 builds${spec_note:+; $spec_note}" >>"$text"
}

# rebuild_regraph: the ReGraph of every transition logged, tonight's last spec's included,
# for the next night; sets $regraph (what it was built from, or null) and $regraph_status
# (kg-regraph's, null when there was nothing to build it from).
rebuild_regraph() {
	regraph=null regraph_status=null
	if [ -s "$outdir/regraph_dataset.jsonl" ]; then
		kg-regraph build "$outdir/regraph_dataset.jsonl" -o "$outdir/regraph.json" >>"$text" 2>&1
		regraph_status=$?
		[ "$regraph_status" -ne 0 ] || regraph=$(regraph_in "$outdir/regraph.json")
	fi
}

# night_status FAILED SPECS: says what failed, and returns the night's exit status.
night_status() {
	local night=0
	if [ "$1" -gt 0 ]; then
		kg_error "$1 of $2 specs failed; see $log and $text"
		night=$KG_EXIT_INPUT
	fi
	if [ "$regraph_status" != null ] && [ "$regraph_status" -ne 0 ]; then
		kg_error "$outdir/regraph.json: not rebuilt (kg-regraph build, exit status $regraph_status); see $text"
		night=$KG_EXIT_INPUT
	fi
	return "$night"
}
