"""reductions.py - PyTorch's reductions, order statistics and scans beyond sum/mean/max:
any/all, prod, logsumexp, count_nonzero, nansum/nanmean, var_mean/std_mean, aminmax,
median/nanmedian, kthvalue, mode, quantile/nanquantile, unique(_consecutive), bincount,
histc, searchsorted/bucketize, msort, cummax/cummin, cumprod, logcumsumexp, diff.

The ordering and the scans run in C (ops/order.c, ops/scan.c): int64 is ordered and
multiplied as int64, never through float32. The rest composes existing ops, so
gradients come with them. Each is a module function (ac.median(x)) and, where PyTorch
has one, a Tensor method bound by bind(). Products and norms: products.py and linalg.py.
"""
import builtins
import math
from collections import namedtuple

from aicraft import dtypes
from aicraft._args import _as_dim, _as_int, _scalar
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live, _wrap
from aicraft.errors import ShapeError, raise_error
from aicraft.tensor import Tensor

_NULL = ffi.NULL
_values_indices = {name: namedtuple(name, ["values", "indices"])
                   for name in ("median", "nanmedian", "kthvalue", "mode", "cummax", "cummin")}
_aminmax = namedtuple("aminmax", ["min", "max"])


# ---- helpers ---------------------------------------------------------------------

def _wrapped(p, *tensors):
    if p:
        return _wrap(p)
    raise_error(*tensors)


def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError("%s(): argument '%s' must be a Tensor, not %s" % (op, what, type(x).__name__))
    _live(x)
    return x


def _is_float(x):
    return _live(x).dtype == 0


def _need_float(x, op):
    """x, which must be float32 (PyTorch refuses integer inputs for op)."""
    if not _is_float(x):
        raise TypeError("%s: expected a floating point input, got %s" % (op, x.dtype))
    return x


def _as_float(x):
    """Integer and bool inputs of float math promote to float32, as PyTorch's do."""
    return x if _is_float(x) else x.float()


def _dim_list(dim, ndim, op):
    """dim (None, an int, or a sequence) as a sorted list of distinct dims in [0, ndim)."""
    rank = max(ndim, 1)
    if dim is None:
        return list(range(ndim))
    dims = [_as_dim(d) for d in dim] if isinstance(dim, (tuple, list)) else [_as_dim(dim)]
    out = []
    for d in dims:
        if not -rank <= d < rank:
            raise IndexError("%s: dim %d is out of range for a %d-d tensor" % (op, d, ndim))
        d %= rank
        if d in out:
            raise RuntimeError("%s: dim %d appears multiple times in the list of dims" % (op, d))
        out.append(d)
    return sorted(d for d in out if d < ndim) if ndim else []


def _checked_dtype(dtype, op):
    d = dtypes.checked(dtype, op)
    return d


def _cast(x, dtype, op):
    if dtype is None:
        return x
    d = _checked_dtype(dtype, op)
    return x if d.code == _live(x).dtype else x.to(d)


# ---- any, all, prod, count_nonzero, logsumexp, nansum, nanmean --------------------

def _truth(x, dim, keepdim, op, want_all):
    x = _tensor(x, op)
    p = _live(x)
    dims = _dim_list(dim, p.ndim, op)
    flags = (x == 0) if want_all else (x != 0)       # bool: the elements that decide
    if dim is None:
        count = flags.sum()
        if keepdim:
            count = count.reshape([1] * p.ndim)
    elif not dims:                                   # a 0-d input, dim 0
        count = flags.long()
    else:
        count = flags.sum(dims, keepdim)
    out = (count == 0) if want_all else (count > 0)
    return out.to(dtypes.uint8) if p.dtype == 3 else out


def any(input, dim=None, keepdim=False, *, out=None):
    """Whether any element (along dim: an int or a tuple) is nonzero; bool (uint8 for uint8)."""
    _no_out(out, "any")
    return _truth(input, dim, keepdim, "any", False)


def all(input, dim=None, keepdim=False, *, out=None):
    """Whether every element (along dim) is nonzero; bool (uint8 for uint8)."""
    _no_out(out, "all")
    return _truth(input, dim, keepdim, "all", True)


