"""linalg.py - aicraft.linalg, PyTorch's torch.linalg: vector_norm, matrix_norm, norm, cross,
multi_dot, matmul, vecdot; and the norms and distances of the torch namespace built on them
(torch.norm, dist, cdist) and of torch.nn.functional (normalize, cosine_similarity,
pairwise_distance).

Norms compose libac's ops (abs, pow, sum, amax, sqrt), so gradients come with them; the
2-norm's gradient at a zero vector is 0, as PyTorch's (the square root is taken only
where the sum of squares is positive). The matrix norms 2, -2 and 'nuc' come from singular
values computed in C (ops/linalg.c, one-sided Jacobi).
"""
import math

from aicraft import dtypes
from aicraft._args import _as_dim, _scalar
from aicraft._ffi import lib
from aicraft.errors import raise_error
from aicraft._wrapping import _live
from aicraft.errors import ShapeError
from aicraft.products import cross as _cross, multi_dot
from aicraft.tensor import Tensor

__all__ = ["vector_norm", "matrix_norm", "norm", "cross", "multi_dot", "matmul", "vecdot", "det", "inv",
           "solve", "slogdet", "svdvals", "matrix_rank", "cond", "matrix_power", "vander", "tensorinv",
           "tensorsolve", "cholesky", "solve_triangular", "eigvalsh", "matrix_exp"]


def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError("%s(): argument '%s' must be a Tensor, not %s" % (op, what, type(x).__name__))
    _live(x)
    return x


def _float_input(x, op, dtype):
    if dtype is not None and dtypes.checked(dtype, op) is not dtypes.float32:
        raise TypeError("%s: dtype %r is not supported (aicraft computes norms in float32)" % (op, dtype))
    if _live(x).dtype != 0:
        raise TypeError("%s: expected a floating point input, got %s" % (op, x.dtype))
    return x


def _dims(dim, ndim, op):
    if dim is None:
        return None
    dims = list(dim) if isinstance(dim, (tuple, list)) else [dim]
    out = []
    for d in dims:
        d = _as_dim(d)
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError("%s: dim %d is out of range for a %d-d tensor" % (op, d, ndim))
        out.append(d % max(ndim, 1))
    if len(set(out)) != len(out):
        raise RuntimeError("%s: dim %s has repeated dims" % (op, dim))
    return out if ndim else None


def _safe_root(s, p):
    """s ** (1 / p) with a zero gradient where s == 0 (a zero vector's norm)."""
    zero = s == 0
    safe = s.masked_fill(zero, 1.0)
    root = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return root.masked_fill(zero, 0.0)


