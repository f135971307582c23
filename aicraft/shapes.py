"""shapes.py - PyTorch's shape, layout, indexing and scatter operators beyond the basic
ones: repeat, tile, tril/triu, flip, roll, rot90, unbind, movedim, the *stack and *split
helpers, meshgrid, broadcast_*, repeat_interleave, take(_along_dim), the scatter family
(scatter, scatter_add, scatter_reduce, index_add/copy/fill, index_put, masked_scatter),
nonzero, masked_select, diag*, atleast_*d, cat with type promotion, and their Tensor
methods (bound by bind(), as indexing.py's are).

The data moves in C (layout.c, scatter.c, index.c, shape.c, join.c), byte for byte in
every dtype; what is here composes those ops (autograd comes with them) and computes
only argument shapes. Module functions are re-exported by aicraft/__init__.py.
"""
from aicraft._args import _as_dim, _as_int, _scalar, _shape_args
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live, _wrap
from aicraft import creation as _creation, dtypes
from aicraft.errors import ShapeError, raise_error
from aicraft.tensor import Tensor

_NULL = ffi.NULL
_REDUCE = {"sum": 1, "prod": 2, "mean": 3, "amax": 4, "amin": 5}
_LEGACY_REDUCE = {"add": 1, "multiply": 2}
# torch's promotion among aicraft's dtypes: bool < uint8 < int64 < float32
_RANK = {"bool": 0, "uint8": 1, "int8": 1, "int64": 2, "float32": 3}   # by dtype.name


def _wrapped(p, *tensors):
    if p:
        return _wrap(p)
    raise_error(*tensors)


def _raise_as(op, *tensors):
    """Raise the C error of an op built on another, named as op, with the shapes."""
    try:
        raise_error(*tensors)
    except Exception as e:
        message = str(e).split(": ", 1)[-1]
        shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
        raise type(e)("%s: %s (shapes %s)" % (op, message, shapes)) from None


def _tensor(value, op, what="input"):
    if not isinstance(value, Tensor):
        raise TypeError("%s(): argument '%s' must be a Tensor, not %s" % (op, what, type(value).__name__))
    _live(value)
    return value


def _dim(self, dim, op, extra=0):
    """dim normalized against self's ndim (+ extra), or IndexError."""
    nd = self.dim() + extra
    d = _as_dim(dim)
    lo, hi = (-nd, nd - 1) if nd > 0 else (-1, 0)
    if not lo <= d <= hi:
        raise IndexError("%s: dim %d is out of range [%d, %d] for a %d-d tensor" % (op, d, lo, hi, nd))
    return d % nd if nd > 0 else 0


