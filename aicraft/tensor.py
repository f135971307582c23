"""tensor.py - aicraft.Tensor, a thin wrapper over libac's AcTensor.

A Tensor holds `_ptr` (the AcTensor*) and `_scope` (None for a root tensor, else
the _scope.Scope, usually an ac.checkpoint(), it was made in).

* Root tensors are reference counted in C; the wrapper owns one reference and
  drops it in __del__.
* Scoped tensors die with their scope. The scope keeps its wrappers (weak
  references to those of _wrapping._FREE_EARLY_SIZE floats or more) and, when it ends,
  sets the `_ptr` of those still alive to NULL (see _scope.py). A large tensor's wrapper
  that dies inside its scope frees its tensor there too: if nothing else
  refers to it (a graph node, a view, another wrapper), C reuses its memory
  for the scope's next tensors, so a forward pass under no_grad holds about
  two layers' outputs at a time rather than all of them.

The wrapping helpers and the method builders the class body calls live in
_wrapping.py, beneath this module. The modules above it (indexing.py, pointwise.py,
shapes.py, ...) add their methods to the class with bind(Tensor), which
aicraft/__init__.py calls: this module imports none of them (aicraft/_layers.py).
"""
import builtins
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Tuple, Union

if TYPE_CHECKING:   # NumPy is imported where a tensor meets it (see dtypes.py)
    import numpy as np

from aicraft._args import _as_dim, _dims_arg, _is_numpy, _scalar, _shape_args
from aicraft import _wrapping, dtypes
from aicraft._ffi import ffi, lib
from aicraft._scope import open_scopes as _open_scopes, tls as _tls
from aicraft._wrapping import (_binary, _bitwise_not, _check, _general, _number, _typed, _comparison, _extreme, _full_scalar,
                               _inplace, _live, _logical, _named, _operand, _reduce, _reflected,
                               _shape_of, _spread, _unary, _with_alpha, _wrap, _wrap_borrowed,
                               _wrap_scoped)
from aicraft._grad import add_grad_hook as _add_grad_hook, after_backward as _after_backward
from aicraft._grad import raise_hook_error as _raise_hook_error
from aicraft.errors import ShapeError, raise_error

_NULL = ffi.NULL
_DTYPE = dtypes.BY_CODE
_INF = float("inf")
_backward = lib.ac_backward
_add, _sub, _mul, _div, _pow = lib.ac_add, lib.ac_sub, lib.ac_mul, lib.ac_div, lib.ac_pow
_add_scalar, _mul_scalar = lib.ac_add_scalar, lib.ac_mul_scalar
_matmul = lib.ac_matmul


def _sub_scalar(p, s):
    return _add_scalar(p, -s)


def _sub_scalar_(p, s):
    return lib.ac_add_scalar_(p, -s)


def _rpow_scalar(p, base):
    if p != _NULL and p.dtype != 0:   # integers: lib.ac_binary's promotion (the caller's fallback)
        return _NULL
    base = _full_scalar(base)    # held in a local: the C call must not outlive it
    return _pow(base._ptr, p)


def _returns_tensor(method: Callable[..., Any]) -> Callable[..., "Tensor"]:
    """method, as type checkers should see it: _wrapping's builders of methods that take
    any arguments cannot name Tensor (they sit beneath it)."""
    return method


