"""matmul with PyTorch's semantics: dot, matrix-vector, vector-matrix, matrix
products and batched products with broadcast batch dims. Forward values against
NumPy float64; gradients against central differences of float64 NumPy code."""
import numpy as np
import pytest

import aicraft as ac
from conftest import check_gradients

rng = np.random.default_rng(77)

SHAPE_PAIRS = [
    ((4,), (4,)),               # dot: a 0-d result
    ((3, 4), (4,)),             # matrix @ vector
    ((4,), (4, 5)),             # vector @ matrix
    ((3, 4), (4, 5)),
    ((1, 4), (4, 1)),
    ((2, 3, 4), (4, 5)),        # batch @ matrix (folds into one product)
    ((3, 4), (2, 4, 5)),        # matrix @ batch
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),  # both broadcast
    ((1, 3, 4), (2, 4, 5)),
    ((2, 3, 4), (4,)),          # batch @ vector
    ((4,), (2, 3, 4, 2)),       # vector @ batch
    ((2, 1, 2, 3), (1, 3, 3, 2)),
]


def data(shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape_a,shape_b", SHAPE_PAIRS)
def test_matmul_matches_numpy(shape_a, shape_b):
    a, b = data(shape_a), data(shape_b)
    out = ac.matmul(ac.tensor(a), ac.tensor(b))
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape_a,shape_b", SHAPE_PAIRS)
def test_matmul_gradients(shape_a, shape_b):
    check_gradients(lambda x, y: x @ y, np.matmul, [data(shape_a), data(shape_b)],
                    rtol=1e-4, atol=1e-4)


def test_gradient_flows_to_one_operand_only():
    a = ac.tensor(data((3, 4)), requires_grad=True)
    b = ac.tensor(data((2, 4, 5)))
    g = data((2, 3, 5))
    (a @ b).backward(ac.tensor(g))
    expected = sum(g[i].astype(np.float64) @ b.numpy()[i].T.astype(np.float64) for i in range(2))
    np.testing.assert_allclose(a.grad.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert b.grad is None


@pytest.mark.parametrize("n,k,m", [(130, 70, 90), (1, 257, 3), (67, 1, 33)])
def test_larger_products_and_their_gradients(n, k, m):
    a, b, g = data((n, k)), data((k, m)), data((n, m))
    ta, tb = ac.tensor(a, requires_grad=True), ac.tensor(b, requires_grad=True)
    out = ta @ tb
    a64, b64, g64 = a.astype(np.float64), b.astype(np.float64), g.astype(np.float64)
    np.testing.assert_allclose(out.numpy(), a64 @ b64, rtol=1e-4, atol=1e-4)
    out.backward(ac.tensor(g))
    # d(sum(g * (a @ b))) is g @ b.T for a and a.T @ g for b
    np.testing.assert_allclose(ta.grad.numpy(), g64 @ b64.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tb.grad.numpy(), a64.T @ g64, rtol=1e-4, atol=1e-4)


def test_many_small_batched_products():
    a, b = data((64, 5, 3)), data((64, 3, 4))
    out = ac.tensor(a) @ ac.tensor(b)
    np.testing.assert_allclose(out.numpy(), np.matmul(a.astype(np.float64), b), rtol=1e-5, atol=1e-5)


def test_empty_inner_dim_gives_zeros():
    out = ac.matmul(ac.zeros(3, 0), ac.zeros(0, 2))
    np.testing.assert_array_equal(out.numpy(), np.zeros((3, 2)))
    assert ac.matmul(ac.zeros(0, 4), ac.zeros(4, 2)).shape == (0, 2)


def test_matmul_accepts_numpy_operands():
    a, b = data((2, 3)), data((3, 2))
    np.testing.assert_allclose((ac.tensor(a) @ b).numpy(), a.astype(np.float64) @ b, rtol=1e-5)
    np.testing.assert_allclose((a @ ac.tensor(b)).numpy(), a.astype(np.float64) @ b, rtol=1e-5)


def test_misaligned_shapes_raise_shape_error_with_the_shapes():
    with pytest.raises(ac.ShapeError) as info:
        ac.tensor(np.zeros((3, 4), np.float32)) @ ac.tensor(np.zeros((5, 6), np.float32))
    assert str(info.value) == "matmul: shapes (3, 4) and (5, 6) are not aligned (4 != 5)"


@pytest.mark.parametrize("shape_a,shape_b", [((3,), (4,)), ((2, 3, 4), (3, 4, 5)),
                                             ((2, 3), (4, 3)), ((), (3,)), ((3,), ())])
def test_bad_shapes_raise_and_leave_the_library_usable(shape_a, shape_b):
    a, b = ac.zeros(*shape_a), ac.zeros(*shape_b)
    with pytest.raises(ac.ShapeError, match="^matmul: "):
        ac.matmul(a, b)
    x = data((2, 2))
    np.testing.assert_allclose((ac.tensor(x) @ ac.tensor(x)).numpy(), x.astype(np.float64) @ x,
                               rtol=1e-5)
