"""Products (aicraft/products.py: einsum, tensordot, addmm, ...) and norms and distances
(aicraft/linalg.py) against PyTorch: values, shapes, gradients and bad inputs."""
import math

import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(1)


def floats(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ints(*shape, lo=-4, hi=5):
    return RNG.integers(lo, hi, shape).astype(np.int64)


def to_ac(x, requires_grad=False):
    t = ac.tensor(np.asarray(x))
    return t.requires_grad_(True) if requires_grad else t


def to_torch(x, requires_grad=False):
    t = torch.from_numpy(np.array(x))
    return t.requires_grad_(True) if requires_grad else t


def same(a, t, rtol=1e-4, atol=1e-5):
    tn, an = t.detach().numpy(), a.numpy()
    assert an.dtype == tn.dtype, (an.dtype, tn.dtype)
    assert an.shape == tn.shape, (an.shape, tn.shape)
    if tn.dtype.kind == "f":
        np.testing.assert_allclose(an, tn, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(an, tn)


def check(fn_ac, fn_torch, *arrays, grad=True, rtol=1e-4, atol=1e-5):
    """Values and the gradients of sum(out * w), w random, agree with torch's."""
    xa = [to_ac(a, grad) for a in arrays]
    xt = [to_torch(a, grad) for a in arrays]
    oa, ot = fn_ac(*xa), fn_torch(*xt)
    same(oa, ot, rtol, atol)
    if not grad:
        return
    w = RNG.standard_normal(tuple(ot.shape)).astype(np.float32)
    (oa * to_ac(w)).sum().backward()
    (ot * torch.from_numpy(w)).sum().backward()
    for a, t in zip(xa, xt):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


# ---- einsum ----------------------------------------------------------------------------

EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iji->j", [(3, 2, 3)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ba,ca", [(3, 4), (5, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ij,...jk", [(3, 4), (2, 4, 2)]),
    ("b...,b...->b", [(3, 2, 2), (3, 2, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ijk,jl,kl->il", [(2, 3, 4), (3, 5), (4, 5)]),
    ("i,i,i->i", [(4,), (4,), (4,)]),
    ("ij,ij->ij", [(3, 4), (1, 4)]),
    ("ij,kj->ik", [(3, 1), (2, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("...", [(2, 3)]),
    ("i...->...", [(3, 2, 2)]),
    ("ab, bc -> ac", [(2, 3), (3, 2)]),
    ("ij,jk->ik", [(0, 4), (4, 5)]),
    ("ij,jk->ik", [(3, 0), (0, 5)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUMS)
def test_einsum_matches_torch(equation, shapes):
    arrays = [floats(*s) for s in shapes]
    check(lambda *xs: ac.einsum(equation, *xs), lambda *xs: torch.einsum(equation, *xs), *arrays,
          grad=all(a.size for a in arrays))


def test_einsum_operands_then_equation():
    a, b = floats(3, 4), floats(4, 5)
    same(ac.einsum([to_ac(a), to_ac(b)], "ij,jk"), torch.einsum("ij,jk", to_torch(a), to_torch(b)))


def test_einsum_list_and_sublist_forms():
    a, b = floats(3, 4), floats(4, 5)
    same(ac.einsum("ij,jk->ik", [to_ac(a), to_ac(b)]), torch.einsum("ij,jk->ik", [to_torch(a), to_torch(b)]))
    same(ac.einsum(to_ac(a), [0, 1], to_ac(b), [1, 2], [0, 2]),
         torch.einsum(to_torch(a), [0, 1], to_torch(b), [1, 2], [0, 2]))


def test_einsum_bad_inputs():
    a, b = to_ac(floats(3, 4)), to_ac(floats(5, 6))
    with pytest.raises(ValueError):
        ac.einsum("ij,jk->ik", a)
    with pytest.raises(ValueError):
        ac.einsum("ijk,jk->ik", a, b)
    with pytest.raises(ValueError):
        ac.einsum("ij,jk->iz", a, b)
    with pytest.raises(ac.ShapeError):
        ac.einsum("ij,jk->ik", a, b)
    with pytest.raises(ValueError):
        ac.einsum("i1->i", a)
    with pytest.raises(ac.ShapeError):
        ac.einsum("ii->i", a)


def test_einsum_on_int64_does_not_go_through_float32():
    a = np.array([[2 ** 40 + 1, 1]], np.int64)
    try:
        out = ac.einsum("ij->i", to_ac(a))
    except TypeError:
        return
    same(out, torch.einsum("ij->i", to_torch(a)))


# ---- products ------------------------------------------------------------------------

@pytest.mark.parametrize("name,shapes,kwargs", [
    ("dot", [(5,), (5,)], {}), ("vdot", [(4,), (4,)], {}), ("inner", [(2, 3), (4, 3)], {}),
    ("inner", [(3,), (3,)], {}), ("inner", [(), (2, 3)], {}), ("outer", [(3,), (4,)], {}),
    ("ger", [(3,), (2,)], {}), ("mv", [(3, 4), (4,)], {}), ("kron", [(2, 3), (3, 2)], {}),
    ("kron", [(2,), (2, 3)], {}), ("kron", [(2, 1, 2), (3, 2)], {}),
    ("addmm", [(3, 5), (3, 4), (4, 5)], {}), ("addmm", [(5,), (3, 4), (4, 5)], {"beta": 0.5, "alpha": 2.0}),
    ("addmv", [(3,), (3, 4), (4,)], {"beta": 2.0}), ("addr", [(3, 4), (3,), (4,)], {"alpha": -1.0}),
    ("baddbmm", [(2, 3, 5), (2, 3, 4), (2, 4, 5)], {"beta": 0.5}), ("baddbmm", [(3, 5), (2, 3, 4), (2, 4, 5)], {}),
    ("addbmm", [(3, 5), (2, 3, 4), (2, 4, 5)], {"alpha": 0.5}),
    ("tensordot", [(2, 3, 4), (3, 4, 5)], {"dims": 2}), ("tensordot", [(2, 3, 4), (4, 3, 5)], {"dims": ([1, 2], [1, 0])}),
    ("tensordot", [(2, 3), (4, 5)], {"dims": 0}), ("tensordot", [(1, 1, 1), (2, 1, 2)], {"dims": ([0, 1], [2, 0])}), ("cross", [(4, 3), (4, 3)], {"dim": 1}),
    ("cross", [(1, 3, 2), (4, 3, 2)], {"dim": -2}), ("trace", [(3, 4)], {}), ("trace", [(4, 2)], {}),
])
def test_products_match_torch(name, shapes, kwargs):
    arrays = [floats(*s) for s in shapes]
    check(lambda *xs: getattr(ac, name)(*xs, **kwargs), lambda *xs: getattr(torch, name)(*xs, **kwargs), *arrays)
    if name not in ("tensordot",):
        check(lambda x, *xs: getattr(x, name)(*xs, **kwargs), lambda x, *xs: getattr(x, name)(*xs, **kwargs),
              *arrays)


def test_addmm_beta_zero_ignores_nan_input():
    inp = np.full((3, 5), np.nan, np.float32)
    a, b = floats(3, 4), floats(4, 5)
    check(lambda i, x, y: ac.addmm(i, x, y, beta=0), lambda i, x, y: torch.addmm(i, x, y, beta=0), inp, a, b)


@pytest.mark.parametrize("shapes", [[(3, 4), (4, 5)], [(2, 3), (3, 6), (6, 2), (2, 4)], [(4,), (4, 3), (3, 2)],
                                    [(3, 4), (4, 2), (2,)], [(4,), (4, 2), (2,)]])
def test_multi_dot_and_chain_matmul(shapes):
    arrays = [floats(*s) for s in shapes]
    check(lambda *xs: ac.linalg.multi_dot(list(xs)), lambda *xs: torch.linalg.multi_dot(list(xs)), *arrays)
    if all(len(s) == 2 for s in shapes):
        check(lambda *xs: ac.chain_matmul(*xs), lambda *xs: torch.linalg.multi_dot(list(xs)), *arrays)


def test_linalg_cross_and_torch_cross_default_dim():
    a, b = floats(3, 5), floats(3, 5)
    check(lambda x, y: ac.cross(x, y), lambda x, y: torch.cross(x, y, dim=0), a, b)
    c, d = floats(5, 3), floats(1, 3)
    check(lambda x, y: ac.linalg.cross(x, y), lambda x, y: torch.linalg.cross(x, y), c, d)
    with pytest.raises(ac.ShapeError):
        ac.linalg.cross(to_ac(floats(3, 4)), to_ac(floats(3, 4)))
    with pytest.raises(ac.ShapeError):
        ac.cross(to_ac(floats(3)), to_ac(floats(2, 3)))


def test_integer_products_are_exact_or_refused():
    a = np.array([2 ** 40, 3], np.int64)
    b = np.array([5, 7], np.int64)
    same(ac.outer(to_ac(a), to_ac(b)), torch.outer(to_torch(a), to_torch(b)))
    same(ac.kron(to_ac(a), to_ac(b)), torch.kron(to_torch(a), to_torch(b)))
    same(ac.trace(to_ac(np.arange(9).reshape(3, 3))), torch.trace(torch.arange(9).reshape(3, 3)))
    try:
        out = ac.dot(to_ac(a), to_ac(b))
    except TypeError:
        return
    same(out, torch.dot(to_torch(a), to_torch(b)))


def test_product_bad_inputs():
    with pytest.raises(ac.ShapeError):
        ac.dot(to_ac(floats(3)), to_ac(floats(4)))
    with pytest.raises(ac.ShapeError):
        ac.mv(to_ac(floats(3)), to_ac(floats(3)))
    with pytest.raises(TypeError):
        ac.dot(to_ac(floats(3)), to_ac(np.arange(3)))
    with pytest.raises(ac.ShapeError):
        ac.addmm(to_ac(floats(4, 5)), to_ac(floats(3, 4)), to_ac(floats(4, 5)))
    with pytest.raises(ac.ShapeError):
        ac.tensordot(to_ac(floats(2, 3)), to_ac(floats(2, 3)), 1)
    with pytest.raises(ValueError):
        ac.linalg.multi_dot([to_ac(floats(3, 3))])


# ---- norms -----------------------------------------------------------------------------

@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, math.inf, -math.inf, 0, -1, -2.5])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (0, True), ((0, 2), False), (-1, True)])
def test_vector_norm_matches_torch(ord, dim, keepdim):
    x = floats(3, 4, 2)
    check(lambda a: ac.linalg.vector_norm(a, ord, dim, keepdim),
          lambda t: torch.linalg.vector_norm(t, ord, dim, keepdim), x, grad=ord not in (0,))


@pytest.mark.parametrize("ord", [0.5, -0.5, -1, 1, 2, 3, math.inf])
def test_vector_norm_subgradient_at_zero(ord):
    x = np.zeros((2, 4), np.float32)
    x[1, :2] = floats(2)
    check(lambda a: ac.linalg.vector_norm(a, ord, 1), lambda t: torch.linalg.vector_norm(t, ord, 1), x)


def test_bool_products_are_logical():
    a, b = ints(4) > 0, ints(3) > 0
    same(ac.outer(to_ac(a), to_ac(b)), torch.outer(to_torch(a), to_torch(b)))
    same(ac.kron(to_ac(a), to_ac(b)), torch.kron(to_torch(a), to_torch(b)))
    m = ints(4, 3) > 0
    same(ac.addr(to_ac(m), to_ac(a), to_ac(b)), torch.addr(to_torch(m), to_torch(a), to_torch(b)))


def test_two_norm_gradient_at_zero_is_zero():
    x = np.zeros((2, 3), np.float32)
    x[1] = floats(3)
    check(lambda a: ac.linalg.vector_norm(a, dim=1), lambda t: torch.linalg.vector_norm(t, dim=1), x)
    check(lambda a: F.normalize(a, dim=1), lambda t: TF.normalize(t, dim=1), x)


@pytest.mark.parametrize("ord", ["fro", 1, -1, math.inf, -math.inf])
@pytest.mark.parametrize("dim", [(-2, -1), (0, 2), (2, 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm_matches_torch(ord, dim, keepdim):
    x = floats(3, 4, 5)
    check(lambda a: ac.linalg.matrix_norm(a, ord, dim, keepdim),
          lambda t: torch.linalg.matrix_norm(t, ord, dim, keepdim), x)


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
@pytest.mark.parametrize("shape,dim", [((3, 3), (-2, -1)), ((2, 4, 3), (-2, -1)), ((3, 5, 2), (0, 2)),
                                       ((2, 3, 6), (2, 1))])
def test_matrix_norms_from_singular_values(ord, shape, dim):
    x = floats(*shape)
    check(lambda a: ac.linalg.matrix_norm(a, ord, dim), lambda t: torch.linalg.matrix_norm(t, ord, dim), x,
          rtol=1e-3, atol=1e-4)
    check(lambda a: ac.linalg.matrix_norm(a, ord, dim, True), lambda t: torch.linalg.matrix_norm(t, ord, dim, True),
          x, grad=False)
    if ord == "nuc" and len(shape) == 2:
        check(lambda a: ac.norm(a, "nuc"), lambda t: torch.norm(t, "nuc"), x, rtol=1e-3, atol=1e-4)
        check(lambda a: ac.linalg.norm(a, "nuc"), lambda t: torch.linalg.norm(t, "nuc"), x, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("ord,dim", [(None, None), (None, 1), (None, (0, 1)), (2, None), ("fro", None),
                                     (1, None), (math.inf, (1, 0)), (3, 0)])
def test_linalg_norm(ord, dim):
    x = floats(3, 4)
    check(lambda a: ac.linalg.norm(a, ord, dim), lambda t: torch.linalg.norm(t, ord, dim), x)
    v = floats(5)
    if ord not in ("fro",) and not isinstance(dim, tuple):
        check(lambda a: ac.linalg.norm(a, ord), lambda t: torch.linalg.norm(t, ord), v)


@pytest.mark.parametrize("p,dim,keepdim", [("fro", None, False), (2, 1, False), (1, 0, True), (3, (0, 1), False),
                                           (math.inf, None, False), ("fro", (0, 1), True), (0.5, -1, False)])
def test_torch_norm_and_tensor_norm(p, dim, keepdim):
    x = floats(3, 4)
    check(lambda a: ac.norm(a, p, dim, keepdim), lambda t: torch.norm(t, p, dim, keepdim), x)
    check(lambda a: a.norm(p, dim, keepdim), lambda t: t.norm(p, dim, keepdim), x)


def test_norms_refuse_integer_inputs():
    i = to_ac(np.arange(6))
    with pytest.raises(TypeError):
        ac.linalg.vector_norm(i)
    with pytest.raises(TypeError):
        ac.norm(i)


@pytest.mark.parametrize("p", [2, 1, 0, math.inf, 3.5])
def test_dist(p):
    a, b = floats(3, 4), floats(4)
    check(lambda x, y: ac.dist(x, y, p), lambda x, y: torch.dist(x, y, p), a, b, grad=p != 0)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, math.inf, 3.0])
@pytest.mark.parametrize("shapes", [[(4, 3), (5, 3)], [(2, 4, 3), (2, 5, 3)], [(2, 4, 3), (1, 5, 3)],
                                    [(30, 3), (6, 3)]])
def test_cdist(p, shapes):
    a, b = floats(*shapes[0]), floats(*shapes[1])
    check(lambda x, y: ac.cdist(x, y, p), lambda x, y: torch.cdist(x, y, p), a, b, grad=p != 0, rtol=1e-3,
          atol=1e-4)


def test_cdist_gradient_at_zero_distance():
    a = floats(3, 2)
    check(lambda x, y: ac.cdist(x, y), lambda x, y: torch.cdist(x, y), a, a.copy())


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1)])
def test_normalize(p, dim):
    x = floats(3, 4)
    check(lambda a: F.normalize(a, p, dim), lambda t: TF.normalize(t, p, dim), x)


@pytest.mark.parametrize("shapes,dim", [([(3, 4), (3, 4)], 1), ([(3, 4), (1, 4)], 1), ([(2, 3, 4), (2, 3, 4)], 0),
                                        ([(5,), (5,)], 0)])
def test_cosine_similarity(shapes, dim):
    a, b = floats(*shapes[0]), floats(*shapes[1])
    check(lambda x, y: F.cosine_similarity(x, y, dim), lambda x, y: TF.cosine_similarity(x, y, dim), a, b)


def test_cosine_similarity_of_zero_vector():
    a, b = np.zeros((2, 3), np.float32), floats(2, 3)
    check(lambda x, y: F.cosine_similarity(x, y), lambda x, y: TF.cosine_similarity(x, y), a, b)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance(p, keepdim):
    a, b = floats(4, 5), floats(4, 5)
    check(lambda x, y: F.pairwise_distance(x, y, p, keepdim=keepdim),
          lambda x, y: TF.pairwise_distance(x, y, p, keepdim=keepdim), a, b)
    c = floats(5)
    check(lambda x, y: F.pairwise_distance(x, y, p), lambda x, y: TF.pairwise_distance(x, y, p), a, c)


# ---- det, inv, solve ------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4, 4), (2, 1, 5, 5), (0, 3, 3), (2, 0, 0)])
def test_det_inv_match_torch(shape):
    x = floats(*shape) * 0.5 + 3 * np.eye(shape[-1], dtype=np.float32)   # well conditioned
    grad = RNG.random() >= 0 and 0 not in shape
    # aicraft factors in double, PyTorch in float32: agreement to PyTorch's rounding
    check(ac.linalg.det, torch.linalg.det, x, grad=grad, rtol=1e-3)
    check(ac.linalg.inv, torch.linalg.inv, x, grad=grad, rtol=1e-3)
    check(lambda a: a.det(), lambda t: t.det(), x, grad=grad, rtol=1e-3)
    check(ac.inverse, torch.inverse, x, grad=grad, rtol=1e-3)
    if 0 not in shape:
        check(lambda a: ac.linalg.slogdet(a).logabsdet, lambda t: torch.linalg.slogdet(t).logabsdet, x)
        same(ac.linalg.slogdet(to_ac(x)).sign, torch.linalg.slogdet(to_torch(x)).sign)


def test_det_gradient_of_exactly_singular_matrices_is_zero_as_torchs():
    x = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 5.0]],
                  [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]], np.float32)
    check(ac.linalg.det, torch.linalg.det, x)


@pytest.mark.parametrize("a_shape,b_shape,left", [((3, 3), (3, 2), True), ((3, 3), (3,), True),
                                                  ((2, 4, 4), (2, 4), True), ((2, 4, 4), (4, 3), True),
                                                  ((1, 3, 3), (2, 3, 1), True), ((3, 3), (2, 3), False)])
def test_solve_matches_torch(a_shape, b_shape, left):
    a = floats(*a_shape) + 3 * np.eye(a_shape[-1], dtype=np.float32)
    b = floats(*b_shape)
    check(lambda x, y: ac.linalg.solve(x, y, left=left), lambda x, y: torch.linalg.solve(x, y, left=left), a, b)


def test_linalg_bad_inputs():
    with pytest.raises(ac.ShapeError):
        ac.linalg.det(to_ac(floats(3, 4)))
    with pytest.raises(ac.ShapeError):
        ac.linalg.inv(to_ac(floats(3)))
    with pytest.raises(ValueError):
        ac.linalg.inv(ac.zeros(3, 3))
    with pytest.raises(TypeError):
        ac.linalg.det(ac.tensor([[1, 2], [3, 4]]))
    with pytest.raises(ac.ShapeError):
        ac.linalg.solve(to_ac(floats(3, 3)), to_ac(floats(4, 2)))
    same(ac.linalg.det(to_ac(np.eye(2, dtype=np.float32))), torch.linalg.det(torch.eye(2)))


# ---- svdvals, matrix_rank, cond, matrix_power, vander, tensorinv, tensorsolve, pdist ----

@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 5), (2, 3, 4)])
def test_svdvals_values_and_gradient(shape):
    x = floats(*shape)
    check(ac.linalg.svdvals, torch.linalg.svdvals, x, rtol=1e-3, atol=1e-4)


