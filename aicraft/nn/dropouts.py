"""dropouts.py - the channel dropouts on every input rank torch takes (dropout1d,
dropout2d, dropout3d), alpha_dropout and feature_alpha_dropout, F.bilinear, and the
modules Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout, Bilinear,
Unflatten.

A channel dropout is libac's feature dropout (ops/dropout.c) on (N, C, rest): whole
(n, c) blocks kept or zeroed. An unbatched input (C, rest) is read as one sample, as
torch reads it; dropout2d on a 2-D input drops single elements (torch's behaviour).
"""
import math

from aicraft._ffi import lib
from aicraft._wrapping import _wrap
from aicraft.creation import ones, zeros
from aicraft.errors import ShapeError, raise_error
from aicraft.nn import init
from aicraft.nn._checks import _dropout_probability
from aicraft.nn.layers import _not_a_tensor
from aicraft.nn.module import Module, Parameter, factory_kwargs
from aicraft.tensor import Tensor

__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
           "bilinear", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout", "Bilinear", "Unflatten"]

_ALPHA = 1.7580993408473766   # SELU's -alpha' (scale * alpha)


def _feature_dropout(input, p, unbatched):
    x = input.unsqueeze(0) if unbatched else input
    out = lib.ac_feature_dropout(x._ptr, p, 1)
    if not out:
        raise_error(input)
    out = _wrap(out)
    return out.squeeze(0) if unbatched else out


