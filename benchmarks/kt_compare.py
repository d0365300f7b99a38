"""kt_compare.py (GPU): Kernel Tuner's side of benchmarks/kt-compare.sh: one T1 spec tuned by
kernel_tuner.tune_kernel (CuPy backend, random_sample, max_fevals BUDGET), its figures as JSON.

tune_kernel_T1 cannot take our specs (vector arguments must be float, GlobalSize and LocalSize
are ignored, Device and Search are required, CompilerOptions are dropped), so this builds the
equivalent tune_kernel call itself: the same kernel file, tuning parameters and conditions,
ProblemSize, grid and block from GlobalSize/LocalSize, dynamic shared memory from
KernelGraph.SharedMemory, inputs filled as lib/kargs fills them (not the same numbers).
--dry-run stops before anything needs a GPU: it builds the search space with Kernel Tuner's own
Searchspace and checks its size against --expect (kg-propose --exhaustive --count).
"""
import argparse
import itertools
import json
import os
import random
import re
import sys
import time
import warnings

T0 = time.perf_counter()

import numpy as np  # noqa: E402

DTYPES = {"bool": np.bool_, "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
          "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
          "half": np.float16, "float": np.float32, "double": np.float64}
DIMS = ("X", "Y", "Z")


def evaluate(expr, names):
    """A T1 expression (Python syntax, as kg's lib/pyexpr reads it) under names."""
    return eval(str(expr), {"__builtins__": {}, "max": max, "min": min, "abs": abs, "int": int,
                            "range": range, "len": len}, names)


