"""The Python Tensor API (DESIGN section 4): properties, conversions, operators,
methods and module functions against NumPy float64 references; grad mode,
detach, keep, in-place updates, gradcheck and the graph dumps."""
import copy
import gc
import math
import pickle
import threading

import numpy as np
import pytest

import aicraft as ac
import aicraft.functional as F

rng = np.random.default_rng(7)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def close(t, expected, rtol=1e-5, atol=1e-6):
    assert isinstance(t, ac.Tensor)
    got = t.numpy()
    expected = np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape, "shape %s, expected %s" % (got.shape, expected.shape)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


# ---- properties and conversions ----------------------------------------------

def test_properties_of_a_new_tensor():
    x = arr(2, 3, 4)
    t = ac.tensor(x)
    assert t.shape == (2, 3, 4) and isinstance(t.shape, tuple)
    assert t.ndim == 3 and t.dim() == 3
    assert t.numel() == 24 and len(t) == 2
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.dtype == np.float32 and t.dtype == "float32" and ac.float32 == np.float32
    assert t.requires_grad is False and t.grad is None and t.is_leaf


def test_numpy_is_a_float32_copy():
    x = arr(3, 2)
    t = ac.tensor(x)
    a = t.numpy()
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, x)
    a[0, 0] = 100.0
    assert t.numpy()[0, 0] == x[0, 0]
    np.testing.assert_array_equal(np.asarray(t), x)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_item_tolist_float_int_bool():
    t = ac.tensor(2.5)
    assert t.shape == () and t.ndim == 0 and t.numel() == 1
    assert t.item() == 2.5 and isinstance(t.item(), float)
    assert float(t) == 2.5 and int(t) == 2 and bool(t) is True and bool(ac.tensor([0.0])) is False
    assert ac.tensor([[1, 2], [3, 4]]).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert ac.tensor(3.0).tolist() == 3.0


