#!/usr/bin/env python3
"""exprgen.py: writes random arithmetic and comparison expressions, one per line.

Usage: exprgen.py SEED COUNT. The same seed gives the same lines, so a failing line can be
reproduced. Operands mix small and large ints, floats, negatives and zero, so that floor
division, modulo, powers and int/float comparisons meet their edge cases."""
import random
import sys

ATOMS = ["0", "1", "2", "3", "7", "-1", "-7", "10", "0.5", "-2.5", "1e16", "3.0",
         "-0.0", "1e-5", "9007199254740993", "2**53", "2**62", "-2**63", "True", "False",
         "a", "b", "c"]
BINARY = ["+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!=",
          "and", "or", "&", "|", "^", "<<", ">>"]


def expr(rng, depth):
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(ATOMS)
    r = rng.random()
    if r < 0.1:
        return "-" + expr(rng, depth - 1)
    if r < 0.15:
        return f"(not {expr(rng, depth - 1)})"
    if r < 0.2:
        return f"{expr(rng, depth - 1)} if {expr(rng, depth - 1)} else {expr(rng, depth - 1)}"
    if r < 0.25:
        return f"{rng.choice(['min', 'max'])}({expr(rng, depth - 1)}, {expr(rng, depth - 1)})"
    if r < 0.3:
        return f"{rng.choice(['abs', 'int', 'float'])}({expr(rng, depth - 1)})"
    if r < 0.35:
        return f"{expr(rng, depth - 1)} < {expr(rng, depth - 1)} <= {expr(rng, depth - 1)}"
    return f"({expr(rng, depth - 1)} {rng.choice(BINARY)} {expr(rng, depth - 1)})"


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    for _ in range(count):
        print(expr(rng, 3))


main()
