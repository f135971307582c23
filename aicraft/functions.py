"""functions.py - PyTorch's module-level forms of Tensor methods: ac.exp(x), ac.sum(x, dim), ...

Each takes a Tensor first, as torch's do, and forwards to the method.
"""
from aicraft._ffi import lib
from aicraft._wrapping import _wrap
from aicraft.dtypes import float32
from aicraft.errors import raise_error
from aicraft.tensor import Tensor

_METHODS = (
    "add", "sub", "mul", "div", "pow", "matmul", "neg",
    "exp", "log", "sqrt", "abs", "sin", "cos", "clamp", "clip",
    "relu", "sigmoid", "tanh", "softmax", "log_softmax",
    "sum", "mean", "max", "min", "amax", "amin", "var", "std", "argmax", "argmin",
    "reshape", "flatten", "transpose", "permute", "squeeze", "unsqueeze",
    "detach", "clone", "numel",
    "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "masked_fill",
    "is_floating_point",
    "gather", "index_select", "narrow", "split", "chunk", "mm", "bmm", "norm", "log1p", "cumsum",
    "sort", "argsort", "topk", "t",
)


def _forward(name):
    method = getattr(Tensor, name)

    def function(input, *args, **kwargs):
        if not isinstance(input, Tensor):
            raise TypeError("%s(): argument 'input' must be a Tensor, not %s" % (name, type(input).__name__))
        return method(input, *args, **kwargs)
    function.__name__ = name
    function.__qualname__ = name
    function.__doc__ = method.__doc__
    return function


for _name in _METHODS:
    globals()[_name] = _forward(_name)
del _name



def where(condition, input, other):
    """input where the bool condition is true, else other; input and other may be
    numbers. Broadcasts all three; differentiable in input and other."""
    from aicraft.creation import tensor
    if not isinstance(condition, Tensor):
        raise TypeError("where(): argument 'condition' must be a bool Tensor, not %s"
                        % type(condition).__name__)
    values = [x if isinstance(x, Tensor) else tensor(x, dtype=float32) for x in (input, other)]
    values = [x if x.dtype is float32 else x.float() for x in values]
    p = lib.ac_where(condition._ptr, values[0]._ptr, values[1]._ptr)
    if p:
        return _wrap(p)
    raise_error(condition, *values)


__all__ = list(_METHODS) + ["where"]

# ---- shape, layout and scatter functions (shapes.py) ----
from aicraft.shapes import FUNCTIONS as _SHAPE_FUNCTIONS  # noqa: E402
globals().update(_SHAPE_FUNCTIONS)
__all__ += [n for n in _SHAPE_FUNCTIONS if n not in __all__]
