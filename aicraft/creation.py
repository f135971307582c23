"""creation.py - functions that make tensors: ac.tensor, ac.zeros, ac.arange, ac.cat, ...

Data comes in as a copy of dtype float32, int64 or bool; C validates shapes and sizes.
NumPy reads Python data here, and is imported by the first function that needs it.
"""
from typing import TYPE_CHECKING, Any, Optional, Sequence

from aicraft import dtypes
from aicraft._args import _as_dim, _as_int, _is_numpy, _scalar, _shape_args
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live, _wrap
from aicraft.errors import raise_error
from aicraft.tensor import Tensor

if TYPE_CHECKING:
    import numpy as np

_NULL = ffi.NULL


def _finish(p, requires_grad, *tensors, device=None):
    """Wrap a new tensor (or raise C's error), move it to device (one checked_device
    gave; None: the CPU) and set requires_grad."""
    if not p:
        raise_error(*tensors)
    t = _wrap(p)
    if device is not None and device.type != "cpu":   # made on the CPU, then copied over
        t = t._moved(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _shape_array(shape):
    return ffi.new("int64_t[]", shape) if shape else _NULL


def _target(dtype, device, what, default=dtypes.float32):
    """The dtype a factory makes (default when None) and its device (None: the CPU),
    as (dtype, device); DeviceError for a device that cannot be used."""
    device = dtypes.checked_device(device, what)
    dtype = dtypes.checked(dtype, what)
    return default if dtype is None else dtype, device


def _numeric_array(data, what, dtype=None):
    """data as a C-contiguous NumPy array of dtype's type (None: inferred as PyTorch
    does: bools bool, integers int64, floats float32); TypeError for non-numbers."""
    import numpy as np
    if isinstance(data, Tensor):
        data = data.numpy()
    try:
        arr = np.asarray(data)
    except ValueError as exc:     # ragged nesting
        raise ValueError("%s: %s" % (what, exc)) from None
    except TypeError as exc:
        raise TypeError("%s: cannot read numbers from %s (%s)" % (what, type(data).__name__, exc)) from None
    if arr.dtype.kind not in "biuf":
        raise TypeError("%s: expected numbers, got data of dtype %s" % (what, arr.dtype))
    if dtype is None:
        dtype = dtypes.of_numpy(arr.dtype)
    return np.asarray(arr, dtype=dtype.numpy, order="C"), dtype   # (ascontiguousarray would make 0-d 1-d)


def _from_array(arr, dtype, requires_grad, device=None):
    shape = list(arr.shape)
    p = lib.ac_tensor_from_typed(ffi.from_buffer(arr), _shape_array(shape), len(shape), dtype.code)
    return _finish(p, requires_grad, device=device)


def tensor(data: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of data (numbers, nested lists, arrays, tensors).
    Its dtype is dtype, or as PyTorch infers it: bool for bools, int64 for integers,
    float32 for floats (float64 data becomes float32: aicraft computes in float32)."""
    device = dtypes.checked_device(device, "tensor")
    arr, dtype = _numeric_array(data, "tensor", dtypes.checked(dtype, "tensor"))
    return _from_array(arr, dtype, requires_grad, device)


def as_tensor(data: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None) -> Tensor:
    """ac.tensor(data) unless data is already a tensor of that dtype (then data itself)."""
    if isinstance(data, Tensor) and (dtype is None or dtype is data.dtype):
        return data
    return tensor(data, dtype, device)


def from_numpy(array: "np.ndarray") -> Tensor:
    """A tensor holding a copy of a NumPy array: bool stays bool, integers become int64,
    floats float32."""
    if not _is_numpy(array, "ndarray"):
        raise TypeError("from_numpy: expected a numpy.ndarray, got %s" % type(array).__name__)
    arr, dtype = _numeric_array(array, "from_numpy")
    return _from_array(arr, dtype, False)


def zeros(*shape: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    shape = _shape_args(shape)
    dtype, device = _target(dtype, device, "zeros")
    return _finish(lib.ac_tensor_new_typed(_shape_array(shape), len(shape), dtype.code), requires_grad,
                   device=device)


def empty(*shape: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Zeros: aicraft hands out no uninitialised memory."""
    return zeros(*shape, dtype=dtype, device=device, requires_grad=requires_grad)


def full(size: Any, fill_value: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    shape = _shape_args((size,))
    value = _scalar(fill_value)
    if value is None:
        raise TypeError("full: fill_value must be a number, not %s" % type(fill_value).__name__)
    default = dtypes.bool if isinstance(fill_value, bool) else \
        dtypes.int64 if (isinstance(fill_value, int) or _is_numpy(fill_value, "integer")) else dtypes.float32
    dtype, device = _target(dtype, device, "full", default)
    t = zeros(shape, dtype=dtype, device=device)
    if lib.ac_tensor_fill_(t._ptr, value) < 0:
        raise_error(t)
    if requires_grad:
        t.requires_grad_(True)
    return t


def ones(*shape: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    dtype, device = _target(dtype, device, "ones")
    return full(_shape_args(shape), 1.0, dtype=dtype, device=device, requires_grad=requires_grad)


def rand(*shape: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """Uniform in [0, 1)."""
    shape = _shape_args(shape)
    dtype, device = _target(dtype, device, "rand")
    _float_only(dtype, "rand")
    return _finish(lib.ac_rand(_shape_array(shape), len(shape)), requires_grad, device=device)


def randn(*shape: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal."""
    shape = _shape_args(shape)
    dtype, device = _target(dtype, device, "randn")
    _float_only(dtype, "randn")
    return _finish(lib.ac_randn(_shape_array(shape), len(shape)), requires_grad, device=device)


def randint(low: int, high: Optional[int] = None, size: Any = None, dtype: Optional[dtypes.dtype] = None,
            device: Any = None, requires_grad: bool = False) -> Tensor:
    """Integers uniform in [low, high) (randint(high, size) starts at 0), int64 by default,
    from this thread's generator."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint: size must be given, e.g. randint(0, 10, (3,))")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    low, high = _as_int(low, "randint: low"), _as_int(high, "randint: high")
    if high <= low:
        raise ValueError("randint: high %d must be greater than low %d" % (high, low))
    if high - low > 2 ** 24:
        raise ValueError("randint: a range of %d values is wider than aicraft's generator draws "
                         "exactly (2**24)" % (high - low))
    import numpy as np
    u = rand(_shape_args((size,)))
    values = np.floor(u.numpy().astype(np.float64) * (high - low)).astype(np.int64) + low
    dtype, device = _target(dtype, device, "randint", dtypes.int64)
    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def _float_only(dtype, what):
    if dtype is not dtypes.float32:
        raise TypeError("%s: makes float32 tensors, not %r" % (what, dtype))


def _like(other, what):
    if not isinstance(other, Tensor):
        raise TypeError("%s: expected a Tensor, got %s" % (what, type(other).__name__))
    return other.shape


def _like_device(input, device):
    """A *_like factory's device: the given one, else input's (as PyTorch)."""
    return input.device if device is None else device


def zeros_like(input: Tensor, dtype: Optional[dtypes.dtype] = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    return zeros(_like(input, "zeros_like"), dtype=dtype or input.dtype, device=_like_device(input, device),
                 requires_grad=requires_grad)


def ones_like(input: Tensor, dtype: Optional[dtypes.dtype] = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    return ones(_like(input, "ones_like"), dtype=dtype or input.dtype, device=_like_device(input, device),
                requires_grad=requires_grad)


def full_like(input: Tensor, fill_value: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    return full(_like(input, "full_like"), fill_value, dtype=dtype or input.dtype, device=_like_device(input, device),
                requires_grad=requires_grad)


def empty_like(input: Tensor, dtype: Optional[dtypes.dtype] = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    return zeros_like(input, dtype, device, requires_grad)


def rand_like(input: Tensor, dtype: Optional[dtypes.dtype] = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    return rand(_like(input, "rand_like"), dtype=dtype, device=_like_device(input, device), requires_grad=requires_grad)


def randn_like(input: Tensor, dtype: Optional[dtypes.dtype] = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    return randn(_like(input, "randn_like"), dtype=dtype, device=_like_device(input, device), requires_grad=requires_grad)


def arange(start: float, end: Optional[float] = None, step: float = 1, dtype: Optional[dtypes.dtype] = None,
           device: Any = None, requires_grad: bool = False) -> Tensor:
    """start, start + step, ... up to but not including end (arange(n) counts from 0);
    int64 when every bound is an integer, as in PyTorch, else float32."""
    if end is None:
        start, end = 0, start
    bounds = [_scalar(v) for v in (start, end, step)]
    if None in bounds:
        raise TypeError("arange: start, end and step must be numbers")
    integral = all((isinstance(v, int) or _is_numpy(v, "integer")) and not isinstance(v, bool)
                   for v in (start, end, step))
    dtype, device = _target(dtype, device, "arange", dtypes.int64 if integral else dtypes.float32)
    if dtype is dtypes.float32:
        return _finish(lib.ac_arange(*bounds), requires_grad, device=device)
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    import numpy as np
    count = max(0, -((start - end) // step))    # ceil((end - start) / step), exact for integers
    out = zeros(count, dtype=dtypes.int64)      # libac allocates first, so its memory limit holds
    if count:
        np.frombuffer(ffi.buffer(out._ptr.data, 8 * count), np.int64)[:] = np.arange(start, end, step)
    out = (out if dtype is dtypes.int64 else out.to(dtype)).to(device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def eye(n: int, m: Optional[int] = None, dtype: Optional[dtypes.dtype] = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    """An n x m matrix (m defaults to n) with ones on the diagonal."""
    n = _as_int(n, "eye: n")
    m = n if m is None else _as_int(m, "eye: m")
    if not (-(2 ** 63) <= n < 2 ** 63 and -(2 ** 63) <= m < 2 ** 63):
        raise ValueError("eye: n and m must fit in 64 bits")
    t = _finish(lib.ac_eye(n, m), False)
    dtype, device = _target(dtype, device, "eye")
    return t.to(dtype).to(device).requires_grad_(requires_grad)


def _tensor_list(tensors, what):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError("%s: expected a list or tuple of tensors, got %s" % (what, type(tensors).__name__))
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError("%s: expected tensors, got %s" % (what, type(t).__name__))
        _live(t)
    return ffi.new("AcTensor *[]", [t._ptr for t in tensors]) if tensors else _NULL


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join tensors along an existing dim."""
    array = _tensor_list(tensors, "cat")
    return _finish(lib.ac_cat(array, len(tensors), _as_dim(dim)), False, *tensors)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join same-shaped tensors along a new dim."""
    array = _tensor_list(tensors, "stack")
    return _finish(lib.ac_stack(array, len(tensors), _as_dim(dim)), False, *tensors)


def manual_seed(seed: int) -> None:
    """Seed this thread's generator (ac.rand, ac.randn, init)."""
    seed = _as_int(seed, "manual_seed: seed")
    if not -(2 ** 63) <= seed < 2 ** 64:
        raise ValueError("manual_seed: seed %d does not fit in 64 bits" % seed)
    if lib.ac_manual_seed(seed & 0xFFFFFFFFFFFFFFFF) < 0:   # negative seeds wrap, as PyTorch's
        raise_error()
