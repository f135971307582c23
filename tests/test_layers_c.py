"""libac's layers run one way: no file calls into a layer above its own, no files
call each other round a cycle, and no file includes a header of a layer above.

The layers are the table at the top of libac/src/internal.h, read here, so the
documentation and the check cannot drift. Calls are read from the compiled
objects (nm: what each defines, what each leaves undefined), which is exact:
make test builds build/obj (make lib) before pytest; without it, the objects the
Python extension was built from are read instead."""
import glob
import os
import re
import shutil
import subprocess

import pytest

from graph_cycles import strongly_connected

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "libac", "src")
BUILD = os.path.join(ROOT, "build")


# ---- the table -----------------------------------------------------------------

def read_layers(text):
    """[(layer, [entry, ...]), ...] bottom up, from internal.h's header comment:
    the block from the first line ' *   name   entries...' to the next empty
    comment line; a more indented line continues the layer above it."""
    lines = text[: text.index("*/")].splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^ \*   \w+\s+\S", line))
    layers = []
    for line in lines[start:]:
        if line.strip() == "*":
            break
        m = re.match(r"^ \*   (\w+)\s+(\S.*)$", line)
        if m:
            layers.append((m.group(1), m.group(2).split()))
        else:
            layers[-1][1].extend(line[2:].split())
    return layers


def layer_of(path, layers):
    """(index, name) of path's layer: the entry naming the file, else the
    deepest folder entry above it; None when the table does not place it."""
    best = None
    for i, (name, entries) in enumerate(layers):
        for e in entries:
            if e == path:
                return i, name
            if e.endswith("/") and path.startswith(e) and (best is None or len(e) > best[0]):
                best = (len(e), (i, name))
    return best[1] if best else None


def layers():
    with open(os.path.join(SRC, "internal.h")) as f:
        return read_layers(f.read())


# ---- the graphs ----------------------------------------------------------------

def object_sets():
    """{source path (relative to libac/src): object file} for the objects of the
    newest build: build/obj (and build/cuda's kernels when that build was a CUDA
    one), else the Python extension's."""
    found = {}
    obj = os.path.join(BUILD, "obj")
    if os.path.isdir(obj):
        for o in glob.glob(os.path.join(obj, "**", "*.o"), recursive=True):
            found[os.path.relpath(o, obj)[:-2] + ".c"] = o
        flag = os.path.join(BUILD, "cuda.flag")
        if os.path.exists(flag) and open(flag).read().strip() == "1":
            cuda = os.path.join(BUILD, "cuda")
            for o in glob.glob(os.path.join(cuda, "kernels", "**", "*.o"), recursive=True):
                found[os.path.relpath(o, cuda)[:-2] + ".cu"] = o
    else:
        for temp in glob.glob(os.path.join(BUILD, "temp.*", "libac", "src")):
            for o in glob.glob(os.path.join(temp, "**", "*.o"), recursive=True):
                found[os.path.relpath(o, temp)[:-2] + ".c"] = o
    # an object whose source is gone is left over from an older build
    return {src: o for src, o in found.items() if os.path.exists(os.path.join(SRC, src))}


def call_edges(objects):
    """{file: {callee file: {symbol, ...}}}: file uses a symbol callee defines."""
    defined, used = {}, {}
    for src, o in sorted(objects.items()):
        out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        used[src] = set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] in "Uw":
                used[src].add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRCVW":
                defined.setdefault(parts[2], src)
    edges = {}
    for src, symbols in used.items():
        edges[src] = {}
        for s in symbols:
            owner = defined.get(s)
            if owner and owner != src:
                edges[src].setdefault(owner, set()).add(s)
    return edges


def include_edges():
    """{file: {header, ...}} for libac's sources and headers (paths relative to
    libac/src), resolved as the build does: beside the file, else from libac/src."""
    edges = {}
    for path in sorted(glob.glob(os.path.join(SRC, "**", "*.*"), recursive=True)):
        rel = os.path.relpath(path, SRC)
        if not rel.endswith((".c", ".h", ".cu")):
            continue
        with open(path) as f:
            names = re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.M)
        edges[rel] = set()
        for name in names:
            for candidate in (os.path.join(os.path.dirname(rel), name), name):
                if os.path.exists(os.path.join(SRC, candidate)):
                    edges[rel].add(os.path.normpath(candidate))
                    break
    return edges