def test_tensor_accepts_lists_arrays_scalars_and_tensors():
    np.testing.assert_array_equal(ac.tensor([1, 2, 3]).numpy(), [1, 2, 3])
    np.testing.assert_array_equal(ac.tensor(np.arange(6, dtype=np.int64).reshape(2, 3)).numpy(),
                                  np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(ac.tensor([True, False]).numpy(), [1.0, 0.0])
    src = ac.tensor([1.0, 2.0])
    copy = ac.tensor(src)
    np.testing.assert_array_equal(copy.numpy(), [1.0, 2.0])
    assert ac.tensor(np.zeros((0, 3))).shape == (0, 3)


def test_from_numpy_copies_any_numeric_dtype():
    for dtype in (np.float64, np.float16, np.int8, np.int32, np.uint16, np.bool_):
        a = np.arange(6).reshape(2, 3).astype(dtype)
        t = ac.from_numpy(a)
        np.testing.assert_array_equal(t.numpy(), a.astype(np.float32))
    a = np.arange(4, dtype=np.float32)
    t = ac.from_numpy(a)
    a[0] = 9.0
    assert t.numpy()[0] == 0.0
    strided = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    np.testing.assert_array_equal(ac.from_numpy(strided).numpy(), strided)


def test_from_numpy_copies_float32_arrays_of_any_layout():
    values = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    body = b"x" + values.tobytes()       # a request's rows: read-only, at an odd address
    rows = np.frombuffer(memoryview(body)[1:], np.float32).reshape(3, 4)
    cases = [rows, values[:, ::2], np.asfortranarray(values), values.astype(">f4"), values.T,
             np.array(2.5, np.float32), np.zeros((0, 3), np.float32), values[1:2]]
    for a in cases:
        t = ac.from_numpy(a)
        assert t.dtype is ac.float32 and t.shape == a.shape
        np.testing.assert_array_equal(t.numpy(), a)
    with ac.checkpoint():
        t = ac.from_numpy(values)
        values[0, 0] = 100.0                  # a copy, in the scope like any other tensor
        assert t[0, 0].item() == -5.5
    with pytest.raises(ac.ScopeError):
        t.numpy()


def test_numpy_gives_a_fresh_array_of_the_tensors_dtype():
    for t, expected in [(ac.tensor([[1.5, -2.0], [3.0, 4.0]]), np.array([[1.5, -2.0], [3.0, 4.0]], np.float32)),
                        (ac.tensor([2 ** 62, -3]), np.array([2 ** 62, -3], np.int64)),
                        (ac.tensor([True, False, True]), np.array([True, False, True])),
                        (ac.tensor([7, 255], dtype=ac.uint8), np.array([7, 255], np.uint8)),
                        (ac.tensor(1.25), np.array(1.25, np.float32)),
                        (ac.zeros(0, 3), np.zeros((0, 3), np.float32))]:
        a = t.numpy()
        assert a.dtype == expected.dtype and a.shape == expected.shape
        np.testing.assert_array_equal(a, expected)
        assert a.flags.writeable and a.flags.owndata and a.flags.c_contiguous
        if a.size:
            before = t.numpy().copy()
            a[...] = 0                        # the tensor is not a view of it
            np.testing.assert_array_equal(t.numpy(), before)


def test_repr_looks_like_pytorch():
    assert repr(ac.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(ac.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    y = ac.tensor([1.0], requires_grad=True) * 2
    assert repr(y).startswith("tensor([2.], grad_fn=<")
    assert repr(ac.tensor(1.5)) == "tensor(1.5)"
    assert str(ac.zeros(2, 2)) == "tensor([[0., 0.],\n        [0., 0.]])"


# ---- creation ------------------------------------------------------------------

def test_zeros_ones_full_take_shapes_as_ints_or_sequences():
    assert ac.zeros(2, 3).shape == (2, 3) and ac.zeros((2, 3)).shape == (2, 3)
    assert ac.ones([4]).shape == (4,) and ac.zeros().shape == ()
    np.testing.assert_array_equal(ac.zeros(2, 3).numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(ac.ones(3, 1).numpy(), np.ones((3, 1)))
    np.testing.assert_array_equal(ac.full((2, 2), -1.5).numpy(), np.full((2, 2), -1.5))
    t = ac.zeros(3, requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_like_functions_copy_the_shape():
    base = ac.tensor(arr(2, 5))
    np.testing.assert_array_equal(ac.zeros_like(base).numpy(), np.zeros((2, 5)))
    np.testing.assert_array_equal(ac.ones_like(base).numpy(), np.ones((2, 5)))
    np.testing.assert_array_equal(ac.full_like(base, 7).numpy(), np.full((2, 5), 7.0))
    assert ac.ones_like(base, requires_grad=True).requires_grad


def test_rand_randn_and_manual_seed():
    ac.manual_seed(123)
    a = ac.rand(1000).numpy()
    ac.manual_seed(123)
    b = ac.rand(1000).numpy()
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0.0 and a.max() < 1.0 and 0.4 < a.mean() < 0.6
    n = ac.randn(20000).numpy().astype(np.float64)
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1.0) < 0.05
    assert ac.randn(2, 3, requires_grad=True).requires_grad


def test_arange_and_eye_match_numpy():
    np.testing.assert_allclose(ac.arange(5).numpy(), np.arange(5))
    np.testing.assert_allclose(ac.arange(1, 4).numpy(), np.arange(1, 4))
    np.testing.assert_allclose(ac.arange(0, 1, 0.25).numpy(), np.arange(0, 1, 0.25))
    np.testing.assert_allclose(ac.arange(5, 0, -2).numpy(), np.arange(5, 0, -2))
    np.testing.assert_array_equal(ac.eye(3).numpy(), np.eye(3))
    np.testing.assert_array_equal(ac.eye(2, 4).numpy(), np.eye(2, 4))


def test_cat_and_stack_match_numpy():
    a, b = arr(2, 3), arr(4, 3)
    close(ac.cat([ac.tensor(a), ac.tensor(b)]), np.concatenate([a, b]))
    c, d = arr(2, 3), arr(2, 1)
    close(ac.cat((ac.tensor(c), ac.tensor(d)), dim=1), np.concatenate([c, d], axis=1))
    close(ac.cat([ac.tensor(c), ac.tensor(d)], dim=-1), np.concatenate([c, d], axis=-1))
    e = arr(2, 3)
    close(ac.stack([ac.tensor(c), ac.tensor(e)]), np.stack([c, e]))
    close(ac.stack([ac.tensor(c), ac.tensor(e)], dim=2), np.stack([c, e], axis=2))


def test_cat_and_stack_are_differentiable():
    a = ac.tensor(arr(2, 3), requires_grad=True)
    b = ac.tensor(arr(1, 3), requires_grad=True)
    (ac.cat([a, b]) * ac.tensor([[1.0], [2.0], [3.0]])).sum().backward()
    close(a.grad, [[1, 1, 1], [2, 2, 2]])
    close(b.grad, [[3, 3, 3]])
    c = ac.tensor(arr(3), requires_grad=True)
    ac.stack([c, c * 2]).sum().backward()
    close(c.grad, [3, 3, 3])


# ---- operators -----------------------------------------------------------------

BINARY = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b),
]


@pytest.mark.parametrize("name,op", BINARY)
def test_binary_operators_broadcast_like_numpy(name, op):
    x, y = arr(3, 1, 4), arr(2, 4) + 3.0
    expected = op(x.astype(np.float64), y.astype(np.float64))
    close(op(ac.tensor(x), ac.tensor(y)), expected)
    close(getattr(ac.tensor(x), name)(ac.tensor(y)), expected)
    close(getattr(ac, name)(ac.tensor(x), ac.tensor(y)), expected)


@pytest.mark.parametrize("name,op", BINARY)
def test_binary_operators_take_python_and_numpy_scalars_both_sides(name, op):
    x = np.abs(arr(2, 3)) + 0.5
    x64 = x.astype(np.float64)
    t = ac.tensor(x)
    for s in (2, 2.5, np.float32(1.5), np.float64(-3.0), np.int64(4)):
        close(op(t, s), op(x64, float(s)), rtol=1e-5)
        close(op(s, t), op(float(s), x64), rtol=1e-5)


def test_operators_with_numpy_arrays_return_tensors():
    x, y = arr(2, 3), arr(2, 3)
    t = ac.tensor(x)
    r = y + t
    assert isinstance(r, ac.Tensor)
    close(r, y.astype(np.float64) + x)
    close(t * y, x.astype(np.float64) * y)
    close(y - t, y.astype(np.float64) - x)


def test_pow_and_rpow():
    x = np.abs(arr(5)) + 0.5
    x64 = x.astype(np.float64)
    t = ac.tensor(x)
    close(t ** 2, x64 ** 2, rtol=1e-5)
    close(t ** 0.5, x64 ** 0.5, rtol=1e-5)
    close(t ** ac.tensor(x), x64 ** x64, rtol=1e-5)
    close(2 ** t, 2.0 ** x64, rtol=1e-5)
    close(t.pow(3), x64 ** 3, rtol=1e-5)


def test_unary_minus_abs_and_matmul():
    x, y = arr(3, 4), arr(4, 2)
    t = ac.tensor(x)
    close(-t, -x.astype(np.float64))
    close(abs(t), np.abs(x))
    close(+t, x)
    close(t @ ac.tensor(y), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)
    close(ac.matmul(ac.tensor(x), ac.tensor(y)), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)
    close(t.matmul(ac.tensor(y)), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)
    close(x @ ac.tensor(y), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)
    b1, b2 = arr(2, 3, 4), arr(4, 5)
    close(ac.tensor(b1) @ ac.tensor(b2), b1.astype(np.float64) @ b2, rtol=1e-5, atol=1e-5)


def test_operators_reject_strings_and_other_objects_with_type_error():
    t = ac.ones(3)
    for bad in ("a", None, object(), [1, 2, 3], {1: 2}, 1j):
        with pytest.raises(TypeError):
            t + bad
        with pytest.raises(TypeError):
            bad * t
    with pytest.raises(TypeError):
        t @ 2.0


# ---- math, activations, reductions ---------------------------------------------

def gelu64(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def softmax64(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


UNARY = [
    ("exp", np.exp, lambda s: rng.standard_normal(s)),
    ("log", np.log, lambda s: rng.uniform(0.1, 3.0, s)),
    ("sqrt", np.sqrt, lambda s: rng.uniform(0.1, 3.0, s)),
    ("abs", np.abs, lambda s: rng.standard_normal(s)),
    ("sin", np.sin, lambda s: rng.standard_normal(s)),
    ("cos", np.cos, lambda s: rng.standard_normal(s)),
    ("relu", lambda x: np.maximum(x, 0.0), lambda s: rng.standard_normal(s)),
    ("sigmoid", lambda x: 1.0 / (1.0 + np.exp(-x)), lambda s: rng.standard_normal(s)),
    ("tanh", np.tanh, lambda s: rng.standard_normal(s)),
    ("gelu", gelu64, lambda s: rng.standard_normal(s)),
]


@pytest.mark.parametrize("name,ref,gen", UNARY, ids=[u[0] for u in UNARY])
def test_unary_methods_and_functions_match_numpy(name, ref, gen):
    x = gen((3, 4)).astype(np.float32)
    expected = ref(x.astype(np.float64))
    close(getattr(ac.tensor(x), name)(), expected, rtol=1e-5, atol=1e-6)
    if hasattr(ac, name):
        close(getattr(ac, name)(ac.tensor(x)), expected, rtol=1e-5, atol=1e-6)
    if hasattr(F, name):
        close(getattr(F, name)(ac.tensor(x)), expected, rtol=1e-5, atol=1e-6)


def test_clamp_with_one_or_both_bounds():
    x = arr(10) * 3
    t = ac.tensor(x)
    close(t.clamp(-1, 1), np.clip(x, -1, 1))
    close(t.clamp(min=0), np.maximum(x, 0))
    close(t.clamp(max=0.5), np.minimum(x, 0.5))
    close(ac.clamp(t, -0.5, 0.5), np.clip(x, -0.5, 0.5))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax(dim):
    x = arr(3, 5).astype(np.float64)
    t = ac.tensor(x)
    close(t.softmax(dim), softmax64(x, dim), rtol=1e-5)
    close(F.softmax(t, dim=dim), softmax64(x, dim), rtol=1e-5)
    close(t.log_softmax(dim), np.log(softmax64(x, dim)), rtol=1e-5, atol=1e-5)
    close(ac.log_softmax(t, dim), np.log(softmax64(x, dim)), rtol=1e-5, atol=1e-5)


REDUCTIONS = [
    ("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min),
    ("amax", np.max), ("amin", np.min),
]


@pytest.mark.parametrize("name,ref", REDUCTIONS)
def test_reductions_over_all_one_and_several_dims(name, ref):
    x = arr(2, 3, 4)
    x64 = x.astype(np.float64)
    t = ac.tensor(x)
    method = getattr(t, name)
    close(method(), ref(x64), rtol=1e-5, atol=1e-5)
    assert method().shape == ()
    for dims in [(0, 2), (1,), (-1, 0), (0, 1, 2)]:
        close(method(dim=dims), ref(x64, axis=dims), rtol=1e-5, atol=1e-5)
        close(method(dim=dims, keepdim=True), ref(x64, axis=dims, keepdims=True), rtol=1e-5, atol=1e-5)
        close(method(axis=dims, keepdims=True), ref(x64, axis=dims, keepdims=True), rtol=1e-5, atol=1e-5)
    if name in ("sum", "mean"):
        close(method(1), ref(x64, axis=1), rtol=1e-5, atol=1e-5)
        close(method(-1, True), ref(x64, axis=-1, keepdims=True), rtol=1e-5, atol=1e-5)
        close(getattr(ac, name)(t, 1), ref(x64, axis=1), rtol=1e-5, atol=1e-5)


def test_max_and_min_along_a_dim_return_values_and_indices():
    x = arr(3, 5)
    t = ac.tensor(x)
    for name, ref, arg in (("max", np.max, np.argmax), ("min", np.min, np.argmin)):
        result = getattr(t, name)(1)
        values, indices = result
        assert result.values is values and result.indices is indices
        close(values, ref(x, axis=1))
        np.testing.assert_array_equal(indices.numpy(), arg(x, axis=1))
        kept = getattr(t, name)(dim=0, keepdim=True)
        close(kept.values, ref(x, axis=0, keepdims=True))
        np.testing.assert_array_equal(kept.indices.numpy(), arg(x, axis=0)[None, :])
        close(getattr(t, name)(axis=0), ref(x, axis=0))
        close(getattr(ac, name)(t), ref(x))


def test_argmax_and_argmin():
    x = arr(4, 6)
    t = ac.tensor(x)
    assert t.argmax().item() == np.argmax(x)
    assert t.argmin().item() == np.argmin(x)
    np.testing.assert_array_equal(t.argmax(1).numpy(), np.argmax(x, axis=1))
    np.testing.assert_array_equal(t.argmax(0, keepdim=True).numpy(), np.argmax(x, axis=0)[None])
    np.testing.assert_array_equal(ac.argmax(t, dim=-1).numpy(), np.argmax(x, axis=-1))
    np.testing.assert_array_equal(t.argmin(dim=1).numpy(), np.argmin(x, axis=1))
    assert t.argmax(keepdim=True).shape == (1, 1)


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_and_std_default_to_bessels_correction(name):
    x = arr(4, 5)
    x64 = x.astype(np.float64)
    t = ac.tensor(x)
    ref = getattr(np, name)
    method = getattr(t, name)
    close(method(), ref(x64, ddof=1), rtol=1e-5)
    close(method(1), ref(x64, axis=1, ddof=1), rtol=1e-5)
    close(method(dim=0, keepdim=True), ref(x64, axis=0, ddof=1, keepdims=True), rtol=1e-5)
    close(method(dim=(0, 1), correction=0), ref(x64, ddof=0), rtol=1e-5)
    close(method(axis=1, ddof=0), ref(x64, axis=1, ddof=0), rtol=1e-5)
    close(method(0, unbiased=False), ref(x64, axis=0, ddof=0), rtol=1e-5)


def test_sum_accepts_dim_as_a_list_and_rejects_dim_and_axis_together():
    t = ac.tensor(arr(2, 3))
    close(t.sum([0, 1]), t.numpy().astype(np.float64).sum())
    with pytest.raises(TypeError):
        t.sum(dim=0, axis=1)


# ---- shapes and indexing ---------------------------------------------------------

def test_reshape_view_flatten():
    x = arr(2, 3, 4)
    t = ac.tensor(x)
    close(t.reshape(6, 4), x.reshape(6, 4))
    close(t.reshape((4, -1)), x.reshape(4, -1))
    close(t.view(-1), x.reshape(-1))
    close(t.view([3, 8]), x.reshape(3, 8))
    close(t.flatten(), x.reshape(-1))
    close(t.flatten(1), x.reshape(2, 12))
    close(t.flatten(0, 1), x.reshape(6, 4))
    close(ac.flatten(t, start_dim=1), x.reshape(2, 12))
    close(ac.reshape(t, (24,)), x.reshape(24))


def test_transpose_permute_and_T():
    x = arr(2, 3, 4)
    t = ac.tensor(x)
    close(t.transpose(0, 2), np.swapaxes(x, 0, 2))
    close(t.transpose(-1, -2), np.swapaxes(x, -1, -2))
    close(t.permute(2, 0, 1), np.transpose(x, (2, 0, 1)))
    close(t.permute((1, 2, 0)), np.transpose(x, (1, 2, 0)))
    m = arr(3, 5)
    close(ac.tensor(m).T, m.T)
    v = arr(4)
    close(ac.tensor(v).T, v)                     # 1-D: unchanged, as PyTorch


def test_squeeze_and_unsqueeze():
    x = arr(1, 3, 1, 2)
    t = ac.tensor(x)
    close(t.squeeze(), x.squeeze())
    close(t.squeeze(0), x.squeeze(0))
    close(t.squeeze((0, 2)), x.squeeze((0, 2)))
    close(t.squeeze(-2), x.squeeze(-2))
    close(t.unsqueeze(0), x[None])
    close(t.unsqueeze(-1), x[..., None])
    close(ac.unsqueeze(t, 2), np.expand_dims(x, 2))


INDICES = [
    1, -1, (0, 1), (slice(None), 2), (slice(1, None),), (slice(None, None, 2),),
    (slice(0, 3, 2), slice(1, 4, 2)), (Ellipsis, 1), (1, Ellipsis), (None,), (None, 0, None),
    (Ellipsis, None), (slice(None), None, slice(1, 3)), (0, slice(None), -1), (slice(-2, None),),
    (slice(None, -1), Ellipsis, slice(None, None, 3)), (slice(5, 10),), Ellipsis, (1, 2, 3),
]


@pytest.mark.parametrize("index", INDICES, ids=[repr(i) for i in INDICES])
def test_getitem_matches_numpy(index):
    x = arr(3, 4, 5)
    close(ac.tensor(x)[index], x[index])


def test_getitem_is_differentiable():
    x = ac.tensor(arr(3, 4), requires_grad=True)
    x[1:, ::2].sum().backward()
    expected = np.zeros((3, 4))
    expected[1:, ::2] = 1.0
    close(x.grad, expected)


def test_len_and_iteration_over_the_first_dim():
    x = arr(3, 2)
    t = ac.tensor(x)
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3
    for row, expected in zip(rows, x):
        close(row, expected)
    with pytest.raises(TypeError):
        len(ac.tensor(1.0))


# ---- autograd ------------------------------------------------------------------

def test_backward_accumulates_into_leaf_grads():
    a_np, b_np = arr(4), arr(4)
    a = ac.tensor(a_np, requires_grad=True)
    b = ac.tensor(b_np, requires_grad=True)
    loss = ((a * b) + a).sum()
    assert not loss.is_leaf and loss.requires_grad
    loss.backward()
    close(a.grad, b_np.astype(np.float64) + 1)
    close(b.grad, a_np)
    ((a * b) + a).sum().backward()
    close(a.grad, 2 * (b_np.astype(np.float64) + 1))
    a.grad = None
    assert a.grad is None
    b.grad.zero_()
    close(b.grad, np.zeros(4))


def test_backward_with_an_explicit_gradient():
    x_np = arr(2, 3)
    x = ac.tensor(x_np, requires_grad=True)
    g = arr(2, 3)
    (x * 3).backward(ac.tensor(g))
    close(x.grad, 3.0 * g)
    y = ac.tensor(x_np, requires_grad=True)
    (y * 2).backward(g)                      # a NumPy gradient is accepted too
    close(y.grad, 2.0 * g)


def test_requires_grad_setter_and_requires_grad_():
    t = ac.ones(3)
    assert t.requires_grad_() is t and t.requires_grad
    t.requires_grad = False
    assert not t.requires_grad
    (t * 2).sum()                            # no graph, no error
    y = ac.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError):
        y.requires_grad = False


def test_detach_shares_memory_and_drops_the_graph():
    x = ac.tensor(arr(3), requires_grad=True)
    y = x * 2
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    close(d, y.numpy())
    data = x.data
    assert not data.requires_grad
    with ac.no_grad():
        data += 1.0                              # x.data shares x's memory
    close(x, data.numpy())


def test_clone_is_a_differentiable_copy():
    x = ac.tensor(arr(3), requires_grad=True)
    c = x.clone()
    assert not c.is_leaf
    (c * c).sum().backward()
    close(x.grad, 2 * x.numpy().astype(np.float64))


def test_no_grad_as_context_manager_and_decorator():
    x = ac.ones(2, requires_grad=True)
    assert ac.is_grad_enabled()
    with ac.no_grad():
        assert not ac.is_grad_enabled()
        y = x * 2
        with ac.enable_grad():
            assert ac.is_grad_enabled()
            z = x * 2
        assert not ac.is_grad_enabled()
    assert ac.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf
    assert z.requires_grad

    @ac.no_grad()
    def step(t):
        assert not ac.is_grad_enabled()
        return t * 3

    assert not step(x).requires_grad
    assert step.__name__ == "step"
    assert ac.is_grad_enabled()


def test_no_grad_restores_the_mode_after_an_exception():
    with pytest.raises(KeyError):
        with ac.no_grad():
            raise KeyError("boom")
    assert ac.is_grad_enabled()
    with ac.set_grad_enabled(False):
        assert not ac.is_grad_enabled()
    assert ac.is_grad_enabled()


def test_grad_mode_is_per_thread():
    seen = []
    with ac.no_grad():
        worker = threading.Thread(target=lambda: seen.append(ac.is_grad_enabled()))
        worker.start()
        worker.join()
    assert seen == [True]


def test_inplace_updates_under_no_grad():
    w_np = arr(3)
    w = ac.tensor(w_np, requires_grad=True)
    (w * w).sum().backward()
    with ac.no_grad():
        w -= 0.1 * w.grad
    close(w, w_np - 0.1 * 2 * w_np.astype(np.float64), rtol=1e-5)
    assert w.requires_grad and w.is_leaf
    with ac.no_grad():
        w.add_(1.0)
        w.mul_(2.0)
        w.div_(4.0)
        w.sub_(ac.ones(3))
    expected = (w_np - 0.2 * w_np.astype(np.float64) + 1.0) * 2.0 / 4.0 - 1.0
    close(w, expected, rtol=1e-5)
    with ac.no_grad():
        w.fill_(3.0)
        w.copy_(ac.full((3,), 2.0))
    close(w, [2.0, 2.0, 2.0])
    t = ac.zeros(2)
    t += 1                                       # nothing requires grad: allowed with grad on
    close(t, [1.0, 1.0])


def test_inplace_on_a_tensor_that_requires_grad_needs_no_grad():
    w = ac.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        w -= 1.0
    with pytest.raises(RuntimeError):
        w.zero_()
    with pytest.raises(ac.ShapeError):
        with ac.no_grad():
            w += ac.ones(2, 3)                   # the result does not fit w


def test_inplace_writes_the_out_of_place_bits_without_a_new_tensor():
    a_np, b_np, row_np = arr(4, 5), arr(4, 5) + 3.0, arr(5) - 1.0
    for name, op in (("add_", np.add), ("sub_", np.subtract), ("mul_", np.multiply), ("div_", np.divide)):
        for other, other_np in ((ac.tensor(b_np), b_np), (ac.tensor(row_np), row_np), (2.5, 2.5)):
            with ac.checkpoint():                # a result made on the way would stay here
                a = ac.tensor(a_np)
                out_of_place = getattr(a, name[:-1])(other).numpy()
                before = ac.memory_stats()["bytes_in_use"]
                assert getattr(a, name)(other) is a
                assert ac.memory_stats()["bytes_in_use"] == before
                np.testing.assert_array_equal(a.numpy(), out_of_place)
                close(a, op(a_np.astype(np.float64), other_np), rtol=1e-6)
    a = ac.tensor(a_np)
    a += a                                       # the operand is the tensor written
    np.testing.assert_array_equal(a.numpy(), a_np + a_np)
    counts = ac.tensor([1, 2, 3])
    counts.add_(2)                               # int64 keeps its dtype
    assert counts.dtype == ac.int64 and counts.tolist() == [3, 4, 5]


def test_alpha_scales_the_other_operand():
    a_np, b_np = arr(3, 4), arr(3, 4) - 0.5
    a, b = ac.tensor(a_np), ac.tensor(b_np)
    close(a.add(b, alpha=-0.1), a_np - 0.1 * b_np.astype(np.float64), rtol=1e-6)
    close(ac.sub(a, b, alpha=3), a_np - 3 * b_np.astype(np.float64), rtol=1e-6)
    close(a.add(2.0, alpha=0.5), a_np + 1.0, rtol=1e-6)
    w = ac.tensor(a_np, requires_grad=True)
    (w * w).sum().backward()
    with ac.no_grad():
        w.add_(w.grad, alpha=-0.1)               # word_language_model's SGD step
        w.sub_(b, alpha=2)
    close(w, a_np - 0.2 * a_np.astype(np.float64) - 2 * b_np, rtol=1e-5)
    x = ac.tensor(a_np, requires_grad=True)
    ac.add(x, x, alpha=2).sum().backward()
    close(x.grad, np.full((3, 4), 3.0))
    for bad in ("2", None, ac.ones(1), True):
        with pytest.raises(TypeError, match="alpha"):
            a.add(b, alpha=bad)
        with pytest.raises(TypeError, match="alpha"):
            a.sub_(b, alpha=bad)


def test_inplace_and_alpha_match_torch():
    torch = pytest.importorskip("torch")
    a_np, b_np = arr(3, 4), arr(4) + 2.0
    mine, theirs = ac.tensor(a_np), torch.tensor(a_np)
    for name, other, kwargs in (("add_", b_np, {"alpha": -0.5}), ("sub_", b_np, {"alpha": 2}),
                                ("mul_", b_np, {}), ("div_", b_np, {}), ("add_", 1.5, {}),
                                ("div_", 3.0, {})):
        getattr(mine, name)(ac.tensor(other) if isinstance(other, np.ndarray) else other, **kwargs)
        getattr(theirs, name)(torch.tensor(other) if isinstance(other, np.ndarray) else other, **kwargs)
    close(mine, theirs.numpy(), rtol=1e-6)


def test_keep_outlives_the_scope():
    x = ac.tensor(arr(4), requires_grad=True)
    with ac.checkpoint():
        y = (x * 2).sum()
        kept = y.keep()
    assert kept.is_leaf and not kept.requires_grad
    close(kept, 2 * x.numpy().astype(np.float64).sum(), rtol=1e-5)


def test_copy_deepcopy_and_pickle_each_own_their_tensor():
    gc.collect()
    live = ac.memory_stats()["live_tensors"]
    x = ac.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    shallow = copy.copy(y)
    assert shallow is not y and not shallow.is_leaf
    deep = copy.deepcopy(x)
    assert deep.is_leaf and deep.requires_grad
    with ac.no_grad():
        deep += 1.0
    close(x, [1.0, 2.0])                         # deep copies do not share memory
    restored = pickle.loads(pickle.dumps(y))
    close(restored, [3.0, 6.0])
    del x, y
    gc.collect()
    close(shallow, [3.0, 6.0])                   # still valid: its own reference
    del shallow, deep, restored
    gc.collect()
    assert ac.memory_stats()["live_tensors"] == live


def test_gradcheck_passes_good_gradients_and_reports_bad_ones():
    x = ac.randn(3, 2, requires_grad=True)
    y = ac.randn(2, requires_grad=True)
    assert ac.gradcheck(lambda a, b: (a * b).tanh(), (x, y))
    assert ac.gradcheck(lambda a: a.exp().sum(1), x, eps=1e-2)
    with ac.checkpoint():
        assert ac.gradcheck(lambda a: (a @ a.T).relu() + 1, [x])

    def fails(a):
        raise KeyError("inside fn")
    with pytest.raises(KeyError):
        ac.gradcheck(fails, [x])


def test_gradcheck_detects_a_wrong_gradient():
    x = ac.tensor([0.5, 1.0, 1.5], requires_grad=True)

    def detached_square(a):
        # a * a.detach(): forward is a**2 but the analytic grad is only a, half the true one
        return a * a.detach()
    with pytest.raises(ac.GradcheckError) as info:
        ac.gradcheck(detached_square, [x])
    assert "gradient_check" in str(info.value)
    assert ac.gradcheck(detached_square, [x], raise_exception=False) is False


def test_viz_text_and_dot():
    a = ac.ones(2, 3, requires_grad=True)
    loss = (a * 2).relu().sum()
    text = ac.viz.to_text(loss)
    assert "relu" in text and "sum" in text and "(2, 3)" in text
    dot = ac.viz.to_dot(loss)
    assert dot.startswith("digraph") and dot.rstrip().endswith("}") and "relu" in dot
    import io
    out = io.StringIO()
    ac.viz.print_graph(loss, file=out)
    assert out.getvalue() == text
    assert "leaf" in ac.viz.to_text(a)


# ---- functional losses -----------------------------------------------------------

def test_mse_loss_reductions():
    x, y = arr(3, 4), arr(3, 4)
    d = (x.astype(np.float64) - y) ** 2
    close(F.mse_loss(ac.tensor(x), ac.tensor(y)), d.mean(), rtol=1e-5)
    close(F.mse_loss(ac.tensor(x), ac.tensor(y), reduction="sum"), d.sum(), rtol=1e-5)
    close(F.mse_loss(ac.tensor(x), ac.tensor(y), reduction="none"), d, rtol=1e-5)


def test_cross_entropy_takes_targets_as_tensors_arrays_or_lists():
    logits = arr(4, 5).astype(np.float64)
    target = np.array([0, 3, 4, 1])
    log_p = np.log(softmax64(logits, 1))
    expected = -log_p[np.arange(4), target]
    t = ac.tensor(logits)
    for tgt in (target, target.tolist(), ac.tensor(target)):
        close(F.cross_entropy(t, tgt), expected.mean(), rtol=1e-5)
    close(F.cross_entropy(t, target, reduction="none"), expected, rtol=1e-5)
    close(F.cross_entropy(t, target, reduction="sum"), expected.sum(), rtol=1e-5)
    eps = 0.1
    smooth = (1 - eps) * expected - eps * log_p.mean(axis=1)
    close(F.cross_entropy(t, target, label_smoothing=eps), smooth.mean(), rtol=1e-5)


def test_binary_cross_entropy_and_with_logits():
    z = arr(6).astype(np.float64)
    p = 1.0 / (1.0 + np.exp(-z))
    y = (rng.uniform(size=6) > 0.5).astype(np.float64)
    expected = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    close(F.binary_cross_entropy(ac.tensor(p), ac.tensor(y)), expected.mean(), rtol=1e-4)
    close(F.binary_cross_entropy_with_logits(ac.tensor(z), ac.tensor(y)), expected.mean(), rtol=1e-4)
    close(F.binary_cross_entropy_with_logits(ac.tensor(z), y, reduction="none"), expected, rtol=1e-4)


def test_module_functions_forward_to_methods():
    x = arr(3, 4)
    t = ac.tensor(x)
    close(ac.exp(t), np.exp(x.astype(np.float64)), rtol=1e-5)
    close(ac.sum(t, dim=0), x.astype(np.float64).sum(0), rtol=1e-5)
    close(ac.transpose(t, 0, 1), x.T)
    close(ac.permute(t, (1, 0)), x.T)
    close(ac.squeeze(ac.unsqueeze(t, 0)), x)
    close(ac.softmax(t, 1), softmax64(x.astype(np.float64), 1), rtol=1e-5)
    close(ac.detach(t), x)
    assert ac.numel(t) == 12
    with pytest.raises(TypeError):
        ac.exp([1.0, 2.0])


def test_threads_can_be_set_and_read():
    before = ac.get_num_threads()
    ac.set_num_threads(1)
    assert ac.get_num_threads() == 1
    ac.set_num_threads(before)
    assert ac.get_num_threads() == before
