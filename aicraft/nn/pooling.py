"""pooling.py - the pools and their modules, with torch's signatures: max_pool1d/2d
(dilation, ceil_mode, return_indices), avg_pool1d/2d (ceil_mode, count_include_pad,
divisor_override), adaptive_avg_pool1d/2d, adaptive_max_pool1d/2d, lp_pool1d/2d,
max_unpool1d/2d; MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d,
AdaptiveMaxPool1d/2d, LPPool1d/2d, MaxUnpool1d/2d.

Each pool is one C call (libac's pool.c); the 1-d pools are the 2-d ones on
(N, C, 1, L). avg_pool2d's divisors other than kH * kW (count_include_pad=False,
ceil_mode's partial windows, divisor_override) are one multiply by a constant
(oh, ow) factor computed here.
"""
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _wrap
from aicraft.errors import ShapeError, raise_error
from aicraft.nn._checks import _c_int, _pair, _tensor_arg, _triple
from aicraft.nn.module import Module
from aicraft.tensor import Tensor

__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_avg_pool3d", "AdaptiveAvgPool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "lp_pool1d",
           "lp_pool2d", "max_unpool1d", "max_unpool2d", "max_unpool3d", "MaxUnpool3d", "max_pool1d_with_indices",
           "max_pool2d_with_indices", "adaptive_max_pool1d_with_indices",
           "adaptive_max_pool2d_with_indices", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "LPPool1d", "LPPool2d", "MaxUnpool1d", "MaxUnpool2d"]


def _single(value, what):
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ValueError("%s must be an int or a 1-tuple, got %r" % (what, value))
        value = value[0]
    return _c_int(value, what)


def _window(fn, kernel_size, stride, padding, dims):
    """(kernel, stride, padding) as pairs; 1-d ones as (1, k), (1, s), (0, p); 3-d ones as
    triples."""
    if dims == 3:
        k = _triple(kernel_size, fn + ": kernel_size")
        s = k if stride is None or stride == () or stride == [] else _triple(stride, fn + ": stride")
        return k, s, _triple(padding, fn + ": padding")
    if dims == 1:
        k = _single(kernel_size, fn + ": kernel_size")
        s = k if stride is None or stride == () or stride == [] else _single(stride, fn + ": stride")
        return (1, k), (1, s), (0, _single(padding, fn + ": padding"))
    k = _pair(kernel_size, fn + ": kernel_size")
    s = k if stride is None or stride == () or stride == [] else _pair(stride, fn + ": stride")
    return k, s, _pair(padding, fn + ": padding")


def _rank(input, fn, dims):
    """A 1-d pool's input is (N, C, L) or (C, L), a 3-d one's (N, C, D, H, W) or (C, D, H, W);
    the 2-d ones' C op checks its own."""
    _tensor_arg(input, fn, "input")
    if dims == 1 and input.ndim not in (2, 3):
        raise ShapeError("%s: input %s must be (N, C, L) or (C, L)" % (fn, tuple(input.shape)))
    if dims == 3 and input.ndim not in (4, 5):
        raise ShapeError("%s: input %s must be (N, C, D, H, W) or (C, D, H, W)"
                         % (fn, tuple(input.shape)))


def _finish(out, dims):
    return out.squeeze(-2) if dims == 1 else out


# ---- max -----------------------------------------------------------------------