def _no_out(out, op):
    if out is not None:
        raise NotImplementedError("%s: out= is not supported; assign the result" % op)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """The product of all elements, or along dim (an int). float32 stays float32 (with a
    gradient exact at zeros); integers and bool give int64."""
    x = _cast(_tensor(input, "prod"), dtype, "prod")
    if dim is None:
        flat = x.reshape(-1)      # held in a local: the C call must not outlive it
        out = _wrapped(lib.ac_prod(flat._ptr, 0, 0), x)
        out = out.reshape([1] * x.ndim) if keepdim else out
    elif isinstance(dim, (tuple, list)):
        raise TypeError("prod: dim must be an int, not %s" % type(dim).__name__)
    else:
        out = _wrapped(lib.ac_prod(x._ptr, _as_dim(dim), 1 if keepdim else 0), x)
    # dtype= bool or uint8: the int64 product taken modulo that type (exact: wrapping commutes)
    return out if dtype is None or _live(x).dtype in (0, 1) else out.to(x.dtype)


def count_nonzero(input, dim=None):
    """The number of nonzero elements (along dim: an int or a tuple), int64."""
    x = _tensor(input, "count_nonzero")
    dims = _dim_list(dim, x.ndim, "count_nonzero")
    if dim is not None and not dims:
        return (x != 0).long()
    return (x != 0).sum(dims if dims else None)


def logsumexp(input, dim=None, keepdim=False):
    """log(sum(exp(input))) over dim (an int or a tuple; None or (): all), computed
    stably; integer inputs give float32."""
    x = _as_float(_tensor(input, "logsumexp"))
    dims = _dim_list(dim if dim != () else None, x.ndim, "logsumexp")
    if x.ndim == 0:
        return x.clone()
    if x.numel() == 0:
        return x.sum(dims, keepdim).log()
    with _no_grad():
        m = x.amax(dims, True)
        m = m.masked_fill((m == math.inf) | (m == -math.inf) | (m != m), 0.0)
    out = (x - m).exp().sum(dims, True).log() + m
    return out if keepdim else out.squeeze(dims)


def _no_grad():
    from aicraft.autograd import no_grad
    return no_grad()


def _isnan(x):
    return x != x


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum with NaN counted as zero."""
    x = _cast(_tensor(input, "nansum"), dtype, "nansum")
    if _is_float(x):
        x = x.masked_fill(_isnan(x), 0.0)
    return x.sum(dim, keepdim)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """mean over the elements that are not NaN (NaN when all are)."""
    x = _need_float(_cast(_tensor(input, "nanmean"), dtype, "nanmean"), "nanmean")
    valid = ~_isnan(x)
    return nansum(x, dim, keepdim) / valid.sum(dim, keepdim).float()


# ---- var, std and their means, aminmax -------------------------------------------

def _spread_args(op, dim, unbiased, keepdim, correction):
    """PyTorch's overloads: (dim, unbiased, keepdim), (unbiased), (dim, *, correction, keepdim)."""
    if isinstance(dim, bool):           # var(x, True): the unbiased overload
        if unbiased is not None and not isinstance(unbiased, bool):
            raise TypeError("%s: bad arguments" % op)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError("%s: pass unbiased or correction, not both" % op)
    if unbiased is not None:
        correction = 1 if unbiased else 0
    if correction is None:
        correction = 1
    c = _scalar(correction)
    if c is None:
        raise TypeError("%s: correction must be a number, not %s" % (op, type(correction).__name__))
    return dim, c, keepdim


def _count(x, dim):
    if dim is None:
        return x.numel()
    n = 1
    for d in (dim if isinstance(dim, (tuple, list)) else (dim,)):
        n *= x.shape[_as_dim(d)] if x.ndim else 1
    return n


def _spread(name, method):
    def spread(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
               keepdims=None, ddof=None):
        if axis is not None:
            dim = axis
        if keepdims is not None:
            keepdim = keepdims
        if ddof is not None:
            correction = ddof
        dim, c, keepdim = _spread_args(name, dim, unbiased, keepdim, correction)
        x = _tensor(self, name)
        if not _is_float(x):
            raise TypeError("%s: expected a floating point input, got %s (PyTorch refuses it too)"
                            % (name, x.dtype))
        if c == int(c) and c >= 0:
            return method(x, dim, keepdim, correction=int(c))
        # a fractional or negative correction: the biased variance rescaled to N - c
        # (a divisor <= 0 gives inf, or NaN for a zero sum, as PyTorch's)
        n = _count(x, dim)
        v = _var_method(x, dim, keepdim, correction=0)
        v = v * (n / (n - c)) if n - c > 0 else v * math.inf
        return v.sqrt() if name == "std" else v
    spread.__name__ = name
    spread.__doc__ = ("%s over dim (int or tuple; None: all) with Bessel's correction (default 1); "
                      "PyTorch's overloads (dim, unbiased, keepdim) and (unbiased) too." % name)
    return spread


