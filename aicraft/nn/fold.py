"""fold.py - F.unfold (im2col), F.fold (col2im), F.channel_shuffle and the modules
Unfold, Fold, ChannelShuffle, with torch's signatures.

unfold gathers, for each of the kernel's kH * kW offsets, one strided slice of the
zero-padded input (one C slice each; a loop over offsets, never over elements) and
stacks them as (N, C * kH * kW, L). fold is its adjoint, a transposed convolution
(ops/conv_transpose.c) with one-hot filters, one group per channel, which sums
overlapping windows as torch's col2im does.
"""
from aicraft.errors import ShapeError
from aicraft.nn._checks import _pair
from aicraft.nn.module import Module
from aicraft.tensor import Tensor

__all__ = ["unfold", "fold", "channel_shuffle", "Unfold", "Fold", "ChannelShuffle"]


def _geometry(fn, kernel_size, dilation, padding, stride):
    k = _pair(kernel_size, fn + ": kernel_size")
    d = _pair(dilation, fn + ": dilation")
    p = _pair(padding, fn + ": padding")
    s = _pair(stride, fn + ": stride")
    if min(k) < 1 or min(d) < 1 or min(s) < 1 or min(p) < 0:
        raise ValueError("%s: kernel_size %s, dilation %s and stride %s must be positive and "
                         "padding %s non-negative" % (fn, k, d, s, p))
    return k, d, p, s


def _blocks(fn, size, k, d, p, s):
    """The number of sliding blocks along each of the two dims."""
    counts = []
    for n, kk, dd, pp, ss in zip(size, k, d, p, s):
        span = n + 2 * pp - dd * (kk - 1) - 1
        if span < 0:
            raise ShapeError("%s: the kernel %s (dilation %s) does not fit the padded input %s"
                             % (fn, k, d, tuple(size)))
        counts.append(span // ss + 1)
    return counts


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding local blocks of input (N, C, H, W) or (C, H, W) as columns (N, C kH kW, L),
    as torch's F.unfold."""
    fn = "unfold"
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' must be Tensor, not %s" % (fn, type(input).__name__))
    if input.ndim not in (3, 4):
        raise ShapeError("Input Error: Only 3D or 4D input Tensors are supported (got %dD)"
                         % input.ndim)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _geometry(fn, kernel_size, dilation, padding, stride)
    oh, ow = _blocks(fn, input.shape[-2:], (kh, kw), (dh, dw), (ph, pw), (sh, sw))
    x = input
    if ph or pw:
        from aicraft.nn.padding import pad
        x = pad(input, (pw, pw, ph, ph))
    lead = (slice(None),) * (input.ndim - 2)
    parts = [x[lead + (slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
                       slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))]
             for i in range(kh) for j in range(kw)]
    from aicraft.creation import stack
    cols = stack(parts, input.ndim - 2)                 # (.., C, K, oh, ow)
    return cols.reshape(*input.shape[:-3], input.shape[-3] * kh * kw, oh * ow)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Columns (N, C kH kW, L) or (C kH kW, L) summed back into (N, C, H, W), as torch's
    F.fold (unfold's adjoint)."""
    import numpy as np
    fn = "fold"
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' must be Tensor, not %s" % (fn, type(input).__name__))
    if input.ndim not in (2, 3):
        raise ShapeError("Input Error: Only unbatched (2D) or batched (3D) input Tensors are "
                         "supported (got %dD)" % input.ndim)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _geometry(fn, kernel_size, dilation, padding, stride)
    h, w = _pair(output_size, fn + ": output_size")
    oh, ow = _blocks(fn, (h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw))
    rows, length = input.shape[-2:]
    if rows % (kh * kw):
        raise ShapeError("Expected size of input's dimension 1 to be divisible by the product of "
                         "kernel_size, but got input.size(1)=%d and kernel_size=%s"
                         % (rows, (kh, kw)))
    if length != oh * ow:
        raise ShapeError("Given output_size=%s, kernel_size=%s, dilation=%s, padding=%s, "
                         "stride=%s, expected size of input's dimension 2 to match the calculated "
                         "number of sliding blocks %d * %d = %d, but got input.size(2)=%d."
                         % ((h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw), oh, ow, oh * ow,
                            length))
    channels = rows // (kh * kw)
    from aicraft.creation import from_numpy
    from aicraft.nn.convnd import conv_transpose2d
    from aicraft.nn.padding import pad
    one_hot = np.zeros((rows, 1, kh, kw), dtype=np.float32)
    offsets = np.arange(rows) % (kh * kw)
    one_hot[np.arange(rows), 0, offsets // kw, offsets % kw] = 1.0
    batched = input.ndim == 3
    x = input.reshape(*input.shape[:-2], rows, oh, ow)
    out = conv_transpose2d(x, from_numpy(one_hot), None, (sh, sw), 0, 0, channels, (dh, dw))
    span_h, span_w = out.shape[-2:]
    out = pad(out, (-pw, w + pw - span_w, -ph, h + ph - span_h))
    return out if batched else out.reshape(channels, h, w)


def channel_shuffle(input, groups):
    """(N, g * c, *) -> channels reordered as (c, g), as torch's F.channel_shuffle."""
    fn = "channel_shuffle"
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' must be Tensor, not %s" % (fn, type(input).__name__))
    g = int(groups)
    if input.ndim < 3:
        raise ShapeError("channel_shuffle expects input to have at least 3 dimensions, but got "
                         "input with sizes %s" % (tuple(input.shape),))
    if g <= 0:
        raise ValueError("Number of groups to divide channels in must be positive. Value of "
                         "groups:%d" % g)
    n, c = input.shape[0], input.shape[1]
    if c % g:
        raise ValueError("Number of channels must be divisible by groups. Got %d channels and %d "
                         "groups." % (c, g))
    rest = tuple(input.shape[2:])
    return input.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(n, c, *rest)


class Unfold(Module):
    """Sliding local blocks as columns, as torch.nn.Unfold."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return "kernel_size=%s, dilation=%s, padding=%s, stride=%s" % (
            self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(Module):
    """Columns summed back into an image, as torch.nn.Fold."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size, self.dilation = output_size, kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)

    def extra_repr(self):
        return "output_size=%s, kernel_size=%s, dilation=%s, padding=%s, stride=%s" % (
            self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)


class ChannelShuffle(Module):
    """F.channel_shuffle as a module, as torch.nn.ChannelShuffle."""

    def __init__(self, groups):
        super().__init__()
        self.groups = int(groups)

    def forward(self, input):
        return channel_shuffle(input, self.groups)

    def extra_repr(self):
        return "groups=%d" % self.groups
