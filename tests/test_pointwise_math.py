"""Pointwise math (aicraft/pointwise.py, ops/pointwise.c) against torch: values on odd
shapes and special values, dtypes of int64/uint8/bool inputs, gradients, broadcasting,
and bad inputs."""
import math

import numpy as np
import pytest

import aicraft as ac
from aicraft._ffi import ffi, lib

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
SPECIAL = [NAN, INF, -INF, -0.0, 0.0, 1e-30, -1e-30, 1e30, -1e30, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5,
           3.0, -3.0, 1e-7, 88.0, -88.0]

# name: (values to draw from: a (lo, hi) range, rtol, atol)
UNARY = {
    "rsqrt": ((0.05, 10), 1e-5, 1e-6),
    "square": ((-10, 10), 1e-6, 1e-6),
    "reciprocal": ((0.1, 10), 1e-6, 1e-6),
    "erf": ((-4, 4), 1e-5, 1e-6),
    "erfc": ((-4, 4), 1e-5, 1e-6),
    "erfinv": ((-0.99, 0.99), 1e-5, 1e-5),
    "expm1": ((-5, 5), 1e-5, 1e-6),
    "exp2": ((-10, 10), 1e-5, 1e-6),
    "log2": ((0.01, 100), 1e-5, 1e-6),
    "log10": ((0.01, 100), 1e-5, 1e-6),
    "sign": ((-5, 5), 0, 0),
    "sgn": ((-5, 5), 0, 0),
    "floor": ((-5, 5), 0, 0),
    "ceil": ((-5, 5), 0, 0),
    "round": ((-5, 5), 0, 0),
    "trunc": ((-5, 5), 0, 0),
    "fix": ((-5, 5), 0, 0),
    "frac": ((-5, 5), 1e-6, 1e-6),
    "tan": ((-1.4, 1.4), 1e-5, 1e-5),
    "asin": ((-0.95, 0.95), 1e-5, 1e-6),
    "acos": ((-0.95, 0.95), 1e-5, 1e-6),
    "atan": ((-5, 5), 1e-5, 1e-6),
    "arcsin": ((-0.95, 0.95), 1e-5, 1e-6),
    "arctan": ((-5, 5), 1e-5, 1e-6),
    "sinh": ((-5, 5), 1e-5, 1e-5),
    "cosh": ((-5, 5), 1e-5, 1e-5),
    "asinh": ((-5, 5), 1e-5, 1e-6),
    "acosh": ((1.1, 5), 1e-5, 1e-6),
    "atanh": ((-0.9, 0.9), 1e-5, 1e-6),
    "sigmoid": ((-8, 8), 1e-5, 1e-6),
    "logit": ((0.05, 0.95), 1e-5, 1e-5),
    "sinc": ((-3, 3), 1e-5, 1e-5),
    "lgamma": ((0.2, 8), 1e-5, 1e-5),
    "digamma": ((0.2, 8), 1e-5, 1e-5),
    "deg2rad": ((-360, 360), 1e-6, 1e-6),
    "rad2deg": ((-6, 6), 1e-6, 1e-4),
    "nan_to_num": ((-5, 5), 0, 0),
    "positive": ((-5, 5), 0, 0),
}
NOT_DIFFERENTIABLE_AT_SPECIAL = {"sign", "sgn", "floor", "ceil", "round", "trunc", "fix"}


