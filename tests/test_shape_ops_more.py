"""Shape and layout ops beyond the basic ones (aicraft/shapes.py, ops/layout.c): repeat,
tile, tril/triu, flip, roll, rot90, unbind, movedim, mT, the stack/split helpers, meshgrid,
broadcast_*, repeat_interleave, take(_along_dim), diagonals, nonzero, masked_select, cat
with mixed dtypes. Against torch on odd, empty and 0-d shapes, negative dims, every dtype
(int64 values past 2**40, kept exact), gradients, and bad inputs."""
import numpy as np
import pytest

import aicraft as ac
from torch_oracle import DTYPES, check, sample, to_ac, torch

ALL = list(DTYPES)

# name -> (fn(m, x), input shape)
CASES = {
    "repeat": (lambda m, x: x.repeat(2, 1, 3), (2, 3)),
    "repeat_same_ndim": (lambda m, x: x.repeat(1, 2), (3, 2)),
    "repeat_ones": (lambda m, x: x.repeat(1, 1), (3, 2)),
    "repeat_zero": (lambda m, x: x.repeat(0, 2), (3, 2)),
    "repeat_0d": (lambda m, x: x.repeat(3), ()),
    "repeat_5d": (lambda m, x: x.repeat(2, 1, 1, 2, 1), (2, 1, 3, 1, 2)),
    "tile": (lambda m, x: m.tile(x, (2,)), (2, 3)),
    "tile_more": (lambda m, x: x.tile(2, 1, 2), (2, 3)),
    "tril": (lambda m, x: m.tril(x), (4, 5)),
    "tril_neg": (lambda m, x: x.tril(-1), (2, 4, 3)),
    "tril_pos": (lambda m, x: x.tril(diagonal=2), (4, 3)),
    "triu": (lambda m, x: m.triu(x, 1), (3, 5)),
    "triu_neg_far": (lambda m, x: x.triu(-7), (3, 4)),
    "triu_far": (lambda m, x: x.triu(9), (3, 4)),
    "tril_empty": (lambda m, x: x.tril(), (0, 3)),
    "flip": (lambda m, x: m.flip(x, (0, 2)), (2, 3, 4)),
    "flip_last": (lambda m, x: x.flip(-1), (3, 5)),
    "flip_list": (lambda m, x: x.flip([1]), (3, 5)),
    "flip_none": (lambda m, x: m.flip(x, ()), (3,)),
    "flip_0d": (lambda m, x: m.flip(x, (0,)), ()),
    "fliplr": (lambda m, x: m.fliplr(x), (3, 4)),
    "flipud": (lambda m, x: x.flipud(), (3, 4)),
    "roll": (lambda m, x: m.roll(x, 1), (2, 3)),
    "roll_dim": (lambda m, x: m.roll(x, -1, 1), (2, 3)),
    "roll_dims": (lambda m, x: x.roll((1, 5), (0, -1)), (3, 4)),
    "roll_empty": (lambda m, x: x.roll(2, 0), (0, 4)),
    "rot90": (lambda m, x: m.rot90(x), (2, 3)),
    "rot90_k2": (lambda m, x: x.rot90(2, (1, 2)), (2, 3, 4)),
    "rot90_k3": (lambda m, x: x.rot90(-1, [0, 1]), (2, 3)),
    "unbind": (lambda m, x: m.unbind(x, 1), (2, 3)),
    "unbind_neg": (lambda m, x: x.unbind(-1), (2, 3)),
    "movedim": (lambda m, x: m.movedim(x, 0, -1), (2, 3, 4)),
    "movedim_tuple": (lambda m, x: x.movedim((0, 1), (2, 0)), (2, 3, 4)),
    "moveaxis": (lambda m, x: m.moveaxis(x, -1, 0), (2, 3, 4)),
    "swapaxes": (lambda m, x: m.swapaxes(x, 0, 2), (2, 3, 4)),
    "swapdims": (lambda m, x: x.swapdims(0, 1), (2, 3)),
    "mT": (lambda m, x: x.mT, (2, 3, 4)),
    "mH": (lambda m, x: x.mH, (3, 4)),
    "H": (lambda m, x: x.H, (3, 4)),
    "unflatten": (lambda m, x: m.unflatten(x, 1, (2, -1)), (3, 6)),
    "unflatten_neg": (lambda m, x: x.unflatten(-1, (3, 2)), (3, 6)),
    "ravel": (lambda m, x: m.ravel(x), (2, 3)),
    "broadcast_to": (lambda m, x: m.broadcast_to(x, (2, 3, 4)), (3, 1)),
    "broadcast_to_minus1": (lambda m, x: x.broadcast_to((4, -1)), (1, 3)),
    "expand_as": (lambda m, x: x.expand_as(m.zeros(2, 3, 4)), (3, 1)),
    "repeat_interleave": (lambda m, x: x.repeat_interleave(2), (2, 3)),
    "repeat_interleave_dim": (lambda m, x: m.repeat_interleave(x, 3, dim=1), (2, 3)),
    "repeat_interleave_neg": (lambda m, x: x.repeat_interleave(2, -2), (2, 3)),
    "repeat_interleave_tensor": (lambda m, x: x.repeat_interleave(m.tensor([1, 0, 2]), dim=1), (2, 3)),
    "repeat_interleave_1elem": (lambda m, x: x.repeat_interleave(m.tensor([2]), dim=0), (2, 3)),
    "repeat_interleave_0d": (lambda m, x: x.repeat_interleave(2), ()),
    "take": (lambda m, x: m.take(x, m.tensor([[0, -1], [3, 2]])), (2, 3)),
    "take_along_dim": (lambda m, x: m.take_along_dim(x, m.tensor([[0, 2], [1, 1]]), 1), (2, 3)),
    "take_along_dim_bcast": (lambda m, x: m.take_along_dim(x, m.tensor([[2, 0]]), dim=-1), (3, 3)),
    "take_along_dim_none": (lambda m, x: x.take_along_dim(m.tensor([5, 0, 1])), (2, 3)),
    "diagonal": (lambda m, x: m.diagonal(x), (3, 4)),
    "diagonal_offset": (lambda m, x: x.diagonal(1, 0, 1), (3, 4)),
    "diagonal_neg": (lambda m, x: x.diagonal(-1, -1, 0), (2, 3, 4)),
    "diagonal_far": (lambda m, x: x.diagonal(7), (3, 4)),
    "diag_embed": (lambda m, x: m.diag_embed(x), (2, 3)),
    "diag_embed_offset": (lambda m, x: x.diag_embed(-1, 0, 2), (2, 3)),
    "diag_1d": (lambda m, x: m.diag(x, 1), (3,)),
    "diag_2d": (lambda m, x: m.diag(x, -1), (3, 4)),
    "diagflat": (lambda m, x: m.diagflat(x), (2, 2)),
    "select": (lambda m, x: m.select(x, 1, -1), (2, 3)),
    "narrow_copy": (lambda m, x: x.narrow_copy(1, 1, 2), (2, 3)),
    "atleast_1d": (lambda m, x: m.atleast_1d(x), ()),
    "atleast_2d": (lambda m, x: m.atleast_2d(x), (3,)),
    "atleast_3d": (lambda m, x: m.atleast_3d(x), (3,)),
    "atleast_3d_2d": (lambda m, x: m.atleast_3d(x), (2, 3)),
    "atleast_many": (lambda m, x: m.atleast_2d(x, x[0]), (2, 3)),
    "reshape_as": (lambda m, x: x.reshape_as(m.zeros(3, 2)), (2, 3)),
    "view_as": (lambda m, x: x.view_as(m.zeros(6)), (2, 3)),
    "squeeze_tuple": (lambda m, x: x.squeeze((0, 2)), (1, 3, 1, 1)),
    "squeeze_neg": (lambda m, x: m.squeeze(x, -1), (1, 3, 1)),
    "unsqueeze_0d": (lambda m, x: x.unsqueeze(-1), ()),
    "flatten_0d": (lambda m, x: x.flatten(), ()),
    "split_list": (lambda m, x: m.split(x, [1, 3], 1), (2, 4)),
    "split_with_sizes": (lambda m, x: x.split_with_sizes([2, 0, 2], -1), (2, 4)),
    "split_uneven": (lambda m, x: x.split(3), (7,)),
    "chunk_uneven": (lambda m, x: x.chunk(3, 1), (2, 5)),
    "chunk_more": (lambda m, x: m.chunk(x, 6), (4,)),
    "tensor_split": (lambda m, x: m.tensor_split(x, 3, 1), (2, 7)),
    "tensor_split_idx": (lambda m, x: x.tensor_split([1, 4, 2, 9], dim=1), (2, 7)),
    "hsplit": (lambda m, x: m.hsplit(x, 2), (3, 4)),
    "hsplit_1d": (lambda m, x: m.hsplit(x, [1, 3]), (5,)),
    "vsplit": (lambda m, x: m.vsplit(x, [1]), (3, 4)),
    "dsplit": (lambda m, x: m.dsplit(x, 2), (2, 2, 4)),
    "hstack": (lambda m, x: m.hstack([x, x]), (2, 3)),
    "hstack_1d": (lambda m, x: m.hstack((x[0], x[1])), (2, 3)),
    "vstack": (lambda m, x: m.vstack([x[0], x]), (2, 3)),
    "row_stack": (lambda m, x: m.row_stack([x, x]), (2, 3)),
    "dstack": (lambda m, x: m.dstack([x, x]), (2, 3)),
    "column_stack": (lambda m, x: m.column_stack([x[0], x.T]), (3, 3)),
    "meshgrid_ij": (lambda m, x: m.meshgrid(x[0], x[1, :2], indexing="ij"), (2, 3)),
    "meshgrid_xy": (lambda m, x: m.meshgrid([x[0], x[1, :2], x[1]], indexing="xy"), (2, 3)),
    "broadcast_tensors": (lambda m, x: m.broadcast_tensors(x, x[:1], x[0, :1]), (2, 3)),
    "nonzero": (lambda m, x: m.nonzero(x), (3, 4)),
    "nonzero_tuple": (lambda m, x: x.nonzero(as_tuple=True), (3, 4)),
    "nonzero_0d": (lambda m, x: m.nonzero(x), ()),
    "argwhere": (lambda m, x: m.argwhere(x), (2, 3)),
    "masked_select": (lambda m, x: m.masked_select(x, m.tensor([True, False, True])), (2, 3)),
    "masked_select_bcast": (lambda m, x: x.masked_select(m.tensor([[True], [False]])), (2, 3)),
    "cat_empty_legacy": (lambda m, x: m.cat([x, m.zeros(0, dtype=x.dtype)], 1), (2, 3)),
    "concat": (lambda m, x: m.concat([x, x], dim=-1), (2, 3)),
    "concatenate": (lambda m, x: m.concatenate([x, x], axis=0), (2, 3)),
    "clone_memory_format": (lambda m, x: x.clone(memory_format=m.contiguous_format)
                            if hasattr(m, "contiguous_format") else x.clone(), (2, 3)),
    "contiguous": (lambda m, x: x.contiguous(), (2, 3)),
    "unfold": (lambda m, x: x.unfold(1, 2, 1), (2, 5)),
    "unfold_step": (lambda m, x: x.unfold(-1, 3, 2), (2, 3, 8)),
    "unfold_dim0": (lambda m, x: x.unfold(0, 2, 3), (7, 2)),
    "unfold_0d": (lambda m, x: x.unfold(0, 1, 1), ()),
    "unfold_empty_window": (lambda m, x: x.unfold(1, 0, 2), (2, 3)),
    "tril_indices": (lambda m, x: (x, m.tril_indices(3, 4, 1)), (2,)),
    "triu_indices": (lambda m, x: (x, m.triu_indices(4, 3, -1)), (2,)),
    "block_diag": (lambda m, x: m.block_diag(x, x[0], x[1, 1]), (2, 3)),
    "cartesian_prod": (lambda m, x: m.cartesian_prod(x[0], x[1, :2]), (2, 3)),
    "nonzero_static_pad": (lambda m, x: m.nonzero_static(x, size=20), (3, 4)),
    "nonzero_static_cut": (lambda m, x: m.nonzero_static(x, size=1, fill_value=7), (3, 4)),
    "permute_copy": (lambda m, x: m.permute_copy(x, (1, 0)), (2, 3)),
    "squeeze_copy": (lambda m, x: m.squeeze_copy(x, 0), (1, 3)),
    "unbind_copy": (lambda m, x: m.unbind_copy(x), (2, 3)),
    "unsafe_chunk": (lambda m, x: m.unsafe_chunk(x, 2, 1), (2, 3)),
    "cat_all_legacy_empty": (lambda m, x: m.cat([x[0, :0], x[1, :0]]), (2, 3)),
    "cat_legacy_empty_grad": (lambda m, x: m.cat([x, x[0, :0]], -1), (2, 3)),
    "sum_to_size": (lambda m, x: x.sum_to_size(1, 3), (2, 3)),
    "sum_to_size_lead": (lambda m, x: x.sum_to_size(3), (2, 3)),
    "sum_to_size_same": (lambda m, x: x.sum_to_size((2, 3)), (2, 3)),
    "fill": (lambda m, x: m.fill(x, 1), (2, 3)),
    "slice": (lambda m, x: torch.ops.aten.slice(x, 1, 0, -1, 2) if m is torch else m.slice(x, 1, 0, -1, 2),
              (2, 5)),
}

