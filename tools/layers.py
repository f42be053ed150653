#!/usr/bin/env python3
"""The layering of the three layered trees, gateway/, store/ and tools/, checked on the
build: which file calls which (from the object files' symbols, with nm) and which file
includes which (from the sources), against the folders the CMake files declare.

  tools/layers.py [BUILD_DIR] [--graph]

Declarations (cmake/gw_folder.cmake). Each tree's CMakeLists.txt lists its folders bottom
up: set(GW_GATEWAY_FOLDERS ...), set(GW_STORE_FOLDERS ...), set(GW_TOOLS_FOLDERS ...);
"." is the tree's own folder (store/store_open.c). Each folder's CMakeLists.txt (the
tree's for ".") declares it with one or more gw_folder calls:

  gw_folder(NAME [PROGRAM] [TARGET target] SOURCES files... FACE headers...
            DEPENDS targets...)

FACE: the folder's face, the headers the folders above may include. DEPENDS: what it
links; the targets of the tree's folders among them are the folders it may use (and,
through theirs, the folders below those). A folder of programs (tools/) calls gw_folder
once per program, with PROGRAM: the program's name is its target; FACE may be left out
when nothing includes the folder. A plain add_executable in a folder's CMakeLists.txt
(gateway/server's gw) counts as a program of that folder.

tools/ (docs/ARCHITECTURE.md, "Tools"): tools/CMakeLists.txt says
    set(GW_FOLDER_PREFIX tools_)                  # its libraries: gw_tools_<folder>
    set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tools)  # build/tools/<name>
    set(GW_TOOLS_FOLDERS common cli load attack crash bench)
and each tools/<folder>/CMakeLists.txt declares its library and programs, e.g.
    gw_folder(common SOURCES load_hist.c load_proc.c load_util.c load_ws.c
      FACE ackrule.h load_hist.h load_proc.h load_util.h load_ws.h
      DEPENDS gw_client wslay PkgConfig::OPENSSL m)    # the library gw_tools_common
    gw_folder(gw_load PROGRAM SOURCES gw_load.c load_fanout.c ...
      DEPENDS gw_tools_common gw_tools_xmpp_stanza gw_client m)  # the program gw_load
A program's sources are in its folder (the folder is read from the object's path); a
folder of programs only (cli/, attack/, bench/) needs no FACE. DEPENDS on targets outside
the tree (gw_client, gw_store) are not folders and are not checked here.

Rules (docs/ARCHITECTURE.md, "The gateway's layers"):
  1. A file calls only files of its own folder or of a folder its folder links (DEPENDS,
     and what those link): never one above it, nor one beside it (rocks/ and pg/ both
     link core/ only). A folder's DEPENDS name only folders listed before it.
  2. Every call loop (a set of files that reach each other) is inside one folder and has
     at most 4 files.
  3. A file includes only its own folder's headers and the faces of the folders it links
     (an include by a path, "../load/load_run.h", counts as one of load_run.h);
     and the tree's face (the "." folder's FACE: store.h, which every folder of the store
     implements). Another tree's header only if it is that tree's face.
An object whose source is in no declared folder (a new folder not listed in the tree's
GW_<TREE>_FOLDERS, a file left at the top of tools/) is a breach too.
Symbols resolve within a link: the tree's libraries, and for a program its own objects
over them (each program has its own main, usage...). A tree whose folders are not
declared yet is skipped (said so). Prints the figures per tree and every breach; exits 1
if there is one. --graph also prints each file's calls into other files.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREES = ("gateway", "store", "tools")
MAX_LOOP = 4
KEYWORDS = ("PROGRAM", "TARGET", "SOURCES", "FACE", "DEPENDS")


def cmake_text(path):
    """A CMakeLists.txt without its comments ("" when there is none)."""
    if not os.path.exists(path):
        return ""
    return "\n".join(line.split("#", 1)[0] for line in open(path))


def calls_of(text, fn):
    """The argument lists of each fn(...) call in a CMake text."""
    out = []
    for m in re.finditer(r"\b%s\s*\(" % re.escape(fn), text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out.append([a.strip('"') for a in text[m.end():i - 1].split()])
    return out


def parse_folder(args):
    """gw_folder's arguments: (name, {keyword: values})."""
    name, kw, cur = args[0], {k: [] for k in KEYWORDS}, None
    for a in args[1:]:
        if a in KEYWORDS:
            cur = a
            if a == "PROGRAM":
                kw[a] = [True]
                cur = None
        elif cur:
            kw[cur].append(a)
    return name, kw