def _vector_norm(x, ord, dims, keepdim):
    """x's vector norm of order ord over dims (None: all) on a float32 x."""
    if isinstance(ord, str) or _scalar(ord) is None:
        raise ValueError("vector_norm: ord must be a number, not %r" % (ord,))
    ord = float(ord)
    if x.ndim == 0:
        dims = None
    reduce_all = dims is None

    def total(t, op):
        if reduce_all:
            out = getattr(t, op)()
            return out.reshape([1] * x.ndim) if keepdim else out
        return getattr(t, op)(dims, keepdim)
    if x.numel() == 0 and (ord < 0 or math.isinf(ord)):
        empty = reduce_all or any(x.shape[d] == 0 for d in dims)
        if empty:
            raise RuntimeError("linalg.vector_norm: cannot compute the %s norm on an empty tensor "
                               "because the operation does not have an identity" % ord)
    if ord == 2:
        return _safe_root(total(x * x, "sum"), 2)
    if ord == 1:
        return total(x.abs(), "sum")
    if ord == math.inf:
        return total(x.abs(), "amax")
    if ord == -math.inf:
        return total(x.abs(), "amin")
    if ord == 0:
        return total((x != 0).float() + x * 0.0, "sum")
    ax = x.abs()
    if ord < 1:     # |x| ** ord has an infinite slope at 0: the subgradient there is 0
        zero = ax == 0
        powered = (ax.masked_fill(zero, 1.0) ** ord).masked_fill(zero, 0.0 if ord > 0 else math.inf)
    else:
        powered = ax ** ord
    if ord > 0:
        return _safe_root(total(powered, "sum"), ord)
    return total(powered, "sum") ** (1.0 / ord)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The vector norm of order ord (any number, inf, -inf; 0 counts the nonzeros) over dim
    (an int, a tuple, or None for all elements)."""
    x = _float_input(_tensor(x, "linalg.vector_norm"), "linalg.vector_norm", dtype)
    if out is not None:
        raise NotImplementedError("linalg.vector_norm: out= is not supported")
    return _vector_norm(x, ord, _dims(dim, x.ndim, "linalg.vector_norm"), keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """The matrix norm over the two dims in dim: 'fro', 1, -1 (max / min column sum of
    |A|), inf, -inf (row sums), 'nuc', 2, -2 (sum, largest, smallest singular value)."""
    A = _float_input(_tensor(A, "linalg.matrix_norm"), "linalg.matrix_norm", dtype)
    if A.ndim < 2:
        raise ShapeError("linalg.matrix_norm: the input must have at least 2 dims, got %s" % (A.shape,))
    dims = _dims(dim, A.ndim, "linalg.matrix_norm")
    if dims is None or len(dims) != 2:
        raise ValueError("linalg.matrix_norm: dim must be a pair of dims, got %r" % (dim,))
    if ord == "fro":
        return _vector_norm(A, 2, dims, keepdim)
    if ord in ("nuc", 2, -2):
        return _svd_norm(A, {"nuc": 0, 2: 1, -2: 2}[ord], dims, keepdim)
    if isinstance(ord, str) or _scalar(ord) is None or float(ord) not in (1.0, -1.0, math.inf, -math.inf):
        raise ValueError("linalg.matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, "
                         "not %r" % (ord,))
    ord = float(ord)
    row, col = dims
    summed, other = (row, col) if abs(ord) == 1 else (col, row)
    sums = A.abs().sum(summed, keepdim=True)
    out = sums.amax(other, keepdim=True) if ord > 0 else sums.amin(other, keepdim=True)
    return out if keepdim else out.squeeze(tuple(sorted(dims)))


def _svd_norm(A, kind, dims, keepdim):
    """The nuclear (kind 0), 2 (1) or -2 (2) norm over dims, from the singular values (C)."""
    from aicraft._wrapping import _wrap
    row, col = dims
    rest = [d for d in range(A.ndim) if d not in (row, col)]
    moved = A.permute(*(rest + [row, col])) if rest + [row, col] != list(range(A.ndim)) else A
    if moved.requires_grad and lib.ac_is_grad_enabled():
        _refuse_degenerate(moved, kind)
    p = lib.ac_svd_norm(_live(moved), kind)
    if not p:
        raise_error(moved)
    out = _wrap(p)
    if keepdim:
        for d in sorted(dims):
            out = out.unsqueeze(d)
    return out


def _refuse_degenerate(A, kind):
    """The gradient of these norms is not unique where the singular values it follows are
    (a zero one for 'nuc', a repeated largest or smallest for 2 and -2): PyTorch's is then
    whatever basis its SVD returns. aicraft refuses rather than give a different one."""
    import numpy as np
    from aicraft.autograd import no_grad
    with no_grad():
        s = svdvals(A).numpy()
    if s.size == 0:
        return
    s = s.reshape(-1, s.shape[-1])
    top = np.maximum(s[:, :1], np.finfo(np.float32).tiny)
    tol = 1e-5 * top
    if kind == 0:
        degenerate = (s <= tol).any()
    elif s.shape[1] < 2:
        degenerate = False
    elif kind == 1:
        degenerate = (np.abs(s[:, 0:1] - s[:, 1:2]) <= tol).any()
    else:
        degenerate = (np.abs(s[:, -1:] - s[:, -2:-1]) <= tol).any()
    if degenerate:
        raise NotImplementedError("matrix_norm: the gradient of the %s norm at a matrix with %s singular "
                                  "values is not unique; aicraft does not pick one"
                                  % (("nuclear", "2", "-2")[kind], "zero" if kind == 0 else "repeated"))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """torch.linalg.norm: a vector norm (dim an int, or A 1-d) or a matrix norm (dim a pair,
    or A 2-d); ord None: the 2-norm of the flattened input, or 'fro'."""
    A = _tensor(A, "linalg.norm")
    if dim is not None and not isinstance(dim, (tuple, list)):
        dim = (dim,)
    if dim is None:
        if ord is None:
            x = _float_input(A, "linalg.norm", dtype)
            return _vector_norm(x, 2, None, keepdim)
        if A.ndim == 1:
            return vector_norm(A, ord, None, keepdim, dtype=dtype)
        if A.ndim == 2:
            return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
        raise RuntimeError("linalg.norm: an input with ord and no dim must be 1-d or 2-d, got %s" % (A.shape,))
    if len(dim) == 1:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    raise RuntimeError("linalg.norm: dim must be an int or a pair of ints, got %r" % (dim,))


def cross(input, other, *, dim=-1, out=None):
    """The cross product of 3-vectors along dim (default the last)."""
    return _cross(input, other, dim)


def matmul(input, other, *, out=None):
    return _tensor(input, "linalg.matmul").matmul(other)


def vecdot(x, y, *, dim=-1, out=None):
    """sum(x * y) along dim, broadcasting."""
    return (_tensor(x, "linalg.vecdot") * _tensor(y, "linalg.vecdot", "y")).sum(dim)


# ---- determinants, inverses, solves ------------------------------------------------

def _square(A, op):
    A = _tensor(A, op, "A")
    if _live(A).dtype != 0:
        raise TypeError("%s: expected a float32 input, got %s" % (op, A.dtype))
    return A


def det(A, *, out=None):
    """The determinants of square matrices (..., n, n), differentiable (also where singular)."""
    A = _square(A, "linalg.det")
    p = lib.ac_det(_live(A))
    if not p:
        raise_error(A)
    from aicraft._wrapping import _wrap
    return _wrap(p)


def inv(A, *, out=None):
    """The inverses of square matrices (..., n, n); ValueError for a singular one."""
    A = _square(A, "linalg.inv")
    p = lib.ac_inv(_live(A))
    if not p:
        raise_error(A)
    from aicraft._wrapping import _wrap
    return _wrap(p)


def slogdet(A, *, out=None):
    """(sign, log|det|) of square matrices, as a namedtuple."""
    from collections import namedtuple
    d = det(A)
    sign = (d > 0).float() - (d < 0).float()
    return namedtuple("slogdet", ["sign", "logabsdet"])(sign, d.abs().log())


def logdet(A):
    """log(det(A)): NaN where det < 0, -inf where 0 (torch.logdet)."""
    return det(A).log()


def solve(A, B, *, left=True, out=None):
    """X with A X = B (left) or X A = B, A (..., n, n), B (..., n, k) or a vector (..., n);
    batch dims broadcast. Computed as inv(A) @ B."""
    A = _square(A, "linalg.solve")
    B = _tensor(B, "linalg.solve", "B")
    if _live(B).dtype != 0:
        raise TypeError("linalg.solve: expected a float32 B, got %s" % B.dtype)
    n = A.shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if not left:
        if vector:
            raise ShapeError("linalg.solve: left=False needs B a matrix, got %s" % (B.shape,))
        return solve(A.transpose(-2, -1), B.transpose(-2, -1)).transpose(-2, -1)
    Ai = inv(A)
    if vector:
        if B.shape[-1] != n:
            raise ShapeError("linalg.solve: A %s and B %s do not fit" % (A.shape, B.shape))
        return Ai.matmul(B.unsqueeze(-1)).squeeze(-1)
    if B.ndim < 2 or B.shape[-2] != n:
        raise ShapeError("linalg.solve: A %s and B %s do not fit" % (A.shape, B.shape))
    return Ai.matmul(B)


def cholesky(A, *, upper=False, out=None):
    """The Cholesky factor of symmetric positive-definite matrices: lower L with A = L L^T
    (upper: L^T); ValueError when one is not positive-definite."""
    from aicraft._wrapping import _wrap
    A = _square(A, "linalg.cholesky")
    p = lib.ac_cholesky(_live(A))
    if not p:
        raise_error(A)
    L = _wrap(p)
    return L.transpose(-2, -1) if upper else L


def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues, ascending, of symmetric matrices, read from one triangle (UPLO 'L'
    or 'U'); differentiable."""
    from aicraft._wrapping import _wrap
    A = _square(A, "linalg.eigvalsh")
    if UPLO not in ("L", "U"):
        raise ValueError("linalg.eigvalsh: UPLO must be 'L' or 'U', got %r" % (UPLO,))
    if UPLO == "U":
        A = A.transpose(-2, -1)
    p = lib.ac_eigvalsh(_live(A))
    if not p:
        raise_error(A)
    return _wrap(p)


