"""compile.py - ac.compile: run a forward pass or a whole training step from C.

The first call for each input signature runs `fn` eagerly while libac records
the ops it runs into a graph (libac/src/graph.c); later calls with that
signature replay the graph from C in one call (libac/src/replay.c), with no
Python per op; with backend="mlir", parts of it or all of it as native code
(aicraft/_mlir.py). Not here: the graph itself, which C programs use directly.
"""
import functools
import os
import warnings
from typing import Any, Callable, Sequence, Tuple, Union

from aicraft import _trace
from aicraft._ffi import ffi, lib
from aicraft._scope import open_scopes as _open_scopes
from aicraft._wrapping import _live, _wrap, _wrap_scoped
from aicraft.errors import last_error, raise_error
from aicraft.tensor import Tensor
from aicraft.autograd import no_grad

__all__ = ["compile", "export", "load_program"]

_MAX_SIGNATURES = 8
_CONSTANTS = (bool, int, float, str, type(None))
_UNCOMPILED = object()   # a signature whose trace failed: it runs eagerly
_UNFIT = object()        # _Replay.run's answer when the call is not its graph's
_graph_call = lib.ac_graph_call
_set_scalar = lib.ac_graph_set_scalar
_EPOCH = _trace.EPOCH


def compile(fn, example_inputs=None, backend="replay"):
    """Return a callable with fn's signature that runs fn's recorded graph from C.

    fn takes tensors, and tuples and lists of them (numbers and strings are
    allowed too, each value its own signature), and returns a tensor, tuples,
    lists or dicts of tensors nested in any way (an LSTM's output, (h_n, c_n)),
    or None.
    It may be an nn.Module, and may be a whole training step (zero_grad,
    forward, loss, backward, optimizer step): compiling never runs fn by itself,
    so the first call for each input signature (the shapes and dtypes of its
    tensors, grad mode, a Module's training flag) is the step that records the
    graph; up to 8 signatures are kept, past that calls run eagerly with a
    warning. example_inputs (a tensor or a sequence of tensors) only declares
    the shapes to expect.

    As torch.jit.trace, Python control flow is recorded as the path it took on
    the recording call, and Python values computed from tensors (.item()) are
    constants; what changes per call is read per call: the input tensors, an
    optimizer's learning rate and step count, the random generator (dropout).
    What a graph holds fixed is followed by recording again on the next call: a
    parameter, buffer or submodule replaced (a layer quantized in place), a
    Module moved to another device, an optimizer's load_state_dict, a param
    group added or an option other than lr set (betas, momentum).
    Parameters and optimizer state are updated in place; outputs are new
    tensors in the caller's current scope. A call to an op the graph cannot
    replay (indexing by a tensor, rand, an in-place write) makes that signature
    run eagerly, with a warning naming the op. Outputs carry no autograd graph:
    put the backward pass inside fn. Call it from one thread at a time (a
    recorded graph has one set of buffers).

    backend="replay" runs the recorded kernels (the same bits as eager calls);
    backend="mlir" also compiles the graph to native code with the MLIR 19
    tools (aicraft/_mlir.py), within 1e-5 of eager calls, and raises
    RuntimeError naming the tool and its Debian package when one is missing.
    """
    if not callable(fn):
        raise TypeError("compile: fn must be callable, not %s" % type(fn).__name__)
    if backend not in ("replay", "mlir"):
        raise ValueError("compile: unknown backend %r; the backends are 'replay' and 'mlir'" % (backend,))
    if backend == "mlir":
        from aicraft import _mlir   # the emitter and its tools load on first use, not at import
        missing = _mlir.missing_tool()
        if missing:
            raise RuntimeError(missing)
    if example_inputs is not None:
        if isinstance(example_inputs, Tensor):
            example_inputs = (example_inputs,)
        example_inputs = tuple(example_inputs)
        for i, t in enumerate(example_inputs):
            if not isinstance(t, Tensor):
                raise TypeError("compile: example_inputs[%d] is %s, not a Tensor" % (i, type(t).__name__))
    return CompiledFunction(fn, example_inputs, backend)