class Tree:
    """One tree's declarations: its folders bottom up, their faces, programs and links."""

    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(ROOT, name)
        text = cmake_text(os.path.join(self.dir, "CMakeLists.txt"))
        m = re.search(r"set\(\s*GW_%s_FOLDERS\s+([^)$]*)\)" % name.upper(), text)
        self.order = m.group(1).split() if m else None
        self.faces, self.depends, self.programs = {}, {}, set()
        for f in self.order or ():
            path = os.path.join(self.dir, f, "CMakeLists.txt")
            if f == ".":
                path = os.path.join(self.dir, "CMakeLists.txt")
            t = cmake_text(path)
            self.faces[f], self.depends[f] = set(), set()
            for args in calls_of(t, "gw_folder"):
                name_, kw = parse_folder(args)
                self.faces[f] |= set(kw["FACE"])
                self.depends[f] |= set(kw["DEPENDS"])
                if kw["PROGRAM"]:
                    self.programs.add(name_)
            for args in calls_of(t, "add_executable"):
                self.programs.add(args[0])

    def folder_of(self, rel):
        """The folder of a path relative to the tree ("." for the tree's own files)."""
        return rel.split("/")[0] if "/" in rel else "."

    def headers(self):
        """{header name: folder} of the tree's declared folders."""
        out = {}
        for f in self.order:
            d = os.path.join(self.dir, f)
            for n in os.listdir(d):
                if n.endswith(".h") and os.path.isfile(os.path.join(d, n)):
                    out[n] = f
        return out

    def face(self):
        """What another tree may include: the "." folder's face, or every folder's."""
        if "." in self.faces:
            return set(self.faces["."])
        return set().union(*self.faces.values()) if self.faces else set()


def objects(build, tree):
    """The tree's object files: [(target, source relative to the tree, object)]. The
    target is read from the object's path (.../CMakeFiles/<target>.dir/...); an object
    whose source is gone (a stale build) is left out."""
    out = []
    base = os.path.join(build, tree.name)
    for dirpath, _, names in os.walk(base):
        parts = os.path.relpath(dirpath, base).split(os.sep)
        if "CMakeFiles" not in parts:
            continue
        i = parts.index("CMakeFiles")
        if i + 1 >= len(parts) or not parts[i + 1].endswith(".dir"):
            continue
        target = parts[i + 1][: -len(".dir")]
        rel_dir = [p for p in parts[:i] + parts[i + 2:] if p not in (".", "")]
        for n in names:
            if not n.endswith(".c.o"):
                continue
            src = "/".join(rel_dir + [n[:-2]])
            if os.path.exists(os.path.join(tree.dir, src)):
                out.append((target, src, os.path.join(dirpath, n)))
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


def allowed(tree, target_folder):
    """{folder: the folders it may use}: what it links (DEPENDS on the tree's targets),
    and what those link; and breaches of the levels (a DEPENDS on a folder listed later)."""
    direct, bad = {}, []
    for f in tree.order:
        direct[f] = set()
        for t in tree.depends.get(f, ()):
            g = target_folder.get(t)
            if g is None or g == f or g not in tree.order:
                continue
            direct[f].add(g)
            if tree.order.index(g) > tree.order.index(f):
                bad.append(f"{tree.name}/{f} links {t} ({g}/), a folder listed above it")
    out = {}
    for f in tree.order:
        seen, todo = set(), list(direct[f])
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                todo += direct.get(g, ())
        out[f] = seen
    return out, bad


def includes(tree, may, others):
    """Breaches of rule 3, and how many includes of checked headers were read."""
    headers = tree.headers()
    foreign = {}  # another tree's header -> that tree, when the name is unique to it
    for o in others:
        for h, f in o.headers().items():
            if h not in headers:
                foreign[h] = None if h in foreign else o
    bad, count = [], 0
    for f in tree.order:
        d = os.path.join(tree.dir, f)
        for n in sorted(os.listdir(d)):
            if not n.endswith((".c", ".h")):
                continue
            where = n if f == "." else f"{f}/{n}"
            for line in open(os.path.join(d, n)):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                h = os.path.basename(m.group(1))  # "../load/load_run.h" is load_run.h
                if h in foreign and foreign[h]:
                    count += 1
                    if h not in foreign[h].face():
                        bad.append(f"{tree.name}/{where} includes {h}, not {foreign[h].name}'s face")
                    continue
                if h not in headers:
                    continue
                count += 1
                hf = headers[h]
                if hf == f or (hf == "." and h in tree.faces.get(".", ())):
                    continue
                if hf not in may.get(f, ()):
                    bad.append(f"{tree.name}/{where} includes {hf}/{h}, a folder it does not link "
                               f"(above or beside it)")
                elif h not in tree.faces.get(hf, ()):
                    bad.append(f"{tree.name}/{where} includes {hf}/{h}, not that folder's face")
    return bad, count