def cholesky_inverse(L, upper=False, *, out=None):
    """The inverse of A from its Cholesky factor L (A = L L^T, or U^T U when upper)."""
    L = _square(L, "cholesky_inverse")
    Lt = L.transpose(-2, -1)
    return inv(Lt.matmul(L) if upper else L.matmul(Lt))


def cholesky_solve(B, L, upper=False, *, out=None):
    """X with A X = B, A given by its Cholesky factor L."""
    L = _square(L, "cholesky_solve")
    Lt = L.transpose(-2, -1)
    return solve(Lt.matmul(L) if upper else L.matmul(Lt), B)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """torch.triangular_solve: (X with op(A) X = b, a copy of A), op(A) = A^T if transpose."""
    from collections import namedtuple
    A = _square(A, "triangular_solve")
    T = A.transpose(-2, -1) if transpose else A
    x = solve_triangular(T, b, upper=upper != bool(transpose), unitriangular=unitriangular)
    return namedtuple("triangular_solve", ["solution", "cloned_coefficient"])(x, A.clone())


def matrix_exp(A):
    """exp(A) of square matrices (C, in double: scaling and squaring), differentiable."""
    from aicraft._wrapping import _wrap
    A = _square(A, "matrix_exp")
    p = lib.ac_matrix_exp(_live(A))
    if not p:
        raise_error(A)
    return _wrap(p)


