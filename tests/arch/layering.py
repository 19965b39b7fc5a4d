#!/usr/bin/env python3
"""Checks the component rules of docs/ARCHITECTURE.md on the source tree and on the built objects.

usage: layering.py SRC_DIR OBJ_DIR
       layering.py --self-test        (the loop finder of rule 4 on made-up graphs)

1. Includes: a file of component A includes, from another component B, only B's interface
   headers (INTERFACE below); B must be one A may use (USES below).
2. Symbols: every function or table an object of A uses from another component's objects belongs to
   a component A may use. This catches what includes cannot: a table in core that points at a
   function defined in quant is a dependency of core on quant even though no header says so.
3. USES itself has no cycle.
4. Inside a component listed in NO_FILE_CYCLES, no two files call each other in a loop: the
   file-level graph "a.c uses a symbol b.c defines" (from nm of the objects) has no cycle. A loop
   means neither file can be read, tested or replaced without the other.
5. The front ends: cli/ and python/ include only public headers (lofp/*.h) and files of their own
   folder; fuzz/ includes nothing of cli/; no Python file of the package starts a process (it never
   runs the lofp command).
6. The CUDA backend: cuda/ includes public headers, files of its own folder and, of src/, only
   core/element_codec.h (the element codecs the CPU library and the kernels share).
Exits 1 and names each violation (file, include or symbol) when a rule is broken.
"""
import os
import re
import subprocess
import sys

# What each component may use (besides the public headers, which everyone may include).
USES = {
    "core": set(),
    "runtime": {"core"},
    "quant": {"core", "runtime"},
    "layout": {"core"},
    "io": {"core"},
    "gemm": {"core", "runtime", "quant", "layout"},
    "kv": {"core", "runtime", "quant"},
    "checkpoint": {"core", "quant", "layout", "io"},
    "vectors": {"core", "quant", "layout", "io"},
}
# The headers a component offers the others; everything else in its folder is its own business.
INTERFACE = {
    "core/core.h", "core/traits.h", "core/element_codec.h",
    "runtime/cpu_features.h", "runtime/threadpool.h",
    "io/atomic.h", "io/json.h", "io/sbuf.h",
}


# Components whose files must not call each other in a loop (rule 4).
NO_FILE_CYCLES = {"checkpoint"}


def component_of(rel):
    return rel.split("/", 1)[0]


def check_acyclic(errors):
    state = {}

    def visit(c, path):
        if state.get(c) == 1:
            errors.append("component cycle: " + " -> ".join(path + [c]))
            return
        if state.get(c) == 2:
            return
        state[c] = 1
        for d in sorted(USES[c]):
            visit(d, path + [c])
        state[c] = 2

    for c in USES:
        visit(c, [])


def check_includes(src, errors):
    inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    nfiles = 0
    for d, _, files in os.walk(src):
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            nfiles += 1
            path = os.path.join(d, f)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            comp = component_of(rel)
            if comp not in USES:
                errors.append(f"{rel}: not inside a known component folder ({', '.join(USES)})")
                continue
            text = open(path, encoding="utf-8").read()
            for inc in inc_re.findall(text):
                if inc.startswith("lofp/"):
                    continue
                if "/" not in inc:  # same folder as the including file
                    if not os.path.exists(os.path.join(d, inc)):
                        errors.append(f"{rel}: includes \"{inc}\", which is not beside it")
                    continue
                target = inc
                tcomp = component_of(target)
                if not os.path.exists(os.path.join(src, target)):
                    errors.append(f"{rel}: includes \"{inc}\", which does not exist under src/")
                    continue
                if tcomp == comp:
                    continue
                if tcomp not in USES[comp]:
                    errors.append(f"{rel}: component {comp} includes {inc} of {tcomp}, which it may not use")
                elif target not in INTERFACE:
                    errors.append(f"{rel}: includes {inc}, an internal header of {tcomp}")
    return nfiles


INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
RUNS_CLI_RE = re.compile(r'\b(subprocess|os\.exec\w*|os\.system|os\.spawn\w*)\b|LOFP_CLI')