NO_GRAD = {"nonzero", "nonzero_tuple", "nonzero_0d", "argwhere", "nonzero_static_pad", "nonzero_static_cut"}
FLOAT_ONLY_TRACE = {"trace"}


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name, dtype):
    fn, shape = CASES[name]
    check(fn, sample(shape, dtype), grad=name not in NO_GRAD)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_trace(dtype):
    check(lambda m, x: m.trace(x), sample((3, 4), dtype))


@pytest.mark.parametrize("pair", [("float32", "int64"), ("int64", "bool"), ("uint8", "int64"),
                                  ("bool", "uint8"), ("bool", "float32")])
@pytest.mark.parametrize("op", ["cat", "stack", "hstack", "vstack"])
def test_mixed_dtypes_promote_as_torch(op, pair):
    a, b = sample((2, 3), pair[0]), sample((2, 3), pair[1], seed=1)
    check(lambda m, x, y: getattr(m, op)([x, y]), a, b)


def test_int64_values_past_float_precision_move_exactly():
    big = torch.tensor([[2 ** 62 + 1, -(2 ** 53) - 1], [2 ** 40 + 7, 3]])
    for fn in (lambda m, x: x.repeat(2, 2), lambda m, x: x.flip(0), lambda m, x: x.tril(),
               lambda m, x: m.roll(x, 1), lambda m, x: x.diagonal(), lambda m, x: x.diag_embed(),
               lambda m, x: x.rot90(), lambda m, x: x.repeat_interleave(2, 0),
               lambda m, x: m.take(x, m.tensor([3, 0])), lambda m, x: x.unbind(1)):
        check(fn, big)