def torch_cholesky(input, upper=False, *, out=None):
    """torch.cholesky: upper given positionally too."""
    return cholesky(input, upper=upper)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (left) or X A = B, A triangular: the other triangle of A is not read."""
    A = _square(A, "linalg.solve_triangular")
    B = _tensor(B, "linalg.solve_triangular", "B")
    import numpy as np
    from aicraft.creation import tensor
    n = A.shape[-1]
    mask = np.triu(np.ones((n, n), np.float32), 1 if unitriangular else 0) if upper else \
        np.tril(np.ones((n, n), np.float32), -1 if unitriangular else 0)
    T = A * tensor(mask)
    if unitriangular:
        T = T + tensor(np.eye(n, dtype=np.float32))
    return solve(T, B, left=left)


def svdvals(A, *, driver=None, out=None):
    """The singular values of A (..., m, n), largest first, differentiable (C, one-sided Jacobi)."""
    from aicraft._wrapping import _wrap
    A = _square_free(A, "linalg.svdvals")
    p = lib.ac_svdvals(_live(A))
    if not p:
        raise_error(A)
    return _wrap(p)


def _square_free(A, op):
    A = _tensor(A, op, "A")
    if _live(A).dtype != 0:
        raise TypeError("%s: expected a float32 input, got %s" % (op, A.dtype))
    if A.ndim < 2:
        raise ShapeError("%s: A must have at least 2 dims, got %s" % (op, A.shape))
    return A


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """The number of singular values above max(atol, rtol * the largest) (int64); rtol
    defaults to float32's eps times max(m, n) when neither is given."""
    A = _square_free(A, "linalg.matrix_rank")
    from aicraft.autograd import no_grad
    with no_grad():
        s = svdvals(A)
    if tol is not None:
        atol, rtol = tol, None
    if s.shape[-1] == 0:
        from aicraft.creation import zeros
        return zeros(list(s.shape[:-1]), dtype=dtypes.int64)
    from aicraft.creation import tensor
    from aicraft.indexing import where

    def batched(v):           # a number, or a tensor per matrix of the batch
        return v.float().unsqueeze(-1) if isinstance(v, Tensor) else tensor(float(v))
    default = 1.1920928955078125e-07 * max(A.shape[-2], A.shape[-1])
    if rtol is None:
        rtol = tensor(default) if atol is None else where(batched(atol) > 0, 0.0, default)
    else:
        rtol = batched(rtol)
    bound = s.amax(-1, keepdim=True) * rtol
    if atol is not None:
        bound = _maximum(bound, batched(atol) + bound * 0.0)
    return (s > bound).sum(-1)