def front_end_errors(rel, text, beside):
    """Rule 5, the front ends: a cli/ or python/ file includes public headers (lofp/...) and files
    of its own folder only, never a library-internal src/ header; a fuzz/ harness includes nothing
    of cli/; no Python file of the package starts a process (the package never runs the lofp
    command, so the two front ends cannot call each other). `beside(name)` says whether a bare
    include exists in the file's folder."""
    errors = []
    top = rel.split("/", 1)[0]
    if rel.endswith(".py"):
        if top == "python" and RUNS_CLI_RE.search(text):
            errors.append(f"{rel}: starts a process (the package may not run the lofp command)")
        return errors
    for inc in INCLUDE_RE.findall(text):
        if top in ("cli", "python"):
            if not inc.startswith("lofp/") and not ("/" not in inc and beside(inc)):
                errors.append(f"{rel}: includes \"{inc}\"; a front end uses the public headers (lofp/*.h) only")
        elif top == "fuzz" and (inc.startswith("cli/") or "../cli/" in inc or inc in CLI_HEADERS):
            errors.append(f"{rel}: includes \"{inc}\" of the lofp command; fuzz harnesses use the library")
        elif top == "cuda":
            if not (inc.startswith("lofp/") or inc in CUDA_SHARED or ("/" not in inc and beside(inc))):
                errors.append(f"{rel}: includes \"{inc}\"; cuda/ uses the public headers, its own "
                              f"files and, of src/, only {', '.join(sorted(CUDA_SHARED))}")
    return errors


# The library headers the CUDA backend compiles too (rule 6).
CUDA_SHARED = {"core/element_codec.h"}


CLI_HEADERS = set()


def check_front_ends(root, errors):
    CLI_HEADERS.update(f for f in os.listdir(os.path.join(root, "cli")) if f.endswith(".h"))
    for top in ("cli", "python", "fuzz", "cuda"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if not x.startswith(".") and x != "__pycache__"]
            for f in files:
                if not f.endswith((".c", ".h", ".py", ".cu", ".cuh")):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                text = open(path, encoding="utf-8").read()
                errors.extend(front_end_errors(rel, text, lambda inc, d=d: os.path.exists(os.path.join(d, inc))))

