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


# ---- shape ops ----------------------------------------------------------------

def normal_values(seed, shape):
    return np.random.default_rng(seed).standard_normal(shape)


@st.composite
def reshapes(draw):
    """A shape and another with as many elements (one side possibly -1)."""
    shape = draw(shapes)
    size = int(np.prod(shape))
    target = []
    rest = size
    while rest > 1 and len(target) < 5:
        side = draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
        target.append(side)
        rest //= side
    target += [rest] if rest > 1 else []
    target = draw(st.permutations(target + [1] * draw(st.integers(0, 2))))
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return shape, tuple(target)


@given(shapes=reshapes(), seed=seeds, scoped=st.booleans())
@memory_returns
def test_reshape_to_any_shape_of_the_same_size(shapes, seed):
    shape, target = shapes
    check_op(lambda x: x.reshape(target), lambda x: x.reshape(target),
             lambda w, x: (w.reshape(shape),), [normal_values(seed, shape)], seed)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=5, max_side=4), data=st.data(), seed=seeds,
       scoped=st.booleans())
@memory_returns
def test_permute_transpose_and_flatten(shape, data, seed):
    n = len(shape)
    perm = data.draw(st.permutations(range(n)))
    check_op(lambda x: x.permute(*perm), lambda x: x.transpose(perm),
             lambda w, x: (w.transpose(np.argsort(perm)),), [normal_values(seed, shape)], seed)
    d0, d1 = data.draw(st.integers(-n, n - 1)), data.draw(st.integers(-n, n - 1))
    check_op(lambda x: x.transpose(d0, d1), lambda x: np.swapaxes(x, d0, d1),
             lambda w, x: (np.swapaxes(w, d0, d1),), [normal_values(seed, shape)], seed)
    start = data.draw(st.integers(0, n - 1))
    end = data.draw(st.integers(start, n - 1))
    flat = shape[:start] + (int(np.prod(shape[start:end + 1])),) + shape[end + 1:]
    check_op(lambda x: x.flatten(start, end - n if data.draw(st.booleans()) else end),
             lambda x: x.reshape(flat), lambda w, x: (w.reshape(shape),), [normal_values(seed, shape)],
             seed)


@given(shape=shapes, data=st.data(), seed=seeds, scoped=st.booleans())
@memory_returns
def test_squeeze_and_unsqueeze(shape, data, seed):
    n = len(shape)
    dim = data.draw(st.integers(-n - 1, n))
    check_op(lambda x: x.unsqueeze(dim), lambda x: np.expand_dims(x, dim),
             lambda w, x: (w.reshape(shape),), [normal_values(seed, shape)], seed)
    ones = tuple(d for d in range(n) if shape[d] == 1)
    squeezed = data.draw(st.sampled_from([None] + [d - n for d in ones] + list(range(n))))
    np_axis = ones if squeezed is None else (squeezed,) if shape[squeezed] == 1 else ()
    check_op(lambda x: x.squeeze() if squeezed is None else x.squeeze(squeezed),
             lambda x: np.squeeze(x, axis=np_axis), lambda w, x: (w.reshape(shape),),
             [normal_values(seed, shape)], seed)


@st.composite
def basic_indices(draw, shape):
    """A tuple of ints and slices (any start, stop and step > 0) over shape's leading dims."""
    index = []
    for side in shape[:draw(st.integers(0, len(shape)))]:
        if draw(st.booleans()):
            index.append(draw(st.integers(-side, side - 1)))
        else:
            bound = st.none() | st.integers(-side - 2, side + 2)
            index.append(slice(draw(bound), draw(bound), draw(st.none() | st.integers(1, 3))))
    return tuple(index)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=5), data=st.data(), seed=seeds,
       scoped=st.booleans())
@memory_returns
def test_basic_indexing_like_numpy(shape, data, seed):
    index = data.draw(basic_indices(shape))

    def grad(w, x):
        g = np.zeros_like(x)
        g[index] += w
        return (g,)
    check_op(lambda x: x[index], lambda x: x[index], grad, [normal_values(seed, shape)], seed)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), data=st.data(), seed=seeds,
       scoped=st.booleans())
