#!/usr/bin/env python3
"""make_graph.py NODES SEED: a synthetic kg-select graph.json of NODES nodes, for benchmarks.

Every node but the root has a parent of lower rank (so the rank rule holds), a few nodes
are failed dead ends, one edge in ten is registered but not evaluated, and the statistics
are backed up the way kg-select computes them (N = 1 + sum of edge visits, Q = mean; each
edge has as many visits as its child, as in a tree)."""
import json
import random
import sys

def main():
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    rnd = random.Random(seed)
    methods = ["tile", "vectorize_global_loads", "change_block_sizes", "enable_async_pipeline", "unroll"]
    nodes = [{"state": "S0", "failed": False, "rank": 0, "u": 0.0, "n": 1, "q": 0.0, "median_ms": 1.0,
              "speedup": 1.0, "speedup_lo": 1.0, "created_iter": 0, "config": {"bx": 128, "it": 1}, "methods": []}]
    edges = []
    for i in range(1, n):
        parent = rnd.randrange(max(1, i // 2), i) if i > 2 else 0
        failed = rnd.random() < 0.1
        speedup = rnd.uniform(0.5, 2.0)
        u = -3.0 if failed else max(-3.0, min(3.0, __import__("math").log2(speedup)))
        m = rnd.choice(methods)
        nodes.append({"state": "S%d" % i, "failed": failed, "rank": nodes[parent]["rank"] + 1, "u": u, "n": 1, "q": u,
                      "median_ms": 1 / speedup, "speedup": None if failed else speedup,
                      "speedup_lo": None if failed else speedup * 0.98, "created_iter": i,
                      "config": {"bx": rnd.choice([64, 128, 256]), "it": rnd.choice([1, 2, 4])},
                      "methods": nodes[parent]["methods"][-4:] + [m]})
        edges.append({"from": parent, "to": i, "n": 1, "prior": 1.0, "method": m, "reward_sum": u, "reward_max": u,
                      "evaluations": 1, "candidate": {"id": "c%d" % i, "method": m, "config": nodes[i]["config"]}})
        if rnd.random() < 0.1:
            edges.append({"from": parent, "to": None, "n": 0, "prior": 0.5, "method": m, "reward_sum": 0,
                          "reward_max": None, "evaluations": 0, "candidate": {"id": "r%d" % i, "method": m}})
    # Back up: children before parents (parents have lower indices).
    out = {}
    for e in edges:
        out.setdefault(e["from"], []).append(e)
    # In a tree every playout through an edge visits its child, so N(edge) = N(child).
    for i in range(n - 1, -1, -1):
        visits, total = 1.0, nodes[i]["u"]
        for e in out.get(i, []):
            if e["to"] is not None:
                e["n"] = nodes[e["to"]]["n"]
                visits += e["n"]
                total += e["n"] * nodes[e["to"]]["q"]
        nodes[i]["n"], nodes[i]["q"] = visits, total / visits
    params = {"c_init": 1.25, "c_base": 19652, "fpu_reduction": 0.2, "root_fpu_reduction": 0.1, "widen_k": 1,
              "widen_alpha": 0.5, "reward_clip": 3, "failure_reward": -3, "cycle_penalty": 0.5, "noise_epsilon": 0,
              "noise_alpha": 10.83, "improve_pct": 2, "converge_iters": 0, "budget_builds": 0,
              "rollout_epsilon": 0.1, "rollout_lambda": 0.5, "rollout_depth": 0, "backup_max": False}
    json.dump({"version": 1, "kernel": "k", "rng": "%016x" % seed, "params": params, "iter": n, "builds": n - 1,
               "last_improvement": 0, "incumbent": 0, "baseline_ms": 1.0, "nodes": nodes, "edges": edges},
              sys.stdout, separators=(",", ":"))

main()
