"""Indexing and ordering: advanced __getitem__, __setitem__, gather, index_select,
expand, narrow, split, chunk, sort, topk, argsort, cumsum, norm, log1p, mm, bmm,
t and the new_* factories. Values against NumPy float64, gradients against
central differences, and PyTorch parity (values, indices, gradients) where it is
installed; bad inputs raise IndexError, TypeError or ShapeError."""
import numpy as np
import pytest

import aicraft as ac
from conftest import check_gradients

rng = np.random.default_rng(5)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- __getitem__ ----------------------------------------------------------------

GET_CASES = [
    lambda ix: (slice(None), ix([2, 0, 2])),
    lambda ix: (ix([[1, -1], [0, 0]]),),
    lambda ix: (1, ix([2, 0])),
    lambda ix: (Ellipsis, ix([1])),
    lambda ix: (slice(1, None), None, ix([0, 2])),
    lambda ix: (ix(np.array([True, False])),),
    lambda ix: (slice(None), ix(np.array([[True, False, True, False]] * 3))),
]


@pytest.mark.parametrize("case", range(len(GET_CASES)))
def test_advanced_getitem_matches_numpy_and_its_gradient_scatter_adds(case):
    x = randn(2, 3, 4)
    make = GET_CASES[case]
    np_index = make(lambda v: np.asarray(v))
    ac_index = make(lambda v: ac.tensor(np.asarray(v)))
    out = check_gradients(lambda t: t[ac_index], lambda a: a[np_index], [x])
    np.testing.assert_array_equal(out.numpy(), x[np_index])


def test_lists_of_ints_index_like_tensors():
    x = ac.tensor(randn(5, 3))
    np.testing.assert_array_equal(x[[4, 0, 4]].numpy(), x.numpy()[[4, 0, 4]])
    np.testing.assert_array_equal(x[:, [2]].numpy(), x.numpy()[:, [2]])


def test_masks_pick_from_int_and_bool_tensors():
    t = ac.tensor([[1, 5], [7, 2]])
    assert t[t > 3].tolist() == [5, 7] and t[t > 3].dtype == ac.int64
    b = t > 3
    assert b[ac.tensor([1, 0])].tolist() == [[True, False], [False, True]]


def test_repeated_indices_accumulate_gradient():
    x = ac.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[ac.tensor([0, 0, 2, 0])].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0, 1.0])


def test_getitem_bad_indices():
    x = ac.zeros(3, 4)
    with pytest.raises(IndexError):
        x[ac.tensor([3])]
    with pytest.raises(IndexError):
        x[:, [-5]]
    with pytest.raises(IndexError):
        x[ac.tensor([0.0, 1.0])]              # float indices
    with pytest.raises(IndexError):
        x[ac.tensor([True, False])]           # mask of the wrong size
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 1], [1, 4]]
    with pytest.raises(IndexError, match="apart"):
        ac.zeros(2, 3, 4)[0, :, [1]]
    with pytest.raises(IndexError):
        x[True]


# ---- __setitem__ ----------------------------------------------------------------

def set_cases(ix):
    return [
        (1, 5.0),
        ((slice(None), slice(1, 3)), np.array([1.0, 2.0])),
        ((Ellipsis, 0), np.array([7.0, 8.0, 9.0])),
        ((slice(None), ix([0, 3])), np.array([[1.0], [2.0], [3.0]])),
        ((ix([2, -3]),), 4.0),
        ((1, ix([1, 2])), np.array([6.0, 7.0])),
        ((slice(0, 2), ix([0])), np.array([3.0])),
    ]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("case", range(7))
def test_setitem_writes_in_place_for_every_dtype(dtype, case):
    base = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    np_index, np_value = set_cases(lambda v: np.asarray(v))[case]
    ac_index, _ = set_cases(lambda v: ac.tensor(np.asarray(v)))[case]
    t = ac.tensor(base)
    value = ac.tensor(np_value) if isinstance(np_value, np.ndarray) else np_value
    t[ac_index] = value
    expected = base.copy()
    expected[np_index] = np_value
    assert t.dtype == getattr(ac, dtype)
    np.testing.assert_array_equal(t.numpy(), expected)