def _draw(lo, hi, shape, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def _close(actual, expected, rtol, atol):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_and_grads_match_torch(name):
    (lo, hi), rtol, atol = UNARY[name]
    x = _draw(lo, hi, (3, 5, 7))
    a = ac.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    out_a, out_t = getattr(ac, name)(a), getattr(torch, name)(t)
    assert out_a.dtype == ac.float32 and out_a.shape == tuple(out_t.shape)
    _close(out_a.detach().numpy(), out_t.detach().numpy(), rtol, atol)
    if name == "positive":
        return
    w = _draw(-1, 1, (3, 5, 7), seed=1)
    (out_a * ac.tensor(w)).sum().backward()
    (out_t * torch.tensor(w)).sum().backward()
    _close(a.grad.numpy(), t.grad.numpy(force=True), max(rtol, 1e-5) * 10, max(atol, 1e-5) * 10)


@pytest.mark.parametrize("name", sorted(set(UNARY) - {"positive", "logit", "lgamma", "digamma"}))
def test_unary_special_values_match_torch(name):
    x = np.array(SPECIAL, np.float32)
    out_a = getattr(ac, name)(ac.tensor(x)).numpy()
    out_t = getattr(torch, name)(torch.tensor(x)).numpy()
    # libm's float32 functions and torch's vectorised ones differ by an ulp or two on the
    # large values
    _close(out_a, out_t, 1e-5, 1e-6)
    assert np.array_equal(np.isnan(out_a), np.isnan(out_t))
    if name in NOT_DIFFERENTIABLE_AT_SPECIAL | {"square", "frac", "nan_to_num"}:
        assert np.array_equal(np.signbit(out_a), np.signbit(out_t)), name


def test_lgamma_digamma_poles_and_negatives():
    x = np.array([0.0, -0.0, -1.0, -2.0, -0.5, -1.5, 1.0, 2.0, 0.1, 30.0, 1e-3], np.float32)
    for name in ("lgamma", "digamma"):
        out_a = getattr(ac, name)(ac.tensor(x)).numpy()
        out_t = getattr(torch, name)(torch.tensor(x)).numpy()
        _close(out_a, out_t, 1e-5, 1e-5)
        assert np.array_equal(np.isnan(out_a), np.isnan(out_t))


def test_logit_eps_clamps_and_zeroes_the_gradient_outside():
    x = np.array([0.0, 0.05, 0.3, 0.5, 0.95, 1.0], np.float32)
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ac.logit(a, eps=0.1).sum().backward()
    torch.logit(t, eps=0.1).sum().backward()
    _close(ac.logit(a, 0.1).detach().numpy(), torch.logit(t, 0.1).detach().numpy(), 1e-5, 1e-6)
    _close(a.grad.numpy(), t.grad.numpy(), 1e-5, 1e-5)


@pytest.mark.parametrize("decimals", [0, 1, 2, 3, -1, -2])
def test_round_decimals_matches_torch(decimals):
    x = np.concatenate([_draw(-2000, 2000, (40,)), np.array([2.5, -2.5, 0.5, 1.5, 0.125, 1234.5], np.float32)])
    out_a = ac.round(ac.tensor(x), decimals=decimals).numpy()
    out_t = torch.round(torch.tensor(x), decimals=decimals).numpy()
    np.testing.assert_array_equal(out_a, out_t)


def test_nan_to_num_defaults_and_values():
    x = np.array([NAN, INF, -INF, 1.5, -0.0], np.float32)
    for kwargs in ({}, {"nan": 2.0}, {"nan": 1.0, "posinf": 9.0, "neginf": -9.0}):
        np.testing.assert_array_equal(ac.nan_to_num(ac.tensor(x), **kwargs).numpy(),
                                      torch.nan_to_num(torch.tensor(x), **kwargs).numpy())
    a = ac.tensor(x, requires_grad=True)
    ac.nan_to_num(a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0, 0, 0, 1, 1])


@pytest.mark.parametrize("name", ["isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit", "isreal"])
def test_tests_give_bool_for_every_dtype(name):
    x = np.array(SPECIAL, np.float32)
    out = getattr(ac, name)(ac.tensor(x))
    assert out.dtype == ac.bool
    np.testing.assert_array_equal(out.numpy(), getattr(torch, name)(torch.tensor(x)).numpy())
    for values, dtype in (([-3, 0, 5], ac.int64), ([0, 200], ac.uint8), ([True, False], ac.bool)):
        tdtype = {ac.int64: torch.int64, ac.uint8: torch.uint8, ac.bool: torch.bool}[dtype]
        out = getattr(ac, name)(ac.tensor(values, dtype=dtype))
        assert out.dtype == ac.bool
        np.testing.assert_array_equal(out.numpy(), getattr(torch, name)(torch.tensor(values, dtype=tdtype)).numpy())