# ---- the checks ----------------------------------------------------------------

def upward(edges, table, what):
    """One line per edge from a file to a file of a higher layer."""
    problems = []
    for src in sorted(edges):
        mine = layer_of(src, table)
        for dst in sorted(edges[src]):
            theirs = layer_of(dst, table)
            if mine and theirs and theirs[0] > mine[0]:
                detail = edges[src][dst] if isinstance(edges[src], dict) else None
                problems.append("%s (layer %s) %s %s (layer %s)%s" % (
                    src, mine[1], what, dst, theirs[1],
                    ": " + " ".join(sorted(detail)) if detail else ""))
    return problems


def cycles(edges):
    """The strongly connected components of more than one file, each sorted."""
    return strongly_connected(edges)


def cycle_report(edges, component):
    """A cycle's files, each with the calls it makes to the others in it."""
    lines = ["a cycle of %d files:" % len(component)]
    for src in component:
        for dst in component:
            if dst in edges.get(src, {}):
                lines.append("  %s -> %s: %s" % (src, dst, " ".join(sorted(edges[src][dst]))))
    return "\n".join(lines)


# ---- the tests -----------------------------------------------------------------

def test_the_table_places_every_file():
    table = layers()
    assert [name for name, _ in table] == ["memory", "tensors", "kernels", "ops", "autograd", "graphs"]
    unplaced = [f for f in include_edges() if layer_of(f, table) is None]
    assert not unplaced, "not in internal.h's layer table: " + ", ".join(unplaced)


def test_calls_run_down_and_round_no_cycle():
    if shutil.which("nm") is None:
        pytest.skip("needs nm (binutils)")
    objects = object_sets()
    if not objects:
        pytest.skip("no libac objects: run make lib (make test builds them before pytest)")
    edges = call_edges(objects)
    table = layers()
    problems = upward(edges, table, "calls into")
    problems += [cycle_report(edges, c) for c in cycles(edges)]
    assert not problems, "\n".join(problems)


def test_kernels_know_no_graph():
    """The kernels layer may read tensors (elem_get) but not the recorder below it."""
    objects = object_sets()
    if shutil.which("nm") is None or not objects:
        pytest.skip("needs nm and libac's objects (make lib)")
    edges = call_edges(objects)
    table = layers()
    calls = ["%s -> graph.c: %s" % (src, " ".join(sorted(edges[src]["graph.c"])))
             for src in sorted(edges) if layer_of(src, table)[1] == "kernels" and "graph.c" in edges[src]]
    assert not calls, "\n".join(calls)


def test_includes_run_down():
    problems = upward({f: dict.fromkeys(h) for f, h in include_edges().items()}, layers(), "includes")
    assert not problems, "\n".join(problems)


def test_the_check_finds_an_upward_call():
    table = layers()
    edges = {"tensor.c": {"ops/output.c": {"op_output"}}, "ops/output.c": {"tensor.c": {"tensor_create"}}}
    problems = upward(edges, table, "calls into")
    assert problems == ["tensor.c (layer tensors) calls into ops/output.c (layer ops): op_output"]
    assert cycles(edges) == [["ops/output.c", "tensor.c"]]
    assert "tensor.c -> ops/output.c: op_output" in cycle_report(edges, cycles(edges)[0])


def test_the_check_finds_a_cycle_within_a_layer():
    edges = {"ops/a.c": {"ops/b.c": {"f"}}, "ops/b.c": {"ops/c.c": {"g"}}, "ops/c.c": {"ops/a.c": {"h"}},
             "ops/d.c": {"ops/a.c": {"f"}}}
    assert upward(edges, layers(), "calls into") == []
    assert cycles(edges) == [["ops/a.c", "ops/b.c", "ops/c.c"]]


def test_the_table_reads_folders_and_exceptions():
    table = read_layers("/*\n * Layers:\n *\n *   low    a.c kernels/cuda/runtime.cu\n"
                        " *          b.h\n *   high   kernels/\n *\n * kernels/x.c\n */\n")
    assert table == [("low", ["a.c", "kernels/cuda/runtime.cu", "b.h"]), ("high", ["kernels/"])]
    assert layer_of("kernels/cuda/runtime.cu", table) == (0, "low")
    assert layer_of("kernels/cuda/gemm.cu", table) == (1, "high")
    assert layer_of("b.h", table) == (0, "low")
    assert layer_of("c.c", table) is None
