#!/usr/bin/env python3
"""pyeval.py: evaluates expressions, one per line on stdin, with CPython itself.

Prints repr(result) per line, "error" when Python raises, "overflow" when the result or any
intermediate value is an integer outside 64 bits, or "complex" for a complex number
(kernelgraph refuses both instead of computing them): every operation is checked.
--let NAME=EXPR binds names, in order, as kg-libtest expr does. The expected side of the
expression tests: tests/02-pyexpr.bats compares this against kg-libtest line by line."""
import ast
import sys

BUILTINS = {"range": range, "list": list, "min": min, "max": max, "len": len,
            "abs": abs, "int": int, "float": float}


def has_big_int(v):
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return not -2**63 <= v < 2**63
    if isinstance(v, list):
        return any(has_big_int(x) for x in v)
    if isinstance(v, range):
        return any(has_big_int(x) for x in (v.start, v.stop, v.step))
    return False


class Overflow(Exception):
    pass


class Complex(Exception):
    pass


def check(v):
    if has_big_int(v):
        raise Overflow()
    if isinstance(v, complex):
        raise Complex()
    return v


def safe_pow(a, b):
    """a ** b, refusing first what would take CPython ages to compute."""
    if isinstance(a, int) and isinstance(b, int) and b > 64 and abs(a) > 1:
        raise Overflow()
    return a ** b


def safe_lshift(a, b):
    if isinstance(a, int) and isinstance(b, int) and b > 64 and a != 0:
        raise Overflow()
    return a << b


class WrapChecks(ast.NodeTransformer):
    """Wraps each operation and integer literal in check(...); ** and << go through
    safe_pow and safe_lshift."""

    def visit_BinOp(self, node):
        if isinstance(node.op, (ast.Pow, ast.LShift)):
            self.generic_visit(node)
            name = "__pow" if isinstance(node.op, ast.Pow) else "__lshift"
            node = ast.copy_location(ast.Call(func=ast.Name(id=name, ctx=ast.Load()),
                                              args=[node.left, node.right], keywords=[]), node)
            return ast.copy_location(
                ast.Call(func=ast.Name(id="__check", ctx=ast.Load()), args=[node], keywords=[]), node)
        return self.wrap(node)

    def wrap(self, node):
        self.generic_visit(node)
        return ast.copy_location(
            ast.Call(func=ast.Name(id="__check", ctx=ast.Load()), args=[node], keywords=[]), node)

    visit_UnaryOp = visit_Call = wrap

    def visit_Constant(self, node):
        return self.wrap(node) if type(node.value) is int else node


def evaluate(text, env):
    tree = ast.fix_missing_locations(WrapChecks().visit(ast.parse(text, mode="eval")))
    # One globals dict: comprehensions look names up there, not in a separate locals dict.
    return eval(compile(tree, "<expr>", "eval"), dict(env, __builtins__={}, __check=check, __pow=safe_pow,
                                                          __lshift=safe_lshift))


def main():
    env = dict(BUILTINS)
    args = sys.argv[1:]
    while args:
        if args[0] != "--let" or len(args) < 2:
            sys.exit("usage: pyeval.py [--let NAME=EXPR]... < lines")
        name, expr = args[1].split("=", 1)
        env[name] = evaluate(expr, env)
        args = args[2:]
    for line in sys.stdin:
        line = line.rstrip("\n")
        try:
            print(repr(evaluate(line, env)))
        except Overflow:
            print("overflow")
        except Complex:
            print("complex")
        except Exception:
            print("error")


main()