def test_setitem_with_a_mask():
    x = ac.tensor([[1.0, -2.0], [-3.0, 4.0]])
    x[x < 0] = 0.0
    np.testing.assert_array_equal(x.numpy(), [[1.0, 0.0], [0.0, 4.0]])
    x[x > 0] = ac.tensor([9.0, 8.0])
    np.testing.assert_array_equal(x.numpy(), [[9.0, 0.0], [0.0, 8.0]])


def test_setitem_refuses_grad_and_bad_values():
    w = ac.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="no_grad"):
        w[0] = 1.0
    with ac.no_grad():
        w[0] = 1.0
    assert w.tolist() == [1.0, 0.0, 0.0]
    x = ac.zeros(2, 3)
    with pytest.raises(ac.ShapeError):
        x[0] = ac.ones(2)
    with pytest.raises(ac.ShapeError):
        x[:, [0, 1]] = ac.ones(3)
    with pytest.raises(IndexError):
        x[[2]] = 1.0
    with pytest.raises(TypeError):
        x[0] = "a"
    np.testing.assert_array_equal(x.numpy(), np.zeros((2, 3)))


# ---- gather, index_select, expand ---------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_matches_take_along_axis(dim):
    x = randn(3, 4)
    size = (2, 4) if dim == 0 else (3, 2)
    index = rng.integers(0, x.shape[dim], size)
    out = check_gradients(lambda t: t.gather(dim, ac.tensor(index)),
                          lambda a: np.take_along_axis(a, index, dim), [x])
    np.testing.assert_array_equal(out.numpy(), np.take_along_axis(x, index, dim))
    np.testing.assert_array_equal(ac.gather(ac.tensor(x), dim, ac.tensor(index)).numpy(), out.numpy())


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_index_select_matches_take(dim):
    x = randn(2, 3, 4)
    index = np.array([1, 0, 1])
    out = check_gradients(lambda t: t.index_select(dim, ac.tensor(index)),
                          lambda a: np.take(a, index, dim), [x])
    np.testing.assert_array_equal(out.numpy(), np.take(x, index, dim))


def test_gather_and_index_select_bad_inputs():
    x = ac.zeros(3, 4)
    with pytest.raises(IndexError):
        x.gather(1, ac.tensor([[4]]))
    with pytest.raises(IndexError):
        x.index_select(0, ac.tensor([-1]))        # index_select takes no negatives, as PyTorch
    with pytest.raises(TypeError):
        x.gather(1, ac.tensor([[1.0]]))
    with pytest.raises(TypeError):
        x.index_select(0, ac.tensor([True]))
    with pytest.raises(TypeError):
        x.gather(1, [[0]])
    with pytest.raises(ac.ShapeError):
        x.gather(1, ac.tensor([0]))
    with pytest.raises(ac.ShapeError):
        x.gather(1, ac.zeros(4, 1, dtype=ac.int64))
    with pytest.raises(ac.ShapeError):
        x.index_select(0, ac.zeros(2, 2, dtype=ac.int64))
    with pytest.raises(IndexError):
        x.gather(2, ac.zeros(3, 4, dtype=ac.int64))


def test_expand_broadcasts_and_sums_its_gradient():
    x = randn(3, 1)
    out = check_gradients(lambda t: t.expand(2, -1, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), [x])
    assert out.shape == (2, 3, 4)
    assert ac.tensor(x).expand_as(ac.zeros(3, 5)).shape == (3, 5)
    assert ac.tensor([1, 2]).expand(2, 2).tolist() == [[1, 2], [1, 2]]
    with pytest.raises(ac.ShapeError):
        ac.tensor(x).expand(2, 1)
    with pytest.raises(ac.ShapeError):
        ac.tensor(x).expand(-1, 3, 1)
    with pytest.raises(ac.ShapeError):
        ac.tensor(x).expand(1)


# ---- views and pieces -----------------------------------------------------------

