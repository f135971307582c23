"""Property tests: ops over shapes hypothesis generates, against NumPy float64,
forward and gradient, with libac's memory counters back at their start after
every example.

Hypothesis draws the shapes, dims and options, and a seed from which NumPy draws
the values (faster than drawing each element; shrinking still works on shapes).
Gradients are compared with analytic float64 NumPy gradients of sum(out * w) for
a random upstream w. Half the examples run inside ac.checkpoint(), half at root.
The "ci" profile (200 examples, derandomized) runs in `make test`; set
HYPOTHESIS_PROFILE=explore for 5,000 random ones.
"""
import functools
import inspect
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import aicraft as ac

settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

COUNTERS = ("bytes_in_use", "live_tensors", "live_nodes")
RTOL, ATOL = 1e-5, 1e-5

seeds = st.integers(0, 2 ** 32 - 1)
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4)


def memory_returns(test):
    """Run each example at root or in a scope (the `scoped` argument, which the
    test's @given draws), then check that bytes in use, live tensors and live
    nodes are back where they started."""
    @functools.wraps(test)
    def wrapped(*args, scoped, **kwargs):
        before = [ac.memory_stats()[k] for k in COUNTERS]
        if scoped:
            with ac.checkpoint():
                test(*args, **kwargs)
        else:
            test(*args, **kwargs)
        after = [ac.memory_stats()[k] for k in COUNTERS]
        assert after == before, "memory counters %s went from %s to %s" % (COUNTERS, before, after)
    signature = inspect.signature(test)
    wrapped.__signature__ = signature.replace(parameters=[
        *signature.parameters.values(), inspect.Parameter("scoped", inspect.Parameter.KEYWORD_ONLY)])
    return wrapped


def unbroadcast(grad, shape):
    """grad summed over the dims broadcasting added or stretched, to shape."""
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape)))) if grad.ndim > len(shape) else grad
    stretched = tuple(d for d, n in enumerate(shape) if n == 1 and grad.shape[d] != 1)
    return grad.sum(axis=stretched, keepdims=True).reshape(shape)


def check_op(ac_fn, np_fn, grad_fn, arrays, seed, rtol=RTOL, atol=ATOL):
    """ac_fn on float32 tensors of arrays against np_fn in float64; then, after
    backward of a random upstream w, each input's grad against grad_fn(w, *inputs)."""
    x32 = [np.asarray(a, dtype=np.float32) for a in arrays]
    x64 = [a.astype(np.float64) for a in x32]
    tensors = [ac.tensor(a, requires_grad=True) for a in x32]
    out = ac_fn(*tensors)
    expected = np.asarray(np_fn(*x64))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=rtol, atol=atol)
    w = np.random.default_rng(seed).standard_normal(expected.shape).astype(np.float32)
    out.backward(ac.tensor(w))
    for i, (t, g) in enumerate(zip(tensors, grad_fn(w.astype(np.float64), *x64))):
        assert t.grad is not None, "input %d got no gradient" % i
        assert t.grad.shape == t.shape
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=rtol, atol=atol,
                                   err_msg="gradient of input %d" % i)


# ---- broadcasting binary ops ------------------------------------------------

def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(rng, shape):
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def normal(rng, shape):
    return rng.standard_normal(shape)


# name: (aicraft, NumPy, gradients (w, a, b) -> (da, db) before unbroadcasting, a's values, b's)
BINARY = {
    "add": (lambda a, b: a + b, np.add, lambda w, a, b: (w, w), normal, normal),
    "sub": (lambda a, b: a - b, np.subtract, lambda w, a, b: (w, -w), normal, normal),
    "mul": (lambda a, b: a * b, np.multiply, lambda w, a, b: (w * b, w * a), normal, normal),
    "div": (lambda a, b: a / b, np.divide, lambda w, a, b: (w / b, -w * a / b ** 2), normal,
            away_from_zero),
    "pow": (lambda a, b: a ** b, np.power,
            lambda w, a, b: (w * b * a ** (b - 1), w * a ** b * np.log(a)), positive, normal),
}


