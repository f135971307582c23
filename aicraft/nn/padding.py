"""padding.py - F.pad in every mode torch has ('constant' with a value, 'reflect',
'replicate', 'circular') and the padding modules (ZeroPad1d/2d/3d, ConstantPad1d/2d/3d,
ReflectionPad1d/2d/3d, ReplicationPad1d/2d/3d, CircularPad1d/2d/3d).

Each padded dim is one call of libac's resample op (ops/resample.c): the index of
the source element of every output position along that dim, or -1 for the
constant, computed here (a few numbers per position, NumPy); the copy and its
gradient (the scatter back) run in C. Negative pads crop, as in torch.
"""
from aicraft._args import _as_int
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _wrap
from aicraft.errors import raise_error
from aicraft.nn.module import Module
from aicraft.tensor import Tensor

__all__ = ["pad", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d",
           "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]

_NULL = ffi.NULL


def _resample(input, dim, index, weight=None, fill=0.0):
    """libac's resample of input along dim: index (out, taps) int64, weight (out, taps)
    float32 or None; -1 in index reads fill."""
    import numpy as np
    index = np.ascontiguousarray(index, dtype=np.int64)
    out, taps = index.shape if index.ndim == 2 else (index.shape[0], 1)
    idx_ptr = ffi.cast("int64_t *", ffi.from_buffer(index)) if index.size else _NULL
    if weight is not None:
        weight = np.ascontiguousarray(weight, dtype=np.float32)
        w_ptr = ffi.cast("float *", ffi.from_buffer(weight)) if weight.size else _NULL
    else:
        w_ptr = _NULL
    p = lib.ac_resample(input._ptr, dim, out, taps, idx_ptr, w_ptr, float(fill))
    if p:
        return _wrap(p)
    raise_error(input)


def _source_index(n, before, after, mode):
    """For one dim of size n padded by (before, after): each output position's source
    index in [0, n), or -1 for the constant."""
    import numpy as np
    j = np.arange(n + before + after, dtype=np.int64) - before
    if mode == "constant":
        return np.where((j >= 0) & (j < n), j, -1)
    if mode == "reflect":
        j = np.abs(j)
        return np.where(j >= n, 2 * (n - 1) - j, j)
    if mode == "replicate":
        return np.clip(j, 0, n - 1)
    # circular: torch crops by the negative pads first, then wraps the rest around
    lo, hi = max(-before, 0), n - max(-after, 0)
    j = np.arange(n + before + after, dtype=np.int64) - max(before, 0)
    return lo + np.mod(j, hi - lo)


_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):
    """Pad input's last len(pad)//2 dims: pad = (left of the last dim, right of it,
    left of the one before, ...), as torch's F.pad."""
    if not isinstance(input, Tensor):
        raise TypeError("pad(): argument 'input' must be Tensor, not %s" % type(input).__name__)
    if not isinstance(pad, (tuple, list)):
        raise TypeError("pad(): argument 'pad' must be a tuple of ints, not %s" % type(pad).__name__)
    pads = [_as_int(v, "pad(): pad entries") for v in pad]
    if mode not in _MODES:
        raise NotImplementedError("pad(): mode %r is not one of %s" % (mode, ", ".join(_MODES)))
    shape = input.shape
    if len(pads) % 2:
        raise ValueError("Padding length must be divisible by 2")
    dims = len(pads) // 2
    if dims > len(shape):
        raise ValueError("Padding length should be less than or equal to two times the input "
                         "dimension but got padding length %d and input of dimension %d"
                         % (len(pads), len(shape)))
    if mode != "constant":
        if value not in (None, 0, 0.0):
            raise ValueError("Padding mode \"%s\" doesn't take in value argument." % mode)
        if dims > 3 or len(shape) not in (dims + 1, dims + 2):
            raise NotImplementedError(
                "pad(): mode %r pads the last 1, 2 or 3 dims of a 2-D/3-D, 3-D/4-D or 4-D/5-D "
                "input; got padding length %d for input %s" % (mode, len(pads), tuple(shape)))
    fill = 0.0 if value is None else value
    out = input
    for k in range(dims):
        dim = len(shape) - 1 - k
        before, after = pads[2 * k], pads[2 * k + 1]
        if before == 0 and after == 0:
            continue
        n = shape[dim]
        if n + before + after < 0 or (mode != "constant" and n + before + after < 1):
            raise ValueError("pad(): padding (%d, %d) of dim %d of size %d gives a negative or "
                             "empty size" % (before, after, dim, n))
        if mode == "reflect" and (before >= n or after >= n):   # negative pads crop
            raise ValueError("Argument #4: Padding size should be less than the corresponding "
                             "input dimension, but got: padding (%d, %d) at dimension %d of input %s"
                             % (before, after, dim, tuple(shape)))
        if mode == "replicate" and n == 0:
            raise ValueError("pad(): replicate padding of an empty dim %d of input %s"
                             % (dim, tuple(shape)))
        kept = n - max(-before, 0) - max(-after, 0)
        if mode == "circular" and (kept < 1 or before > kept or after > kept):
            raise ValueError("Padding value causes wrapping around more than once: padding "
                             "(%d, %d) at dimension %d of size %d" % (before, after, dim, n))
        out = _resample(out, dim, _source_index(n, before, after, mode), None, fill)
    if out is input:
        out = input.clone()
    return out


