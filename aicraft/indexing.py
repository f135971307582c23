"""indexing.py - Tensor's indexing and ordering methods, bound into Tensor by bind():
t[...] and t[...] = v (basic indices plus advanced ones), gather, index_select,
expand, narrow, split, chunk, sort, topk, cumsum, norm, mm, bmm, t, the new_* factories,
where and masked_fill (ac.where too).

Indexing with one advanced index runs in two C calls at most: ac_slice (or its write
ac_slice_put_) for the basic part, with the advanced index replaced by full slices,
then ac_index (or ac_index_put_) for the advanced index at the dim it lands on. Several
advanced indices ravel into one flat index (ac_ravel_index) over their dims moved to the
front; a write with them goes through the flat positions the same index picks.
"""
import math
from collections import namedtuple

from aicraft._args import _as_bound, _as_dim, _as_index, _as_int, _is_numpy, _shape_args, _scalar
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live, _number, _scalar_tensor, _unary, _wrap
from aicraft.creation import tensor
from aicraft.dtypes import BY_CODE
from aicraft.errors import ShapeError, raise_error
from aicraft.tensor import Tensor

_NULL = ffi.NULL
_sort_result = namedtuple("sort", ["values", "indices"])
_topk_result = namedtuple("topk", ["values", "indices"])


def _wrapped(p, *tensors):
    if p:
        return _wrap(p)
    raise_error(*tensors)


def _index_tensor(item):
    """An advanced index (a Tensor, list, range or array) as an int64 or bool Tensor, else None."""
    if isinstance(item, Tensor):
        t = item
    elif isinstance(item, (list, range)) or _is_numpy(item, "ndarray"):
        t = tensor(list(item) if isinstance(item, range) else item)
        if _live(t).size == 0:
            t = t.long()
    else:
        return None
    if _live(t).dtype == 0:
        raise IndexError("tensors used as indices must be int64 or bool, not float32")
    return t


