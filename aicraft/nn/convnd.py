"""convnd.py - conv1d and the transposed convolutions (conv_transpose1d,
conv_transpose2d), and their modules Conv1d, ConvTranspose1d, ConvTranspose2d, with
torch's signatures and parameter layouts (so state_dicts carry over).

A 1-d convolution is the 2-d one on (N, C, 1, L): one C call (libac's conv.c or
conv_transpose.c) between two views. A transposed convolution is conv2d's input
gradient (ops/conv_transpose.c); its bias is added here.
"""
from aicraft._ffi import lib
from aicraft._wrapping import _wrap
from aicraft.errors import ShapeError, raise_error
from aicraft.nn._checks import _c_int, _pair, _tensor_arg, _triple
from aicraft.nn.conv import Conv2d, _optional_arg, _set_channels, _set_weight, conv2d
from aicraft.nn.layers import _not_a_tensor
from aicraft.nn.module import Module
from aicraft.tensor import Tensor

__all__ = ["conv1d", "conv_transpose1d", "conv_transpose2d", "Conv1d", "ConvTranspose1d",
           "ConvTranspose2d", "ConvTranspose3d"]


def _single(value, what):
    """(v,) from an int or a 1-sequence of ints."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ValueError("%s must be an int or a 1-tuple, got %r" % (what, value))
        value = value[0]
    return (_c_int(value, what),)


def _rank_check(input, fn, ranks, shape_text):
    if input.ndim not in ranks:
        raise ShapeError("%s: expected input %s, got %s" % (fn, shape_text, tuple(input.shape)))


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of input (N, C, L) or (C, L) with weight (C_out, C/groups, k) and bias
    (C_out) or None, as torch's F.conv1d; padding an int, a 1-tuple, 'same' or 'valid'."""
    fn = "conv1d"
    _tensor_arg(input, fn, "input")
    _tensor_arg(weight, fn, "weight")
    _optional_arg(bias, fn, "bias")
    _rank_check(input, fn, (2, 3), "(N, C, L) or (C, L)")
    if weight.ndim != 3:
        raise ValueError("%s: weight %s must be (out_channels, in_channels/groups, kernel)"
                         % (fn, tuple(weight.shape)))
    pad = padding if isinstance(padding, str) else (0, _single(padding, fn + ": padding")[0])
    out = conv2d(input.unsqueeze(-2), weight.unsqueeze(2), bias,
                 (1, _single(stride, fn + ": stride")[0]), pad,
                 (1, _single(dilation, fn + ": dilation")[0]), groups)
    return out.squeeze(-2)


def _transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation, fn):
    x, w = _tensor_arg(input, fn, "input"), _tensor_arg(weight, fn, "weight")
    _optional_arg(bias, fn, "bias")
    from aicraft.nn import _integer
    if _integer.is_integer(input, weight, bias):   # exact integer math, as torch's
        return _integer.conv_transpose2d(input, weight, bias, stride, padding, output_padding,
                                         _c_int(groups, fn + ": groups"), dilation, fn)
    sh, sw = stride
    ph, pw = padding
    oph, opw = output_padding
    dh, dw = dilation
    p = lib.ac_conv_transpose2d(x, w, sh, sw, ph, pw, oph, opw, dh, dw,
                                _c_int(groups, fn + ": groups"))
    if not p:
        raise_error(input, weight)
    out = _wrap(p)
    if bias is not None:
        if bias.ndim != 1 or bias.shape[0] != out.shape[-3]:
            raise ValueError("%s: bias %s does not fit %d output channels"
                             % (fn, tuple(bias.shape), out.shape[-3]))
        out = out + bias.reshape(-1, 1, 1)
    return out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 2-D convolution of input (N, C_in, H, W) or (C_in, H, W) with weight
    (C_in, C_out/groups, kH, kW), as torch's F.conv_transpose2d."""
    fn = "conv_transpose2d"
    if isinstance(padding, str):
        raise ValueError("%s: padding must be ints, not %r" % (fn, padding))
    return _transpose2d(input, weight, bias, _pair(stride, fn + ": stride"),
                        _pair(padding, fn + ": padding"),
                        _pair(output_padding, fn + ": output_padding"), groups,
                        _pair(dilation, fn + ": dilation"), fn)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 1-D convolution of input (N, C_in, L) or (C_in, L) with weight
    (C_in, C_out/groups, k), as torch's F.conv_transpose1d."""
    fn = "conv_transpose1d"
    _tensor_arg(input, fn, "input")
    _tensor_arg(weight, fn, "weight")
    _rank_check(input, fn, (2, 3), "(N, C, L) or (C, L)")
    if weight.ndim != 3:
        raise ValueError("%s: weight %s must be (in_channels, out_channels/groups, kernel)"
                         % (fn, tuple(weight.shape)))
    if isinstance(padding, str):
        raise ValueError("%s: padding must be ints, not %r" % (fn, padding))
    out = _transpose2d(input.unsqueeze(-2), weight.unsqueeze(2), bias,
                       (1, _single(stride, fn + ": stride")[0]),
                       (0, _single(padding, fn + ": padding")[0]),
                       (0, _single(output_padding, fn + ": output_padding")[0]), groups,
                       (1, _single(dilation, fn + ": dilation")[0]), fn)
    return out.squeeze(-2)


