"""init.py - in-place initialisers for parameters (torch.nn.init's names and math).

Every function fills the tensor in place with libac's fillers (this thread's
generator, seeded by ac.manual_seed), records no graph, and returns the tensor.
"""
import math

from aicraft._args import _scalar
from aicraft._ffi import lib
from aicraft._wrapping import _live
from aicraft.errors import raise_error
from aicraft.tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_"]

_LINEAR_GAINS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The gain PyTorch recommends for a nonlinearity (param: leaky_relu's slope)."""
    if nonlinearity in _LINEAR_GAINS:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, bool) or _scalar(param) is None:
            raise ValueError("negative_slope %r is not a valid number" % (param,))
        else:
            slope = float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError("Unsupported nonlinearity %s" % (nonlinearity,))


def _ptr(tensor, fn):
    if not isinstance(tensor, Tensor):
        raise TypeError("%s: expected a Tensor, got %s" % (fn, type(tensor).__name__))
    return _live(tensor)


def _number(value, fn, what):
    v = _scalar(value)
    if v is None:
        raise TypeError("%s: %s must be a number, not %s" % (fn, what, type(value).__name__))
    return v


def uniform_(tensor, a=0.0, b=1.0):
    """Fill with values drawn uniformly from [a, b)."""
    p = _ptr(tensor, "uniform_")
    if lib.ac_tensor_uniform_(p, _number(a, "uniform_", "a"), _number(b, "uniform_", "b")) < 0:
        raise_error(tensor)
    return tensor


def normal_(tensor, mean=0.0, std=1.0):
    """Fill with values drawn from N(mean, std^2)."""
    p = _ptr(tensor, "normal_")
    if lib.ac_tensor_normal_(p, _number(mean, "normal_", "mean"), _number(std, "normal_", "std")) < 0:
        raise_error(tensor)
    return tensor


def constant_(tensor, val):
    p = _ptr(tensor, "constant_")
    if lib.ac_tensor_fill_(p, _number(val, "constant_", "val")) < 0:
        raise_error(tensor)
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def _calculate_fan_in_and_fan_out(tensor, fn):
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError("%s: fan in and fan out can not be computed for a tensor of shape %s "
                         "(fewer than 2 dimensions)" % (fn, shape))
    receptive_field = 1
    for d in shape[2:]:
        receptive_field *= d
    return shape[1] * receptive_field, shape[0] * receptive_field


def _fan(tensor, mode, fn):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError("%s: mode %r is not supported, use 'fan_in' or 'fan_out'" % (fn, mode))
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, fn)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010)."""
    _ptr(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, "xavier_uniform_")
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out)) if fan_in + fan_out else 0.0
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _ptr(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, "xavier_normal_")
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out)) if fan_in + fan_out else 0.0
    return normal_(tensor, 0.0, std)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015)."""
    _ptr(tensor, "kaiming_uniform_")
    fan = _fan(tensor, mode, "kaiming_uniform_")
    if fan == 0:
        return tensor     # nothing to fill: an empty tensor, as PyTorch
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    _ptr(tensor, "kaiming_normal_")
    fan = _fan(tensor, mode, "kaiming_normal_")
    if fan == 0:
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))


def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix over dim 0 and the other dims flattened, times gain
    (Saxe et al., 2013): the Q of a standard normal draw's QR, signed by R's diagonal so
    that it is uniform over orthogonal matrices. Init time only: the QR runs in NumPy."""
    import numpy as np
    from aicraft.autograd import no_grad
    from aicraft.creation import from_numpy, randn
    _ptr(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError("orthogonal_: only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    draw = randn(rows, cols, generator=generator).numpy().astype(np.float64)
    if rows < cols:
        draw = draw.T
    q, r = np.linalg.qr(draw)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        tensor.copy_(from_numpy((gain * q).astype(np.float32)).reshape(tuple(tensor.shape)))
    return tensor