def test_narrow_split_chunk_view_as_t_contiguous():
    x = randn(4, 6)
    t = ac.tensor(x)
    np.testing.assert_array_equal(t.narrow(1, -4, 3).numpy(), x[:, 2:5])
    np.testing.assert_array_equal(ac.narrow(t, 0, 1, 2).numpy(), x[1:3])
    assert [p.shape for p in t.split(4, 1)] == [(4, 4), (4, 2)]
    assert [p.shape for p in ac.split(t, [1, 3], 0)] == [(1, 6), (3, 6)]
    assert [p.shape for p in t.chunk(4, 1)] == [(4, 2), (4, 2), (4, 2)]   # as PyTorch: 3 pieces
    np.testing.assert_array_equal(np.concatenate([p.numpy() for p in ac.chunk(t, 3, 0)]), x)
    assert t.view_as(ac.zeros(24)).shape == (24,)
    np.testing.assert_array_equal(t.t().numpy(), x.T)
    assert t.contiguous() is t
    for bad, error in [(lambda: t.narrow(1, 7, 1), IndexError), (lambda: t.narrow(1, 4, 3), ValueError),
                       (lambda: t.split([1, 2], 0), ac.ShapeError), (lambda: t.chunk(0), ValueError),
                       (lambda: ac.zeros(2, 2, 2).t(), ac.ShapeError), (lambda: t.narrow(2, 0, 1), IndexError)]:
        with pytest.raises(error):
            bad()


def test_split_pieces_carry_gradient():
    x = randn(5, 2)
    check_gradients(lambda t: t.split(2)[2] * 3.0 + t.chunk(2)[0].sum(), lambda a: a[4:] * 3.0 + a[:3].sum(), [x])


def test_new_factories_follow_self():
    t = ac.tensor([1, 2])
    z = t.new_zeros(2, 3)
    assert z.dtype == ac.int64 and z.shape == (2, 3)
    assert t.new_ones((2,), dtype=ac.float32).tolist() == [1.0, 1.0]
    assert t.new_full((2,), 7).tolist() == [7, 7]
    assert ac.zeros(1).new_tensor([1, 2]).dtype == ac.float32
    with pytest.raises(TypeError):
        t.new_zeros(2, dtype=ac.float64)


# ---- mm, bmm, norm, log1p, cumsum -------------------------------------------------

def test_mm_and_bmm_check_shapes_as_pytorch():
    a, b = randn(2, 3), randn(3, 4)
    np.testing.assert_allclose(ac.mm(ac.tensor(a), ac.tensor(b)).numpy(), a @ b, rtol=1e-5, atol=1e-6)
    c, d = randn(2, 2, 3), randn(2, 3, 4)
    np.testing.assert_allclose(ac.tensor(c).bmm(ac.tensor(d)).numpy(), c @ d, rtol=1e-5, atol=1e-6)
    with pytest.raises(ac.ShapeError):
        ac.tensor(a).mm(ac.tensor(randn(3)))
    with pytest.raises(ac.ShapeError):
        ac.tensor(a).mm(ac.tensor(a))
    with pytest.raises(ac.ShapeError):
        ac.bmm(ac.tensor(c), ac.tensor(randn(1, 3, 4)))
    with pytest.raises(TypeError):
        ac.tensor(a).mm(b)


@pytest.mark.parametrize("p,np_ord", [(2, 2), ("fro", 2), (1, 1), (float("inf"), np.inf),
                                      (3, 3)])
