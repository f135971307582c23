"""autograd.py - grad mode: ac.no_grad(), ac.enable_grad(), ac.set_grad_enabled(), ac.is_grad_enabled().

Grad mode is per thread in C (ac_set_grad_enabled returns the previous mode), so
each context restores exactly the mode it found. The contexts also work as
function decorators, as PyTorch's do. Also the callbacks Tensor.backward()
runs when it is done (after_backward), and the hooks C's backward walk calls
when a leaf's gradient is final (Tensor.register_post_accumulate_grad_hook).
"""
import functools
import weakref
from typing import Any, Callable, Dict, List, Tuple, TypeVar, cast

from aicraft._ffi import ffi, lib
from aicraft.errors import raise_error

F = TypeVar("F", bound=Callable[..., Any])

# Called, in order, with no arguments, when a Tensor.backward() has filled the
# leaves' grads: DistributedDataParallel averages its gradients over ranks here.
# A callback that is done removes itself.
after_backward: List[Callable[[], None]] = []

# The post-accumulate-grad hooks, by the address of their leaf's AcTensor: (a weak
# reference to the leaf's Tensor, its hooks in order). C calls _py_grad_hook with
# the leaf; an exception a hook raises waits in _hook_errors for
# Tensor.backward, which raises it once C's backward has stopped.
_grad_hooks: Dict[int, Tuple[Any, List[Callable[[Any], None]]]] = {}
_hook_errors: List[BaseException] = []


def _address(ptr: Any) -> int:
    return int(ffi.cast("uintptr_t", ptr))


class RemovableHandle:
    """What register_post_accumulate_grad_hook returns: remove() takes the hook away."""

    __slots__ = ("_key", "_entry", "_hook")

    def __init__(self, key: int, entry: Tuple[Any, List[Callable[[Any], None]]], hook: Callable[[Any], None]):
        self._key, self._entry, self._hook = key, entry, hook

    def remove(self) -> None:
        ref, hooks = self._entry
        if self._hook in hooks:
            hooks.remove(self._hook)
        tensor = ref()
        if not hooks and _grad_hooks.get(self._key) is self._entry:
            del _grad_hooks[self._key]
            if tensor is not None and tensor._ptr != ffi.NULL:   # NULL: its scope ended
                lib.ac_tensor_set_grad_hook(tensor._ptr, ffi.NULL, ffi.NULL)


def add_grad_hook(tensor: Any, ptr: Any, hook: Callable[[Any], None]) -> RemovableHandle:
    """Tensor.register_post_accumulate_grad_hook's work: ptr is tensor's live AcTensor."""
    if not callable(hook):
        raise TypeError("register_post_accumulate_grad_hook: hook must be callable, not %s"
                        % type(hook).__name__)
    key = _address(ptr)
    entry = _grad_hooks.get(key)
    if entry is None or entry[0]() is not tensor:
        if lib.ac_tensor_set_grad_hook(ptr, lib._py_grad_hook, ffi.NULL) < 0:
            raise_error(tensor)

        def forget(ref: Any, key: int = key) -> None:
            if key in _grad_hooks and _grad_hooks[key][0] is ref:
                del _grad_hooks[key]
        entry = _grad_hooks[key] = (weakref.ref(tensor, forget), [])
    entry[1].append(hook)
    return RemovableHandle(key, entry, hook)


@ffi.def_extern()
def _py_grad_hook(leaf: Any, user: Any) -> int:
    entry = _grad_hooks.get(_address(leaf))
    tensor = entry[0]() if entry is not None else None
    if tensor is None:
        return 0
    try:
        for hook in tuple(entry[1]):
            hook(tensor)
    except BaseException as exc:   # noqa: B902 - raised again by Tensor.backward
        _hook_errors.append(exc)
        return -1
    return 0


def raise_hook_error() -> None:
    """Raise the exception a grad hook (or a custom Function's backward) raised during
    the backward that just failed."""
    if _function_errors:
        exc = _function_errors.pop()
        _function_errors.clear()
        raise exc
    if _hook_errors:
        exc = _hook_errors.pop()
        _hook_errors.clear()
        raise exc


