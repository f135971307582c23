"""creation.py - functions that make tensors: ac.tensor, ac.zeros, ac.arange, ac.cat, ...

Data comes in as a copy of dtype float32, int64 or bool; C validates shapes and sizes.
NumPy reads Python data here, and is imported by the first function that needs it.
"""
from typing import TYPE_CHECKING, Any, Optional, Sequence

from aicraft import dtypes
from aicraft._args import _as_dim, _as_int, _is_numpy, _scalar, _shape_args
from aicraft._ffi import ffi, lib
from aicraft import _wrapping
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


def _holds_ints(arr):
    """Whether an object array (NumPy's answer to ints past int64) holds Python ints."""
    return any(isinstance(x, int) and not isinstance(x, bool) for x in arr.flat)


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
    python_numbers = not _is_numpy(data, "ndarray")
    if python_numbers and (arr.dtype == np.uint64 or arr.dtype == object and _holds_ints(arr)):
        raise ValueError("%s: Overflow when unpacking long long (an int past int64)" % what)
    if arr.dtype.kind not in "biuf":
        raise TypeError("%s: expected numbers, got data of dtype %s" % (what, arr.dtype))
    if dtype is None:
        dtype = dtypes.of_numpy(arr.dtype)
    elif python_numbers and arr.dtype.kind in "iu" and arr.size and not dtype.is_floating_point \
            and dtype is not dtypes.bool:
        info = np.iinfo(dtype.numpy)
        low = -info.max if info.min == 0 else info.min     # torch lets -255 wrap into uint8
        if arr.min() < low or arr.max() > info.max:        # as torch: no wrap past the range
            raise RuntimeError("%s: value cannot be converted to type %s without overflow"
                               % (what, dtype.name))
    return np.asarray(arr, dtype=dtype.numpy, order="C"), dtype   # (ascontiguousarray would make 0-d 1-d)


def _from_array(arr, dtype, requires_grad, device=None):
    """A tensor holding a copy of arr, a C-contiguous array of dtype's type."""
    shape = arr.shape     # a tuple: CFFI passes it as a temporary int64_t array
    p = lib.ac_tensor_from_typed(ffi.from_buffer(arr), shape, len(shape), dtype.code)
    return _finish(p, requires_grad, device=device)


