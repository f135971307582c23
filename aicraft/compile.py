"""compile.py - ac.compile: run a forward pass or a whole training step from C.

The first call for each input signature runs `fn` eagerly while libac records
the ops it runs into a graph (libac/src/graph.c); later calls with that
signature replay the graph from C in one call (libac/src/replay.c), with no
Python per op; with backend="mlir", parts of it or all of it as native code
(aicraft/_mlir.py). Not here: the graph itself, which C programs use directly.
"""
import functools
import importlib
import inspect
import operator
import os
import warnings
from typing import Any, Callable, Sequence, Tuple, Union

from aicraft import _mlir, _trace
from aicraft._ffi import ffi, lib
from aicraft.errors import last_error, raise_error
from aicraft.tensor import Tensor, _live, _wrap
from aicraft.autograd import no_grad

_tensor_module = importlib.import_module("aicraft.tensor")   # its _open_scopes, read per call

__all__ = ["compile", "export", "load_program"]

_MAX_SIGNATURES = 8
_CONSTANTS = (bool, int, float, str, type(None))
_UNCOMPILED = object()   # a signature whose trace failed: it runs eagerly
_trace_local = _trace._local   # its .trace: the recording on this thread (_trace.recording())


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
    Parameters and optimizer state are updated in place; outputs are new
    tensors in the caller's current scope. A call to an op the graph cannot
    replay (indexing by a tensor, rand, an in-place write) makes that signature
    run eagerly, with a warning naming the op. Outputs carry no autograd graph: put the
    backward pass inside fn.

    backend="replay" runs the recorded kernels (the same bits as eager calls);
    backend="mlir" also compiles the graph to native code with the MLIR 19
    tools (aicraft/_mlir.py), within 1e-5 of eager calls, and raises
    RuntimeError naming the tool and its Debian package when one is missing.
    """
    if not callable(fn):
        raise TypeError("compile: fn must be callable, not %s" % type(fn).__name__)
    if backend not in ("replay", "mlir"):
        raise ValueError("compile: unknown backend %r; the backends are 'replay' and 'mlir'" % (backend,))
    missing = _mlir.missing_tool() if backend == "mlir" else None
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
        self._warned_full = False
        self.example_inputs = example_inputs
        functools.update_wrapper(self, fn.forward if self._module is not None else fn)

    def __call__(self, *args, **kwargs):
        # The fast path: the last signature again, with tensors only (shapes are
        # checked by _Replay.takes); grad mode, the Module's mode and recording here.
        replay = self._last
        if (replay is not None and not kwargs
                and lib.ac_is_grad_enabled() == replay.grad_enabled
                and (self._module is None or self._module.training == replay.training)
                and getattr(_trace_local, "trace", None) is None):
            try:
                ptrs = [a._ptr for a in args]
            except AttributeError:   # not all tensors: the slow path says which
                ptrs = None
            if ptrs is not None and replay.takes(ptrs, args):
                return replay.run(args)
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        if kwargs:
            bound = inspect.signature(self._fn).bind(*args, **kwargs)
            args, kwargs = bound.args, bound.kwargs
            if kwargs:
                raise TypeError("compile: keyword-only arguments %s cannot be passed to a compiled "
                                "function" % sorted(kwargs))
        if _trace.recording() is not None:   # inside another compiled function's recording
            return self._fn(*args)
        key, leaves = self._signature(args)
        replay = self._graphs.get(key)
        if replay is not None:
            if replay is _UNCOMPILED:
                return self._fn(*args)
            if replay.n_inputs == len(args):
                self._last = replay
            return replay(leaves)
        if len(self._graphs) >= _MAX_SIGNATURES:
            if not self._warned_full:
                self._warned_full = True
                warnings.warn("compile: %s has been called with %d input signatures; new ones run "
                              "eagerly" % (getattr(self, "__name__", "fn"), _MAX_SIGNATURES), stacklevel=3)
            return self._fn(*args)
        return self._record(key, args, leaves)

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
            replay = self._graphs[key] = _Replay(graph, positions, layout, len(flat), trace.scalars,
                                                 key[0], training)
            if self.backend == "mlir":
                try:
                    replay.native = _mlir.lower(graph)
                except Exception as e:   # never a failure: the graph runs on libac's replay
                    lib.ac_clear_error()
                    warnings.warn("compile: the mlir backend could not compile this graph, which "
                                  "runs on replay: %s" % (str(e).splitlines() or [type(e).__name__])[0],
                                  stacklevel=4)
            if replay.n_inputs == len(args):
                self._last = replay
        else:
            lib.ac_clear_error()
            self._graphs[key] = _UNCOMPILED
            warnings.warn("compile: %s; this input signature runs eagerly" % failure, stacklevel=4)
        return result


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

    __slots__ = ("graph", "positions", "layout", "inputs", "n_inputs", "taken", "outputs",
                 "n_outputs", "scalars", "grad_enabled", "training", "native")

    def __init__(self, graph, positions, layout, n_outputs, scalars, grad_enabled, training):
        self.graph = graph
        self.positions = positions
        self.layout = layout
        self.inputs = ffi.new("AcTensor *[]", max(len(positions), 1))
        self.n_inputs = len(positions)
        self.taken = ()   # the AcTensor* objects self.inputs holds, once C accepted them
        self.outputs = ffi.new("AcTensor *[]", max(n_outputs, 1))
        self.n_outputs = n_outputs
        self.scalars = _by_getter(scalars)
        self.grad_enabled = grad_enabled
        self.training = training
        self.native = None   # the mlir backend's loaded code for the graph's native segments

    def __call__(self, args):
        inputs = self.inputs
        self.taken = ()
        for k, i in enumerate(self.positions):
            inputs[k] = _live(args[i])
        return self.run(args)

    def takes(self, ptrs, args):
        """Whether replay takes these inputs (args' AcTensor*, one per argument);
        on yes they are in self.inputs. The very objects C accepted last time
        pass unasked: a live tensor's shape never changes, and a dead one's
        pointer object is another (NULL)."""
        taken = self.taken
        if len(ptrs) == len(taken) and all(map(operator.is_, ptrs, taken)):
            return True
        n = len(ptrs)
        if n != self.n_inputs:
            return False
        self.taken = ()
        try:
            self.inputs[0:n] = ptrs
        except TypeError:   # an object with a _ptr that is not a tensor's
            return False
        accepted = lib.ac_graph_accepts(self.graph, self.inputs, n)
        if accepted < 0:
            raise_error(*args)
        if accepted:
            self.taken = ptrs
        return accepted == 1

    def run(self, args):
        """Replay on self.inputs, set from args; the outputs as fn returns them."""
        graph = self.graph
        for scalar in self.scalars:
            value = scalar[0]()
            if value != scalar[1]:
                scalar[1] = value
                for node, attr in scalar[2]:
                    if lib.ac_graph_set_scalar(graph, node, attr, value) < 0:
                        raise_error()
        outputs = self.outputs
        if lib.ac_graph_replay(graph, self.inputs, self.n_inputs, outputs, self.n_outputs) < 0:
            raise_error(*args)
        if self.layout is Tensor:   # one tensor: wrapped inline, as tensor.py's hot ops do
            p = outputs[0]
            if _tensor_module._open_scopes:
                return _wrap(p)
            t = Tensor()
            t._ptr = p
            t._scope = None
            return t
        return _unflatten([_wrap(outputs[k]) for k in range(self.n_outputs)], self.layout)


def _by_getter(scalars):
    """Trace.scalars as [getter, value, ((node, attr), ...)], one per getter, so that
    a call reads each getter once (an optimizer binds one lr getter a group). value
    is the one the graph holds; None (set on the first call) where they differ."""
    bound = {}
    for node, attr, getter, value in scalars:
        entry = bound.setdefault(getter, [getter, value, []])
        if entry[1] != value:
            entry[1] = None
        entry[2].append((node, attr))
    return [[getter, value, tuple(targets)] for getter, value, targets in bound.values()]


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
    outputs); it may be an nn.Module, which is recorded in eval mode (its mode is restored
    after), as torch.onnx.export does. The call runs under ac.no_grad(): a
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