def _max_pool(fn, dims, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    _rank(input, fn, dims)
    (kh, kw), (sh, sw), (ph, pw) = _window(fn, kernel_size, stride, padding, dims)
    dh, dw = (1, _single(dilation, fn + ": dilation")) if dims == 1 else \
        _pair(dilation, fn + ": dilation")
    x = input.unsqueeze(-2) if dims == 1 else input
    if x.dtype in ("int64", "uint8"):   # exact, by torch's window scan
        return _integer_max_pool(fn, dims, x, (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode,
                                 return_indices)
    if (dh, dw) == (1, 1) and not ceil_mode and not return_indices:
        p = lib.ac_max_pool2d(x._ptr, kh, kw, sh, sw, ph, pw)   # the recordable op
        if p:
            return _finish(_wrap(p), dims)
        raise_error(input)
    indices = ffi.new("AcTensor **") if return_indices else ffi.NULL
    p = lib.ac_max_pool2d_ex(x._ptr, kh, kw, sh, sw, ph, pw, dh, dw, 1 if ceil_mode else 0,
                             indices)
    if not p:
        raise_error(input)
    out = _finish(_wrap(p), dims)
    if return_indices:
        return out, _finish(_wrap(indices[0]), dims)
    return out


def pool_output_size(size, kernel, stride, pad, dil, ceil_mode):
    """torch's pooling_output_shape (libac's pool.c computes the same)."""
    span = size + 2 * pad - dil * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and out > 0 and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _integer_max_pool(fn, dims, x, k, s, p, d, ceil_mode, return_indices):
    from aicraft.nn import _integer
    if x.ndim not in (3, 4):
        raise ShapeError("%s: input %s must be (N, C, H, W) or (C, H, W)" % (fn, tuple(x.shape)))
    for i in range(2):
        if k[i] < 1 or s[i] < 1 or d[i] < 1 or p[i] < 0 or p[i] > (d[i] * (k[i] - 1) + 1) // 2:
            raise ValueError("%s: kernel %s, stride %s, dilation %s must be >= 1 and padding %s "
                             "at most half the kernel" % (fn, k, s, d, p))
    sizes = [pool_output_size(x.shape[-2 + i], k[i], s[i], p[i], d[i], ceil_mode)
             for i in range(2)]
    if min(sizes) < 1:
        raise ShapeError("%s: input %s gives an empty output" % (fn, tuple(x.shape)))
    index = _integer.max_pool_indices(x.numpy(), k, s, p, d, sizes)
    out, at = _integer.gather_at(x, index, 2)
    out, at = _finish(out, dims), _finish(at, dims)
    return (out, at) if return_indices else out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over kernel_size windows (stride defaults to kernel_size), as torch's F.max_pool2d;
    with return_indices, also each maximum's index in its H*W plane."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over windows of (N, C, L) or (C, L), as torch's F.max_pool1d."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _adaptive_sizes(fn, input, output_size, dims):
    if dims == 1:
        size = output_size[0] if isinstance(output_size, (tuple, list)) and \
            len(output_size) == 1 else output_size
        return 1, _c_int(input.shape[-1] if size is None else size, fn + ": output_size")
    if isinstance(output_size, (tuple, list)) and len(output_size) == 2 and None in output_size:
        output_size = tuple(input.shape[-2 + i] if s is None else s
                            for i, s in enumerate(output_size))
    return _pair(output_size, fn + ": output_size")


def _adaptive_max(fn, dims, input, output_size, return_indices):
    _rank(input, fn, dims)
    oh, ow = _adaptive_sizes(fn, input, output_size, dims)
    x = input.unsqueeze(-2) if dims == 1 else input
    indices = ffi.new("AcTensor **") if return_indices else ffi.NULL
    p = lib.ac_adaptive_max_pool2d(x._ptr, oh, ow, indices)
    if not p:
        raise_error(input)
    out = _finish(_wrap(p), dims)
    return (out, _finish(_wrap(indices[0]), dims)) if return_indices else out


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over the windows that split H x W into output_size cells, as torch's
    F.adaptive_max_pool2d."""
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over the windows that split L into output_size cells."""
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool1d(input, output_size, True)


# ---- average ---------------------------------------------------------------------

def _divisors(size, k, s, p, out, count_include_pad):
    """torch's avg_pool divisor along one axis, per output position."""
    import numpy as np
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    pool = end - start
    clipped = np.minimum(end, size) - np.maximum(start, 0)
    return pool if count_include_pad else clipped


def _avg_pool(fn, dims, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    import numpy as np
    _rank(input, fn, dims)
    (kh, kw), (sh, sw), (ph, pw) = _window(fn, kernel_size, stride, padding, dims)
    x = input.unsqueeze(-2) if dims == 1 else input
    if divisor_override is not None:
        divisor_override = _c_int(divisor_override, fn + ": divisor_override")
        if divisor_override == 0:
            raise ValueError("%s: divisor must be not zero" % fn)
    if x.dtype in ("int64", "uint8"):   # exact sums, torch's truncating division
        return _finish(_integer_avg_pool(fn, x, (kh, kw), (sh, sw), (ph, pw), ceil_mode,
                                         count_include_pad, divisor_override), dims)
    if ceil_mode:
        p = lib.ac_avg_pool2d_ex(x._ptr, kh, kw, sh, sw, ph, pw, 1)
    else:
        p = lib.ac_avg_pool2d(x._ptr, kh, kw, sh, sw, ph, pw)
    if not p:
        raise_error(input)
    out = _wrap(p)
    oh, ow = out.shape[-2:]
    h, w = x.shape[-2:]
    if divisor_override is not None:
        factor = np.full((oh, ow), kh * kw / divisor_override)
    else:
        div_h = _divisors(h, kh, sh, ph, oh, count_include_pad)
        div_w = _divisors(w, kw, sw, pw, ow, count_include_pad)
        factor = (kh * kw) / np.outer(div_h, div_w).astype(np.float64)
    if not np.all(factor == 1.0):
        from aicraft.creation import from_numpy
        out = out * from_numpy(factor.astype(np.float32))
    return _finish(out, dims)


def _integer_avg_pool(fn, x, k, s, p, ceil_mode, count_include_pad, divisor_override):
    import numpy as np
    from aicraft.nn import _integer
    dims = len(k)
    for i in range(dims):
        if k[i] < 1 or s[i] < 1 or p[i] < 0 or p[i] > k[i] // 2:
            raise ValueError("%s: kernel %s and stride %s must be >= 1 and padding %s at most "
                             "half the kernel" % (fn, k, s, p))
    sizes = [pool_output_size(x.shape[x.ndim - dims + i], k[i], s[i], p[i], 1, ceil_mode)
             for i in range(dims)]
    if min(sizes) < 1:
        raise ShapeError("%s: input %s gives an empty output" % (fn, tuple(x.shape)))
    if divisor_override is not None:
        divisors = np.full(sizes, divisor_override, dtype=np.int64)
    else:
        parts = [_divisors(x.shape[x.ndim - dims + i], k[i], s[i], p[i], sizes[i],
                           count_include_pad).astype(np.int64) for i in range(dims)]
        divisors = parts[0]
        for part in parts[1:]:
            divisors = np.multiply.outer(divisors, part)
    return _integer.avg_pool(x, k, s, p, sizes, divisors)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over kernel_size windows, as torch's F.avg_pool2d."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """Mean over windows of (N, C, L) or (C, L), as torch's F.avg_pool1d."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


def _adaptive_avg(input, sizes, fn):
    """adaptive average pooling of input (N, C, *spatial) to sizes (1, 2 or 3 dims)."""
    if input.ndim == 3 and len(sizes) == 1:
        return adaptive_avg_pool1d(input, sizes[0])
    if input.ndim == 4 and len(sizes) == 2:
        return adaptive_avg_pool2d(input, tuple(sizes))
    return _adaptive_avg_separable(input, sizes, fn)


def _adaptive_avg_separable(input, sizes, fn):
    """Adaptive averages one trailing dim at a time (they are separable): a resample whose
    taps are each window's elements, weighted 1/len, the shorter windows' spare taps reading
    a zero fill."""
    import numpy as np
    from aicraft.nn.padding import _resample
    _tensor_arg(input, fn, "input")
    k = len(sizes)
    if input.ndim < k + 1:
        raise ShapeError("%s: input %s has fewer than %d spatial dims" % (fn, tuple(input.shape), k))
    out = input
    for d, o in enumerate(sizes):
        dim = input.ndim - k + d
        n = input.shape[dim]
        o = _c_int(n if o is None else o, fn + ": output_size")
        if o < 1 or n < 1:
            raise ValueError("%s: output size %d and input size %d must be >= 1" % (fn, o, n))
        lo = np.arange(o) * n // o
        hi = -((-(np.arange(o) + 1) * n) // o)
        taps = int((hi - lo).max())
        index = lo[:, None] + np.arange(taps)[None, :]
        inside = index < hi[:, None]
        weight = np.where(inside, 1.0 / (hi - lo)[:, None], 0.0)
        out = _resample(out, dim, np.where(inside, index, -1), weight)
    return out


def adaptive_avg_pool3d(input, output_size):
    """Mean over the windows that split D x H x W into output_size cells."""
    sizes = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size] * 3
    if len(sizes) != 3:
        raise ValueError("adaptive_avg_pool3d: output_size must be an int or 3 ints, got %r"
                         % (output_size,))
    if input.ndim not in (4, 5):
        raise ShapeError("adaptive_avg_pool3d: input %s must be (N, C, D, H, W) or (C, D, H, W)"
                         % (tuple(input.shape),))
    return _adaptive_avg_separable(input, sizes, "adaptive_avg_pool3d")


def adaptive_avg_pool2d(input, output_size):
    """Mean over the windows that split H x W into output_size cells (an int, a pair,
    None in a pair keeping that size), as torch's F.adaptive_avg_pool2d."""
    fn = "adaptive_avg_pool2d"
    x = _tensor_arg(input, fn, "input")
    oh, ow = _adaptive_sizes(fn, input, output_size, 2) if input.ndim >= 2 else (0, 0)
    p = lib.ac_adaptive_avg_pool2d(x, oh, ow)
    if p:
        return _wrap(p)
    raise_error(input)


def adaptive_avg_pool1d(input, output_size):
    """Mean over the windows that split L into output_size cells."""
    fn = "adaptive_avg_pool1d"
    _rank(input, fn, 1)
    oh, ow = _adaptive_sizes(fn, input, output_size, 1)
    x = input.unsqueeze(-2)   # held: C reads it during the call
    p = lib.ac_adaptive_avg_pool2d(x._ptr, oh, ow)
    if p:
        return _wrap(p).squeeze(-2)
    raise_error(input)


# ---- power average and unpooling ---------------------------------------------------

def _lp_pool(fn, dims, input, norm_type, kernel_size, stride, ceil_mode):
    p = float(norm_type)
    (kh, kw), _, _ = _window(fn, kernel_size, stride, 0, dims)
    pooled = _avg_pool(fn, dims, input ** p, kernel_size, stride, 0, ceil_mode, True, None)
    return (pooled * float(kh * kw)) ** (1.0 / p)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each window)^(1/p), as torch's F.lp_pool2d."""
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each window)^(1/p), as torch's F.lp_pool1d."""
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def _max_unpool(fn, dims, input, indices, kernel_size, stride, padding, output_size):
    """Each value of input put at its index in a zero plane: a gather from input (with one
    zero appended per plane) by the inverse of indices, so the gradient is a scatter."""
    import numpy as np
    from aicraft.creation import cat, from_numpy, zeros
    _rank(input, fn, dims)
    if not isinstance(indices, Tensor) or indices.dtype != "int64":
        raise TypeError("%s: indices must be an int64 Tensor (from max_pool's return_indices)" % fn)
    if tuple(indices.shape) != tuple(input.shape):
        raise ValueError("%s: indices %s must have input's shape %s"
                         % (fn, tuple(indices.shape), tuple(input.shape)))
    ks, ss, ps = _window(fn, kernel_size, stride, padding, dims)
    spatial = input.shape[-dims:]
    default = [(spatial[d] - 1) * s - 2 * p + k for d, (k, s, p) in
               enumerate(list(zip(ks, ss, ps))[-dims:])]
    if output_size is not None:
        size = [int(v) for v in output_size][-dims:]
        if len(size) != dims:
            raise ValueError("%s: output_size must have %d or %d elements" % (fn, dims, dims + 2))
    else:
        size = default
    planes_shape = input.shape[:-dims]
    plane_in = int(np.prod(spatial))
    plane_out = int(np.prod(size))
    idx = indices.numpy().reshape(-1, plane_in)
    if idx.size and (idx.min() < 0 or idx.max() >= plane_out):
        raise IndexError("%s: found an invalid max index %d (output volumes are of size %s)"
                         % (fn, idx.max() if idx.max() >= plane_out else idx.min(),
                            "x".join(map(str, size))))
    # Where several inputs name one output (overlapping pools), the last one's value is
    # written, as torch writes them in order; every one of them gets that output's gradient,
    # as torch's backward (a gather) gives it: the others enter as x - x.detach(), zero.
    planes = idx.shape[0]
    rows = np.repeat(np.arange(planes), plane_in)
    targets = idx.reshape(-1)
    order = np.lexsort((-np.tile(np.arange(plane_in), planes), targets, rows))   # last p first
    ranked_rows, ranked_targets = rows[order], targets[order]
    starts = np.r_[True, (ranked_rows[1:] != ranked_rows[:-1]) |
                   (ranked_targets[1:] != ranked_targets[:-1])]
    group = np.cumsum(starts) - 1
    rank = np.arange(order.size) - np.flatnonzero(starts)[group]
    flat = input.reshape(-1, plane_in)
    padded = cat([flat, zeros(flat.shape[0], 1)], 1)
    out = None
    for level in range(int(rank.max()) + 1 if rank.size else 1):
        source = np.full((planes, plane_out), plane_in, dtype=np.int64)   # the zero
        pick = rank == level
        source[ranked_rows[pick], ranked_targets[pick]] = order[pick] % plane_in
        taken = padded.gather(1, from_numpy(source))
        out = taken if out is None else out + (taken - taken.detach())
    return out.reshape(*planes_shape, *size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: each value at its index, zeros elsewhere."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d: each value at its index, zeros elsewhere."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d: each value at its index, zeros elsewhere."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                       output_size)


# ---- modules -------------------------------------------------------------------

class _MaxPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = bool(return_indices)
        self.ceil_mode = bool(ceil_mode)

    def forward(self, input):
        return type(self)._fn(input, self.kernel_size, self.stride, self.padding, self.dilation,
                              ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s" % (
            self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class MaxPool2d(_MaxPoolNd):
    """Max over kernel_size windows (stride defaults to kernel_size), as torch.nn.MaxPool2d."""
    _fn = max_pool2d


class MaxPool1d(_MaxPoolNd):
    """Max over windows of (N, C, L), as torch.nn.MaxPool1d."""
    _fn = max_pool1d


class AvgPool2d(Module):
    """Mean over kernel_size windows, as torch.nn.AvgPool2d."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = bool(ceil_mode)
        self.count_include_pad = bool(count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, input):
        return avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s" % (self.kernel_size, self.stride,
                                                          self.padding)


class AvgPool1d(Module):
    """Mean over windows of (N, C, L), as torch.nn.AvgPool1d."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size, "AvgPool1d: kernel_size"),
        self.stride = (_single(stride, "AvgPool1d: stride"),) if stride is not None \
            else self.kernel_size
        self.padding = _single(padding, "AvgPool1d: padding"),
        self.ceil_mode = bool(ceil_mode)
        self.count_include_pad = bool(count_include_pad)

    def forward(self, input):
        return avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s" % (self.kernel_size, self.stride,
                                                          self.padding)


class _AdaptiveNd(Module):
    _fn = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self)._fn(input, self.output_size)

    def extra_repr(self):
        return "output_size=%s" % (self.output_size,)


class AdaptiveAvgPool2d(_AdaptiveNd):
    """Mean over the windows that split H x W into output_size cells, as
    torch.nn.AdaptiveAvgPool2d; AdaptiveAvgPool2d(1) is global average pooling."""
    _fn = adaptive_avg_pool2d


class AdaptiveAvgPool1d(_AdaptiveNd):
    """Mean over the windows that split L into output_size cells."""
    _fn = adaptive_avg_pool1d


class AdaptiveAvgPool3d(_AdaptiveNd):
    """Mean over the windows that split D x H x W into output_size cells."""
    _fn = adaptive_avg_pool3d


class _AdaptiveMaxNd(_AdaptiveNd):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = bool(return_indices)

    def forward(self, input):
        return type(self)._fn(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxNd):
    """Max over the windows that split H x W into output_size cells."""
    _fn = adaptive_max_pool2d


class AdaptiveMaxPool1d(_AdaptiveMaxNd):
    """Max over the windows that split L into output_size cells."""
    _fn = adaptive_max_pool1d


class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = bool(ceil_mode)

    def forward(self, input):
        return type(self)._fn(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return "norm_type=%s, kernel_size=%s, stride=%s, ceil_mode=%s" % (
            self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """Power-average pooling, as torch.nn.LPPool2d."""
    _fn = lp_pool2d


class LPPool1d(_LPPoolNd):
    """Power-average pooling, as torch.nn.LPPool1d."""
    _fn = lp_pool1d


class _MaxUnpoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s" % (self.kernel_size, self.stride,
                                                          self.padding)


class MaxUnpool2d(_MaxUnpoolNd):
    """The inverse of MaxPool2d given its indices, as torch.nn.MaxUnpool2d."""
    _fn = max_unpool2d


class MaxUnpool3d(_MaxUnpoolNd):
    """The inverse of MaxPool3d given its indices, as torch.nn.MaxUnpool3d."""
    _fn = max_unpool3d


class MaxUnpool1d(_MaxUnpoolNd):
    """The inverse of MaxPool1d given its indices, as torch.nn.MaxUnpool1d."""
    _fn = max_unpool1d