INT_VALUES = [-(2 ** 62) - 3, -7, -1, 0, 1, 6, 2 ** 40 + 1, 2 ** 62 + 5]


@pytest.mark.parametrize("name", ["sign", "sgn", "square", "floor", "ceil", "round", "trunc", "fix"])
@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
def test_integer_inputs_keep_dtype_and_exact_values(name, dtype):
    values = {"int64": INT_VALUES, "uint8": [0, 1, 7, 200, 255], "bool": [True, False, True]}[dtype]
    t = torch.tensor(values, dtype=getattr(torch, dtype))
    a = ac.tensor(values, dtype=getattr(ac, dtype))
    try:
        expected = getattr(torch, name)(t)
    except (RuntimeError, NotImplementedError):
        with pytest.raises(TypeError):
            getattr(ac, name)(a)
        return
    out = getattr(ac, name)(a)
    assert str(out.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    assert out.tolist() == expected.tolist()


@pytest.mark.parametrize("name", ["erf", "rsqrt", "log2", "expm1", "exp2", "sinh", "atan", "sigmoid",
                                  "reciprocal", "deg2rad", "sinc", "lgamma", "frac"])
@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
def test_float_math_promotes_integers_to_float32(name, dtype):
    values = {"int64": [-3, 0, 1, 5, 2 ** 40], "uint8": [0, 1, 7, 200], "bool": [True, False]}[dtype]
    t = torch.tensor(values, dtype=getattr(torch, dtype))
    try:
        expected = getattr(torch, name)(t)
    except (RuntimeError, NotImplementedError):
        with pytest.raises(TypeError):
            getattr(ac, name)(ac.tensor(values, dtype=getattr(ac, dtype)))
        return
    out = getattr(ac, name)(ac.tensor(values, dtype=getattr(ac, dtype)))
    assert out.dtype == ac.float32 and expected.dtype == torch.float32
    _close(out.numpy(), expected.numpy(), 1e-5, 1e-6)


def test_methods_and_inplace_forms():
    x = _draw(0.5, 2.0, (4, 3))
    a = ac.tensor(x)
    np.testing.assert_allclose(a.rsqrt().numpy(), torch.tensor(x).rsqrt().numpy(), rtol=1e-6)
    b = ac.tensor(x)
    assert b.erf_() is b
    np.testing.assert_allclose(b.numpy(), torch.tensor(x).erf().numpy(), rtol=1e-6)
    c = ac.tensor(x)
    c.arcsinh_()
    np.testing.assert_allclose(c.numpy(), np.arcsinh(x), rtol=1e-5)
    i = ac.tensor([1, 2, 3])
    with pytest.raises(TypeError):
        i.sqrt_() if hasattr(i, "sqrt_") else i.rsqrt_()
    leaf = ac.tensor(x, requires_grad=True)
    with pytest.raises(RuntimeError):
        leaf.tan_()


# ---- binary -------------------------------------------------------------------------

BINARY = {
    # name: (a range, b range, rtol, atol)
    "atan2": ((-3, 3), (-3, 3), 1e-5, 1e-6),
    "arctan2": ((-3, 3), (-3, 3), 1e-5, 1e-6),
    "hypot": ((-3, 3), (-3, 3), 1e-5, 1e-6),
    "fmod": ((-10, 10), (0.5, 3), 1e-5, 1e-5),
    "copysign": ((-3, 3), (-3, 3), 0, 0),
    "xlogy": ((-3, 3), (0.1, 3), 1e-5, 1e-6),
    "logaddexp": ((-30, 30), (-30, 30), 1e-5, 1e-5),
    "logaddexp2": ((-30, 30), (-30, 30), 1e-5, 1e-5),
    "maximum": ((-3, 3), (-3, 3), 0, 0),
    "minimum": ((-3, 3), (-3, 3), 0, 0),
    "fmax": ((-3, 3), (-3, 3), 0, 0),
    "fmin": ((-3, 3), (-3, 3), 0, 0),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3, 5), (3, 5)), ((2, 1, 5), (4, 1)), ((7,), ()), ((), (3, 1))])
