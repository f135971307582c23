"""Shape ops: reshape/view, flatten, squeeze/unsqueeze (views sharing data),
transpose, permute, T, indexing with ints and slices, cat and stack. Forward
values against NumPy; gradients against central differences of float64 NumPy
code; bad input."""
import numpy as np
import pytest

import aicraft as ac
from conftest import check_gradients

rng = np.random.default_rng(99)


def data(shape):
    return rng.standard_normal(shape).astype(np.float32)


# (aicraft call, the same with NumPy)
VIEWS = {
    "reshape": (lambda t: t.reshape(4, -1), lambda x: x.reshape(4, -1)),
    "reshape_tuple": (lambda t: t.reshape((2, 2, 6)), lambda x: x.reshape(2, 2, 6)),
    "view": (lambda t: t.view(-1), lambda x: x.reshape(-1)),
    "flatten": (lambda t: t.flatten(), lambda x: x.reshape(-1)),
    "flatten_1": (lambda t: t.flatten(1), lambda x: x.reshape(2, -1)),
    "flatten_0_1": (lambda t: t.flatten(0, 1), lambda x: x.reshape(6, 4)),
    "unsqueeze_0": (lambda t: t.unsqueeze(0), lambda x: x[None]),
    "unsqueeze_-1": (lambda t: t.unsqueeze(-1), lambda x: x[..., None]),
    "unsqueeze_2": (lambda t: t.unsqueeze(2), lambda x: np.expand_dims(x, 2)),
}

MOVES = {
    "transpose": (lambda t: t.transpose(0, 2), lambda x: np.swapaxes(x, 0, 2)),
    "transpose_neg": (lambda t: t.transpose(-1, -2), lambda x: np.swapaxes(x, -1, -2)),
    "permute": (lambda t: t.permute(2, 0, 1), lambda x: np.transpose(x, (2, 0, 1))),
    "permute_list": (lambda t: t.permute([1, 2, 0]), lambda x: np.transpose(x, (1, 2, 0))),
    "permute_same": (lambda t: t.permute(0, 1, 2), lambda x: x),
}


@pytest.mark.parametrize("name", sorted(VIEWS) + sorted(MOVES))
def test_forward_matches_numpy(name):
    ac_fn, np_fn = {**VIEWS, **MOVES}[name]
    x = data((2, 3, 4))
    out = ac_fn(ac.tensor(x))
    expected = np_fn(x)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("name", sorted(VIEWS) + sorted(MOVES))
def test_gradients(name):
    ac_fn, np_fn = {**VIEWS, **MOVES}[name]
    check_gradients(ac_fn, np_fn, [data((2, 3, 4))])


@pytest.mark.parametrize("shape", [(70, 45), (1, 33), (3, 64, 65), (2, 3, 1, 5), (5, 1)])
def test_T_and_transposes_of_awkward_shapes(shape):
    x = data(shape)
    t = ac.tensor(x)
    if len(shape) == 2:
        np.testing.assert_array_equal(t.T.numpy(), x.T)
    np.testing.assert_array_equal(t.transpose(0, -1).numpy(), np.swapaxes(x, 0, -1))
    perm = tuple(reversed(range(len(shape))))
    np.testing.assert_array_equal(t.permute(*perm).numpy(), np.transpose(x, perm))


def test_views_share_data_with_their_base():
    x = ac.tensor(np.arange(6, dtype=np.float32))
    r, f, u = x.reshape(2, 3), x.view(3, 2).flatten(), x.unsqueeze(0)
    with ac.no_grad():
        x += 10.0
    np.testing.assert_array_equal(r.numpy(), np.arange(6).reshape(2, 3) + 10)
    np.testing.assert_array_equal(f.numpy(), np.arange(6) + 10)
    np.testing.assert_array_equal(u.numpy(), np.arange(6)[None] + 10)


def test_squeeze_drops_size_one_dims():
    x = data((1, 3, 1, 2))
    t = ac.tensor(x)
    assert t.squeeze().shape == (3, 2)
    assert t.squeeze(0).shape == (3, 1, 2)
    assert t.squeeze(-2).shape == (1, 3, 2)
    assert t.squeeze(1).shape == (1, 3, 1, 2)   # not size 1: left alone, as in PyTorch
    assert t.squeeze((0, 2)).shape == (3, 2)
    np.testing.assert_array_equal(t.squeeze().numpy(), x.reshape(3, 2))
    check_gradients(lambda a: a.squeeze(), lambda a: a.reshape(3, 2), [x])
    check_gradients(lambda a: a.squeeze(2), lambda a: a.reshape(1, 3, 2), [x])


def test_0d_tensors_reshape_and_flatten():
    x = ac.tensor(3.0)
    assert x.reshape(1, 1).shape == (1, 1)
    assert x.flatten().shape == (1,)
    assert x.unsqueeze(0).shape == (1,)
    assert ac.tensor([[5.0]]).reshape(()).shape == ()


