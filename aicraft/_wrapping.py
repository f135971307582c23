"""_wrapping.py - how a Tensor is made around an AcTensor*, and how Tensor's methods
are built on libac's C entry points.

* _wrap and its kin make the wrapper, root or in the open scope (the lifetime
  rules: see tensor.py); _live, _check and _shape_of are what methods and the
  other modules need of a wrapped tensor.
* The builders (_binary, _unary, _reduce, _comparison, ...) make one method for a
  family of C ops; tensor.py's class body calls them, one line per method.

Per-op cost matters (a 16-element add is a few hundred nanoseconds): C entry
points are bound once (module globals or closures), hot ops build their wrapper
inline with Tensor() and two slot stores, and the common operand types are
tested with `type(x) is ...` before anything slower.

Beneath tensor.py: the class body there calls the builders here, so this module
cannot import the class; tensor.py sets `Tensor` here as soon as it is defined (and
creation.py sets `array_to_tensor`, to turn a NumPy array operand into a tensor).
"""
import numbers as _numbers
import weakref
from collections import namedtuple
from typing import Any, Callable, TypeVar

from aicraft._args import _as_dim, _dims_arg, _is_numpy, _pick, _scalar
from aicraft._ffi import ffi, lib
from aicraft._scope import open_scopes as _open_scopes, tls as _tls
from aicraft.errors import SCOPE_ENDED, ScopeError, ShapeError, raise_error

Tensor: Any = None   # the class _wrap makes and the builders test for: set by tensor.py
array_to_tensor: Any = None   # creation.tensor, for NumPy array operands: set by creation.py
# What a built method takes and returns: the Tensor, for type checkers, once bound as
# its method (this module cannot name the class).
_T = TypeVar("_T")

_NULL = ffi.NULL
_ref = weakref.ref
# Scoped tensors of fewer floats live to their scope's end: freeing them early
# would save little memory (C reuses only chunks of 4 KB or more, unless on
# the arena's top) and cost a weak reference and a call per op.
_FREE_EARLY_SIZE = 1024

# ---- wrapping ----------------------------------------------------------------

def _wrap(p):
    """A new Tensor owning p, a non-NULL AcTensor* the caller got a reference to.
    (The hot ops inline this; keep them in step.)"""
    if _open_scopes:
        return _wrap_scoped(p)
    t = Tensor()
    t._ptr = p
    t._scope = None
    return t


def _wrap_scoped(p):
    """_wrap while some thread has a scope open: p may belong to one of ours."""
    t = Tensor()
    t._ptr = p
    depth = p.scope_depth
    if depth:
        try:
            scope = _tls.stack[depth - 1]
        except (AttributeError, IndexError):
            t._ptr = _NULL      # a shell: its __del__ frees nothing
            t._scope = None
            raise ScopeError("a tensor was made in a scope aicraft did not open (depth %d)" % depth) from None
        t._scope = scope
        scope.wrappers.append(t if p.size < _FREE_EARLY_SIZE else _ref(t))
    else:
        t._scope = None
    return t


def _wrap_borrowed(p, owner):
    """A Tensor for p, a pointer owned by `owner` (its grad, or its own tensor): with
    a scoped owner it lives until owner's scope ends, kept by the scope so that it
    never frees what it borrowed (and a scoped p, now referenced twice, is never
    reused early); else it takes a root reference of its own."""
    t = Tensor()
    t._ptr = p
    scope = owner._scope
    if scope is not None:
        t._scope = scope
        scope.wrappers.append(t)
        if p.scope_depth:
            lib.ac_tensor_retain(p)
    else:
        lib.ac_tensor_retain(p)
        t._scope = None
    return t


def _live(t):
    """t's AcTensor*, or ScopeError when t's scope has ended."""
    p = t._ptr
    if p is _NULL:
        raise ScopeError(SCOPE_ENDED)
    return p


def _check(rc, *tensors):
    if rc < 0:
        raise_error(*tensors)


def _shape_of(p):
    return tuple(ffi.unpack(p.shape, p.ndim))


_INT_AS_DOUBLE = 2 ** 1023   # ints past it go through _operand, whose _scalar says ValueError


def _operand(value):
    """The other operand of a binary op: a Tensor, a float, or NotImplemented."""
    if isinstance(value, Tensor):
        return value
    s = _scalar(value)
    if s is not None:
        return s
    if _is_numpy(value, "ndarray"):
        return array_to_tensor(value)
    return NotImplemented


# ---- method builders ---------------------------------------------------------

# ---- dtypes: Python numbers as operands, torch's type promotion (asked of C) --

_SCALAR_A, _SCALAR_B = lib.AC_SCALAR_A, lib.AC_SCALAR_B
_INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1
_KIND_SCALAR = lib.AC_KIND_SCALAR