_var_method, _std_method = Tensor.var, Tensor.std
var = _spread("var", _var_method)
std = _spread("std", _std_method)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over dim, as var."""
    v = var(input, dim, unbiased, keepdim, correction=correction)
    d = None if isinstance(dim, bool) else dim
    return v, input.mean(d, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over dim, as std."""
    s = std(input, dim, unbiased, keepdim, correction=correction)
    d = None if isinstance(dim, bool) else dim
    return s, input.mean(d, keepdim)


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) of all elements or along dim, as a namedtuple."""
    x = _tensor(input, "aminmax")
    if x.numel() == 0 and dim is None:
        raise RuntimeError("aminmax: cannot compute aminmax of an empty tensor")
    return _aminmax(x.amin(dim, keepdim), x.amax(dim, keepdim))


# ---- order statistics -------------------------------------------------------------

def _picked(op, x, dim, keepdim, call):
    """(values, indices) from call(ptr, dim, keepdim, indices**), 0-d inputs as 1-element rows."""
    p = _live(x)
    d = _as_dim(dim)
    if p.ndim == 0:
        if d not in (0, -1):
            raise IndexError("%s: dim %d is out of range for a 0-d tensor" % (op, d))
        v, i = _picked(op, x.reshape(1), 0, False, call)
        return _values_indices[op](v.reshape(()), i.reshape(()))
    indices = ffi.new("AcTensor **")
    values = call(p, d, 1 if keepdim else 0, indices)
    if not values:
        raise_error(x)
    return _values_indices[op](_wrap(values), _wrap(indices[0]))


def _global_pick(op, x, call):
    if x.numel() == 0:
        if _is_float(x):
            from aicraft.creation import tensor
            return tensor(math.nan)
        raise IndexError("%s: cannot compute the %s of an empty %s tensor" % (op, op, x.dtype))
    return _picked(op, x.reshape(-1), 0, False, call).values.reshape(())


def median(input, dim=None, keepdim=False):
    """The lower median of all elements (NaN if there is one), or along dim as
    (values, indices)."""
    x = _tensor(input, "median")
    call = lambda p, d, k, i: lib.ac_median_dim(p, d, k, 0, i)   # noqa: E731
    if dim is None:
        return _global_pick("median", x, call)
    return _picked("median", x, dim, keepdim, call)


def nanmedian(input, dim=None, keepdim=False):
    """median ignoring NaN (NaN where every element is)."""
    x = _tensor(input, "nanmedian")
    call = lambda p, d, k, i: lib.ac_median_dim(p, d, k, 1, i)   # noqa: E731
    if dim is None:
        return _global_pick("nanmedian", x, call)
    return _picked("nanmedian", x, dim, keepdim, call)


def kthvalue(input, k, dim=-1, keepdim=False):
    """(values, indices) of the k-th smallest element (k from 1) along dim."""
    x = _tensor(input, "kthvalue")
    k = _as_int(k, "k")
    return _picked("kthvalue", x, dim, keepdim, lambda p, d, kd, i: lib.ac_kthvalue(p, k, d, kd, i))


def mode(input, dim=-1, keepdim=False):
    """(values, indices) of the most frequent value along dim (the smallest of equally
    frequent ones, at its last position)."""
    return _picked("mode", _tensor(input, "mode"), dim, keepdim, lib.ac_mode)


def _cumulative_pick(op, largest):
    def method(input, dim):
        x = _tensor(input, op)
        p = _live(x)
        d = _as_dim(dim)
        if p.ndim == 0:
            if d not in (0, -1):
                raise IndexError("%s: dim %d is out of range for a 0-d tensor" % (op, d))
            v, i = method(x.reshape(1), 0)
            return _values_indices[op](v.reshape(()), i.reshape(()))
        indices = ffi.new("AcTensor **")
        values = lib.ac_cummax(p, d, largest, indices)
        if not values:
            raise_error(x)
        return _values_indices[op](_wrap(values), _wrap(indices[0]))
    method.__name__ = op
    method.__doc__ = "(values, indices) of the running %s along dim." % ("max" if largest else "min")
    return method


cummax = _cumulative_pick("cummax", 1)
cummin = _cumulative_pick("cummin", 0)


def msort(input):
    """input sorted along dim 0."""
    return _tensor(input, "msort").sort(0).values


def _sorted_rows(x, dim, op):
    """x sorted along dim moved last (None: flattened), and the output's reduced shape."""
    if dim is None:
        return x.reshape(-1).sort(-1).values, [], x.ndim
    d = _as_dim(dim)
    nd = max(x.ndim, 1)
    if not -nd <= d < nd:
        raise IndexError("%s: dim %d is out of range for a %d-d tensor" % (op, d, x.ndim))
    d %= nd
    if x.ndim == 0:
        return x.reshape(1).sort(-1).values, [], 0
    moved = x.movedim(d, -1) if hasattr(x, "movedim") else _move_last(x, d)
    return moved.sort(-1).values, list(moved.shape[:-1]), d


