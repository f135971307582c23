"""_args.py - checking and converting the arguments of tensor functions: ints,
dims, shapes and scalars. Bad types raise TypeError, values that cannot reach C
(more than 64 bits) ValueError or IndexError; C checks the rest.
"""
import operator
import sys
from numbers import Real

from aicraft._ffi import ffi

_NULL = ffi.NULL


def _is_numpy(value, type_name):
    """isinstance(value, numpy.<type_name>), without importing NumPy: until something
    has imported it, no value can be one of its types."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, getattr(np, type_name))


_INT64_MIN, _INT64_END = -(2 ** 63), 2 ** 63


def _as_int(value, what):
    """value as an int of C's int64 range: TypeError for a non-int, ValueError past
    the range (as torch's "Overflow when unpacking long long"), never OverflowError."""
    if type(value) is not int:
        if isinstance(value, bool) or value is None:
            raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError("%s must be an int, not %s" % (what, type(value).__name__)) from None
    if not _INT64_MIN <= value < _INT64_END:
        raise ValueError("%s %d is out of the int64 range" % (what, value))
    return value


def _as_bound(value, what):
    """A slice's start, stop or step as an int clamped to int64's range: no tensor has
    2^63 elements, so x[2**63:] is empty and x[::2**63] takes the first, as in Python."""
    if type(value) is int and _INT64_MIN <= value < _INT64_END:
        return value
    try:
        return _as_int(value, what)
    except ValueError:
        return _INT64_END - 1 if value > 0 else _INT64_MIN


def _as_index(value, what):
    """An int index: IndexError past int64's range (out of bounds for any dim)."""
    try:
        return _as_int(value, what)
    except ValueError:
        raise IndexError("%s %d is out of bounds (past the int64 range)" % (what, value)) from None


def _as_dim(value, what="dim"):
    d = _as_int(value, what)
    if not -(2 ** 31) <= d < 2 ** 31:
        raise IndexError("%s %d is out of range" % (what, d))
    return d


# A one-element int[] per small dim, so reductions over one dim allocate nothing.
_ONE_DIM = {d: ffi.new("int[1]", [d]) for d in range(-8, 8)}


def _dims_arg(dim):
    """(int* or NULL, count) for a dim argument: None, an int, or a sequence of ints."""
    if dim is None:
        return _NULL, 0
    if type(dim) is int and -8 <= dim < 8:
        return _ONE_DIM[dim], 1
    if isinstance(dim, (tuple, list)):
        if not dim:
            return _NULL, 0
        dims = [_as_dim(d) for d in dim]
        return ffi.new("int[]", dims), len(dims)
    return ffi.new("int[1]", [_as_dim(dim)]), 1


def _pick(dim, axis, keepdim, keepdims):
    """Merge PyTorch's dim/keepdim with NumPy's axis/keepdims."""
    if axis is not None:
        if dim is not None:
            raise TypeError("pass dim or axis, not both")
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    return dim, 1 if keepdim else 0


def _shape_args(args, what="shape"):
    """A shape given as ints (f(2, 3)) or as one sequence (f((2, 3)))."""
    if len(args) == 1 and not (isinstance(args[0], int) or _is_numpy(args[0], "integer")):
        args = args[0]
        if not isinstance(args, (tuple, list)):
            raise TypeError("%s must be ints or a sequence of ints, not %s" % (what, type(args).__name__))
    shape = []
    for d in args:
        d = _as_int(d, what + " entries")
        if not -(2 ** 63) <= d < 2 ** 63:
            raise ValueError("%s entry %d does not fit in 64 bits" % (what, d))
        shape.append(d)
    return shape


def _scalar(value):
    """value as a float when it is a real number (not a tensor or an array), else None."""
    if type(value) is float:
        return value
    if type(value) is int or isinstance(value, Real) and not _is_numpy(value, "ndarray"):
        try:
            return float(value)
        except OverflowError:   # 10**400: ValueError, as every value C cannot take
            raise ValueError("the scalar %.20s... is out of a double's range" % (value,)) from None
    return None