# ---- modules -----------------------------------------------------------------

def _tuple_of(padding, n, name):
    if isinstance(padding, (tuple, list)):
        values = tuple(_as_int(v, name + ": padding") for v in padding)
        if len(values) != 2 * n:
            raise ValueError("%s: padding must be an int or a %d-tuple, got %r" % (name, 2 * n, padding))
        return values
    v = _as_int(padding, name + ": padding")
    return (v,) * (2 * n)


class _Pad(Module):
    _dims = 1
    _mode = "constant"

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = _tuple_of(padding, self._dims, type(self).__name__)
        self.value = value

    def forward(self, input):
        if self._mode == "constant":
            return pad(input, self.padding, "constant", self.value)
        return pad(input, self.padding, self._mode)

    def extra_repr(self):
        if self._mode == "constant":
            return "padding=%s, value=%s" % (self.padding, self.value)
        return "%s" % (self.padding,)


def _pad_class(name, dims, mode, doc, takes_value):
    if takes_value:
        def __init__(self, padding, value):      # ConstantPadNd: value is required
            _Pad.__init__(self, padding, value)
    else:
        def __init__(self, padding):
            _Pad.__init__(self, padding, 0.0 if mode == "constant" else None)
    return type(name, (_Pad,), {"__init__": __init__, "_dims": dims, "_mode": mode,
                                "__doc__": doc, "__module__": __name__})


for _n in (1, 2, 3):
    globals()["ZeroPad%dd" % _n] = _pad_class("ZeroPad%dd" % _n, _n, "constant",
                                             "Pad the last %d dims with zeros." % _n, False)
    globals()["ConstantPad%dd" % _n] = _pad_class("ConstantPad%dd" % _n, _n, "constant",
                                                 "Pad the last %d dims with value." % _n, True)
    globals()["ReflectionPad%dd" % _n] = _pad_class(
        "ReflectionPad%dd" % _n, _n, "reflect", "Pad the last %d dims with their reflection." % _n,
        False)
    globals()["ReplicationPad%dd" % _n] = _pad_class(
        "ReplicationPad%dd" % _n, _n, "replicate", "Pad the last %d dims with their edge values."
        % _n, False)
    globals()["CircularPad%dd" % _n] = _pad_class(
        "CircularPad%dd" % _n, _n, "circular", "Pad the last %d dims by wrapping around." % _n,
        False)
del _n