def _move_last(x, d):
    order = [i for i in range(x.ndim) if i != d] + [d]
    return x.permute(*order)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op, input, q, dim, keepdim, interpolation, ignore_nan):
    from aicraft.creation import tensor
    from aicraft.indexing import where
    x = _tensor(input, op)
    if not _is_float(x):
        raise TypeError("%s: input must be a floating point tensor, got %s" % (op, x.dtype))
    if interpolation not in _INTERPOLATIONS:
        raise ValueError("%s: interpolation must be one of %s, got %r" % (op, _INTERPOLATIONS, interpolation))
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if _scalar(q) is None:
            raise TypeError("%s: q must be a number or a tensor" % op)
        qt = tensor([float(q)])
    else:
        if q.ndim > 1:
            raise ValueError("%s: q must be a scalar or a 1-d tensor" % op)
        scalar_q = q.ndim == 0
        qt = _as_float(q).reshape(-1)        # differentiable in q too, as PyTorch
    qv = qt.detach().numpy()
    if qv.size and (not ((qv >= 0) & (qv <= 1)).all()):
        raise ValueError("%s: q values must be in the range [0, 1]" % op)
    if x.numel() == 0 and dim is None:
        raise IndexError("%s: input tensor must be non-empty" % op)
    rows, kept, d = _sorted_rows(x, dim, op)
    n = rows.shape[-1]
    if n == 0:
        raise IndexError("%s: input tensor must be non-empty along dim" % op)
    nq = qt.shape[0]
    flat = rows.reshape(-1, 1, n)                               # (R, 1, n)
    r = flat.shape[0]
    nan_count = _isnan(flat.detach()).sum(-1, True)            # (R, 1, 1) int64
    q3 = qt.reshape(1, nq, 1)
    if ignore_nan:
        ranks = q3 * (n - nan_count - 1).float()
        ranks = ranks.masked_fill(ranks < 0, 0.0)
    else:
        ranks = (q3 * float(n - 1)).expand(r, nq, 1)
        ranks = ranks.masked_fill((nan_count > 0).expand(r, nq, 1), float(n - 1))
    if interpolation == "nearest":
        ranks = _round_half_even(ranks)
    below = ranks.long()                                        # ranks >= 0: truncation floors
    weights = ranks - below.float()
    above = below + (weights > 0).long()
    if interpolation == "lower":
        above = below
    elif interpolation == "higher":
        below = above
    values = flat.expand(r, nq, n)
    lo = values.gather(-1, below)
    hi = values.gather(-1, above)
    if interpolation in ("linear", "midpoint"):
        if interpolation == "midpoint":
            weights = where(weights > 0, 0.5, 0.0)
        # PyTorch's lerp: from the nearer end, so w = 1 gives hi exactly
        out = where(weights < 0.5, lo + weights * (hi - lo), hi - (hi - lo) * (1.0 - weights))
    else:
        out = lo
    out = out.reshape(r, nq)
    if dim is None:
        shape = [1] * x.ndim if keepdim else []
    else:
        shape = list(kept)
        if keepdim and x.ndim:
            shape.insert(d, 1)
    out = out.transpose(0, 1).reshape([nq] + shape)
    return out.reshape(shape) if scalar_q else out


