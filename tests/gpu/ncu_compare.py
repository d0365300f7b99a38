#!/usr/bin/env python3
"""ncu_compare.py: kg-bench --metrics against Nsight Compute on the same kernel.

  ncu_compare.py --metrics           the metric list to give ncu --metrics
  ncu_compare.py NCU_CSV METRICS     compares ncu's CSV (ncu --csv --print-units base, one
                                     kernel) with a bench.metrics object (a JSON file); prints
                                     one line per figure and exits 1 if any is off by more than
                                     its tolerance, or missing on one side only
"""
import csv
import json
import sys

# kg-bench's figure, the ncu metrics whose sum it is, what to multiply kg-bench's value by to
# get ncu's unit, and the tolerance: (absolute, relative), either one suffices. The blocks
# shared memory allows are left out: ncu counts them at the carveout the driver chose for
# the launch, kg-bench at the largest the kernel may get.
PAIRS = [
    ("sm_throughput_pct", ["sm__throughput.avg.pct_of_peak_sustained_elapsed"], 1, (5, 0.10)),
    ("dram_throughput_pct", ["dram__throughput.avg.pct_of_peak_sustained_elapsed"], 1, (5, 0.10)),
    ("memory_throughput_pct", ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"], 1, (5, 0.10)),
    ("achieved_occupancy_pct", ["sm__warps_active.avg.pct_of_peak_sustained_active"], 1, (5, 0.10)),
    ("theoretical_occupancy_pct", ["sm__maximum_warps_per_active_cycle_pct"], 1, (0.5, 0)),
    ("blocks_per_sm_by.registers", ["launch__occupancy_limit_registers"], 1, (0, 0)),
    ("blocks_per_sm_by.threads", ["launch__occupancy_limit_warps"], 1, (0, 0)),
    ("blocks_per_sm_by.blocks", ["launch__occupancy_limit_blocks"], 1, (0, 0)),
    ("l1_hit_rate_pct", ["l1tex__t_sector_hit_rate.pct"], 1, (5, 0.10)),
    ("l2_hit_rate_pct", ["lts__t_sector_hit_rate.pct"], 1, (5, 0.10)),
    ("shared_bank_conflicts", ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"], 1, (16, 0.02)),
    ("shared_wavefronts", ["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"], 1, (16, 0.02)),
    ("tensor_pipe_pct", ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"], 1, (5, 0.10)),
    ("fma_pipe_pct", ["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"], 1, (5, 0.10)),
    ("sfu_pipe_pct", ["sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"], 1, (5, 0.10)),
    ("global_atomics", ["l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
                        "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"], 1, (0, 0.01)),
    ("instructions_issued", ["smsp__inst_issued.sum"], 1, (0, 0.02)),
    ("ipc", ["sm__inst_executed.avg.per_cycle_active"], 1, (0.1, 0.10)),
    # kg-bench's passes start from an L2 full of the flush's dirty lines, which the kernel's
    # misses write back; ncu's cache control leaves it clean
    ("dram_bytes", ["dram__bytes.sum"], 1, (64e6, 0.10)),
    ("duration_us", ["gpu__time_duration.sum"], 1000, (0, 0.25)),
    ("stalls.long_scoreboard", ["smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct"], 1, (5, 0.15)),
    ("stalls.barrier", ["smsp__warp_issue_stalled_barrier_per_warp_active.pct"], 1, (5, 0.15)),
    ("stalls.math_pipe_throttle", ["smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct"], 1, (5, 0.15)),
    ("stalls.mio_throttle", ["smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct"], 1, (5, 0.15)),
]


def lookup(values, key):
    for part in key.split("."):
        if not isinstance(values, dict) or part not in values:
            return None
        values = values[part]
    return values


def read_ncu(path):
    with open(path, encoding="utf-8") as f:
        rows = [line for line in f if line.startswith('"')]
    values = {}
    for row in csv.DictReader(rows):
        try:
            values[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            pass
    return values


def main():
    if sys.argv[1:] == ["--metrics"]:
        print(",".join(name for _, names, _, _ in PAIRS for name in names))
        return 0
    ncu = read_ncu(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        metrics = json.load(f)
    bad = 0
    for key, names, scale, (atol, rtol) in PAIRS:
        ours = lookup(metrics.get("values", {}), key)
        theirs = [ncu.get(n) for n in names]
        if ours is None and all(t is None for t in theirs):
            continue
        if ours is None or any(t is None for t in theirs):
            print(f"{key:32} kg-bench {ours} ncu {theirs}  MISSING")
            bad += 1
            continue
        a, b = ours * scale, sum(theirs)
        ok = abs(a - b) <= atol or abs(a - b) <= rtol * abs(b)
        bad += not ok
        print(f"{key:32} kg-bench {a:14.4f} ncu {b:14.4f}  {'ok' if ok else 'OFF'}")
    return 1 if bad else 0


sys.exit(main())
