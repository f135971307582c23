"""_checks.py - the argument checks nn's convolution, pooling and dropout layers share:
sizes as C ints, pairs and triples of them, tensor arguments, dropout probabilities."""
from aicraft._args import _as_int
from aicraft.tensor import Tensor

_INT_LIMIT = 2 ** 31


def _c_int(value, what):
    """value as an int that fits a C int."""
    v = _as_int(value, what)
    if not -_INT_LIMIT <= v < _INT_LIMIT:
        raise ValueError("%s %d is out of range" % (what, v))
    return v


def _pair(value, what):
    """(h, w) from an int or a pair of ints, each fitting a C int."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1:          # torch's _pair repeats a 1-sequence too
            value = (value[0], value[0])
        if len(value) != 2:
            raise ValueError("%s must be an int or a pair of ints, got %r" % (what, value))
        return _c_int(value[0], what), _c_int(value[1], what)
    v = _c_int(value, what)
    return v, v


def _triple(value, what):
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            value = tuple(value) * 3
        if len(value) != 3:
            raise ValueError("%s must be an int or 3 ints, got %r" % (what, value))
        return tuple(_c_int(v, what) for v in value)
    v = _c_int(value, what)
    return v, v, v


def _tensor_arg(value, fn, what):
    if not isinstance(value, Tensor):
        raise TypeError("%s: %s must be a Tensor, not %s" % (fn, what, type(value).__name__))
    return value._ptr


def _dropout_probability(p):
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError("dropout probability has to be between 0 and 1, but got %r" % p)
    return p