class CompiledFunction:
    """What ac.compile returns: call it as fn."""

    def __init__(self, fn, example_inputs, backend="replay"):
        self._fn = fn
        self.backend = backend
        self._module = fn if hasattr(fn, "training") and hasattr(fn, "parameters") else None
        self._graphs = {}
        self._last = None        # the _Replay of the last call, when it takes only tensors
        self._fast = None        # its _lean_call
        self._warned_full = False
        self._epoch = _EPOCH[0]  # the graphs fit the modules and optimizers as they were then
        self.example_inputs = example_inputs
        functools.update_wrapper(self, fn.forward if self._module is not None else fn)

    def __call__(self, *args, **kwargs):
        # The fast path: the last signature again, with tensors only (_lean_call).
        fast = self._fast
        if fast is not None and not kwargs:
            result = fast(args)
            if result is not _UNFIT:
                return result
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        if kwargs:
            import inspect   # keyword calls only: loading it at import costs 1.4 MB
            bound = inspect.signature(self._fn).bind(*args, **kwargs)
            args, kwargs = bound.args, bound.kwargs
            if kwargs:
                raise TypeError("compile: keyword-only arguments %s cannot be passed to a compiled "
                                "function" % sorted(kwargs))
        if _trace.recording() is not None:   # inside another compiled function's recording
            return self._fn(*args)
        if self._epoch != _EPOCH[0]:   # a parameter replaced, a state dict loaded: record again
            self._graphs = {}
            self._last = self._fast = None
            self._epoch = _EPOCH[0]
        key, leaves = self._signature(args)
        replay = self._graphs.get(key)
        if replay is not None:
            if replay is _UNCOMPILED:
                return self._fn(*args)
            if _all_tensors(args):
                self._remember(replay)
            inputs = replay.inputs
            for k, i in enumerate(replay.positions):
                inputs[k] = _live(leaves[i])
            return replay.call(leaves, True)
        if len(self._graphs) >= _MAX_SIGNATURES:
            if not self._warned_full:
                self._warned_full = True
                warnings.warn("compile: %s has been called with %d input signatures; new ones run "
                              "eagerly" % (getattr(self, "__name__", "fn"), _MAX_SIGNATURES), stacklevel=3)
            return self._fn(*args)
        return self._record(key, args, leaves)

    def _remember(self, replay):
        self._last = replay
        self._fast = replay.call

    def _signature(self, args):
        """(key, leaves): the signature of args, and their tensors and constants in
        order, those in tuples and lists (an LSTM's (h0, c0)) included."""
        key = [lib.ac_is_grad_enabled()]
        if self._module is not None:
            key.append(self._module.training)
        leaves = []
        for i, a in enumerate(args):
            if isinstance(a, _CONSTANTS):
                key.append((type(a), a))
                leaves.append(a)
            else:
                _describe(i, a, a, key, leaves)
        return tuple(key), leaves

    def _record(self, key, args, leaves):
        epoch = _EPOCH[0]   # a change while recording (a lazy module's parameter): record again
        positions = [i for i, a in enumerate(leaves) if isinstance(a, Tensor)]
        graph = lib.ac_graph_begin()
        if graph == ffi.NULL:
            raise_error()
        graph = ffi.gc(graph, lib.ac_graph_free)
        trace = _trace.Trace(graph)
        _trace.start(trace)
        try:
            for i in positions:
                if lib.ac_graph_input(graph, _live(leaves[i])) < 0:
                    raise_error(leaves[i])
            result = self._fn(*args)
        except BaseException:
            _trace.stop()
            lib.ac_graph_end(graph, ffi.NULL, 0)
            raise
        _trace.stop()
        flat, layout = _flatten(result)
        if flat is None:
            lib.ac_graph_end(graph, ffi.NULL, 0)
            failure = "%s returns %s, not tensors" % (getattr(self, "__name__", "fn"), type(result).__name__)
        elif lib.ac_graph_end(graph, [_live(t) for t in flat], len(flat)) < 0:
            failure = last_error()[1]
        else:
            failure = None
        if failure is None:
            training = self._module.training if self._module is not None else None
            replay = self._graphs[key] = _Replay(graph, positions, layout, len(flat), trace.scalars, training)
            replay.call = _lean_call(replay, self._module, epoch)
            if self.backend == "mlir":
                from aicraft import _mlir
                try:
                    replay.native = _mlir.lower(graph)
                except Exception as e:   # never a failure: the graph runs on libac's replay
                    lib.ac_clear_error()
                    warnings.warn("compile: the mlir backend could not compile this graph, which "
                                  "runs on replay: %s" % (str(e).splitlines() or [type(e).__name__])[0],
                                  stacklevel=4)
            if _all_tensors(args):
                self._remember(replay)
        else:
            lib.ac_clear_error()
            self._graphs[key] = _UNCOMPILED
            warnings.warn("compile: %s; this input signature runs eagerly" % failure, stacklevel=4)
        return result


