"""functions.py - PyTorch's module-level forms of Tensor methods: ac.exp(x), ac.sum(x, dim), ...

Each takes a Tensor first, as torch's do, and forwards to the method.
"""
from aicraft.tensor import Tensor

_METHODS = (
    "add", "sub", "mul", "div", "pow", "matmul", "neg",
    "exp", "log", "sqrt", "abs", "sin", "cos", "clamp", "clip",
    "relu", "sigmoid", "tanh", "softmax", "log_softmax",
    "sum", "mean", "max", "min", "amax", "amin", "var", "std", "argmax", "argmin",
    "reshape", "flatten", "transpose", "permute", "squeeze", "unsqueeze",
    "detach", "clone", "numel",
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

__all__ = list(_METHODS)
