"""Activations: relu, sigmoid, tanh, gelu (exact erf form), softmax and
log_softmax. Forward values against NumPy float64; gradients against central
differences of float64 NumPy code."""
import math

import numpy as np
import pytest

import aicraft as ac
import aicraft.functional as F
from conftest import check_gradients

rng = np.random.default_rng(99)
erf = np.vectorize(math.erf)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def np_softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def np_log_softmax(x, dim):
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


def away_from_zero(shape):
    """relu has a kink at 0, where central differences mean nothing."""
    return rng.uniform(0.1, 3.0, shape) * rng.choice([-1.0, 1.0], shape)


ACTIVATIONS = {
    "relu": (lambda t: t.relu(), F.relu, lambda x: np.maximum(x, 0.0), away_from_zero),
    "sigmoid": (lambda t: t.sigmoid(), F.sigmoid, np_sigmoid, lambda s: rng.uniform(-6, 6, s)),
    "tanh": (lambda t: t.tanh(), F.tanh, np.tanh, lambda s: rng.uniform(-3, 3, s)),
    "gelu": (lambda t: t.gelu(), F.gelu, np_gelu, lambda s: rng.uniform(-4, 4, s)),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("shape", [(4, 5), (), (2, 3, 2)])
def test_activation_forward_and_gradient(name, shape):
    method, functional, np_fn, gen = ACTIVATIONS[name]
    x = np.asarray(gen(shape), dtype=np.float32)
    out = check_gradients(method, np_fn, [x])
    np.testing.assert_allclose(out.numpy(), np_fn(x.astype(np.float64)), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(functional(ac.tensor(x)).numpy(), out.numpy())


def test_relu_gradient_is_zero_at_zero():
    x = ac.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    x.relu().backward(ac.tensor([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0])


def test_saturating_activations_stay_finite_at_extremes():
    x = ac.tensor([-1e4, -100.0, 100.0, 1e4], requires_grad=True)
    np.testing.assert_array_equal(x.sigmoid().numpy(), [0.0, np_sigmoid(-100.0).astype(np.float32), 1.0, 1.0])
    np.testing.assert_array_equal(x.tanh().numpy(), [-1.0, -1.0, 1.0, 1.0])
    np.testing.assert_array_equal(x.gelu().numpy(), [0.0, 0.0, 100.0, 1e4])
    for fn in (lambda t: t.sigmoid(), lambda t: t.tanh(), lambda t: t.gelu()):
        x.grad = None
        fn(x).backward(ac.ones(4))
        assert np.all(np.isfinite(x.grad.numpy()))


def test_activations_pass_nan_through():
    x = ac.tensor([np.nan])
    for fn in (F.relu, F.sigmoid, F.tanh, F.gelu):
        assert np.isnan(fn(x).item())


def test_gelu_takes_the_tanh_approximation_and_refuses_others():
    x = 1.0
    tanh_form = 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    assert F.gelu(ac.tensor([x]), approximate="tanh").item() == pytest.approx(tanh_form, rel=1e-6)
    with pytest.raises(ValueError):
        F.gelu(ac.tensor([1.0]), approximate="fast")


# ---- softmax and log_softmax ----------------------------------------------------

SOFTMAX_CASES = [((4, 6), 1), ((4, 6), 0), ((4, 6), -1), ((2, 3, 4), 0), ((2, 3, 4), 1),
                 ((2, 3, 4), 2), ((5,), 0), ((3, 1), 1)]


@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_forward_and_gradient(shape, dim, log):
    x = rng.standard_normal(shape).astype(np.float32) * 3
    np_fn = (lambda a: np_log_softmax(a, dim)) if log else (lambda a: np_softmax(a, dim))
    method = (lambda t: t.log_softmax(dim)) if log else (lambda t: t.softmax(dim))
    out = check_gradients(method, np_fn, [x])
    np.testing.assert_allclose(out.numpy(), np_fn(x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    functional = F.log_softmax if log else F.softmax
    np.testing.assert_array_equal(functional(ac.tensor(x), dim).numpy(), out.numpy())


def test_softmax_of_scalar_is_one():
    assert ac.tensor(3.0).softmax(0).item() == 1.0
    assert ac.tensor(3.0).log_softmax(-1).item() == 0.0


def test_softmax_is_stable_for_huge_logits():
    x = np.array([[1e4, 1e4 - 1.0, -1e4], [-1e4, -1e4, -1e4], [1e4, 0.0, 0.0]], dtype=np.float32)
    x64 = x.astype(np.float64)
    s = ac.tensor(x).softmax(1).numpy()
    ls = ac.tensor(x).log_softmax(1).numpy()
    assert np.all(np.isfinite(s)) and np.all(np.isfinite(ls))
    np.testing.assert_allclose(s, np_softmax(x64, 1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ls, np_log_softmax(x64, 1), rtol=1e-5, atol=1e-5)
    t = ac.tensor(x, requires_grad=True)
    t.log_softmax(1).backward(ac.tensor(rng.standard_normal(x.shape)))
    assert np.all(np.isfinite(t.grad.numpy()))


def test_softmax_rows_sum_to_one_on_large_input():
    x = rng.standard_normal((300, 257)).astype(np.float32) * 10
    s = ac.tensor(x).softmax(-1).numpy()
    np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(s, np_softmax(x.astype(np.float64), 1), rtol=1e-5, atol=1e-8)
    s0 = ac.tensor(x).log_softmax(0).numpy()
    np.testing.assert_allclose(s0, np_log_softmax(x.astype(np.float64), 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dim", [2, -3, 5])
def test_softmax_rejects_dims_out_of_range(dim):
    x = ac.zeros(2, 3)
    with pytest.raises((IndexError, ValueError), match="softmax"):
        x.softmax(dim)
    with pytest.raises((IndexError, ValueError), match="log_softmax"):
        F.log_softmax(x, dim)
    np.testing.assert_allclose(x.softmax(1).numpy(), np.full((2, 3), 1 / 3), rtol=1e-6)


def test_activations_reject_non_tensors():
    for fn in (F.relu, F.sigmoid, F.tanh, F.gelu):
        with pytest.raises(TypeError):
            fn([1.0, 2.0])