def _all_tensors(args):
    """Whether args are tensors only, as the fast path takes them (no constants, no
    tuples of tensors)."""
    return all(isinstance(a, Tensor) for a in args)


def _describe(i, arg, a, key, leaves):
    """Add a (argument i, or an item nested in it) to the signature key and its
    tensors to leaves."""
    if isinstance(a, Tensor):
        p = _live(a)
        key.append((p.dtype, tuple(p.shape[0:p.ndim])))
        leaves.append(a)
    elif isinstance(a, (tuple, list)):
        key.append((type(a), len(a)))
        for item in a:
            _describe(i, arg, item, key, leaves)
    else:
        raise TypeError("compile: argument %d is %s%s; a compiled function takes tensors, tuples and lists "
                        "of tensors (and numbers or strings, as constants)"
                        % (i, type(arg).__name__, "" if a is arg else " holding " + type(a).__name__))


class _Replay:
    """One recorded graph and how to call it."""

    __slots__ = ("graph", "positions", "layout", "inputs", "n_inputs", "outputs", "n_outputs", "items",
                 "counters", "cells", "training", "native", "call")

    def __init__(self, graph, positions, layout, n_outputs, scalars, training):
        self.graph = graph
        self.positions = positions
        self.layout = layout
        self.inputs = ffi.new("AcTensor *[]", max(len(positions), 1))
        self.n_inputs = len(positions)
        self.outputs = ffi.new("AcTensor *[]", max(n_outputs, 1))
        self.n_outputs = n_outputs
        self.items, self.counters, self.cells = _per_call(graph, scalars)
        self.training = training
        self.native = None   # the mlir backend's loaded code for the graph's native segments
        self.call = None     # _lean_call's closure


def _lean_call(replay, module, epoch):
    """replay's call, one closure with all it reads bound (a compiled step can
    take 1.3 us, and each attribute lookup costs it about 1%). call(args) sets
    the inputs from args, which must be tensors only, and runs ac_graph_call: it
    returns _UNFIT, having run nothing, when args or the grad mode or the
    Module's mode are not the graph's, or a module or optimizer changed since it
    was recorded (_trace.EPOCH). call(leaves, True) runs the inputs the
    caller set and checked (ac_graph_replay), where a misfit is an error. Either
    way the outputs as fn returns them."""
    graph, layout, training = replay.graph, replay.layout, replay.training
    inputs, n_inputs, outputs, n_outputs = replay.inputs, replay.n_inputs, replay.outputs, replay.n_outputs
    items, counters = replay.items, replay.counters
    replay_checked = lib.ac_graph_replay
    current = _EPOCH

    def call(args, checked=False):
        if not checked:
            if module is not None and module.training != training or current[0] != epoch:
                return _UNFIT
            try:   # one or two inputs unpacked (0.05 us less than the loop); not tensors: the slow path
                if n_inputs == 2:
                    a, b = args
                    inputs[0] = a._ptr
                    inputs[1] = b._ptr
                elif n_inputs == 1:
                    a, = args
                    inputs[0] = a._ptr
                else:
                    k = 0
                    for a in args:
                        inputs[k] = a._ptr
                        k += 1
                    if k != n_inputs:
                        return _UNFIT
            except (AttributeError, TypeError, ValueError, IndexError):
                return _UNFIT
        if items or counters:   # (a param group's lr needs neither: C reads it)
            _set_per_call(graph, items, counters)
        if checked:
            rc = replay_checked(graph, inputs, n_inputs, outputs, n_outputs) or 1   # AC_OK: it ran
        else:
            rc = _graph_call(graph, inputs, n_inputs, outputs, n_outputs)
        if rc != 1:
            if rc == 0:
                return _UNFIT
            raise_error(*args)
        if counters:
            for mapping, key, _, _ in counters:
                mapping[key] += 1
        if layout is Tensor:   # one tensor: wrapped inline, as tensor.py's hot ops do
            p = outputs[0]
            if _open_scopes:
                return _wrap_scoped(p)
            t = Tensor()
            t._ptr = p
            t._scope = None
            return t
        return _unflatten([_wrap(outputs[k]) for k in range(n_outputs)], layout)
    return call