@memory_returns
def test_cat_and_stack(shape, data, seed):
    n = len(shape)
    count = data.draw(st.integers(1, 4))
    dim = data.draw(st.integers(-n, n - 1))
    sides = data.draw(st.lists(st.integers(1, 3), min_size=count, max_size=count))
    parts = [normal_values(seed + i, shape[:dim % n] + (side,) + shape[dim % n + 1:])
             for i, side in enumerate(sides)]
    cuts = np.cumsum(sides)[:-1]
    check_op(lambda *xs: ac.cat(list(xs), dim), lambda *xs: np.concatenate(xs, dim),
             lambda w, *xs: np.split(w, cuts, dim % n), parts, seed)
    stack_dim = data.draw(st.integers(-n - 1, n))
    same = [normal_values(seed + i, shape) for i in range(count)]
    check_op(lambda *xs: ac.stack(list(xs), stack_dim), lambda *xs: np.stack(xs, stack_dim),
             lambda w, *xs: [np.take(w, i, stack_dim) for i in range(count)], same, seed)


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=1, min_dims=0, max_dims=4, max_side=4),
       seed=seeds, scoped=st.booleans())
@memory_returns
def test_expand_to_a_broadcast_shape(shapes, seed):
    (shape,), target = shapes.input_shapes, shapes.result_shape
    check_op(lambda x: x.expand(*target), lambda x: np.broadcast_to(x, target),
             lambda w, x: (unbroadcast(w, shape),), [normal_values(seed, shape)], seed)


# ---- matmul -------------------------------------------------------------------

@st.composite
def matmul_shapes(draw):
    """Operand shapes PyTorch's matmul takes: 1-D, 2-D, and batched with broadcast
    batch dims."""
    n, k, m = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                   max_side=3))
    batch_a, batch_b = batch.input_shapes
    a = (k,) if draw(st.booleans()) and draw(st.booleans()) else batch_a + (n, k)
    b = (k,) if draw(st.booleans()) and draw(st.booleans()) else batch_b + (k, m)
    return a, b


def matmul_grads(w, a, b):
    """The gradients of sum(matmul(a, b) * w) by NumPy, 1-D operands promoted as matmul does."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    out = np.matmul(a2, b2)
    w2 = w.reshape(out.shape)
    da = unbroadcast(np.matmul(w2, np.swapaxes(b2, -1, -2)), a2.shape).reshape(a.shape)
    db = unbroadcast(np.matmul(np.swapaxes(a2, -1, -2), w2), b2.shape).reshape(b.shape)
    return da, db


@given(shapes=matmul_shapes(), seed=seeds, scoped=st.booleans())
@memory_returns
def test_matmul_of_any_shapes(shapes, seed):
    a, b = shapes
    check_op(lambda x, y: x @ y, np.matmul, matmul_grads, [normal_values(seed, a), normal_values(seed + 1, b)],
             seed, rtol=1e-4)


# ---- comparisons and where ------------------------------------------------------

DTYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}
COMPARISONS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
               "gt": np.greater, "ge": np.greater_equal}
LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or,
           "logical_xor": np.logical_xor}


def small_values(seed, shape, dtype):
    """Values in -2..2 (halves for floats), so that ties are common."""
    x = np.random.default_rng(seed).integers(-4, 5, shape) / (2 if dtype == "float32" else 1)
    return x.astype(DTYPES[dtype])


@given(name=st.sampled_from(sorted(COMPARISONS) + sorted(LOGICAL)),
       dtypes=st.tuples(st.sampled_from(sorted(DTYPES)), st.sampled_from(sorted(DTYPES))),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4),
       seed=seeds, scoped=st.booleans())
@memory_returns
def test_comparisons_and_logical_ops_across_dtypes(name, dtypes, shapes, seed):
    a = small_values(seed, shapes.input_shapes[0], dtypes[0])
    b = small_values(seed + 1, shapes.input_shapes[1], dtypes[1])
    out = getattr(ac.tensor(a), name)(ac.tensor(b))
    expected = {**COMPARISONS, **LOGICAL}[name](a, b)
    assert out.dtype == ac.bool
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
    if name in COMPARISONS:
        s = float(b.reshape(-1)[0])
        np.testing.assert_array_equal(getattr(ac.tensor(a), name)(s).numpy(),
                                      COMPARISONS[name](a, s))


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, max_side=4),
       cond_dtype=st.sampled_from(sorted(DTYPES)), seed=seeds, scoped=st.booleans())
@memory_returns
def test_where_broadcasts_and_routes_gradients(shapes, cond_dtype, seed):
    shape_c, shape_a, shape_b = shapes.input_shapes
    cond = small_values(seed, shape_c, cond_dtype)
    c = ac.tensor(cond) if cond_dtype == "bool" else ac.tensor(cond) != 0
    picked = np.broadcast_to(cond != 0, shapes.result_shape)

    def grads(w, a, b):
        return unbroadcast(w * picked, shape_a), unbroadcast(w * ~picked, shape_b)
    check_op(lambda a, b: ac.where(c, a, b), lambda a, b: np.where(cond != 0, a, b), grads,
             [normal_values(seed, shape_a), normal_values(seed + 1, shape_b)], seed)
