"""products.py - PyTorch's products beyond matmul: einsum, tensordot, outer/ger, dot, vdot,
inner, mv, addmm, addmv, addbmm, baddbmm, addr, kron, chain_matmul/multi_dot, cross, trace.

Every contraction is one ac.matmul (libac's GEMM, batched with broadcast batch dims)
between permuted and reshaped operands: einsum contracts its operands left to right,
each pair as (batch..., M, K) @ (batch..., K, N). No Python loop runs over elements;
gradients come from matmul, permute, reshape and sum.
"""
from aicraft import dtypes
from aicraft._args import _as_dim, _as_int, _scalar
from aicraft._wrapping import _live
from aicraft.errors import ShapeError
from aicraft.tensor import Tensor


def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError("%s(): argument '%s' must be a Tensor, not %s" % (op, what, type(x).__name__))
    _live(x)
    return x


def _prod(sizes):
    n = 1
    for s in sizes:
        n *= s
    return n


def _permuted(t, order):
    return t if list(order) == list(range(len(order))) else t.permute(*order)


# ---- einsum --------------------------------------------------------------------

def _parse_term(term, ndim, op_index, ell_rank):
    """The labels of one operand: letters, and ('...', j) for its ellipsis dims (j counts
    from the global ellipsis' first dim, right-aligned)."""
    if term.count("...") > 1 or term.replace("...", "").count(".") > 0:
        raise ValueError("einsum(): invalid ellipsis in subscript %r" % term)
    head, ell, tail = term.partition("...")
    for c in head + tail:
        if not c.isalpha():
            raise ValueError("einsum(): invalid subscript %r in %r (letters only)" % (c, term))
    if not ell:
        if len(head) != ndim:
            raise ValueError("einsum(): the subscript %r of operand %d has %d labels for %d dims"
                             % (term, op_index, len(head), ndim))
        return list(head)
    n_ell = ndim - len(head) - len(tail)
    if n_ell < 0:
        raise ValueError("einsum(): operand %d has %d dims, fewer than the %d labels of %r"
                         % (op_index, ndim, len(head) + len(tail), term))
    return list(head) + [("...", ell_rank - n_ell + j) for j in range(n_ell)] + list(tail)


def _take_diagonals(t, labels):
    """t with each label repeated in labels reduced to its diagonal (once per label)."""
    while True:
        seen = {}
        repeat = None
        for i, lab in enumerate(labels):
            if lab in seen:
                repeat = (seen[lab], i)
                break
            seen[lab] = i
        if repeat is None:
            return t, labels
        i, j = repeat
        n = t.shape[i]
        if t.shape[j] != n:
            raise ShapeError("einsum(): subscript %s is repeated for operand dims of sizes %d and %d"
                             % (labels[i], n, t.shape[j]))
        rest = [k for k in range(len(labels)) if k not in (i, j)]
        moved = _permuted(t, rest + [i, j]).reshape([t.shape[k] for k in rest] + [n * n])
        t = moved[(Ellipsis, slice(0, n * n, n + 1))]
        labels = [labels[k] for k in rest] + [labels[i]]


def _sum_labels(t, labels, drop):
    dims = [i for i, lab in enumerate(labels) if lab in drop]
    if not dims:
        return t, labels
    return t.sum(dims), [lab for lab in labels if lab not in drop]


def _contract(a, la, b, lb, keep):
    """a (labels la) times b (labels lb), summing the shared labels not in keep."""
    a, la = _sum_labels(a, la, {x for x in la if x not in lb and x not in keep})
    b, lb = _sum_labels(b, lb, {x for x in lb if x not in la and x not in keep})
    batch = [x for x in la if x in lb and x in keep]
    summed = [x for x in la if x in lb and x not in keep]
    a_only = [x for x in la if x not in lb]
    b_only = [x for x in lb if x not in la]
    # a shared summed label of size 1 on one side only: the other side sums over it first
    for x in summed:
        sa, sb = a.shape[la.index(x)], b.shape[lb.index(x)]
        if sa != sb:
            if sa != 1 and sb != 1:
                raise ShapeError("einsum(): subscript %s has sizes %d and %d that do not broadcast"
                                 % (x, sa, sb))
            if sa == 1:
                b = b.sum(lb.index(x), keepdim=True)
            else:
                a = a.sum(la.index(x), keepdim=True)
    a = _permuted(a, [la.index(x) for x in batch + a_only + summed])
    b = _permuted(b, [lb.index(x) for x in batch + summed + b_only])
    nb = len(batch)
    a_sizes, b_sizes = list(a.shape), list(b.shape)
    m_sizes, k_sizes = a_sizes[nb:nb + len(a_only)], a_sizes[nb + len(a_only):]
    n_sizes = b_sizes[nb + len(summed):]
    k = _prod(k_sizes)
    out = a.reshape(a_sizes[:nb] + [_prod(m_sizes), k]).matmul(
        b.reshape(b_sizes[:nb] + [k, _prod(n_sizes)]))
    out_batch = list(out.shape[:nb])
    return out.reshape(out_batch + m_sizes + n_sizes), batch + a_only + b_only


