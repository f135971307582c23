"""conv.py - the layers of convolutional nets: Conv2d, MaxPool2d, AvgPool2d,
AdaptiveAvgPool2d, BatchNorm1d, BatchNorm2d, Dropout, Dropout2d, and their
functional forms (conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d,
batch_norm, dropout, dropout2d), which aicraft.nn.functional re-exports.

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
from aicraft.errors import ShapeError, raise_error
from aicraft.nn import init
from aicraft.nn.layers import _not_a_tensor
from aicraft.nn.module import Module, Parameter, factory_kwargs
from aicraft.tensor import Tensor

__all__ = ["Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d",
           "Dropout", "Dropout2d", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
           "batch_norm", "dropout", "dropout2d"]

_NULL = ffi.NULL
_INT_LIMIT = 2 ** 31


def _c_int(value, what):
    """value as an int that fits a C int."""
    v = _as_int(value, what)
    if not -_INT_LIMIT <= v < _INT_LIMIT:
        raise ValueError("%s %d is out of range" % (what, v))
    return v


def _pair(value, what):
    """(h, w) from an int or a pair of ints, each fitting a C int."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError("%s must be an int or a pair of ints, got %r" % (what, value))
        return _c_int(value[0], what), _c_int(value[1], what)
    v = _c_int(value, what)
    return v, v


def _tensor_arg(value, fn, what):
    if not isinstance(value, Tensor):
        raise TypeError("%s: %s must be a Tensor, not %s" % (fn, what, type(value).__name__))
    return value._ptr


def _optional_arg(value, fn, what):
    return _NULL if value is None else _tensor_arg(value, fn, what)


def _unsupported(fn, what):
    raise NotImplementedError("%s: %s is not supported by aicraft" % (fn, what))


# ---- functional forms --------------------------------------------------------

def _conv_padding(padding, kernel, dilation):
    """padding as (h, w); 'valid' is 0, 'same' keeps the size at stride 1."""
    if padding == "valid":
        return 0, 0
    if padding == "same":
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        if any(t % 2 for t in total):
            _unsupported("conv2d", "padding='same' with an even dilated kernel "
                                   "(asymmetric padding)")
        return total[0] // 2, total[1] // 2
    return _pair(padding, "conv2d: padding")


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
        ph, pw = _conv_padding(padding, tuple(weight.shape[2:4]), (dh, dw)) \
            if weight.ndim == 4 else (0, 0)
    else:
        ph, pw = _pair(padding, "conv2d: padding")
    groups = _c_int(groups, "conv2d: groups")
    p = lib.ac_conv2d(x, w, b, sh, sw, ph, pw, dh, dw, groups)
    if p:
        return _wrap(p)
    raise_error(input, weight, bias)


def _pool_args(fn, kernel_size, stride, padding):
    kh, kw = _pair(kernel_size, fn + ": kernel_size")
    sh, sw = (kh, kw) if stride is None or stride == () or stride == [] else \
        _pair(stride, fn + ": stride")
    ph, pw = _pair(padding, fn + ": padding")
    return kh, kw, sh, sw, ph, pw


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over kernel_size windows (stride defaults to kernel_size), as torch's F.max_pool2d."""
    fn = "max_pool2d"
    if _pair(dilation, fn + ": dilation") != (1, 1):
        _unsupported(fn, "dilation other than 1")
    if ceil_mode:
        _unsupported(fn, "ceil_mode=True")
    if return_indices:
        _unsupported(fn, "return_indices=True")
    x = _tensor_arg(input, fn, "input")
    p = lib.ac_max_pool2d(x, *_pool_args(fn, kernel_size, stride, padding))
    if p:
        return _wrap(p)
    raise_error(input)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over kernel_size windows, zero padding counted, as torch's F.avg_pool2d."""
    fn = "avg_pool2d"
    if ceil_mode:
        _unsupported(fn, "ceil_mode=True")
    if not count_include_pad:
        _unsupported(fn, "count_include_pad=False")
    if divisor_override is not None:
        _unsupported(fn, "divisor_override")
    x = _tensor_arg(input, fn, "input")
    p = lib.ac_avg_pool2d(x, *_pool_args(fn, kernel_size, stride, padding))
    if p:
        return _wrap(p)
    raise_error(input)


