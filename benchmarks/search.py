"""search.py (no GPU): how close to a space's optimum kg-tune, Kernel Tuner's strategies and
uniform random sampling get in a budget of builds, on fully measured spaces replayed from T4.

Driven by benchmarks/search.sh, which makes the virtual environment with Kernel Tuner. For each
space (a T1 spec and a T4 table holding every valid configuration), budget and seed, a search
runs on the recorded times: kg-tune with --replay, Kernel Tuner's strategies in its simulation
mode on the table converted to a Kernel Tuner cache, and random sampling computed exactly.
Its score is optimum / best: the fastest correct configuration in the table over the fastest
correct one the search measured (0 when it measured none). Each run is kept in the work folder
under a key of what decides its result, so a rerun computes only what is missing.

kg-tune also runs with history (--history): "others", each table tuned with the other tables of
the same kernel (the same kernel name and tuning parameters: other GPUs, other sizes) as
history, leaving itself out; "misleading", with one of those tables (itself when it has none)
whose times are shuffled among its configurations, a history that ranks at random: a shuffle
of its own for each seed, since one shuffle puts one configuration first in every seed's
history and the seeds then measure that configuration's basin, not a misleading history's cost.
"""
import argparse
import gzip
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The fully measured spaces of the shared data beside the checkout (shared/data, whose README
# says what they are), or the folder SHARED_DATA names.
SHARED = os.environ.get("SHARED_DATA") or os.path.join(os.path.dirname(ROOT), "shared", "data")

# One BLAS thread per run, set before NumPy loads, so that bayes_opt's Gaussian process fits
# round the same on machines with more cores (a last-bit difference can change its path).
# Runs go in parallel anyway.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

# name, T1 spec, T4 table (from the repository root). A space joins the benchmark when its
# table holds every valid configuration of its spec; until then it is listed as skipped.
SPACES = [
    ("convolution_A4000", "benchmarks/data/convolution_A4000/convolution_milo.json",
     "benchmarks/data/convolution_A4000/convolution_A4000_T4.json"),
    ("vector_add", "examples/vector_add/vector_add.json", "examples/vector_add/vector_add_H100_T4.json"),
    ("reduction", "examples/reduction/reduction.json", "examples/reduction/reduction_H100_T4.json"),
    ("transpose", "examples/transpose/transpose.json", "examples/transpose/transpose_H100_T4.json"),
    ("softmax", "examples/softmax/softmax.json", "examples/softmax/softmax_H100_T4.json"),
    ("lora_expand", "examples/lora_expand/lora_expand.json", "examples/lora_expand/lora_expand_H100_T4.json"),
    ("matmul_4096", "examples/matmul/matmul.json", "benchmarks/data/matmul_H100/matmul_4096_H100_T4.json"),
    ("matmul_2048", "benchmarks/data/matmul_H100/matmul_2048.json", "benchmarks/data/matmul_H100/matmul_2048_H100_T4.json"),
    ("matmul_1024", "benchmarks/data/matmul_H100/matmul_1024.json", "benchmarks/data/matmul_H100/matmul_1024_H100_T4.json"),
    ("matmul_4096_sub", "benchmarks/data/matmul_H100/matmul_4096_sub.json",
     "benchmarks/data/matmul_H100/matmul_4096_H100_T4.json"),
    ("fused_matmul_act_4096", "examples/fused_matmul_act/fused_matmul_act.json",
     "benchmarks/data/matmul_H100/fused_matmul_act_4096_H100_T4.json"),
    ("convolution_MI250X", "benchmarks/data/convolution_A4000/convolution_milo.json",
     "$SHARED/convolution_more/MI250X_T4.json.gz"),
    ("convolution_W6600", "benchmarks/data/convolution_A4000/convolution_milo.json",
     "$SHARED/convolution_more/W6600_T4.json.gz"),
    ("convolution_W7800", "benchmarks/data/convolution_A4000/convolution_milo.json",
     "$SHARED/convolution_more/W7800_T4.json.gz"),
    ("dedispersion_A4000", "$SHARED/dedispersion/dedispersion_milo.json", "$SHARED/dedispersion/A4000_T4.json.gz"),
    ("dedispersion_MI250X", "$SHARED/dedispersion/dedispersion_milo.json", "$SHARED/dedispersion/MI250X_T4.json.gz"),
    ("dedispersion_W6600", "$SHARED/dedispersion/dedispersion_milo.json", "$SHARED/dedispersion/W6600_T4.json.gz"),
    ("dedispersion_W7800", "$SHARED/dedispersion/dedispersion_milo.json", "$SHARED/dedispersion/W7800_T4.json.gz"),
]
HISTORY_MODES = ["none", "others", "misleading"]

# Kernel Tuner 1.5's single-objective strategies that need nothing beyond its own dependencies
# (brute_force is the converter's check; skopt and pyatf_strategies need other packages).
STRATEGIES = ["random_sample", "genetic_algorithm", "bayes_opt", "simulated_annealing", "diff_evo", "pso",
              "firefly_algorithm", "basinhopping", "mls", "greedy_mls", "ordered_greedy_mls", "greedy_ils",
              "dual_annealing", "minimize", "hybrid_vndx", "adaptive_tabu_greywolf"]

# bayes_opt's default method, multi-ultrafast, refits its model only when the last evaluations
# took 5 times longer than the last prediction, timed by the wall clock: on a GPU nearly always,
# in simulation (evaluations take microseconds) now and then, at random. multi-fast is the same
# method refitting every round: what the default does on a GPU, and deterministic.
STRATEGY_OPTIONS = {"bayes_opt": {"method": "multi-fast"}}

KG, RANDOM = "kg-tune", "uniform random"
# kg-tune's rows with history, by mode (none is KG itself).
KG_WITH = {"others": "kg-tune + history", "misleading": "kg-tune + misleading history"}
KG_TOOLS = [KG] + list(KG_WITH.values())
WITHIN = 1.05  # "within 5 %": best <= 1.05 * optimum


def values_of(parameter):
    """A T1 parameter's values: a Python expression or a JSON array; booleans as 1/0, as kg-build
    defines them and as kg-tune's records and the tables hold them."""
    v = parameter["Values"]
    if isinstance(v, str):
        v = eval(v, {"__builtins__": {}, "range": range, "list": list, "min": min, "max": max, "len": len,
                     "abs": abs, "int": int, "float": float})
    return [int(x) if isinstance(x, bool) else x for x in v]


def key_of(config, names):
    """A configuration as Kernel Tuner keys its cache: the values in tune_params order, joined by
    commas. Results of every tool are keyed so."""
    return ",".join(str(int(config[n]) if isinstance(config[n], bool) else config[n]) for n in names)


def median(samples):
    """The median exactly as lib/stats.c computes it (linear interpolation between the middle
    two), so that times here are bit for bit the ones kg-bench --replay answers with."""
    s = sorted(samples)
    pos = 0.5 * (len(s) - 1)
    lo = int(pos)
    return s[-1] if lo + 1 >= len(s) else s[lo] + (pos - lo) * (s[lo + 1] - s[lo])


def digest(*paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def resolve(path, work):
    """A path of SPACES: from the repository root, $SHARED the shared data; a gzipped table is
    decompressed into WORK/tables/ once (kg-tune --replay reads a file)."""
    path = path.replace("$SHARED", SHARED) if path.startswith("$SHARED") else os.path.join(ROOT, path)
    if not path.endswith(".gz"):
        return path
    out = os.path.join(work, "tables", "%s-%s" % (digest(path), os.path.basename(path)[:-3]))
    if not os.path.exists(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with gzip.open(path, "rb") as f, open(out + ".tmp", "wb") as g:
            g.write(f.read())
        os.replace(out + ".tmp", out)
    return out


def from_root(path):
    """A path as the space keeps it: from the repository root when inside it, else absolute (a
    kept space outlives the checkout that made it)."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def prepare_space(name, spec_path, table_path, work):
    """Reads a space and writes what every run of it needs into WORK/spaces/NAME-DIGEST/:
    space.json (parameters, restrictions, each valid configuration's time) and kt_cache.json (the
    table in Kernel Tuner's cache format). Returns the space, with "skipped" set when the table
    lacks valid configurations."""
    spec_path, table_path = resolve(spec_path, work), resolve(table_path, work)
    fp = digest(spec_path, table_path)
    folder = os.path.join(work, "spaces", "%s-%s" % (name, fp))
    if os.path.exists(os.path.join(folder, "space.json")):
        with open(os.path.join(folder, "space.json")) as f:
            return json.load(f)
    with open(spec_path) as f:
        spec = json.load(f)
    cs, ks = spec["ConfigurationSpace"], spec["KernelSpecification"]
    params = {p["Name"]: values_of(p) for p in cs["TuningParameters"]}
    names = list(params)
    restrictions = [c["Expression"] for c in cs.get("Conditions", [])]
    if any("ProblemSize" in r for r in restrictions):
        sys.exit("search: %s: a condition reads ProblemSize, which Kernel Tuner's restrictions cannot" % spec_path)

    # The valid configurations as kg sees them: kg-propose --exhaustive, the reference count.
    out = subprocess.run([os.path.join(ROOT, "bin/kg-propose"), "--exhaustive", "--spec", spec_path],
                         check=True, capture_output=True, text=True).stdout
    configs = [json.loads(line)["candidate"]["config"] for line in out.splitlines() if line]
    valid = [key_of(c, names) for c in configs]

    # The table as kg-bench --replay reads it: the last result of a configuration wins; a correct
    # one's time is the median of its runtimes; any other invalidity is a failure.
    with open(table_path) as f:
        results = json.load(f)["results"]
    table = {}
    for r in results:
        k = key_of(r["configuration"], names)
        ok = r["invalidity"] == "correct"
        table[k] = {"time": median(r["times"]["runtimes"]) if ok else None, "invalidity": r["invalidity"],
                    "compile_ms": r.get("times", {}).get("compilation", 0) or 0,
                    "runtimes_ms": sum(r.get("times", {}).get("runtimes") or [])}
    missing = [k for k in valid if k not in table]
    times = {k: table[k]["time"] for k in valid if k in table}
    correct = [t for t in times.values() if t is not None]
    space = {"name": name, "spec": from_root(spec_path), "table": from_root(table_path),
             "family": hashlib.sha256(json.dumps([ks["KernelName"], params]).encode()).hexdigest()[:12],
             "digest": fp, "folder": folder, "kernel": ks["KernelName"], "problem_size": ks.get("ProblemSize", []),
             "params": params, "restrictions": restrictions, "table_results": len(results),
             "table_configurations": len(table), "valid": len(valid), "correct": len(correct),
             "outside_space": len(set(table) - set(valid)), "optimum_ms": min(correct) if correct else None,
             "times": times}
    os.makedirs(folder, exist_ok=True)
    if missing:
        space["skipped"] = "the table holds %d of the %d valid configurations" % (len(valid) - len(missing), len(valid))
    else:
        # Kernel Tuner's cache: a header naming the kernel, problem size and parameters (their
        # order is the key's), then one entry per configuration. A failed one carries the name
        # of Kernel Tuner's error class in place of its time, which read_cache turns into that
        # error: strategies see the failure as on a GPU (the worst cost), and it costs a feval.
        # compile, verification and benchmark times let time-limited simulations run too.
        cache = {}
        for k, config in zip(valid, configs):
            e = table[k]
            failure = "CompilationFailedConfig" if e["invalidity"] == "compile" else "RuntimeFailedConfig"
            cache[k] = dict(config, time=failure if e["time"] is None else e["time"], compile_time=e["compile_ms"],
                            verification_time=0, benchmark_time=e["runtimes_ms"])
        doc = {"device_name": "replay of " + os.path.basename(table_path), "kernel_name": space["kernel"],
               "problem_size": space["problem_size"], "tune_params_keys": names, "tune_params": params,
               "objective": "time", "cache": cache}
        with open(os.path.join(folder, "kt_cache.json"), "w") as f:
            json.dump(doc, f)
        space["check"] = check_converter(space)
    with open(os.path.join(folder, "space.json.tmp"), "w") as f:
        json.dump(space, f)
    os.replace(os.path.join(folder, "space.json.tmp"), os.path.join(folder, "space.json"))
    return space


def tune_kt(space, strategy, budget):
    """One Kernel Tuner search in simulation mode. Returns Kernel Tuner's results: every
    configuration its runner evaluated, in order (repeats included, restriction-rejected ones
    not), each with its time or an __error__."""
    import kernel_tuner
    # The kernel is never compiled in simulation; Kernel Tuner only needs its name and language.
    source = 'extern "C" __global__ void %s() {}' % space["kernel"]
    options = dict(STRATEGY_OPTIONS.get(strategy, {}), **({"max_fevals": budget} if budget else {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = kernel_tuner.tune_kernel(
            space["kernel"], source, space["problem_size"], [], space["params"],
            restrictions=space["restrictions"] or None, lang="CUDA", cache=os.path.join(space["folder"], "kt_cache.json"),
            simulation_mode=True, strategy=strategy, strategy_options=options, quiet=True, verbose=False)
    return results


def check_converter(space):
    """The round trip: Kernel Tuner's brute force over the converted cache must evaluate every
    valid configuration kg-propose lists (so both search the same space), find each one's time as
    the table gives it, and so find the table's optimum."""
    try:
        import kernel_tuner  # noqa: F401
    except ImportError:
        sys.exit("search: %s: preparing a space needs Kernel Tuner (its cache's round trip): prepare it "
                 "with benchmarks/search.sh, and keep --work" % space["name"])
    names = list(space["params"])
    results = tune_kt(space, "brute_force", None)
    seen = {key_of(r, names): r for r in results}
    times = {k: (None if "__error__" in r else r["time"]) for k, r in seen.items()}
    best = min(t for t in times.values() if t is not None)
    check = {"kt_space_size": len(seen), "kg_propose_count": space["valid"],
             "same_configurations": set(seen) == set(space["times"]), "same_times": times == space["times"],
             "kt_brute_force_best_ms": best, "optimum_ms": space["optimum_ms"]}
    if not (check["same_configurations"] and check["same_times"] and best == space["optimum_ms"]):
        sys.exit("search: %s: the Kernel Tuner cache does not round-trip: %s" % (space["name"], check))
    return check


_lhs = None


def seed_everything(seed):
    """Kernel Tuner's strategies draw from Python's random and NumPy's global generator (scipy's
    basinhopping and dual_annealing too, given no seed), except for the Latin hypercube samples
    of bayes_opt and of Searchspace.get_LHS_sample (diff_evo's start), which scipy draws from
    fresh OS entropy unless given a generator: they get one seeded from NumPy's global one."""
    global _lhs
    import numpy as np
    import scipy.stats.qmc as qmc
    from kernel_tuner.strategies import bayes_opt
    if _lhs is None:
        _lhs = qmc.LatinHypercube

        class SeededLatinHypercube(_lhs):
            def __init__(self, d, **kw):
                kw.setdefault("rng", np.random.default_rng(np.random.randint(2 ** 31)))
                super().__init__(d, **kw)

        qmc.LatinHypercube = bayes_opt.LatinHypercube = SeededLatinHypercube
    random.seed(seed)
    np.random.seed(seed)


def run_kt(space, strategy, budget, seed):
    """A Kernel Tuner run: its trace (configuration, time or None) in the order first measured.
    Kernel Tuner spends max_fevals on distinct configurations its runner measured, failed ones
    included; repeats and configurations its restrictions reject cost nothing."""
    names = list(space["params"])
    seed_everything(seed)
    t0 = time.perf_counter()
    results = tune_kt(space, strategy, budget)
    wall = time.perf_counter() - t0
    trace, seen = [], set()
    for r in results:
        k = key_of(r, names)
        if k not in seen:
            seen.add(k)
            trace.append([k, None if "__error__" in r else r["time"]])
    return {"trace": trace, "evaluations": len(results), "wall_s": wall}


def misleading_table(source, seed, work):
    """A history that ranks at random: source's table (a space of the same kernel) with its
    measurements shuffled among its configurations, the seed's own shuffle. Returns its path."""
    out = os.path.join(work, "tables", "shuffled-%s-%s-s%d.json" % (source["name"], source["digest"], seed))
    if not os.path.exists(out):
        with open(os.path.join(ROOT, source["table"])) as f:
            doc = json.load(f)
        results = doc["results"]
        measured = [{k: r[k] for k in ("times", "invalidity") if k in r} for r in results]
        random.Random("%s %d" % (source["name"], seed)).shuffle(measured)
        for r, m in zip(results, measured):
            r.pop("times", None)
            r.update(m)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out + ".tmp", "w") as f:
            json.dump(doc, f)
        os.replace(out + ".tmp", out)
    return out


def history_sources(space, mode, family):
    """The tables a space's runs in a mode draw their history from: none; the other tables of
    its kernel; one of them (itself when it has none), to be shuffled."""
    others = sorted((s for s in family if s["name"] != space["name"]), key=lambda s: s["name"])
    if mode == "others":
        return others
    if mode == "misleading":
        return (others or [space])[:1]
    return []


def history_of(space, mode, family, seed, work):
    """The --history tables of a space's run in a mode for a seed."""
    sources = history_sources(space, mode, family)
    if mode == "misleading":
        return [misleading_table(s, seed, work) for s in sources]
    return [os.path.join(ROOT, s["table"]) for s in sources]


def run_kg(space, budget, seed, opts, cache_dir, tmp_root):
    """A kg-tune run: its trace (baseline first) from events.jsonl, checked against best.json."""
    names = list(space["params"])
    with tempfile.TemporaryDirectory(dir=tmp_root) as tmp:
        cmd = [os.path.join(ROOT, "bin/kg-tune"), "--no-llm", "--budget-builds", str(budget), "--seed", str(seed),
               "--replay", os.path.join(ROOT, space["table"]), "--outdir", os.path.join(tmp, "out"), "-q"] + opts
        cmd += [os.path.join(ROOT, space["spec"])]
        env = dict(os.environ, XDG_CACHE_HOME=cache_dir or os.path.join(tmp, "cache"))
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        kernels = os.path.join(tmp, "out", "kernels")  # the run, beside its lock (.NAME.lock)
        runs = [os.path.join(kernels, n) for n in sorted(os.listdir(kernels))
                if not n.startswith(".")] if os.path.isdir(kernels) else []
        run = runs[0] if runs else None
        if p.returncode != 0 or not run:
            return {"error": "kg-tune exited %d: %s" % (p.returncode, (p.stdout + p.stderr)[-2000:]), "wall_s": wall}
        trace, cached = [], 0
        with open(os.path.join(run, "events.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("update", {}).get("child") is None:
                    continue
                b, build = r.get("bench") or {}, r.get("build") or {}
                cached += bool(build.get("cached"))
                ok = b.get("status") == "ok"
                trace.append([key_of(build["config"], names) if "config" in build else None,
                              b["median_ms"] if ok else None])
        with open(os.path.join(run, "best.json")) as f:
            best_json = json.load(f).get("median_ms")
    return {"trace": trace, "evaluations": len(trace) - 1, "best_json_ms": best_json, "cached_builds": cached,
            "wall_s": wall, "command": " ".join(cmd[1:-1]).replace(tmp, "TMP")}


def score(space, run):
    """best, optimum / best (0 when nothing correct was measured) and distinct configurations."""
    times = [t for _, t in run.get("trace", []) if t is not None]
    best = min(times) if times else None
    return {"best_ms": best, "ratio": space["optimum_ms"] / best if best else 0.0,
            "within": bool(best and best <= WITHIN * space["optimum_ms"]),
            "distinct": len({k for k, _ in run.get("trace", [])})}


_spaces = {}


def job(task):
    """One run in a worker, or its kept result: (task, result)."""
    space_file, tool, budget, seed, path, extra = task
    if os.path.exists(path):
        with open(path) as f:
            return task, json.load(f)
    if space_file not in _spaces:
        with open(space_file) as f:
            _spaces[space_file] = json.load(f)
    space = _spaces[space_file]
    if tool in KG_TOOLS:
        result = run_kg(space, budget, seed, extra["opts"], extra["cache_dir"], extra["tmp"])
    else:
        try:
            result = run_kt(space, tool, budget, seed)
        except Exception as e:  # a strategy that fails is reported, and the others go on
            result = {"error": "%s: %s" % (type(e).__name__, e)}
    if "error" not in result:  # a failed run is tried again next time
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(path + ".tmp", path)
    return task, result


def random_exact(space, budget):
    """Uniform random sampling of `budget` distinct valid configurations (failed ones included,
    as a sampler would draw them), exactly: the k-th fastest correct configuration is the best
    drawn when it is drawn and none faster is, with probability C(N-k, B-1) / C(N, B)."""
    n, b = space["valid"], min(budget, space["valid"])
    times = sorted(t for t in space["times"].values() if t is not None)
    total = math.comb(n, b)
    mean = sum(math.comb(n - k, b - 1) / total * times[0] / t for k, t in enumerate(times, 1))
    close = sum(t <= WITHIN * times[0] for t in times)
    return {"mean": mean, "within": 1 - math.comb(n - close, b) / total}


def same_time(a, b):
    return a == b or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-14))


def summarize(space, tool, budget, runs):
    scores = [score(space, r) for r in runs]
    s = {"space": space["name"], "tool": tool, "budget": budget, "seeds": len(runs),
         "mean": sum(x["ratio"] for x in scores) / len(scores),
         "within": sum(x["within"] for x in scores) / len(scores),
         "distinct": sum(x["distinct"] for x in scores) / len(scores),
         "measured": sum(r["evaluations"] if tool in KG_TOOLS else len(r["trace"]) for r in runs) / len(runs),
         "wall_s": sum(r["wall_s"] for r in runs) / len(runs)}
    if tool in KG_TOOLS:  # the best of events.jsonl and best.json's must agree
        s["best_json_disagrees"] = sum(r["best_json_ms"] != x["best_ms"] for r, x in zip(runs, scores))
        # and kg-tune must see each configuration as the table has it (to the 15 digits cJSON
        # prints; a failure where the table has a time is kg-build's: replay still compiles)
        s["replay_mismatches"] = sum(not same_time(t, space["times"].get(k)) for r in runs for k, t in r["trace"])
        s["cached_builds"] = sum(r["cached_builds"] for r in runs) / sum(len(r["trace"]) for r in runs)
    return s


def table(space, rows, budgets, seeds):
    """The Markdown table of one space: a row per tool, a column per budget, then the targets."""
    lines = ["### %s: %d valid configurations (%d correct), optimum %.6g ms; %d seeds" % (
        space["name"], space["valid"], space["correct"], space["optimum_ms"], seeds), "",
        "| search | " + " | ".join("%d builds" % b for b in budgets) + " |", "|---" * (len(budgets) + 1) + "|"]
    best_kt = {}
    for b in budgets:
        kt = [s for s in rows if s["budget"] == b and s["tool"] not in KG_TOOLS + [RANDOM]]
        best_kt[b] = max(kt, key=lambda s: s["mean"])["tool"] if kt else None
    tools = [t for t in KG_TOOLS if any(s["tool"] == t for s in rows)] + [RANDOM] + sorted(
        {s["tool"] for s in rows} - set(KG_TOOLS) - {RANDOM})
    for tool in tools:
        cells = []
        for b in budgets:
            s = next((s for s in rows if s["tool"] == tool and s["budget"] == b), None)
            cell = "-" if s is None else "%.3f (%.2f)" % (s["mean"], s["within"])
            cells.append("**%s**" % cell if best_kt[b] == tool else cell)
        label = tool if tool in KG_TOOLS + [RANDOM] else "KT " + tool
        lines.append("| %s | %s |" % (label, " | ".join(cells)))
    lines.append("")
    lines.append("Cells: mean optimum / best over the seeds (fraction of seeds within 5 %%); bold: the best "
                 "Kernel Tuner strategy; %s: exact expectation." % RANDOM)
    # kg-tune measures its baseline on top of its budget; a search may end early (converged,
    # nothing left to try) or, as some of Kernel Tuner's do, stop short of max_fevals.
    short = ["%s at %d: %.1f" % (s["tool"], s["budget"], s["measured"]) for s in rows
             if s["tool"] != RANDOM and s["measured"] < min(s["budget"], space["valid"] - (s["tool"] in KG_TOOLS)) - 0.05]
    if short:
        lines.append("Configurations measured (mean; kg-tune's after its baseline) where fewer than the budget: "
                     + "; ".join(short) + ".")
    for tool in KG_TOOLS:
        kg = [s for s in rows if s["tool"] == tool]
        if not kg:
            continue
        lines.append("%s, wall time per search, mean: " % tool + ", ".join(
            "%.1f s at %d (%.0f ms a build)" % (s["wall_s"], s["budget"], 1000 * s["wall_s"] / s["budget"]) for s in kg) + ".")
        for field, what in (("best_json_disagrees", "runs whose best.json disagrees with events.jsonl"),
                            ("replay_mismatches", "configurations measured otherwise than the table has them")):
            if sum(s[field] for s in kg):
                lines.append("WARNING: %s: %d %s." % (tool, sum(s[field] for s in kg), what))
    g = {(s["tool"], s["budget"]): s["mean"] for s in rows}
    verdicts = []
    for b in budgets:
        if b <= 160 and best_kt.get(b) and (KG, b) in g:
            verdicts.append("at %d %.3f vs %.3f (%s): %s" % (b, g[KG, b], g[best_kt[b], b], best_kt[b],
                                                            "met" if g[KG, b] >= g[best_kt[b], b] else "missed"))
    if verdicts:
        lines.append("Target, without history at least the best KT strategy: " + "; ".join(verdicts) + ".")
    h, m = KG_WITH["others"], KG_WITH["misleading"]
    verdicts = ["at %d %+.3f" % (b, g[h, b] - g[KG, b]) + ("" if g[h, b] >= g[KG, b] - 0.01 else " (missed)")
                for b in budgets if (h, b) in g and (KG, b) in g]
    if verdicts:
        lines.append("Target, history never below no history by more than 0.01: " + "; ".join(verdicts) + ".")
    if (h, 20) in g and 160 in best_kt and best_kt[160]:
        kt160 = g[best_kt[160], 160]
        lines.append("Where history ranks well, 20 builds with it against the best KT at 160: %.3f vs %.3f (%s)." % (
            g[h, 20], kt160, "reached" if g[h, 20] >= kt160 else "not reached"))
    if (m, 40) in g and (KG, 40) in g:
        lines.append("Target, a misleading history costs at most 0.02 at 40: %+.3f (%s)." % (
            g[m, 40] - g[KG, 40], "met" if g[m, 40] >= g[KG, 40] - 0.02 else "missed"))
    return "\n".join(lines) + "\n"


def bin_digest():
    """What decides a kg-tune run besides its arguments: the tools and pipelines in bin/ (links
    to pipelines/, followed) and the pipelines' common.sh."""
    files = sorted(os.path.join(ROOT, "bin", f) for f in os.listdir(os.path.join(ROOT, "bin")))
    return digest(*files, os.path.join(ROOT, "pipelines", "common.sh"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spaces", default=",".join(s[0] for s in SPACES), help="comma-separated (default: all, %(default)s)")
    ap.add_argument("--budgets", default="20,40,80,160,320", help="builds per search (default %(default)s)")
    ap.add_argument("--history", default="none",
                    help="kg-tune's history modes, comma-separated, of %s (default %%(default)s)" % ",".join(HISTORY_MODES))
    ap.add_argument("--kt-max-budget", type=int, default=None,
                    help="run Kernel Tuner's strategies only up to this budget (bayes_opt is cubic in it)")
    ap.add_argument("--seeds", type=int, default=20, help="seeds 1..N (default 20)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="Kernel Tuner's, comma-separated (default %(default)s)")
    ap.add_argument("--no-kg", action="store_true", help="leave kg-tune out")
    ap.add_argument("--jobs", type=int, default=os.cpu_count(), help="runs at once (default: the CPUs)")
    ap.add_argument("--kg-tune-opts", default="", help="more kg-tune options, split at spaces")
    ap.add_argument("--kg-jobs", type=int, default=1,
                    help="kg-tune --jobs (default 1): it sets kg-tune's default batch, so it is fixed, not the "
                         "CPUs. 1: one candidate per iteration, each pick seeing every result before it (a replay "
                         "runs one iteration after the other), as Kernel Tuner's strategies do; more: batches, "
                         "staler picks, as on a GPU with that many compile slots")
    ap.add_argument("--fresh-cache", action="store_true",
                    help="an empty compile cache per kg-tune run (wall times of cold compiles; slow)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kg-search-work"),
                    help="where runs are kept, so that a rerun computes only what is missing (default %(default)s)")
    ap.add_argument("--json", help="write every result here (default WORK/search.json)")
    opt = ap.parse_args()

    strategies = [s for s in opt.strategies.split(",") if s]
    # kg-tune alone (--strategies '') needs no Kernel Tuner once the spaces are prepared (a
    # machine without it: a GPU host, to spread the kg-tune runs over its cores).
    kt_version = None
    if strategies:
        import kernel_tuner
        kt_version = kernel_tuner.__version__
    known = {s[0]: s for s in SPACES}
    names = [n for n in opt.spaces.split(",") if n]
    for n in names:
        if n not in known:
            sys.exit("search: unknown space '%s' (known: %s)" % (n, ", ".join(known)))
    budgets = [int(b) for b in opt.budgets.split(",")]
    modes = [m for m in opt.history.split(",") if m]
    for m in modes:
        if m not in HISTORY_MODES:
            sys.exit("search: unknown history mode '%s' (known: %s)" % (m, ", ".join(HISTORY_MODES)))
    seeds = list(range(1, opt.seeds + 1))
    kg_opts = ["--jobs", str(opt.kg_jobs)] + opt.kg_tune_opts.split()
    kg_label = "kg-tune" + (" " + opt.kg_tune_opts.strip() if opt.kg_tune_opts.strip() else "")
    kg_key = hashlib.sha256((bin_digest() + " ".join(kg_opts)).encode()).hexdigest()[:12]
    os.makedirs(opt.work, exist_ok=True)
    tmp = os.path.join(opt.work, "tmp")
    os.makedirs(tmp, exist_ok=True)
    cache_dir = None if opt.fresh_cache else os.path.join(opt.work, "xdg-cache")

    spaces = []
    for n in names:
        t0 = time.perf_counter()
        space = prepare_space(*known[n], opt.work)
        if space.get("skipped"):
            print("search: %s skipped: %s" % (n, space["skipped"]), file=sys.stderr)
        else:
            print("search: %s: %d valid configurations, Kernel Tuner's space %d, optimum %.6g ms (%.1f s)" % (
                n, space["valid"], space["check"]["kt_space_size"], space["optimum_ms"], time.perf_counter() - t0),
                file=sys.stderr)
        spaces.append(space)

    # The other tables of each space's kernel, for the history modes (prepared when not chosen).
    families = {}
    if any(m != "none" for m in modes):
        for n, *paths in SPACES:
            sp = next((s for s in spaces if s["name"] == n), None) or prepare_space(n, *paths, opt.work)
            if not sp.get("skipped"):
                families.setdefault(sp["family"], []).append(sp)

    # Every run, longest first (kg-tune's, large budgets) so that the pool ends together.
    tasks = []
    for space in (s for s in spaces if not s.get("skipped")):
        sf = os.path.join(space["folder"], "space.json")
        family = families.get(space["family"], [])
        keys = {m: kg_key if m == "none" else "%s-%s-%s" % (kg_key, m, hashlib.sha256(
            " ".join(["shuffled per seed"] * (m == "misleading") + [s["digest"] for s in history_sources(
                space, m, family)]).encode()).hexdigest()[:12]) for m in modes}
        for b in sorted(budgets, reverse=True):
            for seed in seeds:
                for m in [] if opt.no_kg else modes:
                    path = os.path.join(space["folder"], "kg-tune-" + keys[m], "b%d-s%d.json" % (b, seed))
                    history = [] if os.path.exists(path) else history_of(space, m, family, seed, opt.work)
                    opts = kg_opts + [o for h in history for o in ("--history", h)]
                    tool = KG if m == "none" else KG_WITH[m]
                    tasks.append((sf, tool, b, seed, path, {"opts": opts, "cache_dir": cache_dir, "tmp": tmp}))
                if opt.kt_max_budget is not None and b > opt.kt_max_budget:
                    continue
                for st in strategies:
                    path = os.path.join(space["folder"], "kt-%s-%s" % (kt_version, st),
                                        "b%d-s%d.json" % (b, seed))
                    tasks.append((sf, st, b, seed, path, None))
    todo = [t for t in tasks if not os.path.exists(t[4])]
    print("search: %d runs, %d kept from before, %d to compute on %d workers" % (
        len(tasks), len(tasks) - len(todo), len(todo), opt.jobs), file=sys.stderr)
    results, failed, done, t0 = {}, 0, 0, time.perf_counter()
    with ProcessPoolExecutor(opt.jobs, mp_context=get_context("fork")) as pool:
        for fut in as_completed([pool.submit(job, t) for t in tasks]):
            task, result = fut.result()
            results[task[4]] = result
            if "error" in result:
                failed += 1
                print("search: %s %s b%d s%d: %s" % (os.path.basename(os.path.dirname(task[0])), task[1], task[2],
                                                     task[3], result["error"]), file=sys.stderr)
            done += 1
            if done % 50 == 0 or done == len(tasks):
                print("search: %d/%d runs (%.0f s)" % (done, len(tasks), time.perf_counter() - t0), file=sys.stderr)

    summary, runs = [], []
    report = ["%s: bin/kg-tune --no-llm %s (compile cache %s); %s; seeds 1..%d.\n" % (
        kg_label, " ".join(kg_opts), "fresh per run" if opt.fresh_cache else "shared",
        "Kernel Tuner %s in simulation mode" % kt_version if kt_version else "no Kernel Tuner strategy", opt.seeds)]
    for space in spaces:
        if space.get("skipped"):
            report.append("### %s: skipped, %s\n" % (space["name"], space["skipped"]))
            continue
        mine = [(t, results[t[4]]) for t in tasks if t[0].startswith(space["folder"] + os.sep)
                and "error" not in results[t[4]]]
        rows = []
        for b in budgets:
            rows.append(dict(random_exact(space, b), space=space["name"], tool=RANDOM, budget=b,
                             distinct=min(b, space["valid"]), measured=min(b, space["valid"])))
            for tool in ([] if opt.no_kg else [KG if m == "none" else KG_WITH[m] for m in modes]) + strategies:
                got = [res for t, res in sorted(mine, key=lambda x: x[0][3]) if t[1] == tool and t[2] == b]
                if got:
                    rows.append(summarize(space, tool, b, got))
        runs += [dict({k: v for k, v in res.items() if k != "trace"}, space=space["name"], tool=t[1], budget=t[2],
                      seed=t[3], **score(space, res)) for t, res in mine]
        summary += rows
        report.append(table(space, rows, budgets, len(seeds)))
    print("\n".join(report))

    doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kernel_tuner": kt_version,
           "kg_tune": {"options": kg_opts, "label": kg_label, "bin_digest": bin_digest(),
                       "compile_cache": "fresh per run" if opt.fresh_cache else "shared"},
           "budgets": budgets, "seeds": seeds, "strategies": strategies, "within": WITHIN,
           "spaces": [{k: v for k, v in s.items() if k not in ("times", "folder")} for s in spaces],
           "summary": summary, "runs": runs}
    path = opt.json or os.path.join(opt.work, "search.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print("search: every result in %s" % path, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
