"""The fused linear op (aicraft.nn.functional.linear, over C's ac_linear):
forward against NumPy float64, gradients against central differences of a
float64 NumPy linear, with and without bias, on 1-D, 2-D and 3-D inputs;
shape errors; and nn.Linear using it."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn
from conftest import check_gradients
from thread_counts import assert_same_for_thread_counts

rng = np.random.default_rng(11)


def np_linear(x, w, b=None):
    y = np.asarray(x, np.float64) @ np.asarray(w, np.float64).T
    return y if b is None else y + np.asarray(b, np.float64)


@pytest.mark.parametrize("x_shape", [(6, 5), (2, 3, 5), (5,), (0, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_forward_matches_numpy(x_shape, bias):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32) if bias else None
    y = F.linear(ac.tensor(x), ac.tensor(w), None if b is None else ac.tensor(b))
    assert y.shape == x_shape[:-1] + (4,)
    np.testing.assert_allclose(y.numpy(), np_linear(x, w, b), rtol=1e-5, atol=1e-5)


def test_forward_large_matches_numpy():
    """Big enough for the blocked, multithreaded GEMM path."""
    x = rng.standard_normal((300, 257)).astype(np.float32)
    w = rng.standard_normal((130, 257)).astype(np.float32)
    b = rng.standard_normal(130).astype(np.float32)
    y = F.linear(ac.tensor(x), ac.tensor(w), ac.tensor(b))
    np.testing.assert_allclose(y.numpy(), np_linear(x, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_shape", [(3, 4), (2, 3, 4), (4,)])
def test_gradients_with_bias(x_shape):
    arrays = [rng.standard_normal(x_shape), rng.standard_normal((5, 4)), rng.standard_normal(5)]
    check_gradients(F.linear, np_linear, arrays, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("x_shape", [(3, 4), (2, 3, 4)])
def test_gradients_without_bias(x_shape):
    arrays = [rng.standard_normal(x_shape), rng.standard_normal((5, 4))]
    check_gradients(lambda x, w: F.linear(x, w), np_linear, arrays, rtol=1e-3, atol=1e-4)


def test_gradient_of_weight_alone():
    """x is data (no grad): only the weight and bias get gradients."""
    x = rng.standard_normal((7, 3)).astype(np.float32)
    w = ac.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    b = ac.tensor(rng.standard_normal(2), requires_grad=True)
    g = rng.standard_normal((7, 2)).astype(np.float32)
    xt = ac.tensor(x)
    F.linear(xt, w, b).backward(ac.tensor(g))
    assert xt.grad is None
    np.testing.assert_allclose(w.grad.numpy(), g.astype(np.float64).T @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), g.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [37, 1100])
@pytest.mark.parametrize("bias", [True, False])
def test_wide_layer_gradients_match_float64(bias, rows):
    """More outputs than inputs (a vocabulary projection): dW^T comes from a
    product stored transposed into dW, db from the pass that packs g; odd sizes
    leave partial tiles in both, and 1100 rows are two slices of the depth."""
    x = rng.standard_normal((rows, 19)).astype(np.float32)
    w = rng.standard_normal((301, 19)).astype(np.float32)
    b = rng.standard_normal(301).astype(np.float32)
    g = rng.standard_normal((rows, 301)).astype(np.float32)
    xt, wt = ac.tensor(x, requires_grad=True), ac.tensor(w, requires_grad=True)
    bt = ac.tensor(b, requires_grad=True) if bias else None
    F.linear(xt, wt, bt).backward(ac.tensor(g))
    g64 = g.astype(np.float64)
    np.testing.assert_allclose(wt.grad.numpy(), g64.T @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(xt.grad.numpy(), g64 @ w, rtol=1e-4, atol=1e-4)
    if bias:
        np.testing.assert_allclose(bt.grad.numpy(), g64.sum(0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("in_f, out_f", [(200, 1003), (130, 60), (37, 501)])
def test_results_do_not_depend_on_thread_count(in_f, out_f):
    """Forward, and backward by either product for dW (out > in: dW^T with db)."""
    x = rng.standard_normal((71, in_f)).astype(np.float32)
    w = rng.standard_normal((out_f, in_f)).astype(np.float32)
    b = rng.standard_normal(out_f).astype(np.float32)
    g = rng.standard_normal((71, out_f)).astype(np.float32)

    def run():
        xt, wt, bt = (ac.tensor(a, requires_grad=True) for a in (x, w, b))
        y = F.linear(xt, wt, bt)
        y.backward(ac.tensor(g))
        return [y.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()]
    assert_same_for_thread_counts(run)


def test_feature_mismatch_names_both_shapes():
    x, w, b = ac.zeros(64, 785), ac.zeros(128, 784), ac.zeros(128)
    with pytest.raises(ac.ShapeError, match=r"^linear: input \(64, 785\) has 785 features, "
                                            r"weight \(128, 784\) expects 784$"):
        F.linear(x, w, b)
    with pytest.raises(ac.ShapeError, match=r"linear: bias \(3,\) does not fit weight"):
        F.linear(ac.zeros(2, 784), w, ac.zeros(3))
    with pytest.raises(ac.ShapeError, match=r"linear: weight \(784,\) must be"):
        F.linear(ac.zeros(2, 784), ac.zeros(784))
    with pytest.raises(TypeError):
        F.linear(np.zeros((2, 784)), w)
    # the library is still usable afterwards
    assert F.linear(ac.zeros(2, 784), w, b).shape == (2, 128)


def test_module_linear_matches_functional():
    layer = nn.Linear(5, 3)
    x = rng.standard_normal((4, 2, 5)).astype(np.float32)
    y = layer(ac.tensor(x))
    np.testing.assert_allclose(y.numpy(), np_linear(x, layer.weight.numpy(), layer.bias.numpy()),
                               rtol=1e-5, atol=1e-5)
    no_bias = nn.Linear(5, 3, bias=False)
    assert no_bias.bias is None
    np.testing.assert_allclose(no_bias(ac.tensor(x)).numpy(), np_linear(x, no_bias.weight.numpy()),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="Linear.forward: input must be a Tensor"):
        layer([1.0, 2.0])


def test_linear_in_a_scope_frees_everything():
    layer = nn.Linear(20, 10)
    x = ac.randn(32, 20)
    before = ac.memory_stats()
    for _ in range(20):
        with ac.checkpoint():
            layer(x).relu().mean().backward()
        layer.zero_grad()
    after = ac.memory_stats()
    assert after["bytes_in_use"] == before["bytes_in_use"]
    assert after["live_tensors"] == before["live_tensors"]


def test_input_from_an_ended_scope_raises_scope_error():
    layer = nn.Linear(3, 2)
    with ac.checkpoint():
        x = ac.ones(2, 3)
    with pytest.raises(ac.ScopeError):
        layer(x)
    with pytest.raises(ac.ScopeError):
        nn.ReLU()(x)
