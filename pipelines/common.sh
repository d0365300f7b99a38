# common.sh: what the kg-* pipeline scripts share, sourced by each: messages and exit codes
# as the C tools have them, finding the tools, and reading a spec's name.
# shellcheck shell=bash

# The tools are found beside the script that runs (bin/), or in ../bin of its real path
# (pipelines/ in a checkout; $kg_real, which the script sets before sourcing this file),
# before anything else on PATH; with no subprocess, since a search on replayed
# measurements runs the scripts several times a second.
KG_SELF=${0##*/}
case $0 in
*/*) KG_HERE=${0%/*} KG_HERE=${KG_HERE:-/} ;;
*) KG_HERE=. ;;
esac
[[ $KG_HERE == /* ]] || KG_HERE=$PWD/$KG_HERE
KG_REAL=${kg_real:-$(readlink -f "$0")}
KG_REAL=${KG_REAL%/*}
PATH="$KG_HERE:$KG_REAL/../bin:$PATH"

# What the scripts create (logs, locks, work files, trace.md through the shell) is never
# writable by others, whatever umask the caller had (000 made them 0666): others' write bit
# is added to the mask; the C tools create 0644 files and 0755 folders at most already.
umask "$(printf '%04o' $((8#$(umask) | 8#002)))"

KG_EXIT_INPUT=1
KG_EXIT_USAGE=2
KG_EXIT_ENV=3
KG_EXIT_IO=4
# shellcheck disable=SC2034 # the scripts' (kg-iterate's and kg-tune's), not this file's
KG_EXIT_STOP=5
KG_EXIT_LOCKED=6

kg_verbosity=0 # -1 quiet, 1 verbose

kg_error() {
	printf '%s: %s\n' "$KG_SELF" "$*" >&2
}

kg_info() {
	[ "$kg_verbosity" -ge 0 ] && printf '%s: %s\n' "$KG_SELF" "$*" >&2
	return 0
}

# kg_die STATUS MESSAGE...
kg_die() {
	local status=$1
	shift
	kg_error "$@"
	exit "$status"
}

kg_usage_error() {
	kg_error "$@"
	printf "Try '%s --help' for more information.\n" "$KG_SELF" >&2
	exit "$KG_EXIT_USAGE"
}

# kg_need_arg "$@": the option in $1 takes a value, which must follow it.
kg_need_arg() {
	[ $# -ge 2 ] || kg_usage_error "option '$1' requires an argument"
}

kg_need_commands() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 ||
			kg_die "$KG_EXIT_ENV" "$c is not installed (make deps installs what kernelgraph needs)"
	done
}

# kg_print_version: --version in the C tools' form, "kg-NAME (kernelgraph) VERSION", with
# their version: the one the build gave them (the Makefile's VERSION), asked of kg-select,
# found beside the script as every tool is, so that it is right in bin/ and installed alike.
kg_print_version() {
	local version
	kg_need_commands kg-select
	version=$(kg-select --version) || kg_die "$KG_EXIT_ENV" "kg-select --version failed"
	printf '%s (kernelgraph) %s\n' "$KG_SELF" "${version##* }"
}

# kg_spec_name SPEC: the run's name, General.BenchmarkName or else KernelName, as kg-select
# and the tools call the kernel. Exits 1 with the reason when the spec cannot give one.
kg_spec_name() {
	local spec=$1 name
	[ -f "$spec" ] && [ -r "$spec" ] || kg_die "$KG_EXIT_INPUT" "$spec: no such spec (a T1 JSON file)"
	name=$(jq -er '(.General.BenchmarkName // .KernelSpecification.KernelName) | strings' "$spec" 2>/dev/null) ||
		kg_die "$KG_EXIT_INPUT" "$spec: not a T1 spec with General.BenchmarkName or KernelSpecification.KernelName"
	case $name in
	'' | . | .. | */* | *[[:space:]]*)
		kg_die "$KG_EXIT_INPUT" "$spec: '$name' cannot name a run directory (General.BenchmarkName)" ;;
	esac
	printf '%s\n' "$name"
}

# kg_no_link PATH...: exits 4 naming the first PATH that is a symbolic link, before a script
# writes it: whoever can write into a shared run or OUTDIR could plant one to turn root's
# nightly onto another file. The C tools open their files with O_NOFOLLOW (lib/fileio.h);
# a shell redirection cannot, so this check comes right before each one.
kg_no_link() {
	local p
	for p in "$@"; do
		[ ! -L "$p" ] || kg_die "$KG_EXIT_IO" "$p: a symbolic link is there, where a run file should be: not followed"
	done
}

