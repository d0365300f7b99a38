#!/usr/bin/env bash
# kt-compare.sh (GPU): candidates evaluated per minute by kg-tune and by Kernel Tuner (from PyPI,
# random_sample) on the same spec and budget, side by side in one run on one GPU.
# Usage, from the repository root after `make`: benchmarks/kt-compare.sh [SPEC] [BUDGET] [SEED]
# (defaults examples/matmul/matmul.json, 40, 1). Prints a table; with $OUT set, every figure goes
# to $OUT/kt-compare.json too. Kernel Tuner and its dependencies come from the wheels in .whl/
# (KT_WHEELS), installed into a virtual environment of its own (KT_VENV, default /tmp/kt-venv)
# over KT_PYTHON's packages (numpy, scipy, cupy; default /opt/torch/.venv/bin/python3, else
# python3). REPEAT=N runs each tool N times, alternating which goes first; KT_VERIFY=0 lets
# Kernel Tuner skip checking outputs; KG_TUNE_OPTS adds kg-tune options (split at spaces);
# TOOLS="kg kt" picks the tools; DRY_RUN=1 stops after the pre-flight check (needs no GPU).
set -euo pipefail

spec=${1:-examples/matmul/matmul.json}
budget=${2:-40}
seed=${3:-1}
repeat=${REPEAT:-1}
tools=${TOOLS:-kg kt}
wheels=${KT_WHEELS:-.whl}
venv=${KT_VENV:-/tmp/kt-venv}
py=${KT_PYTHON:-python3}
[ -n "${KT_PYTHON:-}" ] || [ ! -x /opt/torch/.venv/bin/python3 ] || py=/opt/torch/.venv/bin/python3
read -r -a kg_opts <<<"${KG_TUNE_OPTS:-}"