def test_binary_values_and_grads_match_torch(name, shapes):
    (alo, ahi), (blo, bhi), rtol, atol = BINARY[name]
    x, y = _draw(alo, ahi, shapes[0]), _draw(blo, bhi, shapes[1], seed=2)
    a, b = ac.tensor(x, requires_grad=True), ac.tensor(y, requires_grad=True)
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    out_a, out_t = getattr(ac, name)(a, b), getattr(torch, name)(ta, tb)
    assert out_a.shape == tuple(out_t.shape)
    _close(out_a.detach().numpy(), out_t.detach().numpy(), rtol, atol)
    w = _draw(-1, 1, tuple(out_t.shape), seed=3)
    (out_a * ac.tensor(w)).sum().backward()
    (out_t * torch.tensor(w)).sum().backward()
    _close(a.grad.numpy(), ta.grad.numpy(), 1e-4, 1e-5)
    _close(b.grad.numpy(), tb.grad.numpy(), 1e-4, 1e-5)


@pytest.mark.parametrize("name", sorted(set(BINARY) - {"arctan2"}) + ["heaviside", "nextafter"])
def test_binary_special_values_match_torch(name):
    s = np.array([NAN, INF, -INF, -0.0, 0.0, 1.0, -2.0], np.float32)
    x, y = np.repeat(s, len(s)), np.tile(s, len(s))
    out_a = getattr(ac, name)(ac.tensor(x), ac.tensor(y)).numpy()
    out_t = getattr(torch, name)(torch.tensor(x), torch.tensor(y)).numpy()
    _close(out_a, out_t, 1e-6, 1e-6)
    assert np.array_equal(np.isnan(out_a), np.isnan(out_t))


def test_maximum_tie_splits_the_gradient_and_nan_propagates():
    a, b = ac.tensor([1.0, 2.0, NAN], requires_grad=True), ac.tensor([1.0, 3.0, 0.0], requires_grad=True)
    ta, tb = torch.tensor([1.0, 2.0, NAN], requires_grad=True), torch.tensor([1.0, 3.0, 0.0], requires_grad=True)
    ac.maximum(a, b).sum().backward()
    torch.maximum(ta, tb).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())


@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin", "fmod"])
@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("uint8", "uint8"), ("bool", "bool"),
                                    ("int64", "uint8"), ("uint8", "bool"), ("int64", "float32")])