# kg_lock_run RUN: holds the run's lock until the script ends (or kg_unlock_run); returns
# KG_EXIT_LOCKED after saying so when another kg-tune, kg-iterate or kg-init holds it (two searches of one run would evaluate
# states twice and overrun its budget). The lock is flock(1) on .NAME.lock beside the run,
# so that it covers a kg-init that has not made the run yet; a script started by the holder
# (kg-tune's kg-init and kg-iterate) inherits the descriptor, named by KG_RUN_LOCK_FD, and
# with it the lock.
kg_lock_run() {
	local run=${1%/} lock fd
	[[ $run == */* ]] || run=./$run
	lock=${run%/*}/.${run##*/}.lock
	if [ -n "${KG_RUN_LOCK_FD:-}" ] && [ "/proc/self/fd/$KG_RUN_LOCK_FD" -ef "$lock" ]; then
		return 0
	fi
	mkdir -p "${run%/*}" && kg_no_link "$lock" && exec {fd}>>"$lock" || kg_die "$KG_EXIT_IO" "cannot open $lock"
	if ! flock -n "$fd"; then
		exec {fd}>&-
		kg_error "$1: already running: another kg-tune, kg-iterate or kg-init holds $lock"
		return "$KG_EXIT_LOCKED"
	fi
	export KG_RUN_LOCK_FD=$fd
}

# kg_unlock_run: lets the run kg_lock_run locked go, for a script that goes on to another.
kg_unlock_run() {
	[ -z "${KG_RUN_LOCK_FD:-}" ] || exec {KG_RUN_LOCK_FD}>&-
	unset KG_RUN_LOCK_FD
}

# kg_work_dir DIR: makes this script's work directory, DIR/.work-kg-NAME.XXXXXX, in $work,
# removed when the script ends. A script killed with kill -9 (no EXIT trap) leaves its own
# behind, in DIR rather than in /tmp, where the next kg_work_dir of DIR removes it: a work
# directory is live while its lock (flock on its "lock") is held, by the script and by the
# children that inherit the descriptor; DIR/.work.lock keeps a new one from being taken
# for dead between its mkdir and its lock.
kg_work_dir() {
	local dir=$1 fd old
	mkdir -p "$dir" && kg_no_link "$dir/.work.lock" && exec {fd}>>"$dir/.work.lock" && flock "$fd" ||
		kg_die "$KG_EXIT_IO" "cannot lock $dir/.work.lock"
	for old in "$dir"/.work-kg-*; do
		[ ! -d "$old" ] || ! kg_work_dir_dead "$old" || rm -rf "$old"
	done
	work=$(mktemp -d "$dir/.work-$KG_SELF.XXXXXX") && exec {KG_WORK_FD}>>"$work/lock" && flock "$KG_WORK_FD" ||
		kg_die "$KG_EXIT_IO" "cannot make a work directory in $dir"
	exec {fd}>&-
	trap 'rm -rf "$work"' EXIT
}

# kg_work_dir_dead DIR: whether no one holds DIR's lock. Its lock file is opened, never made:
# flock(1) would make it again in a folder its owner is removing (the lock gone, the rest not
# yet), whose removal then failed with "Directory not empty". With no lock file the folder
# is on its way out, or was left half removed: dead either way.
kg_work_dir_dead() {
	local fd s
	{ exec {fd}<"$1/lock"; } 2>/dev/null || return 0
	flock -n "$fd"
	s=$?
	exec {fd}<&-
	return "$s"
}

# The bench server (kg-iterate --serve-benches DIR; kg-tune keeps one for its GPUs): the
# kg-bench of the Gth GPU of its --gpus reads DIR/queue.G as it grows and appends its answer
# to each line to DIR/measured.G, in order; DIR/status.G is its exit status once it ended.
# A dealer appends to the queues under flock DIR/deal.lock (its lines are a block there, and
# its answers in measured.G). DIR/stop ends the queues: what they hold is measured first.
# While the server lives, DIR/alive is locked (flock) and DIR/ready exists.

# kg_served_answers DIR G FROM N: lines FROM+1 to FROM+N of DIR/measured.G, once the GPU's
# kg-bench has written them. Returns 0; or, when it ended before, the status it ended with
# (1 for 0), after the answers it wrote: nothing measured is lost. A server that died
# without saying (its lock free, looked at once a second rather than at every poll) is
# said, and ended with 3.
kg_served_answers() {
	local dir=$1 g=$2 from=$3 n=$4 polls=0 s=0
	while [ "$(wc -l <"$dir/measured.$g")" -lt $((from + n)) ]; do
		polls=$((polls + 1))
		if [ ! -e "$dir/status.$g" ] && [ $((polls % 50)) -eq 0 ] && flock -n "$dir/alive" true 2>/dev/null; then
			kg_error "the kg-benches of $dir ended before measuring what they were dealt"
			echo "$KG_EXIT_ENV" >"$dir/status.$g"
		fi
		if [ -e "$dir/status.$g" ]; then
			[ "$(wc -l <"$dir/measured.$g")" -lt $((from + n)) ] || break
			s=$(cat "$dir/status.$g")
			[ "$s" -ne 0 ] || s=$KG_EXIT_INPUT
			break
		fi
		sleep 0.02
	done
	sed -n "$((from + 1)),$((from + n))p" "$dir/measured.$g"
	return "$s"
}

# kg_is_run DIR: DIR holds a search graph (kg-init finished there).
kg_is_run() {
	[ -f "$1/graph.bin" ] || [ -f "$1/graph.json" ]
}

# kg_builds RUN: candidates evaluated so far, as the run's graph counts them (kg-select
# --builds: the graph's count, not a read of the whole log).
kg_builds() {
	kg_is_run "$1" || {
		echo 0
		return
	}
	kg-select --builds "$1"
}
