#!/usr/bin/env python3
"""t1count.py: the valid configurations of a T1 spec, by CPython's own rules.

Usage: t1count.py [--list] SPEC
Evaluates every TuningParameters[].Values with eval(), walks the full Cartesian product with
itertools.product (first parameter slowest) and keeps the points where every
Conditions[].Expression is true, with the parameters and ProblemSize as names. Prints
"CARTESIAN VALID", or with --list each valid configuration as a JSON line. Brute force on
purpose: it is the reference that kg-propose's pruned walk is checked against."""
import itertools
import json
import sys

BUILTINS = {"range": range, "list": list, "min": min, "max": max, "len": len,
            "abs": abs, "int": int, "float": float}


def main():
    args = sys.argv[1:]
    listing = args[:1] == ["--list"]
    if listing:
        args = args[1:]
    with open(args[0]) as f:
        spec = json.load(f)
    params = spec["ConfigurationSpace"]["TuningParameters"]
    conditions = [compile(c["Expression"], "<condition>", "eval")
                  for c in spec["ConfigurationSpace"].get("Conditions", [])]
    names = [p["Name"] for p in params]
    values = [list(eval(p["Values"], {"__builtins__": {}, **BUILTINS})) if isinstance(p["Values"], str)
              else p["Values"] for p in params]
    problem_size = spec["KernelSpecification"].get("ProblemSize")
    cartesian = valid = 0
    for point in itertools.product(*values):
        cartesian += 1
        env = {"__builtins__": {}, **BUILTINS, "ProblemSize": problem_size, **dict(zip(names, point))}
        if all(eval(c, env) for c in conditions):
            valid += 1
            if listing:
                print(json.dumps(dict(zip(names, point))))
    if not listing:
        print(cartesian, valid)


main()