def test_binary_integer_dtypes_follow_torch_exactly(name, dtypes):
    values = {"int64": [2 ** 62 + 1, -(2 ** 40) - 3, 7, -7, 5], "uint8": [200, 3, 7, 250, 1],
              "bool": [True, False, True, True, True], "float32": [0.5, -1.5, 2.0, 7.0, 3.0]}
    x, y = values[dtypes[0]], values[dtypes[1]][::-1]
    ta, tb = torch.tensor(x, dtype=getattr(torch, dtypes[0])), torch.tensor(y, dtype=getattr(torch, dtypes[1]))
    a, b = ac.tensor(x, dtype=getattr(ac, dtypes[0])), ac.tensor(y, dtype=getattr(ac, dtypes[1]))
    try:
        expected = getattr(torch, name)(ta, tb)
    except RuntimeError:
        with pytest.raises((TypeError, ZeroDivisionError, ValueError)):
            getattr(ac, name)(a, b)
        return
    out = getattr(ac, name)(a, b)
    assert str(out.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    if expected.dtype == torch.float32:
        _close(out.numpy(), expected.numpy(), 1e-6, 0)
    else:
        assert out.tolist() == expected.tolist()


def test_integer_fmod_by_zero_raises():
    with pytest.raises(ZeroDivisionError):
        ac.fmod(ac.tensor([5, 3]), ac.tensor([0, 1]))


def test_torch_max_min_with_a_tensor_argument():
    x, y = _draw(-2, 2, (3, 4)), _draw(-2, 2, (4,), seed=5)
    np.testing.assert_array_equal(ac.max(ac.tensor(x), ac.tensor(y)).numpy(), np.maximum(x, y))
    np.testing.assert_array_equal(ac.tensor(x).min(ac.tensor(y)).numpy(), np.minimum(x, y))
    values, indices = ac.tensor(x).max(1)    # the dim forms still work
    np.testing.assert_array_equal(indices.numpy(), x.argmax(1))
    assert ac.tensor(x).max().item() == x.max()
    assert ac.max(ac.tensor([3, 9]), ac.tensor([5, 2])).tolist() == [5, 9]


def test_heaviside_and_nextafter_refuse_grad():
    a = ac.tensor([0.0, 1.0], requires_grad=True)
    with pytest.raises(RuntimeError):
        ac.heaviside(a, ac.tensor([0.5]))
    with pytest.raises(RuntimeError):
        ac.nextafter(a, ac.tensor([2.0]))
    assert ac.heaviside(ac.tensor([0, -2, 3]), ac.tensor([7])).tolist() == [7, 0, 1]


# ---- clamp with tensor bounds, clamp_min / clamp_max ---------------------------------

@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (None, 0.2), (-0.2, None)])
def test_clamp_with_tensor_bounds_matches_torch(bounds):
    x = _draw(-1, 1, (4, 5))
    lo = None if bounds[0] is None else _draw(-0.5, 0, (5,), seed=6) + bounds[0]
    hi = None if bounds[1] is None else _draw(0, 0.5, (4, 1), seed=7) + bounds[1]
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    alo = None if lo is None else ac.tensor(lo, requires_grad=True)
    ahi = None if hi is None else ac.tensor(hi, requires_grad=True)
    tlo = None if lo is None else torch.tensor(lo, requires_grad=True)
    thi = None if hi is None else torch.tensor(hi, requires_grad=True)
    out_a, out_t = ac.clamp(a, alo, ahi), torch.clamp(t, tlo, thi)
    np.testing.assert_array_equal(out_a.detach().numpy(), out_t.detach().numpy())
    out_a.sum().backward()
    out_t.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), t.grad.numpy())
    for ab, tb in ((alo, tlo), (ahi, thi)):
        if ab is not None:
            np.testing.assert_array_equal(ab.grad.numpy(), tb.grad.numpy())


def test_clamp_min_max_and_integer_clamps():
    x = _draw(-1, 1, (6,))
    np.testing.assert_array_equal(ac.clamp_min(ac.tensor(x), 0.1).numpy(), torch.clamp_min(torch.tensor(x), 0.1).numpy())
    np.testing.assert_array_equal(ac.tensor(x).clamp_max(ac.tensor(0.2)).numpy(), np.minimum(x, np.float32(0.2)))
    big = [2 ** 62 + 1, -5, 3]
    out = ac.tensor(big).clamp(min=-1, max=2 ** 62)
    assert out.dtype == ac.int64 and out.tolist() == [2 ** 62, -1, 3]
    out = ac.tensor([1, 5]).clamp(min=0.5)
    assert out.dtype == ac.float32 and out.tolist() == [1.0, 5.0]
    out = ac.tensor([1, 200], dtype=ac.uint8).clamp(max=100)
    assert out.dtype == ac.uint8 and out.tolist() == [1, 100]
    t = ac.tensor(x)
    assert t.clamp_(min=0.0) is t and t.numpy().min() >= 0


# ---- composed helpers ----------------------------------------------------------------