def tensor(data: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of data (numbers, nested lists, arrays, tensors).
    Its dtype is dtype, or as PyTorch infers it: bool for bools, int64 for integers,
    float32 for floats (float64 data becomes float32: aicraft computes in float32)."""
    device = dtypes.checked_device(device, "tensor")
    arr, dtype = _numeric_array(data, "tensor", dtypes.checked(dtype, "tensor"))
    return _from_array(arr, dtype, requires_grad, device)


# _wrapping (beneath this module) converts a NumPy array operand with it.
_wrapping.array_to_tensor = tensor


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
    # A C-contiguous float32 array (a served request's rows) is copied as it is: no
    # conversion to ask NumPy for.
    if array.dtype is dtypes.float32.numpy and array.flags.c_contiguous:
        return _from_array(array, dtypes.float32, False)
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
         requires_grad: bool = False, generator: Any = None, **kwargs: Any) -> Tensor:
    """Uniform in [0, 1) (from generator, an ac.Generator, when given)."""
    shape = _shape_args(shape)
    dtype, device = _target(dtype, device, "rand")
    _float_only(dtype, "rand")
    _factory_extras(kwargs, "rand")
    with _drawing(generator, "rand"):
        p = lib.ac_rand(_shape_array(shape), len(shape))
    return _finish(p, requires_grad, device=device)


def randn(*shape: Any, dtype: Optional[dtypes.dtype] = None, device: Any = None,
          requires_grad: bool = False, generator: Any = None, **kwargs: Any) -> Tensor:
    """Standard normal (from generator, an ac.Generator, when given)."""
    shape = _shape_args(shape)
    dtype, device = _target(dtype, device, "randn")
    _float_only(dtype, "randn")
    _factory_extras(kwargs, "randn")
    with _drawing(generator, "randn"):
        p = lib.ac_randn(_shape_array(shape), len(shape))
    return _finish(p, requires_grad, device=device)


def randint(low: int, high: Optional[int] = None, size: Any = None, generator: Any = None,
            dtype: Optional[dtypes.dtype] = None, device: Any = None, requires_grad: bool = False,
            **kwargs: Any) -> Tensor:
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
    _factory_extras(kwargs, "randint")
    u = rand(_shape_args((size,)), generator=generator)
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
              requires_grad: bool = False, generator: Any = None, **kwargs: Any) -> Tensor:
    return rand(_like(input, "rand_like"), dtype=dtype, device=_like_device(input, device), requires_grad=requires_grad,
                generator=generator, **kwargs)


def randn_like(input: Tensor, dtype: Optional[dtypes.dtype] = None, device: Any = None,
               requires_grad: bool = False, generator: Any = None, **kwargs: Any) -> Tensor:
    return randn(_like(input, "randn_like"), dtype=dtype, device=_like_device(input, device),
                 requires_grad=requires_grad, generator=generator, **kwargs)


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



# ---- scripts helper: ac.Generator, randperm, multinomial, bernoulli, normal ----------------

_STATE_WORDS = 6
_DEFAULT_SEED = 67280421310721   # torch's default_generator's initial seed


def _factory_extras(kwargs, what):
    """PyTorch's factory keywords that change nothing here: layout=strided, pin_memory=False,
    memory_format; anything else is a TypeError as torch gives."""
    for key, value in kwargs.items():
        if key == "pin_memory" and not value:
            continue
        if key in ("layout", "memory_format") and value is None:
            continue
        if key in ("layout", "pin_memory", "memory_format"):
            raise NotImplementedError("%s: %s=%r is not supported by aicraft" % (what, key, value))
        raise TypeError("%s() got an unexpected keyword argument %r" % (what, key))


class Generator:
    """A random number generator of its own, as torch.Generator: ops given
    generator=g draw from g's state (and advance it), not from the thread's
    generator that ac.manual_seed seeds. Seeded with manual_seed(seed) (the same seed,
    the same draws as ac.manual_seed(seed) gives); get_state()/set_state() save and
    restore it (a uint8 Tensor). CPU only: its draws are made on the CPU."""

    def __init__(self, device="cpu"):
        d = dtypes.device(device)
        if d.type != "cpu":
            raise NotImplementedError("Generator: aicraft draws random numbers on the CPU; device %s "
                                      "is not supported" % d)
        self.device = d
        self._state = ffi.new("uint32_t[%d]" % _STATE_WORDS)
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed):
        seed = _as_int(seed, "Generator.manual_seed: seed")
        if not -(2 ** 63) <= seed < 2 ** 64:
            raise ValueError("Generator.manual_seed: seed %d does not fit in 64 bits" % seed)
        saved = ffi.new("uint32_t[%d]" % _STATE_WORDS)
        lib.ac_rng_get_state(saved)
        lib.ac_manual_seed(seed & 0xFFFFFFFFFFFFFFFF)
        lib.ac_rng_get_state(self._state)
        lib.ac_rng_set_state(saved)
        self._seed = seed & 0xFFFFFFFFFFFFFFFF
        return self

    def seed(self):
        """Seed from the operating system's randomness; returns the seed."""
        import os
        seed = int.from_bytes(os.urandom(8), "little") & 0x7FFFFFFFFFFFFFFF
        self.manual_seed(seed)
        return seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        import numpy as np
        words = np.frombuffer(ffi.buffer(self._state), dtype=np.uint32).copy()
        return tensor(words.view(np.uint8), dtype=dtypes.uint8)

    def set_state(self, new_state):
        import numpy as np
        if not isinstance(new_state, Tensor) or new_state.dtype is not dtypes.uint8 or \
                tuple(new_state.shape) != (4 * _STATE_WORDS,):
            raise TypeError("Generator.set_state: expected the uint8 Tensor of %d bytes get_state() gives"
                            % (4 * _STATE_WORDS))
        words = new_state.numpy().view(np.uint32)
        saved = ffi.new("uint32_t[%d]" % _STATE_WORDS)
        lib.ac_rng_get_state(saved)
        try:
            if lib.ac_rng_set_state(ffi.from_buffer("uint32_t[]", words.copy())) < 0:
                raise_error()
            lib.ac_rng_get_state(self._state)
        finally:
            lib.ac_rng_set_state(saved)
        return self

    def __repr__(self):
        return "<aicraft.Generator object (seed %d)>" % self._seed


class _drawing:
    """Context: the thread's generator runs from generator's state inside (None: unchanged)."""

    __slots__ = ("_generator", "_saved")

    def __init__(self, generator, what):
        if generator is not None and not isinstance(generator, Generator):
            raise TypeError("%s: generator must be an aicraft.Generator, not %s" % (what, type(generator).__name__))
        self._generator = generator

    def __enter__(self):
        if self._generator is not None:
            self._saved = ffi.new("uint32_t[%d]" % _STATE_WORDS)
            lib.ac_rng_get_state(self._saved)
            lib.ac_rng_set_state(self._generator._state)

    def __exit__(self, *exc):
        if self._generator is not None:
            lib.ac_rng_get_state(self._generator._state)
            lib.ac_rng_set_state(self._saved)
        return False


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, **kwargs):
    """A random permutation of 0..n-1, int64 (from generator when given)."""
    n = _as_int(n, "randperm: n")
    _factory_extras(kwargs, "randperm")
    with _drawing(generator, "randperm"):
        p = lib.ac_randperm(n)
    out = _finish(p, False)
    target, device = _target(dtype, device, "randperm", dtypes.int64)
    if target is not dtypes.int64:
        out = out.to(target)
    if device is not None and device != dtypes.CPU:
        out = out.to(device)
    return out.requires_grad_(True) if requires_grad else out


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Indices drawn by the weights in each row of input (1-d or 2-d, non-negative,
    not all zero), int64 (num_samples,) or (rows, num_samples); distinct within a row
    unless replacement."""
    if out is not None:
        raise NotImplementedError("multinomial: out= is not supported by aicraft")
    if not isinstance(input, Tensor):
        raise TypeError("multinomial: input must be a Tensor, not %s" % type(input).__name__)
    if not input.dtype.is_floating_point:
        raise RuntimeError("multinomial only supports floating-point dtypes for input, got: %s"
                           % input.dtype.name)
    num_samples = _as_int(num_samples, "multinomial: num_samples")
    if not isinstance(replacement, bool):
        raise TypeError("multinomial: replacement must be a bool, not %s" % type(replacement).__name__)
    src = input.detach()
    if src.device != dtypes.CPU:
        src = src.to("cpu")
    with _drawing(generator, "multinomial"):
        p = lib.ac_multinomial(_live(src), num_samples, 1 if replacement else 0)
    result = _finish(p, False, src)
    return result if input.device == dtypes.CPU else result.to(input.device)


def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 draws, 1 with probability input (or p) per element, of input's dtype."""
    if out is not None:
        raise NotImplementedError("bernoulli: out= is not supported by aicraft")
    if not isinstance(input, Tensor):
        raise TypeError("bernoulli: input must be a Tensor, not %s" % type(input).__name__)
    probs = input.detach() if p is None else full_like(input, float(p), dtype=dtypes.float32)
    if not probs.dtype.is_floating_point:
        probs = probs.to(dtypes.float32)
    if probs.numel() and not (probs.min().item() >= 0 and probs.max().item() <= 1):
        raise RuntimeError("bernoulli: probabilities must be in [0, 1]")
    from aicraft._grad import no_grad
    with no_grad():
        u = rand(tuple(probs.shape), generator=generator, device=probs.device)
        draws = (u < probs).to(input.dtype)
    if input.requires_grad and input.dtype.is_floating_point:
        draws = draws + input * 0.0     # as torch: differentiable, with a zero gradient
    return draws


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, device=None,
           requires_grad=False, **kwargs):
    """Normal draws: mean and std tensors (broadcast) or numbers with size, as torch.normal."""
    if out is not None:
        raise NotImplementedError("normal: out= is not supported by aicraft")
    _factory_extras(kwargs, "normal")
    tensors = isinstance(mean, Tensor) or isinstance(std, Tensor)
    if tensors:
        if size is not None:
            raise TypeError("normal: size is only for a number mean and std")
        if isinstance(std, (int, float)) and std < 0 or isinstance(std, Tensor) and std.numel() and \
                not std.min().item() >= 0:
            raise RuntimeError("normal expects all elements of std >= 0.0")
        shape = (mean + 0.0 * std).shape if isinstance(mean, Tensor) and isinstance(std, Tensor) else \
            (mean.shape if isinstance(mean, Tensor) else std.shape)
        from aicraft._grad import no_grad
        with no_grad():
            draws = randn(tuple(shape), generator=generator)
        return draws * std + mean      # differentiable in mean and std, as torch's
    if size is None:
        raise TypeError("normal: with a number mean and std, size must be given")
    std = float(std)
    if std < 0:
        raise RuntimeError("normal expects std >= 0.0, but found std %g" % std)
    draws = randn(_shape_args((size,)), generator=generator, dtype=dtype, device=device)
    result = draws * std + float(mean)
    return result.requires_grad_(True) if requires_grad else result


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False,
                 generator=None, **kwargs):
    """randint over input's shape (its dtype and device unless given)."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(_like(input, "randint_like")), generator=generator,
                   dtype=dtype or input.dtype, device=_like_device(input, device),
                   requires_grad=requires_grad, **kwargs)


# Tensor's in-place random fills and multinomial; bound into Tensor by bind().

def _check_fill(self, what):
    if not isinstance(self, Tensor):
        raise TypeError("%s: expected a Tensor" % what)
    p = _live(self)
    if p.requires_grad and p.node == ffi.NULL and lib.ac_is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")


def _fill_from(self, values):
    from aicraft._grad import no_grad
    with no_grad():
        self.copy_(values)
    return self


def _uniform_(self, a=0.0, b=1.0, *, generator=None):
    _check_fill(self, "uniform_")
    if self.dtype is not dtypes.float32:
        raise TypeError("uniform_: aicraft fills float32 tensors, not %s" % self.dtype.name)
    with _drawing(generator, "uniform_"):
        if lib.ac_tensor_uniform_(_live(self), float(a), float(b)) < 0:
            raise_error(self)
    return self


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    _check_fill(self, "normal_")
    if self.dtype is not dtypes.float32:
        raise TypeError("normal_: aicraft fills float32 tensors, not %s" % self.dtype.name)
    with _drawing(generator, "normal_"):
        if lib.ac_tensor_normal_(_live(self), float(mean), float(std)) < 0:
            raise_error(self)
    return self


def _bernoulli_(self, p=0.5, *, generator=None):
    _check_fill(self, "bernoulli_")
    if isinstance(p, Tensor):
        probs = p.detach().to(dtypes.float32) + zeros(tuple(self.shape))   # broadcast to self's shape
    else:
        probs = full(tuple(self.shape), float(p))
    return _fill_from(self, bernoulli(probs, generator=generator))


def _random_(self, from_=0, to=None, *, generator=None, **kwargs):
    _check_fill(self, "random_")
    if "from" in kwargs:
        from_ = kwargs.pop("from")
    if kwargs:
        raise TypeError("random_() got an unexpected keyword argument %r" % sorted(kwargs)[0])
    if to is None:
        limits = {"float32": 2 ** 24 + 1, "uint8": 256, "bool": 2, "int8": 128, "int64": 2 ** 24 + 1}
        from_, to = (0, from_) if from_ else (0, limits[self.dtype.name])
    return _fill_from(self, randint(from_, to, tuple(self.shape), generator=generator))


def _exponential_(self, lambd=1.0, *, generator=None):
    _check_fill(self, "exponential_")
    if self.dtype is not dtypes.float32:
        raise TypeError("exponential_: aicraft fills float32 tensors, not %s" % self.dtype.name)
    if not lambd > 0:
        raise RuntimeError("exponential_ expects lambda > 0.0, but found lambda=%g" % lambd)
    from aicraft._grad import no_grad
    with no_grad():
        u = rand(tuple(self.shape), generator=generator)
        return _fill_from(self, (1.0 - u).log() * (-1.0 / lambd))


def _data_ptr(self):
    """The address of the tensor's first element (as an int)."""
    return int(ffi.cast("uintptr_t", _live(self).data))


