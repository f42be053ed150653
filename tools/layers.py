#!/usr/bin/env python3
"""The gateway's layering, checked on the build: which file calls which (from the object
files' symbols, with nm) and which file includes which (from the sources).

  tools/layers.py [BUILD_DIR] [--graph]

Rules (docs/ARCHITECTURE.md, "The gateway's layers"):
  1. A file calls only files of its own folder or of a folder below it.
  2. Every call loop (a set of files that reach each other) is inside one folder and has
     at most 4 files.
  3. A file includes only its own folder's headers and the faces (the one header) of the
     folders below it; never another folder's internal header.
Prints the figures and every breach; exits 1 if there is one. --graph also prints each
file's calls into other files.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GATEWAY = os.path.join(ROOT, "gateway")
MAX_LOOP = 4


def folders():
    """The folders bottom up, as gateway/CMakeLists.txt lists them."""
    text = open(os.path.join(GATEWAY, "CMakeLists.txt")).read()
    m = re.search(r"set\(GW_GATEWAY_FOLDERS ([a-z ]+)\)", text)
    return m.group(1).split()


def objects(build):
    """Each gateway source's object file: {source path relative to gateway/: object}."""
    out = {}
    base = os.path.join(build, "gateway")
    for dirpath, _, names in os.walk(base):
        for n in names:
            if not n.endswith(".c.o"):
                continue
            folder = os.path.relpath(dirpath, base).split(os.sep)[0]
            out[folder + "/" + n[:-2]] = os.path.join(dirpath, n)
    return out


def symbols(obj):
    """(defined, referenced) global symbols of an object file."""
    res = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in res.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBR":
            defined.add(parts[2])
    return defined, used


def tarjan(nodes, edges):
    """The strongly connected components of the graph."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def includes(order):
    """Breaches of rule 3, and how many includes were read."""
    faces = {}  # folder -> its face header
    headers = {}  # header name -> folder
    for f in order:
        for n in os.listdir(os.path.join(GATEWAY, f)):
            if n.endswith(".h"):
                headers[n] = f
    for n, f in headers.items():
        if "internal" not in n:
            faces.setdefault(f, set()).add(n)
    bad, count = [], 0
    for f in order:
        for n in sorted(os.listdir(os.path.join(GATEWAY, f))):
            if not n.endswith((".c", ".h")):
                continue
            for line in open(os.path.join(GATEWAY, f, n)):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m or m.group(1) not in headers:
                    continue
                count += 1
                h = m.group(1)
                hf = headers[h]
                if hf == f:
                    continue
                if order.index(hf) > order.index(f):
                    bad.append(f"{f}/{n} includes {hf}/{h}, a folder above it")
                elif h not in faces.get(hf, ()):
                    bad.append(f"{f}/{n} includes {hf}/{h}, not that folder's face")
    for f in order:
        if len(faces.get(f, ())) != 1:
            bad.append(f"{f}/ has {len(faces.get(f, ()))} public headers, not one face")
    return bad, count


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    build = args[0] if args else os.path.join(ROOT, "build")
    order = folders()
    objs = objects(build)
    if not objs:
        print(f"layers: no object files under {build}/gateway (build first)")
        return 1
    defs, uses = {}, {}
    owner = {}
    for src, obj in objs.items():
        d, u = symbols(obj)
        defs[src], uses[src] = d, u
        for s in d:
            owner[s] = src
    edges, calls, upward = {}, 0, []
    pairs = {}
    for src in sorted(objs):
        for s in sorted(uses[src]):
            dst = owner.get(s)
            if not dst or dst == src:
                continue
            calls += 1
            edges.setdefault(src, set()).add(dst)
            sf, df = src.split("/")[0], dst.split("/")[0]
            pairs[(sf, df)] = pairs.get((sf, df), 0) + 1
            if order.index(df) > order.index(sf):
                upward.append(f"{src} calls {s} in {dst}, a folder above it")
    loops = [c for c in tarjan(objs.keys(), edges) if len(c) > 1]
    bad = list(upward)
    for c in loops:
        fs = {x.split("/")[0] for x in c}
        if len(fs) > 1 or len(c) > MAX_LOOP:
            bad.append(f"a call loop of {len(c)} files across {sorted(fs)}: {' '.join(c)}")
    inc_bad, n_inc = includes(order)
    bad += inc_bad

    print(f"layers: {len(objs)} files in {len(order)} folders ({' < '.join(order)}), "
          f"{calls} calls between files, {len(upward)} of them upward; "
          f"{len(loops)} call loops, the largest of {max([len(c) for c in loops] or [0])} "
          f"files; {n_inc} includes of gateway headers")
    for f in order:
        into = {df: n for (sf, df), n in pairs.items() if sf == f and df != f}
        own = pairs.get((f, f), 0)
        below = ", ".join(f"{df} {n}" for df, n in sorted(into.items(), key=lambda x: order.index(x[0])))
        print(f"  {f}/: {own} calls inside" + (f"; into {below}" if below else ""))
    for c in loops:
        print(f"  loop: {' '.join(c)}")
    if "--graph" in sys.argv:
        for src in sorted(edges):
            print(f"  {src} -> {' '.join(sorted(edges[src]))}")
    for b in bad:
        print(f"layers: {b}")
    print(f"layers: {'ok' if not bad else str(len(bad)) + ' breaches'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