class _Index:
    """An index parsed against a tensor of ndim dims: the basic part as AcSlices (the
    advanced index replaced by full slices), the advanced index, the dim it lands on in
    the basic result, and where None adds dims in the final result."""

    def __init__(self, ndim, index):
        items = index if type(index) is tuple else (index,)
        if sum(1 for item in items if item is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        parsed = []
        for item in items:
            if isinstance(item, bool) or _is_numpy(item, "bool_"):
                raise IndexError("a bool scalar index is not supported; use a bool tensor mask")
            t = _index_tensor(item)
            parsed.append(item if t is None else t)
        advanced = [i for i, item in enumerate(parsed) if isinstance(item, Tensor)]
        if len(advanced) > 1 and any(item is None for item in parsed):
            raise IndexError("None together with several advanced indices is not supported; "
                             "unsqueeze the result instead")

        def width(item):
            if item is None or item is Ellipsis:
                return 0
            if isinstance(item, Tensor) and _live(item).dtype == 2:
                return _live(item).ndim
            return 1
        used = sum(width(item) for item in parsed)
        if used > ndim:
            raise IndexError("too many indices for a tensor of dimension %d" % ndim)
        self.slices = ffi.new("AcSlice[]", max(ndim, 1))
        self.n = 0
        self.advanced = None
        self.dim = 0             # the advanced index's dim in the basic result
        self.all_advanced = []   # (index, its dim in the basic result), in order
        self.new_axes = []
        kept, out_dim, ints = 0, 0, []
        for position, item in enumerate(parsed):
            if item is None:
                self.new_axes.append(out_dim)
                out_dim += 1
            elif item is Ellipsis:
                for _ in range(ndim - used):
                    self._full()
                kept += ndim - used
                out_dim += ndim - used
            elif isinstance(item, Tensor):
                self.advanced, self.dim = item, kept
                self.all_advanced.append((item, kept))
                for _ in range(width(item)):
                    self._full()
                kept += width(item)
                out_dim += 1 if _live(item).dtype == 2 else _live(item).ndim
            elif type(item) is slice:
                s = self.slices[self.n]
                s.step = 1 if item.step is None else _as_bound(item.step, "slice step")
                if item.start is not None:
                    s.start, s.has_start = _as_bound(item.start, "slice start"), 1
                if item.stop is not None:
                    s.stop, s.has_stop = _as_bound(item.stop, "slice stop"), 1
                self.n += 1
                kept += 1
                out_dim += 1
            else:
                s = self.slices[self.n]
                s.start, s.has_start, s.is_index, s.step = _as_index(item, "index"), 1, 1, 1
                self.n += 1
                ints.append(position)
        if self.advanced is not None and ints:
            # NumPy and PyTorch move the result's dims to the front when ints and the
            # advanced index are apart; aicraft supports them side by side only.
            span = sorted(ints + advanced)
            if span[-1] - span[0] + 1 != len(span):
                raise IndexError("an int index apart from the advanced index (a slice between "
                                 "them) is not supported; index in two steps")
        self.has_ints = bool(ints)

    def _full(self):
        self.slices[self.n].step = 1
        self.n += 1

    def basic_is_identity(self):
        return not self.has_ints and all(
            self.slices[i].step == 1 and not self.slices[i].has_start and not self.slices[i].has_stop
            for i in range(self.n))


def _several_advanced(base, all_advanced):
    """base indexed by several advanced indices at their dims, as NumPy and PyTorch: the
    indices broadcast together; their result dims stand where the indices stood when
    those are side by side, else first. One index_select over the indexed dims raveled."""
    from aicraft import shapes
    tensors, dims = [], []
    for t, d in all_advanced:
        if _live(t).dtype == 0:
            raise IndexError("tensors used as indices must be int64 or bool, not float32")
        if _live(t).dtype in (2, 3):   # a mask: one int64 index per dim it covers
            if tuple(t.shape) != tuple(base.shape[d:d + t.dim()]):
                raise IndexError("the mask's shape %s does not match the indexed tensor's shape %s at dim %d"
                                 % (tuple(t.shape), tuple(base.shape), d))
            tensors.extend(shapes.nonzero(t, as_tuple=True))
            dims.extend(range(d, d + t.dim()))
        else:
            tensors.append(t)
            dims.append(d)
    tensors = shapes.broadcast_tensors(*tensors)
    k, batch = len(dims), tuple(tensors[0].shape)
    moved = shapes.movedim(base, dims, list(range(k))) if dims != list(range(k)) else base
    shape = list(moved.shape)
    array = ffi.new("AcTensor *[]", [t._ptr for t in tensors])
    flat = _wrapped(lib.ac_ravel_index(array, k, ffi.new("int64_t[]", shape), len(shape)), *tensors)
    rows = 1
    for n in shape[:k]:
        rows *= n
    picked = index_select(moved.reshape([rows] + shape[k:]), 0, flat.reshape(-1))
    out = picked.reshape(list(batch) + shape[k:])
    if dims == list(range(dims[0], dims[0] + k)) and dims[0] > 0:
        out = shapes.movedim(out, list(range(len(batch))), list(range(dims[0], dims[0] + len(batch))))
    return out


def getitem(self, index):
    """Basic indexing (ints, slices, Ellipsis, None) and advanced indices: int64 tensors
    or lists of ints, or bool masks, as PyTorch. Differentiable."""
    p = _live(self)
    ix = _Index(p.ndim, index)
    if len(ix.all_advanced) > 1:
        base = _wrapped(lib.ac_slice(p, ix.slices, ix.n), self) if ix.n and not ix.basic_is_identity() else self
        return _several_advanced(base, ix.all_advanced)
    out = self
    if ix.n and not (ix.advanced is not None and ix.basic_is_identity()):
        out = _wrapped(lib.ac_slice(p, ix.slices, ix.n), self)
    if ix.advanced is not None:
        out = _wrapped(lib.ac_index(out._ptr, ix.dim, ix.advanced._ptr), out, ix.advanced)
    for axis in ix.new_axes:
        out = out.unsqueeze(axis)
    return out


def setitem(self, index, value):
    """self[index] = value (a number or a tensor broadcast to self[index]'s shape, None
    dims left out), in place, no graph."""
    p = _live(self)
    if isinstance(value, Tensor):
        needs_grad = _live(value).requires_grad
    else:
        if _scalar(value) is None and not (isinstance(value, list) or _is_numpy(value, "ndarray")):
            raise TypeError("__setitem__: value must be a number or a tensor, not %s" % type(value).__name__)
        value, needs_grad = tensor(value), False
    if lib.ac_is_grad_enabled() and (p.requires_grad or needs_grad):
        raise RuntimeError("__setitem__: in-place changes of tensors that require grad are not "
                           "recorded; do them under `with ac.no_grad():`")
    ix = _Index(p.ndim, index)
    if len(ix.all_advanced) > 1:
        # the flat positions the index picks, written through a flat view of self
        from aicraft.autograd import no_grad
        from aicraft.shapes import _positions
        with no_grad():
            where = getitem(_positions(self), index)
            values = value.expand(*where.shape).reshape(-1) if tuple(value.shape) != tuple(where.shape) \
                else value.reshape(-1)
            flat, where = self.reshape(-1), where.reshape(-1)
        rc = lib.ac_index_put_(flat._ptr, 0, where._ptr, values._ptr)
    elif ix.advanced is None:
        rc = lib.ac_slice_put_(p, ix.slices, ix.n, value._ptr)
    elif ix.basic_is_identity():
        rc = lib.ac_index_put_(p, ix.dim, ix.advanced._ptr, value._ptr)
    else:   # write into a copy of the basic part, then write that back
        from aicraft.autograd import no_grad
        with no_grad():
            part = _wrapped(lib.ac_slice(p, ix.slices, ix.n), self)
        rc = lib.ac_index_put_(part._ptr, ix.dim, ix.advanced._ptr, value._ptr)
        if rc == 0:
            rc = lib.ac_slice_put_(p, ix.slices, ix.n, part._ptr)
    if rc < 0:
        raise_error(self, value, ix.advanced)


def _tensor_arg(value, what, op):
    if not isinstance(value, Tensor):
        raise TypeError("%s: %s must be a Tensor, not %s" % (op, what, type(value).__name__))
    return value


def gather(self, dim, index, *, sparse_grad=False):
    """out[i][j] = self[index[i][j]][j] for dim 0, and so on; index int64 with self's ndim.
    sparse_grad is accepted: the gradient is dense either way, with the same values."""
    index = _tensor_arg(index, "index", "gather")
    if _live(index).size == 0:   # as torch: an empty index of any dtype and dims picks nothing
        return self.reshape(-1).narrow(0, 0, 0).reshape(index.shape)
    if _live(self).ndim <= 1 and _live(index).ndim <= 1 and _live(self).ndim != _live(index).ndim:
        # as torch: 0-d and 1-d tensors gather as 1-d ones
        _as_dim(dim)
        return gather(self.reshape(-1), dim, index.reshape(-1)).reshape(index.shape)
    return _wrapped(lib.ac_gather(self._ptr, _as_dim(dim), index._ptr), self, index)


def index_select(self, dim, index):
    """The entries of self along dim at index (int64, 0-d or 1-d)."""
    index = _tensor_arg(index, "index", "index_select")
    if _live(self).ndim == 0:   # as torch: a 0-d input takes one index, 0, and stays 0-d
        if _live(index).size != 1:
            raise IndexError("index_select: a 0-d input takes 1 index, got %d" % _live(index).size)
        return index_select(self.reshape(1), dim, index.reshape(1)).reshape(())
    return _wrapped(lib.ac_index_select(self._ptr, _as_dim(dim), index._ptr), self, index)


def expand(self, *sizes):
    """self broadcast to sizes (-1 keeps a dim; new dims go in front); a copy."""
    shape = _shape_args(sizes, "size")
    return _wrapped(lib.ac_expand(self._ptr, ffi.new("int64_t[]", shape) if shape else _NULL,
                                  len(shape)), self)


def expand_as(self, other):
    return expand(self, _tensor_arg(other, "other", "expand_as").shape)


def view_as(self, other):
    return self.reshape(_tensor_arg(other, "other", "view_as").shape)


def contiguous(self, memory_format=None):
    """self: aicraft's tensors are always contiguous."""
    _live(self)
    return self


def t(self):
    """The transpose of a matrix; 0-d and 1-d tensors as they are."""
    nd = _live(self).ndim
    if nd > 2:
        raise ShapeError("t: expects a tensor with <= 2 dims, got shape %s" % (self.shape,))
    return self.transpose(0, 1) if nd == 2 else self


def narrow(self, dim, start, length):
    """The length entries from start along dim (start may count from the end)."""
    p = _live(self)
    nd = p.ndim
    d = _as_dim(dim)
    if not -nd <= d < nd:
        raise IndexError("narrow: dim %d is out of range for a %d-d tensor" % (d, nd))
    d %= nd
    size = p.shape[d]
    start, length = _as_int(start, "start"), _as_int(length, "length")
    if not -size <= start <= size:
        raise IndexError("narrow: start %d is out of range for dim %d of size %d" % (start, d, size))
    if start < 0:
        start += size
    if length < 0 or start + length > size:
        raise ValueError("narrow: start %d + length %d exceeds dim %d of size %d" % (start, length, d, size))
    index = (slice(None),) * d + (slice(start, start + length),)
    return getitem(self, index)


def split(self, split_size_or_sections, dim=0):
    """Pieces along dim: of split_size each (the last may be smaller), or of the sizes listed."""
    size = self.size(dim)
    if isinstance(split_size_or_sections, (list, tuple)):
        sections = [_as_int(s, "split sizes") for s in split_size_or_sections]
        if any(s < 0 for s in sections) or sum(sections) != size:
            raise ShapeError("split: sizes %s do not sum to dim %d's size %d" % (sections, dim, size))
    else:
        step = _as_int(split_size_or_sections, "split_size")
        if step <= 0 and not (step == 0 and size == 0):
            raise ValueError("split: split_size must be positive, got %d" % step)
        sections = [min(step, size - i) for i in range(0, size, step)] if size else [0]
    pieces, start = [], 0
    for length in sections:
        pieces.append(narrow(self, dim, start, length))
        start += length
    return tuple(pieces)


def chunk(self, chunks, dim=0):
    """split into pieces of ceil(size / chunks) (so maybe fewer than chunks), as PyTorch."""
    chunks = _as_int(chunks, "chunks")
    if chunks <= 0:
        raise ValueError("chunk: chunks must be positive, got %d" % chunks)
    size = self.size(dim)
    if size == 0:   # as torch: chunks empty pieces
        return tuple(narrow(self, dim, 0, 0) for _ in range(chunks))
    return split(self, max(-(-size // chunks), 1), dim)


def _new(self, make, args, dtype, kwargs):
    return make(*args, dtype=self.dtype if dtype is None else dtype, **kwargs)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    from aicraft.creation import zeros
    return _new(self, zeros, size, dtype, dict(device=device, requires_grad=requires_grad))


def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    from aicraft.creation import ones
    return _new(self, ones, size, dtype, dict(device=device, requires_grad=requires_grad))


def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    from aicraft.creation import full
    return _new(self, full, (size, fill_value), dtype, dict(device=device, requires_grad=requires_grad))


def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return _new(self, tensor, (data,), dtype, dict(device=device, requires_grad=requires_grad))


def mm(self, mat2):
    """Matrix product of two 2-D tensors (no broadcasting)."""
    mat2 = _tensor_arg(mat2, "mat2", "mm")
    if _live(self).ndim != 2 or _live(mat2).ndim != 2:
        raise ShapeError("mm: both operands must be 2-D, got %s and %s" % (self.shape, mat2.shape))
    return self.matmul(mat2)


def bmm(self, mat2):
    """Batched matrix product of (b, n, m) and (b, m, p) tensors (no broadcasting)."""
    mat2 = _tensor_arg(mat2, "mat2", "bmm")
    a, b = self.shape, mat2.shape
    if len(a) != 3 or len(b) != 3 or a[0] != b[0]:
        raise ShapeError("bmm: operands must be 3-D with the same batch size, got %s and %s" % (a, b))
    return self.matmul(mat2)


def norm(self, p="fro", dim=None, keepdim=False):
    """The vector p-norm over dim (None: all elements): p = 2 or "fro", 1, inf, -inf, or
    any other positive number."""
    _live(self)
    if p is None or p == "fro" or p == 2:
        return (self * self).sum(dim, keepdim).sqrt()
    if isinstance(p, str) or _scalar(p) is None:
        raise ValueError("norm: p must be a number or 'fro', not %r" % (p,))
    if p == 1:
        return self.abs().sum(dim, keepdim)
    if p == math.inf:
        return self.abs().amax(dim, keepdim)
    if p == -math.inf:
        return self.abs().amin(dim, keepdim)
    if p <= 0:
        raise ValueError("norm: p must be positive, inf or -inf, got %r" % (p,))
    return (self.abs() ** p).sum(dim, keepdim) ** (1.0 / p)


def cumsum(self, dim, dtype=None):
    """The cumulative sum along dim (int64 for integer and bool tensors, exact, as PyTorch)."""
    out = _wrapped(lib.ac_cumsum(_live(self), _as_dim(dim)), self)
    if dtype is not None:
        return out.to(dtype)
    return out


def _ordered(self, fn):
    """(values, indices) from fn on self (integers ordered exactly, in C)."""
    p = _live(self)
    indices = ffi.new("AcTensor **")
    values = fn(p, indices)
    if not values:
        raise_error(self)
    return _wrap(values), _wrap(indices[0])


def sort(self, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along dim; ties keep their order."""
    dim, descending = _as_dim(dim), 1 if descending else 0
    return _sort_result(*_ordered(self, lambda q, i: lib.ac_sort(q, dim, descending, i)))


def argsort(self, dim=-1, descending=False, stable=False):
    return sort(self, dim, descending).indices


def topk(self, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (or smallest) along dim, always in sorted order."""
    k, dim, largest = _as_int(k, "k"), _as_dim(dim), 1 if largest else 0
    return _topk_result(*_ordered(self, lambda q, i: lib.ac_topk(q, k, dim, largest, i)))


_METHODS = {
    "__getitem__": getitem, "__setitem__": setitem, "gather": gather,
    "index_select": index_select, "expand": expand, "expand_as": expand_as, "view_as": view_as,
    "contiguous": contiguous, "t": t, "narrow": narrow, "split": split, "chunk": chunk,
    "new_zeros": new_zeros, "new_ones": new_ones, "new_full": new_full, "new_tensor": new_tensor,
    "mm": mm, "bmm": bmm, "norm": norm, "cumsum": cumsum, "sort": sort, "argsort": argsort,
    "topk": topk, "log1p": _unary("log1p", lib.ac_log1p, "log(1 + self), elementwise"),
}


# ---- where and masked_fill ----

def _where_typed(condition, a, b, flags):
    p = lib.ac_where_typed(condition._ptr, a._ptr, b._ptr, flags)
    if p:
        return _wrap(p)
    raise_error(condition, a, b)


def where(condition, input, other):
    """input where the bool condition is true, else other; input and other may be
    numbers. Broadcasts all three; the result has their promoted dtype (torch's
    result_type), differentiable in float32 input and other."""
    if not isinstance(condition, Tensor):
        raise TypeError("where(): argument 'condition' must be a bool Tensor, not %s"
                        % type(condition).__name__)
    values, flags = [], 0
    for x, flag in ((input, lib.AC_SCALAR_A), (other, lib.AC_SCALAR_B)):
        if not isinstance(x, Tensor):
            n = _number(x)
            if n is None:
                if not _is_numpy(x, "ndarray"):
                    raise TypeError("where(): expected a Tensor or a number, not %s" % type(x).__name__)
                x = tensor(x)
            else:
                x = _scalar_tensor(n)
                flags |= flag
        values.append(x)
    return _where_typed(condition, values[0], values[1], flags)


def _where_method(self, condition, other):
    """self where condition is true, else other (PyTorch's Tensor.where)."""
    return where(condition, self, other)


def _masked_fill(self, mask, value):
    """A copy with value where the bool mask (broadcast to self) is true, in
    self's dtype; differentiable in self and in a 0-d tensor value."""
    dtype = _live(self).dtype
    if isinstance(value, Tensor):
        if _live(value).ndim != 0:
            raise ValueError("masked_fill: value must be a number or a 0-dimensional tensor, "
                             "not of %d dims" % value._ptr.ndim)
    else:
        n = _number(value)
        if n is None:
            raise TypeError("masked_fill: value must be a number or a 0-d tensor, not %s"
                            % type(value).__name__)
        value = _scalar_tensor(n)
    if value._ptr.dtype != dtype:
        value = value.to(BY_CODE[dtype])
    return _where_typed(mask, value, self, 0)


def _masked_fill_(self, mask, value):
    return self._copy_(self, _masked_fill(self, mask, value))


def bind(cls):
    for name, fn in _METHODS.items():
        setattr(cls, name, fn)
    cls.where, cls.masked_fill, cls.masked_fill_ = _where_method, _masked_fill, _masked_fill_