def check(tree, build, others, graph):
    """Checks one tree; prints its figures; returns its breaches (None: nothing built)."""
    objs = objects(build, tree)
    if not objs:
        print(f"layers: {tree.name}/: no object files under {build}/{tree.name} (build first)")
        return None
    target_folder, stray = {}, []
    for target, src, _ in objs:
        target_folder.setdefault(target, tree.folder_of(src))
        if tree.folder_of(src) not in tree.order:
            stray.append(f"{tree.name}/{src} (target {target}) is in no declared folder "
                         f"(GW_{tree.name.upper()}_FOLDERS)")
    may, bad = allowed(tree, target_folder)
    bad += stray
    syms = {obj: symbols(obj) for _, _, obj in objs}
    lib_owner = {}
    for target, src, obj in objs:
        if target not in tree.programs:
            for s in syms[obj][0]:
                lib_owner[s] = src
    own = {}  # program -> its own objects' symbols
    for target, src, obj in objs:
        if target in tree.programs:
            for s in syms[obj][0]:
                own.setdefault(target, {})[s] = src
    edges, pairs, calls, upward = {}, {}, 0, []
    nodes = {src for _, src, _ in objs}
    seen = set()
    # A library's symbol that only programs define resolves, in each program's link, to
    # that program's: a call from the library into each of them.
    in_programs = {}
    for target, defs in own.items():
        for s, src in defs.items():
            in_programs.setdefault(s, set()).add(src)
    for target, src, obj in sorted(objs):
        mine = own.get(target, {}) if target in tree.programs else None
        for s in sorted(syms[obj][1]):
            if mine is not None:
                found = [mine.get(s) or lib_owner.get(s)]
            else:
                found = [lib_owner.get(s)] if s in lib_owner else sorted(in_programs.get(s, ()))
            for dst in found:
                if not dst or dst == src or (src, s, dst) in seen:
                    continue
                seen.add((src, s, dst))
                calls += 1
                edges.setdefault(src, set()).add(dst)
                sf, df = tree.folder_of(src), tree.folder_of(dst)
                pairs[(sf, df)] = pairs.get((sf, df), 0) + 1
                if sf != df and df not in may.get(sf, ()):
                    upward.append(f"{tree.name}/{src} calls {s} in {dst}, a folder {sf}/ does "
                                  f"not link (above or beside it)")
    loops = [c for c in tarjan(nodes, edges) if len(c) > 1]
    bad += upward
    for c in loops:
        fs = {tree.folder_of(x) for x in c}
        if len(fs) > 1 or len(c) > MAX_LOOP:
            bad.append(f"{tree.name}/: a call loop of {len(c)} files across {sorted(fs)}: "
                       f"{' '.join(c)}")
    inc_bad, n_inc = includes(tree, may, others)
    bad += inc_bad
    for f in tree.order:
        if f not in tree.programs and not tree.faces.get(f) and any(
                target_folder.get(t) == f and t not in tree.programs for t in target_folder):
            bad.append(f"{tree.name}/{f}: a library with no FACE declared")

    print(f"layers: {tree.name}/: {len(nodes)} files in {len(tree.order)} folders "
          f"({' < '.join(tree.order)}), {len(target_folder)} targets, {calls} calls between "
          f"files, {len(upward)} of them upward or sideways; {len(loops)} call loops, the "
          f"largest of {max([len(c) for c in loops] or [0])} files; {n_inc} includes of "
          f"checked headers")
    for f in tree.order:
        into = {df: n for (sf, df), n in pairs.items() if sf == f and df != f}
        inside = pairs.get((f, f), 0)
        below = ", ".join(f"{df} {n}" for df, n in
                          sorted(into.items(), key=lambda x: tree.order.index(x[0])
                                 if x[0] in tree.order else 99))
        face = " ".join(sorted(tree.faces.get(f, ()))) or "none"
        print(f"  {f}/ (face {face}): {inside} calls inside" + (f"; into {below}" if below else ""))
    for c in loops:
        print(f"  loop: {' '.join(c)}")
    if graph:
        for src in sorted(edges):
            print(f"  {src} -> {' '.join(sorted(edges[src]))}")
    return bad


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    build = args[0] if args else os.path.join(ROOT, "build")
    trees = [Tree(t) for t in TREES]
    declared = [t for t in trees if t.order]
    bad, missing = [], False
    for tree in trees:
        if not tree.order:
            print(f"layers: {tree.name}/: no folders declared yet (GW_{tree.name.upper()}_FOLDERS "
                  f"in {tree.name}/CMakeLists.txt): skipped")
            continue
        b = check(tree, build, [o for o in declared if o is not tree], "--graph" in sys.argv)
        if b is None:
            missing = True
        else:
            bad += b
    for b in bad:
        print(f"layers: {b}")
    print(f"layers: {'ok' if not bad and not missing else str(len(bad)) + ' breaches'}")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