def test_norm_matches_numpy(p, np_ord):
    x = randn(3, 4) + 0.1

    def np_norm(a, dim=None):
        if dim is None:
            a = a.reshape(-1)
            dim = 0
        return np.linalg.norm(a, ord=np_ord, axis=dim)
    out = check_gradients(lambda t: t.norm(p, dim=1), lambda a: np_norm(a, 1), [x], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(out.numpy(), np_norm(x.astype(np.float64), 1), rtol=1e-5)
    np.testing.assert_allclose(ac.norm(ac.tensor(x), p).item(), np_norm(x.astype(np.float64)), rtol=1e-5)
    assert ac.tensor(x).norm(p, dim=0, keepdim=True).shape == (1, 4)
    np.testing.assert_allclose(ac.tensor(x).norm("nuc").item(), np.linalg.norm(x.astype(np.float64), "nuc"),
                               rtol=1e-5)


def test_log1p_is_exact_near_zero_and_has_its_gradient():
    x = rng.uniform(-0.9, 3.0, (3, 4)).astype(np.float32)
    out = check_gradients(ac.log1p, np.log1p, [x])
    np.testing.assert_allclose(out.numpy(), np.log1p(x.astype(np.float64)), rtol=1e-6, atol=1e-7)
    assert ac.tensor([1e-10]).log1p().item() == pytest.approx(1e-10, rel=1e-6)
    assert ac.log1p(ac.tensor([0, 1])).dtype == ac.float32       # promoted, as PyTorch
    with pytest.raises(TypeError):
        ac.log1p([0.5])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_matches_numpy(dim):
    x = randn(3, 4, 2)
    out = check_gradients(lambda t: t.cumsum(dim), lambda a: np.cumsum(a, dim), [x])
    np.testing.assert_allclose(out.numpy(), np.cumsum(x.astype(np.float64), dim), rtol=1e-5, atol=1e-6)
    mask = ac.tensor([True, False, True])
    assert mask.cumsum(0).tolist() == [1, 1, 2] and mask.cumsum(0).dtype == ac.int64
    with pytest.raises(IndexError):
        ac.cumsum(ac.tensor(x), 3)


# ---- sort, topk, argsort ---------------------------------------------------------

@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
def test_sort_is_stable_and_differentiable(descending, dim):
    x = rng.integers(0, 4, (5, 6)).astype(np.float32)     # many ties
    keys = -x if descending else x
    order = np.argsort(keys, axis=dim, kind="stable")
    values, indices = ac.tensor(x).sort(dim=dim, descending=descending)
    assert indices.dtype == ac.int64
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, dim))
    np.testing.assert_array_equal(ac.argsort(ac.tensor(x), dim, descending).numpy(), order)
    y = randn(5, 6)
    check_gradients(lambda t: t.sort(dim, descending)[0],
                    lambda a: np.take_along_axis(a, np.argsort(-a if descending else a, dim, kind="stable"), dim), [y])


@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_a_stable_sort(largest):
    x = rng.integers(0, 5, (4, 7)).astype(np.float32)
    order = np.argsort(-x if largest else x, axis=1, kind="stable")[:, :3]
    values, indices = ac.topk(ac.tensor(x), 3, largest=largest)
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, 1))
    y = randn(4, 7)
    check_gradients(lambda t: t.topk(2, dim=0, largest=largest).values,
                    lambda a: np.take_along_axis(a, np.argsort(-a if largest else a, 0, kind="stable")[:2], 0), [y])


def test_sort_puts_nan_last_and_keeps_int64_values():
    values, indices = ac.tensor([2.0, float("nan"), 1.0]).sort()
    assert indices.tolist() == [2, 0, 1]
    assert ac.tensor([3, 1, 2]).sort(descending=True).values.tolist() == [3, 2, 1]
    with pytest.raises(ValueError):
        ac.zeros(3).topk(4)
    with pytest.raises(IndexError):
        ac.zeros(3).sort(dim=1)


# ---- PyTorch parity -------------------------------------------------------------

def test_parity_with_pytorch():
    torch = pytest.importorskip("torch")
    x = randn(4, 5)
    idx = np.array([[0, 4, 1, 1, 3], [2, 2, 0, 1, 4]])
    mask = x > 0

    def run(lib, make):
        t = make(x)
        t.requires_grad_(True)
        outs = [t[make(mask)], t[:, make(np.array([3, -1]))], t.gather(1, make(idx[:, :2].copy())),
                t.index_select(0, make(np.array([3, 0]))), t.expand(2, 4, 5), t.cumsum(1),
                t.norm(), t.norm(1, dim=0), t.abs().log1p(),
                t.sort(dim=0, descending=True)[0], t.topk(2)[0], t.narrow(1, 1, 3), t.split(2)[1]]
        total = sum((o * (k + 1)).sum() for k, o in enumerate(outs))
        total.backward()
        extras = [t.sort(0, descending=True)[1], t.topk(2)[1], t.argsort(1)]
        return [o.detach().numpy() for o in outs], [e.numpy() for e in extras], t.grad.numpy()

    x = np.abs(x) * np.sign(x)              # no exact zeros: norm's gradient is defined
    a_out, a_idx, a_grad = run(ac, lambda v: ac.tensor(v))
    t_out, t_idx, t_grad = run(torch, lambda v: torch.tensor(v))
    for got, want in zip(a_out, t_out):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for got, want in zip(a_idx, t_idx):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(a_grad, t_grad, rtol=1e-4, atol=1e-4)
    # writes
    a, t = ac.tensor(x), torch.tensor(x)
    for target in (a, t):
        target[1] = 0.5
        target[target > 1] = -1.0
        target[:, [0, 2]] = 3.0
    np.testing.assert_array_equal(a.numpy(), t.numpy())