def _maximum(a, b):
    from aicraft.indexing import where
    return where(a >= b, a, b)


def cond(A, p=None, *, out=None):
    """The condition number: largest / smallest singular value for p None or 2 (-2: the
    inverse), else matrix_norm(A, p) * matrix_norm(inv(A), p)."""
    A = _square_free(A, "linalg.cond")
    if p is None or p == 2 or p == -2:
        s = svdvals(A)
        big, small = s.amax(-1), s.amin(-1)
        return big / small if p != -2 else small / big
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def matrix_power(A, n, *, out=None):
    """A multiplied by itself n times (n < 0: inv(A)'s power; 0: the identity), batched."""
    from aicraft._args import _as_int
    A = _tensor(A, "linalg.matrix_power", "A")
    n = _as_int(n, "n")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError("linalg.matrix_power: A must be square matrices (..., n, n), got %s" % (A.shape,))
    if n == 0:      # the identity; A gets a zero gradient, as in PyTorch
        from aicraft.creation import eye, ones
        from aicraft.indexing import where
        identity = eye(A.shape[-1], dtype=A.dtype).expand(*A.shape)
        if not A.requires_grad or _live(A).dtype != 0:
            return identity
        return where(ones(A.shape, dtype=dtypes.bool), identity, A)
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:                      # binary powering: log2(n) products
        if n & 1:
            result = base if result is None else result.matmul(base)
        n >>= 1
        if n:
            base = base.matmul(base)
    return result


def vander(x, N=None):
    """The Vandermonde matrix (..., n, N) of x (..., n): columns x^0, x^1, ..., x^(N-1)
    (running products: exact for int64)."""
    from aicraft._args import _as_int
    from aicraft.creation import cat, ones
    x = _tensor(x, "linalg.vander", "x")
    if x.ndim < 1:
        x = x.reshape(1)
    N = x.shape[-1] if N is None else _as_int(N, "N")
    if N < 0:
        raise ValueError("linalg.vander: N must be non-negative, got %d" % N)
    if _live(x).dtype in (2, 3):
        x = x.long()
    first = ones(list(x.shape) + [1], dtype=x.dtype)
    if N <= 1:
        return first[..., :N]
    powers = cat([first, x.unsqueeze(-1).expand(*x.shape, N - 1)], -1)
    return powers.cumprod(-1)


