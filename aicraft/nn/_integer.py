"""_integer.py - the nn ops torch also computes on integer tensors (int64, uint8),
computed exactly in NumPy's int64 (wrapping on overflow as torch's does): conv2d and
conv_transpose2d (and through them conv1d, conv3d, conv_transpose1d), bilinear, the
max pools (torch's window scan) and avg_pool2d (sums divided with truncation toward
zero, as torch's integer division). The float32 paths stay libac's C kernels; these
are for correctness where a float32 kernel would round, and carry no gradient (integer
tensors have none). The loops run over kernel offsets, never over elements.
"""

from aicraft.creation import from_numpy
from aicraft.errors import ShapeError

_INTEGER = ("int64", "uint8")


def is_integer(*tensors):
    """True when any of tensors (None skipped) has an integer dtype."""
    return any(t is not None and t.dtype in _INTEGER for t in tensors)


def _array(t, fn, what):
    import numpy as np
    if t.dtype == "bool" or t.dtype == "float32":
        raise TypeError("%s: %s is %s while another argument is an integer tensor; torch needs "
                        "one dtype" % (fn, what, t.dtype))
    return t.numpy().astype(np.int64)


def _out(values, dtype):
    import numpy as np
    out = from_numpy(np.ascontiguousarray(values.astype(np.int64)))
    return out.to(dtype) if dtype != "int64" else out


def conv2d(input, weight, bias, stride, padding, dilation, groups, fn="conv2d"):
    import numpy as np
    x, w = _array(input, fn, "input"), _array(weight, fn, "weight")
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    if x.ndim != 4 or w.ndim != 4:
        raise ShapeError("%s: input %s and weight %s must be 4-d" % (fn, x.shape, w.shape))
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    if cg * groups != c or f % groups:
        raise ShapeError("%s: input has %d channels, weight %s expects %d" % (fn, c, w.shape,
                                                                           cg * groups))
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ShapeError("%s: kernel %dx%d is larger than the padded input" % (fn, kh, kw))
    out = np.zeros((n, f, oh, ow), dtype=np.int64)
    fg = f // groups
    for g in range(groups):
        xg, wg = x[:, g * cg:(g + 1) * cg], w[g * fg:(g + 1) * fg]
        for i in range(kh):
            for j in range(kw):
                window = xg[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                            j * dw: j * dw + sw * (ow - 1) + 1: sw]
                out[:, g * fg:(g + 1) * fg] += np.einsum("nchw,fc->nfhw", window, wg[:, :, i, j])
    if bias is not None:
        out += _array(bias, fn, "bias").reshape(1, -1, 1, 1)
    return _out(out[0] if unbatched else out, input.dtype)


def conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation,
                     fn="conv_transpose2d"):
    import numpy as np
    x, w = _array(input, fn, "input"), _array(weight, fn, "weight")
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    n, c, h, wd = x.shape
    cin, fg, kh, kw = w.shape
    if cin != c or c % groups:
        raise ShapeError("%s: input has %d channels, weight %s expects %d" % (fn, c, w.shape, cin))
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + oph
    full_w = (wd - 1) * sw + dw * (kw - 1) + 1 + opw
    out = np.zeros((n, fg * groups, full_h, full_w), dtype=np.int64)
    cg = c // groups
    for g in range(groups):
        xg, wg = x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                out[:, g * fg:(g + 1) * fg, i * dh: i * dh + sh * (h - 1) + 1: sh,
                    j * dw: j * dw + sw * (wd - 1) + 1: sw] += \
                    np.einsum("nchw,cf->nfhw", xg, wg[:, :, i, j])
    out = out[:, :, ph: full_h - ph, pw: full_w - pw]
    if out.shape[2] < 1 or out.shape[3] < 1:
        raise ShapeError("%s: input %s with this kernel, stride and padding gives an empty "
                         "output" % (fn, tuple(input.shape)))
    if bias is not None:
        out = out + _array(bias, fn, "bias").reshape(1, -1, 1, 1)
    return _out(out[0] if unbatched else out, input.dtype)


def bilinear(input1, input2, weight, bias):
    import numpy as np
    fn = "bilinear"
    a, b, w = _array(input1, fn, "input1"), _array(input2, fn, "input2"), _array(weight, fn, "weight")
    out = np.einsum("...i,oij,...j->...o", a, w, b)
    if bias is not None:
        out = out + _array(bias, fn, "bias")
    return _out(out, input1.dtype)


def max_pool_indices(x, k, s, p, d, out_sizes):
    """torch's scan for each window's first maximum over the trailing len(k) dims of x (any
    dtype; padding never wins), as indices into those dims flattened."""
    import numpy as np
    dims = len(k)
    sizes = x.shape[-dims:]
    lowest = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf
    best = np.full(x.shape[:-dims] + tuple(out_sizes), lowest, dtype=x.dtype)
    best_at = np.full(best.shape, -1, dtype=np.int64)
    grids = [np.arange(out_sizes[i]) * s[i] - p[i] for i in range(dims)]
    for offset in np.ndindex(*k):
        pos = [grids[i] + offset[i] * d[i] for i in range(dims)]
        inside = np.ones(tuple(out_sizes), dtype=bool)
        flat = np.zeros(tuple(out_sizes), dtype=np.int64)
        taken = []
        for i in range(dims):
            shape = [1] * dims
            shape[i] = -1
            ok = (pos[i] >= 0) & (pos[i] < sizes[i])
            inside &= ok.reshape(shape)
            flat = flat * sizes[i] + pos[i].reshape(shape)
            taken.append(np.clip(pos[i], 0, sizes[i] - 1).reshape(shape))
        v = x[(Ellipsis,) + tuple(np.broadcast_arrays(*taken))]
        nan = np.isnan(v) & ~np.isnan(best) if x.dtype.kind == "f" else False
        takes = inside & ((v > best) | nan | (best_at < 0))
        best = np.where(takes, v, best)
        best_at = np.where(takes, flat, best_at)
    return best_at


def gather_at(input, index, dims):
    """input's elements at index (into its trailing dims flattened), and index as a Tensor;
    the gradient (float input) goes exactly where the index points."""
    import numpy as np
    lead = tuple(input.shape[:-dims])
    flat = input.reshape(*lead, -1)
    at = from_numpy(np.ascontiguousarray(index.reshape(*lead, -1)))
    return flat.gather(len(lead), at).reshape(*index.shape), \
        from_numpy(np.ascontiguousarray(index))


def avg_pool(input, k, s, p, out_sizes, divisors):
    """Window sums over the trailing dims (zero padding), divided by divisors (broadcast to
    the output) with truncation toward zero, as torch's integer avg_pool."""
    import numpy as np
    x = input.numpy().astype(np.int64)
    dims = len(k)
    padded = np.pad(x, [(0, 0)] * (x.ndim - dims) + [
        (p[i], max(0, (out_sizes[i] - 1) * s[i] + k[i] - x.shape[x.ndim - dims + i] - p[i]))
        for i in range(dims)])
    total = np.zeros(x.shape[:-dims] + tuple(out_sizes), dtype=np.int64)
    for offset in np.ndindex(*k):
        index = tuple(slice(offset[i], offset[i] + s[i] * (out_sizes[i] - 1) + 1, s[i])
                      for i in range(dims))
        total += padded[(Ellipsis,) + index]
    quotient = np.abs(total) // np.abs(divisors)
    return _out(np.sign(total) * np.sign(divisors) * quotient, input.dtype)