def test_gather_and_index_select_past_2_24():
    n = 2 ** 24 + 5
    x = torch.arange(n, dtype=torch.int64) * 3 + 2 ** 40
    idx = torch.tensor([n - 1, 2 ** 24 + 1, 0, 2 ** 24])
    check(lambda m, a: a.index_select(0, m.tensor(idx.tolist())), x)
    check(lambda m, a: a.gather(0, m.tensor(idx.tolist())), x)


def test_factories():
    x = to_ac(sample((2, 3), "int64"))
    assert x.new_empty((2, 2)).shape == (2, 2) and x.new_empty(2).dtype == ac.int64
    assert x.new_zeros(3, dtype=ac.float32).dtype == ac.float32
    assert ac.zeros_like(x, dtype=ac.bool).dtype == ac.bool
    assert ac.full_like(x, 7, dtype=ac.uint8).tolist() == [[7] * 3] * 2
    assert x.new_tensor([1, 2]).dtype == ac.int64
    assert x.new_full((2,), 5).tolist() == [5, 5]


def test_broadcast_shapes():
    assert ac.broadcast_shapes((2, 1), (3,), 1) == torch.broadcast_shapes((2, 1), (3,), 1)
    assert ac.broadcast_shapes() == ()
    with pytest.raises(ValueError):
        ac.broadcast_shapes((2,), (3,))