def _sublist_equation(args):
    """einsum(op0, [0, 1], op1, [1, 2], [0, 2]): the equation and the operands."""
    def letters(sub):
        out = ""
        for s in sub:
            if s is Ellipsis:
                out += "..."
            else:
                s = _as_int(s, "einsum sublist entry")
                if not 0 <= s < 52:
                    raise ValueError("einsum(): sublist entries must be in [0, 52), got %d" % s)
                out += chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26)
        return out
    operands, terms = [], []
    items = list(args)
    while len(items) >= 2 and isinstance(items[0], Tensor):
        operands.append(items.pop(0))
        terms.append(letters(items.pop(0)))
    equation = ",".join(terms)
    if items:
        equation += "->" + letters(items.pop(0))
    if items:
        raise ValueError("einsum(): bad sublist arguments")
    return equation, operands


def einsum(*args):
    """PyTorch's einsum: an equation ("bij,bjk->bik", implicit output when there is no
    "->", "..." for broadcast dims, repeated labels for diagonals) and its operands (or a
    list of them, or the sublist form). Contracts left to right, each pair one matmul."""
    if not args:
        raise TypeError("einsum(): expected an equation and operands")
    if isinstance(args[0], (list, tuple)) and len(args) == 2 and isinstance(args[1], str):
        args = (args[1], args[0])        # (operands, equation)
    if isinstance(args[0], Tensor):
        equation, operands = _sublist_equation(args)
    else:
        equation, operands = args[0], list(args[1:])
        if not isinstance(equation, str):
            raise TypeError("einsum(): the equation must be a string, not %s" % type(equation).__name__)
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    operands = [_tensor(t, "einsum", "operands") for t in operands]
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError("einsum(): the equation has %d operand subscripts for %d operands"
                         % (len(terms), len(operands)))
    ell_rank = 0
    for term, t in zip(terms, operands):
        if "..." in term:
            ell_rank = max(ell_rank, t.ndim - len(term.replace("...", "")))
    labels = [_parse_term(term, t.ndim, i, ell_rank) for i, (term, t) in enumerate(zip(terms, operands))]
    ell = [("...", j) for j in range(ell_rank)]
    if arrow:
        if rhs.count("...") > 1:
            raise ValueError("einsum(): the output subscript has more than one ellipsis")
        head, has_ell, tail = rhs.partition("...")
        for c in head + tail:
            if not c.isalpha():
                raise ValueError("einsum(): invalid output subscript %r" % c)
        out_labels = list(head) + (ell if has_ell else []) + list(tail)
        if len(set(out_labels)) != len(out_labels):
            raise ValueError("einsum(): output subscript %r appears more than once" % rhs)
        used = {x for labs in labels for x in labs}
        for x in out_labels:
            if isinstance(x, str) and x not in used:
                raise ValueError("einsum(): output subscript %s does not appear in the inputs" % x)
        out_labels = [x for x in out_labels if x in used or not isinstance(x, str)]
    else:
        counts = {}
        for labs in labels:
            for x in labs:
                if isinstance(x, str):
                    counts[x] = counts.get(x, 0) + 1
        out_labels = ell + sorted(x for x, c in counts.items() if c == 1)
    items = []
    for t, labs in zip(operands, labels):
        t, labs = _take_diagonals(t, labs)
        items.append((t, labs))
    t, labs = items[0]
    for i in range(1, len(items)):
        keep = set(out_labels)
        for _, later in items[i + 1:]:
            keep.update(later)
        t, labs = _contract(t, labs, items[i][0], items[i][1], keep)
    t, labs = _sum_labels(t, labs, {x for x in labs if x not in out_labels})
    missing = [x for x in out_labels if x not in labs]       # ellipsis dims no operand has
    for x in missing:
        t = t.unsqueeze(0)
        labs = [x] + labs
    return _permuted(t, [labs.index(x) for x in out_labels])