class _GradMode:
    """Set grad mode on enter, restore the previous mode on exit."""

    __slots__ = ("_previous",)
    _enabled = True

    def __init__(self) -> None:
        self._previous = []

    def __enter__(self) -> None:
        self._previous.append(lib.ac_set_grad_enabled(self._enabled))
        return None

    def __exit__(self, *exc: Any) -> bool:
        lib.ac_set_grad_enabled(self._previous.pop())
        return False

    def __call__(self, fn: F) -> F:
        if not callable(fn):
            raise TypeError("%s() decorates a function, not %s" % (type(self).__name__, type(fn).__name__))
        mode = type(self)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with mode():
                return fn(*args, **kwargs)
        return cast(F, wrapper)


class no_grad(_GradMode):
    """Ops inside record no graph. `with ac.no_grad():` or `@ac.no_grad()`."""

    __slots__ = ()
    _enabled = False


class enable_grad(_GradMode):
    """Ops inside record the graph again, e.g. inside a no_grad block."""

    __slots__ = ()
    _enabled = True


class set_grad_enabled(_GradMode):
    """Set grad mode now; used as a context, restore the previous mode on exit."""

    __slots__ = ("_mode",)

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, (bool, int)):
            raise TypeError("set_grad_enabled: mode must be a bool, not %s" % type(mode).__name__)
        super().__init__()
        self._mode = bool(mode)
        self._previous.append(lib.ac_set_grad_enabled(self._mode))

    def __enter__(self) -> None:
        return None

    def __call__(self, fn: F) -> F:
        raise TypeError("set_grad_enabled cannot decorate; use no_grad() or enable_grad()")


def is_grad_enabled() -> bool:
    """True when ops on this thread record graphs."""
    return bool(lib.ac_is_grad_enabled())


# ---- scripts helper: custom autograd Functions, autograd.grad, Variable, inference_mode ----

class FunctionCtx:
    """The ctx a Function's forward and backward share: save_for_backward(*tensors) and
    saved_tensors, needs_input_grad (one bool per forward argument),
    mark_non_differentiable(*outputs), set_materialize_grads(value), and any attribute
    the forward sets."""

    def __init__(self):
        self.to_save = ()
        self.needs_input_grad = ()
        self.non_differentiable = ()
        self.materialize_grads = True
        self.dirty = ()

    def save_for_backward(self, *tensors):
        from aicraft.tensor import Tensor
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument %d is of type %s"
                                % (tensors.index(t), type(t).__name__))
        self.to_save = tuple(tensors)

    @property
    def saved_tensors(self):
        return self.to_save

    def mark_non_differentiable(self, *outputs):
        self.non_differentiable = tuple(outputs)

    def mark_dirty(self, *tensors):
        self.dirty = tuple(tensors)

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class _FunctionNode:
    """What one output's node needs in backward: the ctx, the Function, which output."""

    __slots__ = ("ctx", "cls", "index", "outputs", "tensor_slots", "n_args", "keep", "error")

    def __init__(self, ctx, cls, index, outputs, tensor_slots, n_args):
        self.ctx, self.cls, self.index, self.outputs = ctx, cls, index, outputs
        self.tensor_slots, self.n_args = tensor_slots, n_args
        self.keep = []
        self.error = None


_live_nodes = {}            # id -> _FunctionNode, until C releases its node
_NAMES = {}                 # Function class -> its nodes' op name (a C string)
_function_errors = []       # an exception a backward raised, for Tensor.backward to raise


@ffi.def_extern()
def _py_function_release(user):
    _live_nodes.pop(int(ffi.cast("uintptr_t", user)), None)


