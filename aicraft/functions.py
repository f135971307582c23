"""functions.py - PyTorch's module-level forms of Tensor methods: ac.exp(x), ac.sum(x, dim), ...

Each takes a Tensor first, as torch's do, and forwards to the method.
"""
from aicraft._ffi import lib
from aicraft._wrapping import _number, _result_code
from aicraft.errors import raise_error
from aicraft.indexing import where
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
    # integer and bool semantics (dtypes)
    "floor_divide", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "bitwise_left_shift", "bitwise_right_shift",
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



def result_type(tensor1, tensor2):
    """The dtype an op on tensor1 and tensor2 (Tensors or Python numbers) gives:
    torch.result_type, asked of libac (ac_result_type)."""
    from aicraft.dtypes import BY_CODE
    for x in (tensor1, tensor2):
        if not isinstance(x, Tensor) and _number(x) is None:
            raise TypeError("result_type(): expected a Tensor or a number, not %s" % type(x).__name__)
    return BY_CODE[_result_code(*[x if isinstance(x, Tensor) else _number(x) for x in (tensor1, tensor2)])]


def promote_types(type1, type2):
    """The smallest dtype both type1 and type2 convert to (torch.promote_types)."""
    from aicraft.dtypes import BY_CODE, dtype
    for t in (type1, type2):
        if not isinstance(t, dtype) or t.code is None:
            raise TypeError("promote_types(): %r is not a dtype aicraft computes with" % (t,))
    code = lib.ac_result_type(type1.code, lib.AC_KIND_TENSOR, type2.code, lib.AC_KIND_TENSOR)
    if code < 0:
        raise_error()
    return BY_CODE[code]



# ---- pointwise math and activations (pointwise.py, activations.py): aicraft.erf, aicraft.maximum,
# aicraft.celu, ... ----
from aicraft import activations as _activations, pointwise as _pointwise  # noqa: E402
_POINTWISE = {**_pointwise.module_functions(), **_activations.module_functions()}
globals().update(_POINTWISE)

__all__ = list(_METHODS) + ["where", "result_type", "promote_types"] + [n for n in _POINTWISE if n not in _METHODS]

# ---- shape, layout and scatter functions (shapes.py) ----
from aicraft.shapes import FUNCTIONS as _SHAPE_FUNCTIONS  # noqa: E402
globals().update(_SHAPE_FUNCTIONS)
__all__ += [n for n in _SHAPE_FUNCTIONS if n not in __all__]
