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
cannot import the class; tensor.py sets `Tensor` here as soon as it is defined.
"""
import weakref
from collections import namedtuple
from typing import TYPE_CHECKING, Any, Callable

from aicraft._args import _as_dim, _dims_arg, _is_numpy, _pick, _scalar
from aicraft._ffi import ffi, lib
from aicraft._scope import open_scopes as _open_scopes, tls as _tls
from aicraft.errors import SCOPE_ENDED, ScopeError, ShapeError, raise_error

if TYPE_CHECKING:
    from aicraft.tensor import Tensor
else:
    Tensor = None   # the class _wrap makes and the builders test for: set by tensor.py

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
        from aicraft.creation import tensor
        return tensor(value)
    return NotImplemented


# ---- method builders ---------------------------------------------------------

# Ops whose result is int64 when both operands are integers, as in PyTorch.
_INTEGER_RESULT = {"__add__", "__sub__", "__mul__", "__radd__", "__rsub__", "__rmul__",
                   "__neg__", "__abs__"}


def _is_integral(x):
    return type(x) is int or (isinstance(x, Tensor) and _live(x).dtype != 0)


def _promoted(method, self, other=None):
    """Called when C refused an operand's dtype: run method again on float32 copies of
    int64 and bool tensors, as PyTorch promotes them. The result is int64 when every
    operand is an integer and the op keeps integers (exact below 2**24, float32's
    whole numbers); division and pow give float32."""
    if lib.ac_last_error_code() != lib.AC_ERR_DTYPE:
        raise_error(self, other)
    args = [x.float() if isinstance(x, Tensor) else x for x in (self, other)]
    out = method(*args) if other is not None else method(args[0])
    integral = method.__name__ in _INTEGER_RESULT and _is_integral(self) and \
        (other is None or _is_integral(other))
    return out.long() if integral else out


def _binary(name: str, tensor_fn: Any, scalar_fn: Any) -> Callable[["Tensor", Any], "Tensor"]:
    """self <op> other for a C binary op and its scalar form."""
    def method(self, other):
        if type(other) is Tensor:
            p = tensor_fn(self._ptr, other._ptr)
        elif type(other) is float or type(other) is int and -_INT_AS_DOUBLE < other < _INT_AS_DOUBLE:
            p = scalar_fn(self._ptr, other)
        else:
            other = _operand(other)
            if other is NotImplemented:
                return NotImplemented
            if type(other) is float:
                p = scalar_fn(self._ptr, other)
            else:
                p = tensor_fn(self._ptr, other._ptr)
        if p:
            if _open_scopes:
                return _wrap_scoped(p)
            t = Tensor()
            t._ptr = p
            t._scope = None
            return t
        return _promoted(method, self, other)
    method.__name__ = name
    return method


def _reflected(name: str, tensor_fn: Any, scalar_fn: Any) -> Callable[["Tensor", Any], "Tensor"]:
    """other <op> self, where other is not a Tensor."""
    def method(self, other):
        if type(other) is float or type(other) is int and -_INT_AS_DOUBLE < other < _INT_AS_DOUBLE:
            p = scalar_fn(self._ptr, other)
        else:
            other = _operand(other)
            if other is NotImplemented:
                return NotImplemented
            if type(other) is float:
                p = scalar_fn(self._ptr, other)
            else:
                p = tensor_fn(other._ptr, self._ptr)
        if p:
            return _wrap(p)
        return _promoted(method, self, other)
    method.__name__ = name
    return method


def _unary(name: str, fn: Any, doc: str) -> Callable[["Tensor"], "Tensor"]:
    def method(self):
        p = fn(self._ptr)
        if p:
            if _open_scopes:
                return _wrap_scoped(p)
            t = Tensor()
            t._ptr = p
            t._scope = None
            return t
        return _promoted(method, self)
    method.__name__ = name
    method.__doc__ = doc
    return method


def _full_scalar(value):
    p = lib.ac_full(_NULL, 0, value)
    if not p:
        raise_error()
    return _wrap(p)


def _reduce(name: str, fn: Any) -> Callable[..., "Tensor"]:
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


def _spread(name: str, fn: Any) -> Callable[..., "Tensor"]:
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
        if isinstance(dim, Tensor):
            raise TypeError("%s(other) is not supported: aicraft has no elementwise %s" % (name, name))
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


def _comparison(name: str, code: int) -> Callable[["Tensor", Any], "Tensor"]:
    """self <op> other, elementwise, as a bool tensor (no graph)."""
    def method(self, other):
        if type(other) is Tensor:
            p = lib.ac_compare(self._ptr, other._ptr, code)
        else:
            s = _scalar(other)
            if s is None:
                other = _operand(other)
                if other is NotImplemented:
                    return NotImplemented
                p = lib.ac_compare(self._ptr, other._ptr, code)
            else:
                p = lib.ac_compare_scalar(self._ptr, s, code)
        if p:
            return _wrap(p)
        raise_error(self, other)
    method.__name__ = name
    return method


def _logical(name: str, code: int) -> Callable[["Tensor", Any], "Tensor"]:
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


def _bool_only(name: str, method: Callable[..., "Tensor"]) -> Callable[..., "Tensor"]:
    """&, |, ^ and ~ on bool tensors (aicraft has no bitwise ops on integers)."""
    def op(self, *other):
        if _live(self).dtype != 2 or any(isinstance(o, Tensor) and _live(o).dtype != 2 for o in other):
            raise TypeError("%s: aicraft supports it on bool tensors only (for logical and/or/xor/not)" % name)
        return method(self, *other)
    op.__name__ = name
    return op


def _named(name: str, operator: Callable[["Tensor", Any], Any]) -> Callable[["Tensor", Any], "Tensor"]:
    """The method form of an operator (t.add(x) for t + x): TypeError where the
    operator would hand NotImplemented on to Python, as PyTorch's methods do."""
    def method(self: "Tensor", other: Any) -> "Tensor":
        out = operator(self, other)
        if out is NotImplemented:
            raise TypeError("%s(): unsupported operand type %s" % (name, type(other).__name__))
        return out
    method.__name__ = name
    method.__doc__ = operator.__doc__
    return method


def _with_alpha(name: str, method: Callable[["Tensor", Any], "Tensor"]) -> Callable[..., "Tensor"]:
    """method (an add or a sub) with PyTorch's alpha: self <op> alpha * other."""
    def wrapped(self, other, *, alpha=1):
        scale = _scalar(alpha)
        if scale is None or type(alpha) is bool:
            raise TypeError("%s(): alpha must be a number, not %s" % (name, type(alpha).__name__))
        if scale != 1.0:
            other = other * scale
        return method(self, other)
    wrapped.__name__ = name
    wrapped.__doc__ = method.__doc__
    return wrapped


def _inplace(name: str, op: Callable[["Tensor", Any], "Tensor"], tensor_fn: Any = None,
             scalar_fn: Any = None) -> Callable[["Tensor", Any], "Tensor"]:
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
        if _shape_of(result._ptr) != _shape_of(p):
            raise ShapeError("%s: result of shape %s cannot be written into a tensor of shape %s"
                             % (name, _shape_of(result._ptr), _shape_of(p)))
        _check(lib.ac_tensor_copy_(p, result._ptr), self)
        return self
    method.__name__ = name
    return method