def test_matrix_rank_and_cond():
    a = floats(4, 2) @ floats(2, 5)            # rank 2
    same(ac.linalg.matrix_rank(to_ac(a)), torch.linalg.matrix_rank(to_torch(a)))
    same(ac.linalg.matrix_rank(to_ac(a), atol=1.0, rtol=0.0), torch.linalg.matrix_rank(to_torch(a), atol=1.0, rtol=0.0))
    b = floats(3, 3) + 2 * np.eye(3, dtype=np.float32)
    for p in (None, 2, -2, 1, "fro", math.inf):     # torch's own backward fails for the others
        check(lambda t: ac.linalg.cond(t, p), lambda t: torch.linalg.cond(t, p), b, rtol=1e-3, atol=1e-4,
              grad=p in (None, 2, -2))


@pytest.mark.parametrize("n", [0, 1, 2, 5, -1, -3])
def test_matrix_power(n):
    a = floats(2, 3, 3) * 0.5 + np.eye(3, dtype=np.float32)
    check(lambda t: ac.linalg.matrix_power(t, n), lambda t: torch.linalg.matrix_power(t, n), a, rtol=1e-3, atol=1e-4)


def test_vander_exact_for_int64_and_differentiable():
    x = np.array([2, 3, -5], np.int64)
    same(ac.linalg.vander(to_ac(x)), torch.linalg.vander(to_torch(x)))
    same(ac.linalg.vander(to_ac(x), N=20), torch.linalg.vander(to_torch(x), N=20))
    check(lambda t: ac.linalg.vander(t, N=4), lambda t: torch.linalg.vander(t, N=4), floats(2, 3))