# ---- modules -----------------------------------------------------------------

class Conv1d(Conv2d):
    """1-D convolution over (N, C, L) input, as torch.nn.Conv1d (every padding_mode)."""

    def _tuple(self, value, what):
        return _single(value, "%s: %s" % (type(self).__name__, what))

    @staticmethod
    def _as2d(single, fill=1):
        return (fill,) + tuple(single)

    def forward(self, input):
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        _rank_check(input, "Conv1d", (2, 3), "(N, C, L) or (C, L)")
        x, _, pw = self._padded(input.unsqueeze(-2))
        out = conv2d(x, self.weight.unsqueeze(2), self.bias, (1, self.stride[0]), (0, pw),
                     (1, self.dilation[0]), self.groups)
        return out.squeeze(-2)


class _ConvTranspose(Module):
    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError('Only "zeros" padding mode is supported for %s' % name)
        tup = _triple if self._dims == 3 else _pair if self._dims == 2 else _single
        _set_channels(self, in_channels, out_channels, groups)
        if isinstance(padding, str):
            raise ValueError("%s: padding must be ints, not %r" % (name, padding))
        self.kernel_size = tup(kernel_size, name + ": kernel_size")
        self.stride = tup(stride, name + ": stride")
        self.padding = tup(padding, name + ": padding")
        self.output_padding = tup(output_padding, name + ": output_padding")
        self.dilation = tup(dilation, name + ": dilation")
        self.padding_mode = padding_mode
        self.transposed = True
        _set_weight(self, (self.in_channels, self.out_channels // self.groups), bias, device, dtype)

    # torch's: the same init as a convolution's, fan_in from weight.shape[1] and the kernel
    reset_parameters = Conv2d.reset_parameters

    def _output_padding(self, input, output_size):
        """output_padding, or the one that gives output_size (torch's rule)."""
        if output_size is None:
            return self.output_padding
        size = list(output_size)
        k = self._dims
        if len(size) == k + 2 or len(size) == k + 1:
            size = size[-k:]
        if len(size) != k:
            raise ValueError("%s: output_size must have %d or %d elements (got %d)"
                             % (type(self).__name__, k, k + 2, len(output_size)))
        result = []
        for d in range(k):
            n = input.shape[input.ndim - k + d]
            smallest = ((n - 1) * self.stride[d] - 2 * self.padding[d]
                        + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            largest = smallest + self.stride[d] - 1
            if not smallest <= size[d] <= largest:
                raise ValueError("requested an output size of %s, but valid sizes range from %d "
                                 "to %d (for an input of %s)" % (list(output_size), smallest,
                                                                 largest, tuple(input.shape)))
            result.append(size[d] - smallest)
        return tuple(result)

    def extra_repr(self):
        s = "%d, %d, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels,
                                                   self.kernel_size, self.stride)
        zero, one = (0,) * self._dims, (1,) * self._dims
        if self.padding != zero:
            s += ", padding=%s" % (self.padding,)
        if self.dilation != one:
            s += ", dilation=%s" % (self.dilation,)
        if self.output_padding != zero:
            s += ", output_padding=%s" % (self.output_padding,)
        if self.groups != 1:
            s += ", groups=%d" % self.groups
        if self.bias is None:
            s += ", bias=False"
        return s


class ConvTranspose2d(_ConvTranspose):
    """Transposed 2-D convolution over (N, C, H, W) input, as torch.nn.ConvTranspose2d;
    weight (in_channels, out_channels/groups, kH, kW)."""

    def forward(self, input, output_size=None):
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        return _transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                            self._output_padding(input, output_size), self.groups, self.dilation,
                            "ConvTranspose2d")


class ConvTranspose1d(_ConvTranspose):
    """Transposed 1-D convolution over (N, C, L) input, as torch.nn.ConvTranspose1d."""

    _dims = 1

    def forward(self, input, output_size=None):
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        _rank_check(input, "ConvTranspose1d", (2, 3), "(N, C, L) or (C, L)")
        op = self._output_padding(input, output_size)
        return conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding, op,
                                self.groups, self.dilation)


class ConvTranspose3d(_ConvTranspose):
    """Transposed 3-D convolution over (N, C, D, H, W) input, as torch.nn.ConvTranspose3d."""

    _dims = 3

    def forward(self, input, output_size=None):
        from aicraft.nn.volumetric import conv_transpose3d
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        return conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                self._output_padding(input, output_size), self.groups,
                                self.dilation)
