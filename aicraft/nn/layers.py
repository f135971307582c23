"""layers.py - the layers of aicraft.nn: Linear, activations, Flatten, Identity,
and the containers Sequential and ModuleList.

Each forward is one C call and a wrap: per-call Python cost is what makes small
models fast, so there is no hook machinery and no argument juggling here.
"""
import math
from collections import OrderedDict
from typing import Any

from aicraft._args import _as_dim, _as_int
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _wrap
from aicraft.creation import zeros
from aicraft.errors import raise_error
from aicraft.nn import init
from aicraft.nn.module import Module, Parameter, factory_kwargs

__all__ = ["Linear", "ReLU", "Sigmoid", "Tanh", "GELU", "Softmax", "LogSoftmax", "Flatten",
           "Identity", "Sequential", "ModuleList"]

_NULL = ffi.NULL


def _not_a_tensor(layer, input):
    return TypeError("%s.forward: input must be a Tensor, not %s"
                     % (type(layer).__name__, type(input).__name__))


class Linear(Module):
    """y = x W^T + b for x of shape (..., in_features); W is (out_features, in_features).

    Initialised as PyTorch's: W and b uniform in [-1/sqrt(in), 1/sqrt(in)]."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features = _as_int(in_features, "Linear: in_features")
        self.out_features = _as_int(out_features, "Linear: out_features")
        if self.in_features < 0 or self.out_features < 0:
            raise ValueError("Linear: in_features and out_features must be >= 0, got %d and %d"
                             % (self.in_features, self.out_features))
        self.weight = Parameter(zeros(self.out_features, self.in_features))
        if bias:
            self.bias = Parameter(zeros(self.out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        # kaiming_uniform_ with a = sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        bias = self.bias
        try:
            p = lib.ac_linear(input._ptr, self.weight._ptr, _NULL if bias is None else bias._ptr)
        except AttributeError:
            raise _not_a_tensor(self, input) from None
        if p:
            return _wrap(p)
        raise_error(input, self.weight, bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (
            self.in_features, self.out_features, self.bias is not None)


def _unary_forward(c_fn):
    """forward(self, input) for a layer that applies one C op to its input."""
    def forward(self, input):
        try:
            p = c_fn(input._ptr)
        except AttributeError:
            raise _not_a_tensor(self, input) from None
        if p:
            return _wrap(p)
        raise_error(input)
    return forward


class ReLU(Module):
    """max(x, 0), elementwise. `inplace` is accepted for PyTorch code and changes
    nothing: the result is always a new tensor."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    forward = _unary_forward(lib.ac_relu)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    """1 / (1 + exp(-x)), elementwise."""

    forward = _unary_forward(lib.ac_sigmoid)


class Tanh(Module):
    """tanh(x), elementwise."""

    forward = _unary_forward(lib.ac_tanh)


class GELU(Module):
    """GELU, exact (erf) form; approximate='tanh' is not offered."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate != "none":
            raise ValueError("GELU: only approximate='none' is supported, got %r" % (approximate,))
        self.approximate = approximate

    forward = _unary_forward(lib.ac_gelu)

    def extra_repr(self):
        return "approximate='none'"


def _legacy_softmax_dim(ndim):
    # PyTorch's rule when no dim is given.
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """exp(x) / sum(exp(x)) along dim."""

    _c_fn = staticmethod(lib.ac_softmax)

    def __init__(self, dim=None):
        super().__init__()
        self.dim = None if dim is None else _as_dim(dim)

    def forward(self, input):
        dim = self.dim
        try:
            if dim is None:
                dim = _legacy_softmax_dim(input.dim())
            p = self._c_fn(input._ptr, dim)
        except AttributeError:
            raise _not_a_tensor(self, input) from None
        if p:
            return _wrap(p)
        raise_error(input)

    def extra_repr(self):
        return "dim=%s" % (self.dim,)


class LogSoftmax(Softmax):
    """log(softmax(x)) along dim, computed stably."""

    _c_fn = staticmethod(lib.ac_log_softmax)


class Flatten(Module):
    """Merge dims start_dim..end_dim into one (by default all but the batch dim)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = _as_dim(start_dim)
        self.end_dim = _as_dim(end_dim)

    def forward(self, input):
        try:
            p = lib.ac_flatten(input._ptr, self.start_dim, self.end_dim)
        except AttributeError:
            raise _not_a_tensor(self, input) from None
        if p:
            return _wrap(p)
        raise_error(input)

    def extra_repr(self):
        return "start_dim=%d, end_dim=%d" % (self.start_dim, self.end_dim)


class Identity(Module):
    """Returns its input; arguments are accepted and ignored, as PyTorch's."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


# ---- containers ----------------------------------------------------------------

def _index(index, n, what):
    i = _as_int(index, what + " index")
    if not -n <= i < n:
        raise IndexError("index %d is out of range for a %s of length %d" % (i, what, n))
    return i % n


class Sequential(Module):
    """Modules applied in order: Sequential(a, b, c)(x) is c(b(a(x))).
    Also Sequential(OrderedDict(name=module, ...)) for named children."""

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[_index(index, len(self._modules), "Sequential")]

    def __setitem__(self, index, module):
        key = list(self._modules)[_index(index, len(self._modules), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, index):
        keys = list(self._modules)
        doomed = keys[index] if isinstance(index, slice) else [keys[_index(index, len(keys), "Sequential")]]
        for key in doomed:
            delattr(self, key)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    """A list of modules whose parameters the parent module sees. Has no forward."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _renumber(self, modules):
        for key in list(self._modules):
            delattr(self, key)
        for i, module in enumerate(modules):
            self.add_module(str(i), module)

    def __getitem__(self, index):
        modules = list(self._modules.values())
        if isinstance(index, slice):
            return ModuleList(modules[index])
        return modules[_index(index, len(modules), "ModuleList")]

    def __setitem__(self, index, module):
        setattr(self, str(_index(index, len(self._modules), "ModuleList")), module)

    def __delitem__(self, index):
        modules = list(self._modules.values())
        if isinstance(index, slice):
            del modules[index]
        else:
            del modules[_index(index, len(modules), "ModuleList")]
        self._renumber(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._renumber(modules)