def _ints(args, what):
    """ints given as f(1, 2), f((1, 2)) or f([1, 2])."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return [_as_int(a, what) for a in args]


def _prod(values):
    n = 1
    for v in values:
        n *= v
    return n


def _long(values):
    from aicraft.creation import tensor
    return tensor(list(values), dtype=dtypes.int64)


def _no_grad():
    from aicraft.autograd import no_grad
    return no_grad()


def _in_place(self, out, op):
    """Write out into self (the in-place forms: no graph, as setitem)."""
    if lib.ac_is_grad_enabled() and (_live(self).requires_grad or _live(out).requires_grad):
        raise RuntimeError("%s: in-place changes of tensors that require grad are not recorded; "
                           "use the out-of-place %s or do it under `with ac.no_grad():`" % (op, op.rstrip("_")))
    with _no_grad():
        self.copy_(out)
    return self


# ---- repeat, tile, tril/triu, flip, roll, rot90 ------------------------------------

def repeat(self, *sizes):
    """self tiled sizes[d] times along each dim (more sizes than dims add leading dims)."""
    reps = _shape_args(sizes, "repeats")
    shape = list(self.shape)
    if len(reps) < len(shape):
        raise ShapeError("repeat: %d repeats for a tensor of shape %s (needs at least %d)"
                         % (len(reps), tuple(shape), len(shape)))
    if any(r < 0 for r in reps):
        raise ValueError("repeat: repeats must be non-negative, got %s" % (tuple(reps),))
    return _wrapped(lib.ac_repeat(_live(self), ffi.new("int64_t[]", reps or [0]), len(reps)), self)


def tile(self, *dims):
    """repeat, with too few dims padded by ones in front."""
    reps = _shape_args(dims, "dims")
    reps = [1] * (self.dim() - len(reps)) + reps
    return repeat(self, reps)


def tril(self, diagonal=0):
    return _wrapped(lib.ac_tril(_live(self), _as_int(diagonal, "diagonal")), self)


def triu(self, diagonal=0):
    return _wrapped(lib.ac_triu(_live(self), _as_int(diagonal, "diagonal")), self)


def tril_(self, diagonal=0):
    return _in_place(self, tril(self, diagonal), "tril_")


def triu_(self, diagonal=0):
    return _in_place(self, triu(self, diagonal), "triu_")


def flip(self, *dims, **kwargs):
    if kwargs:
        if dims or set(kwargs) != {"dims"}:
            raise TypeError("flip(): takes dims, positionally or as dims=, got %s" % sorted(kwargs))
        dims = (kwargs["dims"],)
    dims = _ints(dims, "dims")
    return _wrapped(lib.ac_flip(_live(self), ffi.new("int[]", dims) if dims else _NULL, len(dims)), self)


def fliplr(self):
    if self.dim() < 2:
        raise ShapeError("fliplr: input must have at least 2 dims, got shape %s" % (self.shape,))
    return flip(self, 1)


def flipud(self):
    if self.dim() < 1:
        raise ShapeError("flipud: input must have at least 1 dim, got shape %s" % (self.shape,))
    return flip(self, 0)


def roll(self, shifts, dims=None):
    """Elements shifted along dims (wrapping around); no dims: over the flattened tensor."""
    shifts = [_as_int(s, "shifts") for s in (shifts if isinstance(shifts, (tuple, list)) else [shifts])]
    if dims is None:
        if len(shifts) != 1:
            raise ValueError("roll: %d shifts need as many dims" % len(shifts))
        return roll(self.flatten(), shifts, 0).reshape(self.shape)
    dims = [_as_dim(d) for d in (dims if isinstance(dims, (tuple, list)) else [dims])]
    if len(dims) != len(shifts):
        raise ValueError("roll: shifts %s and dims %s must have the same length" % (tuple(shifts), tuple(dims)))
    x = self
    for s, d in zip(shifts, dims):
        d = _dim(self, d, "roll")
        n = self.shape[d] if self.dim() else 1
        s = s % n if n else 0
        if s == 0:
            continue
        x = _join([x.narrow(d, n - s, s), x.narrow(d, 0, n - s)], d, "cat")
    return x if x is not self else self.clone()


def rot90(self, k=1, dims=(0, 1)):
    dims = [_as_dim(d) for d in dims]
    if len(dims) != 2:
        raise ValueError("rot90: dims must have 2 entries, got %d" % len(dims))
    if self.dim() < 2:
        raise ShapeError("rot90: input must have at least 2 dims, got shape %s" % (self.shape,))
    d0, d1 = _dim(self, dims[0], "rot90"), _dim(self, dims[1], "rot90")
    if d0 == d1:
        raise ValueError("rot90: dims must differ, got %s" % (tuple(dims),))
    k = _as_int(k, "k") % 4
    if k == 1:
        return flip(self, d1).transpose(d0, d1)
    if k == 2:
        return flip(self, d0, d1)
    if k == 3:
        return flip(self, d0).transpose(d0, d1)
    return self.clone()


# ---- dims: unbind, movedim, swapaxes, mT, unflatten, atleast_*d, ravel ---------------

def select(self, dim, index):
    d = _dim(self, dim, "select")
    if self.dim() == 0:
        raise IndexError("select: a 0-d tensor cannot be indexed")
    return self[(slice(None),) * d + (_as_int(index, "index"),)]


def unbind(self, dim=0):
    d = _dim(self, dim, "unbind")
    if self.dim() == 0:
        raise IndexError("unbind: a 0-d tensor cannot be unbound")
    return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))


def movedim(self, source, destination):
    src = [source] if not isinstance(source, (tuple, list)) else list(source)
    dst = [destination] if not isinstance(destination, (tuple, list)) else list(destination)
    if len(src) != len(dst):
        raise ValueError("movedim: source %s and destination %s must have the same length" % (src, dst))
    nd = self.dim()
    src = [_dim(self, d, "movedim") for d in src]
    dst = [_dim(self, d, "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError("movedim: repeated dims in source %s or destination %s" % (src, dst))
    perm = [-1] * nd
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(d for d in range(nd) if d not in src)
    perm = [p if p >= 0 else next(rest) for p in perm]
    return self.permute(perm) if nd else self.clone()


def swapaxes(self, axis0, axis1):
    return self.transpose(axis0, axis1)


def _mT(self):
    if self.dim() < 2:
        raise ShapeError("mT: input must have at least 2 dims, got shape %s" % (self.shape,))
    return self.transpose(-2, -1)


def _H(self):
    if self.dim() not in (0, 2):
        raise ShapeError("H: input must be a matrix or a 0-d tensor, got shape %s" % (self.shape,))
    return self.transpose(0, 1) if self.dim() == 2 else self


def unflatten(self, dim, sizes):
    d = _dim(self, dim, "unflatten")
    sizes = _shape_args((sizes,), "sizes")
    if not sizes:
        raise ValueError("unflatten: sizes must not be empty")
    shape = list(self.shape)
    known = _prod(s for s in sizes if s != -1)
    if sizes.count(-1) > 1 or (-1 not in sizes and known != shape[d]) or \
            (-1 in sizes and (known == 0 or shape[d] % known)):
        raise ShapeError("unflatten: sizes %s do not multiply to dim %d's size %d" % (tuple(sizes), d, shape[d]))
    return self.reshape(shape[:d] + sizes + shape[d + 1:])


def ravel(self):
    return self.reshape(-1)


def reshape_as(self, other):
    return self.reshape(_tensor(other, "reshape_as", "other").shape)


def _atleast(n, tensors, op):
    listed = len(tensors) == 1 and isinstance(tensors[0], (tuple, list))
    if listed:
        tensors = tensors[0]
    out = []
    for t in tensors:
        t = _tensor(t, op)
        s = list(t.shape)
        if len(s) < n:
            if n == 3 and len(s) == 2:
                s = s + [1]
            elif n == 3 and len(s) == 1:
                s = [1] + s + [1]
            else:
                s = [1] * (n - len(s)) + s
            t = t.reshape(s)
        out.append(t)
    return out[0] if len(out) == 1 and not listed else tuple(out)


def atleast_1d(*tensors):
    return _atleast(1, tensors, "atleast_1d")


def atleast_2d(*tensors):
    return _atleast(2, tensors, "atleast_2d")


def atleast_3d(*tensors):
    return _atleast(3, tensors, "atleast_3d")


# ---- joining with type promotion ------------------------------------------------------

def result_dtype(tensors):
    """The dtype torch's promotion gives tensors of these dtypes (all with dims)."""
    best = None
    for t in tensors:
        d = t.dtype
        if best is None or _RANK.get(d.name, 3) > _RANK.get(best.name, 3):
            best = d
    return best


