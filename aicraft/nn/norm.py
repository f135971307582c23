"""norm.py - nn.LayerNorm and its functional form layer_norm (aicraft.nn.functional
re-exports it), one C call each (libac's norm.c).

Parameter names and initialisation are PyTorch's: `weight` (ones) and `bias`
(zeros), of normalized_shape, when elementwise_affine.
"""
from aicraft._args import _as_int
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _wrap
from aicraft.creation import ones, zeros
from aicraft.errors import raise_error
from aicraft.nn import init
from aicraft.nn.layers import _not_a_tensor
from aicraft.nn.module import Module, Parameter, factory_kwargs
from aicraft.tensor import Tensor

__all__ = ["LayerNorm", "layer_norm"]

_NULL = ffi.NULL


def _normalized_shape(shape, fn):
    """normalized_shape (an int or a sequence of ints) as a tuple of ints."""
    dims = (shape,) if not isinstance(shape, (tuple, list)) else tuple(shape)
    return tuple(_as_int(d, fn + ": normalized_shape entries") for d in dims)


def _layer_norm(input, shape, weight, bias, eps, fn):
    if not isinstance(input, Tensor):
        raise TypeError("%s: input must be a Tensor, not %s" % (fn, type(input).__name__))
    for value, what in ((weight, "weight"), (bias, "bias")):
        if value is not None and not isinstance(value, Tensor):
            raise TypeError("%s: %s must be a Tensor or None, not %s" % (fn, what, type(value).__name__))
    p = lib.ac_layer_norm(input._ptr, ffi.new("int64_t[]", shape) if shape else _NULL, len(shape),
                          _NULL if weight is None else weight._ptr,
                          _NULL if bias is None else bias._ptr, float(eps))
    if p:
        return _wrap(p)
    raise_error(input, weight, bias)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise input over its last len(normalized_shape) dims (mean and biased
    variance per row), then scale by weight and shift by bias when given."""
    return _layer_norm(input, _normalized_shape(normalized_shape, "layer_norm"), weight, bias, eps,
                       "layer_norm")


class LayerNorm(Module):
    """Layer normalisation over the trailing normalized_shape dims, as torch.nn.LayerNorm."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape, "LayerNorm")
        if not self.normalized_shape or any(d < 0 for d in self.normalized_shape):
            raise ValueError("LayerNorm: normalized_shape must be non-empty sizes >= 0, got %r"
                             % (normalized_shape,))
        self.eps = float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape))
            if bias:
                self.bias = Parameter(zeros(*self.normalized_shape))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        return _layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps, "LayerNorm")

    def extra_repr(self):
        return "%s, eps=%g, elementwise_affine=%s" % (self.normalized_shape, self.eps,
                                                      self.elementwise_affine)