# ---- products of vectors and matrices --------------------------------------------

def _need_ndim(t, ndims, op, what):
    if t.ndim not in ndims:
        raise ShapeError("%s: %s must be %s-d, got shape %s"
                         % (op, what, " or ".join(str(n) for n in ndims), t.shape))


def _same_dtype(a, b, op):
    if _live(a).dtype != _live(b).dtype:
        raise TypeError("%s: expected both operands to have the same dtype, got %s and %s"
                        % (op, a.dtype, b.dtype))


def dot(input, other, *, out=None):
    """The inner product of two 1-d tensors of one length and dtype."""
    a, b = _tensor(input, "dot"), _tensor(other, "dot", "other")
    _need_ndim(a, (1,), "dot", "input")
    _need_ndim(b, (1,), "dot", "other")
    _same_dtype(a, b, "dot")
    if a.shape != b.shape:
        raise ShapeError("dot: inconsistent tensor sizes %s and %s" % (a.shape, b.shape))
    return a.matmul(b)


vdot = dot


def inner(input, other, *, out=None):
    """Sum over the last dims of both (a 0-d operand scales the other)."""
    a, b = _tensor(input, "inner"), _tensor(other, "inner", "other")
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    k = a.shape[-1]
    if b.shape[-1] != k:
        raise ShapeError("inner: the last dims of %s and %s differ" % (a.shape, b.shape))
    out = a.reshape(-1, k).matmul(b.reshape(-1, k).t())
    return out.reshape(list(a.shape[:-1]) + list(b.shape[:-1]))


def outer(input, vec2, *, out=None):
    """The outer product of two 1-d tensors."""
    a, b = _tensor(input, "outer"), _tensor(vec2, "outer", "vec2")
    _need_ndim(a, (1,), "outer", "input")
    _need_ndim(b, (1,), "outer", "vec2")
    return _times(a.reshape(-1, 1), b.reshape(1, -1))


ger = outer


def _times(a, b):
    """a * b; for two bool tensors their logical and, as PyTorch's bool product."""
    if _live(a).dtype == 2 and _live(b).dtype == 2:
        return a.logical_and(b)
    return a * b


def mv(input, vec, *, out=None):
    """Matrix (n, m) times vector (m)."""
    a, v = _tensor(input, "mv"), _tensor(vec, "mv", "vec")
    _need_ndim(a, (2,), "mv", "input")
    _need_ndim(v, (1,), "mv", "vec")
    return a.matmul(v)


def _scaled_sum(op, input, product, beta, alpha):
    """beta * input + alpha * product; input is ignored (NaN and all) when beta is 0."""
    for name, value in (("beta", beta), ("alpha", alpha)):
        if _scalar(value) is None:
            raise TypeError("%s: %s must be a number" % (op, name))
        if isinstance(value, float) and not _live(product).dtype == 0 and value != int(value):
            raise TypeError("%s: a fractional %s is not allowed for integer tensors" % (op, name))
    if alpha != 1 and _live(product).dtype != 2:
        product = product * alpha
    inp = _tensor(input, op)
    _broadcast_check(inp.shape, product.shape, op)
    if _live(inp).dtype == 2 and _live(product).dtype == 2:     # bool: (beta and input) or product
        out = product if alpha else product.logical_and(product.logical_not())
        return out.logical_or(inp.expand(*product.shape)) if beta else out
    if beta == 0:
        if inp.requires_grad:     # a zero gradient for input, as PyTorch's, without its NaN
            from aicraft.creation import ones
            from aicraft.indexing import where
            return product + where(ones(inp.shape, dtype=dtypes.bool), 0.0, inp)
        return product
    return (inp if beta == 1 else inp * beta) + product