def _remainder_graph(out, a, b):
    """out (a % b, computed in C) with the graph of a - floor(a / b) * b added where
    a or b requires grad: the values stay C's, the gradient is torch's."""
    if out is NotImplemented or not lib.ac_is_grad_enabled():
        return out
    needs = [isinstance(x, Tensor) and _live(x).requires_grad for x in (a, b)]
    if not any(needs):
        return out
    plain = [x.detach() if isinstance(x, Tensor) else x for x in (a, b)]
    result = out.detach()
    if needs[0]:
        result = result + (a - plain[0])
    if needs[1]:
        result = result - (plain[0] // plain[1]) * (b - plain[1])
    return result


class Tensor:
    """A float32 tensor living in libac. Make one with ac.tensor(data), ac.zeros(shape),
    ac.from_numpy(array), ... or an op; Tensor() itself makes an empty, unusable shell
    (there is no __init__: wrapping must stay cheap)."""

    __slots__ = ("_ptr", "_scope", "__weakref__")

    if TYPE_CHECKING:   # what type checkers see of the methods bound from above (aicraft/__init__.py)
        def __getitem__(self, index: Any) -> "Tensor": ...
        def __setitem__(self, index: Any, value: Any) -> None: ...
        def where(self, condition: "Tensor", other: Any) -> "Tensor": ...
        def masked_fill(self, mask: "Tensor", value: Any) -> "Tensor": ...
        def masked_fill_(self, mask: "Tensor", value: Any) -> "Tensor": ...
        def __dlpack__(self, *, stream: Optional[int] = None, max_version: Optional[Tuple[int, int]] = None,
                       dl_device: Optional[Tuple[int, int]] = None, copy: Optional[builtins.bool] = None) -> Any: ...
    __array_ufunc__ = None     # NumPy defers to our reflected operators

    def __del__(self, _free=lib.ac_tensor_free, _tls=_tls):
        try:
            p = self._ptr
        except AttributeError:   # an empty shell from Tensor() owns nothing
            return
        # p is NULL once its scope ended. A scoped tensor is freed only on its
        # scope's thread (whose stack holds it): on another (a garbage
        # collection run there), the scope could end between reading p and the
        # call, and C would read freed memory; there the tensor simply lives to
        # its scope's end.
        scope = self._scope
        if p and (scope is None or scope.stack is getattr(_tls, "stack", None)):
            _free(p)

    # ---- properties --------------------------------------------------------

    @property
    def shape(self) -> Tuple[int, ...]:
        """The dimensions, as a tuple."""
        return _shape_of(_live(self))

    @property
    def ndim(self) -> int:
        return _live(self).ndim

    @property
    def dtype(self) -> dtypes.dtype:
        """ac.float32, ac.int64 or ac.bool."""
        return _DTYPE[_live(self).dtype]

    @property
    def device(self) -> dtypes.device:
        p = _live(self)
        return dtypes.CPU if p.device == 0 else dtypes.device("cuda", p.device_index)

    @property
    def is_cuda(self) -> builtins.bool:
        return _live(self).device == 1

    def _not_that_kind(self) -> builtins.bool:
        _live(self)
        return False

    # Layouts and devices aicraft has none of: torch's flags, always False.
    is_xpu = is_mps = is_meta = is_sparse = is_quantized = is_mkldnn = property(_not_that_kind)

    def is_floating_point(self) -> builtins.bool:
        return _live(self).dtype == 0

    def element_size(self) -> int:
        return _DTYPE[_live(self).dtype].itemsize

    @property
    def requires_grad(self) -> builtins.bool:
        return bool(_live(self).requires_grad)

    @requires_grad.setter
    def requires_grad(self, value: builtins.bool) -> None:
        if not (isinstance(value, int) or _is_numpy(value, "bool_")):
            raise TypeError("requires_grad must be a bool, not %s" % type(value).__name__)
        _check(lib.ac_tensor_set_requires_grad(self._ptr, 1 if value else 0), self)

    @property
    def grad(self) -> Optional["Tensor"]:
        """The gradient accumulated by backward(), or None."""
        g = _live(self).grad
        if not g:
            return None
        return _wrap_borrowed(g, self)

    @grad.setter
    def grad(self, value: Optional["Tensor"]) -> None:
        if value is not None:
            raise TypeError("only `t.grad = None` is supported; use t.grad.zero_() or t.grad.copy_(g)")
        _check(lib.ac_tensor_zero_grad(self._ptr), self)

    @property
    def is_leaf(self) -> builtins.bool:
        return _live(self).node == _NULL

    @property
    def data(self) -> "Tensor":
        """A detached tensor sharing this one's memory."""
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        if not isinstance(value, Tensor):
            raise TypeError("data must be a Tensor, not %s" % type(value).__name__)
        p, q = _live(self), _live(value)
        if _shape_of(p) != _shape_of(q):
            raise ShapeError("data: shape %s cannot replace shape %s" % (_shape_of(q), _shape_of(p)))
        _check(lib.ac_tensor_copy_(p, q), self, value)

    @property
    def T(self) -> "Tensor":
        """The dims reversed (the transpose of a matrix)."""
        nd = _live(self).ndim
        return self if nd < 2 else self.permute(*range(nd - 1, -1, -1))

    def dim(self) -> int:
        return _live(self).ndim

    def numel(self) -> int:
        return _live(self).size

    def size(self, dim: Optional[int] = None) -> Any:
        """The shape, or the size of one dim."""
        p = _live(self)
        if dim is None:
            return _shape_of(p)
        d, nd = _as_dim(dim), p.ndim
        if not -nd <= d < nd:
            raise IndexError("size: dim %d is out of range for a %d-d tensor" % (d, nd))
        return p.shape[d % nd]

    def __len__(self) -> int:
        p = _live(self)
        if p.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return p.shape[0]

    def __iter__(self) -> Iterator["Tensor"]:
        n = len(self)
        return (self[i] for i in range(n))

    # ---- conversion --------------------------------------------------------

    def numpy(self) -> "np.ndarray":
        """A NumPy copy: float32, int64 or bool, as the tensor's dtype (CPU tensors only)."""
        import numpy as np
        p = _live(self)
        if p.device != 0:
            raise TypeError("numpy: can't convert %s device type tensor to numpy. Use Tensor.cpu() to "
                            "copy the tensor to host memory first." % self.device)
        kind, size = _DTYPE[p.dtype], p.size
        array = np.empty(ffi.unpack(p.shape, p.ndim), kind.numpy)    # the shape as a list will do
        if size:
            ffi.memmove(array, p.data, size * kind.itemsize)
        return array

    def __array__(self, dtype: Any = None, copy: Optional[builtins.bool] = None) -> "np.ndarray":
        if copy is False:
            raise ValueError("a Tensor's memory is not shared with NumPy: np.asarray(t) copies")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(1, 0): DLPack's CPU; (2, index) for a CUDA tensor (which __dlpack__ refuses)."""
        p = _live(self)
        return (1, 0) if p.device == 0 else (2, p.device_index)

    def _host(self) -> "Tensor":
        """self on the CPU: itself, or a copy of a CUDA tensor (waits for the device), no graph."""
        return self if _live(self).device == 0 else self.detach().cpu()

    def item(self) -> Union[int, builtins.float, builtins.bool]:
        p = _live(self)
        if p.size != 1:
            raise RuntimeError("item: a tensor with %d elements cannot be converted to a Python number" % p.size)
        if p.dtype == 0 and p.device == 0:
            return p.data[0]
        return self._host().numpy().reshape(()).item()     # int for int64, bool for bool

    def tolist(self) -> Any:
        return self._host().numpy().tolist()

    def __float__(self) -> builtins.float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> builtins.bool:
        p = _live(self)
        if p.size != 1:
            raise RuntimeError("bool: the truth value of a tensor with %d elements is ambiguous" % p.size)
        return bool(self.item())

    def __index__(self) -> int:
        p = _live(self)
        if p.dtype != 1 or p.size != 1:
            raise TypeError("only one-element int64 tensors can be used as an index")
        return self.item()

    def __format__(self, spec: str) -> str:
        if _live(self).size == 1:
            return format(self.item(), spec)
        return format(str(self), spec)

    def __repr__(self) -> str:
        p = _live(self)
        import numpy as np
        body = np.array2string(self._host().numpy(), precision=4, separator=", ", prefix="tensor(")
        if p.device != 0:    # PyTorch's place for it: after the values
            body += ", device='%s'" % self.device
        if p.size == 0 and p.dtype != 0:
            return "tensor(%s, dtype=%r)" % (body, self.dtype)
        if p.node:
            op = ffi.string(p.node.op).decode()
            kind = "".join(part.capitalize() for part in op.split("_"))
            return "tensor(%s, grad_fn=<%sBackward0>)" % (body, kind)
        if p.requires_grad:
            return "tensor(%s, requires_grad=True)" % body
        return "tensor(%s)" % body

    __str__ = __repr__

    # ---- autograd ----------------------------------------------------------

    def backward(self, gradient: Optional["Tensor"] = None, retain_graph: Optional[builtins.bool] = None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's .grad (self must be scalar
        unless gradient, of self's shape, is given). The graph behind self is freed
        as it is walked, unless retain_graph is true."""
        if gradient is None and not retain_graph:
            rc = _backward(self._ptr)
        else:
            g = _NULL
            if gradient is not None:
                g = _operand(gradient)
                if not isinstance(g, Tensor):
                    raise TypeError("backward: gradient must be a Tensor, not %s" % type(gradient).__name__)
                g = _live(g)   # NULL would mean "ones" to C
            rc = lib.ac_backward_ex(self._ptr, g, 1 if retain_graph else 0)
        if rc < 0:
            _raise_hook_error()
            raise_error(self, gradient)
        if _after_backward:
            for callback in tuple(_after_backward):
                callback()

    def register_post_accumulate_grad_hook(self, hook: Callable[["Tensor"], None]) -> Any:
        """hook(self) runs in each backward once self's .grad is final (self: a leaf that
        requires grad), the leaves nearest the loss first, as PyTorch's. Returns a
        handle whose remove() takes the hook away."""
        return _add_grad_hook(self, _live(self), hook)

    def detach(self) -> "Tensor":
        """The same data with no graph (shares memory)."""
        p = lib.ac_tensor_detach(self._ptr)
        if p:
            return _wrap(p)
        raise_error(self)

    def requires_grad_(self, requires_grad: builtins.bool = True) -> "Tensor":
        self.requires_grad = requires_grad
        return self

    def clone(self) -> "Tensor":
        """A differentiable copy."""
        p = lib.ac_tensor_clone(self._ptr)
        if p:
            return _wrap(p)
        raise_error(self)

    def keep(self) -> "Tensor":
        """A detached copy owned at root: it outlives the current ac.checkpoint()."""
        p = lib.ac_tensor_keep(self._ptr)
        if p:
            return _wrap(p)
        raise_error(self)

    # Copying the wrapper's slots would make two owners of one reference: these
    # give every copy its own.
    def __copy__(self):
        """Another Tensor object for the same tensor (shared memory and graph)."""
        return _wrap_borrowed(_live(self), self)

    def __deepcopy__(self, memo):
        """A new leaf with a copy of the data and the same requires_grad."""
        p = lib.ac_tensor_detach(self._ptr)
        if not p:
            raise_error(self)
        copy = _wrap(p).clone()
        copy.requires_grad_(bool(_live(self).requires_grad))
        memo[id(self)] = copy
        return copy

    # ---- in place (no graph) -----------------------------------------------

    def zero_(self) -> "Tensor":
        return self.fill_(0.0)

    def fill_(self, value: Any) -> "Tensor":
        p = _live(self)
        if lib.ac_is_grad_enabled() and p.requires_grad:
            raise RuntimeError("fill_: in-place changes of tensors that require grad are not recorded; "
                               "do them under `with ac.no_grad():`")
        s = _scalar(value)
        if s is None:
            raise TypeError("fill_: value must be a number, not %s" % type(value).__name__)
        _check(lib.ac_tensor_fill_(p, s), self)
        return self

    def copy_(self, src: Any) -> "Tensor":
        if not isinstance(src, Tensor):
            raise TypeError("copy_: src must be a Tensor, not %s" % type(src).__name__)
        return self._copy_(self, src)

    # ---- operators ---------------------------------------------------------

    __add__ = _binary("__add__", _add, _add_scalar, lib.AC_OP_ADD)
    __sub__ = _binary("__sub__", _sub, _sub_scalar, lib.AC_OP_SUB)
    __mul__ = _binary("__mul__", _mul, _mul_scalar, lib.AC_OP_MUL)
    __truediv__ = _binary("__truediv__", _div, lib.ac_div_scalar, lib.AC_OP_DIV)
    __pow__ = _binary("__pow__", _pow, lib.ac_pow_scalar, lib.AC_OP_POW)
    __radd__ = _reflected("__radd__", _add, _add_scalar, lib.AC_OP_ADD)
    __rsub__ = _reflected("__rsub__", _sub, lib.ac_rsub_scalar, lib.AC_OP_SUB)
    __rmul__ = _reflected("__rmul__", _mul, _mul_scalar, lib.AC_OP_MUL)
    __rtruediv__ = _reflected("__rtruediv__", _div, lib.ac_rdiv_scalar, lib.AC_OP_DIV)
    __rpow__ = _reflected("__rpow__", _pow, _rpow_scalar, lib.AC_OP_POW)
    __floordiv__ = _typed("__floordiv__", lib.AC_OP_FLOOR_DIVIDE)
    __rfloordiv__ = _typed("__rfloordiv__", lib.AC_OP_FLOOR_DIVIDE, True)
    _mod = _typed("__mod__", lib.AC_OP_REMAINDER)
    _rmod = _typed("__rmod__", lib.AC_OP_REMAINDER, True)

    def __mod__(self, other: Any) -> "Tensor":
        """Python's remainder (the divisor's sign), differentiable in float32 operands
        as torch's: d/da = 1, d/db = -floor(a / b)."""
        return _remainder_graph(self._mod(other), self, other)

    def __rmod__(self, other: Any) -> "Tensor":
        return _remainder_graph(self._rmod(other), other, self)
    __and__ = _typed("__and__", lib.AC_OP_BITWISE_AND)
    __rand__ = _typed("__rand__", lib.AC_OP_BITWISE_AND, True)
    __or__ = _typed("__or__", lib.AC_OP_BITWISE_OR)
    __ror__ = _typed("__ror__", lib.AC_OP_BITWISE_OR, True)
    __xor__ = _typed("__xor__", lib.AC_OP_BITWISE_XOR)
    __rxor__ = _typed("__rxor__", lib.AC_OP_BITWISE_XOR, True)
    __lshift__ = _typed("__lshift__", lib.AC_OP_LSHIFT)
    __rlshift__ = _typed("__rlshift__", lib.AC_OP_LSHIFT, True)
    __rshift__ = _typed("__rshift__", lib.AC_OP_RSHIFT)
    __rrshift__ = _typed("__rrshift__", lib.AC_OP_RSHIFT, True)
    __invert__ = bitwise_not = _bitwise_not

    def __matmul__(self, other: Any) -> "Tensor":
        if type(other) is not Tensor:
            other = _operand(other)
            if not isinstance(other, Tensor):
                return NotImplemented
        p = _matmul(self._ptr, other._ptr)
        if p:
            if _open_scopes:
                return _wrap_scoped(p)
            t = Tensor()
            t._ptr = p
            t._scope = None
            return t
        raise_error(self, other)

    def __rmatmul__(self, other: Any) -> "Tensor":
        other = _operand(other)
        if not isinstance(other, Tensor):
            return NotImplemented
        return other.__matmul__(self)

    __neg__ = _unary("__neg__", lib.ac_neg, "-self", False)
    __abs__ = _unary("__abs__", lib.ac_abs, "abs(self), elementwise", False)

    def __pos__(self) -> "Tensor":
        _live(self)
        return self

    __eq__ = _comparison("eq", lib.AC_EQ)
    __ne__ = _comparison("ne", lib.AC_NE)
    __lt__ = _comparison("lt", lib.AC_LT)
    __le__ = _comparison("le", lib.AC_LE)
    __gt__ = _comparison("gt", lib.AC_GT)
    __ge__ = _comparison("ge", lib.AC_GE)
    eq, ne, lt = _named("eq", __eq__), _named("ne", __ne__), _named("lt", __lt__)
    le, gt, ge = _named("le", __le__), _named("gt", __gt__), _named("ge", __ge__)
    greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
    __hash__ = object.__hash__    # by identity, as PyTorch: == compares elements

    logical_and = _logical("logical_and", lib.AC_AND)
    logical_or = _logical("logical_or", lib.AC_OR)
    logical_xor = _logical("logical_xor", lib.AC_XOR)

    def logical_not(self) -> "Tensor":
        p = lib.ac_logical_not(self._ptr)
        if p:
            return _wrap(p)
        raise_error(self)

    bitwise_and, bitwise_or = _named("bitwise_and", __and__), _named("bitwise_or", __or__)
    bitwise_xor = _named("bitwise_xor", __xor__)
    bitwise_left_shift = _named("bitwise_left_shift", __lshift__)
    bitwise_right_shift = _named("bitwise_right_shift", __rshift__)
    floor_divide, remainder = _named("floor_divide", __floordiv__), _named("remainder", __mod__)

    # ---- dtypes and devices ------------------------------------------------

    def to(self, *args: Any, **kwargs: Any) -> "Tensor":
        """self converted to a dtype and/or moved to a device (PyTorch's forms: to(dtype),
        to(device), to(device, dtype), to(other), copy=); self when nothing changes."""
        _live(self)
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        copy = kwargs.pop("copy", False)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError("to: unexpected argument %r" % next(iter(kwargs)))
        for arg in args:
            if isinstance(arg, dtypes.dtype):
                dtype = arg
            elif isinstance(arg, Tensor):
                dtype, device = arg.dtype, arg.device
            elif isinstance(arg, (str, dtypes.device)):
                device = arg
            elif arg is not None and not isinstance(arg, bool):
                raise TypeError("to: expected a dtype, a device or a tensor, not %s" % type(arg).__name__)
        target = None if device is None else dtypes.checked_device(device, "to")
        dtype = dtypes.checked(dtype, "to")
        moving = target is not None and target != self.device
        out = self
        if moving and self.is_cuda:       # off the GPU first: dtypes convert on the CPU
            out = out._moved(target)
        if dtype is not None and dtype.code != _live(out).dtype:
            p = lib.ac_to_dtype(out._ptr, dtype.code)
            if not p:
                raise_error(out)
            out = _wrap(p)
        if moving and not self.is_cuda:
            out = out._moved(target)
        return self.clone() if out is self and copy else out

    def _moved(self, target: dtypes.device) -> "Tensor":
        """A differentiable copy on target, a device checked_device gave."""
        p = lib.ac_tensor_to(self._ptr, 0 if target.type == "cpu" else 1, target.index or 0)
        if not p:
            raise_error(self)
        return _wrap(p)

    def _move_(self, target: dtypes.device) -> None:
        """Put this root tensor's data on target in place (Module.to): the same Tensor,
        a leaf as before; its grad is dropped."""
        p = _live(self)
        previous = lib.ac_set_grad_enabled(0)
        try:
            q = lib.ac_tensor_to(p, 0 if target.type == "cpu" else 1, target.index or 0)
            if q and q.scope_depth:      # a scope is open: the module's tensor must outlive it
                q = lib.ac_tensor_keep(q)
        finally:
            lib.ac_set_grad_enabled(previous)
        if not q:
            raise_error(self)
        if p.requires_grad:
            lib.ac_tensor_set_requires_grad(q, 1)
        self._ptr = q
        lib.ac_tensor_free(p)

    def type(self, dtype: Any = None) -> Any:
        """The dtype's name ("aicraft.FloatTensor"), or self converted to dtype."""
        if dtype is None:
            return ("aicraft.FloatTensor", "aicraft.LongTensor", "aicraft.BoolTensor",
                    "aicraft.ByteTensor")[_live(self).dtype]
        return self.to(dtype)

    def float(self) -> "Tensor":
        return self.to(dtypes.float32)

    def long(self) -> "Tensor":
        return self.to(dtypes.int64)

    def int(self) -> "Tensor":
        return self.to(dtypes.int32)   # refused: aicraft holds no int32 (see dtypes.py)

    def bool(self) -> "Tensor":
        return self.to(dtypes.bool)

    def byte(self) -> "Tensor":
        return self.to(dtypes.uint8)

    def double(self) -> "Tensor":
        return self.to(dtypes.float64)

    def half(self) -> "Tensor":
        return self.to(dtypes.float16)

    def cpu(self) -> "Tensor":
        """self on the CPU: itself, or a differentiable copy (which waits for the GPU)."""
        return self._moved(dtypes.CPU) if self.is_cuda else self

    def cuda(self, device: Any = None) -> "Tensor":
        return self.to(dtypes.device("cuda") if device is None else device)

    add = _returns_tensor(_with_alpha("add", _named("add", __add__)))
    sub = _returns_tensor(_with_alpha("sub", _named("sub", __sub__)))
    mul = _named("mul", __mul__)
    div, pow = _named("div", __truediv__), _named("pow", __pow__)
    matmul = _named("matmul", __matmul__)
    neg = __neg__

    __iadd__ = _inplace("add_", __add__, lib.ac_add_, lib.ac_add_scalar_)
    __isub__ = _inplace("sub_", __sub__, lib.ac_sub_, _sub_scalar_)
    __imul__ = mul_ = _inplace("mul_", __mul__, lib.ac_mul_, lib.ac_mul_scalar_)
    __itruediv__ = div_ = _inplace("div_", __truediv__, lib.ac_div_, lib.ac_div_scalar_)
    add_ = _returns_tensor(_with_alpha("add_", __iadd__))
    sub_ = _returns_tensor(_with_alpha("sub_", __isub__))
    _copy_ = staticmethod(_inplace("copy_", lambda dst, src: src))

    # ---- math and activations ----------------------------------------------

    exp = _unary("exp", lib.ac_exp, "e ** self, elementwise")
    log = _unary("log", lib.ac_log, "natural log, elementwise")
    sqrt = _unary("sqrt", lib.ac_sqrt, "square root, elementwise")
    abs = __abs__
    sin = _unary("sin", lib.ac_sin, "sine, elementwise")
    cos = _unary("cos", lib.ac_cos, "cosine, elementwise")
    _relu_float = _unary("relu", lib.ac_relu, "max(self, 0)", False)

    def relu(self) -> "Tensor":
        """max(self, 0), in self's dtype (integers too, as torch; bool refused)."""
        dtype = _live(self).dtype
        if dtype == 0:
            return self._relu_float()
        if dtype == 2:
            raise TypeError("relu: bool tensors are not supported")
        return _general(lib.AC_OP_MAXIMUM, self, 0)
    sigmoid = _unary("sigmoid", lib.ac_sigmoid, "1 / (1 + exp(-self))")
    tanh = _unary("tanh", lib.ac_tanh, "hyperbolic tangent")
    gelu = _unary("gelu", lib.ac_gelu, "GELU, exact (erf) form")

    def clamp(self, min: Optional[builtins.float] = None, max: Optional[builtins.float] = None) -> "Tensor":
        """self limited to [min, max]; a None bound is open."""
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must be given")
        if _live(self).dtype != 0:   # integers and bool: torch's promotion with the bounds
            out = self
            for bound, code in ((min, lib.AC_OP_MAXIMUM), (max, lib.AC_OP_MINIMUM)):
                if bound is not None:
                    if _number(bound) is None and not isinstance(bound, Tensor):
                        raise TypeError("clamp: min and max must be numbers")
                    out = _general(code, out, bound)
            return out
        lo = -_INF if min is None else _scalar(min)
        hi = _INF if max is None else _scalar(max)
        if lo is None or hi is None:
            raise TypeError("clamp: min and max must be numbers")
        p = lib.ac_clamp(self._ptr, lo, hi)
        if p:
            return _wrap(p)
        raise_error(self)

    clip = clamp

    def softmax(self, dim: int) -> "Tensor":
        p = lib.ac_softmax(self._ptr, _as_dim(dim))
        if p:
            return _wrap(p)
        raise_error(self)

    def log_softmax(self, dim: int) -> "Tensor":
        p = lib.ac_log_softmax(self._ptr, _as_dim(dim))
        if p:
            return _wrap(p)
        raise_error(self)

    # ---- reductions --------------------------------------------------------

    sum = _returns_tensor(_reduce("sum", lib.ac_sum))
    mean = _returns_tensor(_reduce("mean", lib.ac_mean))
    amax = _returns_tensor(_reduce("amax", lib.ac_max))
    amin = _returns_tensor(_reduce("amin", lib.ac_min))
    var = _returns_tensor(_spread("var", lib.ac_var))
    std = _returns_tensor(_spread("std", lib.ac_std))
    max = _extreme("max", lib.ac_max, lib.ac_max_dim)
    min = _extreme("min", lib.ac_min, lib.ac_min_dim)

    def argmax(self, dim: Optional[int] = None, keepdim: builtins.bool = False) -> "Tensor":
        """Index of the first largest element (as a float tensor), along dim or of the flattened tensor."""
        if dim is None:
            p = _live(self)
            flat = self.reshape(-1)
            out = lib.ac_argmax(flat._ptr, 0, 0)
            if not out:
                raise_error(self)
            out = _wrap(out)
            return out.reshape([1] * p.ndim) if keepdim else out
        p = lib.ac_argmax(self._ptr, _as_dim(dim), 1 if keepdim else 0)
        if p:
            return _wrap(p)
        raise_error(self)

    def argmin(self, dim: Optional[int] = None, keepdim: builtins.bool = False) -> "Tensor":
        """Index of the first smallest element, as argmax."""
        if _live(self).dtype != 0:   # integers: exact, in C (negating would wrap)
            if dim is None:
                out = self.reshape(-1).min(0).indices
                return out.reshape([1] * self._ptr.ndim) if keepdim else out
            return self.min(dim, keepdim).indices
        return (-self.detach()).argmax(dim, keepdim)

    # ---- shapes ------------------------------------------------------------

    def reshape(self, *shape: Any) -> "Tensor":
        """The same data in a new shape (one dim may be -1); shares memory."""
        shape = _shape_args(shape)
        p = lib.ac_reshape(self._ptr, ffi.new("int64_t[]", shape) if shape else _NULL, len(shape))
        if p:
            return _wrap(p)
        raise_error(self)

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        p = lib.ac_flatten(self._ptr, _as_dim(start_dim), _as_dim(end_dim))
        if p:
            return _wrap(p)
        raise_error(self)

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        p = lib.ac_transpose(self._ptr, _as_dim(dim0), _as_dim(dim1))
        if p:
            return _wrap(p)
        raise_error(self)

    def permute(self, *dims: Any) -> "Tensor":
        dims = [_as_dim(d) for d in _shape_args(dims, "dims")]
        p = lib.ac_permute(self._ptr, ffi.new("int[]", dims) if dims else _NULL, len(dims))
        if p:
            return _wrap(p)
        raise_error(self)

    def squeeze(self, dim: Any = None) -> "Tensor":
        """Drop size-1 dims (all, or those named by dim)."""
        dims, n = _dims_arg(dim)
        if dim is not None and n == 0:
            dims = ffi.new("int[1]")
        p = lib.ac_squeeze(self._ptr, dims, n)
        if p:
            return _wrap(p)
        raise_error(self)

    def unsqueeze(self, dim: int) -> "Tensor":
        p = lib.ac_unsqueeze(self._ptr, _as_dim(dim))
        if p:
            return _wrap(p)
        raise_error(self)


# The wrapping helpers make and test for this class (its body above calls their builders).
# The methods of the modules above (indexing, pointwise, shapes, ...) are bound into it
# by aicraft/__init__.py, each module's bind(Tensor) in turn.
_wrapping.Tensor = Tensor