def _set_per_call(graph, items, counters):
    """Set the graph's per-call scalars that Python reads (_per_call)."""
    for item in items:   # [mapping, key, value the graph holds, ((node, attr), ...)]
        value = item[0][item[1]]
        if value != item[2]:
            item[2] = value
            for node, attr in item[3]:
                if _set_scalar(graph, node, attr, value) < 0:
                    raise_error()
    for mapping, key, node, attr in counters:
        if _set_scalar(graph, node, attr, mapping[key] + 1) < 0:
            raise_error()


def _per_call(graph, scalars):
    """Trace.scalars as (items, counters, cells) for _lean_call. A param group's
    value (an optimizer's lr) is bound to the group's C cell, which the graph reads
    itself (cells keeps them alive); another mapping's is an item, read once a call
    whatever the number of parameters it steps: [mapping, key, value, ((node,
    attr), ...)], value the one the graph holds (None where the recorded ones
    differ, so the first call sets them). A counter per scalar, (mapping, key,
    node, attr). LATER scalars are set here."""
    items, counters, cells = {}, [], []
    for node, attr, how, mapping, key, value in scalars:
        if how == _trace.ITEM and isinstance(mapping, _trace.ParamGroup):
            cells.append(mapping.cell(key))
            if lib.ac_graph_bind_scalar(graph, node, attr, cells[-1]) < 0:
                raise_error()
        elif how == _trace.ITEM:
            item = items.setdefault((id(mapping), key), [mapping, key, value, []])
            if item[2] != value:
                item[2] = None
            item[3].append((node, attr))
        elif how == _trace.COUNTER:
            counters.append((mapping, key, node, attr))
        elif lib.ac_graph_set_scalar(graph, node, attr, value) < 0:
            raise_error()
    return [[m, k, v, tuple(targets)] for m, k, v, targets in items.values()], tuple(counters), cells


def _flatten(result):
    """(tensors, layout) for fn's result, tuples, lists and dicts of tensors nested in
    any way (an LSTM's output, (h_n, c_n)); (None, None) when it is not tensors."""
    if result is None:
        return [], None
    flat = []
    layout = _layout(result, flat)
    return (flat, layout) if layout is not None else (None, None)


def _layout(value, flat):
    """value's layout (Tensor, or (container type, keys or None, child layouts)),
    its tensors appended to flat; None when a leaf is not a tensor."""
    if isinstance(value, Tensor):
        flat.append(value)
        return Tensor
    if isinstance(value, dict):
        keys, values = tuple(value), list(value.values())
    elif isinstance(value, (tuple, list)):
        keys, values = None, value
    else:
        return None
    children = []
    for v in values:
        child = _layout(v, flat)
        if child is None:
            return None
        children.append(child)
    return type(value), keys, tuple(children)


def _unflatten(tensors, layout):
    if layout is None:
        return None
    return _rebuild(iter(tensors), layout)


def _rebuild(tensors, layout):
    if layout is Tensor:
        return next(tensors)
    kind, keys, children = layout
    values = [_rebuild(tensors, child) for child in children]
    if keys is not None:
        return dict(zip(keys, values))
    return kind(*values) if hasattr(kind, "_fields") else kind(values)   # a namedtuple takes fields