def _promoted(tensors, op):
    """tensors, checked, converted to their promoted dtype when they differ; and whether
    one is a 1-d empty tensor (which cat skips, as torch)."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, (tuple, list)):
        raise TypeError("%s(): argument 'tensors' must be a sequence of Tensors, not %s"
                        % (op, type(tensors).__name__))
    if not tensors:
        raise ValueError("%s(): expected a non-empty list of Tensors" % op)
    code, mixed, empty = None, False, False
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError("%s(): argument 'tensors' must hold Tensors, not %s" % (op, type(t).__name__))
        p = _live(t)
        mixed = mixed or (code is not None and p.dtype != code)
        empty = empty or (p.ndim == 1 and p.shape[0] == 0)
        code = p.dtype
    if mixed:
        target = result_dtype(tensors)
        tensors = [t if t.dtype == target else t.to(target) for t in tensors]
    return tensors, empty


def _join(tensors, dim, op):
    tensors, empty = _promoted(tensors, op)
    if op == "stack":
        return _creation.stack(tensors, dim)
    if empty:   # as torch: 1-d empty tensors join any others (seen as 0 rows of their shape)
        like = next((t for t in tensors if not (t._ptr.ndim == 1 and t._ptr.shape[0] == 0)), None)
        if like is not None:
            shape = list(like.shape)
            shape[_dim(like, dim, op)] = 0
            tensors = [t.reshape(shape) if t._ptr.ndim == 1 and t._ptr.shape[0] == 0 else t
                       for t in tensors]
    return _creation.cat(tensors, dim)


def cat(tensors, dim=0, *, axis=None, out=None):
    """Join tensors along an existing dim; mixed dtypes promote as torch's."""
    if out is not None:
        raise NotImplementedError("cat: out= is not supported")
    return _join(tensors, dim if axis is None else axis, "cat")


def concatenate(tensors, axis=0, *, dim=None, out=None):
    return cat(tensors, axis if dim is None else dim, out=out)


def stack(tensors, dim=0, *, out=None):
    """Join same-shaped tensors along a new dim; mixed dtypes promote as torch's."""
    if out is not None:
        raise NotImplementedError("stack: out= is not supported")
    return _join(tensors, dim, "stack")


def hstack(tensors):
    ts = _atleast(1, (list(tensors),), "hstack")
    return cat(ts, 0 if all(t.dim() == 1 for t in ts) else 1)


def vstack(tensors):
    return cat(_atleast(2, (list(tensors),), "vstack"), 0)


def dstack(tensors):
    return cat(_atleast(3, (list(tensors),), "dstack"), 2)


def column_stack(tensors):
    ts = [_tensor(t, "column_stack", "tensors") for t in tensors]
    ts = [t.reshape(t.numel(), 1) if t.dim() <= 1 else t for t in ts]
    return cat(ts, 1)


# ---- broadcasting -----------------------------------------------------------------------

def broadcast_shapes(*shapes):
    out = []
    for shape in shapes:
        shape = [shape] if isinstance(shape, int) else list(shape)
        for i, s in enumerate(reversed(shape)):
            s = _as_int(s, "shape")
            if s < 0:
                raise ValueError("broadcast_shapes: negative size %d in %s" % (s, tuple(shape)))
            if i >= len(out):
                out.append(s)
            elif out[i] == 1:
                out[i] = s
            elif s != 1 and s != out[i]:
                raise ShapeError("broadcast_shapes: shapes %s cannot be broadcast together" % (shapes,))
    return tuple(reversed(out))


def broadcast_to(self, size):
    return self.expand(*_shape_args((size,), "size"))


def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    tensors = [_tensor(t, "broadcast_tensors", "tensors") for t in tensors]
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(t if t.shape == shape else t.expand(*shape) for t in tensors)