def test_lerp_addcmul_addcdiv_match_torch():
    x, y, w = _draw(-1, 1, (3, 4)), _draw(-1, 1, (3, 4), 1), _draw(0, 1, (4,), 2)
    np.testing.assert_allclose(ac.lerp(ac.tensor(x), ac.tensor(y), 0.3).numpy(),
                               torch.lerp(torch.tensor(x), torch.tensor(y), 0.3).numpy(), rtol=1e-5, atol=1e-6)
    a = ac.tensor(x, requires_grad=True)
    ta = torch.tensor(x, requires_grad=True)
    ac.lerp(a, ac.tensor(y), ac.tensor(w)).sum().backward()
    torch.lerp(ta, torch.tensor(y), torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ac.addcmul(ac.tensor(x), ac.tensor(y), ac.tensor(w), value=0.5).numpy(),
                               torch.addcmul(torch.tensor(x), torch.tensor(y), torch.tensor(w), value=0.5).numpy(),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ac.tensor(x).addcdiv(ac.tensor(y), ac.tensor(w) + 1, value=-2).numpy(),
                               torch.tensor(x).addcdiv(torch.tensor(y), torch.tensor(w) + 1, value=-2).numpy(),
                               rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError):
        ac.lerp(ac.tensor([1, 2]), ac.tensor([3, 4]), 0.5)


def test_isclose_allclose_equal_match_torch():
    x = np.array([1.0, NAN, INF, -INF, 1e-9, 2.0], np.float32)
    y = np.array([1.0 + 1e-6, NAN, INF, INF, 0.0, 2.1], np.float32)
    for equal_nan in (False, True):
        np.testing.assert_array_equal(ac.isclose(ac.tensor(x), ac.tensor(y), equal_nan=equal_nan).numpy(),
                                      torch.isclose(torch.tensor(x), torch.tensor(y), equal_nan=equal_nan).numpy())
    assert ac.allclose(ac.tensor([1.0, 2.0]), ac.tensor([1.0, 2.0 + 1e-7]))
    assert not ac.allclose(ac.tensor([1.0, 2.0]), ac.tensor([1.0, 2.1]))
    assert ac.equal(ac.tensor([1, 2]), ac.tensor([1, 2]))
    assert not ac.equal(ac.tensor([1, 2]), ac.tensor([1, 3]))
    assert not ac.equal(ac.tensor([1, 2]), ac.tensor([[1, 2]]))


# ---- bad inputs, scopes, graphs ------------------------------------------------------

def test_bad_inputs_raise_clear_errors():
    with pytest.raises(TypeError):
        ac.erf([1.0, 2.0])
    with pytest.raises(ac.ShapeError):
        ac.maximum(ac.zeros(3), ac.zeros(4))
    with pytest.raises(TypeError):
        ac.maximum(ac.zeros(3), 1.0)      # torch.maximum takes tensors only
    with pytest.raises(TypeError):
        ac.round(ac.zeros(3), decimals=1.5)
    with pytest.raises(TypeError):
        ac.logit(ac.zeros(3), eps="x")
    with pytest.raises(ValueError):
        ac.isclose(ac.zeros(2), ac.zeros(2), rtol=-1)
    assert lib.ac_pointwise(ffi.NULL, lib.AC_PW_ERF, 0, 0, 0) == ffi.NULL
    assert lib.ac_pointwise(ac.zeros(2)._ptr, 9999, 0, 0, 0) == ffi.NULL
    assert lib.ac_pointwise2(ac.zeros(2)._ptr, ffi.NULL, lib.AC_PW2_HYPOT) == ffi.NULL
    assert lib.ac_pointwise2(ac.zeros(2)._ptr, ac.zeros(2)._ptr, -1) == ffi.NULL
    assert ac.erf(ac.tensor([0.5])).item() == pytest.approx(math.erf(0.5), rel=1e-6)   # still usable


def test_empty_and_zero_dim_tensors():
    assert ac.erf(ac.zeros(0, 3)).shape == (0, 3)
    assert ac.maximum(ac.zeros(0), ac.zeros(1)).shape == (0,)
    assert ac.tan(ac.tensor(0.5)).shape == ()
    assert ac.tan(ac.tensor(0.5)).item() == pytest.approx(math.tan(0.5), rel=1e-6)