@given(name=st.sampled_from(sorted(BINARY)),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4),
       seed=seeds, scoped=st.booleans())
@memory_returns
def test_binary_ops_broadcast_like_numpy(name, shapes, seed):
    ac_fn, np_fn, grad_fn, values_a, values_b = BINARY[name]
    (shape_a, shape_b), out_shape = shapes.input_shapes, shapes.result_shape
    rng = np.random.default_rng(seed)

    def grads(w, a, b):
        da, db = grad_fn(w, *np.broadcast_arrays(a, b))
        return unbroadcast(da, shape_a), unbroadcast(db, shape_b)
    check_op(ac_fn, np_fn, grads, [values_a(rng, shape_a), values_b(rng, shape_b)], seed,
             rtol=1e-4)


@given(name=st.sampled_from(sorted(BINARY)), shape=shapes, seed=seeds,
       scalar=st.floats(0.25, 4.0), reflected=st.booleans(), scoped=st.booleans())
@memory_returns
def test_binary_ops_with_a_python_scalar(name, shape, seed, scalar, reflected):
    ac_fn, np_fn, grad_fn, values_a, values_b = BINARY[name]
    rng = np.random.default_rng(seed)
    s = float(np.float32(scalar))
    if reflected:
        fn, np_one = (lambda b: ac_fn(s, b)), (lambda b: np_fn(s, b))
        grad = (lambda w, b: (grad_fn(w, np.full_like(b, s), b)[1],))
        x = values_b(rng, shape)
    else:
        fn, np_one = (lambda a: ac_fn(a, s)), (lambda a: np_fn(a, s))
        grad = (lambda w, a: (grad_fn(w, a, np.full_like(a, s))[0],))
        x = values_a(rng, shape)
    check_op(fn, np_one, grad, [x], seed, rtol=1e-4)


# ---- reductions ---------------------------------------------------------------