def _round_half_even(t):
    """t rounded half to even, as PyTorch's round (index math on a small detached tensor)."""
    import numpy as np
    from aicraft.creation import tensor
    return tensor(np.round(t.detach().numpy()))


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The q-th quantiles (q a number in [0, 1] or a 1-d tensor of them, whose dim comes
    first in the result) of all elements or along dim; NaN where a row has one."""
    _no_out(out, "quantile")
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """quantile ignoring NaN (NaN where a row is all NaN)."""
    _no_out(out, "nanquantile")
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# ---- unique, bincount, histc, searchsorted ---------------------------------------

def _unique(op, x, consecutive, return_inverse, return_counts, dim):
    inverse = ffi.new("AcTensor **") if return_inverse else _NULL
    counts = ffi.new("AcTensor **") if return_counts else _NULL
    if dim is None:
        values = lib.ac_unique(_live(x), consecutive, inverse, counts)
    else:
        values = lib.ac_unique_dim(_live(x), _as_dim(dim), consecutive, inverse, counts)
    if not values:
        raise_error(x)
    out = [_wrap(values)]
    if return_inverse:
        out.append(_wrap(inverse[0]))
    if return_counts:
        out.append(_wrap(counts[0]))
    return out[0] if len(out) == 1 else tuple(out)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements, sorted (as PyTorch's CPU unique, also for sorted=False), with
    the inverse indices (input's shape) and counts when asked."""
    return _unique("unique", _tensor(input, "unique"), 0, return_inverse, return_counts, dim)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal neighbours in the flattened input, once."""
    return _unique("unique_consecutive", _tensor(input, "unique_consecutive"), 1, return_inverse,
                   return_counts, dim)


def bincount(input, weights=None, minlength=0):
    """Counts of each non-negative integer of 1-d input (int64), or sums of weights (float32)."""
    x = _tensor(input, "bincount")
    w = _NULL
    if weights is not None:
        weights = _tensor(weights, "bincount", "weights")
        if not _is_float(weights):
            raise TypeError("bincount: weights of %s are not supported (PyTorch gives float64, which "
                            "aicraft does not compute with); pass float32 weights" % weights.dtype)
        w = _live(weights)
    if _is_float(x):
        raise TypeError("bincount: input must be an integer tensor, got float32")
    return _wrapped(lib.ac_bincount(_live(x), w, _as_int(minlength, "minlength")), x, weights)


def histc(input, bins=100, min=0, max=0):
    """Histogram of float32 input in bins equal bins over [min, max] (both 0: the data's range)."""
    x = _tensor(input, "histc")
    if not _is_float(x):
        raise TypeError("histc: input must be float32, got %s" % x.dtype)
    lo, hi = _scalar(min), _scalar(max)
    if lo is None or hi is None:
        raise TypeError("histc: min and max must be numbers")
    return _wrapped(lib.ac_histc(_live(x), _as_int(bins, "bins"), lo, hi), x)


def _common(a, b):
    """a and b in the dtype PyTorch compares them in: float32 if either is, else int64."""
    if _is_float(a) or _is_float(b):
        return _as_float(a), _as_float(b)
    da, db = _live(a).dtype, _live(b).dtype
    if da == db:
        return a, b
    return a.long(), b.long()


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None,
                 out=None):
    """Where each of input would go in sorted_sequence's last dim (int64); right= or side=
    'right' puts it after equal elements."""
    from aicraft.creation import tensor
    _no_out(out, "searchsorted")
    if out_int32:
        raise NotImplementedError("searchsorted: out_int32=True is not supported (aicraft holds no int32 "
                                  "tensors); leave it False for int64 positions")
    seq = _tensor(sorted_sequence, "searchsorted", "sorted_sequence")
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError("searchsorted: side must be 'left' or 'right', got %r" % (side,))
        if right and side == "left":
            raise ValueError("searchsorted: side='left' and right=True contradict each other")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    if scalar:
        if _scalar(input) is None:
            raise TypeError("searchsorted: input must be a Tensor or a number")
        values = tensor(input) if not isinstance(input, bool) else tensor(int(input))
    else:
        values = input
    if sorter is not None:
        sorter = _tensor(sorter, "searchsorted", "sorter")
        if sorter.shape != seq.shape:
            raise ShapeError("searchsorted: sorter %s must have sorted_sequence's shape %s"
                             % (sorter.shape, seq.shape))
        seq = seq.gather(-1, sorter)
    seq, values = _common(seq, values)
    if seq.ndim > 1 and values.ndim == 0:
        raise ShapeError("searchsorted: a scalar input needs a 1-d sorted_sequence")
    return _wrapped(lib.ac_searchsorted(_live(seq), _live(values), 1 if right else 0), seq, values)


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The bucket of each element of input among 1-d boundaries (searchsorted with the roles swapped)."""
    b = _tensor(boundaries, "bucketize", "boundaries")
    if b.ndim != 1:
        raise ShapeError("bucketize: boundaries must be 1-d, got %s" % (b.shape,))
    return searchsorted(b, input, out_int32=out_int32, right=right, out=out)


# ---- scans ------------------------------------------------------------------------

def cumprod(input, dim, *, dtype=None, out=None):
    """The running product along dim (int64 for integers and bool, as PyTorch)."""
    _no_out(out, "cumprod")
    x = _cast(_tensor(input, "cumprod"), dtype, "cumprod")
    return _wrapped(lib.ac_cumprod(_live(x), _as_dim(dim)), x)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along dim, computed stably (float32; integers promote)."""
    x = _as_float(_tensor(input, "logcumsumexp"))
    return _wrapped(lib.ac_logcumsumexp(_live(x), _as_dim(dim)), x)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim, after prepend/append (joined along dim);
    bool inputs give input[i+1] != input[i]."""
    from aicraft.creation import cat
    x = _tensor(input, "diff")
    if x.ndim == 0:
        raise RuntimeError("diff: expects input to be at least one-dimensional")
    n = _as_int(n, "n")
    if n < 0:
        raise ValueError("diff: order n must be non-negative but got %d" % n)
    d = _as_dim(dim)
    if not -x.ndim <= d < x.ndim:
        raise IndexError("diff: dim %d is out of range for a %d-d tensor" % (d, x.ndim))
    d %= x.ndim
    if n == 0:
        return x
    parts = []
    for extra, what in ((prepend, "prepend"), (append, "append")):
        if extra is not None and not isinstance(extra, Tensor):
            from aicraft.creation import tensor
            shape = list(x.shape)
            shape[d] = 1
            extra = tensor(extra, dtype=x.dtype).expand(*shape)
        parts.append(extra)
    if parts[0] is not None or parts[1] is not None:
        x = cat([t for t in (parts[0], x, parts[1]) if t is not None], d)
    for _ in range(n):
        size = x.shape[d]
        if size == 0:
            break
        head = (slice(None),) * d
        later, earlier = x[head + (slice(1, None),)], x[head + (slice(0, size - 1),)]
        x = (later != earlier) if _live(x).dtype == 2 else later - earlier
    return x


_histogram = namedtuple("histogram", ["hist", "bin_edges"])


def _linspace32(lo, hi, steps):
    """PyTorch's float32 linspace: from the start in the first half, from the end after."""
    import numpy as np
    lo, hi = np.float32(lo), np.float32(hi)
    step = (hi - lo) / np.float32(steps - 1) if steps > 1 else np.float32(0)
    i = np.arange(steps)
    first = lo + step * i.astype(np.float32)
    second = hi - step * (steps - 1 - i).astype(np.float32)
    return np.where(i < steps // 2, first, second).astype(np.float32)


def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges) of float32 input: bins equal bins over range (default the data's
    span) or the edges in a bins tensor; the last bin includes its right edge; weight sums
    weights instead of counting; density divides by the total times the bin width."""
    from aicraft.creation import tensor
    _no_out(out, "histogram")
    x = _need_float(_tensor(input, "histogram"), "histogram").reshape(-1)
    if isinstance(bins, Tensor):
        edges = _need_float(bins, "histogram")
        if edges.ndim != 1 or edges.shape[0] < 1:
            raise ShapeError("histogram: bins must be a 1-d tensor of edges, got %s" % (bins.shape,))
    else:
        nb = _as_int(bins, "bins")
        if nb <= 0:
            raise ValueError("histogram: bins must be > 0, got %d" % nb)
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif x.numel():
            lo, hi = x.amin().item(), x.amax().item()
        else:
            lo, hi = 0.0, 0.0
        if lo > hi:
            raise ValueError("histogram: max must be larger than min, got range (%g, %g)" % (lo, hi))
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError("histogram: range of [%g, %g] is not finite" % (lo, hi))
        if lo == hi:
            lo, hi = (0.0, 1.0) if not x.numel() and range is None else (lo - 0.5, hi + 0.5)
        edges = tensor(_linspace32(lo, hi, nb + 1))
    nb = edges.shape[0] - 1
    last = edges[-1:]
    position = bucketize(x, edges, right=True) - 1
    position = position - (x == last).long()                    # the right edge: the last bin
    valid = (position >= 0) & (position < nb) & (x <= last)
    w = None
    if weight is not None:
        w = _need_float(_tensor(weight, "histogram", "weight"), "histogram").reshape(-1)
        if w.numel() != x.numel():
            raise ShapeError("histogram: weight must have input's shape")
        w = w[valid]
    if nb == 0:
        hist = tensor([], dtype=dtypes.float32)
    else:
        hist = bincount(position[valid], w, nb)
        hist = hist if _is_float(hist) else hist.float()
    if density:
        widths = edges[1:] - edges[:-1]
        hist = hist / (hist.sum() * widths)
    return _histogram(hist, edges)


# ---- statistics of samples, integrals, membership -----------------------------------

def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (observations in columns; a
    1-d input is one variable), with frequency and analytic weights as NumPy's."""
    x = _as_float(_tensor(input, "cov"))
    if x.ndim > 2:
        raise ShapeError("cov: expected a 1-d or 2-d input, got %s" % (x.shape,))
    m = x.reshape(1, -1) if x.ndim < 2 else x
    n = m.shape[1]
    w = None
    for weights, name in ((fweights, "fweights"), (aweights, "aweights")):
        if weights is None:
            continue
        weights = _tensor(weights, "cov", name)
        if weights.ndim > 1 or weights.numel() != n:
            raise ShapeError("cov: %s must be 1-d with %d entries, got %s" % (name, n, weights.shape))
        if name == "fweights" and _is_float(weights):
            raise TypeError("cov: fweights must be integers")
        weights = _as_float(weights)
        w = weights if w is None else w * weights
    if w is None:
        avg = m.mean(1, keepdim=True)
        fact = float(n - correction)
        xm = m - avg
        c = xm.matmul(xm.t())
    else:
        w_sum = w.sum()
        avg = (m * w).sum(1, keepdim=True) / w_sum
        if aweights is None or correction == 0:
            fact = w_sum - float(correction)
        else:
            fact = w_sum - float(correction) * (w * _as_float(aweights)).sum() / w_sum
        xm = m - avg
        c = xm.matmul((xm * w).t())
    if isinstance(fact, float):
        c = c / fact if fact > 0 else c * math.inf
    else:
        c = c / fact.clamp(min=0.0)
    return c.squeeze()