# ---- ac.export and ac.load_program: one recorded call saved with its weights as
# a program file (libac/src/program.c), which C programs run with libac alone.

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def export(fn: Callable[..., Any], example_inputs: Union[Tensor, Sequence[Tensor]], path: PathLike) -> None:
    """Record one call fn(*example_inputs) and save it, with fn's weights, as a
    program file at path, which C programs run with libac alone
    (ac_program_load, ac_program_run) and ac.load_program runs from Python.

    fn takes tensors and returns a tensor or tuples or lists of tensors (the
    program returns them flattened, in order: an LSTM's (h_n, c_n) become two
    outputs); it may be an nn.Module, which is recorded in eval mode (its mode
    is restored after), as torch.onnx.export does. The call runs under ac.no_grad(): a
    program is a forward pass for inference, so a backward pass or an optimizer
    step in fn is refused, and so is an op a graph cannot record. As
    torch.jit.trace, Python control flow is recorded as the path it took, and
    the program takes inputs of example_inputs' shapes and dtypes only. The
    weights saved are their values when export runs.
    """
    if not callable(fn):
        raise TypeError("export: fn must be callable, not %s" % type(fn).__name__)
    if isinstance(example_inputs, Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise TypeError("export: example_inputs must be a tensor or a tuple of tensors, not %s"
                        % type(example_inputs).__name__)
    for i, t in enumerate(example_inputs):
        if not isinstance(t, Tensor):
            raise TypeError("export: example_inputs[%d] is %s, not a Tensor" % (i, type(t).__name__))
    try:
        c_path = os.fsencode(path)
    except TypeError:
        raise TypeError("export: path must be a str, bytes or os.PathLike, not %s"
                        % type(path).__name__) from None
    module = fn if hasattr(fn, "training") and hasattr(fn, "eval") else None
    training = module.training if module is not None else None
    with no_grad():   # around the whole recording: a program holds no grad mode switch
        graph = lib.ac_graph_begin()
        if graph == ffi.NULL:
            raise_error()
        graph = ffi.gc(graph, lib.ac_graph_free)
        try:
            if module is not None:
                module.eval()
            for t in example_inputs:
                if lib.ac_graph_input(graph, _live(t)) < 0:
                    raise_error(t)
            outputs = _program_outputs(fn(*example_inputs))
        except BaseException:
            lib.ac_graph_end(graph, ffi.NULL, 0)
            raise
        finally:
            if module is not None:
                module.train(training)
        if lib.ac_graph_end(graph, [_live(t) for t in outputs], len(outputs)) < 0:
            raise_error()
    if lib.ac_program_save(graph, c_path) < 0:
        raise_error()


def _program_outputs(result):
    """fn's result's tensors, nested tuples and lists flattened in order."""
    flat, _ = _flatten(result)
    if flat and not isinstance(result, dict):
        return flat
    raise TypeError("export: fn returns %s; a program returns a tensor or a tuple of tensors"
                    % type(result).__name__)


def load_program(path: PathLike) -> "Program":
    """The program file at path (written by ac.export or ac_program_save) as a
    callable: program(*inputs) takes tensors of the recorded shapes and dtypes
    and returns new tensors (one tensor, or a tuple for several), the same bits
    as the eager call. A corrupt or truncated file raises ac.FormatError."""
    return Program(path)


class Program:
    """A loaded program file (ac.load_program): call it with tensors of the shapes
    it was exported for, from one thread at a time."""

    def __init__(self, path: PathLike) -> None:
        try:
            c_path = os.fsencode(path)
        except TypeError:
            raise TypeError("load_program: path must be a str, bytes or os.PathLike, not %s"
                            % type(path).__name__) from None
        program = lib.ac_program_load(c_path)
        if program == ffi.NULL:
            raise_error()
        self._program = ffi.gc(program, lib.ac_program_free)
        self.n_inputs = lib.ac_program_num_inputs(program)
        self.n_outputs = lib.ac_program_num_outputs(program)
        self._inputs = ffi.new("AcTensor *[]", max(self.n_inputs, 1))
        self._outputs = ffi.new("AcTensor *[]", max(self.n_outputs, 1))

    def __call__(self, *inputs: Tensor) -> Union[Tensor, Tuple[Tensor, ...]]:
        if len(inputs) != self.n_inputs:
            raise TypeError("program: %d inputs given, the program takes %d" % (len(inputs), self.n_inputs))
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError("program: input %d is %s, not a Tensor" % (i, type(t).__name__))
            self._inputs[i] = _live(t)
        if lib.ac_program_run(self._program, self._inputs, self.n_inputs, self._outputs, self.n_outputs) < 0:
            raise_error(*inputs)
        outputs = tuple(_wrap(self._outputs[k]) for k in range(self.n_outputs))
        return outputs[0] if self.n_outputs == 1 else outputs
