#!/usr/bin/env python3
"""link_cycles.py BUILD: the object files of each tool (BUILD/tools/NAME/*.o) and of the library
(BUILD/lib/*.o) that need each other in a cycle, found by nm: a file that defines a symbol another
uses is below it, and no file may be below one it needs. Prints each cycle with the symbols that
close it; exits 1 when there is one, 0 when there is none (and says so), 2 on bad usage."""
import glob
import os
import subprocess
import sys


def edges_of(objects):
    """{file: {file it needs: [symbols]}} for the object files of one folder."""
    defined, used = {}, {}
    for path in objects:
        name = os.path.basename(path)
        out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
        used[name] = set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = name
            elif len(parts) == 2 and parts[0] == "U":
                used[name].add(parts[1])
    edges = {}
    for name, symbols in used.items():
        edges[name] = {}
        for s in sorted(symbols):
            owner = defined.get(s)
            if owner and owner != name:
                edges[name].setdefault(owner, []).append(s)
    return edges


def cycles(edges):
    """The strongly connected components of more than one file (Tarjan's algorithm)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: link_cycles.py BUILD (a build folder: BUILD/tools/NAME/*.o, BUILD/lib/*.o)")
    build = sys.argv[1]
    folders = sorted(glob.glob(os.path.join(build, "tools", "*"))) + [os.path.join(build, "lib")]
    bad = 0
    for folder in folders:
        objects = sorted(glob.glob(os.path.join(folder, "*.o")))
        if not objects:
            continue
        edges = edges_of(objects)
        for component in cycles(edges):
            bad += 1
            print(f"{os.path.relpath(folder, build)}: a cycle: {', '.join(component)}")
            for a in component:
                for b in component:
                    if b in edges[a]:
                        print(f"  {a} -> {b}: {', '.join(edges[a][b])}")
    if bad:
        sys.exit(1)
    print(f"no cycle among the object files of {len(folders)} folders")


main()