def corrcoef(input):
    """Pearson's correlation coefficients of the rows of input, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    n = c.shape[0]
    d = c.reshape(-1)[0:n * n:n + 1].sqrt()
    return (c / d.reshape(-1, 1) / d.reshape(1, -1)).clamp(-1.0, 1.0)


def _along(t, d, piece):
    return t[(slice(None),) * d + (piece,)]


def _spacing(y, x, dx, d, op):
    """The spacing along dim d: dx (a number) or the differences of x, shaped to broadcast."""
    if x is None:
        return 1.0 if dx is None else dx
    if dx is not None:
        raise TypeError("%s: pass x or dx, not both" % op)
    x = _tensor(x, op, "x")
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise ShapeError("%s: x %s must have y's size %d along dim" % (op, x.shape, y.shape[d]))
        step = x[1:] - x[:-1]
        return step.reshape([-1] + [1] * (y.ndim - 1 - d))
    return diff(x, dim=d - y.ndim if x.ndim < y.ndim else d)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule's integral of y along dim, with sample points x or spacing dx."""
    y = _tensor(y, "trapezoid", "y")
    d = _as_dim(dim) % max(y.ndim, 1)
    if y.shape[d] == 0:
        return _as_float(y).sum(d) if x is not None or isinstance(dx, float) or not dx else y.sum(d)
    step = _spacing(y, x, dx, d, "trapezoid")
    if isinstance(step, Tensor):
        return ((_along(y, d, slice(1, None)) + _along(y, d, slice(0, -1))) * step).sum(d) / 2.0
    y = _as_float(y) if isinstance(step, float) or not _is_float(y) and step != int(step) else y
    ends = _along(y, d, 0) + _along(y, d, -1)
    total = y.sum(d) - ends * 0.5 if _is_float(y) else _as_float(y).sum(d) - _as_float(ends) * 0.5
    return total * step


