"""Elementwise ops: add, sub, mul, div, pow with broadcasting, their scalar forms,
and neg, exp, log, sqrt, abs, sin, cos, clamp. Forward values against NumPy
float64; gradients against central differences of float64 NumPy code."""
import numpy as np
import pytest

import aicraft as ac
from conftest import check_gradients
from thread_counts import assert_same_for_thread_counts

rng = np.random.default_rng(1234)

SHAPE_PAIRS = [
    ((3, 4), (3, 4)),
    ((3, 1, 4), (2, 4)),
    ((2, 3), ()),
    ((), (2, 3)),
    ((4,), (3, 1)),
    ((2, 1, 3), (1, 4, 1)),
    ((1,), (2, 2)),
]


def away_from_zero(shape, lo=0.5, hi=2.0):
    """Values of either sign with magnitude in [lo, hi]."""
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


normal = rng.standard_normal

BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, normal, normal),
    "sub": (lambda a, b: a - b, lambda a, b: a - b, normal, normal),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, normal, normal),
    "div": (lambda a, b: a / b, lambda a, b: a / b, normal, away_from_zero),
    "pow": (lambda a, b: a ** b, lambda a, b: a ** b,
            lambda s: rng.uniform(0.5, 2.0, s), lambda s: rng.uniform(-1.5, 1.5, s)),
}


def make(gen, shape):
    return np.asarray(gen(shape), dtype=np.float32)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shape_a,shape_b", SHAPE_PAIRS)
def test_binary_forward_matches_numpy(name, shape_a, shape_b):
    ac_fn, np_fn, gen_a, gen_b = BINARY[name]
    a, b = make(gen_a, shape_a), make(gen_b, shape_b)
    out = ac_fn(ac.tensor(a), ac.tensor(b))
    expected = np_fn(a.astype(np.float64), b.astype(np.float64))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shape_a,shape_b", SHAPE_PAIRS)
def test_binary_gradients(name, shape_a, shape_b):
    ac_fn, np_fn, gen_a, gen_b = BINARY[name]
    check_gradients(ac_fn, np_fn, [make(gen_a, shape_a), make(gen_b, shape_b)])


def test_functional_forms_match_operators():
    a, b = ac.tensor([[1.0, 2.0]]), ac.tensor([[3.0], [4.0]])
    for fn, op in [(ac.add, a + b), (ac.sub, a - b), (ac.mul, a * b), (ac.div, a / b), (ac.pow, a ** b)]:
        np.testing.assert_array_equal(fn(a, b).numpy(), op.numpy())


