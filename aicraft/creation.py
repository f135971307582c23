"""creation.py - functions that make tensors: ac.tensor, ac.zeros, ac.arange, ac.cat, ...

Data always comes in as a float32 copy; C validates shapes and sizes.
"""
import numpy as np

from aicraft._ffi import ffi, lib
from aicraft.errors import raise_error
from aicraft.tensor import Tensor, _as_dim, _as_int, _live, _scalar, _shape_args, _wrap

_NULL = ffi.NULL


def _finish(p, requires_grad, *tensors):
    """Wrap a new tensor (or raise C's error) and set requires_grad."""
    if not p:
        raise_error(*tensors)
    t = _wrap(p)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _shape_array(shape):
    return ffi.new("int64_t[]", shape) if shape else _NULL


def _numeric_array(data, what):
    """data as a C-contiguous float32 NumPy array; TypeError for non-numbers."""
    if isinstance(data, Tensor):
        return data.numpy()
    try:
        arr = np.asarray(data)
    except ValueError as exc:     # ragged nesting
        raise ValueError("%s: %s" % (what, exc)) from None
    except TypeError as exc:
        raise TypeError("%s: cannot read numbers from %s (%s)" % (what, type(data).__name__, exc)) from None
    if arr.dtype.kind not in "biuf":
        raise TypeError("%s: expected numbers, got data of dtype %s" % (what, arr.dtype))
    return np.asarray(arr, dtype=np.float32, order="C")   # (ascontiguousarray would make 0-d 1-d)


def _from_array(arr, requires_grad):
    shape = list(arr.shape)
    p = lib.ac_tensor_from_data(ffi.from_buffer("float[]", arr), _shape_array(shape), len(shape))
    return _finish(p, requires_grad)


def tensor(data, requires_grad=False):
    """A new tensor holding a float32 copy of data (numbers, nested lists, arrays, tensors)."""
    return _from_array(_numeric_array(data, "tensor"), requires_grad)


def from_numpy(array):
    """A tensor holding a float32 copy of a NumPy array of any numeric dtype."""
    if not isinstance(array, np.ndarray):
        raise TypeError("from_numpy: expected a numpy.ndarray, got %s" % type(array).__name__)
    return _from_array(_numeric_array(array, "from_numpy"), False)


def zeros(*shape, requires_grad=False):
    shape = _shape_args(shape)
    return _finish(lib.ac_tensor_new(_shape_array(shape), len(shape)), requires_grad)


def full(size, fill_value, requires_grad=False):
    shape = _shape_args((size,))
    value = _scalar(fill_value)
    if value is None:
        raise TypeError("full: fill_value must be a number, not %s" % type(fill_value).__name__)
    return _finish(lib.ac_full(_shape_array(shape), len(shape), value), requires_grad)


def ones(*shape, requires_grad=False):
    return full(_shape_args(shape), 1.0, requires_grad)


def rand(*shape, requires_grad=False):
    """Uniform in [0, 1)."""
    shape = _shape_args(shape)
    return _finish(lib.ac_rand(_shape_array(shape), len(shape)), requires_grad)


def randn(*shape, requires_grad=False):
    """Standard normal."""
    shape = _shape_args(shape)
    return _finish(lib.ac_randn(_shape_array(shape), len(shape)), requires_grad)


def _like(other, what):
    if not isinstance(other, Tensor):
        raise TypeError("%s: expected a Tensor, got %s" % (what, type(other).__name__))
    return other.shape


def zeros_like(input, requires_grad=False):
    return zeros(_like(input, "zeros_like"), requires_grad=requires_grad)


def ones_like(input, requires_grad=False):
    return ones(_like(input, "ones_like"), requires_grad=requires_grad)


def full_like(input, fill_value, requires_grad=False):
    return full(_like(input, "full_like"), fill_value, requires_grad=requires_grad)


def arange(start, end=None, step=1, requires_grad=False):
    """start, start + step, ... up to but not including end (arange(n) counts from 0)."""
    if end is None:
        start, end = 0, start
    bounds = [_scalar(v) for v in (start, end, step)]
    if None in bounds:
        raise TypeError("arange: start, end and step must be numbers")
    return _finish(lib.ac_arange(*bounds), requires_grad)


def eye(n, m=None, requires_grad=False):
    """An n x m matrix (m defaults to n) with ones on the diagonal."""
    n = _as_int(n, "eye: n")
    m = n if m is None else _as_int(m, "eye: m")
    if not (-(2 ** 63) <= n < 2 ** 63 and -(2 ** 63) <= m < 2 ** 63):
        raise ValueError("eye: n and m must fit in 64 bits")
    return _finish(lib.ac_eye(n, m), requires_grad)


def _tensor_list(tensors, what):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError("%s: expected a list or tuple of tensors, got %s" % (what, type(tensors).__name__))
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError("%s: expected tensors, got %s" % (what, type(t).__name__))
        _live(t)
    return ffi.new("AcTensor *[]", [t._ptr for t in tensors]) if tensors else _NULL


def cat(tensors, dim=0):
    """Join tensors along an existing dim."""
    array = _tensor_list(tensors, "cat")
    return _finish(lib.ac_cat(array, len(tensors), _as_dim(dim)), False, *tensors)


def stack(tensors, dim=0):
    """Join same-shaped tensors along a new dim."""
    array = _tensor_list(tensors, "stack")
    return _finish(lib.ac_stack(array, len(tensors), _as_dim(dim)), False, *tensors)


def manual_seed(seed):
    """Seed this thread's generator (ac.rand, ac.randn, init)."""
    seed = _as_int(seed, "manual_seed: seed")
    if not -(2 ** 63) <= seed < 2 ** 64:
        raise ValueError("manual_seed: seed %d does not fit in 64 bits" % seed)
    if lib.ac_manual_seed(seed & 0xFFFFFFFFFFFFFFFF) < 0:   # negative seeds wrap, as PyTorch's
        raise_error()