trapz = trapezoid


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integral of y along dim (one element fewer)."""
    y = _tensor(y, "cumulative_trapezoid", "y")
    d = _as_dim(dim) % max(y.ndim, 1)
    step = _spacing(y, x, dx, d, "cumulative_trapezoid")
    pieces = (_along(y, d, slice(1, None)) + _along(y, d, slice(0, -1)))
    pieces = _as_float(pieces) * step / 2.0 if isinstance(step, Tensor) else _as_float(pieces) * (step / 2.0)
    return pieces.cumsum(d)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of elements is among test_elements (either may be a number); bool, exact
    for int64 (sorted search in C)."""
    from aicraft.creation import tensor
    scalar = not isinstance(elements, Tensor)
    e = tensor(elements) if scalar else elements
    t = test_elements if isinstance(test_elements, Tensor) else tensor(test_elements)
    e, t = _common(e, t)
    if t.numel() == 0:
        from aicraft.creation import zeros
        found = zeros(e.shape, dtype=dtypes.bool)
    else:
        table = unique(t)
        pos = searchsorted(table, e)
        n = table.shape[0]
        clamped = pos - (pos >= n).long()          # a position past the end looks at the last
        found = table.reshape(-1).index_select(0, clamped.reshape(-1)).reshape(e.shape) == e
    return found.logical_not() if invert else found