def check_symbols(obj, errors):
    objs = []
    for d, _, files in os.walk(obj):
        for f in files:
            if f.endswith(".o"):
                p = os.path.join(d, f)
                rel = os.path.relpath(p, obj).replace(os.sep, "/")
                # CMake puts src/<component>/x.c at <obj>/src/<component>/x.c.o
                parts = rel.split("/")
                if "src" in parts:
                    parts = parts[parts.index("src") + 1:]
                if parts and parts[0] in USES:
                    objs.append((parts[0], "/".join(parts), p))
    if not objs:
        errors.append(f"no object files of the library under {obj}")
        return 0
    defined, used = {}, []
    for comp, rel, p in objs:
        out = subprocess.run(["nm", p], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[1] in "TDBRV":
                defined[fields[2]] = comp
            elif len(fields) == 2 and fields[0] == "U":
                used.append((comp, rel, fields[1]))
    for comp, rel, sym in used:
        owner = defined.get(sym)
        if owner and owner != comp and owner not in USES[comp]:
            errors.append(f"{rel}: uses {sym} from component {owner}, which {comp} may not use")
    return len(objs)


def file_cycles(file_defs, file_uses):
    """Strongly connected components with more than one file (Tarjan), each sorted, plus one
    concrete loop through each for the message. file_defs: file -> set of symbols it defines;
    file_uses: file -> set of symbols it uses."""
    owner = {}
    for f, syms in file_defs.items():
        for s in syms:
            owner[s] = f
    edges = {f: {} for f in file_defs}
    for f, syms in file_uses.items():
        for s in syms:
            g = owner.get(s)
            if g and g != f:
                edges.setdefault(f, {}).setdefault(g, s)
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                strong(w)
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
                sccs.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    out = []
    for comp in sccs:
        members = set(comp)
        # a loop from the first file back to itself inside the component (breadth-first)
        start = comp[0]
        prev, frontier, found = {start: None}, [start], None
        while frontier and not found:
            nxt = []
            for v in frontier:
                for w in sorted(edges.get(v, {})):
                    if w not in members:
                        continue
                    if w == start:
                        found = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found:
                    break
            frontier = nxt
        path, v = [], found
        while v is not None:
            path.append(v)
            v = prev[v]
        path.reverse()
        path.append(start)
        steps = [f"{a} uses {edges[a][b]} of {b}" for a, b in zip(path, path[1:])]
        out.append((comp, ", ".join(steps)))
    return out


def check_file_cycles(obj, errors):
    """Rule 4, on the objects of one library target (the shared and static ones hold the same)."""
    per_target = {}
    for d, _, files in os.walk(obj):
        for f in files:
            if not f.endswith(".o"):
                continue
            p = os.path.join(d, f)
            parts = os.path.relpath(p, obj).replace(os.sep, "/").split("/")
            if "src" not in parts:
                continue
            i = parts.index("src")
            rest = parts[i + 1:]
            if len(rest) != 2 or rest[0] not in NO_FILE_CYCLES:
                continue
            target = "/".join(parts[:i])
            per_target.setdefault(target, {}).setdefault(rest[0], []).append((rest[1][:-2], p))
    if not per_target:
        return
    target = sorted(per_target)[0]
    for comp, objs in sorted(per_target[target].items()):
        defs, uses = {}, {}
        for name, p in objs:
            out = subprocess.run(["nm", p], capture_output=True, text=True, check=True).stdout
            defs[name], uses[name] = set(), set()
            for line in out.splitlines():
                fields = line.split()
                if len(fields) == 3 and fields[1] in "TDBRV":
                    defs[name].add(fields[2])
                elif len(fields) == 2 and fields[0] == "U":
                    uses[name].add(fields[1])
        for members, loop in file_cycles(defs, uses):
            errors.append(f"{comp}: files call each other in a loop ({', '.join(members)}): {loop}")


def self_test():
    """Rule 4's loop finder on the loops the checkpoint files had (ck_read.c <-> ck_convert.c through
    the staging functions, ck_json.c <-> ck_util.c), on a three-file loop and on a chain."""
    old = file_cycles({"ck_read.c": {"lofp_ckpt_close"}, "ck_convert.c": {"lofp_ck_stage_dir"}, "ck_util.c": {"lofp_ck_strdup"}},
                      {"ck_read.c": {"lofp_ck_stage_dir", "lofp_ck_strdup"}, "ck_convert.c": {"lofp_ckpt_close", "lofp_ck_strdup"},
                       "ck_util.c": set()})
    assert [m for m, _ in old] == [["ck_convert.c", "ck_read.c"]], old
    assert "lofp_ck_stage_dir" in old[0][1] and "lofp_ckpt_close" in old[0][1], old
    three = file_cycles({"a.c": {"fa"}, "b.c": {"fb"}, "c.c": {"fc"}}, {"a.c": {"fb"}, "b.c": {"fc"}, "c.c": {"fa"}})
    assert [m for m, _ in three] == [["a.c", "b.c", "c.c"]] and three[0][1].count(" uses ") == 3, three
    chain = file_cycles({"a.c": {"fa"}, "b.c": {"fb"}, "c.c": {"fc"}}, {"a.c": {"fb", "fc"}, "b.c": {"fc"}, "c.c": set()})
    assert chain == [], chain
    beside = lambda inc: inc in ("cli.h", "qtensor.h")
    assert front_end_errors("cli/cmd_x.c", '#include "lofp/gemm.h"\n#include "cli.h"\n', beside) == []
    assert len(front_end_errors("cli/cmd_x.c", '#include "gemm/gemm_internal.h"\n', beside)) == 1
    assert len(front_end_errors("python/_lofp.c", '#include "quant/dispatch.h"\n', beside)) == 1
    assert len(front_end_errors("python/lofp/__main__.py", "import subprocess\n", beside)) == 1
    assert front_end_errors("tests/python/t.py", "import subprocess\n", beside) == []
    CLI_HEADERS.add("qtensor.h")
    assert len(front_end_errors("fuzz/fuzz_q.c", '#include "qtensor.h"\n', beside)) == 1
    assert len(front_end_errors("fuzz/fuzz_q.c", '#include "../cli/cli.h"\n', beside)) == 1
    assert front_end_errors("cuda/q.cu", '#include "core/element_codec.h"\n#include "lofp/lofp.h"\n', beside) == []
    assert len(front_end_errors("cuda/q.cu", '#include "core/traits.h"\n', beside)) == 1
    print("layering: self-test ok")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    src, obj = sys.argv[1], sys.argv[2]
    errors = []
    check_acyclic(errors)
    nfiles = check_includes(src, errors)
    nobjs = check_symbols(obj, errors)
    check_file_cycles(obj, errors)
    check_front_ends(os.path.dirname(os.path.abspath(src)), errors)
    for e in errors:
        print("layering:", e)
    print(f"layering: {nfiles} source files, {nobjs} objects, {len(USES)} components: "
          + ("FAILED" if errors else "ok"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