def tensorinv(A, ind=2, *, out=None):
    """The inverse of A seen as a matrix of its first ind dims by the rest."""
    A = _tensor(A, "linalg.tensorinv", "A")
    rows, cols = list(A.shape[:ind]), list(A.shape[ind:])
    r = c = 1
    for d in rows:
        r *= d
    for d in cols:
        c *= d
    if ind <= 0 or r != c:
        raise ShapeError("linalg.tensorinv: A %s with ind=%d is not square (%d x %d)" % (A.shape, ind, r, c))
    return inv(A.reshape(r, c)).reshape(cols + rows)


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) = B."""
    A, B = _tensor(A, "linalg.tensorsolve", "A"), _tensor(B, "linalg.tensorsolve", "B")
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.permute(*([d for d in range(A.ndim) if d not in dims] + dims))
    rest = list(A.shape[B.ndim:])
    n = B.numel()
    return solve(A.reshape(n, -1), B.reshape(n)).reshape(rest)


# ---- the torch namespace's norms and distances ------------------------------------

def torch_norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm / Tensor.norm: p 'fro' (the 2-norm over dim) or a number (the vector
    p-norm over dim, an int or a tuple; None: all); 'nuc' is refused."""
    x = _float_input(_tensor(input, "norm"), "norm", dtype)
    if out is not None:
        raise NotImplementedError("norm: out= is not supported")
    if p is None:
        p = "fro"
    if p == "nuc":
        dims = _dims(dim, x.ndim, "norm") if dim is not None else [x.ndim - 2, x.ndim - 1]
        if x.ndim < 2 or len(dims) != 2:
            raise RuntimeError("norm: p='nuc' needs a matrix (2 dims), got %s and dim %r" % (x.shape, dim))
        return _svd_norm(x, 0, dims, keepdim)
    if isinstance(p, str):
        if p != "fro":
            raise ValueError("norm: p must be a number, 'fro' or 'nuc', not %r" % (p,))
        p = 2
    dims = _dims(dim, x.ndim, "norm")
    if dims == []:
        dims = None
    return _vector_norm(x, p, dims, keepdim)


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast)."""
    a, b = _tensor(input, "dist"), _tensor(other, "dist", "other")
    return _vector_norm(_float_input(a - b, "dist", None), p, None, False)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each of x2 (..., R, M):
    (..., P, R). For p = 2 with more than 25 rows (or compute_mode
    'use_mm_for_euclid_dist') it uses one matmul, as PyTorch does."""
    a, b = _tensor(x1, "cdist", "x1"), _tensor(x2, "cdist", "x2")
    for t, name in ((a, "x1"), (b, "x2")):
        _float_input(t, "cdist", None)
        if t.ndim < 2:
            raise ShapeError("cdist: %s must have at least 2 dims, got %s" % (name, t.shape))
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError("cdist: x1 %s and x2 %s must have the same last dim" % (a.shape, b.shape))
    if _scalar(p) is None or p < 0:
        raise ValueError("cdist: p must be a non-negative number, got %r" % (p,))
    modes = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueError("cdist: compute_mode must be one of %s, not %r" % (modes, compute_mode))
    rows, cols = a.shape[-2], b.shape[-2]
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or
                         (compute_mode == modes[0] and (rows > 25 or cols > 25)))
    if use_mm:
        return _euclid_by_matmul(a, b)
    diff = a.unsqueeze(-2) - b.unsqueeze(-3)                    # (..., P, R, M)
    return _vector_norm(diff, p, [diff.ndim - 1], False)