@ffi.def_extern()
def _py_function_backward(user, grad_out, grad_in, n_inputs):
    from aicraft._scope import Scope, stack
    from aicraft._wrapping import _live, _wrap
    from aicraft.creation import zeros
    from aicraft.tensor import Tensor
    node = _live_nodes.get(int(ffi.cast("uintptr_t", user)))
    if node is None:
        return 0
    opened = [Scope() for _ in range(len(stack()), lib.ac_mem_depth())]
    for scope in opened:
        scope.open()
    try:
        kept = lib.ac_tensor_keep(grad_out)
        if kept == ffi.NULL:
            raise_error()
        grads = []
        for i, shape in enumerate(node.outputs):
            if i == node.index:
                grads.append(_wrap(kept))
            elif shape is None:
                grads.append(None)
            else:   # another output's share comes through its own node: zero here (backward is linear)
                grads.append(zeros(shape) if node.ctx.materialize_grads else None)
        result = node.cls.backward(node.ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) < node.n_args or any(r is not None for r in result[node.n_args:]):
            if len(result) != node.n_args:
                raise RuntimeError("function %sBackward returned an incorrect number of gradients "
                                   "(expected %d, got %d)" % (node.cls.__name__, node.n_args, len(result)))
        for slot, position in enumerate(node.tensor_slots):
            g = result[position] if position < len(result) else None
            if g is None:
                continue
            if not isinstance(g, Tensor):
                raise TypeError("function %sBackward returned a %s as gradient %d, not a Tensor"
                                % (node.cls.__name__, type(g).__name__, position))
            if g.dtype is not dtypes_float32():
                g = g.float()
            node.keep.append(g)
            grad_in[slot] = _live(g)
        return 0
    except BaseException as exc:   # noqa: B902 - raised again by Tensor.backward
        _function_errors.append(exc)
        return -1
    finally:
        if opened:
            opened[0].close()


def dtypes_float32():
    from aicraft import dtypes
    return dtypes.float32


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)


class Function(metaclass=_FunctionMeta):
    """A differentiable operation with its own backward, as torch.autograd.Function:

        class Exp(ac.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y
            @staticmethod
            def backward(ctx, grad):
                y, = ctx.saved_tensors
                return grad * y
        y = Exp.apply(x)

    forward runs without recording a graph; its float32 tensor outputs get a node
    whose backward calls the Function's backward with the output's gradient (one
    node per output: the others' gradients are zeros there, which a backward, linear
    in its gradients, turns into the same sum). Or forward(*args) with
    setup_context(ctx, inputs, output), as torch's newer style. backward returns one
    gradient (or None) per forward argument. create_graph (double backward) through
    a Function is not supported. Up to 7 tensor inputs."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not overridden")

    vjp = backward

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. "
                           "Please use new-style autograd function with static forward method "
                           "(call it with .apply).")

    @classmethod
    def apply(cls, *args, **kwargs):
        from aicraft.tensor import Tensor
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        new_style = cls.setup_context is not Function.setup_context
        with no_grad():
            output = cls.forward(*args, **kwargs) if new_style else cls.forward(ctx, *args, **kwargs)
        if new_style:
            cls.setup_context(ctx, args, output)
        tensor_slots = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not is_grad_enabled() or not any(ctx.needs_input_grad):
            return output
        if len(tensor_slots) > 7:
            raise NotImplementedError("autograd.Function: %s has %d tensor inputs; aicraft supports 7"
                                      % (cls.__name__, len(tensor_slots)))
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        skip = {id(t) for t in ctx.non_differentiable}
        shapes = [tuple(o.shape) if isinstance(o, Tensor) and o.dtype.is_floating_point and id(o) not in skip
                  else None for o in outputs]
        inputs = ffi.new("AcTensor *[]", [args[i]._ptr for i in tensor_slots] or [ffi.NULL])
        results = []
        for index, o in enumerate(outputs):
            if shapes[index] is None:
                results.append(o)
                continue
            node = _FunctionNode(ctx, cls, index, shapes, tensor_slots, len(args))
            key = id(node)
            _live_nodes[key] = node
            name = _NAMES.get(cls)
            if name is None:   # the node keeps the pointer: one C string per Function, kept for good
                name = _NAMES[cls] = ffi.new("char[]", cls.__name__.encode("utf-8"))
            p = lib.ac_function_apply(name, o._ptr, inputs, len(tensor_slots),
                                      lib._py_function_backward, lib._py_function_release,
                                      ffi.cast("void *", key))
            if p == ffi.NULL:
                raise_error(o)
            from aicraft._wrapping import _wrap
            results.append(_wrap(p))
        return results[0] if single else tuple(results)


class InplaceFunction(Function):
    pass


def raise_function_error():
    """Raise the exception a custom Function's backward raised during the backward that just failed."""
    if _function_errors:
        exc = _function_errors.pop()
        _function_errors.clear()
        raise exc


