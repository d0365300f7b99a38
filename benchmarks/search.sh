#!/usr/bin/env bash
# search.sh (no GPU): how close to the optimum kg-tune, Kernel Tuner's strategies and random
# sampling get in 20, 40, 80 and 160 builds, on fully measured spaces replayed from T4 tables.
# Usage, from the repository root after `make`: benchmarks/search.sh [search.py option]...
# Prints a Markdown table per space (mean optimum / best over the seeds, fraction of seeds within
# 5 %); every result goes to $OUT/search.json when OUT is set, else to WORK/search.json.
# Settings from the environment (an option given on the command line wins): SPACES, BUDGETS,
# STRATEGIES (comma-separated), SEEDS (seeds 1..N, default 20), JOBS (runs at once, default the
# CPUs), KG_TUNE_OPTS (more kg-tune options, e.g. "--batch 2"), KG_JOBS (kg-tune --jobs,
# default 1: one candidate at a time, as Kernel Tuner evaluates), WORK (where runs
# are kept, so a rerun computes only what is missing; default /tmp/kg-search-work), KT_VENV
# (default /tmp/kg-search-venv), KT_VERSION (1.5.0).
# `benchmarks/search.py --help` lists the spaces, strategies and options.
set -euo pipefail

venv=${KT_VENV:-/tmp/kg-search-venv}
version=${KT_VERSION:-1.5.0}
die() { echo "search: $*" >&2; exit 1; }
[[ -x bin/kg-tune && -x bin/kg-propose ]] || die "no bin/kg-tune: run make first"

# Kernel Tuner in a virtual environment of the benchmark's own, pinned; made once, kept.
if ! "$venv/bin/python" -c "import kernel_tuner, sys; sys.exit(kernel_tuner.__version__ != '$version')" 2>/dev/null; then
	[ ! -e "$venv" ] || [ -f "$venv/pyvenv.cfg" ] || die "$venv exists and is not a virtual environment"
	python3 -m venv "$venv" || die "cannot make the virtual environment $venv (Debian: apt-get install python3-venv)"
	"$venv/bin/pip" install -q "kernel_tuner==$version" || die "cannot install kernel_tuner $version into $venv"
fi

args=()
[ -z "${SPACES:-}" ] || args+=(--spaces "$SPACES")
[ -z "${BUDGETS:-}" ] || args+=(--budgets "$BUDGETS")
[ -z "${STRATEGIES:-}" ] || args+=(--strategies "$STRATEGIES")
[ -z "${SEEDS:-}" ] || args+=(--seeds "$SEEDS")
[ -z "${JOBS:-}" ] || args+=(--jobs "$JOBS")
[ -z "${KG_TUNE_OPTS:-}" ] || args+=("--kg-tune-opts=$KG_TUNE_OPTS")
[ -z "${KG_JOBS:-}" ] || args+=(--kg-jobs "$KG_JOBS")
[ -z "${WORK:-}" ] || args+=(--work "$WORK")
[ -z "${OUT:-}" ] || args+=(--json "$OUT/search.json")
exec "$venv/bin/python" benchmarks/search.py "${args[@]}" "$@"