def test_tensorinv_tensorsolve_pdist():
    a = floats(4, 6, 8, 3) * 0.1 + np.eye(24, dtype=np.float32).reshape(4, 6, 8, 3)
    check(lambda t: ac.linalg.tensorinv(t, 2), lambda t: torch.linalg.tensorinv(t, 2), a, rtol=1e-3, atol=1e-4)
    b = floats(4, 6)
    check(ac.linalg.tensorsolve, torch.linalg.tensorsolve, a, b, rtol=1e-3, atol=1e-4)
    x = floats(5, 3)
    for p in (2, 1, 0.5, math.inf):
        check(lambda t: F.pdist(t, p), lambda t: TF.pdist(t, p), x)


@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 3, 3)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_solve_triangular(shape, upper):
    m = floats(*shape)
    a = m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1], dtype=np.float32)
    # the gradient as PyTorch's: of the factor seen as a function of a symmetric input
    check(lambda t: ac.linalg.cholesky(t, upper=upper), lambda t: torch.linalg.cholesky(t, upper=upper), a,
          rtol=1e-3, atol=1e-4)
    check(lambda t: ac.cholesky(t, upper), lambda t: torch.linalg.cholesky(t, upper=upper), a, grad=False)
    b = floats(*shape[:-1], 2)
    for left in (True, False):
        bb = b if left else np.swapaxes(b, -1, -2)
        for unit in (False, True):
            check(lambda x, y: ac.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit),
                  lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit),
                  a, bb, rtol=1e-3, atol=1e-4)


