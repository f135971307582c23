"""volumetric.py - the 3-d ops on (N, C, D, H, W): conv3d, max_pool3d, avg_pool3d,
adaptive_max_pool3d (adaptive_avg_pool3d is in pooling.py), and their modules Conv3d,
MaxPool3d, AvgPool3d, AdaptiveMaxPool3d, with torch's signatures.

conv3d is one conv2d (libac's conv.c): the kD depth taps of every output depth are
stacked as channels, (N * D_out, C * kD, H, W), against the weight read as
(C_out, C/groups * kD, kH, kW). A box window's max or sum is separable, so each 3-d
pool is a 1-d pool along D, then H, then W (the 2-d C pool on a (.., 1, L) view), each
dim with torch's own window, padding, ceil_mode and divisor rule.
"""
import math

from aicraft.errors import ShapeError
from aicraft.nn import init
from aicraft.nn._checks import _c_int, _triple
from aicraft.nn.conv import _set_channels, _set_weight, conv2d
from aicraft.nn.module import Module
from aicraft.tensor import Tensor

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_max_pool3d", "Conv3d", "MaxPool3d",
           "AvgPool3d", "AdaptiveMaxPool3d"]


def _volume(input, fn):
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' must be Tensor, not %s" % (fn, type(input).__name__))
    if input.ndim not in (4, 5):
        raise ShapeError("%s: input %s must be (N, C, D, H, W) or (C, D, H, W)"
                         % (fn, tuple(input.shape)))
    return input.ndim == 4


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution of input (N, C, D, H, W) or (C, D, H, W) with weight
    (C_out, C/groups, kD, kH, kW), as torch's F.conv3d."""
    fn = "conv3d"
    unbatched = _volume(input, fn)
    if not isinstance(weight, Tensor) or weight.ndim != 5:
        raise ShapeError("%s: weight must be (out_channels, in_channels/groups, kD, kH, kW)" % fn)
    x = input.unsqueeze(0) if unbatched else input
    sd, sh, sw = _triple(stride, fn + ": stride")
    dd, dh, dw = _triple(dilation, fn + ": dilation")
    f, cg, kd, kh, kw = weight.shape
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if (sd, sh, sw) != (1, 1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            totals = [d * (k - 1) for d, k in zip((dd, dh, dw), (kd, kh, kw))]
            from aicraft.nn.padding import pad
            x = pad(x, (totals[2] // 2, totals[2] - totals[2] // 2, totals[1] // 2,
                        totals[1] - totals[1] // 2, totals[0] // 2, totals[0] - totals[0] // 2))
            padding = 0
        else:
            raise ValueError("%s: padding must be 'same', 'valid' or ints, got %r" % (fn, padding))
    pd, ph, pw = _triple(padding, fn + ": padding")
    n, c, d, h, w = x.shape
    if c != cg * int(groups):
        raise ShapeError("%s: input %s has %d channels, weight %s expects %d"
                         % (fn, tuple(input.shape), c, tuple(weight.shape), cg * int(groups)))
    if pd:
        from aicraft.nn.padding import pad
        x = pad(x, (0, 0, 0, 0, pd, pd))
    depth = x.shape[2]
    od = (depth - dd * (kd - 1) - 1) // sd + 1
    if od < 1:
        raise ShapeError("%s: kernel depth %d (dilation %d) is larger than the padded input depth "
                         "%d of %s" % (fn, kd, dd, depth, tuple(input.shape)))
    from aicraft.creation import stack
    taps = [x[:, :, t * dd: t * dd + sd * (od - 1) + 1: sd] for t in range(kd)]
    slab = stack(taps, 2)                                   # (N, C, kD, OD, H, W)
    slab = slab.permute(0, 3, 1, 2, 4, 5).reshape(n * od, c * kd, h, w)
    out = conv2d(slab, weight.reshape(f, cg * kd, kh, kw), bias, (sh, sw), (ph, pw), (dh, dw),
                 groups)
    out = out.reshape(n, od, f, *out.shape[-2:]).permute(0, 2, 1, 3, 4)
    return out.squeeze(0) if unbatched else out


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 3-D convolution of input (N, C_in, D, H, W) or (C_in, D, H, W) with weight
    (C_in, C_out/groups, kD, kH, kW), as torch's F.conv_transpose3d: conv3d (stride 1) of the
    input with zeros inserted between its elements, padded by dilation * (k - 1) - padding
    (plus output_padding after), with the filters flipped and in and out swapped."""
    fn = "conv_transpose3d"
    unbatched = _volume(input, fn)
    if not isinstance(weight, Tensor) or weight.ndim != 5:
        raise ShapeError("%s: weight must be (in_channels, out_channels/groups, kD, kH, kW)" % fn)
    import numpy as np
    from aicraft.nn.padding import _resample, pad
    x = input.unsqueeze(0) if unbatched else input
    s, p = _triple(stride, fn + ": stride"), _triple(padding, fn + ": padding")
    op, d = _triple(output_padding, fn + ": output_padding"), _triple(dilation, fn + ": dilation")
    g = _c_int(groups, fn + ": groups")
    cin, cout_g = weight.shape[:2]
    k = tuple(weight.shape[2:])
    if g < 1 or cin % g or x.shape[1] != cin:
        raise ShapeError("%s: input %s has %d channels, weight %s expects %d (groups %d)"
                         % (fn, tuple(input.shape), x.shape[1], tuple(weight.shape), cin, g))
    if min(s) < 1 or min(d) < 1 or min(p) < 0 or min(op) < 0 or \
            any(o >= st and o >= dl for o, st, dl in zip(op, s, d)):
        raise ValueError("%s: stride %s and dilation %s must be >= 1, padding %s >= 0 and "
                         "output_padding %s smaller than stride or dilation" % (fn, s, d, p, op))
    for i in range(3):                      # zeros between the elements: stride s
        n = x.shape[2 + i]
        if s[i] > 1 and n > 0:
            j = np.arange((n - 1) * s[i] + 1)
            x = _resample(x, 2 + i, np.where(j % s[i] == 0, j // s[i], -1))
    edges = [d[i] * (k[i] - 1) - p[i] for i in range(3)]
    x = pad(x, (edges[2], edges[2] + op[2], edges[1], edges[1] + op[1], edges[0], edges[0] + op[0]))
    flipped = weight
    for i in range(3):
        flipped = _resample(flipped, 2 + i, np.arange(k[i])[::-1].copy())
    flipped = flipped.reshape(g, cin // g, cout_g, *k).transpose(1, 2).reshape(g * cout_g,
                                                                                cin // g, *k)
    out = conv3d(x, flipped, bias, 1, 0, d, g)
    return out.squeeze(0) if unbatched else out


def _along(x, dim, fn):
    """Apply fn, a pool over the last dim of (.., L) as (M, 1, 1, L), along dim of x."""
    moved = x.transpose(dim, -1) if dim != x.ndim - 1 else x
    shape = moved.shape
    out = fn(moved.reshape(-1, 1, 1, shape[-1]))
    out = out.reshape(*shape[:-1], out.shape[-1])
    return out.transpose(dim, -1) if dim != x.ndim - 1 else out


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over kD x kH x kW windows, as torch's F.max_pool3d: three separable 1-d maxima,
    or with return_indices, torch's window scan (NumPy) and a gather at its indices."""
    fn = "max_pool3d"
    _volume(input, fn)
    from aicraft.nn import _integer
    from aicraft.nn.pooling import max_pool2d, pool_output_size
    k = _triple(kernel_size, fn + ": kernel_size")
    s = k if stride is None or stride == () or stride == [] else _triple(stride, fn + ": stride")
    p, d = _triple(padding, fn + ": padding"), _triple(dilation, fn + ": dilation")
    if input.dtype == "float32":
        out = input
        for i in range(3):
            out = _along(out, out.ndim - 3 + i,
                         lambda v, i=i: max_pool2d(v, (1, k[i]), (1, s[i]), (0, p[i]),
                                                   (1, d[i]), ceil_mode))
        if not return_indices:
            return out
        sizes = out.shape[-3:]
    else:                     # integers: torch's window scan, exact
        for i in range(3):
            if k[i] < 1 or s[i] < 1 or d[i] < 1 or p[i] < 0 or \
                    p[i] > (d[i] * (k[i] - 1) + 1) // 2:
                raise ValueError("%s: kernel %s, stride %s, dilation %s must be >= 1 and padding "
                                 "%s at most half the kernel" % (fn, k, s, d, p))
        sizes = [pool_output_size(input.shape[input.ndim - 3 + i], k[i], s[i], p[i], d[i],
                                  ceil_mode) for i in range(3)]
    index = _integer.max_pool_indices(input.detach().numpy(), k, s, p, d, sizes)
    out, at = _integer.gather_at(input, index, 3)
    return (out, at) if return_indices else out


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over kD x kH x kW windows, as torch's F.avg_pool3d (three separable 1-d means,
    each with torch's divisor rule for its dim)."""
    import numpy as np
    fn = "avg_pool3d"
    _volume(input, fn)
    from aicraft.nn.pooling import _divisors, _integer_avg_pool, avg_pool2d
    k = _triple(kernel_size, fn + ": kernel_size")
    s = k if stride is None or stride == () or stride == [] else _triple(stride, fn + ": stride")
    p = _triple(padding, fn + ": padding")
    if divisor_override is not None and _c_int(divisor_override, fn + ": divisor") == 0:
        raise ValueError("%s: divisor must be not zero" % fn)
    if input.dtype in ("int64", "uint8"):
        return _integer_avg_pool(fn, input, k, s, p, ceil_mode, count_include_pad,
                                 divisor_override)
    out, sizes = input, []
    for i in range(3):
        dim = out.ndim - 3 + i
        n = out.shape[dim]
        out = _along(out, dim, lambda v, i=i: avg_pool2d(v, (1, k[i]), (1, s[i]), (0, p[i]),
                                                          ceil_mode, count_include_pad))
        sizes.append(_divisors(n, k[i], s[i], p[i], out.shape[dim], count_include_pad))
    if divisor_override is not None:
        from aicraft.creation import from_numpy
        total = np.einsum("i,j,k->ijk", *[v.astype(np.float64) for v in sizes])
        out = out * from_numpy((total / float(divisor_override)).astype(np.float32))
    return out


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over the windows that split D x H x W into output_size cells (separable)."""
    import numpy as np
    fn = "adaptive_max_pool3d"
    _volume(input, fn)
    from aicraft.nn.pooling import adaptive_max_pool2d
    sizes = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size] * 3
    if len(sizes) != 3:
        raise ValueError("%s: output_size must be an int or 3 ints, got %r" % (fn, output_size))
    sizes = [input.shape[input.ndim - 3 + i] if v is None else _c_int(v, fn + ": output_size")
             for i, v in enumerate(sizes)]
    if not return_indices:
        out = input
        for i in range(3):
            out = _along(out, out.ndim - 3 + i,
                         lambda v, size=sizes[i]: adaptive_max_pool2d(v, (1, size)))
        return out
    if min(sizes) < 1:
        raise ValueError("%s: output_size %s must be >= 1" % (fn, sizes))
    x = input.detach().numpy()
    full = x.shape[-3:]
    bounds = [[(o * n // m, -(-(o + 1) * n // m)) for o in range(m)] for n, m in zip(full, sizes)]
    index = np.empty(x.shape[:-3] + tuple(sizes), dtype=np.int64)
    for i, (d0, d1) in enumerate(bounds[0]):      # a loop over output cells, not elements
        for j, (h0, h1) in enumerate(bounds[1]):
            for k, (w0, w1) in enumerate(bounds[2]):
                window = x[..., d0:d1, h0:h1, w0:w1].reshape(*x.shape[:-3], -1)
                at = np.argmax(window, -1)         # the first maximum; the first NaN wins
                dd, rest = np.divmod(at, (h1 - h0) * (w1 - w0))
                hh, ww = np.divmod(rest, w1 - w0)
                index[..., i, j, k] = ((d0 + dd) * full[1] + h0 + hh) * full[2] + w0 + ww
    from aicraft.nn import _integer
    return _integer.gather_at(input, index, 3)


# ---- modules -----------------------------------------------------------------

class Conv3d(Module):
    """3-D convolution over (N, C, D, H, W), as torch.nn.Conv3d (padding_mode 'zeros')."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError("Conv3d: padding_mode=%r is not supported by aicraft"
                                      % (padding_mode,))
        _set_channels(self, in_channels, out_channels, groups)
        self.kernel_size = _triple(kernel_size, "Conv3d: kernel_size")
        self.stride = _triple(stride, "Conv3d: stride")
        self.padding = padding if isinstance(padding, str) else _triple(padding, "Conv3d: padding")
        self.dilation = _triple(dilation, "Conv3d: dilation")
        self.padding_mode = padding_mode
        _set_weight(self, (self.out_channels, self.in_channels // self.groups), bias, device, dtype)

    def reset_parameters(self):
        import numpy as np
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * int(np.prod(self.kernel_size))
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return conv3d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                      self.groups)

    def extra_repr(self):
        return "%d, %d, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels,
                                                      self.kernel_size, self.stride)


class MaxPool3d(Module):
    """Max over 3-d windows, as torch.nn.MaxPool3d (return_indices not supported)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = bool(return_indices), bool(ceil_mode)

    def forward(self, input):
        return max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)


class AvgPool3d(Module):
    """Mean over 3-d windows, as torch.nn.AvgPool3d."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, bool(ceil_mode)
        self.count_include_pad, self.divisor_override = bool(count_include_pad), divisor_override

    def forward(self, input):
        return avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)


class AdaptiveMaxPool3d(Module):
    """Max over adaptive 3-d windows, as torch.nn.AdaptiveMaxPool3d."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, bool(return_indices)

    def forward(self, input):
        return adaptive_max_pool3d(input, self.output_size, self.return_indices)