def _number(value):
    """value as a Python bool, int or float (numpy scalars too), else None."""
    t = type(value)
    if t is float or t is int or t is bool:
        return value
    if isinstance(value, Tensor) or _is_numpy(value, "ndarray"):
        return None
    if _is_numpy(value, "bool_"):
        return bool(value)
    if isinstance(value, _numbers.Integral):
        return int(value)
    if isinstance(value, _numbers.Real):
        return float(value)
    return None


def _scalar_tensor(value):
    """A 0-d tensor holding the Python number value in the dtype its kind stands
    for in promotion: bool, int64 (an int outside int64's range: ValueError, as every
    value C cannot take; torch raises there too), or float32."""
    t = type(value)
    if t is bool:
        p = lib.ac_tensor_from_typed(ffi.new("uint8_t[1]", [value]), _NULL, 0, 2)
    elif t is int:
        if value < _INT64_MIN or value > _INT64_MAX:
            raise ValueError("value %d does not fit in int64" % value)
        p = lib.ac_tensor_from_typed(ffi.new("int64_t[1]", [value]), _NULL, 0, 1)
    else:
        p = lib.ac_tensor_from_typed(ffi.new("float[1]", [value]), _NULL, 0, 0)
    if not p:
        raise_error()
    return _wrap(p)


def _kind(x):
    """(dtype code, kind) of an operand for lib.ac_result_type."""
    if isinstance(x, Tensor):
        p = _live(x)
        return p.dtype, (lib.AC_KIND_TENSOR if p.ndim else lib.AC_KIND_ZERO_DIM)
    return (2 if type(x) is bool else 1 if type(x) is int else 0), _KIND_SCALAR


def _result_code(a, b):
    """The dtype code torch.result_type(a, b) gives (a, b: Tensors or numbers)."""
    code = lib.ac_result_type(*_kind(a), *_kind(b))
    if code < 0:
        raise_error()
    return code


def _general(code, self, other, reflected=False):
    """self <op> other (other <op> self when reflected) through lib.ac_binary: any
    dtypes, torch's promotion; other a Tensor or a Python number."""
    if isinstance(other, Tensor):
        a, b, flags = (other, self, 0) if reflected else (self, other, 0)
    else:
        n = _number(other)
        if n is None:
            if _is_numpy(other, "ndarray"):
                return _general(code, self, array_to_tensor(other), reflected)
            return NotImplemented
        s = _scalar_tensor(n)
        a, b, flags = (s, self, _SCALAR_A) if reflected else (self, s, _SCALAR_B)
    p = lib.ac_binary(code, a._ptr, b._ptr, flags)
    if p:
        return _wrap(p)
    raise_error(a, b)


def _binary(name: str, tensor_fn: Any, scalar_fn: Any, code: int = -1) -> Callable[[_T, Any], _T]:
    """self <op> other for a C binary op and its float32 scalar form; other dtypes
    and Python numbers the scalar form refuses go through lib.ac_binary (code)."""
    def method(self, other):
        if type(other) is Tensor:
            p = tensor_fn(self._ptr, other._ptr)
        elif type(other) is float or type(other) is int and -_INT_AS_DOUBLE < other < _INT_AS_DOUBLE:
            p = scalar_fn(self._ptr, other)
        else:
            if _number(other) is not None:
                return _general(code, self, other)
            other = _operand(other)
            if other is NotImplemented:
                return NotImplemented
            p = tensor_fn(self._ptr, other._ptr)
        if p:
            if _open_scopes:
                return _wrap_scoped(p)
            t = Tensor()
            t._ptr = p
            t._scope = None
            return t
        if isinstance(other, Tensor):
            raise_error(self, other)
        return _general(code, self, other)
    method.__name__ = name
    return method


def _reflected(name: str, tensor_fn: Any, scalar_fn: Any, code: int = -1) -> Callable[[_T, Any], _T]:
    """other <op> self, where other is not a Tensor."""
    def method(self, other):
        if type(other) is float or type(other) is int and -_INT_AS_DOUBLE < other < _INT_AS_DOUBLE:
            p = scalar_fn(self._ptr, other)
        else:
            if _number(other) is not None:
                return _general(code, self, other, True)
            other = _operand(other)
            if other is NotImplemented:
                return NotImplemented
            p = tensor_fn(other._ptr, self._ptr)
        if p:
            return _wrap(p)
        if isinstance(other, Tensor):
            raise_error(other, self)
        return _general(code, self, other, True)
    method.__name__ = name
    return method


def _typed(name: str, code: int, reflected: bool = False) -> Callable[[_T, Any], _T]:
    """self <op> other (other <op> self when reflected) by lib.ac_binary alone:
    //, %, bitwise ops and shifts."""
    def method(self, other):
        if not isinstance(other, Tensor) and _number(other) is None:
            other = _operand(other)
            if other is NotImplemented:
                return NotImplemented
        return _general(code, self, other, reflected)
    method.__name__ = name
    return method


