"""dtypes.py - aicraft's dtypes and devices, as PyTorch names them.

float32 is the float dtype; int64 computes exact integer arithmetic (and holds
indices and counts), bool is logic (masks, comparison results), uint8 holds
bytes (image pixels, a quarter of float32's memory) and wraps modulo 256, int8
the weights of quantized layers (aicraft.quantization). Binary ops promote
their operands as torch.result_type does (ac.result_type asks libac). float64 exists as a name so that asking for it is
a clear error rather than a silent narrowing. Other integer data (int8, int16,
int32, uint16, ...) read from NumPy is held as int64 (wider, so every value is
kept); `ac.int32` (torch's `int`) is a name only, refused where computed with, so that
asking for it is an error rather than an int64 labelled otherwise than torch's.

A device is "cpu" or "cuda" ("cuda:1"); a CUDA one needs a GPU (ac.cuda.is_available()).

NumPy is imported only when a dtype is compared with or converted to NumPy's, so
that `import aicraft` alone does not load it.
"""
import builtins


class dtype:
    """An element type: ac.float32, ac.int64, ac.bool (and the refused ac.float64)."""

    __slots__ = ("name", "code", "itemsize", "is_floating_point", "_numpy")

    def __init__(self, name, code, itemsize, is_floating_point):
        self.name = name                   # as NumPy names it
        self.code = code                   # AcDtype; None for a dtype libac does not hold
        self.itemsize = itemsize
        self.is_floating_point = is_floating_point
        self._numpy = None

    @property
    def numpy(self):
        """The NumPy dtype this one stands for."""
        if self._numpy is None:
            import numpy as np
            self._numpy = np.dtype(self.name)
        return self._numpy

    def __repr__(self):
        return "aicraft." + self.name

    def __eq__(self, other):
        """Equal to itself, and to the NumPy dtype or name it stands for (np.float32, "int64")."""
        if isinstance(other, dtype):
            return other is self or other.name == self.name
        if isinstance(other, str) and other == self.name:    # "float32": no NumPy to import
            return True
        import numpy as np
        try:
            return np.dtype(other) == self.numpy
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.numpy)

    def __reduce__(self):                  # pickles as the module's own object
        return self.name


float32 = dtype("float32", 0, 4, True)
int64 = dtype("int64", 1, 8, False)
bool = dtype("bool", 2, 1, False)
uint8 = dtype("uint8", 3, 1, False)
int8 = dtype("int8", 4, 1, False)
float64 = dtype("float64", None, 8, True)
float16 = dtype("float16", None, 2, True)
int32 = dtype("int32", None, 4, False)
float = float32
long = int64
int = int32
double = float64
half = float16

BY_CODE = (float32, int64, bool, uint8, int8)


class _QuantizedDtype(dtype):
    """ac.qint8: what quantize_dynamic turns weights into (int8 values with a float
    scale per row). It names a layer's format; no tensor has it."""

    __slots__ = ()

    def __eq__(self, other):
        return other is self

    def __hash__(self):
        return hash(self.name)


qint8 = _QuantizedDtype("qint8", None, 1, False)
_DEFAULT = float32


def get_default_dtype():
    return _DEFAULT


def set_default_dtype(d):
    if d is not float32:
        raise TypeError("set_default_dtype: aicraft computes in float32; %r is not supported" % (d,))


def checked(d, what):
    """d as a dtype libac holds: TypeError for anything else, naming what asked."""
    if d is None or (isinstance(d, dtype) and d.code is not None):
        return d
    if isinstance(d, dtype):
        raise TypeError("%s: aicraft computes in float32 and holds int64, bool and uint8; %r is not "
                        "supported (use aicraft.%s)" % (what, d, "float32" if d.is_floating_point else "int64"))
    if d is builtins.float:
        return float32
    if d is builtins.int:
        return int64
    if d is builtins.bool:
        return bool
    raise TypeError("%s: dtype must be an aicraft dtype such as aicraft.float32, not %r" % (what, d))


def of_numpy(np_dtype):
    """The dtype an array of np_dtype becomes: floats float32, uint8 uint8, other
    integers int64, bools bool."""
    import numpy as np
    np_dtype = np.dtype(np_dtype)
    if np_dtype == np.uint8:
        return uint8
    return bool if np_dtype.kind == "b" else int64 if np_dtype.kind in "iu" else float32


