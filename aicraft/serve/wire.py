"""wire.py - a tensor as the Open Inference Protocol carries it: Array, an OIP datatype,
a shape and the values' little-endian bytes, row-major. protocol.py reads requests into
Arrays and writes answers from them; here they are made from and turned into what the
rest of the service holds: JSON data, aicraft tensors, NumPy arrays, and rows joined and
split for batching.

The service keeps to Arrays, the struct module and libac, so a worker serving an aicraft
model never imports NumPy (about 12 MB of a worker's RSS): NumPy is imported only to
hand a servable that takes NumPy arrays its inputs.
"""
import math
import struct
import sys

import aicraft as ac
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live
from aicraft.creation import _finish

# The OIP datatypes with a fixed size: each value's struct format (standard size, read
# little-endian). BYTES (length-prefixed strings) and BF16 (no struct or NumPy type)
# are refused with a message rather than half-supported.
FORMATS = {"BOOL": "?", "UINT8": "B", "UINT16": "H", "UINT32": "I", "UINT64": "Q", "INT8": "b",
           "INT16": "h", "INT32": "i", "INT64": "q", "FP16": "e", "FP32": "f", "FP64": "d"}
ITEMSIZE = {datatype: struct.calcsize("<" + code) for datatype, code in FORMATS.items()}
FLOATS = ("FP16", "FP32", "FP64")
# The datatypes an aicraft tensor holds, and which it takes from a tensor of another
# dtype: NumPy's same_kind casts (bool to any, integers to integers or floats).
TENSOR_DTYPES = {"FP32": ac.float32, "INT64": ac.int64, "BOOL": ac.bool, "UINT8": ac.uint8, "INT8": ac.int8}
DATATYPE_OF_CODE = {dtype.code: datatype for datatype, dtype in TENSOR_DTYPES.items()}   # (dtypes hash by NumPy's)
CASTS_FROM = {"FP32": {"FP32", "INT64", "UINT8", "INT8", "BOOL"}, "INT64": {"INT64", "UINT8", "INT8", "BOOL"},
              "UINT8": {"UINT8", "INT64", "INT8", "BOOL"}, "INT8": {"INT8", "INT64", "UINT8", "BOOL"},
              "BOOL": {"BOOL"}}
NUMPY_TYPES = {"BOOL": "?", "UINT8": "u1", "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8", "INT8": "i1",
               "INT16": "<i2", "INT32": "<i4", "INT64": "<i8", "FP16": "<f2", "FP32": "<f4", "FP64": "<f8"}
LITTLE_ENDIAN = sys.byteorder == "little"    # libac's tensors hold native bytes
MAX_DIMS = 8               # libac's AC_MAX_DIMS


class WireError(ValueError):
    """Data that does not make an Array of its datatype and shape (the app answers 400)."""


class OutOfRange(WireError):
    """A number past its datatype's range."""


class Array:
    """datatype's values of shape as bytes: little-endian, row-major, count * itemsize
    of them (bytes, bytearray or a memoryview of one)."""

    __slots__ = ("datatype", "shape", "data")

    def __init__(self, datatype, shape, data):
        self.datatype, self.shape, self.data = datatype, tuple(shape), data

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return "Array(%s, %s)" % (self.datatype, list(self.shape))

    def __array__(self, dtype=None, copy=None):
        """A NumPy view (np.asarray(a)), read-only when data is bytes; a copy when asked."""
        import numpy as np
        array = np.frombuffer(self.data, NUMPY_TYPES[self.datatype]).reshape(self.shape)
        if dtype is not None:
            return array.astype(dtype, copy=bool(copy))
        return array.copy() if copy else array


def count(shape):
    return math.prod(shape)


# ---- JSON ----------------------------------------------------------------------

def from_json(data, datatype, shape, may_hold_bools=True):
    """JSON data (a list, flat or nested by rows) as an Array of datatype and shape.
    may_hold_bools: whether true or false may be among the values (struct packs true as 1,
    so only then are the values' types looked at one by one). WireError for data of
    another size or kind, or values out of the datatype's range."""
    if not isinstance(data, list):
        raise WireError("data must be a list")
    values = flat(data)[0]
    n = count(shape)
    if len(values) != n:
        if any(type(v) is list for v in values):
            raise WireError("data's nested lists are ragged")
        raise WireError("data has %d values; shape %s takes %d" % (len(values), list(shape), n))
    if datatype == "BOOL":
        if not all(type(v) is bool for v in values):
            raise WireError("data for BOOL holds %s" % _kinds(values, "true or false"))
        return Array(datatype, shape, bytes(values))
    if may_hold_bools and bool in set(map(type, values)):
        raise WireError("data for %s holds true or false" % datatype)
    try:
        packed = struct.pack("<%d%s" % (n, FORMATS[datatype]), *values)
    except (struct.error, OverflowError, TypeError):
        # A string, null or an object; a fraction for an integer type; or a number out of range.
        kinds = set(map(type, values))
        if kinds <= ({int, float} if datatype in FLOATS else {int}):
            raise OutOfRange("a value is out of %s's range" % datatype) from None
        raise WireError("data for %s holds %s" % (datatype, _kinds(values, datatype))) from None
    return Array(datatype, shape, packed)