def translate(spec_path):
    """The spec as tune_kernel's arguments, less the arrays: a dict of everything the call needs."""
    with open(spec_path) as f:
        spec = json.load(f)
    ks, space = spec["KernelSpecification"], spec["ConfigurationSpace"]
    ps = list(ks["ProblemSize"])
    params, defaults = {}, {}
    for p in space["TuningParameters"]:
        values = evaluate(p["Values"], {})
        # kg-build defines booleans as 1/0; Kernel Tuner would write True/False into the source
        params[p["Name"]] = [int(v) if isinstance(v, bool) else v for v in values]
        if "Default" in p:
            defaults[p["Name"]] = p["Default"]
    restrictions = [c["Expression"] for c in space.get("Conditions", [])]

    # Kernel Tuner takes each block dimension from a tuning parameter (block_size_names; a name
    # that is not one gives 1). Where LocalSize is an expression (32 * num_warps), a derived
    # parameter holds its value and a condition ties it to the expression: one derived value per
    # configuration, so the valid configurations are the spec's, one for one (--expect checks).
    local, block_names, block_exprs = ks.get("LocalSize", {}), [], []
    for d in DIMS:
        expr = str(local.get(d, "1")).strip()
        block_exprs.append(expr)
        name = "block_size_" + d.lower()
        name = expr if expr in params else "kt_" + name if name in params else name
        block_names.append(name)
        if name in params:
            continue
        used = [n for n in params if re.search(r"\b%s\b" % re.escape(n), expr)]
        values = sorted({evaluate(expr, dict(zip(used, combo), ProblemSize=ps))
                         for combo in itertools.product(*(params[n] for n in used))})
        if values != [1] or d == "X":  # X: Kernel Tuner's default is 256, not 1
            params[name] = values
            if used:
                restrictions.append("%s == %s" % (name, expr))

    # Kernel Tuner's grid is ceil(problem_size / grid_div) per dimension: the problem size is
    # given as the grid itself (a function of the configuration) and every divisor is 1.
    # GlobalSizeType CUDA counts blocks; OpenCL counts threads, divided here by the block.
    gsize = ks.get("GlobalSize", {})
    blocks_given = ks.get("GlobalSizeType", "CUDA").upper() == "CUDA"

    def problem_size(p):
        names = dict(p, ProblemSize=ps)
        grid = []
        for d, bexpr in zip(DIMS, block_exprs):
            g = int(evaluate(gsize.get(d, "1"), names))
            grid.append(g if blocks_given else -(-g // int(evaluate(bexpr, names))))
        return tuple(grid)

    kg = spec.get("KernelGraph", {})
    smem = kg.get("SharedMemory")
    smem_args = {"size": lambda p: int(evaluate(smem, dict(p, ProblemSize=ps)))} if smem else None

    # As kg-build: the spec's options less any architecture (CuPy adds the GPU's), then the
    # kernel's folder, the toolkit's headers and CCCL (moved to include/cccl in CUDA 13).
    kdir = os.path.dirname(os.path.abspath(spec_path))
    cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    options = [o for o in ks.get("CompilerOptions") or [] if not re.match(r"-(arch|-gpu-architecture)", o)]
    options += ["-I" + kdir] + ["-I" + d for d in (cuda + "/include", cuda + "/include/cccl") if os.path.isdir(d)]

    return {"spec": spec, "name": ks["KernelName"], "source": os.path.join(kdir, ks["KernelFile"]),
            "problem_size": problem_size, "params": params, "defaults": defaults,
            "restrictions": restrictions, "block_names": block_names, "block_exprs": block_exprs,
            "smem_args": smem_args, "options": options, "ps": ps, "tolerance": kg.get("Tolerance")}


def arguments(t, seed):
    """The kernel's arguments: Random floats uniform in [-v, v), integers in [0, v] (v = FillValue,
    else 1 or 100), as lib/kargs draws them; Constant as given; outputs without a fill are zeros."""
    args, outputs = [], []
    for i, a in enumerate(t["spec"]["KernelSpecification"]["Arguments"]):
        dtype = DTYPES[a["Type"]]
        if a["MemoryType"] == "Scalar":
            args.append(dtype(a.get("FillValue", 0)))
            continue
        n = int(evaluate(a["Size"], {"ProblemSize": t["ps"]}))
        fill = a.get("FillType")
        rng = np.random.default_rng(a.get("RandomSeed", seed * 1000 + i))
        if fill == "Random":
            if np.issubdtype(dtype, np.floating):
                v = abs(a.get("FillValue", 1.0))
                x = rng.uniform(-v, v, n).astype(dtype)
            else:
                x = rng.integers(0, int(abs(a.get("FillValue", 100))) + 1, n).astype(dtype)
        elif fill in ("Constant", None):
            x = np.full(n, a.get("FillValue", 0), dtype=dtype)
        else:
            raise NotImplementedError("FillType %s of %s" % (fill, a["Name"]))
        args.append(x)
        if a.get("AccessType", "ReadWrite") != "ReadOnly":
            outputs.append(i)
    return args, outputs


def default_config(t):
    """The spec's Default configuration (kg's baseline), derived block parameters filled in."""
    cfg = {}
    for name, values in t["params"].items():
        cfg[name] = t["defaults"].get(name, values[0])
    for name, expr in zip(t["block_names"], t["block_exprs"]):
        if name in cfg and name not in t["defaults"]:
            cfg[name] = evaluate(expr, dict(cfg, ProblemSize=t["ps"]))
    return cfg


def patch_cupy_backend():
    """Kernel Tuner's CuPy backend launches with shared_mem bytes but never raises the kernel's
    limit on dynamic shared memory above the default 48 KiB, so every configuration asking for
    more would fail with an invalid-argument launch and stop the whole tuning run. This does
    what kg-bench does (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES), once per compiled
    kernel, right where Kernel Tuner hands over the size."""
    from kernel_tuner.backends.cupy import CupyFunctions
    original = CupyFunctions.copy_shared_memory_args

    def copy_shared_memory_args(self, smem_args):
        original(self, smem_args)
        if self.func is not None and self.smem_size > 48 * 1024:
            self.func.max_dynamic_shared_size_bytes = self.smem_size

    CupyFunctions.copy_shared_memory_args = copy_shared_memory_args


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec")
    ap.add_argument("--budget", type=int, default=40, help="max_fevals of random_sample")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--verify", type=int, default=1,
                    help="1: check every configuration against the Default configuration's outputs")
    ap.add_argument("--dry-run", action="store_true", help="stop before anything needs a GPU")
    ap.add_argument("--expect", type=int, help="the number of valid configurations (kg-propose)")
    ap.add_argument("--json", help="write the figures here")
    opt = ap.parse_args()

    import kernel_tuner
    from kernel_tuner.searchspace import Searchspace
    # block_size_y and _z are not parameters when LocalSize has no Y or Z: 1, as meant
    warnings.filterwarnings("ignore", message="Block size name block_size_[yz] is not specified")

    t = translate(opt.spec)
    result = {"tool": "kernel_tuner", "version": kernel_tuner.__version__, "backend": "CUPY",
              "strategy": "random_sample", "max_fevals": opt.budget, "seed": opt.seed, "iterations": 7,
              "verify": bool(opt.verify), "tune_params": t["params"], "restrictions": t["restrictions"],
              "block_size_names": t["block_names"], "compiler_options": t["options"]}
    # The space as tune_kernel will build it (1024: a CUDA block's thread limit, max_threads).
    space = Searchspace(t["params"], t["restrictions"], 1024)
    result["space_size"] = space.size
    default = default_config(t)
    if not space.is_param_config_valid(tuple(default.values())):
        sys.exit("kt_compare: the Default configuration %s is not in Kernel Tuner's space" % default)

    if opt.dry_run:
        np.random.seed(opt.seed)
        sample = [dict(zip(t["params"], c)) for c in space.get_random_sample(min(opt.budget, space.size))]
        geometry = lambda c: {"grid": t["problem_size"](c), "block": [c.get(n, 1) for n in t["block_names"]],
                              "smem": t["smem_args"]["size"](c) if t["smem_args"] else 0}
        args, outputs = arguments(t, opt.seed)
        print("kernel_tuner %s: %s from %s" % (kernel_tuner.__version__, t["name"], t["source"]))
        print("tune_params: %s" % json.dumps(t["params"]))
        print("restrictions: %s" % json.dumps(t["restrictions"]))
        print("block_size_names: %s; compiler_options: %s" % (t["block_names"], " ".join(t["options"])))
        print("arguments: %s; outputs checked: %s" % (
            ", ".join("%s[%d]" % (a.dtype, a.size) if isinstance(a, np.ndarray) else "%s %s" % (a.dtype, a)
                      for a in args), outputs))
        print("default %s -> %s" % (default, geometry(default)))
        for c in sample[:3]:
            print("sample  %s -> %s" % (c, geometry(c)))
        print("valid configurations: Kernel Tuner %d, kg-propose %s" % (space.size, opt.expect))
        result["sample"] = sample
    if opt.expect is not None and opt.expect != space.size:
        sys.exit("kt_compare: Kernel Tuner's space has %d configurations, kg-propose counts %d: "
                 "the translation is not faithful" % (space.size, opt.expect))
    if opt.dry_run:
        return

    patch_cupy_backend()
    args, outputs = arguments(t, opt.seed)
    common = dict(grid_div_x=1, grid_div_y=1, grid_div_z=1, lang="CUPY", smem_args=t["smem_args"],
                  compiler_options=t["options"], block_size_names=t["block_names"])
    answer, verify, atol = None, None, 1e-6
    t_ref = time.perf_counter()
    try:
        if opt.verify:
            # kg-bench's protocol: every candidate against the baseline's outputs, here from
            # Kernel Tuner's own run_kernel on the Default configuration.
            ref = kernel_tuner.run_kernel(t["name"], t["source"], t["problem_size"], args, default,
                                          quiet=True, **common)
            answer = [ref[i] if i in outputs else None for i in range(len(args))]
            tol = t["tolerance"]
            if tol:  # kg's |out - ref| <= atol + rtol |ref|; Kernel Tuner's own check has rtol 1e-5
                # the reference and each element's bound once, not per check (np.allclose
                # would take about 0.4 s per check of matmul's 16 M elements)
                atol = tol.get("atol", 0.0)
                bounds = [None if a is None else (a.astype(np.float32), atol + tol.get("rtol", 0.0) *
                                                  np.abs(a.astype(np.float32))) for a in answer]

                def within_tolerance(answer, result_host, atol=atol):
                    return all(np.all(np.abs(r.astype(np.float32) - b[0]) <= b[1])
                               for b, r in zip(bounds, result_host) if b is not None)
                verify = within_tolerance
        result["reference_s"] = time.perf_counter() - t_ref

        random.seed(opt.seed)
        np.random.seed(opt.seed)  # random_sample draws with np.random.choice
        t_tune = time.perf_counter()
        results, env = kernel_tuner.tune_kernel(
            t["name"], t["source"], t["problem_size"], args, t["params"], restrictions=t["restrictions"],
            answer=answer, verify=verify, atol=atol, strategy="random_sample",
            strategy_options={"max_fevals": opt.budget}, iterations=7, quiet=True, verbose=False, **common)
    except Exception as e:  # Kernel Tuner stops the whole run at a failure it does not expect
        result["error"] = "%s: %s" % (type(e).__name__, e)
        write(opt.json, result)
        raise
    result["tune_s"] = time.perf_counter() - t_tune

    def status(r):
        return str(r["__error__"]) if "__error__" in r else "ok"

    counts = {}
    for r in results:
        counts[status(r)] = counts.get(status(r), 0) + 1
    ok = [r for r in results if status(r) == "ok"]
    best = min(ok, key=lambda r: r["time"]) if ok else None
    result.update(
        configurations=len(results), valid=counts.get("ok", 0),
        compile_failed=counts.get("CompilationFailedConfig", 0),
        runtime_failed=counts.get("RuntimeFailedConfig", 0), invalid=counts.get("InvalidConfig", 0),
        best_ms=best["time"] if best else None,
        best_config={k: best[k] for k in t["params"]} if best else None,
        device=env.get("device_name"),
        timings_s={k[len("total_"):]: env[k] / 1000 for k in env if k.startswith("total_") and k.endswith("_time")},
        evaluated=[dict({k: r[k] for k in t["params"]}, status=status(r), time=r.get("time")) for r in results],
        python_s=time.perf_counter() - T0)
    write(opt.json, result)


def write(path, result):
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1, default=lambda o: o.item() if hasattr(o, "item") else str(o))


if __name__ == "__main__":
    main()
