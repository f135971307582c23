"""Reductions, order statistics and scans (aicraft/reductions.py, ops/order.c, ops/scan.c)
against PyTorch: values, dtypes, shapes, indices on ties, gradients, int64/bool inputs and
bad inputs."""
import math

import numpy as np
import pytest

import aicraft as ac

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def to_ac(x, requires_grad=False):
    t = ac.tensor(np.asarray(x))
    if requires_grad:
        t.requires_grad_(True)
    return t


def to_torch(x, requires_grad=False):
    t = torch.from_numpy(np.array(x))
    if requires_grad:
        t.requires_grad_(True)
    return t


def same(a, t, rtol=1e-5, atol=1e-6):
    """aicraft result a equals torch result t: dtype, shape and values (namedtuples too)."""
    if isinstance(t, tuple):
        assert isinstance(a, tuple) and len(a) == len(t)
        for x, y in zip(a, t):
            same(x, y, rtol, atol)
        return
    assert isinstance(a, ac.Tensor), type(a)
    tn = t.detach().numpy()
    an = a.numpy()
    assert an.dtype == tn.dtype, (an.dtype, tn.dtype)
    assert an.shape == tn.shape, (an.shape, tn.shape)
    if tn.dtype.kind == "f":
        np.testing.assert_allclose(an, tn, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(an, tn)


def grads_match(fn_ac, fn_torch, *arrays, rtol=1e-4, atol=1e-5):
    """Gradients of sum(out * w) for a fixed random w agree with torch's."""
    xa = [to_ac(a, True) for a in arrays]
    xt = [to_torch(a, True) for a in arrays]
    oa, ot = fn_ac(*xa), fn_torch(*xt)
    w = RNG.standard_normal(tuple(ot.shape)).astype(np.float32)
    (oa * to_ac(w)).sum().backward()
    (ot * torch.from_numpy(w)).sum().backward()
    for a, t in zip(xa, xt):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


def floats(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ints(*shape, lo=-4, hi=5):
    return RNG.integers(lo, hi, shape).astype(np.int64)


# ---- any, all, prod, count_nonzero, logsumexp, nansum, nanmean --------------------

@pytest.mark.parametrize("make", [lambda: floats(3, 4), lambda: ints(3, 4, lo=0, hi=2),
                                  lambda: ints(3, 4) > 0, lambda: floats(0, 3)])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["any", "all"])
def test_any_all_match_torch(make, dim, keepdim, name):
    x = make()
    if dim is None:
        a = getattr(ac, name)(to_ac(x))
        t = getattr(torch, name)(to_torch(x))
        if keepdim:
            return
    else:
        a = getattr(ac, name)(to_ac(x), dim, keepdim)
        t = getattr(torch, name)(to_torch(x), dim, keepdim)
    same(a, t)


def test_any_all_keep_uint8():
    x = np.array([0, 3, 200], np.uint8)
    same(ac.tensor(x).any(), torch.from_numpy(x).any())
    same(ac.tensor(x).all(), torch.from_numpy(x).all())


@pytest.mark.parametrize("shape,dim", [((3, 4), None), ((3, 4), 1), ((3, 4), -2), ((2, 0, 3), 1),
                                       ((5,), 0), ((), None)])
def test_prod_matches_torch(shape, dim):
    x = floats(*shape)
    if dim is None:
        same(ac.prod(to_ac(x)), torch.prod(to_torch(x)))
    else:
        same(ac.prod(to_ac(x), dim, keepdim=True), torch.prod(to_torch(x), dim, keepdim=True))
        same(to_ac(x).prod(dim), to_torch(x).prod(dim))


def test_prod_gradient_is_exact_with_zeros():
    x = np.array([[2.0, 0.0, 3.0, -1.5], [0.0, 0.0, 1.0, 2.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
    grads_match(lambda a: a.prod(1), lambda t: t.prod(1), x)
    grads_match(lambda a: a.prod(), lambda t: t.prod(), x)


def test_prod_dtype_bool_and_uint8():
    x = ints(3, 4, lo=0, hi=3)
    for dt, tdt in ((ac.bool, torch.bool), (ac.uint8, torch.uint8), (ac.int64, torch.int64)):
        same(ac.prod(to_ac(x), 1, dtype=dt), torch.prod(to_torch(x), 1, dtype=tdt))
        same(ac.prod(to_ac(x) * 100, dtype=dt), torch.prod(to_torch(x) * 100, dtype=tdt))


def test_prod_of_int64_is_exact_and_int64():
    x = np.array([2 ** 31 + 1, 3, 5], np.int64)
    same(ac.prod(to_ac(x)), torch.prod(to_torch(x)))
    same(ac.prod(to_ac(x > 3)), torch.prod(to_torch(x > 3)))
    same(ac.prod(to_ac(x), dtype=ac.float32), torch.prod(to_torch(x), dtype=torch.float32))


@pytest.mark.parametrize("dim", [None, 0, (0, 1)])
def test_count_nonzero(dim):
    x = ints(3, 4, lo=0, hi=2)
    same(ac.count_nonzero(to_ac(x), dim), torch.count_nonzero(to_torch(x), dim))


@pytest.mark.parametrize("dim,keepdim", [(1, False), (0, True), ((0, 1), False), (-1, True)])
def test_logsumexp_values_and_gradient(dim, keepdim):
    x = floats(3, 4) * 30
    same(ac.logsumexp(to_ac(x), dim, keepdim), torch.logsumexp(to_torch(x), dim, keepdim))
    grads_match(lambda a: ac.logsumexp(a, dim, keepdim), lambda t: torch.logsumexp(t, dim, keepdim), x)


def test_logsumexp_infinities_and_ints():
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [-np.inf, 2.0]], np.float32)
    same(ac.logsumexp(to_ac(x), 1), torch.logsumexp(to_torch(x), 1))
    i = ints(2, 3)
    same(ac.logsumexp(to_ac(i), 1), torch.logsumexp(to_torch(i), 1))


def test_nansum_nanmean():
    x = floats(3, 4)
    x[0, 1] = x[2, 2] = np.nan
    x[1, :] = np.nan
    same(ac.nansum(to_ac(x)), torch.nansum(to_torch(x)))
    same(ac.nansum(to_ac(x), 1), torch.nansum(to_torch(x), 1))
    same(ac.nanmean(to_ac(x), 1), torch.nanmean(to_torch(x), 1))
    same(ac.nanmean(to_ac(x), 0, keepdim=True), torch.nanmean(to_torch(x), 0, keepdim=True))
    i = ints(3, 4)
    same(ac.nansum(to_ac(i)), torch.nansum(to_torch(i)))
    with pytest.raises(TypeError):
        ac.nanmean(to_ac(i))


# ---- var/std overloads, var_mean/std_mean, aminmax --------------------------------

@pytest.mark.parametrize("args,kwargs", [((), {}), ((1,), {}), ((1, False), {}), ((0, True, True), {}),
                                         ((True,), {}), ((False,), {}), (((0, 1),), {"correction": 0}),
                                         ((1,), {"correction": 2, "keepdim": True}),
                                         ((None,), {"unbiased": False})])
@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_var_std_overloads(name, args, kwargs):
    x = floats(4, 5)
    same(getattr(ac, name)(to_ac(x), *args, **kwargs), getattr(torch, name)(to_torch(x), *args, **kwargs))
    if name in ("var", "std"):
        same(getattr(to_ac(x), name)(*args, **kwargs), getattr(to_torch(x), name)(*args, **kwargs))


@pytest.mark.parametrize("correction", [0.5, 1.3, -1, -5, 25, 100])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
def test_var_std_fractional_and_negative_corrections(correction, dim):
    x = floats(4, 5)
    for name in ("var", "std"):
        same(getattr(ac, name)(to_ac(x), dim, correction=correction),
             getattr(torch, name)(to_torch(x), dim, correction=correction))
    if correction < 4:      # past N, PyTorch's backward divides by the negative N - c, its forward by 0
        grads_match(lambda a: a.var(dim, correction=correction), lambda t: t.var(dim, correction=correction), x)


def test_var_of_int64_is_refused():
    with pytest.raises(TypeError):
        ac.var(to_ac(ints(3)))


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True)])
def test_aminmax(dim, keepdim):
    x = floats(3, 4)
    kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    a, t = ac.aminmax(to_ac(x), **kw), torch.aminmax(to_torch(x), **kw)
    same(a.min, t.min)
    same(a.max, t.max)