def adaptive_avg_pool2d(input, output_size):
    """Mean over the windows that split H x W into output_size cells (an int, a pair,
    None in a pair keeping that size), as torch's F.adaptive_avg_pool2d."""
    fn = "adaptive_avg_pool2d"
    x = _tensor_arg(input, fn, "input")
    if isinstance(output_size, (tuple, list)) and len(output_size) == 2 and None in output_size:
        shape = input.shape
        if len(shape) < 2:
            raise ValueError("%s: input of shape %s has no H and W" % (fn, shape))
        output_size = tuple(shape[-2 + i] if s is None else s for i, s in enumerate(output_size))
    oh, ow = _pair(output_size, fn + ": output_size")
    p = lib.ac_adaptive_avg_pool2d(x, oh, ow)
    if p:
        return _wrap(p)
    raise_error(input)


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


def _dropout_probability(p):
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError("dropout probability has to be between 0 and 1, but got %r" % p)
    return p


def _channel_dropout(input, p, fn):
    """F.dropout2d in training: zero whole (n, c) channels of (N, C, H, W); a 3-d input
    is read as (N, C, L), as PyTorch 2 still does (with a warning)."""
    _tensor_arg(input, fn, "input")
    if input.ndim == 2:   # as PyTorch 2: deprecated, warned, and plain element-wise dropout
        import warnings
        warnings.warn("%s: Received a 2-D input to %s, which is deprecated and will result in an error "
                      "in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead." % (fn, fn), UserWarning, stacklevel=3)
        return dropout(input, p, True)
    if input.ndim not in (3, 4):
        raise ShapeError("%s: input %s must be (N, C, H, W) or (N, C, L)" % (fn, tuple(input.shape)))
    out = lib.ac_feature_dropout(input._ptr, p, 1)
    if out:
        return _wrap(out)
    raise_error(input)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels with probability p and scale the rest by 1/(1-p) when
    training; the input itself otherwise. inplace is accepted and changes nothing."""
    _tensor_arg(input, "dropout2d", "input")
    p = _dropout_probability(p)
    if not training or p == 0.0:
        return input
    return _channel_dropout(input, p, "dropout2d")


# ---- modules -----------------------------------------------------------------

class Conv2d(Module):
    """2-D convolution over (N, C, H, W) input, as torch.nn.Conv2d (padding_mode 'zeros').

    Initialised as PyTorch's: weight and bias uniform in +-1/sqrt(fan_in),
    fan_in = in_channels/groups * kH * kW."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            _unsupported("Conv2d", "padding_mode=%r" % (padding_mode,))
        self.in_channels = _as_int(in_channels, "Conv2d: in_channels")
        self.out_channels = _as_int(out_channels, "Conv2d: out_channels")
        self.groups = _c_int(groups, "Conv2d: groups")
        if self.groups < 1:
            raise ValueError("Conv2d: groups must be a positive integer, got %d" % self.groups)
        if self.in_channels < 1 or self.out_channels < 1:
            raise ValueError("Conv2d: in_channels and out_channels must be positive, got %d and %d"
                             % (self.in_channels, self.out_channels))
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError("Conv2d: in_channels (%d) and out_channels (%d) must be divisible by "
                             "groups (%d)" % (self.in_channels, self.out_channels, self.groups))
        self.kernel_size = _pair(kernel_size, "Conv2d: kernel_size")
        self.stride = _pair(stride, "Conv2d: stride")
        self.dilation = _pair(dilation, "Conv2d: dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError("Conv2d: padding must be 'same', 'valid' or ints, got %r"
                                 % padding)
            if padding == "same" and self.stride != (1, 1):
                raise ValueError("Conv2d: padding='same' is not supported for strided convolutions")
            self.padding = padding
            self._padding = _conv_padding(padding, self.kernel_size, self.dilation)
        else:
            self.padding = self._padding = _pair(padding, "Conv2d: padding")
        self.padding_mode = padding_mode
        self.weight = Parameter(zeros(self.out_channels, self.in_channels // self.groups,
                                      *self.kernel_size))
        if bias:
            self.bias = Parameter(zeros(self.out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        # kaiming_uniform_ with a = sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_channels // self.groups * self.kernel_size[0] * self.kernel_size[1]
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0   # as PyTorch's
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        bias = self.bias
        try:
            p = lib.ac_conv2d(input._ptr, self.weight._ptr, _NULL if bias is None else bias._ptr,
                              self.stride[0], self.stride[1], self._padding[0], self._padding[1],
                              self.dilation[0], self.dilation[1], self.groups)
        except AttributeError:
            raise _not_a_tensor(self, input) from None
        if p:
            return _wrap(p)
        raise_error(input, self.weight, bias)

    def extra_repr(self):
        s = "%d, %d, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels,
                                                   self.kernel_size, self.stride)
        if self.padding != (0, 0):
            s += ", padding=%s" % (repr(self.padding) if isinstance(self.padding, str)
                                   else (self.padding,))
        if self.dilation != (1, 1):
            s += ", dilation=%s" % (self.dilation,)
        if self.groups != 1:
            s += ", groups=%d" % self.groups
        if self.bias is None:
            s += ", bias=False"
        return s


class MaxPool2d(Module):
    """Max over kernel_size windows (stride defaults to kernel_size), as torch.nn.MaxPool2d."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        if _pair(dilation, "MaxPool2d: dilation") != (1, 1):
            _unsupported("MaxPool2d", "dilation other than 1")
        if return_indices:
            _unsupported("MaxPool2d", "return_indices=True")
        if ceil_mode:
            _unsupported("MaxPool2d", "ceil_mode=True")
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.dilation = dilation
        self.return_indices = False
        self.ceil_mode = False
        self._args = _pool_args("MaxPool2d", kernel_size, stride, padding)

    def forward(self, input):
        try:
            p = lib.ac_max_pool2d(input._ptr, *self._args)
        except AttributeError:
            raise _not_a_tensor(self, input) from None
        if p:
            return _wrap(p)
        raise_error(input)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=False" % (
            self.kernel_size, self.stride, self.padding, self.dilation)


class AvgPool2d(Module):
    """Mean over kernel_size windows, zero padding counted, as torch.nn.AvgPool2d."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        if ceil_mode:
            _unsupported("AvgPool2d", "ceil_mode=True")
        if not count_include_pad:
            _unsupported("AvgPool2d", "count_include_pad=False")
        if divisor_override is not None:
            _unsupported("AvgPool2d", "divisor_override")
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.ceil_mode = False
        self.count_include_pad = True
        self.divisor_override = None
        self._args = _pool_args("AvgPool2d", kernel_size, stride, padding)

    def forward(self, input):
        try:
            p = lib.ac_avg_pool2d(input._ptr, *self._args)
        except AttributeError:
            raise _not_a_tensor(self, input) from None
        if p:
            return _wrap(p)
        raise_error(input)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s" % (self.kernel_size, self.stride,
                                                          self.padding)


class AdaptiveAvgPool2d(Module):
    """Mean over the windows that split H x W into output_size cells, as
    torch.nn.AdaptiveAvgPool2d; AdaptiveAvgPool2d(1) is global average pooling."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return "output_size=%s" % (self.output_size,)


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
        if self.affine:
            self.weight = Parameter(ones(self.num_features))
            self.bias = Parameter(zeros(self.num_features))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", zeros(self.num_features))
            self.register_buffer("running_var", ones(self.num_features))
            self.register_buffer("num_batches_tracked", zeros(()))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
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


class Dropout2d(Module):
    """Zero whole channels of (N, C, H, W) inputs with probability p and
    scale the rest by 1/(1-p) in training mode; the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p = _dropout_probability(p)
        self.inplace = bool(inplace)

    def forward(self, input):
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        if not self.training or self.p == 0.0:
            return input
        return _channel_dropout(input, self.p, "Dropout2d")

    def extra_repr(self):
        return "p=%s, inplace=%s" % (self.p, self.inplace)