def Variable(data, requires_grad=False, volatile=False):
    """The legacy wrapper: returns data itself (a Tensor), requires_grad set when asked."""
    from aicraft.tensor import Tensor
    if not isinstance(data, Tensor):
        raise TypeError("Variable data has to be a tensor, but got %s" % type(data).__name__)
    if requires_grad:
        data.requires_grad_(True)
    return data


class inference_mode(_GradMode):
    """no_grad for inference: `with ac.inference_mode():` or `@ac.inference_mode()`;
    inference_mode(False) records graphs as usual."""

    __slots__ = ("_mode",)

    def __init__(self, mode=True):
        if callable(mode) and not isinstance(mode, bool):   # used bare: @inference_mode
            raise TypeError("inference_mode: use it as @inference_mode() (with parentheses)")
        super().__init__()
        self._mode = bool(mode)

    def __enter__(self):
        self._previous.append(lib.ac_set_grad_enabled(0 if self._mode else lib.ac_is_grad_enabled()))
        return None

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper


def is_inference_mode_enabled():
    return not is_grad_enabled()


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of outputs with respect to inputs, as torch.autograd.grad: returned, not
    accumulated into .grad (each input's .grad is left as it was). create_graph=True
    (higher-order gradients) is not supported: NotImplementedError."""
    from aicraft.tensor import Tensor
    if create_graph:
        raise NotImplementedError("autograd.grad: create_graph=True (higher-order gradients) is not "
                                  "supported by aicraft")
    if is_grads_batched:
        raise NotImplementedError("autograd.grad: is_grads_batched is not supported by aicraft")
    single_in = isinstance(inputs, Tensor)
    inputs = (inputs,) if single_in else tuple(inputs)
    outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    grad_outputs = tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError("grad requires one grad_output per output: %d outputs, %d grad_outputs"
                           % (len(outputs), len(grad_outputs)))
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError("autograd.grad: inputs must be Tensors, not %s" % type(t).__name__)
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    from aicraft._wrapping import _live
    saved = []
    for t in inputs:   # their own grads are put aside (root copies) and given back after
        p = _live(t)
        old = lib.ac_tensor_keep(p.grad) if p.grad else ffi.NULL
        if p.grad and old == ffi.NULL:
            raise_error(t)
        saved.append(old)
        lib.ac_tensor_zero_grad(p)
    results = []
    try:
        for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
            if not isinstance(out, Tensor):
                raise TypeError("autograd.grad: outputs must be Tensors, not %s" % type(out).__name__)
            if not out.requires_grad:
                raise RuntimeError("element %d of tensors does not require grad and does not have a grad_fn" % i)
            keep = retain_graph or i < len(outputs) - 1
            out.backward(g, retain_graph=keep)
        for t in inputs:
            results.append(None if t.grad is None else t.grad.clone())
    finally:
        for t, old in zip(inputs, saved):
            p = _live(t)
            lib.ac_tensor_zero_grad(p)
            if old != ffi.NULL:
                rc = lib.ac_tensor_set_grad(p, old)
                lib.ac_tensor_free(old)    # set_grad holds its own reference
                if rc < 0:
                    raise_error(t)
    for t, r in zip(inputs, results):
        if r is None and not allow_unused and not materialize_grads:
            raise RuntimeError("One of the differentiated Tensors appears to not have been used in the "
                               "graph. Set allow_unused=True if this is the desired behavior.")
    if materialize_grads:
        from aicraft.creation import zeros_like
        results = [zeros_like(t) if r is None else r for t, r in zip(inputs, results)]
    return tuple(results)
