"""_mlir.py - the "mlir" backend of ac.compile: a recorded graph as native code.

After ac.compile records a graph, lower() reads it (ac_graph_node_info and
friends), emits MLIR (affine loops over memrefs, arith, math, func) for the runs
of nodes it covers, lowers that with the MLIR 19 and LLVM 19 tools to a shared
object, loads it in process and registers each run as a native segment of the
graph (libac/src/native.c). Replay then calls the native code for those nodes
and libac's own replay function for every other node.

Covered (aicraft/_mlir_ops.py): the elementwise ops and activations with
broadcasting (a run of them over one shape is one loop nest), sum and mean,
mse_loss, cross-entropy over class indices, softmax and log_softmax over the
last dim, dropout, linear and matmul (libac's SGEMM, called through the kernel
table), the reshape-like views, and the SGD and Adam steps. When a training
step's forward pass before its backward node is made only of those, its backward
pass is derived here and the whole step (zero_grad, forward, backward, updates)
is one native function; otherwise libac runs the backward pass and everything
before it.
Not here: recording and replay (libac/src/graph.c, replay.c), ac.compile itself.
"""
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

from aicraft._ffi import ffi, lib
from aicraft._mlir_ops import F32, PARAMETER, STEPS, _backward, _covered, _Emitter, _is_view, _needs_grad, \
    _step_covered
from aicraft._mlir_text import _Func, _size
from aicraft.errors import raise_error

TOOLS = (("mlir-opt-19", "mlir-19-tools"), ("mlir-translate-19", "mlir-19-tools"),
         ("opt-19", "llvm-19"), ("llc-19", "llvm-19"), ("cc", "gcc"))
PASSES = ("--lower-affine", "--convert-scf-to-cf", "--convert-math-to-llvm", "--convert-math-to-libm",
          "--convert-arith-to-llvm", "--finalize-memref-to-llvm", "--convert-func-to-llvm",
          "--convert-cf-to-llvm", "--reconcile-unrealized-casts")
def missing_tool():
    """A sentence naming the first tool this backend lacks and its Debian package, or None."""
    for tool, package in TOOLS:
        if shutil.which(tool) is None:
            return ("compile: backend 'mlir' needs %s, which is not installed (Debian package %s: "
                    "apt-get install mlir-19-tools llvm-19)" % (tool, package))
    return None


class _Node:
    __slots__ = ("index", "op", "ins", "outs", "attrs")

    def __init__(self, graph, index):
        n_in, n_out, n_attr = ffi.new("int *"), ffi.new("int *"), ffi.new("int *")
        bufs = ffi.new("int[]", lib.AC_GRAPH_MAX_TENSORS)
        attrs = ffi.new("double[]", lib.AC_GRAPH_MAX_ATTRS)
        if lib.ac_graph_node_info(graph, index, n_in, n_out, bufs, n_attr, attrs) < 0:
            raise_error()
        self.index = index
        self.op = ffi.string(lib.ac_graph_node_op(graph, index)).decode()
        self.ins = list(bufs[0:n_in[0]])
        self.outs = list(bufs[n_in[0]:n_in[0] + n_out[0]])
        self.attrs = list(attrs[0:n_attr[0]])


class _Graph:
    """What the emitter reads of a recorded graph."""

    def __init__(self, graph):
        self.nodes = [_Node(graph, k) for k in range(lib.ac_graph_num_nodes(graph))]
        shape = ffi.new("int64_t[8]")
        self.shapes, self.dtypes, self.kinds = [], [], []
        for b in range(lib.ac_graph_num_buffers(graph)):
            ndim = lib.ac_graph_buffer_shape(graph, b, shape)
            self.shapes.append(tuple(shape[0:ndim]))
            self.dtypes.append(lib.ac_graph_buffer_dtype(graph, b))
            self.kinds.append(lib.ac_graph_buffer_kind(graph, b))
        self.outputs = {lib.ac_graph_output_buffer(graph, i) for i in range(lib.ac_graph_num_outputs(graph))}
        self.readers = {}   # buffer -> indices of the nodes that read it
        for node in self.nodes:
            for b in node.ins:
                self.readers.setdefault(b, []).append(node.index)


# ---- planning, building, loading ----------------------------------------------

def _whole_step(g):
    """(forward nodes, backward node, later nodes, zeroed parameters) when the emitter can
    derive the step's backward pass; None otherwise."""
    backs = [n for n in g.nodes if n.op == "backward"]
    if len(backs) != 1:
        return None
    back = backs[0]
    loss = back.ins[0]
    if back.ins[1] != -1 or g.dtypes[loss] != F32 or _size(g.shapes[loss]) != 1:
        return None
    forward, zeroed = [], set()
    for node in g.nodes[:back.index]:
        if node.op == "zero_grad" and g.kinds[node.ins[0]] == PARAMETER:
            zeroed.add(node.ins[0])
        elif _covered(g, node):
            forward.append(node)
        else:
            return None
    later = g.nodes[back.index + 1:]
    need = _needs_grad(g, forward, loss)
    for node in later:
        if node.op in STEPS:
            if not _step_covered(g, node) or node.ins[0] not in need:
                return None
        elif not _covered(g, node):
            return None
    return forward, back, later, zeroed


