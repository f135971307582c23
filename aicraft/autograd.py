"""autograd.py - aicraft.autograd: custom autograd Functions, autograd.grad, Variable,
and grad mode (no_grad, enable_grad, set_grad_enabled, inference_mode: _grad.py).
"""
from aicraft import dtypes
from aicraft._ffi import ffi, lib
from aicraft._grad import (_function_errors, enable_grad, inference_mode,
                           is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled)
from aicraft._scope import Scope, stack
from aicraft._wrapping import _live, _wrap
from aicraft.creation import zeros, zeros_like
from aicraft.errors import raise_error
from aicraft.tensor import Tensor

__all__ = ["Function", "FunctionCtx", "InplaceFunction", "Variable", "grad", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled", "inference_mode", "is_inference_mode_enabled"]


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


@ffi.def_extern()
def _py_function_release(user):
    _live_nodes.pop(int(ffi.cast("uintptr_t", user)), None)


@ffi.def_extern()
def _py_function_backward(user, grad_out, grad_in, n_inputs):
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
            if g.dtype is not dtypes.float32:
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
            results.append(_wrap(p))
        return results[0] if single else tuple(results)


class InplaceFunction(Function):
    pass


def Variable(data, requires_grad=False, volatile=False):
    """The legacy wrapper: returns data itself (a Tensor), requires_grad set when asked."""
    if not isinstance(data, Tensor):
        raise TypeError("Variable data has to be a tensor, but got %s" % type(data).__name__)
    if requires_grad:
        data.requires_grad_(True)
    return data


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of outputs with respect to inputs, as torch.autograd.grad: returned, not
    accumulated into .grad (each input's .grad is left as it was). create_graph=True
    (higher-order gradients) is not supported: NotImplementedError."""
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
        results = [zeros_like(t) if r is None else r for t, r in zip(inputs, results)]
    return tuple(results)