def _unary(name: str, fn: Any, doc: str, promote: bool = True) -> Callable[[_T], _T]:
    def method(self):
        p = fn(self._ptr)
        if p:
            if _open_scopes:
                return _wrap_scoped(p)
            t = Tensor()
            t._ptr = p
            t._scope = None
            return t
        if lib.ac_last_error_code() == lib.AC_ERR_DTYPE and _live(self).dtype != 0 and promote:
            return method(self.float())   # float math of integers gives float32, as torch
        raise_error(self)
    method.__name__ = name
    method.__doc__ = doc
    return method


def _full_scalar(value):
    p = lib.ac_full(_NULL, 0, value)
    if not p:
        raise_error()
    return _wrap(p)


def _reduce(name: str, fn: Any) -> Callable[..., Any]:
    def method(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        if dim is None and axis is None:
            p = fn(self._ptr, _NULL, 0, 1 if (keepdim or keepdims) else 0)
        else:
            dim, keep = _pick(dim, axis, keepdim, keepdims)
            dims, n = _dims_arg(dim)
            p = fn(self._ptr, dims, n, keep)
        if p:
            if _open_scopes:
                return _wrap_scoped(p)
            t = Tensor()
            t._ptr = p
            t._scope = None
            return t
        raise_error(self)
    method.__name__ = name
    method.__doc__ = "%s over dim (an int or a tuple; None: all), keeping reduced dims if keepdim." % name
    return method


def _spread(name: str, fn: Any) -> Callable[..., Any]:
    def method(self, dim=None, keepdim=False, *, correction=None, unbiased=None, axis=None,
               keepdims=None, ddof=None):
        dim, keep = _pick(dim, axis, keepdim, keepdims)
        if ddof is not None:
            correction = ddof
        if unbiased is not None:
            correction = 1 if unbiased else 0
        correction = 1 if correction is None else _as_dim(correction, "correction")
        dims, n = _dims_arg(dim)
        p = fn(self._ptr, dims, n, correction, keep)
        if p:
            return _wrap(p)
        raise_error(self)
    method.__name__ = name
    method.__doc__ = "%s over dim with Bessel's correction (default 1, as PyTorch)." % name
    return method


def _extreme(name: str, fn: Any, fn_dim: Any) -> Callable[..., Any]:
    result = namedtuple(name, ["values", "indices"])

    def method(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        if axis is not None or dim is None or isinstance(dim, (tuple, list)):
            dim, keep = _pick(dim, axis, keepdim, keepdims)
            dims, n = _dims_arg(dim)
            p = fn(self._ptr, dims, n, keep)
            if p:
                return _wrap(p)
            raise_error(self)
        if isinstance(dim, Tensor):   # torch.max(a, b): elementwise
            return _pairwise_extreme(lib.AC_OP_MAXIMUM if name == "max" else lib.AC_OP_MINIMUM, self, dim)
        _, keep = _pick(None, None, keepdim, keepdims)
        indices = ffi.new("AcTensor **")
        p = fn_dim(self._ptr, _as_dim(dim), keep, indices)
        if not p:
            raise_error(self)
        return result(_wrap(p), _wrap(indices[0]))
    method.__name__ = name
    method.__doc__ = ("%s of all elements (dim=None, or a tuple of dims), or along an int dim "
                      "as (values, indices), as PyTorch." % name)
    return method


def _pairwise_extreme(code, a, b):
    """The elementwise maximum (minimum) of a and b (a Tensor or a number), in
    their promoted dtype, NaN propagating, computed in C. Where a float32 operand
    requires grad, the gradient goes to the larger (smaller) one, halved on ties,
    as torch's."""
    out = _general(code, a, b)
    if not lib.ac_is_grad_enabled():
        return out
    needs = [isinstance(x, Tensor) and _live(x).requires_grad for x in (a, b)]
    if not any(needs):
        return out
    plain = [x.detach() if isinstance(x, Tensor) else x for x in (a, b)]
    wins = (plain[0] > plain[1]) if code == lib.AC_OP_MAXIMUM else (plain[0] < plain[1])
    share = wins.float() + (plain[0] == plain[1]).float() * 0.5   # a's share of the gradient
    result = out.detach()
    if needs[0]:
        result = result + share * (a - plain[0])
    if needs[1]:
        result = result + (1.0 - share) * (b - plain[1])
    return result


def _comparison(name: str, code: int) -> Callable[[_T, Any], _T]:
    """self <op> other, elementwise, as a bool tensor (no graph), compared in the
    operands' promoted dtype (integers exactly)."""
    def method(self, other):
        if type(other) is Tensor:
            p = lib.ac_compare(self._ptr, other._ptr, code)
        elif type(other) is float or (type(other) is int and _live(self).dtype == 0):
            p = lib.ac_compare_scalar(self._ptr, other, code)
        else:
            n = _number(other)
            if n is None:
                other = _operand(other)
                if other is NotImplemented:
                    return NotImplemented
                p = lib.ac_compare(self._ptr, other._ptr, code)
            elif type(n) is float:
                p = lib.ac_compare_scalar(self._ptr, n, code)
            else:
                other = _scalar_tensor(n)
                p = lib.ac_compare_typed(self._ptr, other._ptr, code, _SCALAR_B)
        if p:
            return _wrap(p)
        raise_error(self, other)
    method.__name__ = name
    return method


def _logical(name: str, code: int) -> Callable[[_T, Any], _T]:
    """Elementwise logical op of self and other (nonzero is true), as a bool tensor."""
    def method(self, other):
        if type(other) is not Tensor:
            operand = _operand(other)
            if operand is NotImplemented:
                raise TypeError("%s(): unsupported operand type %s" % (name, type(other).__name__))
            other = _full_scalar(operand) if type(operand) is float else operand
        p = lib.ac_logical(self._ptr, other._ptr, code)
        if p:
            return _wrap(p)
        raise_error(self, other)
    method.__name__ = name
    return method


def _bitwise_not(self):
    """~self: bitwise not of integers, logical not of bool."""
    p = lib.ac_bitwise_not(self._ptr)
    if p:
        return _wrap(p)
    raise_error(self)


def _named(name: str, operator: Callable[..., Any]) -> Callable[[_T, Any], _T]:
    """The method form of an operator (t.add(x) for t + x): TypeError where the
    operator would hand NotImplemented on to Python, as PyTorch's methods do."""
    def method(self: Any, other: Any) -> Any:
        out = operator(self, other)
        if out is NotImplemented:
            raise TypeError("%s(): unsupported operand type %s" % (name, type(other).__name__))
        return out
    method.__name__ = name
    method.__doc__ = operator.__doc__
    return method


def _with_alpha(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """method (an add or a sub) with PyTorch's alpha: self <op> alpha * other."""
    def wrapped(self, other, *, alpha=1):
        scale = _number(alpha)
        if scale is None:
            raise TypeError("%s(): alpha must be a number, not %s" % (name, type(alpha).__name__))
        if not (type(scale) is int and scale == 1):
            result = _result_code(self, other if isinstance(other, Tensor) else _number(other))
            if type(scale) is bool and result != 2:
                raise TypeError("%s(): a bool alpha is only supported for bool results" % name)
            if type(scale) is float and result != 0:
                raise TypeError("%s(): for integral input tensors, alpha must not be a float" % name)
            if not (type(scale) is bool and scale):
                other = other * scale
        return method(self, other)
    wrapped.__name__ = name
    wrapped.__doc__ = method.__doc__
    return wrapped


def _inplace(name: str, op: Callable[..., Any], tensor_fn: Any = None,
             scalar_fn: Any = None) -> Callable[[_T, Any], _T]:
    """self <op>= other, written into self's memory without recording a graph: by
    tensor_fn / scalar_fn in one pass where self and other are float32, else as
    op's result copied in."""
    def method(self, other):
        p = _live(self)
        is_tensor = isinstance(other, Tensor)
        q = _live(other) if is_tensor else None
        if lib.ac_is_grad_enabled() and (p.requires_grad or (is_tensor and q.requires_grad)):
            raise RuntimeError("%s: in-place changes of tensors that require grad are not recorded; "
                               "do them under `with ac.no_grad():`" % name)
        if tensor_fn is not None and p.dtype == 0:
            if is_tensor and q.dtype == 0:
                _check(tensor_fn(p, q), self, other)
                return self
            s = None if is_tensor else _scalar(other)
            if s is not None:
                _check(scalar_fn(p, s), self)
                return self
        result = op(self, other)
        if result is NotImplemented:
            raise TypeError("%s: unsupported operand type %s" % (name, type(other).__name__))
        into, got = p.dtype, _live(result).dtype
        if name != "copy_" and into != got and ((got == 0 and into != 0) or (into == 2 and got != 2)):
            raise TypeError("%s: result type %s can't be cast to the desired output type %s"
                            % (name, ffi.string(lib.ac_dtype_name(got)).decode(),
                               ffi.string(lib.ac_dtype_name(into)).decode()))
        if _shape_of(result._ptr) != _shape_of(p):
            raise ShapeError("%s: result of shape %s cannot be written into a tensor of shape %s"
                             % (name, _shape_of(result._ptr), _shape_of(p)))
        _check(lib.ac_tensor_copy_(p, result._ptr), self)
        return self
    method.__name__ = name
    return method