INDICES = [
    1, -1, slice(None), slice(1, None), slice(None, -1), slice(-2, None),
    slice(None, None, 2), slice(1, 100, 3), slice(-100, 2), slice(3, 1),
    (1, 2), (-1, slice(None, None, 2)), (slice(None), 0), (Ellipsis, 1),
    (slice(1, 3), slice(0, 4, 3), -2), (0, 0, 0), (None, 1), (slice(None), None, 2),
]


@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_indexing_matches_numpy(index):
    x = data((4, 5, 6))
    out = ac.tensor(x)[index]
    expected = x[index]
    assert out.shape == np.shape(expected)
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_indexing_gradients(index):
    check_gradients(lambda t: t[index], lambda x: x[index], [data((4, 5, 6))])


@pytest.mark.parametrize("index,error", [
    (4, IndexError), (-5, IndexError), ((0, 0, 0, 0), IndexError),
    (slice(None, None, -1), ValueError), (slice(None, None, 0), ValueError),
])
def test_bad_indices_raise(index, error):
    t = ac.tensor(data((4, 5, 6)))
    with pytest.raises(error):
        t[index]
    assert t[1].shape == (5, 6)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_matches_numpy_and_splits_gradients(dim):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    shapes = [tuple(s if i != dim % 3 else s + k for i, s in enumerate(shape))
              for k, shape in enumerate(shapes)]
    arrays = [data(s) for s in shapes]
    out = ac.cat([ac.tensor(a) for a in arrays], dim=dim)
    np.testing.assert_array_equal(out.numpy(), np.concatenate(arrays, axis=dim))
    check_gradients(lambda *ts: ac.cat(list(ts), dim), lambda *xs: np.concatenate(xs, axis=dim),
                    arrays)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack_matches_numpy_and_splits_gradients(dim):
    arrays = [data((2, 3)) for _ in range(3)]
    out = ac.stack([ac.tensor(a) for a in arrays], dim=dim)
    np.testing.assert_array_equal(out.numpy(), np.stack(arrays, axis=dim))
    check_gradients(lambda *ts: ac.stack(list(ts), dim), lambda *xs: np.stack(xs, axis=dim),
                    arrays)


@pytest.mark.parametrize("join,np_join", [(ac.cat, np.concatenate), (ac.stack, np.stack)])
def test_joining_more_tensors_than_a_node_holds(join, np_join):
    arrays = [data((2, 3)) for _ in range(11)]
    out = join([ac.tensor(a) for a in arrays], 1)
    np.testing.assert_array_equal(out.numpy(), np_join(arrays, axis=1))
    check_gradients(lambda *ts: join(list(ts), 1), lambda *xs: np_join(xs, axis=1), arrays)


def test_cat_of_one_tensor_and_of_empty_parts():
    x = data((2, 3))
    np.testing.assert_array_equal(ac.cat([ac.tensor(x)]).numpy(), x)
    out = ac.cat([ac.zeros(0, 3), ac.tensor(x), ac.zeros(0, 3)])
    np.testing.assert_array_equal(out.numpy(), x)


@pytest.mark.parametrize("call,error", [
    (lambda t: t.reshape(5, -1), ac.ShapeError),
    (lambda t: t.reshape(-1, -1), ValueError),
    (lambda t: t.reshape(3, 3), ac.ShapeError),
    (lambda t: t.flatten(2, 0), ValueError),
    (lambda t: t.transpose(0, 3), IndexError),
    (lambda t: t.permute(0, 1), ValueError),
    (lambda t: t.permute(0, 0, 1), ValueError),
    (lambda t: t.squeeze(3), IndexError),
    (lambda t: t.unsqueeze(4), IndexError),
    (lambda t: ac.cat([t, ac.zeros(2, 4, 4)], 0), ac.ShapeError),
    (lambda t: ac.cat([t, ac.zeros(2, 3)], 0), ac.ShapeError),
    (lambda t: ac.cat([], 0), ValueError),
    (lambda t: ac.cat([t], 3), IndexError),
    (lambda t: ac.cat([ac.tensor(1.0)], 0), ac.ShapeError),
    (lambda t: ac.stack([t, ac.zeros(2, 3, 5)]), ac.ShapeError),
    (lambda t: ac.stack([], 0), ValueError),
    (lambda t: ac.stack([t], 4), IndexError),
])
def test_bad_shape_arguments_raise(call, error):
    t = ac.tensor(data((2, 3, 4)))
    with pytest.raises(error):
        call(t)
    np.testing.assert_array_equal(t.reshape(6, 4).numpy(), t.numpy().reshape(6, 4))


def test_errors_name_the_op():
    t = ac.zeros(2, 3)
    for call, op in [(lambda: t.reshape(4, 2), "reshape"), (lambda: t.transpose(0, 5), "transpose"),
                     (lambda: ac.cat([t, ac.zeros(3, 2)], 0), "cat"),
                     (lambda: ac.stack([t, ac.zeros(3, 2)]), "stack"), (lambda: t[:, ::0], "slice")]:
        with pytest.raises((ValueError, IndexError)) as info:
            call()
        assert str(info.value).startswith(op + ":"), str(info.value)