class device:
    """Where a tensor lives: device("cpu") (also "cpu:0"), device("cuda") or "cuda:1"."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        if not isinstance(type, str):
            raise TypeError("device: expected a str such as 'cpu', not %s" % builtins.type(type).__name__)
        name, _, number = type.partition(":")
        if number:
            if index is not None:
                raise ValueError("device: index given twice in %r" % type)
            try:
                index = builtins.int(number)
            except ValueError:
                raise ValueError("device: invalid device string %r" % type) from None
        if name not in ("cpu", "cuda", "mps"):
            raise ValueError("device: expected 'cpu' or 'cuda', got %r" % type)
        self.type = name
        self.index = index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return "device(type=%r%s)" % (self.type, "" if self.index is None else ", index=%d" % self.index)

    def __str__(self):
        return self.type if self.index is None else "%s:%d" % (self.type, self.index)


CPU = device("cpu")


def checked_device(d, what):
    """d ("cpu", "cuda", "cuda:1", a device, None: the CPU) as a device a tensor can be
    on now: device("cpu") or device("cuda", index). DeviceError naming what asked, with
    CUDA's reason, when the device cannot be used."""
    if d is None:
        return CPU
    if not isinstance(d, device):
        d = device(d)
    if d.type == "cpu":
        return CPU
    from aicraft.errors import DeviceError
    if d.type != "cuda":
        raise DeviceError("%s: device %s is not available: aicraft runs on the CPU and CUDA" % (what, d))
    from aicraft._ffi import lib
    from aicraft.errors import last_error
    count = lib.ac_cuda_device_count()
    index = 0 if d.index is None else d.index
    if count < 0:
        reason = last_error()[1].split("is not available: ", 1)[-1]
        raise DeviceError("%s: cuda:%d is not available: %s" % (what, index, reason))
    if not 0 <= index < count:
        raise DeviceError("%s: device %s is not available: %d CUDA device%s" % (what, d, count, "s"[:count != 1]))
    return device("cuda", index)


# ---- scripts helper: more dtype names (refused where computed with), finfo/iinfo ----

class _NamedOnlyDtype(dtype):
    """A dtype aicraft names but does not compute with, NumPy has no type for
    (bfloat16): equal to itself (or its name) only."""

    __slots__ = ()

    @property
    def numpy(self):
        raise TypeError("%r has no NumPy equivalent" % self)

    def __eq__(self, other):
        return other is self or other == self.name

    def __hash__(self):
        return hash(self.name)


bfloat16 = _NamedOnlyDtype("bfloat16", None, 2, True)
complex64 = dtype("complex64", None, 8, False)
complex128 = dtype("complex128", None, 16, False)
cfloat, cdouble = complex64, complex128


class finfo:
    """Limits of a floating dtype, as torch.finfo: bits, eps, max, min, tiny
    (= smallest_normal), resolution, dtype. finfo() is float32's."""

    def __init__(self, type=None):
        d = float32 if type is None else type
        if d is builtins.float:
            d = float32
        if not isinstance(d, dtype) or not d.is_floating_point:
            raise TypeError("finfo: expected a floating point dtype, got %r" % (d,))
        if d is bfloat16:   # 8 exponent bits, 7 mantissa bits
            self.bits, self.eps, self.max, self.tiny, self.resolution = 16, 2.0 ** -7, 3.3895313892515355e+38, \
                2.0 ** -126, 0.01
        else:
            import numpy as np
            info = np.finfo(d.numpy)
            self.bits, self.eps, self.max = info.bits, builtins.float(info.eps), builtins.float(info.max)
            self.tiny, self.resolution = builtins.float(info.tiny), builtins.float(info.resolution)
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = d.name

    def __repr__(self):
        return "finfo(resolution=%g, min=%g, max=%g, eps=%g, smallest_normal=%g, tiny=%g, dtype=%s)" % (
            self.resolution, self.min, self.max, self.eps, self.smallest_normal, self.tiny, self.dtype)


class iinfo:
    """Limits of an integer dtype, as torch.iinfo: bits, min, max, dtype."""

    def __init__(self, type):
        d = int64 if type is builtins.int else type
        if not isinstance(d, dtype) or d.is_floating_point or d is bool or d.name.startswith("complex") \
                or isinstance(d, _QuantizedDtype):
            raise TypeError("iinfo: expected an integer dtype, got %r" % (d,))
        import numpy as np
        info = np.iinfo(d.numpy)
        self.bits, self.min, self.max, self.dtype = info.bits, builtins.int(info.min), builtins.int(info.max), d.name

    def __repr__(self):
        return "iinfo(min=%d, max=%d, dtype=%s)" % (self.min, self.max, self.dtype)