def renorm(input, p, dim, maxnorm):
    """input with each slice along dim whose p-norm exceeds maxnorm scaled down to it."""
    from aicraft.indexing import where
    from aicraft.linalg import _vector_norm
    x = _need_float(_tensor(input, "renorm"), "renorm")
    d = _as_dim(dim) % max(x.ndim, 1)
    others = [i for i in range(x.ndim) if i != d]
    norms = _vector_norm(x, p, others, True) if others else x.abs()
    factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return x * factor


def sum_to_size(self, *size):
    """self summed over the dims where size is 1 (and the leading dims size does not have)."""
    from aicraft._args import _shape_args
    shape = _shape_args(size, "size")
    x = _tensor(self, "sum_to_size")
    lead = x.ndim - len(shape)
    if lead < 0 or builtins.any(s != 1 and s != x.shape[lead + i] for i, s in enumerate(shape)):
        raise ShapeError("sum_to_size: %s cannot be summed to size %s" % (x.shape, tuple(shape)))
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and x.shape[lead + i] != 1]
    if not shape:           # size (): a sum of everything (int64 for integers), as PyTorch
        return x.sum()
    if not dims:
        return x
    out = x.sum(dims, keepdim=True)
    return out.reshape(shape)


# ---- binding -----------------------------------------------------------------------

def _method(fn):
    def method(self, *args, **kwargs):
        _live(self)            # a tensor whose scope ended: ScopeError before any argument error
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


FUNCTIONS = {
    "any": any, "all": all, "prod": prod, "count_nonzero": count_nonzero, "logsumexp": logsumexp,
    "nansum": nansum, "nanmean": nanmean, "var": var, "std": std, "var_mean": var_mean,
    "std_mean": std_mean, "aminmax": aminmax, "median": median, "nanmedian": nanmedian,
    "kthvalue": kthvalue, "mode": mode, "cummax": cummax, "cummin": cummin, "msort": msort,
    "quantile": quantile, "nanquantile": nanquantile, "unique": unique,
    "unique_consecutive": unique_consecutive, "bincount": bincount, "histc": histc,
    "searchsorted": searchsorted, "bucketize": bucketize, "cumprod": cumprod,
    "logcumsumexp": logcumsumexp, "diff": diff, "cov": cov, "corrcoef": corrcoef, "trapezoid": trapezoid,
    "trapz": trapz, "cumulative_trapezoid": cumulative_trapezoid, "isin": isin, "renorm": renorm,
    "histogram": histogram,
}
# Module functions only (no Tensor method in PyTorch).
_NOT_METHODS = ("var_mean", "std_mean", "searchsorted", "bucketize", "trapezoid", "trapz",
                "cumulative_trapezoid", "isin")


def _cumsum_with_dtype(plain):
    def cumsum(self, dim, *, dtype=None):
        """The cumulative sum along dim; dtype= converts the input first, as PyTorch does
        (so cumsum of floats with dtype=int64 sums the truncated values)."""
        if dtype is not None:
            self = _cast(_tensor(self, "cumsum"), dtype, "cumsum")
        return plain(self, dim)
    return cumsum


def bind(cls):
    cls.cumsum = _cumsum_with_dtype(cls.cumsum)
    for name, fn in FUNCTIONS.items():
        if name not in _NOT_METHODS:
            setattr(cls, name, _method(fn))
    cls.var, cls.std = var, std
    cls.sum_to_size = sum_to_size