def test_same_input_twice_gets_both_gradients():
    x = ac.tensor([1.0, -2.0, 3.0], requires_grad=True)
    (x + x).backward(ac.tensor([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    y = ac.tensor([1.0, -2.0, 3.0], requires_grad=True)
    (y * y).backward(ac.tensor([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, -4.0, 6.0])


def test_pow_gradient_follows_pytorch_at_zero():
    # d/db a^b = a^b log a is taken as 0 where a == 0 and b >= 0; d/da is 0 where b == 0
    a = ac.tensor([0.0, 0.0, 2.0, 3.0], requires_grad=True)
    b = ac.tensor([2.0, 0.0, 0.0, 2.0], requires_grad=True)
    out = a ** b
    np.testing.assert_allclose(out.numpy(), [0.0, 1.0, 1.0, 9.0])
    out.backward(ac.tensor([1.0, 1.0, 1.0, 1.0]))
    np.testing.assert_allclose(a.grad.numpy(), [0.0, 0.0, 0.0, 6.0])
    np.testing.assert_allclose(b.grad.numpy(), [0.0, 0.0, np.log(2.0), 9.0 * np.log(3.0)], rtol=1e-6)


def test_pow_of_negative_base_gives_nan_exponent_gradient():
    a = ac.tensor([-2.0], requires_grad=True)
    b = ac.tensor([2.0], requires_grad=True)
    out = a ** b
    assert out.item() == 4.0
    out.backward(ac.tensor([1.0]))
    assert a.grad.item() == -4.0
    assert np.isnan(b.grad.item())


# ---- scalar forms -------------------------------------------------------------

SCALAR_FORMS = {
    "add_scalar": (lambda a: a + 2.5, lambda a: a + 2.5, normal),
    "radd_scalar": (lambda a: 2.5 + a, lambda a: 2.5 + a, normal),
    "sub_scalar": (lambda a: a - 1.5, lambda a: a - 1.5, normal),
    "rsub_scalar": (lambda a: 1.5 - a, lambda a: 1.5 - a, normal),
    "mul_scalar": (lambda a: a * -3.0, lambda a: a * -3.0, normal),
    "rmul_scalar": (lambda a: 0.5 * a, lambda a: 0.5 * a, normal),
    "div_scalar": (lambda a: a / 4.0, lambda a: a / 4.0, normal),
    "rdiv_scalar": (lambda a: 3.0 / a, lambda a: 3.0 / a, away_from_zero),
    "pow_scalar_int": (lambda a: a ** 3, lambda a: a ** 3, normal),
    "pow_scalar_half": (lambda a: a ** 0.5, lambda a: a ** 0.5, lambda s: rng.uniform(0.5, 2.0, s)),
    "pow_scalar_negative": (lambda a: a ** -2.0, lambda a: a ** -2.0, away_from_zero),
    "rpow_scalar": (lambda a: 2.0 ** a, lambda a: 2.0 ** a, normal),
    "neg": (lambda a: -a, lambda a: -a, normal),
}


@pytest.mark.parametrize("name", sorted(SCALAR_FORMS))
@pytest.mark.parametrize("shape", [(2, 3), (), (5,)])
def test_scalar_forms(name, shape):
    ac_fn, np_fn, gen = SCALAR_FORMS[name]
    x = make(gen, shape)
    out = check_gradients(ac_fn, np_fn, [x])
    np.testing.assert_allclose(out.numpy(), np_fn(x.astype(np.float64)), rtol=1e-6, atol=1e-7)


def test_pow_scalar_zero_has_zero_gradient_even_at_zero():
    x = ac.tensor([0.0, 2.0, -1.0], requires_grad=True)
    out = x ** 0
    np.testing.assert_array_equal(out.numpy(), [1.0, 1.0, 1.0])
    out.backward(ac.tensor([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])


# ---- unary --------------------------------------------------------------------

UNARY = {
    "exp": (lambda a: a.exp(), np.exp, normal),
    "log": (lambda a: a.log(), np.log, lambda s: rng.uniform(0.1, 5.0, s)),
    "sqrt": (lambda a: a.sqrt(), np.sqrt, lambda s: rng.uniform(0.1, 5.0, s)),
    "abs": (lambda a: a.abs(), np.abs, away_from_zero),
    "sin": (lambda a: a.sin(), np.sin, lambda s: rng.uniform(-4, 4, s)),
    "cos": (lambda a: a.cos(), np.cos, lambda s: rng.uniform(-4, 4, s)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(3, 4), (), (2, 1, 3)])
def test_unary(name, shape):
    ac_fn, np_fn, gen = UNARY[name]
    x = make(gen, shape)
    out = check_gradients(ac_fn, np_fn, [x])
    np.testing.assert_allclose(out.numpy(), np_fn(x.astype(np.float64)), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(getattr(ac, name)(ac.tensor(x)).numpy(), out.numpy())


def test_abs_gradient_is_zero_at_zero():
    x = ac.tensor([-1.5, 0.0, 2.0], requires_grad=True)
    x.abs().backward(ac.tensor([1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [-1.0, 0.0, 1.0])


def test_log_and_sqrt_edge_values_follow_ieee():
    x = ac.tensor([0.0, -1.0, np.inf])
    log, root = x.log().numpy(), x.sqrt().numpy()
    assert log[0] == -np.inf and np.isnan(log[1]) and log[2] == np.inf
    assert root[0] == 0.0 and np.isnan(root[1]) and root[2] == np.inf


CLAMP_BOUNDS = [(-0.5, 0.5), (0.0, None), (None, 0.25), (-np.inf, np.inf), (1.0, -1.0)]


@pytest.mark.parametrize("lo,hi", CLAMP_BOUNDS)
def test_clamp_forward_and_gradient(lo, hi):
    x = rng.uniform(-2, 2, (4, 5)).astype(np.float32)
    x[0, 0], x[0, 1] = 0.5, -0.5           # exactly on a bound: the gradient passes, as PyTorch
    out = ac.tensor(x).clamp(lo, hi)
    lo64 = -np.inf if lo is None else lo
    hi64 = np.inf if hi is None else hi
    expected = np.minimum(np.maximum(x.astype(np.float64), lo64), hi64)   # lo > hi gives hi
    np.testing.assert_array_equal(out.numpy(), expected)
    t = ac.tensor(x, requires_grad=True)
    w = rng.standard_normal(x.shape).astype(np.float32)
    t.clamp(lo, hi).backward(ac.tensor(w))
    inside = (x >= lo64) & (x <= hi64)
    np.testing.assert_array_equal(t.grad.numpy(), np.where(inside, w, 0.0))


def test_clamp_gradient_matches_central_differences_away_from_bounds():
    x = np.array([-1.7, -0.9, -0.2, 0.3, 0.8, 1.6], dtype=np.float32)
    check_gradients(lambda a: a.clamp(-1.0, 1.0), lambda a: np.clip(a, -1.0, 1.0), [x])


def test_clamp_passes_nan_through():
    out = ac.tensor([np.nan, 3.0]).clamp(-1.0, 1.0).numpy()
    assert np.isnan(out[0]) and out[1] == 1.0


def test_clamp_rejects_nan_bounds():
    x = ac.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="clamp"):
        x.clamp(float("nan"), 1.0)
    with pytest.raises(ValueError, match="clamp"):
        x.clamp(0.0, float("nan"))
    np.testing.assert_array_equal(x.clamp(0.0, 1.5).numpy(), [1.0, 1.5])


# ---- errors, large tensors, threads ------------------------------------------

@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
                                lambda a, b: a / b, lambda a, b: a ** b])
def test_shapes_that_do_not_broadcast_raise_shape_error(op):
    a, b = ac.zeros(2, 3), ac.zeros(3, 2)
    with pytest.raises(ac.ShapeError, match=r"\(2, 3\).*\(3, 2\)"):
        op(a, b)
    with pytest.raises(ValueError):
        op(ac.zeros(4), ac.zeros(3))
    np.testing.assert_array_equal(op(ac.ones(2, 3), ac.ones(3)).shape, (2, 3))


def test_large_broadcast_matches_numpy():
    # big enough to be split into chunks, with runs that start mid-row
    a = rng.standard_normal((37, 1, 1031)).astype(np.float32)
    b = rng.standard_normal((3, 1031)).astype(np.float32)
    for ac_fn, np_fn in [(lambda x, y: x * y, np.multiply), (lambda x, y: x - y, np.subtract)]:
        out = ac_fn(ac.tensor(a), ac.tensor(b)).numpy()
        np.testing.assert_allclose(out, np_fn(a.astype(np.float64), b.astype(np.float64)), rtol=1e-6)
    x = rng.uniform(0.1, 3, 200_000).astype(np.float32)
    np.testing.assert_allclose(ac.tensor(x).log().numpy(), np.log(x.astype(np.float64)), rtol=1e-6, atol=1e-7)


def test_results_are_bit_identical_for_any_thread_count():
    a = rng.standard_normal((64, 1, 700)).astype(np.float32)
    b = rng.standard_normal((5, 700)).astype(np.float32)

    def run():
        ta, tb = ac.tensor(a, requires_grad=True), ac.tensor(b, requires_grad=True)
        out = (ta ** 2 / (tb.abs() + 1)).sin()
        out.backward(ac.ones(*out.shape))
        return [out.numpy(), ta.grad.numpy(), tb.grad.numpy()]
    assert_same_for_thread_counts(run)


def test_ops_inside_checkpoint_release_memory():
    a = ac.tensor(rng.standard_normal((10, 10)), requires_grad=True)
    before = ac.memory_stats()["bytes_in_use"]
    with ac.checkpoint():
        for _ in range(20):
            ((a * 2 + 1).exp().clamp(0, 3) / (a.abs() + 1)).sum().backward()
    del a
    assert ac.memory_stats()["bytes_in_use"] <= before


def test_empty_tensors_broadcast_and_backpropagate():
    a = ac.zeros(0, 3, requires_grad=True)
    b = ac.ones(3, requires_grad=True)
    out = (a * b).exp()
    assert out.shape == (0, 3)
    out.backward(ac.zeros(0, 3))
    assert a.grad.shape == (0, 3)
    np.testing.assert_array_equal(b.grad.numpy(), [0.0, 0.0, 0.0])