def _broadcast_check(inp, out, op):
    """input must broadcast to the product's shape (not the other way round)."""
    if len(inp) > len(out) or any(i not in (1, o) for i, o in zip(inp[::-1], out[::-1])):
        raise ShapeError("%s: input of shape %s does not broadcast to the product's shape %s"
                         % (op, tuple(inp), tuple(out)))


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat1 @ mat2), mat1 and mat2 2-d."""
    m1, m2 = _tensor(mat1, "addmm", "mat1"), _tensor(mat2, "addmm", "mat2")
    _need_ndim(m1, (2,), "addmm", "mat1")
    _need_ndim(m2, (2,), "addmm", "mat2")
    return _scaled_sum("addmm", input, m1.matmul(m2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat @ vec)."""
    return _scaled_sum("addmv", input, mv(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * outer(vec1, vec2)."""
    return _scaled_sum("addr", input, outer(vec1, vec2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (batch1 @ batch2), batches of matrices (b, n, m) and (b, m, p)."""
    b1, b2 = _tensor(batch1, "baddbmm", "batch1"), _tensor(batch2, "baddbmm", "batch2")
    return _scaled_sum("baddbmm", input, b1.bmm(b2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * sum over b of batch1[b] @ batch2[b]: one GEMM of
    (n, b*m) @ (b*m, p)."""
    b1, b2 = _tensor(batch1, "addbmm", "batch1"), _tensor(batch2, "addbmm", "batch2")
    _need_ndim(b1, (3,), "addbmm", "batch1")
    _need_ndim(b2, (3,), "addbmm", "batch2")
    (b, n, m), (b_, m_, p) = b1.shape, b2.shape
    if b != b_ or m != m_:
        raise ShapeError("addbmm: batch1 %s and batch2 %s do not fit" % (b1.shape, b2.shape))
    product = b1.permute(1, 0, 2).reshape(n, b * m).matmul(b2.reshape(b * m, p))
    return _scaled_sum("addbmm", input, product, beta, alpha)


def kron(input, other, *, out=None):
    """The Kronecker product: block (i, j, ...) is input[i, j, ...] * other."""
    a, b = _tensor(input, "kron"), _tensor(other, "kron", "other")
    nd = max(a.ndim, b.ndim)
    sa = [1] * (nd - a.ndim) + list(a.shape)
    sb = [1] * (nd - b.ndim) + list(b.shape)
    a2 = a.reshape([x for s in sa for x in (s, 1)])
    b2 = b.reshape([x for s in sb for x in (1, s)])
    return _times(a2, b2).reshape([x * y for x, y in zip(sa, sb)])


def tensordot(a, b, dims=2, out=None):
    """Sum of a times b over dims: an int (a's last dims with b's first), or two lists."""
    a, b = _tensor(a, "tensordot", "a"), _tensor(b, "tensordot", "b")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (list, tuple)):
        if len(dims) != 2:
            raise ValueError("tensordot: dims must be an int or a pair of lists")
        da, db = dims
        da = [da] if not isinstance(da, (list, tuple)) else list(da)
        db = [db] if not isinstance(db, (list, tuple)) else list(db)
    else:
        n = _as_int(dims, "dims")
        if n < 0:
            raise ValueError("tensordot: dims must be non-negative, got %d" % n)
        if n > min(a.ndim, b.ndim):
            raise ShapeError("tensordot: dims %d exceeds the dims of %s or %s" % (n, a.shape, b.shape))
        da, db = list(range(a.ndim - n, a.ndim)), list(range(n))
    if len(da) != len(db):
        raise ValueError("tensordot: both lists of dims must have the same length")
    da = [_norm_dim(d, a.ndim, "tensordot") for d in da]
    db = [_norm_dim(d, b.ndim, "tensordot") for d in db]
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            if a.shape[x] == 1:          # a is constant along it: sum b first (as PyTorch)
                b = b.sum(y, keepdim=True)
            elif b.shape[y] == 1:
                a = a.sum(x, keepdim=True)
            else:
                raise ShapeError("tensordot: contracted dims %d of %s and %d of %s differ"
                                 % (x, a.shape, y, b.shape))
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = _prod(a.shape[d] for d in da)
    am = _permuted(a, fa + da).reshape(_prod(a.shape[d] for d in fa), k)
    bm = _permuted(b, db + fb).reshape(k, _prod(b.shape[d] for d in fb))
    return am.matmul(bm).reshape([a.shape[d] for d in fa] + [b.shape[d] for d in fb])


def _norm_dim(d, ndim, op):
    d = _as_dim(d)
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise IndexError("%s: dim %d is out of range for a %d-d tensor" % (op, d, ndim))
    return d % max(ndim, 1)


def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices (the first may be a row vector, the last a column
    vector), multiplied in the order with the fewest operations."""
    ts = [_tensor(t, "multi_dot", "tensors") for t in tensors]
    if len(ts) < 2:
        raise ValueError("multi_dot: expected at least 2 tensors, got %d" % len(ts))
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = list(ts)
    if first_vec:
        mats[0] = mats[0].reshape(1, -1)
    if last_vec:
        mats[-1] = mats[-1].reshape(-1, 1)
    for i, t in enumerate(mats):
        if t.ndim != 2:
            raise ShapeError("multi_dot: tensor %d must be 2-d (1-d allowed first and last), got %s"
                             % (i, ts[i].shape))
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise ShapeError("multi_dot: tensors %d %s and %d %s cannot be multiplied"
                             % (i, ts[i].shape, i + 1, ts[i + 1].shape))
    out = _chain(mats)
    if first_vec and last_vec:
        return out.reshape(())
    if first_vec:
        return out.reshape(-1)
    if last_vec:
        return out.reshape(-1)
    return out


def _chain(mats):
    """The matrix chain product in the order of fewest multiplications (dynamic programming
    over the n <= a few dozen matrices: shapes only)."""
    n = len(mats)
    if n <= 2:
        return mats[0].matmul(mats[1]) if n == 2 else mats[0]
    dims = [mats[0].shape[0]] + [m.shape[1] for m in mats]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def product(i, j):
        if i == j:
            return mats[i]
        k = split[i][j]
        return product(i, k).matmul(product(k + 1, j))
    return product(0, n - 1)


def chain_matmul(*matrices, out=None):
    """The product of 2-d matrices (torch.chain_matmul)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = matrices[0]
    for t in matrices:
        _need_ndim(_tensor(t, "chain_matmul", "matrices"), (2,), "chain_matmul", "every matrix")
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


def cross(input, other, dim=None, *, out=None):
    """The cross product of 3-vectors along dim (None: the first dim of size 3, as
    torch.cross; linalg.cross uses -1), broadcasting the other dims."""
    from aicraft.creation import tensor
    a, b = _tensor(input, "cross"), _tensor(other, "cross", "other")
    if a.ndim != b.ndim:
        raise ShapeError("cross: inputs must have the same number of dims, got %s and %s" % (a.shape, b.shape))
    nd = a.ndim
    shape = []
    for i in range(nd):
        sa = a.shape[i - (nd - a.ndim)] if i >= nd - a.ndim else 1
        sb = b.shape[i - (nd - b.ndim)] if i >= nd - b.ndim else 1
        if sa != sb and sa != 1 and sb != 1:
            raise ShapeError("cross: shapes %s and %s do not broadcast" % (a.shape, b.shape))
        shape.append(max(sa, sb))
    if dim is None:
        sizes3 = [i for i, s in enumerate(shape) if s == 3]
        if not sizes3:
            raise ShapeError("cross: no dim of size 3 in shapes %s and %s" % (a.shape, b.shape))
        d = sizes3[0]
    else:
        d = _norm_dim(dim, nd, "cross")
    for t, name in ((a, "input"), (b, "other")):
        own = d - (nd - t.ndim)
        if own < 0 or t.shape[own] != 3:
            raise ShapeError("cross: %s %s must have size 3 at dim %d" % (name, t.shape, d - nd))
    a = a.expand(*shape[:d], 3, *shape[d + 1:]) if list(a.shape) != shape else a
    b = b.expand(*shape[:d], 3, *shape[d + 1:]) if list(b.shape) != shape else b
    i120, i201 = tensor([1, 2, 0]), tensor([2, 0, 1])
    return a.index_select(d, i120) * b.index_select(d, i201) - a.index_select(d, i201) * b.index_select(d, i120)


def trace(input):
    """The sum of the main diagonal of a 2-d tensor (int64 for integers)."""
    x = _tensor(input, "trace")
    if x.ndim != 2:
        raise ShapeError("trace: expected a 2-d tensor, got shape %s" % (x.shape,))
    n, m = x.shape
    k = min(n, m)
    return x.reshape(-1)[0:k * (m + 1):m + 1].sum()


FUNCTIONS = {
    "einsum": einsum, "dot": dot, "vdot": vdot, "inner": inner, "outer": outer, "ger": ger,
    "mv": mv, "addmm": addmm, "addmv": addmv, "addr": addr, "baddbmm": baddbmm, "addbmm": addbmm,
    "kron": kron, "tensordot": tensordot, "chain_matmul": chain_matmul, "cross": cross, "trace": trace,
}
_METHOD_NAMES = ("dot", "vdot", "inner", "outer", "ger", "mv", "addmm", "addmv", "addr", "baddbmm",
                 "addbmm", "kron", "cross", "trace")


def bind(cls):
    for name in _METHOD_NAMES:
        fn = FUNCTIONS[name]

        def method(self, *args, _fn=fn, **kwargs):
            _live(self)        # a tensor whose scope ended: ScopeError before any argument error
            return _fn(self, *args, **kwargs)
        method.__name__ = name
        method.__doc__ = fn.__doc__
        setattr(cls, name, method)