def flat(data, depth=1):
    """(the values of data, flat; the shape its lists nest as): nested lists must be
    regular (the lists of each level of one length), at most MAX_DIMS deep."""
    if not data or type(data[0]) is not list:
        return data, (len(data),)     # a list among the values is found as they are packed
    if depth == MAX_DIMS or not all(type(v) is list for v in data):
        raise WireError("data's nested lists are ragged or nest past %d levels" % MAX_DIMS)
    values, inner = [], None
    for row in data:
        row_values, shape = flat(row, depth + 1)
        if shape != (inner or shape):
            raise WireError("data's nested lists are ragged or nest past %d levels" % MAX_DIMS)
        values += row_values
        inner = shape
    return values, (len(data),) + inner


def _kinds(values, datatype):
    """What of values a datatype does not take, in words."""
    types = set(map(type, values))
    if list in types:
        return "numbers beside lists (ragged nested lists)"
    if str in types:
        return "strings"
    if type(None) in types or dict in types:
        return "null, objects or integers past 64 bits"
    if datatype not in FLOATS and float in types:
        return "fractions or integers past 64 bits"
    return "integers" if int in types else "numbers"


def to_json(array):
    """The values of array, a flat list; ValueError for a float that is not finite (JSON
    has none, and orjson would write null)."""
    values = list(struct.unpack("<%d%s" % (count(array.shape), FORMATS[array.datatype]), array.data))
    if array.datatype in FLOATS and not all(map(math.isfinite, values)):
        raise ValueError("values that are not finite; JSON cannot carry them (ask for binary_data)")
    return values


# ---- bytes ---------------------------------------------------------------------

def from_bytes(buffer, datatype, shape):
    """The Array of datatype and shape in buffer (exactly its bytes; a memoryview is kept,
    not copied). WireError for a BOOL byte other than 0 or 1."""
    if datatype == "BOOL" and bytes(buffer).translate(None, b"\x00\x01"):
        raise WireError("a BOOL byte must be 0 or 1")
    return Array(datatype, shape, buffer)


def zeros(datatype, shape):
    return Array(datatype, shape, bytes(count(shape) * ITEMSIZE[datatype]))


# ---- aicraft tensors -----------------------------------------------------------

def to_tensor(array):
    """A CPU tensor holding a copy of array's values; TypeError for a datatype aicraft
    has no tensors of."""
    dtype = TENSOR_DTYPES.get(array.datatype)
    if dtype is None:
        raise TypeError("an aicraft tensor holds %s, not %s" % (", ".join(TENSOR_DTYPES), array.datatype))
    if not LITTLE_ENDIAN and dtype.itemsize > 1:
        raise TypeError("this host is big-endian: the protocol's little-endian %s needs a byte swap "
                        "aicraft does not do" % array.datatype)
    p = lib.ac_tensor_from_typed(ffi.from_buffer(array.data), array.shape, len(array.shape), dtype.code)
    return _finish(p, False)


def from_tensor(tensor, datatype):
    """A CPU tensor's values as an Array of datatype: its own dtype's, or cast to datatype
    where NumPy's same_kind casting allows (bool to any, integers to integers or FP32);
    TypeError for another cast or a tensor on a device."""
    p = _live(tensor)
    if p.device != 0:
        raise TypeError("the output is on %s; a served output must be on the CPU" % tensor.device)
    own = DATATYPE_OF_CODE[p.dtype]
    if own != datatype:
        if own not in CASTS_FROM.get(datatype, ()):
            raise TypeError("the output is %s; the servable names %s, which it does not cast to" % (own, datatype))
        tensor = tensor.to(TENSOR_DTYPES[datatype])     # held: p is its memory
        p = _live(tensor)
    itemsize = ITEMSIZE[datatype]
    if not LITTLE_ENDIAN and itemsize > 1:
        raise TypeError("this host is big-endian: %s needs a byte swap aicraft does not do" % datatype)
    return Array(datatype, ffi.unpack(p.shape, p.ndim), ffi.buffer(p.data, p.size * itemsize)[:])


# ---- NumPy arrays (imported only here) -------------------------------------------

def input_maker(servable):
    """What servable's infer and learn take an Array as: to_tensor where its takes_tensors
    is true (aicraft's servables), else to_numpy."""
    return to_tensor if getattr(servable, "takes_tensors", False) else to_numpy


def to_numpy(array):
    """A read-only NumPy view of array (a writable one over a bytearray)."""
    return array.__array__()


def from_numpy(value, datatype):
    """A NumPy array (or what np.asarray takes) as an Array of datatype, cast where NumPy's
    same_kind casting allows."""
    import numpy as np
    a = np.asarray(value).astype(NUMPY_TYPES[datatype], casting="same_kind", copy=False)
    return Array(datatype, a.shape, np.ascontiguousarray(a).tobytes())


def from_result(value, datatype):
    """A servable's output as an Array: an aicraft tensor, an Array, or a NumPy array."""
    if isinstance(value, ac.Tensor):
        return from_tensor(value, datatype)
    if isinstance(value, Array):
        if value.datatype != datatype:
            raise TypeError("the output is %s; the servable names %s" % (value.datatype, datatype))
        return value
    return from_numpy(value, datatype)


# ---- rows, for batching ----------------------------------------------------------

def join(arrays):
    """Arrays of one datatype and row shape, their rows one after another."""
    first = arrays[0]
    return Array(first.datatype, (sum(len(a) for a in arrays),) + first.shape[1:],
                 b"".join(a.data for a in arrays))


def rows(array, start, end):
    """Rows start to end of array (a view of its bytes)."""
    row = count(array.shape[1:]) * ITEMSIZE[array.datatype]
    return Array(array.datatype, (end - start,) + array.shape[1:],
                 memoryview(array.data)[start * row:end * row])
