"""conv.py - the layers of convolutional nets: Conv2d (every padding_mode, 'same'
with even kernels), BatchNorm1d/2d/3d, Dropout, and their functional forms (conv2d,
batch_norm, dropout), which aicraft.nn.functional re-exports. The pools live in
pooling.py (MaxPool2d, AvgPool2d, AdaptiveAvgPool2d are still importable from here),
Conv1d and the transposed convolutions in convnd.py, the channel dropouts in
dropouts.py.

Each forward is one C call (libac's conv.c, pool.c, norm.c, dropout.c). Names,
defaults, parameters and buffers are PyTorch's, so state_dicts carry over:
Conv2d has `weight` and `bias`; BatchNorm has `weight`, `bias` and the buffers
`running_mean`, `running_var`, `num_batches_tracked` (a float32 scalar here).
The running statistics are root tensors the module owns: C updates them in place,
also when forward runs inside `with ac.checkpoint():`.
"""
import math

from aicraft._args import _as_int
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _wrap
from aicraft.creation import ones, zeros
from aicraft.errors import raise_error
from aicraft.nn import init
from aicraft.nn._checks import _c_int, _pair, _tensor_arg
from aicraft.nn.layers import _not_a_tensor
from aicraft.nn.module import Module, Parameter, factory_kwargs
from aicraft.tensor import Tensor

__all__ = ["Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d",
           "BatchNorm3d", "Dropout", "Dropout2d", "conv2d", "max_pool2d", "avg_pool2d",
           "adaptive_avg_pool2d", "batch_norm", "dropout", "dropout2d"]

_NULL = ffi.NULL


def _optional_arg(value, fn, what):
    return _NULL if value is None else _tensor_arg(value, fn, what)


def _unsupported(fn, what):
    raise NotImplementedError("%s: %s is not supported by aicraft" % (fn, what))


# ---- functional forms --------------------------------------------------------

def _conv_padding(padding, kernel, dilation):
    """padding as (h, w); 'valid' is 0, 'same' keeps the size at stride 1. An even
    dilated kernel needs one more on the right than on the left: _same_extra says how much."""
    if padding == "valid":
        return 0, 0
    if padding == "same":
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return total[0] // 2, total[1] // 2
    return _pair(padding, "conv2d: padding")


