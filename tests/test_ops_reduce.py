"""Reductions: sum, mean, max/min (all dims, sets of dims, and along one dim with
indices), var, std and argmax. Forward values against NumPy float64; gradients
against central differences of float64 NumPy code; bad input; determinism."""
import numpy as np
import pytest

import aicraft as ac
from conftest import check_gradients
from thread_counts import assert_same_for_thread_counts

rng = np.random.default_rng(2024)

DIMS = [None, 0, -1, 1, (0, 2), (2, 0), (0, 1, 2), (-1, -2)]


def distinct(shape):
    """float32 values with no ties, so max/min and their gradients are well defined."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.37 - n * 0.1).astype(np.float32)


def np_axis(dim):
    return dim if dim is None or isinstance(dim, int) else tuple(dim)


NP_REDUCE = {
    "sum": lambda x, dim, keep: np.sum(x, axis=np_axis(dim), keepdims=keep),
    "mean": lambda x, dim, keep: np.mean(x, axis=np_axis(dim), keepdims=keep),
    "amax": lambda x, dim, keep: np.max(x, axis=np_axis(dim), keepdims=keep),
    "amin": lambda x, dim, keep: np.min(x, axis=np_axis(dim), keepdims=keep),
    "var": lambda x, dim, keep: np.var(x, axis=np_axis(dim), keepdims=keep, ddof=1),
    "std": lambda x, dim, keep: np.std(x, axis=np_axis(dim), keepdims=keep, ddof=1),
}


def ac_reduce(name, t, dim, keep):
    return getattr(t, name)(dim=dim, keepdim=keep)


@pytest.mark.parametrize("name", sorted(NP_REDUCE))
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keep", [False, True])
def test_reduction_forward_matches_numpy(name, dim, keep):
    x = distinct((3, 4, 5))
    out = ac_reduce(name, ac.tensor(x), dim, keep)
    expected = NP_REDUCE[name](x.astype(np.float64), dim, keep)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(NP_REDUCE))
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keep", [False, True])
def test_reduction_gradients(name, dim, keep):
    np_fn = NP_REDUCE[name]
    check_gradients(lambda t: ac_reduce(name, t, dim, keep), lambda x: np_fn(x, dim, keep),
                    [distinct((3, 4, 5))], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("shape,dim", [((6,), 0), ((1, 5, 1), (0, 2)), ((2, 1, 3, 4), (1, 3)),
                                       ((300, 7), 0), ((7, 300), 1), ((5000,), None),
                                       ((3, 2100), 0), ((2, 3, 1500), (0, 1)), ((9000, 2), 0)])
def test_sum_and_var_on_awkward_shapes(shape, dim):
    x = rng.standard_normal(shape).astype(np.float32)
    t = ac.tensor(x)
    np.testing.assert_allclose(t.sum(dim).numpy(), np.sum(x.astype(np.float64), axis=dim),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(t.var(dim, correction=0).numpy(),
                               np.var(x.astype(np.float64), axis=dim), rtol=1e-5, atol=1e-6)


def test_numpy_axis_and_keepdims_spelling():
    x = distinct((2, 3, 4))
    t = ac.tensor(x)
    np.testing.assert_allclose(t.sum(axis=(0, 2), keepdims=True).numpy(),
                               np.sum(x, axis=(0, 2), keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(t.mean(axis=1).numpy(), np.mean(x, axis=1), rtol=1e-6)


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_and_std_take_a_correction(correction):
    x = distinct((4, 6))
    t = ac.tensor(x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(t.var(1, correction=correction).numpy(),
                               np.var(x64, axis=1, ddof=correction), rtol=1e-5)
    np.testing.assert_allclose(t.std(0, correction=correction).numpy(),
                               np.std(x64, axis=0, ddof=correction), rtol=1e-5)
    check_gradients(lambda a: a.std(dim=(0, 1), correction=correction),
                    lambda a: np.std(a, ddof=correction), [x], rtol=1e-3, atol=1e-5)


def test_var_of_a_tiny_spread_is_accurate():
    # a large mean with a small spread: a one-pass formula would lose every digit
    x = (10000.0 + np.arange(8) * 1e-2).astype(np.float32)
    np.testing.assert_allclose(ac.tensor(x).var().item(), np.var(x.astype(np.float64), ddof=1),
                               rtol=1e-4)


def test_std_of_constant_rows_has_zero_gradient_like_pytorch():
    x = ac.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    s = x.std(1)
    np.testing.assert_array_equal(s.numpy(), [0.0, 0.0])
    s.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))


def test_var_of_one_element_is_nan_like_pytorch():
    assert np.isnan(ac.tensor([3.0]).var().item())
    assert ac.tensor([3.0]).var(correction=0).item() == 0.0


def test_max_and_min_split_gradient_evenly_among_ties():
    x = ac.tensor([[1.0, 5.0, 5.0], [2.0, 2.0, 2.0]], requires_grad=True)
    x.amax(dim=1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-6)
    y = ac.tensor([4.0, -1.0, -1.0, 0.0], requires_grad=True)
    y.min().backward()
    np.testing.assert_allclose(y.grad.numpy(), [0, 0.5, 0.5, 0], rtol=1e-6)


@pytest.mark.parametrize("name,np_fn,np_arg", [("max", np.max, np.argmax), ("min", np.min, np.argmin)])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keep", [False, True])
def test_max_min_along_dim_give_values_and_indices(name, np_fn, np_arg, dim, keep):
    x = distinct((3, 4, 5))
    values, indices = getattr(ac.tensor(x), name)(dim, keepdim=keep)
    want_values = np_fn(x, axis=dim, keepdims=keep)
    want_indices = np.expand_dims(np_arg(x, axis=dim), dim) if keep else np_arg(x, axis=dim)
    np.testing.assert_array_equal(values.numpy(), want_values)
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    check_gradients(lambda t: getattr(t, name)(dim, keepdim=keep)[0],
                    lambda a: np_fn(a, axis=dim, keepdims=keep), [x])


@pytest.mark.parametrize("shape,dim", [((3, 2100), 0), ((2100, 3), 1), ((2, 1500, 2), 1)])
def test_max_and_argmax_on_wide_shapes(shape, dim):
    x = rng.standard_normal(shape).astype(np.float32)
    t = ac.tensor(x)
    values, indices = t.max(dim)
    np.testing.assert_array_equal(values.numpy(), np.max(x, axis=dim))
    np.testing.assert_array_equal(indices.numpy(), np.argmax(x, axis=dim))
    np.testing.assert_array_equal(t.amin(dim).numpy(), np.min(x, axis=dim))
    np.testing.assert_array_equal(t.argmax(dim).numpy(), np.argmax(x, axis=dim))


def test_max_along_dim_sends_gradient_to_the_first_extreme():
    x = ac.tensor([[3.0, 7.0, 7.0], [9.0, 9.0, 1.0]], requires_grad=True)
    values, indices = x.max(1)
    np.testing.assert_array_equal(indices.numpy(), [1, 0])
    values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [1, 0, 0]])


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keep", [False, True])
def test_argmax_matches_numpy(dim, keep):
    x = distinct((4, 6))
    got = ac.tensor(x).argmax(dim, keepdim=keep).numpy()
    want = np.argmax(x, axis=dim, keepdims=keep)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_argmax_takes_the_first_of_ties():
    np.testing.assert_array_equal(ac.tensor([[1.0, 4.0, 4.0], [2.0, 2.0, 0.0]]).argmax(1).numpy(),
                                  [1, 0])


def test_max_propagates_nan():
    x = ac.tensor([1.0, np.nan, 3.0])
    assert np.isnan(x.max().item())
    assert np.isnan(x.sum().item())
    values, indices = ac.tensor([[1.0, np.nan, 3.0]]).max(1)
    assert np.isnan(values.item()) and indices.item() == 1



@pytest.mark.parametrize("n", [7, 64, 65, 1000])
def test_max_and_argmax_along_long_rows_with_nan_inf_ties_and_zeros(n):
    """Rows longer than a SIMD block: the first NaN wins, then the first of equal maxima
    (and of a +0 and a -0), as NumPy and PyTorch; min alike."""
    rows = [rng.standard_normal(n).astype(np.float32) for _ in range(9)]
    rows[1][[0, n // 2]] = np.nan
    rows[2][[n - 1]] = np.nan
    rows[3][[n // 3, n - 1]] = rows[3].max() + 1.0   # a tie, the first wins
    rows[4][:] = -np.inf
    rows[5][[n // 2]] = np.inf
    rows[6][:] = 0.0
    rows[6][n // 2:] = -0.0
    rows[7][:] = -0.0
    rows[7][n - 1] = 0.0
    rows[8][[min(63, n - 1), min(64, n - 1)]] = np.nan
    x = np.stack(rows)
    t = ac.tensor(x)
    np.testing.assert_array_equal(t.argmax(1).numpy(), np.argmax(x, axis=1))
    np.testing.assert_array_equal(t.argmin(1).numpy(), np.argmin(x, axis=1))
    for got, want in ((t.max(1), x.max(axis=1)), (t.min(1), x.min(axis=1))):
        values, indices = got
        first = x[np.arange(len(x)), indices.numpy()]
        np.testing.assert_array_equal(values.numpy(), want)
        np.testing.assert_array_equal(np.signbit(values.numpy()), np.signbit(first))

def test_reductions_of_a_0d_tensor():
    x = ac.tensor(2.5)
    assert x.sum().item() == 2.5
    assert x.sum(0).item() == 2.5
    assert x.mean(-1, keepdim=True).shape == ()
    values, indices = x.max(0)
    assert values.item() == 2.5 and indices.item() == 0


def test_empty_reductions():
    x = ac.zeros(0, 3)
    np.testing.assert_array_equal(x.sum(0).numpy(), [0.0, 0.0, 0.0])
    assert x.sum(1).shape == (0,)
    assert np.isnan(x.mean().item())
    with pytest.raises(ac.ShapeError, match="^max"):
        x.amax(0)
    with pytest.raises(ac.ShapeError, match="^max"):
        x.max(0)


def test_big_sums_are_accurate_and_identical_for_any_thread_count():
    x = rng.standard_normal(1001 * 1999).astype(np.float32) + 1.0
    t = ac.tensor(x)
    first = assert_same_for_thread_counts(lambda: [
        t.sum().numpy(), t.mean(0).numpy(), t.reshape(1001, -1).sum(1).numpy(),
        t.reshape(-1, 1001).sum(0).numpy(), t.std().numpy(), t.amax().numpy()])
    np.testing.assert_allclose(first[0], np.sum(x, dtype=np.float64), rtol=1e-7)
    np.testing.assert_allclose(first[4], np.std(x.astype(np.float64), ddof=1), rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda t: t.sum(3),
    lambda t: t.mean((0, -3)),
    lambda t: t.amax((1, 1)),
    lambda t: t.var(-4),
    lambda t: t.max(5),
    lambda t: t.argmax(3),
    lambda t: t.std(3, correction=0),     # a negative correction is valid, as in PyTorch
])
def test_bad_dims_raise_and_name_the_op(call):
    t = ac.tensor(distinct((2, 3, 4)))
    with pytest.raises((ValueError, IndexError)) as info:
        call(t)
    assert str(info.value).split(":")[0] in ("sum", "mean", "max", "var", "argmax", "std")
    np.testing.assert_allclose(t.sum().item(), np.sum(t.numpy(), dtype=np.float64), rtol=1e-6)