die() { echo "kt-compare: $*" >&2; exit 1; }
[ -f "$spec" ] || die "$spec: no such spec"
[[ $budget =~ ^[1-9][0-9]*$ && $seed =~ ^[0-9]+$ && $repeat =~ ^[1-9][0-9]*$ ]] || die "BUDGET, SEED and REPEAT are whole numbers"
[[ -x bin/kg-tune && -x bin/kg-propose ]] || die "no bin/kg-tune: run make first"
compgen -G "$wheels/kernel_tuner-*.whl" >/dev/null || die "no Kernel Tuner wheel in $wheels"
root=$PWD spec_path=$(readlink -f "$spec")
work=$(mktemp -d "${TMPDIR:-/tmp}/kt-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }

# The virtual environment: made anew each time. KT_PYTHON may itself be a virtual environment
# (/opt/torch/.venv), whose packages --system-site-packages would not show, so a .pth file
# puts its site-packages after the venv's own (the wheels win; numpy, scipy and cupy are
# found) and its prefix into site.PREFIXES, where cuda-pathfinder looks for NVIDIA's wheels.
[ ! -e "$venv" ] || [ -f "$venv/pyvenv.cfg" ] || die "$venv exists and is not a virtual environment"
rm -rf "$venv"
"$py" -m venv --system-site-packages --without-pip "$venv"
kpy=$venv/bin/python
site=$("$kpy" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
"$py" -c 'import site, sys; print("\n".join(site.getsitepackages())); print("import site; site.PREFIXES.append(%r)" % sys.prefix)' \
	>"$site/kt-compare-parent.pth"
if "$kpy" -m pip --version >/dev/null 2>&1; then # the parent's pip, installing into the venv
	"$kpy" -m pip install -q --no-index --no-deps --ignore-installed --no-warn-script-location "$wheels"/*.whl
else # no pip anywhere: a wheel without .data (all of ours) installs by unpacking it
	"$kpy" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' "$site" "$wheels"/*.whl
fi

# Pre-flight: Kernel Tuner's space, as the driver builds it, must hold exactly the configurations
# kg-propose counts, or the two tools would not be searching the same space.
count=$(bin/kg-propose --exhaustive --count --spec "$spec")
"$kpy" benchmarks/kt_compare.py "$spec" --budget "$budget" --seed "$seed" --dry-run --expect "$count"
[ "${DRY_RUN:-0}" = 0 ] || exit 0

# Untimed warm-ups, so that neither timed run pays alone for loading the driver and libraries
# from disk or waking the GPU: cupy and its NVRTC (one empty kernel), kg-bench's GPU start.
# A failure here shows again in the timed run; it does not stop the script.
case " $tools " in *" kt "*)
	CUPY_CACHE_DIR=$work/warm-cupy "$kpy" -c 'import cupy, kernel_tuner
cupy.RawKernel(r"""extern "C" __global__ void k() {}""", "k").compile()' || echo "kt-compare: Kernel Tuner's warm-up failed" >&2 ;;
esac
case " $tools " in *" kg "*)
	XDG_CACHE_HOME=$work/warm-kg bin/kg-bench --calibrate -q >/dev/null || echo "kt-compare: kg-bench's warm-up failed" >&2 ;;
esac

# Each run starts with empty compile caches of its own: kg-build's under XDG_CACHE_HOME,
# cupy's kernel cache (default ~/.cupy/kernel_cache) under CUPY_CACHE_DIR.
run_kt() {
	local rep=$1 t0 t1 rc=0
	t0=$(now)
	# from $work: Kernel Tuner leaves the source of a failed configuration in its working folder
	(cd "$work" && CUPY_CACHE_DIR=$work/kt$rep-cupy "$kpy" "$root/benchmarks/kt_compare.py" "$spec_path" \
		--budget "$budget" --seed "$seed" --verify "${KT_VERIFY:-1}" --json "$work/kt$rep.json") >"$work/kt$rep.log" 2>&1 || rc=$?
	t1=$(now)
	[ "$rc" -eq 0 ] || { echo "kt-compare: Kernel Tuner failed ($rc):" >&2; tail -n 20 "$work/kt$rep.log" >&2; }
	[ -s "$work/kt$rep.json" ] || echo '{"tool": "kernel_tuner"}' >"$work/kt$rep.json"
	jq --argjson rep "$rep" --argjson rc "$rc" --argjson wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
		--arg log "$(tail -n 5 "$work/kt$rep.log")" '. + {rep: $rep, exit: $rc, wall_s: $wall, log_tail: $log}' \
		"$work/kt$rep.json" >>"$work/runs.jsonl"
}

run_kg() {
	local rep=$1 t0 t1 rc=0 events=/dev/null best=null
	t0=$(now)
	XDG_CACHE_HOME=$work/kg$rep-cache bin/kg-tune "$spec" --outdir "$work/kg$rep" --budget-builds "$budget" \
		--no-llm --seed "$seed" "${kg_opts[@]}" >"$work/kg$rep.log" 2>&1 || rc=$?
	t1=$(now)
	[ "$rc" -eq 0 ] || { echo "kt-compare: kg-tune failed ($rc):" >&2; tail -n 20 "$work/kg$rep.log" >&2; }
	for run in "$work/kg$rep"/kernels/*; do
		[ ! -f "$run/events.jsonl" ] || events=$run/events.jsonl
		[ ! -f "$run/best.json" ] || best=$(cat "$run/best.json")
	done
	# configurations as kg-tune counts its builds (every candidate after the baseline), then
	# the same records by outcome
	jq -n --argjson rep "$rep" --argjson rc "$rc" --argjson wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
		--argjson budget "$budget" --argjson seed "$seed" --arg opts "${KG_TUNE_OPTS:-}" --argjson best "$best" \
		--arg table "$(cat "$work/kg$rep.log")" '
		[inputs | select(.update.child != null and (.update.root | not))] as $c |
		def n(f): [$c[] | select(f)] | length;
		{tool: "kg-tune", rep: $rep, exit: $rc, wall_s: $wall, budget_builds: $budget, seed: $seed,
		 options: $opts, configurations: ($c | length), valid: n(.bench.status == "ok"),
		 compile_failed: n(.build.status == "compile_failed"), invalid: n(.build.status == "invalid_config"),
		 incorrect: n(.bench.status == "incorrect"),
		 runtime_failed: n(.bench.status == "crashed" or .bench.status == "timeout" or .bench.status == "error"),
		 best_ms: $best.median_ms, baseline_ms: $best.baseline_ms, speedup: $best.speedup,
		 best_config: $best.config, table: $table}' "$events" >>"$work/runs.jsonl"
}

# Odd runs in TOOLS order (kg first by default: Kernel Tuner then finds the GPU busy-warm and
# any shared library pages cached, which can only flatter it), even runs the other way round.
for ((rep = 1; rep <= repeat; rep++)); do
	order=$tools
	[ $((rep % 2)) -eq 1 ] || order=$(echo "$tools" | awk '{ for (i = NF; i > 0; i--) printf "%s ", $i }')
	for tool in $order; do
		case $tool in
		kt) run_kt "$rep" ;;
		kg) run_kg "$rep" ;;
		*) die "TOOLS: unknown tool '$tool' (kg, kt)" ;;
		esac
	done
done

# Candidates per minute: configurations evaluated over the whole process's wall time (start-up,
# baseline or reference, search, exit included); the ratio is of the medians over the repeats.
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
jq -s --arg spec "$spec" --arg gpu "$gpu" --arg date "$(date -u +%FT%TZ)" --argjson count "$count" \
	--argjson budget "$budget" --argjson seed "$seed" '
	def med: sort | if length == 0 then null else (.[(length - 1) / 2 | floor] + .[length / 2 | floor]) / 2 end;
	map(. + {per_minute: (if .wall_s > 0 and .configurations != null then 60 * .configurations / .wall_s else null end)}) |
	. as $runs | map(if .tool == "kg-tune" then . as $kg | . + {ratio: ([$runs[] | select(.tool == "kernel_tuner" and
		.rep == $kg.rep and .per_minute) | $kg.per_minute / .per_minute] | first)} else . end) |
	{spec: $spec, budget: $budget, seed: $seed, valid_configurations: $count, date: $date, gpu: $gpu, runs: .,
	 kg_per_minute: (map(select(.tool == "kg-tune") | .per_minute // empty) | med),
	 kt_per_minute: (map(select(.tool == "kernel_tuner") | .per_minute // empty) | med)} |
	. + {ratio: (if .kg_per_minute and .kt_per_minute then .kg_per_minute / .kt_per_minute else null end)}
' "$work/runs.jsonl" >"$work/kt-compare.json"
[ -z "${OUT:-}" ] || cp "$work/kt-compare.json" "$OUT/kt-compare.json"

jq -r '
	def r(x; d): if x == null then "-" else (x * d | round / d | tostring) end;
	"\(.spec), budget \(.budget), seed \(.seed), \(.valid_configurations) valid configurations, \(.gpu)",
	(.runs | map(select(.tool == "kernel_tuner"))[0] // empty |
		"Kernel Tuner \(.version // "?"), \(.strategy // "?"), \(.iterations // "?") iterations, outputs checked: \(.verify | tostring)"),
	"| run | tool | configurations (ok / compile failed / runtime failed) | wall s | per minute | best ms | kg / KT |",
	"|---|---|---|---|---|---|---|",
	(.runs[] | "| \(.rep) | \(.tool)\(if .exit != 0 then " (exit \(.exit))" else "" end) | \(.configurations // "-") (\(.valid // "-") / \(.compile_failed // "-") / \(.runtime_failed // "-")) | \(r(.wall_s; 10)) | \(r(.per_minute; 10)) | \(r(.best_ms; 1e6)) | \(if .tool == "kg-tune" then "\(r(.ratio; 100))×" else "" end) |"),
	"candidates per minute, kg-tune / Kernel Tuner (medians over \(.runs | map(.rep) | max) runs): \(r(.ratio; 100))×"
' "$work/kt-compare.json"
jq -e 'all(.runs[]; .exit == 0)' "$work/kt-compare.json" >/dev/null