def test_ops_inside_a_scope_free_their_memory():
    x = ac.randn(64, requires_grad=True)
    before = ac.memory_stats()["bytes_in_use"] if isinstance(ac.memory_stats(), dict) else None
    with ac.checkpoint():
        (ac.erf(x) + ac.maximum(x, x * 2) + ac.atan2(x, x + 1)).sum().backward()
    if before is not None:
        x.grad = None
        assert ac.memory_stats()["bytes_in_use"] <= before


def test_compiled_function_records_pointwise_ops():
    def f(x):
        return ac.erf(x) * ac.maximum(x, ac.tensor(0.0))
    x = ac.randn(5, 3)
    fn = ac.compile(f)
    np.testing.assert_allclose(fn(x).numpy(), f(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(fn(x).numpy(), f(x).numpy(), rtol=1e-6)


# ---- torch.special and the rarer math ------------------------------------------------

SPECIAL_FNS = {
    # name: (range, rtol, atol)
    "i0e": ((-20, 20), 1e-5, 1e-6), "i1": ((-8, 8), 1e-5, 1e-6), "i1e": ((-20, 20), 1e-5, 1e-6),
    "erfcx": ((-3, 30), 1e-5, 1e-6), "ndtr": ((-6, 6), 1e-5, 1e-6), "ndtri": ((0.001, 0.999), 1e-5, 1e-5),
    "log_ndtr": ((-30, 8), 1e-5, 1e-5), "entr": ((0.01, 5), 1e-5, 1e-6), "expit": ((-8, 8), 1e-6, 1e-7),
    "gammaln": ((0.2, 8), 1e-5, 1e-5), "psi": ((0.2, 8), 1e-5, 1e-5), "i0": ((-8, 8), 1e-5, 1e-6),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_FNS))
def test_special_functions_match_torch(name):
    (lo, hi), rtol, atol = SPECIAL_FNS[name]
    x = _draw(lo, hi, (4, 9))
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_a, out_t = getattr(ac.special, name)(a), getattr(torch.special, name)(t)
    _close(out_a.detach().numpy(), out_t.detach().numpy(), rtol, atol)
    out_a.sum().backward()
    out_t.sum().backward()
    _close(a.grad.numpy(), t.grad.numpy(), 1e-4, 1e-5)


def test_special_tails_and_edges():
    p = np.array([0.0, 1e-30, 1e-6, 0.5, 0.999, 1.0, -0.1, NAN], np.float32)
    _close(ac.special.ndtri(ac.tensor(p)).numpy(), torch.special.ndtri(torch.tensor(p)).numpy(), 1e-5, 1e-6)
    x = np.array([-40.0, -10.0, 0.0, 10.0, NAN], np.float32)
    _close(ac.special.log_ndtr(ac.tensor(x)).numpy(), torch.special.log_ndtr(torch.tensor(x)).numpy(), 1e-5, 1e-6)
    x = np.array([-30.0, 0.0, 30.0, 1e10, INF], np.float32)
    _close(ac.special.erfcx(ac.tensor(x)).numpy(), torch.special.erfcx(torch.tensor(x)).numpy(), 1e-5, 1e-20)
    x = np.array([-1.0, 0.0, 0.5, NAN, INF], np.float32)
    _close(ac.special.entr(ac.tensor(x)).numpy(), torch.special.entr(torch.tensor(x)).numpy(), 1e-6, 0)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma_matches_float64(n):
    x = np.array([0.3, 1.0, 2.5, 10.0, -0.5, -1.5, 30.0], np.float32)
    expected = torch.polygamma(n, torch.tensor(x, dtype=torch.float64)).numpy()
    _close(ac.polygamma(n, ac.tensor(x)).numpy(), expected, 1e-5, 1e-6)
    _close(ac.tensor(x).polygamma(n).numpy(), expected, 1e-5, 1e-6)
    a = ac.tensor(x[:4], requires_grad=True)
    ac.polygamma(n, a).sum().backward()
    _close(a.grad.numpy(), torch.polygamma(n + 1, torch.tensor(x[:4], dtype=torch.float64)).numpy(), 1e-4, 1e-5)
    with pytest.raises(ValueError):
        ac.polygamma(-1, ac.tensor(x))


def test_zeta_xlog1py_mvlgamma_ldexp_match_torch():
    x, q = [2.0, 1.0, 0.5, 3.0, 2.0, 4.5], [1.0, 1.0, 1.0, -2.0, -1.5, 0.3]
    _close(ac.special.zeta(ac.tensor(x), ac.tensor(q)).numpy(),
           torch.special.zeta(torch.tensor(x), torch.tensor(q)).numpy(), 1e-5, 1e-6)
    u, v = _draw(-2, 2, (3, 4)), _draw(-0.9, 3, (4,), 1)
    u[0, 0] = 0.0
    a, b = ac.tensor(u, requires_grad=True), ac.tensor(v, requires_grad=True)
    ta, tb = torch.tensor(u, requires_grad=True), torch.tensor(v, requires_grad=True)
    ac.special.xlog1py(a, b).sum().backward()
    torch.special.xlog1py(ta, tb).sum().backward()
    _close(a.grad.numpy(), ta.grad.numpy(), 1e-5, 1e-6)
    _close(b.grad.numpy(), tb.grad.numpy(), 1e-5, 1e-6)
    w = _draw(1.6, 5, (5,))
    _close(ac.mvlgamma(ac.tensor(w), 3).numpy(), torch.mvlgamma(torch.tensor(w), 3).numpy(), 1e-5, 1e-5)
    _close(ac.ldexp(ac.tensor(w), ac.tensor([1, 2, 3, -1, 0])).numpy(),
           torch.ldexp(torch.tensor(w), torch.tensor([1, 2, 3, -1, 0])).numpy(), 1e-6, 0)


def test_gcd_lcm_angle_real_conj():
    a, b = [0, -4, 6, 2 ** 40, 7], [0, 6, -9, 2 ** 20, 0]
    assert ac.gcd(ac.tensor(a), ac.tensor(b)).tolist() == torch.gcd(torch.tensor(a), torch.tensor(b)).tolist()
    assert ac.lcm(ac.tensor(a), ac.tensor(b)).tolist() == torch.lcm(torch.tensor(a), torch.tensor(b)).tolist()
    with pytest.raises(TypeError):
        ac.gcd(ac.tensor([1.0]), ac.tensor([2.0]))
    x = np.array([-1.0, -0.0, 0.0, 2.0, NAN], np.float32)
    _close(ac.angle(ac.tensor(x)).numpy(), torch.angle(torch.tensor(x)).numpy(), 0, 0)
    assert ac.angle(ac.tensor([-1, 2])).dtype == ac.float32
    t = ac.tensor(x)
    assert ac.real(t) is t and ac.conj(t) is t and t.conj_physical() is t
    with pytest.raises(RuntimeError):
        ac.imag(t)
    with pytest.raises(RuntimeError):
        ac.special.zeta(ac.tensor([2.0], requires_grad=True), ac.tensor([1.0]))


@pytest.mark.parametrize("name", ["xlogy", "special.xlog1py"])
def test_xlogy_gradient_at_zero_matches_torch(name):
    fa = ac.xlogy if name == "xlogy" else ac.special.xlog1py
    ft = torch.xlogy if name == "xlogy" else torch.special.xlog1py
    u, v = [0.0, 0.0, 0.0, 1.0, 0.0], [2.0, -2.0, -0.5, 0.5, NAN]
    a, b = ac.tensor(u, requires_grad=True), ac.tensor(v, requires_grad=True)
    ta, tb = torch.tensor(u, requires_grad=True), torch.tensor(v, requires_grad=True)
    _close(fa(a, b).detach().numpy(), ft(ta, tb).detach().numpy(), 1e-6, 0)
    fa(a, b).sum().backward()
    ft(ta, tb).sum().backward()
    _close(a.grad.numpy(), ta.grad.numpy(), 1e-6, 0)
    _close(b.grad.numpy(), tb.grad.numpy(), 1e-6, 0)