def test_cholesky_refuses_what_is_not_positive_definite():
    with pytest.raises(ValueError):
        ac.linalg.cholesky(ac.tensor([[1.0, 2.0], [2.0, 1.0]]))


@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 3, 3)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigvalsh(shape, uplo):
    a = floats(*shape)        # only one triangle is read: the other is noise
    check(lambda t: ac.linalg.eigvalsh(t, uplo), lambda t: torch.linalg.eigvalsh(t, uplo), a, rtol=1e-3, atol=1e-4)


def test_norms_refuse_a_gradient_that_is_not_unique():
    rank_one = np.outer(floats(3), floats(3)).astype(np.float32)
    a = to_ac(rank_one, True)
    with pytest.raises(NotImplementedError):
        ac.linalg.matrix_norm(a, "nuc")
    with pytest.raises(NotImplementedError):
        ac.linalg.matrix_norm(to_ac(np.eye(3, dtype=np.float32), True), 2)
    with ac.no_grad():         # the value alone is fine
        same(ac.linalg.matrix_norm(a, "nuc"), torch.linalg.matrix_norm(torch.from_numpy(rank_one), "nuc"))


@pytest.mark.parametrize("shape,scale", [((1, 1), 1.0), ((3, 3), 0.3), ((2, 4, 4), 2.0), ((3, 3), 8.0)])
def test_matrix_exp(shape, scale):
    a = floats(*shape) * scale
    check(ac.matrix_exp, torch.matrix_exp, a, rtol=1e-4, atol=1e-4)
    check(ac.linalg.matrix_exp, torch.linalg.matrix_exp, a, grad=False, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inverse_solve_and_triangular_solve(upper):
    m = floats(3, 3)
    spd = m @ m.T + 3 * np.eye(3, dtype=np.float32)
    L = torch.linalg.cholesky(torch.from_numpy(spd), upper=upper).numpy()
    b = floats(3, 2)
    check(lambda t: ac.cholesky_inverse(t, upper), lambda t: torch.cholesky_inverse(t, upper), L, rtol=1e-3, atol=1e-4)
    check(lambda x, t: ac.cholesky_solve(x, t, upper), lambda x, t: torch.cholesky_solve(x, t, upper), b, L,
          rtol=1e-3, atol=1e-4)
    for transpose in (False, True):
        check(lambda x, t: ac.triangular_solve(x, t, upper, transpose).solution,
              lambda x, t: torch.triangular_solve(x, t, upper, transpose).solution, b, L, rtol=1e-3, atol=1e-4)