def _same_extra(kernel, dilation):
    """For padding='same': the (h, w) padding the right/bottom needs beyond the left/top."""
    return tuple((d * (k - 1)) % 2 for k, d in zip(kernel, dilation))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution of input (N, C, H, W) or (C, H, W) with weight
    (C_out, C/groups, kH, kW) and bias (C_out) or None, as torch's F.conv2d."""
    fn = "conv2d"
    x, w, b = _tensor_arg(input, fn, "input"), _tensor_arg(weight, fn, "weight"), \
        _optional_arg(bias, fn, "bias")
    sh, sw = _pair(stride, "conv2d: stride")
    dh, dw = _pair(dilation, "conv2d: dilation")
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError("conv2d: padding must be 'same', 'valid' or ints, got %r" % padding)
        if padding == "same" and (sh, sw) != (1, 1):
            raise ValueError("conv2d: padding='same' is not supported for strided convolutions")
        kernel = tuple(weight.shape[2:4]) if weight.ndim == 4 else (1, 1)
        ph, pw = _conv_padding(padding, kernel, (dh, dw))
        if padding == "same" and any(_same_extra(kernel, (dh, dw))):
            from aicraft.nn.padding import pad
            eh, ew = _same_extra(kernel, (dh, dw))
            input = pad(input, (pw, pw + ew, ph, ph + eh))
            x, ph, pw = input._ptr, 0, 0
    else:
        ph, pw = _pair(padding, "conv2d: padding")
    groups = _c_int(groups, "conv2d: groups")
    from aicraft.nn import _integer
    if _integer.is_integer(input, weight, bias):   # exact integer math, as torch's
        return _integer.conv2d(input, weight, bias, (sh, sw), (ph, pw), (dh, dw), groups)
    p = lib.ac_conv2d(x, w, b, sh, sw, ph, pw, dh, dw, groups)
    if p:
        return _wrap(p)
    raise_error(input, weight, bias)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise each channel of input (N, C, ...) with the batch's statistics (training,
    updating running_mean/var in place) or with running_mean/var, as torch's F.batch_norm."""
    fn = "batch_norm"
    p = lib.ac_batch_norm(_tensor_arg(input, fn, "input"), _optional_arg(weight, fn, "weight"),
                          _optional_arg(bias, fn, "bias"),
                          _optional_arg(running_mean, fn, "running_mean"),
                          _optional_arg(running_var, fn, "running_var"), 1 if training else 0,
                          float(momentum), float(eps))
    if p:
        return _wrap(p)
    raise_error(input, weight, bias, running_mean, running_var)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero elements with probability p and scale the rest by 1/(1-p) when training;
    the input itself otherwise. inplace is accepted and changes nothing."""
    x = _tensor_arg(input, "dropout", "input")
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError("dropout probability has to be between 0 and 1, but got %r" % p)
    if not training or p == 0.0:
        return input
    out = lib.ac_dropout(x, p, 1)
    if out:
        return _wrap(out)
    raise_error(input)


def _per_channel_state(module):
    """A batch or instance norm's weight and bias (when affine) and running statistics
    (when tracked), num_features each, registered as torch names them."""
    n = module.num_features
    if module.affine:
        module.weight = Parameter(ones(n))
        module.bias = Parameter(zeros(n))
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)
    for name, make in (("running_mean", zeros), ("running_var", ones)):
        module.register_buffer(name, make(n) if module.track_running_stats else None)
    module.register_buffer("num_batches_tracked", zeros(()) if module.track_running_stats else None)


# ---- modules -----------------------------------------------------------------

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _set_channels(module, in_channels, out_channels, groups):
    """A convolution module's in_channels, out_channels and groups, checked as torch
    checks them (positive, channels divisible by groups)."""
    name = type(module).__name__
    module.in_channels = _as_int(in_channels, name + ": in_channels")
    module.out_channels = _as_int(out_channels, name + ": out_channels")
    module.groups = _c_int(groups, name + ": groups")
    if module.groups < 1:
        raise ValueError("%s: groups must be a positive integer, got %d" % (name, module.groups))
    if module.in_channels < 1 or module.out_channels < 1:
        raise ValueError("%s: in_channels and out_channels must be positive, got %d and %d"
                         % (name, module.in_channels, module.out_channels))
    if module.in_channels % module.groups or module.out_channels % module.groups:
        raise ValueError("%s: in_channels (%d) and out_channels (%d) must be divisible by "
                         "groups (%d)" % (name, module.in_channels, module.out_channels, module.groups))


def _set_weight(module, channels, bias, device, dtype):
    """A convolution module's weight (channels + kernel_size) and bias, initialised by its
    reset_parameters, then moved by device=/dtype=."""
    module.weight = Parameter(zeros(*channels, *module.kernel_size))
    if bias:
        module.bias = Parameter(zeros(module.out_channels))
    else:
        module.register_parameter("bias", None)
    module.reset_parameters()
    factory_kwargs(module, device, dtype)


class Conv2d(Module):
    """2-D convolution over (N, C, H, W) input, as torch.nn.Conv2d (padding_mode 'zeros',
    'reflect', 'replicate' or 'circular').

    Initialised as PyTorch's: weight and bias uniform in +-1/sqrt(fan_in),
    fan_in = in_channels/groups * kH * kW."""

    _name = "Conv2d"
    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if padding_mode not in _PADDING_MODES:
            raise ValueError("padding_mode must be one of %s, but got padding_mode='%s'"
                             % (list(_PADDING_MODES), padding_mode))
        _set_channels(self, in_channels, out_channels, groups)
        self.kernel_size = self._tuple(kernel_size, "kernel_size")
        self.stride = self._tuple(stride, "stride")
        self.dilation = self._tuple(dilation, "dilation")
        k2, d2 = self._as2d(self.kernel_size), self._as2d(self.dilation)
        self._extra = (0, 0)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError("Invalid padding string %r, should be one of {'valid', 'same'}"
                                 % padding)
            if padding == "same" and any(st != 1 for st in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
            self._padding = _conv_padding(padding, k2, d2)
            if padding == "same":
                self._extra = _same_extra(k2, d2)
        else:
            self.padding = self._tuple(padding, "padding")
            self._padding = self._as2d(self.padding, 0)
        self.padding_mode = padding_mode
        _set_weight(self, (self.out_channels, self.in_channels // self.groups), bias, device, dtype)

    def _tuple(self, value, what):
        return _pair(value, "%s: %s" % (type(self).__name__, what))

    @staticmethod
    def _as2d(pair, fill=1):
        return pair

    def reset_parameters(self):
        # kaiming_uniform_ with a = sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1]
            for k in self.kernel_size:
                fan_in *= k
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0   # as PyTorch's
            init.uniform_(self.bias, -bound, bound)

    def _padded(self, input):
        """input padded as padding_mode says (and by the extra right column of 'same' with an
        even kernel), with the padding left to the convolution itself."""
        (ph, pw), (eh, ew) = self._padding, self._extra
        if self.padding_mode != "zeros" and (ph or pw or eh or ew):
            from aicraft.nn.padding import pad
            return pad(input, (pw, pw + ew, ph, ph + eh), self.padding_mode), 0, 0
        if eh or ew:
            from aicraft.nn.padding import pad
            return pad(input, (pw, pw + ew, ph, ph + eh)), 0, 0
        return input, ph, pw

    def forward(self, input):
        bias = self.bias
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        x, ph, pw = self._padded(input)
        p = lib.ac_conv2d(x._ptr, self.weight._ptr, _NULL if bias is None else bias._ptr,
                          self.stride[0], self.stride[1], ph, pw,
                          self.dilation[0], self.dilation[1], self.groups)
        if p:
            return _wrap(p)
        raise_error(input, self.weight, bias)

    def extra_repr(self):
        s = "%d, %d, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels,
                                                   self.kernel_size, self.stride)
        if self.padding != (0,) * len(self.kernel_size):
            s += ", padding=%s" % (repr(self.padding) if isinstance(self.padding, str)
                                   else (self.padding,))
        if self.dilation != (1,) * len(self.kernel_size):
            s += ", dilation=%s" % (self.dilation,)
        if self.groups != 1:
            s += ", groups=%d" % self.groups
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode=%s" % self.padding_mode
        return s


class _BatchNorm(Module):
    """Shared by BatchNorm1d and BatchNorm2d, which differ in the input ranks they accept."""

    _ranks = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features = _as_int(num_features, "%s: num_features" % type(self).__name__)
        if self.num_features < 1:
            raise ValueError("%s: num_features must be positive, got %d"
                             % (type(self).__name__, self.num_features))
        self.eps = float(eps)
        self.momentum = None if momentum is None else float(momentum)
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        _per_channel_state(self)
        factory_kwargs(self, device, dtype)

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        ndim = input.ndim
        if ndim not in self._ranks:
            raise ValueError("%s: expected %s input (got %dD input)"
                             % (name, " or ".join("%dD" % r for r in self._ranks), ndim))
        momentum = 0.0 if self.momentum is None else self.momentum
        running_mean, running_var = self.running_mean, self.running_var
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            count = self.num_batches_tracked._ptr
            count.data[0] += 1.0
            if self.momentum is None:      # a cumulative moving average
                momentum = 1.0 / count.data[0]
        # Batch statistics when training, or when there are no running ones to use.
        training = self.training or running_mean is None
        if self.training and not self.track_running_stats:
            running_mean = running_var = None
        weight, bias = self.weight, self.bias
        p = lib.ac_batch_norm(input._ptr, _NULL if weight is None else weight._ptr,
                              _NULL if bias is None else bias._ptr,
                              _NULL if running_mean is None else running_mean._ptr,
                              _NULL if running_var is None else running_var._ptr,
                              1 if training else 0, momentum, self.eps)
        if p:
            return _wrap(p)
        raise_error(input, weight, bias, running_mean, running_var)

    def extra_repr(self):
        return "%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s" % (
            self.num_features, self.eps, self.momentum, self.affine, self.track_running_stats)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) input, as torch.nn.BatchNorm1d."""

    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) input, as torch.nn.BatchNorm2d."""

    _ranks = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation over (N, C, D, H, W) input, as torch.nn.BatchNorm3d."""

    _ranks = (5,)


class Dropout(Module):
    """Zero elements with probability p and scale the rest by 1/(1-p) in training mode;
    the identity in eval mode, as torch.nn.Dropout. inplace is accepted and changes nothing."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        p = float(p)
        if not 0.0 <= p <= 1.0:
            raise ValueError("dropout probability has to be between 0 and 1, but got %r" % p)
        self.p = p
        self.inplace = bool(inplace)

    def forward(self, input):
        if not self.training or self.p == 0.0:
            return input
        try:
            p = lib.ac_dropout(input._ptr, self.p, 1)
        except AttributeError:
            raise _not_a_tensor(self, input) from None
        if p:
            return _wrap(p)
        raise_error(input)

    def extra_repr(self):
        return "p=%s, inplace=%s" % (self.p, self.inplace)


# The pools live in pooling.py, the channel dropouts in dropouts.py; their old home
# still names them.
from aicraft.nn.dropouts import Dropout2d, dropout2d  # noqa: E402,F401
from aicraft.nn.pooling import (AdaptiveAvgPool2d, AvgPool2d, MaxPool2d,  # noqa: E402,F401
                                adaptive_avg_pool2d, avg_pool2d, max_pool2d)