@st.composite
def shape_and_dims(draw, min_dims=0):
    """A shape and a reduction over it: None (all), an int, or a tuple of distinct
    dims, each possibly negative."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=4, min_side=1, max_side=4))
    if not shape or draw(st.booleans()) and draw(st.booleans()):
        return shape, None
    picked = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape),
                           unique=True))
    picked = [d - len(shape) if draw(st.booleans()) else d for d in picked]
    return shape, picked[0] if len(picked) == 1 and draw(st.booleans()) else tuple(picked)


def axes(dim, ndim):
    if dim is None:
        return tuple(range(ndim))
    return tuple(d % ndim for d in (dim if isinstance(dim, tuple) else (dim,)))


def distinct_values(rng, shape):
    """Values without ties, so that max and min have one winner each."""
    size = int(np.prod(shape))
    return (rng.permutation(size) * 0.25 - size * 0.125).reshape(shape)


def spread_grad(np_fn, w, x, ax, keepdim, correction):
    n = int(np.prod([x.shape[d] for d in ax]))
    mean = x.mean(axis=ax, keepdims=True)
    w = w if keepdim else np.expand_dims(w, ax)
    dvar = w * 2 * (x - mean) / (n - correction)
    if np_fn is np.std:   # PyTorch's gradient is 0 where std is 0
        std = np.std(x, axis=ax, ddof=correction, keepdims=True)
        dvar = np.divide(dvar, 2 * std, out=np.zeros_like(dvar), where=std > 0)
    return dvar


@given(name=st.sampled_from(["sum", "mean", "amax", "amin"]), shape_dims=shape_and_dims(),
       keepdim=st.booleans(), seed=seeds, scoped=st.booleans())
@memory_returns
def test_reductions_over_any_dims(name, shape_dims, keepdim, seed):
    shape, dim = shape_dims
    ax = axes(dim, len(shape))
    np_fn = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}[name]

    def ac_fn(x):
        return getattr(x, name)(dim, keepdim) if dim is not None else getattr(x, name)()

    def forward(x):
        return np_fn(x, axis=ax, keepdims=keepdim and dim is not None)

    def grad(w, x):
        full = np.broadcast_to(w if keepdim or not ax else np.expand_dims(w, ax), x.shape)
        if name == "sum":
            return (full,)
        if name == "mean":
            return (full / int(np.prod([x.shape[d] for d in ax])),)
        return (full * (x == np_fn(x, axis=ax, keepdims=True)),)
    check_op(ac_fn, forward, grad, [distinct_values(np.random.default_rng(seed), shape)], seed)


@given(name=st.sampled_from(["var", "std"]), shape_dims=shape_and_dims(),
       keepdim=st.booleans(), correction=st.integers(0, 1), seed=seeds, scoped=st.booleans())
@memory_returns
def test_var_std_over_any_dims(name, shape_dims, keepdim, correction, seed):
    shape, dim = shape_dims
    ax = axes(dim, len(shape))
    assume(int(np.prod([shape[d] for d in ax])) > correction)
    np_fn = getattr(np, name)
    check_op(lambda x: getattr(x, name)(dim, keepdim=keepdim, correction=correction),
             lambda x: np_fn(x, axis=ax, ddof=correction, keepdims=keepdim),
             lambda w, x: (spread_grad(np_fn, w, x, ax, keepdim or not ax, correction),),
             [np.random.default_rng(seed).standard_normal(shape) + 1.0], seed, rtol=1e-4,
             atol=1e-4)


@given(name=st.sampled_from(["max", "min"]), shape_dims=shape_and_dims(min_dims=1),
       keepdim=st.booleans(), seed=seeds, scoped=st.booleans())
@memory_returns
def test_max_min_along_a_dim_give_values_and_indices(name, shape_dims, keepdim, seed):
    shape, _ = shape_dims
    dim = int(np.random.default_rng(seed).integers(-len(shape), len(shape)))
    x = distinct_values(np.random.default_rng(seed), shape).astype(np.float32)
    t = ac.tensor(x, requires_grad=True)
    values, indices = getattr(t, name)(dim, keepdim=keepdim)
    arg = (np.argmax if name == "max" else np.argmin)(x, axis=dim)
    expected_idx = np.expand_dims(arg, dim) if keepdim else arg
    assert indices.dtype == ac.int64
    np.testing.assert_array_equal(indices.numpy(), expected_idx)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, np.expand_dims(arg, dim),
                                                                     dim).reshape(expected_idx.shape))
    np.testing.assert_array_equal(getattr(t, "arg" + name)(dim, keepdim).numpy(), expected_idx)
    w = np.random.default_rng(seed + 1).standard_normal(expected_idx.shape).astype(np.float32)
    values.backward(ac.tensor(w))
    expected = np.zeros_like(x)
    np.put_along_axis(expected, np.expand_dims(arg, dim), w.reshape(np.expand_dims(arg, dim).shape),
                      dim)
    np.testing.assert_array_equal(t.grad.numpy(), expected)


@given(dtype=st.sampled_from(["int64", "bool"]), shape_dims=shape_and_dims(),
       keepdim=st.booleans(), seed=seeds, scoped=st.booleans())
@memory_returns
def test_sum_of_integers_and_bools_is_exact_int64(dtype, shape_dims, keepdim, seed):
    shape, dim = shape_dims
    x = np.random.default_rng(seed).integers(-1000, 1000, shape).astype(dtype)
    t = ac.tensor(x)
    out = t.sum(dim, keepdim) if dim is not None else t.sum()
    expected = x.sum(axis=axes(dim, len(shape)), keepdims=keepdim and dim is not None,
                     dtype=np.int64)
    assert out.dtype == ac.int64
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