# ---- median, nanmedian, kthvalue, mode --------------------------------------------

@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 6), 1), ((3, 6), 0), ((2, 3, 4), -1), ((), 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_dim_values_and_indices_without_ties(shape, dim, keepdim):
    x = floats(*shape)
    same(ac.median(to_ac(x), dim, keepdim), torch.median(to_torch(x), dim, keepdim))
    same(to_ac(x).nanmedian(dim, keepdim), to_torch(x).nanmedian(dim, keepdim))
    grads_match(lambda a: a.median(dim, keepdim).values, lambda t: t.median(dim, keepdim).values, x)


def test_median_global_lower_median_and_nan():
    for x in (floats(6), floats(3, 5), np.array([1, 2, 2, 5], np.int64)):
        same(ac.median(to_ac(x)), torch.median(to_torch(x)))
    x = np.array([1.0, np.nan, 2.0, np.nan, 0.5], np.float32)
    same(ac.median(to_ac(x)), torch.median(to_torch(x)))
    same(ac.nanmedian(to_ac(x)), torch.nanmedian(to_torch(x)))
    same(ac.median(to_ac(x), 0), torch.median(to_torch(x), 0))
    same(ac.nanmedian(to_ac(x), 0), torch.nanmedian(to_torch(x), 0))
    allnan = np.full((2, 3), np.nan, np.float32)
    same(ac.nanmedian(to_ac(allnan), 1).values, torch.nanmedian(to_torch(allnan), 1).values)
    same(ac.median(ac.zeros(0)), torch.median(torch.zeros(0)))


def test_median_int64_exact():
    big = 2 ** 53
    x = np.array([big + 1, big + 3, big + 2], np.int64)
    same(ac.median(to_ac(x), 0), torch.median(to_torch(x), 0))
    same(ac.median(to_ac(x)), torch.median(to_torch(x)))


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("dim", [0, -1])
def test_kthvalue_without_ties(k, dim):
    x = floats(5, 5)
    same(ac.kthvalue(to_ac(x), k, dim), torch.kthvalue(to_torch(x), k, dim))
    same(to_ac(x).kthvalue(k, dim, True), to_torch(x).kthvalue(k, dim, True))
    grads_match(lambda a: a.kthvalue(k, dim).values, lambda t: t.kthvalue(k, dim).values, x)


def test_kthvalue_indices_on_ties_are_torchs():
    for n in (2, 3, 7, 16, 33):
        x = ints(5, n, lo=0, hi=3)
        xf = x.astype(np.float32)
        xf[xf == 2] = np.nan
        for k in sorted({1, (n + 1) // 2, n}):
            same(ac.kthvalue(to_ac(x), k, 1), torch.kthvalue(to_torch(x), k, 1))
            same(ac.kthvalue(to_ac(xf), k, 1), torch.kthvalue(to_torch(xf), k, 1))


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_indices_on_ties_are_torchs(name):
    x = ints(6, 31, lo=0, hi=4)
    xf = x.astype(np.float32)
    xf[xf == 3] = np.nan
    for data in (x, xf, x[:, :4]):
        same(getattr(ac, name)(to_ac(data), 1), getattr(torch, name)(to_torch(data), 1))
        same(getattr(ac, name)(to_ac(data)), getattr(torch, name)(to_torch(data)))


def test_kthvalue_bad_k():
    with pytest.raises(IndexError):
        ac.kthvalue(to_ac(floats(3)), 4)
    with pytest.raises(IndexError):
        ac.kthvalue(to_ac(floats(3)), 0)
    with pytest.raises(IndexError):
        ac.median(to_ac(floats(0, 3)), 0)


@pytest.mark.parametrize("make", [lambda: ints(4, 10, lo=0, hi=4), lambda: floats(3, 6).round(),
                                  lambda: ints(3, 5, lo=0, hi=2) > 0])
def test_mode_matches_torch_including_ties(make):
    x = make()
    same(ac.mode(to_ac(x)), torch.mode(to_torch(x)))
    same(ac.mode(to_ac(x), 0, True), torch.mode(to_torch(x), 0, True))


@pytest.mark.parametrize("n", [17, 100, 3000])
def test_mode_positions_on_long_rows_are_torchs(n):
    # PyTorch's mode reports a position from its library's unstable sort; aicraft sorts alike
    x = ints(3, n, lo=-9, hi=10)
    xf = x.astype(np.float32)
    xf[xf == 3] = np.nan
    for data in (x, xf, x > 0):
        same(ac.mode(to_ac(data), 1), torch.mode(to_torch(data), 1))


def test_mode_gradient():
    x = np.array([[1.0, 2.0, 2.0, 3.0], [5.0, 5.0, 4.0, 4.0]], np.float32)
    grads_match(lambda a: a.mode(1).values, lambda t: t.mode(1).values, x)


# ---- cummax, cummin, cumprod, logcumsumexp, msort, diff ----------------------------

@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("make", [lambda: floats(4, 6), lambda: ints(4, 6, lo=0, hi=3),
                                  lambda: np.array([1.0, np.nan, 3.0, np.nan, 0.0], np.float32)])
def test_cummax_cummin_match_torch_including_ties_and_nan(name, make):
    x = make()
    for dim in range(x.ndim):
        same(getattr(ac, name)(to_ac(x), dim), getattr(torch, name)(to_torch(x), dim))
        same(getattr(to_ac(x), name)(-1), getattr(to_torch(x), name)(-1))


def test_cummax_gradient():
    x = floats(3, 5)
    grads_match(lambda a: ac.cummax(a, 1).values, lambda t: torch.cummax(t, 1).values, x)


@pytest.mark.parametrize("shape,dim", [((6,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 0, 3), 1), ((), 0)])
def test_cumprod_values_and_gradient(shape, dim):
    x = floats(*shape)
    same(ac.cumprod(to_ac(x), dim), torch.cumprod(to_torch(x), dim))
    if x.size:
        grads_match(lambda a: a.cumprod(dim), lambda t: t.cumprod(dim), x)


def test_cumprod_gradient_with_zeros_and_int64():
    x = np.array([[2.0, 0.0, 3.0, 0.5, 0.0], [1.0, 2.0, 0.0, 4.0, 1.5]], np.float32)
    grads_match(lambda a: a.cumprod(1), lambda t: t.cumprod(1), x)
    i = np.array([3, 2 ** 40, 5, -1], np.int64)
    same(ac.cumprod(to_ac(i), 0), torch.cumprod(to_torch(i), 0))
    same(ac.cumprod(to_ac(i > 0), 0), torch.cumprod(to_torch(i > 0), 0))
    same(ac.cumprod(to_ac(i), 0, dtype=ac.float32), torch.cumprod(to_torch(i), 0, dtype=torch.float32))


def test_logcumsumexp_stable_values_and_gradient():
    x = np.array([[-1000.0, 0.0, 1000.0, 3.0], [-np.inf, -np.inf, 2.0, -np.inf]], np.float32)
    same(ac.logcumsumexp(to_ac(x), 1), torch.logcumsumexp(to_torch(x), 1))
    y = floats(3, 5) * 10
    same(ac.logcumsumexp(to_ac(y), 0), torch.logcumsumexp(to_torch(y), 0))
    grads_match(lambda a: a.logcumsumexp(1), lambda t: t.logcumsumexp(1), y)
    grads_match(lambda a: a.logcumsumexp(1), lambda t: t.logcumsumexp(1), x[:1])


def test_msort():
    x = floats(4, 3)
    same(ac.msort(to_ac(x)), torch.msort(to_torch(x)))


@pytest.mark.parametrize("n,dim", [(0, 0), (1, -1), (2, 0), (3, 1), (5, 1)])
def test_diff(n, dim):
    x = floats(4, 5)
    same(ac.diff(to_ac(x), n, dim), torch.diff(to_torch(x), n, dim))
    i = ints(4, 5)
    same(ac.diff(to_ac(i), n, dim), torch.diff(to_torch(i), n, dim))
    b = ints(4, 5) > 0
    same(ac.diff(to_ac(b), n, dim), torch.diff(to_torch(b), n, dim))
    grads_match(lambda a: ac.diff(a, n, dim), lambda t: torch.diff(t, n, dim), x)


def test_diff_prepend_append():
    x, p, q = floats(3, 4), floats(3, 2), floats(3, 1)
    same(ac.diff(to_ac(x), 1, 1, to_ac(p), to_ac(q)),
         torch.diff(to_torch(x), 1, 1, to_torch(p), to_torch(q)))
    with pytest.raises(RuntimeError):
        ac.diff(ac.tensor(1.0))


# ---- quantile ------------------------------------------------------------------------

@pytest.mark.parametrize("q", [0.0, 0.3, 0.5, 1.0, [0.1, 0.25, 0.9]])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (0, False), (1, True), (-1, False)])
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_matches_torch(q, dim, keepdim, interpolation):
    x = floats(4, 7)
    qa = q if not isinstance(q, list) else ac.tensor(q)
    qt = q if not isinstance(q, list) else torch.tensor(q)
    same(ac.quantile(to_ac(x), qa, dim, keepdim, interpolation=interpolation),
         torch.quantile(to_torch(x), qt, dim, keepdim, interpolation=interpolation))


def test_quantile_nan_and_nanquantile():
    x = floats(3, 6)
    x[0, 2] = np.nan
    x[2, :] = np.nan
    q = torch.tensor([0.2, 0.75])
    same(ac.quantile(to_ac(x), ac.tensor([0.2, 0.75]), 1), torch.quantile(to_torch(x), q, 1))
    same(ac.nanquantile(to_ac(x), ac.tensor([0.2, 0.75]), 1), torch.nanquantile(to_torch(x), q, 1))
    same(ac.nanquantile(to_ac(x), 0.4), torch.nanquantile(to_torch(x), 0.4))


def test_quantile_gradient_and_bad_inputs():
    x = floats(3, 8)
    grads_match(lambda a: ac.quantile(a, 0.37, 1), lambda t: torch.quantile(t, 0.37, 1), x)
    with pytest.raises(ValueError):
        ac.quantile(to_ac(x), 1.5)
    with pytest.raises(TypeError):
        ac.quantile(to_ac(ints(3)), 0.5)
    with pytest.raises(ValueError):
        ac.quantile(to_ac(x), 0.5, interpolation="cubic")


# ---- unique, bincount, histc, searchsorted, bucketize ------------------------------

@pytest.mark.parametrize("make", [lambda: ints(3, 7, lo=-3, hi=4), lambda: floats(10).round(),
                                  lambda: ints(6) > 0, lambda: np.zeros(0, np.int64),
                                  lambda: np.array([2 ** 60 + 1, 2 ** 60, 2 ** 60 + 1], np.int64)])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("counts", [False, True])
def test_unique_and_unique_consecutive(make, inverse, counts):
    x = make()
    same(ac.unique(to_ac(x), return_inverse=inverse, return_counts=counts),
         torch.unique(to_torch(x), return_inverse=inverse, return_counts=counts))
    same(ac.unique(to_ac(x), sorted=False), torch.unique(to_torch(x), sorted=False))
    same(ac.unique_consecutive(to_ac(x), return_inverse=inverse, return_counts=counts),
         torch.unique_consecutive(to_torch(x), return_inverse=inverse, return_counts=counts))
    same(to_ac(x).unique(), to_torch(x).unique())


def test_unique_zero_signs():
    x = np.array([0.0, -0.0, 1.0, -1.0, 1.0], np.float32)
    same(ac.unique(to_ac(x), return_counts=True)[1], torch.unique(to_torch(x), return_counts=True)[1])


@pytest.mark.parametrize("make", [lambda: ints(6, 3, lo=0, hi=2), lambda: ints(2, 5, 2, lo=0, hi=2),
                                  lambda: floats(4, 3).round(), lambda: ints(4, 2) > 0])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_along_a_dim(make, dim):
    x = make()
    for fn in ("unique", "unique_consecutive"):
        same(getattr(ac, fn)(to_ac(x), return_inverse=True, return_counts=True, dim=dim),
             getattr(torch, fn)(to_torch(x), return_inverse=True, return_counts=True, dim=dim))
    with pytest.raises(IndexError):
        ac.unique(to_ac(x), dim=3)


@pytest.mark.parametrize("minlength", [0, 3, 12])
def test_bincount(minlength):
    x = ints(20, lo=0, hi=8)
    w = floats(20)
    same(ac.bincount(to_ac(x), minlength=minlength), torch.bincount(to_torch(x), minlength=minlength))
    same(ac.bincount(to_ac(x), to_ac(w), minlength), torch.bincount(to_torch(x), to_torch(w), minlength))
    same(ac.bincount(ac.zeros(0, dtype=ac.int64)), torch.bincount(torch.zeros(0, dtype=torch.int64)))


def test_bincount_bad_inputs():
    with pytest.raises(ValueError):
        ac.bincount(ac.tensor([1, -1]))
    with pytest.raises(TypeError):
        ac.bincount(ac.tensor([1.0, 2.0]))
    with pytest.raises(TypeError):      # torch gives float64 for integer weights
        ac.bincount(ac.tensor([1, 2]), ac.tensor([1, 2]))
    with pytest.raises(ValueError):
        ac.bincount(ac.tensor([[1, 2]]))


@pytest.mark.parametrize("bins,lo,hi", [(4, 0, 3), (10, 0, 0), (7, -1.5, 2.0), (3, 5, 5)])
def test_histc(bins, lo, hi):
    x = np.concatenate([floats(50), np.array([-1.5, 2.0, 0.0, 3.0], np.float32)])
    same(ac.histc(to_ac(x), bins, lo, hi), torch.histc(to_torch(x), bins, lo, hi))
    with pytest.raises(TypeError):
        ac.histc(to_ac(ints(3)))


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(right):
    seq = np.array([1, 3, 3, 5, 9], np.int64)
    vals = np.array([[0, 3, 4], [9, 10, 5]], np.int64)
    same(ac.searchsorted(to_ac(seq), to_ac(vals), right=right),
         torch.searchsorted(to_torch(seq), to_torch(vals), right=right))
    same(ac.searchsorted(to_ac(seq), to_ac(vals), side="right" if right else "left"),
         torch.searchsorted(to_torch(seq), to_torch(vals), side="right" if right else "left"))
    same(ac.searchsorted(to_ac(seq), 3, right=right), torch.searchsorted(to_torch(seq), 3, right=right))
    fv = vals.astype(np.float32) + 0.5
    same(ac.searchsorted(to_ac(seq), to_ac(fv), right=right),
         torch.searchsorted(to_torch(seq), to_torch(fv), right=right))
    rows = np.sort(floats(3, 6), 1)
    q = floats(3, 4)
    same(ac.searchsorted(to_ac(rows), to_ac(q), right=right),
         torch.searchsorted(to_torch(rows), to_torch(q), right=right))
    same(ac.bucketize(to_ac(fv), to_ac(seq), right=right),
         torch.bucketize(to_torch(fv), to_torch(seq), right=right))


def test_searchsorted_sorter_and_bad_inputs():
    seq = np.array([5.0, 1.0, 3.0], np.float32)
    sorter = np.argsort(seq).astype(np.int64)
    v = np.array([2.0, 6.0], np.float32)
    same(ac.searchsorted(to_ac(seq), to_ac(v), sorter=to_ac(sorter)),
         torch.searchsorted(to_torch(seq), to_torch(v), sorter=to_torch(sorter)))
    with pytest.raises(ValueError):
        ac.searchsorted(to_ac(seq), to_ac(v), right=True, side="left")
    with pytest.raises(ValueError):
        ac.searchsorted(to_ac(floats(2, 3)), to_ac(floats(3, 3)))


def test_int64_order_statistics_are_exact_beyond_float32():
    base = 2 ** 40
    x = np.array([base + 3, base + 1, base + 2, base + 1], np.int64)
    same(ac.kthvalue(to_ac(x), 2).values, torch.kthvalue(to_torch(x), 2).values)
    same(ac.mode(to_ac(x)), torch.mode(to_torch(x)))
    same(ac.cummax(to_ac(x), 0), torch.cummax(to_torch(x), 0))
    same(ac.unique(to_ac(x)), torch.unique(to_torch(x)))
    same(ac.searchsorted(to_ac(np.sort(x)), to_ac(x)), torch.searchsorted(to_torch(np.sort(x)), to_torch(x)))


def test_bad_inputs_raise_and_library_stays_usable():
    x = to_ac(floats(3, 4))
    with pytest.raises(IndexError):
        ac.median(x, 2)
    with pytest.raises(IndexError):
        ac.cumprod(x, 5)
    with pytest.raises(TypeError):
        ac.prod(x, (0, 1))
    with pytest.raises(TypeError):
        ac.median([1, 2])
    with pytest.raises(TypeError):
        ac.logcumsumexp(3.0, 0)
    same(ac.median(x, 1), torch.median(torch.from_numpy(x.numpy()), 1))


# ---- cov, corrcoef, trapezoid, isin, renorm, sum_to_size ----------------------------

@pytest.mark.parametrize("shape", [(3, 6), (6,), (1, 4)])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_cov_and_corrcoef(shape, correction):
    x = floats(*shape)
    same(ac.cov(to_ac(x), correction=correction), torch.cov(to_torch(x), correction=correction))
    grads_match(lambda a: ac.cov(a, correction=correction), lambda t: torch.cov(t, correction=correction), x)
    same(ac.corrcoef(to_ac(x)), torch.corrcoef(to_torch(x)))
    fw, aw = ints(shape[-1], lo=1, hi=4), np.abs(floats(shape[-1])) + 0.1
    same(ac.cov(to_ac(x), correction=correction, fweights=to_ac(fw), aweights=to_ac(aw)),
         torch.cov(to_torch(x), correction=correction, fweights=to_torch(fw), aweights=to_torch(aw)))
    i = ints(*shape)
    same(ac.cov(to_ac(i)), torch.cov(to_torch(i).float()))


@pytest.mark.parametrize("dim", [-1, 0])
def test_trapezoid_and_cumulative(dim):
    y, x = floats(4, 5), np.sort(floats(4 if dim == 0 else 5))
    for fn in ("trapezoid", "trapz", "cumulative_trapezoid"):
        same(getattr(ac, fn)(to_ac(y), dim=dim), getattr(torch, fn)(to_torch(y), dim=dim))
        same(getattr(ac, fn)(to_ac(y), to_ac(x), dim=dim), getattr(torch, fn)(to_torch(y), to_torch(x), dim=dim))
    same(ac.trapezoid(to_ac(y), dx=0.5, dim=dim), torch.trapezoid(to_torch(y), dx=0.5, dim=dim))
    grads_match(lambda a: ac.trapezoid(a, dim=dim), lambda t: torch.trapezoid(t, dim=dim), y)


def test_isin_exact_for_int64():
    big = 2 ** 50
    e = np.array([[big, big + 1], [3, -big]], np.int64)
    t = np.array([big + 1, 3, 7], np.int64)
    same(ac.isin(to_ac(e), to_ac(t)), torch.isin(to_torch(e), to_torch(t)))
    same(ac.isin(to_ac(e), to_ac(t), invert=True), torch.isin(to_torch(e), to_torch(t), invert=True))
    same(ac.isin(to_ac(floats(5)), 0.5), torch.isin(to_torch(floats(5)), 0.5))
    f = floats(6)
    same(ac.isin(to_ac(f), to_ac(f[:3])), torch.isin(to_torch(f), to_torch(f[:3])))


def test_renorm_and_sum_to_size():
    x = floats(4, 3) * 3
    for p, dim, maxnorm in ((2, 0, 1.0), (1, 1, 2.0), (math.inf, 0, 0.5)):
        same(ac.renorm(to_ac(x), p, dim, maxnorm), torch.renorm(to_torch(x), p, dim, maxnorm))
        grads_match(lambda a: a.renorm(p, dim, maxnorm), lambda t: t.renorm(p, dim, maxnorm), x)
    y = floats(2, 3, 4)
    for size in ((3, 1), (1, 4), (2, 1, 1), (4,)):
        same(to_ac(y).sum_to_size(*size), to_torch(y).sum_to_size(*size))
    with pytest.raises(ValueError):
        to_ac(y).sum_to_size(5)


@pytest.mark.parametrize("kwargs", [{"bins": 4, "range": (0.0, 3.0)}, {"bins": 7}, {"bins": 5, "density": True},
                                    {"bins": 3, "range": (-1.0, 1.0), "density": True}])
@pytest.mark.parametrize("weighted", [False, True])
def test_histogram(kwargs, weighted):
    x = np.concatenate([floats(40), np.array([0.0, 3.0, -1.0, 1.0], np.float32)])
    w = np.abs(floats(x.size)) if weighted else None
    a = ac.histogram(to_ac(x), weight=None if w is None else to_ac(w), **kwargs)
    t = torch.histogram(to_torch(x), weight=None if w is None else to_torch(w), **kwargs)
    same(a.hist, t.hist)
    same(a.bin_edges, t.bin_edges)
    edges = np.array([-1.0, 0.0, 0.5, 2.0], np.float32)
    same(ac.histogram(to_ac(x), to_ac(edges)).hist, torch.histogram(to_torch(x), to_torch(edges)).hist)
    same(ac.histogram(to_ac(np.full(3, 2.0, np.float32)), 4).bin_edges,
         torch.histogram(torch.full((3,), 2.0), 4).bin_edges)


def test_cumsum_dtype_converts_the_input_first():
    x = np.array([0.5, 0.5, 1.5, -2.7], np.float32)
    same(ac.cumsum(to_ac(x), 0, dtype=ac.int64), torch.cumsum(to_torch(x), 0, dtype=torch.int64))
    same(to_ac(x).cumsum(0, dtype=ac.int64), to_torch(x).cumsum(0, dtype=torch.int64))
    i = ints(5)
    same(ac.cumsum(to_ac(i), 0, dtype=ac.float32), torch.cumsum(to_torch(i), 0, dtype=torch.float32))


def test_quantile_is_differentiable_in_q():
    x = floats(3, 7)
    q = np.array([0.1, 0.55, 0.9], np.float32)
    grads_match(lambda a, b: ac.quantile(a, b, 1), lambda t, u: torch.quantile(t, u, 1), x, q)


def test_searchsorted_refuses_int32_output():
    with pytest.raises(NotImplementedError):
        ac.searchsorted(ac.tensor([1, 2, 3]), ac.tensor([2]), out_int32=True)
    with pytest.raises(NotImplementedError):
        ac.bucketize(ac.tensor([2.0]), ac.tensor([1.0, 3.0]), out_int32=True)


def test_sum_to_size_of_nothing_sums_everything():
    b = ints(2, 3) > 0
    same(to_ac(b).sum_to_size(()), to_torch(b).sum_to_size(()))
    same(to_ac(b).sum_to_size(2, 3), to_torch(b).sum_to_size(2, 3))