def _runs(g, start):
    """Maximal runs of covered nodes from node start on."""
    runs, run = [], []
    for node in g.nodes[start:]:
        if _covered(g, node) or (node.op in STEPS and _step_covered(g, node)):
            run.append(node)
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    return [r for r in runs if not all(_is_view(n) for n in r)]


def _emit_segment(g, name, nodes, step, stored):
    """One segment's _Func, and its emitter (which knows what it read unstored)."""
    f = _Func(name, nodes[0].index)
    em = _Emitter(g, f, nodes, stored)
    grads, rest = {}, nodes
    if step is not None:
        forward, back, rest, zeroed = step
        for node in forward:
            em.forward(node)
        _backward(em, forward, back.ins[0], zeroed)
        grads = em.grads
    for node in rest:
        if node.op in STEPS:
            em.step(node, lambda p: grads[p] if p in grads else f.entry(-2 - p, g.shapes[p]))
        else:
            em.forward(node)
    em.close()
    return f, em


def _segment(g, name, nodes, step):
    """Emit a segment, storing only the values read outside the nest that makes them
    (a derived backward pass reads some forward values): a first emission finds them."""
    made = {b for n in nodes for b in n.outs if b >= 0}
    _, probe = _emit_segment(g, name, nodes, step, set())
    return _emit_segment(g, name, nodes, step, probe.unstored_reads | {b for b in made if probe.visible(b)})[0]


def plan(graph):
    """The segments for graph: (first node, node count, _Func)."""
    g = _Graph(graph)
    step = _whole_step(g)
    if step is not None:
        return [(0, len(g.nodes), _segment(g, "seg0", g.nodes, step))]
    backs = [n.index for n in g.nodes if n.op == "backward"]
    runs = _runs(g, backs[-1] + 1 if backs else 0)
    return [(run[0].index, len(run), _segment(g, "seg%d" % i, run, None)) for i, run in enumerate(runs)]


_triple = None
_loaded = {}   # hash of the MLIR text -> the loaded library (kept for the process)


def _host_triple():
    """LLVM's name for this machine (llc's default target)."""
    global _triple
    if _triple is None:
        version = subprocess.run(["llc-19", "--version"], capture_output=True, text=True).stdout
        _triple = next((line.split(":", 1)[1].strip() for line in version.splitlines()
                        if "Default target" in line), "x86_64-pc-linux-gnu")
    return _triple


def _build(text):
    """The loaded shared object for module text, built once per text per process. It
    is built in a temporary directory, removed once the object is loaded (its mapping
    stays), so that nothing is left behind, by a forked worker either."""
    key = hashlib.sha256(text.encode()).hexdigest()[:24]
    if key in _loaded:
        return _loaded[key]
    target = ["-mtriple=" + _host_triple(), "-mcpu=native"]   # without them opt's cost model has no vectors
    with tempfile.TemporaryDirectory(prefix="aicraft-mlir-") as tmp:
        base = os.path.join(tmp, key)
        with open(base + ".mlir", "w") as out:
            out.write(text)
        steps = [["mlir-opt-19", base + ".mlir", *PASSES, "-o", base + ".llvm.mlir"],
                 ["mlir-translate-19", "--mlir-to-llvmir", base + ".llvm.mlir", "-o", base + ".ll"],
                 ["opt-19", "-O3", *target, base + ".ll", "-o", base + ".bc"],
                 ["llc-19", "-O3", *target, "-relocation-model=pic", "-filetype=obj", base + ".bc", "-o",
                  base + ".o"],
                 ["cc", "-shared", base + ".o", "-o", base + ".so", "-lm"]]
        for cmd in steps:
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError("compile: %s failed on the emitted MLIR: %s"
                                   % (cmd[0], done.stderr.strip()[:2000]))
        library = _loaded[key] = ctypes.CDLL(base + ".so")
    return library


def clear_cache():
    """Forget the objects built so far (bench/compile.py times builds from scratch)."""
    _loaded.clear()


def lower(graph):
    """Compile graph's covered runs of nodes to native code and register them as its
    segments; returns what must stay alive while the graph runs (the library)."""
    segments = plan(graph)
    if not segments:
        return None
    text = "module {\n%s\n}\n" % "\n".join(f.text() for _, _, f in segments)
    library = _build(text)
    for first, count, f in segments:
        address = ctypes.cast(getattr(library, f.name), ctypes.c_void_p).value
        fn = ffi.cast("AcNativeFn", address)
        if lib.ac_graph_add_native(graph, first, count, fn, f.entries, len(f.entries), f.scratch * 4) < 0:
            raise_error()
    return library
