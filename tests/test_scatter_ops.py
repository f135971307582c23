"""The scatter family (ops/scatter.c, aicraft/shapes.py): scatter (src and value, reduce=),
scatter_add, scatter_reduce (sum/prod/mean/amax/amin, include_self), index_add, index_copy,
index_fill, index_put (accumulate=), masked_scatter, one_hot, and their in-place forms.
Against torch: values in every dtype (int64 past 2**40 exact, uint8 wrapping, bool logic),
gradients of self and src, empty and 0-d shapes, negative dims, bad indices."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from torch_oracle import DTYPES, check, sample, to_ac, torch

ALL = list(DTYPES)


def idx(m, rows):
    return m.tensor(rows, dtype=m.int64)


# (fn(m, x, src), x shape, src shape): index values repeat, so reductions meet duplicates
CASES = {
    "scatter": (lambda m, x, s: x.scatter(0, idx(m, [[1, 0, 2], [0, 1, 1]]), s), (3, 4), (2, 3)),
    "scatter_dim1": (lambda m, x, s: m.scatter(x, 1, idx(m, [[3, 0], [1, 2], [0, 0]]), s), (3, 4), (3, 2)),
    "scatter_negdim": (lambda m, x, s: x.scatter(-1, idx(m, [[3], [1]]), s), (2, 4), (2, 1)),
    "scatter_add": (lambda m, x, s: x.scatter_add(0, idx(m, [[1, 0, 2], [1, 1, 1]]), s), (3, 4), (2, 3)),
    "scatter_add_3d": (lambda m, x, s: m.scatter_add(x, 2, idx(m, [[[0, 0], [1, 0]], [[1, 1], [0, 1]]]), s),
                       (2, 2, 2), (2, 2, 2)),
    "scatter_0d": (lambda m, x, s: x.scatter(0, idx(m, 0), s), (), ()),
    "index_add": (lambda m, x, s: x.index_add(0, idx(m, [2, 0, 2]), s), (3, 4), (3, 4)),
    "index_add_dim1": (lambda m, x, s: m.index_add(x, -1, idx(m, [1, 1]), s), (3, 4), (3, 2)),
    "index_copy": (lambda m, x, s: x.index_copy(1, idx(m, [3, 0]), s), (3, 4), (3, 2)),
    "index_copy_0": (lambda m, x, s: m.index_copy(x, 0, idx(m, [1]), s), (3, 4), (1, 4)),
    "masked_scatter": (lambda m, x, s: x.masked_scatter(m.tensor([[True, False, True, True],
                                                                  [False, False, True, False],
                                                                  [True, True, False, False]]), s),
                       (3, 4), (2, 4)),
    "masked_scatter_bcast": (lambda m, x, s: x.masked_scatter(m.tensor([False, True, False, True]), s),
                             (3, 4), (7,)),
    "select_scatter": (lambda m, x, s: m.select_scatter(x, s[0], 1, -1), (3, 4), (2, 3)),
    "slice_scatter": (lambda m, x, s: m.slice_scatter(x, s, 0, 1, None, 1), (3, 4), (2, 4)),
    "slice_scatter_step": (lambda m, x, s: x.slice_scatter(s, dim=1, start=0, end=4, step=2), (2, 4), (2, 2)),
    "diagonal_scatter": (lambda m, x, s: m.diagonal_scatter(x, s[0], 1), (3, 4), (2, 3)),
    "put": (lambda m, x, s: x.put(idx(m, [[0, -1], [5, 3]]), s), (3, 4), (2, 2)),
    "put_accumulate": (lambda m, x, s: m.put(x, idx(m, [2, 2, 11]), s, accumulate=True), (3, 4), (3,)),
    "put_empty": (lambda m, x, s: x.put(m.zeros(0, dtype=m.int64), s[:0]), (3, 4), (3,)),
}

# torch has no gradient for these (src larger than index; scatter's reduce=): values only
VALUES_ONLY = {
    "scatter_src_larger": (lambda m, x, s: m.scatter(x, 1, idx(m, [[3, 0], [1, 2], [0, 0]]), s), (3, 4), (3, 3)),
    "scatter_add_src_larger": (lambda m, x, s: x.scatter_add(0, idx(m, [[1, 0], [1, 1]]), s), (3, 4), (2, 3)),
    "scatter_reduce_add": (lambda m, x, s: x.scatter(0, idx(m, [[1, 0, 2], [1, 1, 1]]), s, reduce="add"),
                           (3, 4), (2, 3)),
    "scatter_empty_index": (lambda m, x, s: x.scatter(0, m.zeros(0, 3, dtype=m.int64), s), (3, 4), (2, 3)),
}


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", sorted(VALUES_ONLY))
def test_values_match_torch(name, dtype):
    fn, xs, ss = VALUES_ONLY[name]
    check(fn, sample(xs, dtype), sample(ss, dtype, seed=3), grad=False)


def test_gradient_of_src_larger_than_index():
    x = ac.zeros(3, 4, requires_grad=True)
    s = ac.ones(2, 3, requires_grad=True)
    out = x.scatter_add(0, ac.tensor([[1, 0], [1, 1]]), s)
    (out * ac.arange(12.0).reshape(3, 4)).sum().backward()
    assert s.grad.tolist() == [[4.0, 1.0, 0.0], [4.0, 5.0, 0.0]]
    assert x.grad.tolist() == ac.arange(12.0).reshape(3, 4).tolist()


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name, dtype):
    fn, xs, ss = CASES[name]
    if dtype == "bool" and "add" in name and "index_add" in name:
        pytest.skip("torch's index_add refuses bool")
    check(fn, sample(xs, dtype), sample(ss, dtype, seed=3))


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", ALL)
def test_scatter_reduce_matches_torch(reduce, include_self, dtype):
    if dtype == "bool" and reduce in ("mean", "sum", "prod"):
        pytest.skip("torch's scatter_reduce refuses these on bool")
    x, s = sample((3, 4), dtype), sample((3, 3), dtype, seed=5)
    if dtype == "int64" and reduce == "prod":   # keep products small enough to be exact in both
        x, s = x - (2 ** 40), s - (2 ** 40)
    check(lambda m, a, b: a.scatter_reduce(0, idx(m, [[1, 0, 1], [1, 1, 0], [2, 2, 2]]), b, reduce,
                                           include_self=include_self), x, s)


def test_scatter_reduce_gradients_with_ties_and_zeros():
    x = torch.tensor([[1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])
    s = torch.tensor([[3.0, 0.0, 2.0], [1.0, 2.0, 5.0]])
    index = [[1, 1, 0], [1, 1, 0]]
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            check(lambda m, a, b: a.scatter_reduce(0, idx(m, index), b, reduce, include_self=include_self), x, s)


@pytest.mark.parametrize("dtype", ALL)
def test_scatter_value(dtype):
    x = sample((3, 4), dtype)
    value = True if dtype == "bool" else 7 if dtype != "float32" else 2.5
    check(lambda m, a: a.scatter(1, idx(m, [[0, 3], [1, 1], [2, 0]]), value), x)
    check(lambda m, a: m.scatter(a, 0, idx(m, [[2, 0, 1, 1]]), value=value), x)
    if dtype == "float32":
        check(lambda m, a: a.scatter(1, idx(m, [[0], [1], [3]]), 2.0, reduce="multiply"), x, grad=False)


@pytest.mark.parametrize("dtype", ALL)
def test_index_fill(dtype):
    x = sample((3, 4), dtype)
    value = False if dtype == "bool" else 9
    check(lambda m, a: a.index_fill(1, idx(m, [0, -1, 0]), value), x)
    check(lambda m, a: m.index_fill(a, 0, idx(m, [2]), value), x)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", ALL)
def test_index_put(dtype, accumulate):
    if dtype == "bool" and accumulate:
        pytest.skip("bool accumulate is logic or in aicraft; torch refuses it")
    x, v = sample((3, 4, 2), dtype), sample((3, 2), dtype, seed=2)
    check(lambda m, a, b: a.index_put((idx(m, [0, 2, 0]), idx(m, [1, -1, 1])), b, accumulate=accumulate), x, v)
    check(lambda m, a, b: a.index_put((idx(m, [2, 0]),), b[0], accumulate=accumulate), x, v)
    check(lambda m, a, b: a.index_put((m.tensor([True, False, True]),), b[:1], accumulate=accumulate), x, v)


def test_in_place_forms_write_into_self():
    for dtype in ALL:
        x, s = sample((3, 4), dtype), sample((2, 4), dtype, seed=1)
        a, b = to_ac(x), to_ac(s)
        index = [[0, 2, 1, 0], [2, 1, 0, 1]]
        out = a.scatter_(0, ac.tensor(index), b)
        assert out is a
        x.scatter_(0, torch.tensor(index), s)
        np.testing.assert_array_equal(a.numpy(), x.numpy())
        if dtype != "bool":
            a.index_add_(0, ac.tensor([1, 1]), b)
            x.index_add_(0, torch.tensor([1, 1]), s)
            np.testing.assert_array_equal(a.numpy(), x.numpy())
        a.index_fill_(1, ac.tensor([0]), 1)
        x.index_fill_(1, torch.tensor([0]), 1)
        np.testing.assert_array_equal(a.numpy(), x.numpy())
        a.index_put_((ac.tensor([0]), ac.tensor([3])), to_ac(s[0, :1]), accumulate=False)
        x.index_put_((torch.tensor([0]), torch.tensor([3])), s[0, :1])
        np.testing.assert_array_equal(a.numpy(), x.numpy())


def test_in_place_on_a_tensor_that_requires_grad_is_refused():
    x = ac.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="scatter_"):
        x.scatter_(0, ac.tensor([1]), ac.ones(1))
    with ac.no_grad():
        x.scatter_(0, ac.tensor([1]), ac.ones(1))
    assert x.tolist() == [0, 1, 0]


def test_int64_sums_stay_exact():
    big = torch.tensor([2 ** 62, 2 ** 53 + 1, -(2 ** 60)])
    src = torch.tensor([1, 1, 2 ** 53 + 1, 3])
    check(lambda m, a, b: a.scatter_add(0, idx(m, [0, 1, 1, 2]), b), big, src)
    check(lambda m, a, b: a.index_add(0, idx(m, [0, 1, 1, 2]), b), big, src)
    check(lambda m, a, b: a.scatter_reduce(0, idx(m, [0, 1, 1, 2]), b, "amax"), big, src)


def test_uint8_wraps():
    x = torch.tensor([200, 10], dtype=torch.uint8)
    s = torch.tensor([100, 250, 7], dtype=torch.uint8)
    check(lambda m, a, b: a.scatter_add(0, idx(m, [0, 1, 1]), b), x, s)
    check(lambda m, a, b: a.scatter_reduce(0, idx(m, [0, 1, 1]), b, "prod"), x, s)


def test_one_hot():
    for labels, n in (([0, 2, 1, 2], -1), ([[1], [0]], 4), ([], 3)):
        want = torch.nn.functional.one_hot(torch.tensor(labels, dtype=torch.int64), n)
        got = F.one_hot(ac.tensor(labels, dtype=ac.int64), n)
        assert got.dtype == ac.int64 and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert F.one_hot(ac.tensor(2 ** 30), 2 ** 30 + 1).shape == (2 ** 30 + 1,)


BAD = [
    (lambda x: x.scatter(0, ac.tensor([[3]]), ac.ones(1, 1)), IndexError, r"scatter: index 3 is out of bounds"),
    (lambda x: x.scatter(0, ac.tensor([[-1]]), ac.ones(1, 1)), IndexError, "out of bounds"),
    (lambda x: x.scatter(2, ac.tensor([[0]]), ac.ones(1, 1)), IndexError, "dim 2"),
    (lambda x: x.scatter(0, ac.tensor([[0.0]]), ac.ones(1, 1)), TypeError, "int64"),
    (lambda x: x.scatter(0, ac.tensor([0]), ac.ones(1)), ValueError, "same number of dims"),
    (lambda x: x.scatter(0, ac.tensor([[0, 0, 0, 0, 0]]), ac.ones(1, 5)), ValueError, "larger"),
    (lambda x: x.scatter(0, ac.tensor([[0, 1]]), ac.ones(1, 1)), ValueError, "larger"),
    (lambda x: x.scatter_add(0, ac.tensor([[0]]), ac.ones(1, 1, dtype=ac.int64)), TypeError, "dtype"),
    (lambda x: x.scatter_reduce(0, ac.tensor([[0]]), ac.ones(1, 1), "max"), ValueError, "reduce"),
    (lambda x: x.scatter(0, ac.tensor([[0]]), ac.ones(1, 1), reduce="sum"), ValueError, "reduce"),
    (lambda x: x.index_add(0, ac.tensor([3]), ac.ones(1, 4)), IndexError, "out of bounds"),
    (lambda x: x.index_add(0, ac.tensor([0]), ac.ones(2, 4)), ValueError, "source"),
    (lambda x: x.index_copy(1, ac.tensor([[0]]), ac.ones(3, 1)), ValueError, "0-d or 1-d"),
    (lambda x: x.index_fill(0, ac.tensor([-4]), 1.0), IndexError, "out of bounds"),
    (lambda x: x.index_put((ac.tensor([5]),), ac.ones(4)), IndexError, "out of bounds"),
    (lambda x: x.index_put((ac.tensor([0.5]),), ac.ones(4)), IndexError, "int64 or bool"),
    (lambda x: x.index_put((ac.tensor([0]),) * 3, ac.ones(1)), IndexError, "too many"),
    (lambda x: x.masked_scatter(ac.ones(3, 4, dtype=ac.bool), ac.ones(3)), ValueError, "source"),
    (lambda x: F.one_hot(ac.tensor([0, 3]), 3), IndexError, "num_classes"),
    (lambda x: F.one_hot(ac.tensor([-1])), IndexError, "non-negative"),
    (lambda x: F.one_hot(ac.tensor([0.0])), TypeError, "int64"),
    (lambda x: F.one_hot(ac.zeros(0, dtype=ac.int64)), ValueError, "empty"),
    (lambda x: ac.zeros(2, dtype=ac.uint8).index_fill(0, ac.tensor([0]), 300), RuntimeError, "overflow"),
    (lambda x: ac.zeros(2, dtype=ac.uint8).scatter(0, ac.tensor([0]), -1), RuntimeError, "overflow"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_input_raises(case):
    fn, error, match = BAD[case]
    x = ac.zeros(3, 4)
    with pytest.raises(error, match=match):
        fn(x)
    assert (x + 1).sum().item() == 12


def test_scatter_trains_inside_a_checkpoint():
    w = ac.zeros(4, requires_grad=True)
    used = []
    for _ in range(4):
        with ac.checkpoint():
            out = ac.zeros(2, 4).scatter_add(1, ac.tensor([[0, 1], [1, 3]]), w[:2].expand(2, 2) + 1)
            (out * out).sum().backward()
        used.append(ac.memory_stats()["bytes_in_use"])
    assert used[1:] == used[:1] * 3   # after the first step made w.grad, nothing grows
    assert w.grad.tolist() == [16.0, 16.0, 0.0, 0.0]


def test_index_fill_with_a_tensor_value_counts_each_position_once():
    x, v = torch.randn(4, 3), torch.tensor(1.5)
    check(lambda m, a, b: a.index_fill(0, idx(m, [1, 3, 1]), b), x, v)   # torch's backward refuses negatives


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    for dtype in ("float32", "int64", "uint8"):
        x, s = sample((3, 4), dtype), sample((3, 2), dtype, seed=4)
        if dtype == "int64" and reduce == "prod":
            x, s = x - 2 ** 40, s - 2 ** 40
        check(lambda m, a, b: a.index_reduce(1, idx(m, [3, 0]), b, reduce, include_self=include_self), x, s)