def _reduce_by_value(self):
    """Tensor.__reduce__: pickled by value, rebuilt by tensor() (_shared.py adds shared memory)."""
    p = _live(self)
    return tensor, (self._host().numpy(), self.dtype, None if p.device == 0 else str(self.device),
                    bool(p.requires_grad))


def bind(cls):
    # Tensor's pickling and its in-place random fills (uniform_, normal_, ...).
    cls.__reduce__ = _reduce_by_value
    for name, fn in (("uniform_", _uniform_), ("normal_", _normal_), ("bernoulli_", _bernoulli_),
                     ("random_", _random_), ("exponential_", _exponential_), ("data_ptr", _data_ptr),
                     ("multinomial", multinomial)):
        if not hasattr(cls, name):
            setattr(cls, name, fn)
    if not hasattr(cls, "nelement"):   # torch's other name for numel
        cls.nelement = cls.numel
    if not hasattr(cls, "bernoulli"):
        cls.bernoulli = lambda self, p=None, *, generator=None: bernoulli(self, p, generator=generator)


# ---- typed constructors: ac.FloatTensor, ac.LongTensor, ac.BoolTensor, ac.ByteTensor ----

class _TypedTensorMeta(type):
    """isinstance(t, ac.LongTensor) is True for an int64 Tensor, as torch's."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls._dtype


def _typed_new(cls, *args, device=None):
    if len(args) == 1 and not isinstance(args[0], int) or (args and isinstance(args[0], (list, tuple))
                                                           and len(args) == 1):
        data = args[0]
        if isinstance(data, Tensor):
            return data.to(cls._dtype)
        return tensor(data, dtype=cls._dtype, device=device)
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        raise TypeError("%s(): expected data (a sequence or array) or sizes (ints), got %r"
                        % (cls.__name__, args))
    return zeros(*args, dtype=cls._dtype, device=device)


def _typed(name, dtype):
    return _TypedTensorMeta(name, (), {
        "_dtype": dtype, "__new__": _typed_new, "__module__": "aicraft",
        "__doc__": "%s(data) or %s(*sizes): a %s Tensor from data, or zero-filled of those sizes "
                   "(torch's legacy constructor; sizes give zeros where torch leaves memory "
                   "uninitialised)." % (name, name, dtype.name)})


FloatTensor = _typed("FloatTensor", dtypes.float32)
LongTensor = _typed("LongTensor", dtypes.int64)
BoolTensor = _typed("BoolTensor", dtypes.bool)
ByteTensor = _typed("ByteTensor", dtypes.uint8)