def meshgrid(*tensors, indexing="ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError("meshgrid: indexing must be 'ij' or 'xy', got %r" % (indexing,))
    tensors = [_tensor(t, "meshgrid", "tensors") for t in tensors]
    for t in tensors:
        if t.dim() > 1:
            raise ShapeError("meshgrid: expects 0-d or 1-d tensors, got shape %s" % (t.shape,))
    if len(set(t.dtype for t in tensors)) > 1:
        raise TypeError("meshgrid: expects all tensors to have the same dtype")
    n = len(tensors)
    order = list(range(n))
    if indexing == "xy" and n >= 2:
        order[0], order[1] = 1, 0
    shape = [tensors[order[i]].numel() for i in range(n)]
    grids = []
    for i, t in enumerate(tensors):
        view = [1] * n
        view[order.index(i)] = t.numel()
        grids.append(t.reshape(view).expand(*shape))
    return tuple(grids)


# ---- repeat_interleave, take, take_along_dim ----------------------------------------------

def repeat_interleave(self, repeats=None, dim=None, *, output_size=None):
    """Each element repeated (an int, or a tensor of counts per element along dim);
    repeat_interleave(counts) alone gives 0, 1, ... each repeated its count."""
    if repeats is None:
        return _wrapped(lib.ac_repeat_index(_live(self)), self)
    x = self
    if dim is None:
        x, d = self.reshape(-1), 0
    else:
        d = _dim(self, dim, "repeat_interleave")
        if self.dim() == 0:
            x = self.reshape(1)
    if isinstance(repeats, Tensor):
        if repeats.dtype != dtypes.int64:
            raise TypeError("repeat_interleave: repeats must be int64, not %s" % repeats.dtype)
        if repeats.numel() == 1 and repeats.dim() <= 1 and (x.dim() == 0 or x.shape[d] != 1):
            repeats = repeats.reshape(()).item()
        else:
            if repeats.dim() != 1 or repeats.shape[0] != x.shape[d]:
                raise ShapeError("repeat_interleave: repeats of shape %s for dim %d of size %d"
                                 % (repeats.shape, d, x.shape[d]))
            index = _wrapped(lib.ac_repeat_index(_live(repeats)), repeats)
            out = x.index_select(d, index)
            return out
    r = _as_int(repeats, "repeats")
    if r < 0:
        raise ValueError("repeat_interleave: repeats must be non-negative, got %d" % r)
    shape = list(x.shape)
    expanded = shape[:d + 1] + [r] + shape[d + 1:]
    out_shape = shape[:d] + [shape[d] * r] + shape[d + 1:]
    return x.unsqueeze(d + 1).expand(*expanded).reshape(out_shape)


def take(self, index):
    """self's elements at index into its flattened form (negative from the end)."""
    index = _tensor(index, "take", "index")
    if index.dtype != dtypes.int64:
        raise TypeError("take: index must be int64, not %s" % index.dtype)
    flat = self.reshape(-1)
    p = lib.ac_index(flat._ptr, 0, index._ptr)
    if not p:
        _raise_as("take", self, index)
    return _wrap(p)


def take_along_dim(self, indices, dim=None):
    indices = _tensor(indices, "take_along_dim", "indices")
    if dim is None:
        return self.reshape(-1).gather(0, indices.reshape(-1))   # as torch: no wrapping here
    d = _dim(self, dim, "take_along_dim")
    if self.dim():   # as torch, negative indices count from the end
        indices = _wrap_negative(indices, self.shape[d], "take_along_dim")
    if self.dim() != indices.dim():
        raise ShapeError("take_along_dim: input %s and indices %s must have the same number of dims"
                         % (self.shape, indices.shape))
    a, b = list(self.shape), list(indices.shape)
    a[d] = b[d] = 1
    common = list(broadcast_shapes(a, b))
    sa, sb = list(common), list(common)
    sa[d], sb[d] = self.shape[d], indices.shape[d]
    x = self if list(self.shape) == sa else self.expand(*sa)
    i = indices if list(indices.shape) == sb else indices.expand(*sb)
    return x.gather(d, i)


# ---- the scatter family ----------------------------------------------------------------------

def _index(index, op):
    index = _tensor(index, op, "index")
    if index.dtype != dtypes.int64:
        raise TypeError("%s(): index must be int64, not %s" % (op, index.dtype))
    return index


def _value_src(self, index, value, op):
    """value (a number or a 0-d tensor) as a tensor of self's dtype and index's shape."""
    from aicraft.creation import tensor
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError("%s: value must be a number or a 1-element tensor, got shape %s" % (op, value.shape))
        v = value.reshape(())
        v = v if v.dtype == self.dtype else v.to(self.dtype)
    else:
        if _scalar(value) is None:
            raise TypeError("%s: value must be a number, not %s" % (op, type(value).__name__))
        limits = {dtypes.uint8: (0, 255), dtypes.int64: (-2 ** 63, 2 ** 63 - 1)}.get(self.dtype)
        if limits and not isinstance(value, bool) and not limits[0] <= int(value) <= limits[1]:
            raise RuntimeError("%s: value %r cannot be converted to %s without overflow" % (op, value, self.dtype))
        if self.dtype == dtypes.int64 and isinstance(value, float) and value != int(value):
            v = tensor(int(value), dtype=dtypes.int64)
        else:
            v = tensor(value, dtype=self.dtype)
    return v.expand(*index.shape) if index.dim() else v


def _scatter(self, dim, index, src, reduce, include_self, op):
    _live(self)
    index = _index(index, op)
    src = _tensor(src, op, "src")
    if src.dtype != self.dtype:
        raise TypeError("%s(): src is %s and input is %s; they must have the same dtype"
                        % (op, src.dtype, self.dtype))
    return _wrapped(lib.ac_scatter(self._ptr, _as_dim(dim), index._ptr, src._ptr, reduce,
                                   1 if include_self else 0), self, index, src)


def scatter(self, dim, index, src=None, value=None, *, reduce=None):
    """A copy of self with src (a tensor, or value, a number) written at index along dim;
    reduce='add' or 'multiply' combines with what is there instead."""
    if src is not None and value is not None:
        raise TypeError("scatter(): pass src or value, not both")
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter(): missing src or value")
    kind = 0
    if reduce is not None:
        if reduce not in _LEGACY_REDUCE:
            raise ValueError("scatter(): reduce must be 'add' or 'multiply', got %r" % (reduce,))
        kind = _LEGACY_REDUCE[reduce]
    index = _index(index, "scatter")
    if not isinstance(src, Tensor):
        src = _value_src(self, index, src, "scatter")
    return _scatter(self, dim, index, src, kind, True, "scatter")


def scatter_add(self, dim, index, src):
    return _scatter(self, dim, index, src, 1, True, "scatter_add")


def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    if reduce not in _REDUCE:
        raise ValueError("scatter_reduce(): reduce must be one of sum, prod, mean, amax, amin; got %r" % (reduce,))
    return _scatter(self, dim, index, src, _REDUCE[reduce], include_self, "scatter_reduce")


def _along(self, dim, index, n_like, op):
    """index (0-d or 1-d) as a scatter index: along dim, and broadcast to self's shape with
    dim's size n_like elsewhere."""
    index = _index(index, op)
    if index.dim() > 1:
        raise ShapeError("%s: index must be 0-d or 1-d, got shape %s" % (op, index.shape))
    d = _dim(self, dim, op)
    shape = list(self.shape) or [1]
    view = [1] * len(shape)
    view[d] = index.numel()
    shape[d] = index.numel() if n_like is None else n_like
    return d, index.reshape(view).expand(*shape)


def _index_source(self, d, index, source, op):
    """source checked for index_add/copy/reduce: self's shape with dim d of len(index)."""
    source = _tensor(source, op, "source")
    want = list(self.shape)
    if want:
        want[d] = index.numel()
    if list(source.shape) != want and not (not want and source.numel() == 1):
        raise ShapeError("%s: source of shape %s does not fit input %s with %d indices at dim %d"
                         % (op, source.shape, self.shape, index.numel(), d))
    if source.dtype != self.dtype:
        raise TypeError("%s(): source is %s and input is %s; they must have the same dtype"
                        % (op, source.dtype, self.dtype))
    return source.reshape(want or [1])   # a 0-d input works as a 1-element 1-d one


def _wrap_negative(index, n, op):
    """index (1-d int64) with negative entries counted from the end, each checked
    against a dim of size n (IndexError)."""
    array = ffi.new("AcTensor *[1]", [_live(index)])
    p = lib.ac_ravel_index(array, 1, ffi.new("int64_t[1]", [n]), 1)
    if not p:
        _raise_as(op, index)
    return _wrap(p)


def index_add(self, dim, index, source, *, alpha=1):
    d, idx = _along(self, dim, index, None, "index_add")
    src = _index_source(self, d, _index(index, "index_add"), source, "index_add")
    if alpha != 1:
        src = src * alpha
        if src.dtype != self.dtype:
            src = src.to(self.dtype)
    x = self if self.dim() else self.reshape(1)
    out = _scatter(x, d, idx, src, 1, True, "index_add")
    return out if self.dim() else out.reshape(())


def index_copy(self, dim, index, source):
    d, idx = _along(self, dim, index, None, "index_copy")
    src = _index_source(self, d, _index(index, "index_copy"), source, "index_copy")
    x = self if self.dim() else self.reshape(1)
    out = _scatter(x, d, idx, src, 0, True, "index_copy")
    return out if self.dim() else out.reshape(())


def index_fill(self, dim, index, value):
    index = _index(index, "index_fill")
    n = self.shape[_dim(self, dim, "index_fill")] if self.dim() else 1
    index = _wrap_negative(index.reshape(-1), n, "index_fill")
    # each position once, so a tensor value's gradient counts each filled element once
    if index.numel():
        from aicraft.creation import zeros
        marks = zeros(n, dtype=dtypes.bool).scatter(0, index, True)
        index = nonzero(marks).reshape(-1)
    d, idx = _along(self, dim, index, None, "index_fill")
    x = self if self.dim() else self.reshape(1)
    out = _scatter(x, d, idx, _value_src(x, idx, value, "index_fill"), 0, True, "index_fill")
    return out if self.dim() else out.reshape(())


def index_put(self, indices, values, accumulate=False):
    """A copy of self with values (broadcast) put at the positions the index tensors
    (int64 or bool masks, one per leading dim) give; accumulate adds instead."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError("index_put(): indices must be a tuple of tensors, not %s" % type(indices).__name__)
    idx = []
    for t in indices:
        t = _tensor(t, "index_put", "indices")
        if t.dtype in (dtypes.bool, dtypes.uint8):
            idx.extend(nonzero(t, as_tuple=True))
        elif t.dtype == dtypes.int64:
            idx.append(t)
        else:
            raise IndexError("tensors used as indices must be int64 or bool, not %s" % t.dtype)
    if not idx:
        raise IndexError("index_put(): needs at least one index tensor")
    if len(idx) > self.dim():
        raise IndexError("index_put(): too many indices (%d) for a tensor of shape %s" % (len(idx), self.shape))
    idx = broadcast_tensors(*idx)
    k, shape = len(idx), list(self.shape)
    array = ffi.new("AcTensor *[]", [t._ptr for t in idx])
    flat = _wrapped(lib.ac_ravel_index(array, k, ffi.new("int64_t[]", shape), len(shape)), self, *idx)
    rest = shape[k:]
    values = values if isinstance(values, Tensor) else _value_src(self, flat, values, "index_put")
    if values.dtype != self.dtype:
        values = values.to(self.dtype)
    values = values.expand(*(list(flat.shape) + rest)).reshape([flat.numel()] + rest)
    target = self.reshape([_prod(shape[:k])] + rest)
    where = flat.reshape([flat.numel()] + [1] * len(rest)).expand(*([flat.numel()] + rest))
    out = _scatter(target, 0, where, values, 1 if accumulate else 0, True, "index_put")
    return out.reshape(shape)


def masked_scatter(self, mask, source):
    """A copy of self with source's first elements, in order, where mask is true."""
    mask = _tensor(mask, "masked_scatter", "mask")
    source = _tensor(source, "masked_scatter", "source")
    if mask.dtype != dtypes.bool:
        raise TypeError("masked_scatter: mask must be bool, not %s" % mask.dtype)
    if source.dtype != self.dtype:
        raise TypeError("masked_scatter: source is %s and input is %s" % (source.dtype, self.dtype))
    shape = broadcast_shapes(self.shape, mask.shape)
    x = self if self.shape == shape else self.expand(*shape)
    m = mask if mask.shape == shape else mask.expand(*shape)
    where = nonzero(m.reshape(-1)).reshape(-1)
    n = where.numel()
    if n > source.numel():
        raise ShapeError("masked_scatter: mask has %d true elements but source only %d" % (n, source.numel()))
    out = _scatter(x.reshape(-1), 0, where, source.reshape(-1)[:n], 0, True, "masked_scatter")
    return out.reshape(shape)


def _in_place_form(fn, name):
    def method(self, *args, **kwargs):
        return _in_place(self, fn(self, *args, **kwargs), name)
    method.__name__ = name
    method.__doc__ = "%s, in place (no graph)." % fn.__name__
    return method


# ---- nonzero, argwhere, masked_select, one_hot ------------------------------------------------

def nonzero(self, *, as_tuple=False):
    out = _wrapped(lib.ac_nonzero(_live(self)), self)
    if not as_tuple:
        return out
    if self.dim() == 0:
        return (out.reshape(-1, 1)[:, 0] if out.shape[1] else
                _long([0] * out.shape[0]),)
    return tuple(out[:, i] for i in range(self.dim()))


def argwhere(self):
    return nonzero(self)


def masked_select(self, mask):
    mask = _tensor(mask, "masked_select", "mask")
    if mask.dtype != dtypes.bool:
        raise TypeError("masked_select: mask must be bool, not %s" % mask.dtype)
    shape = broadcast_shapes(self.shape, mask.shape)
    x = self if self.shape == shape else self.expand(*shape)
    m = mask if mask.shape == shape else mask.expand(*shape)
    x, m = x.reshape(-1), m.reshape(-1)   # kept alive across the call
    p = lib.ac_index(x._ptr, 0, m._ptr)
    if not p:
        _raise_as("masked_select", self, mask)
    return _wrap(p)


def one_hot(tensor, num_classes=-1):
    """int64 class ids as int64 one-hot vectors along a new last dim."""
    tensor = _tensor(tensor, "one_hot", "tensor")
    return _wrapped(lib.ac_one_hot(tensor._ptr, _as_int(num_classes, "num_classes")), tensor)


# ---- splits ----------------------------------------------------------------------------------

def split_with_sizes(self, split_sizes, dim=0):
    return self.split(list(split_sizes), dim)


def tensor_split(self, indices_or_sections, dim=0):
    d = _dim(self, dim, "tensor_split")
    n = self.shape[d]
    if isinstance(indices_or_sections, Tensor):
        t = indices_or_sections
        if t.dtype != dtypes.int64 or t.dim() > 1:
            raise TypeError("tensor_split: a tensor of indices_or_sections must be 0-d or 1-d int64")
        indices_or_sections = t.item() if t.dim() == 0 else t.tolist()
    if isinstance(indices_or_sections, (tuple, list)):
        bounds = [_as_int(i, "indices") for i in indices_or_sections]
        pieces, start = [], 0
        for b in bounds + [n]:
            b = max(0, min(n, b + n if b < 0 else b))
            pieces.append(self.narrow(d, start, max(0, b - start)))
            start = b
        return tuple(pieces)
    sections = _as_int(indices_or_sections, "sections")
    if sections <= 0:
        raise ValueError("tensor_split: number of sections must be positive, got %d" % sections)
    base, extra = divmod(n, sections)
    sizes = [base + 1] * extra + [base] * (sections - extra)
    pieces, start = [], 0
    for s in sizes:
        pieces.append(self.narrow(d, start, s))
        start += s
    return tuple(pieces)


def _xsplit(self, sections, dim, need, op):
    if self.dim() < need:
        raise ShapeError("%s: input must have at least %d dims, got shape %s" % (op, need, self.shape))
    if not isinstance(sections, (tuple, list, Tensor)):
        s = _as_int(sections, "sections")
        if s <= 0 or self.shape[dim] % s:
            raise ShapeError("%s: dim %d of size %d is not divisible into %d sections"
                             % (op, dim, self.shape[dim], s))
    return tensor_split(self, sections, dim)


def hsplit(self, sections):
    return _xsplit(self, sections, 0 if self.dim() == 1 else 1, 1, "hsplit")


def vsplit(self, sections):
    return _xsplit(self, sections, 0, 2, "vsplit")


def dsplit(self, sections):
    return _xsplit(self, sections, 2, 3, "dsplit")


# ---- diagonals ---------------------------------------------------------------------------------

def diagonal(self, offset=0, dim1=0, dim2=1):
    return _wrapped(lib.ac_diagonal(_live(self), _as_int(offset, "offset"), _as_dim(dim1), _as_dim(dim2)), self)


def diag_embed(self, offset=0, dim1=-2, dim2=-1):
    return _wrapped(lib.ac_diag_embed(_live(self), _as_int(offset, "offset"), _as_dim(dim1), _as_dim(dim2)), self)


def diag(self, diagonal=0):
    nd = self.dim()
    if nd == 1:
        return diag_embed(self, diagonal, 0, 1)
    if nd == 2:
        return globals()["diagonal"](self, diagonal, 0, 1)
    raise ShapeError("diag: input must be 1-d or 2-d, got shape %s" % (self.shape,))


def diagflat(self, offset=0):
    return diag_embed(self.reshape(-1), offset, 0, 1)


# ---- windows, *_scatter, put, index_reduce, indices ------------------------------------------

def unfold(self, dimension, size, step):
    """Windows of size elements, step apart, along dimension, as a new last dim."""
    return _wrapped(lib.ac_unfold(_live(self), _as_dim(dimension, "dimension"), _as_int(size, "size"),
                                  _as_int(step, "step")), self)


def _positions(self):
    """int64 positions 0 .. numel - 1 in self's shape: pick with any layout op to learn
    where its elements come from."""
    from aicraft.creation import arange
    return arange(self.numel(), dtype=dtypes.int64).reshape(self.shape)


def _region_scatter(self, src, where, op):
    """A copy of self with src written at the flat positions where (of src's shape)."""
    src = _tensor(src, op, "src")
    if tuple(src.shape) != tuple(where.shape):
        raise ShapeError("%s: src of shape %s does not fit the region of shape %s" % (op, src.shape, where.shape))
    if src.dtype != self.dtype:
        raise TypeError("%s(): src is %s and input is %s; they must have the same dtype" % (op, src.dtype, self.dtype))
    out = _scatter(self.reshape(-1), 0, where.reshape(-1), src.reshape(-1), 0, True, op)
    return out.reshape(self.shape)


def select_scatter(self, src, dim, index):
    return _region_scatter(self, src, select(_positions(self), dim, index), "select_scatter")


def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
    d = _dim(self, dim, "slice_scatter")
    where = _positions(self)[(slice(None),) * d + (slice(start, end, step),)]
    return _region_scatter(self, src, where, "slice_scatter")


def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    return _region_scatter(self, src, diagonal(_positions(self), offset, dim1, dim2), "diagonal_scatter")


def put(self, index, source, accumulate=False):
    """A copy of self with source written (or added) at index into its flattened form."""
    index = _index(index, "put")
    source = _tensor(source, "put", "source")
    if index.numel() != source.numel():
        raise ShapeError("put: index has %d elements but source %d" % (index.numel(), source.numel()))
    if source.dtype != self.dtype:
        raise TypeError("put(): source is %s and input is %s" % (source.dtype, self.dtype))
    where = _wrap_negative(index.reshape(-1), self.numel(), "put")
    out = _scatter(self.reshape(-1), 0, where, source.reshape(-1), 1 if accumulate else 0, True, "put")
    return out.reshape(self.shape)


def index_reduce(self, dim, index, source, reduce, *, include_self=True):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ValueError("index_reduce(): reduce must be prod, mean, amax or amin; got %r" % (reduce,))
    d, idx = _along(self, dim, index, None, "index_reduce")
    src = _index_source(self, d, _index(index, "index_reduce"), source, "index_reduce")
    x = self if self.dim() else self.reshape(1)
    out = _scatter(x, d, idx, src, _REDUCE[reduce], include_self, "index_reduce")
    return out if self.dim() else out.reshape(())


def nonzero_static(self, *, size=None, fill_value=-1):
    """nonzero's rows, cut or padded with fill_value to exactly size rows."""
    from aicraft.creation import full
    _live(self)
    if size is None:
        raise TypeError("nonzero_static() missing the keyword argument 'size'")
    size = _as_int(size, "size")
    if size < 0:
        raise ValueError("nonzero_static: size must be non-negative, got %d" % size)
    out = nonzero(self)
    if out.shape[0] >= size:
        return out[:size]
    pad = full((size - out.shape[0], self.dim()), fill_value, dtype=dtypes.int64)
    return _join([out, pad], 0, "cat")


def _tri_indices(row, col, offset, dtype, upper):
    from aicraft.creation import ones
    if dtype not in (None, dtypes.int64):
        raise TypeError("%s_indices: dtype must be int64, not %s" % ("triu" if upper else "tril", dtype))
    mask = ones(_as_int(row, "row"), _as_int(col, "col"), dtype=dtypes.bool)
    mask = (triu if upper else tril)(mask, _as_int(offset, "offset"))
    return nonzero(mask).T.clone()


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    return _tri_indices(row, col, offset, dtype, False)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    return _tri_indices(row, col, offset, dtype, True)


def block_diag(*tensors):
    """The tensors (0-d, 1-d or 2-d) on the diagonal of a matrix of zeros."""
    from aicraft.creation import zeros
    ts = []
    for t in tensors:
        t = _tensor(t, "block_diag", "tensors")
        if t.dim() > 2:
            raise ShapeError("block_diag: expects tensors of at most 2 dims, got shape %s" % (t.shape,))
        ts.append(t.reshape(1, -1) if t.dim() < 2 else t)
    if not ts:
        return zeros(1, 0)
    dtype = result_dtype(ts)
    ts = [t if t.dtype == dtype else t.to(dtype) for t in ts]
    cols = sum(t.shape[1] for t in ts)
    rows, left = [], 0
    for t in ts:
        r, c = t.shape
        parts = [zeros(r, left, dtype=dtype), t, zeros(r, cols - left - c, dtype=dtype)]
        rows.append(_join(parts, 1, "cat"))
        left += c
    return _join(rows, 0, "cat")


def cartesian_prod(*tensors):
    grids = meshgrid(*tensors, indexing="ij")
    if len(grids) == 1:
        return grids[0].clone()
    return stack([g.reshape(-1) for g in grids], 1)


def unravel_index(indices, shape):
    """The coordinates in shape of each flat index, as a tuple of int64 tensors."""
    indices = _tensor(indices, "unravel_index", "indices")
    shape = _shape_args((shape,) if not isinstance(shape, int) else (shape,), "shape")
    if indices.dtype not in (dtypes.int64,):
        raise TypeError("unravel_index: indices must be int64, not %s" % indices.dtype)
    out = _wrapped(lib.ac_unravel_index(indices._ptr, ffi.new("int64_t[]", shape or [0]), len(shape)), indices)
    return tuple(out[..., d] for d in range(len(shape)))


def combinations(self, r=2, with_replacement=False):
    """The length-r combinations of a 1-d tensor's elements, one per row."""
    import itertools
    if self.dim() != 1:
        raise ShapeError("combinations: expects a 1-d tensor, got shape %s" % (self.shape,))
    r, n = _as_int(r, "r"), self.shape[0]
    if r < 0:
        raise ValueError("combinations: r must be non-negative, got %d" % r)
    if r == 0:
        return self.narrow(0, 0, 0)
    if r == 2:
        rows = triu_indices(n, n, 0 if with_replacement else 1)
    else:
        pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
        rows = _long(list(pick(range(n), r))).reshape(-1, r).T
    if rows.numel() == 0:
        return self.narrow(0, 0, 0).reshape(0, r)
    return stack([self.index_select(0, rows[i]) for i in range(r)], 1)


def sum_to_size(self, *size):
    """self summed down to size (which self's shape must broadcast from), as torch."""
    size = _shape_args(size, "size")
    shape = list(self.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(s != 1 and s != n for s, n in zip(size, shape[lead:])):
        raise ShapeError("sum_to_size: size %s is not expandable to the tensor's shape %s"
                         % (tuple(size), tuple(shape)))
    if not shape and not size:
        return self.sum()   # as torch: a 0-d tensor sums (bool and uint8 become int64)
    dims = list(range(lead)) + [lead + i for i, s in enumerate(size) if s == 1 and shape[lead + i] != 1]
    out = self.sum(tuple(dims), keepdim=True) if dims else self
    return out.reshape(size) if tuple(out.shape) != tuple(size) else out


def fill(self, value):
    """A tensor of self's shape and dtype holding value (out-of-place fill_); its gradient
    with respect to self is zero."""
    where = _positions(self).reshape(-1)
    out = _scatter(self.reshape(-1), 0, where, _value_src(self, where, value, "fill"), 0, True, "fill")
    return out.reshape(self.shape)


def slice_(self, dim=0, start=None, end=None, step=1):
    """self[..., start:end:step] along dim (aten's slice)."""
    d = _dim(self, dim, "slice")
    return self[(slice(None),) * d + (slice(start, end, step),)]


def _copy_of(fn, name):
    def copy(self, *args, **kwargs):
        out = fn(self, *args, **kwargs)
        if isinstance(out, tuple):
            return tuple(o.clone() for o in out)
        return out.clone()
    copy.__name__ = copy.__qualname__ = name
    copy.__doc__ = "%s, as a new tensor that shares no memory." % name[:-5]
    return copy


# ---- factories and small methods -----------------------------------------------------------

def new_empty(self, *size, dtype=None, device=None, requires_grad=False, **kwargs):
    return self.new_zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


_clone = Tensor.clone


def clone(self, *, memory_format=None):
    """A differentiable copy (memory_format is accepted: aicraft is always contiguous)."""
    return _clone(self)


def narrow_copy(self, dim, start, length):
    return self.narrow(dim, start, length).clone()


_METHODS = {
    "repeat": repeat, "tile": tile, "tril": tril, "triu": triu, "tril_": tril_, "triu_": triu_,
    "flip": flip, "fliplr": fliplr, "flipud": flipud, "roll": roll, "rot90": rot90,
    "select": select, "unbind": unbind, "movedim": movedim, "moveaxis": movedim,
    "swapaxes": swapaxes, "swapdims": swapaxes, "unflatten": unflatten, "ravel": ravel,
    "reshape_as": reshape_as, "broadcast_to": broadcast_to, "repeat_interleave": repeat_interleave,
    "take": take, "take_along_dim": take_along_dim,
    "scatter": scatter, "scatter_add": scatter_add, "scatter_reduce": scatter_reduce,
    "index_add": index_add, "index_copy": index_copy, "index_fill": index_fill,
    "index_put": index_put, "masked_scatter": masked_scatter, "nonzero_static": nonzero_static,
    "nonzero": nonzero, "argwhere": argwhere, "masked_select": masked_select,
    "split_with_sizes": split_with_sizes, "tensor_split": tensor_split,
    "hsplit": hsplit, "vsplit": vsplit, "dsplit": dsplit,
    "diagonal": diagonal, "diag_embed": diag_embed, "diag": diag, "diagflat": diagflat,
    "new_empty": new_empty, "clone": clone, "narrow_copy": narrow_copy,
    "unfold": unfold, "select_scatter": select_scatter, "slice_scatter": slice_scatter,
    "diagonal_scatter": diagonal_scatter, "put": put, "index_reduce": index_reduce,
    "sum_to_size": sum_to_size, "fill": fill,
    "unsafe_chunk": lambda self, chunks, dim=0: self.chunk(chunks, dim),
    "unsafe_split": lambda self, split_size, dim=0: self.split(split_size, dim),
}
for _name, _fn in (("expand_copy", lambda self, *size, **kw: self.expand(*size)),
                   ("permute_copy", lambda self, *dims: self.permute(*dims)),
                   ("squeeze_copy", lambda self, dim=None: self.squeeze(dim)),
                   ("unsqueeze_copy", lambda self, dim: self.unsqueeze(dim)),
                   ("t_copy", lambda self: self.t()),
                   ("transpose_copy", lambda self, dim0, dim1: self.transpose(dim0, dim1)),
                   ("view_copy", lambda self, *shape: self.reshape(*shape)),
                   ("unbind_copy", unbind), ("split_with_sizes_copy", split_with_sizes),
                   ("diagonal_copy", diagonal), ("unfold_copy", unfold),
                   ("alias_copy", lambda self: self)):
    _METHODS[_name] = _copy_of(_fn, _name)
for _name in ("scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill",
              "index_put", "masked_scatter", "put", "index_reduce"):
    _METHODS[_name + "_"] = _in_place_form(_METHODS[_name], _name + "_")
del _name



def _function(name, method):
    def function(input, *args, **kwargs):
        _tensor(input, name)
        return method(input, *args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = method.__doc__
    return function


# Module functions: aicraft.x(input, ...) for each method, plus those with no Tensor first.
FUNCTIONS = {name: _function(name, fn) for name, fn in _METHODS.items()}
for _name in ("tril_", "triu_", "new_empty", "scatter_", "scatter_add_", "scatter_reduce_",
              "index_add_", "index_copy_", "index_fill_", "masked_scatter_", "put_", "index_reduce_",
              "unfold"):
    del FUNCTIONS[_name]
del _name
FUNCTIONS.update({
    "atleast_1d": atleast_1d, "atleast_2d": atleast_2d, "atleast_3d": atleast_3d,
    "cat": cat, "concat": cat, "concatenate": concatenate, "stack": stack,
    "hstack": hstack, "vstack": vstack, "dstack": dstack, "row_stack": vstack,
    "column_stack": column_stack, "broadcast_shapes": broadcast_shapes,
    "broadcast_tensors": broadcast_tensors, "meshgrid": meshgrid,
    "nonzero_static": nonzero_static, "tril_indices": tril_indices, "triu_indices": triu_indices,
    "block_diag": block_diag, "cartesian_prod": cartesian_prod, "unravel_index": unravel_index,
    "slice": _function("slice", slice_),
    "combinations": _function("combinations", combinations),
})


def bind(cls):
    for name, fn in _METHODS.items():
        setattr(cls, name, fn)
    cls.mT = property(_mT)
    cls.mH = property(_mT)
    cls.H = property(_H)