def _euclid_by_matmul(a, b):
    """sqrt(|a|^2 + |b|^2 - 2 a.b), clamped at 1e-30 before the root (as PyTorch's)."""
    from aicraft.creation import cat, ones
    na = (a * a).sum(-1, keepdim=True)
    nb = (b * b).sum(-1, keepdim=True)
    left = cat([a * -2.0, na, ones(list(na.shape))], -1)
    right = cat([b, ones(list(nb.shape)), nb], -1)
    d2 = left.matmul(right.transpose(-2, -1))
    return d2.clamp(min=1e-30).sqrt()


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input divided by its p-norm along dim, the norm at least eps (F.normalize)."""
    x = _float_input(_tensor(input, "normalize"), "normalize", None)
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported")
    dims = _dims(dim, x.ndim, "normalize")
    n = _vector_norm(x, p, dims, True)
    return x / n.clamp(min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 * x2) / (|x1| |x2|) along dim, broadcasting, each norm at least eps (the
    bound takes no part in the gradient, as in PyTorch)."""
    from aicraft.autograd import no_grad
    a, b = _tensor(x1, "cosine_similarity", "x1"), _tensor(x2, "cosine_similarity", "x2")
    a = a if _live(a).dtype == 0 else a.float()
    b = b if _live(b).dtype == 0 else b.float()
    shape = _broadcast_shape(a.shape, b.shape, "cosine_similarity")
    if list(a.shape) != shape:
        a = a.expand(*shape)
    if list(b.shape) != shape:
        b = b.expand(*shape)
    dims = _dims(dim, len(shape), "cosine_similarity")
    na, nb = _vector_norm(a, 2, dims, True), _vector_norm(b, 2, dims, True)
    with no_grad():
        ca, cb = na.detach().clamp(min=eps) - na.detach(), nb.detach().clamp(min=eps) - nb.detach()
    return ((a / (na + ca)) * (b / (nb + cb))).sum(dims if dims else None)


def _broadcast_shape(sa, sb, op):
    nd = max(len(sa), len(sb))
    sa, sb = [1] * (nd - len(sa)) + list(sa), [1] * (nd - len(sb)) + list(sb)
    out = []
    for x, y in zip(sa, sb):
        if x != y and x != 1 and y != 1:
            raise ShapeError("%s: shapes %s and %s do not broadcast" % (op, tuple(sa), tuple(sb)))
        out.append(max(x, y))
    return out


def pdist(input, p=2):
    """The p-norm distances between the rows of input (N, M), for each pair i < j in
    row-major order: N (N - 1) / 2 of them."""
    import numpy as np
    from aicraft.creation import tensor
    x = _float_input(_tensor(input, "pdist"), "pdist", None)
    if x.ndim != 2:
        raise ShapeError("pdist: input must be 2-d, got %s" % (x.shape,))
    if _scalar(p) is None or p < 0:
        raise ValueError("pdist: p must be a non-negative number, got %r" % (p,))
    i, j = np.triu_indices(x.shape[0], 1)
    diff = x.index_select(0, tensor(i.astype(np.int64))) - x.index_select(0, tensor(j.astype(np.int64)))
    return _vector_norm(diff, p, [1], False)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps along the last dim (F.pairwise_distance)."""
    a, b = _tensor(x1, "pairwise_distance", "x1"), _tensor(x2, "pairwise_distance", "x2")
    diff = a - b + eps
    diff = _float_input(diff, "pairwise_distance", None)
    if diff.ndim == 0:
        return diff.abs() if p != 0 else (diff != 0).float()
    return _vector_norm(diff, p, [diff.ndim - 1], keepdim)


def bind(cls):
    """Tensor's norm, det, inverse, cholesky, ... methods."""
    cls.norm = torch_norm
    cls.det, cls.inverse = det, inv
    cls.slogdet = slogdet
    cls.cholesky = lambda self, upper=False: cholesky(self, upper=upper)
    cls.cholesky_inverse = lambda self, upper=False: cholesky_inverse(self, upper)
    cls.cholesky_solve = lambda self, *args, **kwargs: cholesky_solve(_live(self) and self, *args, **kwargs)
    cls.triangular_solve = lambda self, *args, **kwargs: triangular_solve(_live(self) and self, *args, **kwargs)
    cls.matrix_exp = lambda self: matrix_exp(self)
    cls.logdet = lambda self: logdet(self)