def _channel_dropout(fn, input, p, training, spatial):
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' must be Tensor, not %s" % (fn, type(input).__name__))
    p = _dropout_probability(p)
    batched = spatial + 2
    if spatial != 2 and input.ndim not in (batched - 1, batched):
        raise ShapeError("%s: Expected %dD or %dD input, but received a %dD input. Note that %s "
                         "exists to provide channel-wise dropout on inputs with %d spatial "
                         "dimension%s, a channel dimension, and an optional batch dimension"
                         % (fn, batched - 1, batched, input.ndim, fn, spatial,
                            "" if spatial == 1 else "s"))
    if spatial == 2 and input.ndim < 2:
        raise ShapeError("%s: input %s must have at least 2 dims" % (fn, tuple(input.shape)))
    if spatial == 2 and input.ndim not in (3, 4):
        import warnings
        warnings.warn("dropout2d: Received a %d-D input to dropout2d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence "
                      "this warning, please use dropout instead. Note that dropout2d exists to "
                      "provide channel-wise dropout on inputs with 2 spatial dimensions, a channel "
                      "dimension, and an optional batch dimension (i.e. 3D or 4D inputs)."
                      % input.ndim, UserWarning, stacklevel=3)
    if not training or p == 0.0:
        return input
    if spatial == 2:   # torch reads any rank >= 2 as (N, C, rest): 3-D is (N, C, L)
        return _feature_dropout(input, p, False)
    return _feature_dropout(input, p, input.ndim == batched - 1)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) with probability p when training."""
    return _channel_dropout("dropout1d", input, p, training, 1)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) or (N, C, L) (torch's reading of 3-D) with
    probability p when training; a 2-D input loses single elements, as in torch."""
    return _channel_dropout("dropout2d", input, p, training, 2)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) with probability p when training."""
    return _channel_dropout("dropout3d", input, p, training, 3)


def _alpha(fn, input, p, training, feature):
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' must be Tensor, not %s" % (fn, type(input).__name__))
    p = _dropout_probability(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    if feature:
        if input.ndim < 2:
            raise ShapeError("%s: input %s must be (N, C, ...)" % (fn, tuple(input.shape)))
        noise_shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    else:
        noise_shape = tuple(input.shape)
    unit = ones(*noise_shape)   # held: C reads it during the call
    draw = lib.ac_dropout(unit._ptr, p, 1)
    if not draw:
        raise_error(input)
    keep = (_wrap(draw) > 0.0).float()            # 1 kept, 0 dropped
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1.0) * (1.0 - p))
    shift = (keep - 1.0) * (_ALPHA * a) + _ALPHA * a * p
    return input * (keep * a) + shift


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps SELU's mean and variance: dropped elements become SELU's
    negative saturation, then all are scaled and shifted; the input itself when not training."""
    return _alpha("alpha_dropout", input, p, training, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole (n, c) channels."""
    return _alpha("feature_alpha_dropout", input, p, training, True)


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = input1[..., :] @ weight[o] @ input2[..., :] + bias[o], as torch's F.bilinear:
    one GEMM of input1 with weight's (in1, out * in2) view, then a product with input2 summed."""
    fn = "bilinear"
    for t, what in ((input1, "input1"), (input2, "input2"), (weight, "weight")):
        if not isinstance(t, Tensor):
            raise TypeError("%s(): argument '%s' must be Tensor, not %s" % (fn, what, type(t).__name__))
    if weight.ndim != 3:
        raise ShapeError("%s: weight %s must be (out, in1, in2)" % (fn, tuple(weight.shape)))
    out_f, in1, in2 = weight.shape
    if input1.ndim < 1 or input1.shape[-1] != in1 or input2.ndim < 1 or input2.shape[-1] != in2 \
            or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ShapeError("%s: input1 %s and input2 %s do not fit weight %s"
                         % (fn, tuple(input1.shape), tuple(input2.shape), tuple(weight.shape)))
    from aicraft.nn import _integer
    if _integer.is_integer(input1, input2, weight, bias):   # exact integer math, as torch's
        return _integer.bilinear(input1, input2, weight, bias)
    mixed = input1 @ weight.permute(1, 0, 2).reshape(in1, out_f * in2)
    y = (mixed.reshape(*input1.shape[:-1], out_f, in2) * input2.unsqueeze(-2)).sum(-1)
    if bias is not None:
        y = y + bias
    return y


# ---- modules -----------------------------------------------------------------

class _DropoutNd(Module):
    _fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p = _dropout_probability(p)
        self.inplace = bool(inplace)

    def forward(self, input):
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        return type(self)._fn(input, self.p, self.training)

    def extra_repr(self):
        return "p=%s, inplace=%s" % (self.p, self.inplace)


class Dropout1d(_DropoutNd):
    """Channel dropout of (N, C, L) or (C, L), as torch.nn.Dropout1d."""
    _fn = dropout1d


class Dropout2d(_DropoutNd):
    """Channel dropout of (N, C, H, W) (and the other ranks torch takes), as torch.nn.Dropout2d."""
    _fn = dropout2d


class Dropout3d(_DropoutNd):
    """Channel dropout of (N, C, D, H, W) or (C, D, H, W), as torch.nn.Dropout3d."""
    _fn = dropout3d


class AlphaDropout(_DropoutNd):
    """alpha_dropout in training mode, the identity in eval mode, as torch.nn.AlphaDropout."""
    _fn = alpha_dropout


class FeatureAlphaDropout(_DropoutNd):
    """feature_alpha_dropout in training mode, as torch.nn.FeatureAlphaDropout."""
    _fn = feature_alpha_dropout


class Bilinear(Module):
    """y = x1^T A x2 + b, as torch.nn.Bilinear: weight (out, in1, in2) and bias (out),
    uniform in +-1/sqrt(in1)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = int(in1_features), int(in2_features)
        self.out_features = int(out_features)
        self.weight = Parameter(zeros(self.out_features, self.in1_features, self.in2_features))
        if bias:
            self.bias = Parameter(zeros(self.out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return "in1_features=%d, in2_features=%d, out_features=%d, bias=%s" % (
            self.in1_features, self.in2_features, self.out_features, self.bias is not None)


class Unflatten(Module):
    """Split dim into unflattened_size, as torch.nn.Unflatten."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        dim = self.dim if self.dim >= 0 else self.dim + input.ndim
        if not 0 <= dim < input.ndim:
            raise IndexError("Unflatten: dim %d is out of range for input %s"
                             % (self.dim, tuple(input.shape)))
        shape = tuple(input.shape)
        return input.reshape(*shape[:dim], *self.unflattened_size, *shape[dim + 1:])

    def extra_repr(self):
        return "dim=%s, unflattened_size=%s" % (self.dim, self.unflattened_size)