BAD = [
    (lambda x: x.flip(2), IndexError),
    (lambda x: x.flip(0, 0), ValueError),
    (lambda x: ac.tril(x[0]), ValueError),
    (lambda x: x.repeat(2), ValueError),
    (lambda x: x.repeat(-1, 1), ValueError),
    (lambda x: x.roll(1, 5), IndexError),
    (lambda x: x.roll((1, 2), 0), ValueError),
    (lambda x: x.rot90(1, (0, 0)), ValueError),
    (lambda x: x.movedim(3, 0), IndexError),
    (lambda x: x.unbind(2), IndexError),
    (lambda x: x.diagonal(0, 0, 0), ValueError),
    (lambda x: x.diagonal(0, 0, 5), IndexError),
    (lambda x: x.unflatten(1, (2, 2)), ValueError),
    (lambda x: ac.take(x, ac.tensor([6])), IndexError),
    (lambda x: ac.take(x, ac.tensor([1.0])), TypeError),
    (lambda x: x.take_along_dim(ac.tensor([[3]]), 1), IndexError),
    (lambda x: x.repeat_interleave(ac.tensor([1, 2]), dim=1), ValueError),
    (lambda x: x.repeat_interleave(ac.tensor([1, -1, 1]), dim=1), ValueError),
    (lambda x: x.masked_select(ac.tensor([1, 0, 1])), TypeError),
    (lambda x: x.mT[0].mT, ValueError),
    (lambda x: ac.meshgrid(x), ValueError),
    (lambda x: ac.meshgrid(x[0], indexing="ab"), ValueError),
    (lambda x: ac.hsplit(x, 2), ValueError),
    (lambda x: ac.vsplit(x[0], 1), ValueError),
    (lambda x: ac.diag(x[0, 0]), ValueError),
    (lambda x: ac.cat([x, x[0]]), ValueError),
    (lambda x: ac.cat(x), TypeError),
    (lambda x: x.broadcast_to((4, 3)), ValueError),
    (lambda x: x.select(0, 2), IndexError),
    (lambda x: ac.flip(x.tolist(), 0), TypeError),
    (lambda x: x.unfold(1, 4, 1), ValueError),
    (lambda x: x.unfold(1, 2, 0), ValueError),
    (lambda x: x.unfold(2, 1, 1), IndexError),
    (lambda x: ac.block_diag(x.reshape(1, 2, 3)), ValueError),
    (lambda x: ac.nonzero_static(x, size=-1), ValueError),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_input_raises(case):
    fn, error = BAD[case]
    x = ac.zeros(2, 3)
    with pytest.raises(error):
        fn(x)
    assert (x + 1).sum().item() == 6   # still usable


def test_error_names_op_and_shapes():
    with pytest.raises(IndexError, match=r"take.*6.*out of bounds"):
        ac.take(ac.zeros(2, 3), ac.tensor([6]))
    with pytest.raises(IndexError, match=r"flip: dim 4"):
        ac.zeros(2, 3).flip(4)


def test_grad_through_chain_of_layout_ops():
    x = torch.randn(3, 4)
    check(lambda m, a: (a.flip(0).tril().repeat(2, 1).roll(1, 1).diagonal() * 2).sum(), x)
    check(lambda m, a: m.stack(m.meshgrid(a[0], a[1], indexing="xy")).mT.unbind(0)[1], x)


CORNERS = [
    lambda m, x: m.chunk(x[:0], 3), lambda m, x: x[:0].chunk(2), lambda m, x: x.chunk(2),
    lambda m, x: x[:1].chunk(3), lambda m, x: x.split(2), lambda m, x: x.split(5),
    lambda m, x: x[0].gather(0, m.tensor(0)), lambda m, x: x[0].index_select(0, m.tensor(0)),
    lambda m, x: x[0].index_select(-1, m.tensor([0])),
    lambda m, x: x.reshape(3, 2).gather(-1, m.zeros(0, 2, dtype=m.int64)),
    lambda m, x: x.reshape(3, 2).index_select(-1, m.tensor(1)),
    lambda m, x: x.reshape(3, 2).index_select(0, m.zeros(0, dtype=m.int64)),
    lambda m, x: x[0].unsqueeze(0), lambda m, x: x[0].flatten(0, -1),
    lambda m, x: x.reshape(2, 3, 1).flatten(1), lambda m, x: x.reshape(1, 6, 1).squeeze(()),
    lambda m, x: x.reshape(1, 6, 1).squeeze((0, -1)), lambda m, x: x.reshape(2, 3).expand(2, -1, -1),
    lambda m, x: x.gather(0, m.zeros(0, dtype=m.uint8)), lambda m, x: x.gather(0, m.zeros(2, 0, dtype=m.int64)),
    lambda m, x: x[0].gather(0, m.tensor([0])), lambda m, x: x.gather(0, m.tensor(4)),
    lambda m, x: m.flip(x.reshape(2, 3), dims=(0, 1)), lambda m, x: x.reshape(2, 3).flip(dims=[1]),
    lambda m, x: m.take_along_dim(x.reshape(2, 3), m.tensor([[-1, 0], [-3, 2]]), 1),
    lambda m, x: m.take_along_dim(x, m.tensor([0, 5])),
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("case", range(len(CORNERS)))
def test_split_gather_squeeze_corners_match_torch(case, dtype):
    check(CORNERS[case], sample((6,), dtype))


# ---- several advanced indices in one t[...] (indexing.py) ----------------------------------

MULTI = [
    lambda m, x: x.reshape(-1, 4)[:3][m.tensor([0, 2, 2]), m.tensor([1, 0, -1])],
    lambda m, x: x.reshape(-1, 4)[[0, 1], [3, 2]],
    lambda m, x: x.reshape(-1, 4)[:3][m.tensor([[0], [2]]), m.tensor([1, 3])],   # broadcast to (2, 2)
    lambda m, x: x[:, m.tensor([0, 1]), m.tensor([2, 0])] if x.dim() == 3 else x[[1], [1]],
    lambda m, x: x[m.tensor([1, 0]), :, m.tensor([0, 1])] if x.dim() == 3 else x[[0], [0]],
    lambda m, x: x[..., m.tensor([1, 0]), m.tensor([0, 2])],
    lambda m, x: x[m.tensor([True, False, True]), m.tensor([0, 3])] if x.dim() == 2 else x[[0], [0]],
    lambda m, x: x[1:, m.tensor([0, 1]), m.tensor([1, 1])] if x.dim() == 3 else x[[0], [0]],
]


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("case", range(len(MULTI)))
def test_several_advanced_indices_match_torch(case, dtype, shape):
    check(MULTI[case], sample(shape, dtype))


def test_setitem_with_several_advanced_indices_matches_torch():
    for dtype in ("float32", "int64", "uint8"):
        want = sample((3, 4), dtype)
        got = to_ac(want)
        v = sample((2,), dtype, seed=9)
        want[torch.tensor([0, 2]), torch.tensor([1, -1])] = v
        got[ac.tensor([0, 2]), ac.tensor([1, -1])] = to_ac(v)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        want[[1, 1], [0, 2]] = 5
        got[[1, 1], [0, 2]] = 5
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(IndexError):
        ac.zeros(3, 4)[[0, 1], [4, 0]] = 1.0


def test_unravel_index_and_combinations_match_torch():
    check(lambda m, x: m.unravel_index(x, (2, 3)), torch.tensor([5, -1, 0, 6, -7, 2 ** 40]))
    check(lambda m, x: m.unravel_index(x, (4,)), torch.tensor(3))
    for r, rep in ((2, False), (2, True), (3, False), (1, True), (4, False)):
        for dtype in ALL:
            check(lambda m, x: m.combinations(x, r, with_replacement=rep), sample((3,), dtype))
    with pytest.raises(ValueError):
        ac.unravel_index(ac.tensor([1]), (2, 0))
    with pytest.raises(ValueError):
        ac.combinations(ac.zeros(2, 2))


def test_layout_and_scatter_ops_record_into_compiled_graphs():
    import warnings
    w = ac.randn(3, 3, requires_grad=True)
    index = ac.tensor([[0, 1], [2, 2], [1, 0]])

    def step(x, src):
        w.grad = None
        y = (x @ w).tril(-1).flip(1).triu(-2).diagonal(0).unfold(0, 2, 1).sum()
        loss = y + w.scatter_add(1, index, src).diag_embed().sum()
        loss.backward()
        return loss

    compiled = ac.compile(step)
    x, src = ac.randn(3, 3), ac.randn(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # a graph that cannot record warns and runs eagerly
        for _ in range(3):
            got = compiled(x, src).item()
            got_grad = w.grad.tolist()
    assert got == pytest.approx(step(x, src).item(), rel=1e-6)
    assert np.allclose(got_grad, w.grad.tolist(), rtol=1e-6)


def test_gather_accepts_sparse_grad():
    x = ac.arange(4.0, requires_grad=True)
    ac.gather(x, 0, ac.tensor([1, 1]), sparse_grad=True).sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 0.0, 0.0]


def test_positive():
    for dtype in ("float32", "int64", "uint8"):
        check(lambda m, x: m.positive(x), sample((2, 3), dtype))
    with pytest.raises(TypeError):
        ac.positive(ac.tensor([True]))
