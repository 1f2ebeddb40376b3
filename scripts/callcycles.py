#!/usr/bin/env python3
"""callcycles.py -- fail on a call circle between the project's C files.

File A "uses" file B when A's object has an undefined symbol (a function it
calls or takes the address of, or a variable) that B's object defines: `nm`
reads what the linker will resolve, so the graph is exact, macros and
function-pointer tables included, and costs one `nm` per object.  The
graph is built per binary (lockgate: server/ handlers/ idgen/ common/;
lockctl: cli/ common/), and Tarjan's pass finds its strongly connected
components: any with more than one file is a circle, printed as a path of
the calls that close it.  Tests are not part of it.

  scripts/callcycles.py [BUILD]     (default build; run after `make all`)

Prints `callcycles: N passed, M failed` (one check per binary); exits 1 on
a circle or when an object is missing.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BUILD", "build")
BINARIES = {"lockgate": ("server", "handlers", "idgen", "common"), "lockctl": ("cli", "common")}


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper():  # global: text, data, bss, read-only
            defined.add(name)
    return defined, undefined


def sccs(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def circle_path(edges, why, comp):
    """One cycle through comp's first file, each step with a symbol."""
    comp = set(comp)
    start = min(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges[v] & comp):
                if w == start:
                    path, u = [start], v
                    while u is not None:
                        path.append(u)
                        u = prev[u]
                    path.reverse()
                    return " -> ".join(f"{a} ({why[a, b]})" for a, b in zip(path, path[1:])) + f" -> {start}"
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return " <-> ".join(sorted(comp))


def main():
    passed = failed = 0
    for binary, dirs in BINARIES.items():
        files = sorted(os.path.join(d, f) for d in dirs for f in os.listdir(os.path.join(ROOT, d))
                       if f.endswith(".c"))
        defs, undefs, missing = {}, {}, []
        for f in files:
            obj = os.path.join(ROOT, BUILD, "obj", f[:-2] + ".o")
            if not os.path.exists(obj):
                missing.append(obj)
                continue
            defs[f], undefs[f] = symbols(obj)
        if missing:
            print(f"FAIL {binary}: no object for {', '.join(missing)} (run make all first)")
            failed += 1
            continue
        owner = {}
        for f, names in defs.items():
            for s in names:
                owner.setdefault(s, f)
        edges, why = {f: set() for f in defs}, {}
        for f, names in undefs.items():
            for s in sorted(names):
                g = owner.get(s)
                if g and g != f:
                    edges[f].add(g)
                    why.setdefault((f, g), s)
        circles = sccs(edges)
        for comp in circles:
            print(f"FAIL {binary}: call circle among {', '.join(comp)}")
            print(f"  e.g. {circle_path(edges, why, comp)}")
        if circles:
            failed += 1
        else:
            passed += 1
    print(f"callcycles: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
