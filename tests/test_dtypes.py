"""Tensor dtypes (float32, int64, bool), comparisons, logical ops, where, devices.
References are NumPy; PyTorch is compared where it is installed."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F

rng = np.random.default_rng(7)


# ---- dtypes as PyTorch infers and converts them ---------------------------------

@pytest.mark.parametrize("data,dtype", [
    ([1, 2, 3], ac.int64), ([True, False], ac.bool), ([1.5, 2], ac.float32), (3, ac.int64),
    (np.arange(4, dtype=np.uint8), ac.uint8), (np.arange(4, dtype=np.int32), ac.int64),
    (np.arange(4, dtype=np.int8), ac.int64),
    (np.ones(2), ac.float32), (np.array([True]), ac.bool), (2.5, ac.float32)])
def test_tensor_infers_the_dtype_pytorch_does(data, dtype):
    t = ac.tensor(data)
    assert t.dtype is dtype
    assert t.numpy().dtype == dtype.numpy


def test_numpy_round_trips_keep_dtype_and_exact_int64_values():
    big = np.array([[2 ** 40 + 1, -(2 ** 62)], [0, 7]], dtype=np.int64)
    mask = rng.random((3, 4)) > 0.5
    assert np.array_equal(ac.from_numpy(big).numpy(), big)
    assert np.array_equal(ac.from_numpy(mask).numpy(), mask)
    assert ac.from_numpy(big).tolist() == big.tolist()
    assert ac.tensor(big)[0, 0].item() == 2 ** 40 + 1 and type(ac.tensor(big)[0, 0].item()) is int
    assert type(ac.tensor([True]).item()) is bool and type(ac.tensor([1.0]).item()) is float


def test_explicit_dtypes_and_factories():
    assert ac.tensor([1, 2], dtype=ac.float32).dtype is ac.float32
    assert ac.tensor([1.7, -1.7], dtype=ac.int64).tolist() == [1, -1]   # toward zero
    assert ac.zeros(2, 3, dtype=ac.int64).numpy().dtype == np.int64
    assert ac.ones(2, dtype=ac.bool).tolist() == [True, True]
    assert ac.full((2,), 7).dtype is ac.int64 and ac.full((2,), 7.0).dtype is ac.float32
    assert ac.full((2,), 2 ** 40 + 3, dtype=ac.int64).tolist() == [2 ** 40 + 3] * 2
    assert ac.arange(5).dtype is ac.int64 and ac.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert ac.arange(0, 1, 0.25).dtype is ac.float32
    assert ac.arange(3, dtype=ac.float32).tolist() == [0.0, 1.0, 2.0]
    assert ac.empty(2, dtype=ac.int64).tolist() == [0, 0]
    x = ac.tensor([[1, 2]])
    assert ac.zeros_like(x).dtype is ac.int64 and ac.ones_like(x, dtype=ac.float32).dtype is ac.float32
    assert ac.eye(2, dtype=ac.int64).tolist() == [[1, 0], [0, 1]]


def test_randint_is_seeded_in_range_and_int64():
    ac.manual_seed(3)
    a = ac.randint(2, 9, (1000,))
    ac.manual_seed(3)
    b = ac.randint(2, 9, (1000,))
    assert a.dtype is ac.int64 and a.tolist() == b.tolist()
    values = a.numpy()
    assert values.min() == 2 and values.max() == 8
    assert ac.randint(4, (3,)).shape == (3,)
    with pytest.raises(ValueError):
        ac.randint(5, 5, (2,))


def test_conversions():
    x = ac.tensor([-1.5, 0.0, 2.7, float("nan")])
    assert x.long().tolist() == [-1, 0, 2, 0]
    with pytest.raises(TypeError, match="int32"):
        x.int()                               # torch's int32: a name aicraft refuses
    assert ac.tensor([-1.0, 255.0, 256.0, 3.9]).byte().tolist() == [255, 255, 0, 3]   # wraps
    assert ac.tensor([300, 7]).byte().tolist() == [44, 7]
    assert ac.tensor([200], dtype=ac.uint8).long().tolist() == [200]
    assert x.bool().tolist() == [True, False, True, True]
    assert ac.tensor([0, 3]).float().tolist() == [0.0, 3.0]
    assert ac.tensor([True, False]).long().tolist() == [1, 0]
    assert x.to(ac.int64).dtype is ac.int64 and x.type(ac.bool).dtype is ac.bool
    assert x.type() == "aicraft.FloatTensor" and x.long().type() == "aicraft.LongTensor"
    assert x.to(ac.float32) is x and x.float() is x and x.to("cpu") is x and x.cpu() is x
    assert x.to(ac.float32, copy=True) is not x
    assert x.to(ac.tensor([1])).dtype is ac.int64
    y = ac.tensor([1.0, 2.0], requires_grad=True)
    (y.to(ac.float32, copy=True) * 3).sum().backward()   # a float copy keeps the graph
    assert y.grad.tolist() == [3.0, 3.0]


def test_float64_and_float16_are_refused_never_narrowed():
    for make in (lambda: ac.tensor([1.0], dtype=ac.float64), lambda: ac.zeros(2, dtype=ac.double),
                 lambda: ac.ones(2).double(), lambda: ac.ones(2).half(),
                 lambda: ac.ones(2).to(ac.float64), lambda: ac.set_default_dtype(ac.float64)):
        with pytest.raises(TypeError, match="float32"):
            make()
    assert ac.get_default_dtype() is ac.float32


def test_only_float_tensors_require_grad():
    with pytest.raises(TypeError, match="float32"):
        ac.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError):
        ac.tensor([True]).requires_grad_()


def test_dtypes_compare_with_numpy_names():
    assert ac.float32 == np.float32 and ac.int64 == "int64" and ac.bool == np.bool_
    assert ac.float32 != ac.int64 and ac.long is ac.int64 and ac.float is ac.float32
    assert repr(ac.int64) == "aicraft.int64"
    assert {ac.float32: 1}[ac.float32] == 1


# ---- arithmetic on integer tensors promotes as PyTorch ----------------------------

def test_integer_arithmetic_promotes():
    a, b = ac.tensor([1, 2, 3]), ac.tensor([4, 5, 6])
    assert (a + b).dtype is ac.int64 and (a + b).tolist() == [5, 7, 9]
    assert (a * 2).dtype is ac.int64 and (a - 1).tolist() == [0, 1, 2]
    assert (2 - a).tolist() == [1, 0, -1] and (-a).tolist() == [-1, -2, -3]
    assert (a * 0.5).dtype is ac.float32 and (a * 0.5).tolist() == [0.5, 1.0, 1.5]
    assert (a / 2).dtype is ac.float32 and (a / b).tolist() == pytest.approx([0.25, 0.4, 0.5])
    assert (a + ac.tensor([0.5])).dtype is ac.float32
    assert a.exp().dtype is ac.float32 and a.exp().tolist() == pytest.approx(np.exp([1, 2, 3]))


def test_ops_that_compute_refuse_integer_tensors_with_a_clear_error():
    w = ac.ones(3, 2)
    with pytest.raises(TypeError, match="int64.*float32"):
        ac.tensor([[1, 2, 3]]) @ w
    with pytest.raises(TypeError, match="linear"):
        F.linear(ac.tensor([[1, 2]]), ac.ones(3, 2))
    # cat promotes mixed dtypes as torch.cat does (tests/test_shape_ops_more.py)
    assert ac.cat([ac.ones(2), ac.tensor([1, 2])]).dtype is ac.float32


# ---- comparisons and logical ops -------------------------------------------------

PAIRS = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((), (5,))]


@pytest.mark.parametrize("sa,sb", PAIRS)
@pytest.mark.parametrize("name,ref", [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                                      ("le", np.less_equal), ("gt", np.greater),
                                      ("ge", np.greater_equal)])
def test_comparisons_broadcast_against_numpy(sa, sb, name, ref):
    a = rng.integers(-2, 3, sa).astype(np.float32)
    b = rng.integers(-2, 3, sb)                       # int64 against float32
    out = getattr(ac.tensor(a), name)(ac.tensor(b))
    assert out.dtype is ac.bool
    np.testing.assert_array_equal(out.numpy(), ref(a, b))
    np.testing.assert_array_equal(getattr(ac.tensor(a), name)(1).numpy(), ref(a, 1))


def test_comparison_operators_and_counting_correct_predictions():
    logits = ac.tensor(rng.standard_normal((50, 10)).astype(np.float32))
    target = ac.tensor(rng.integers(0, 10, 50))
    pred = logits.argmax(dim=1, keepdim=True)
    correct = pred.eq(target.view(pred.shape)).sum().item()
    assert type(correct) is int
    assert correct == int((logits.numpy().argmax(1) == target.numpy()).sum())
    x = ac.tensor([1.0, 2.0, 3.0])
    assert (x > 1.5).tolist() == [False, True, True] and (x == 2).tolist() == [False, True, False]
    assert (x != x).tolist() == [False] * 3 and (1.5 < x).tolist() == [False, True, True]
    assert (x == None) is False and x != None        # noqa: E711 - PyTorch's behaviour
    assert x in [x] and len({x, x}) == 1             # hashed by identity


def test_comparisons_of_large_int64_values_are_exact():
    a = ac.tensor([2 ** 40, 2 ** 40 + 1])
    assert (a == ac.tensor([2 ** 40, 2 ** 40])).tolist() == [True, False]


def test_logical_ops_match_numpy():
    a, b = rng.random((4, 5)) > 0.5, rng.random((5,)) > 0.3
    ta, tb = ac.tensor(a), ac.tensor(b)
    np.testing.assert_array_equal(ta.logical_and(tb).numpy(), a & b)
    np.testing.assert_array_equal((ta | tb).numpy(), a | b)
    np.testing.assert_array_equal((ta ^ tb).numpy(), a ^ b)
    np.testing.assert_array_equal((~ta).numpy(), ~a)
    np.testing.assert_array_equal(ac.logical_not(ac.tensor([0.0, 2.0])).numpy(), [True, False])
    # integers: bitwise, as torch (this used to be refused)
    assert (ac.tensor([1, 2]) & ac.tensor([3, 4])).tolist() == [1, 0]
    with pytest.raises(TypeError, match="float32"):
        ac.tensor([1.0]) & ac.tensor([3.0])


def test_sums_of_bool_and_int64_are_exact_int64():
    m = rng.random((3, 4, 5)) > 0.5
    t = ac.tensor(m)
    assert t.sum().dtype is ac.int64 and t.sum().item() == int(m.sum())
    np.testing.assert_array_equal(t.sum(dim=1).numpy(), m.sum(axis=1))
    np.testing.assert_array_equal(t.sum(dim=(0, 2), keepdim=True).numpy(), m.sum(axis=(0, 2), keepdims=True))
    big = ac.tensor([2 ** 40, 1, 2])
    assert big.sum().item() == 2 ** 40 + 3


def test_indices_are_int64():
    x = ac.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    assert x.argmax().dtype is ac.int64 and x.argmin(1).dtype is ac.int64
    values, indices = x.max(dim=1)
    assert indices.dtype is ac.int64
    np.testing.assert_array_equal(indices.numpy(), x.numpy().argmax(1))
    np.testing.assert_array_equal(x.min(dim=0).indices.numpy(), x.numpy().argmin(0))


# ---- where and masked_fill ---------------------------------------------------------

def test_where_broadcasts_and_matches_numpy():
    cond = rng.random((3, 1, 4)) > 0.5
    a = rng.standard_normal((2, 4)).astype(np.float32)
    b = rng.standard_normal((3, 2, 1)).astype(np.float32)
    out = ac.where(ac.tensor(cond), ac.tensor(a), ac.tensor(b))
    np.testing.assert_array_equal(out.numpy(), np.where(cond, a, b))
    np.testing.assert_array_equal(ac.where(ac.tensor(cond), 1.0, 0.0).numpy(), np.where(cond, 1.0, 0.0))
    np.testing.assert_array_equal(ac.tensor(a).where(ac.tensor(cond), 0.5).numpy(), np.where(cond, a, 0.5))


def test_where_gradients_match_central_differences():
    cond = ac.tensor(rng.random((3, 4)) > 0.5)
    a = ac.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = ac.tensor(rng.standard_normal((4,)), requires_grad=True)
    assert ac.gradcheck(lambda a, b: ac.where(cond, a * a, b * 3.0), (a, b))


def test_where_gradient_routes_to_the_picked_operand():
    cond = ac.tensor([True, False, True])
    a = ac.ones(3, requires_grad=True)
    b = ac.ones(1, requires_grad=True)
    ac.where(cond, a, b).sum().backward()
    assert a.grad.tolist() == [1.0, 0.0, 1.0] and b.grad.tolist() == [1.0]


def test_where_needs_a_bool_condition():
    with pytest.raises(TypeError, match="bool"):
        ac.where(ac.ones(2), ac.ones(2), ac.zeros(2))
    with pytest.raises(TypeError):
        ac.where([True], ac.ones(1), ac.zeros(1))
    with pytest.raises(ac.ShapeError):
        ac.where(ac.tensor([True, False, True]), ac.ones(2), ac.zeros(2))


def test_masked_fill_as_attention_masks_use_it():
    scores = rng.standard_normal((2, 3, 3)).astype(np.float32)
    mask = np.triu(np.ones((3, 3), bool), 1)
    out = ac.tensor(scores).masked_fill(ac.tensor(mask), float("-inf")).softmax(-1)
    ref = np.where(mask, -np.inf, scores)
    ref = np.exp(ref - ref.max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), ref / ref.sum(-1, keepdims=True), rtol=1e-6)
    x = ac.ones(2, 2)
    with ac.no_grad():
        x.masked_fill_(ac.tensor([[True, False], [False, True]]), 0.0)
    assert x.tolist() == [[0.0, 1.0], [1.0, 0.0]]


# ---- losses and lookups take int64 ------------------------------------------------

def test_cross_entropy_and_nll_take_int64_targets():
    logits = rng.standard_normal((6, 4)).astype(np.float32)
    target = rng.integers(0, 4, 6)
    x = ac.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x, ac.tensor(target))
    ref = F.cross_entropy(ac.tensor(logits), ac.tensor(target.astype(np.float32)))
    assert loss.item() == ref.item()
    loss.backward()
    assert x.grad.shape == (6, 4)
    with pytest.raises(IndexError):
        F.cross_entropy(x, ac.tensor([0, 1, 2, 3, 4, 5]))
    with pytest.raises(TypeError):
        F.cross_entropy(x, ac.tensor([True] * 6))


def test_embedding_takes_int64_ids():
    w = ac.randn(10, 3)
    ids = ac.tensor([[1, 9], [0, 1]])
    np.testing.assert_array_equal(F.embedding(ids, w).numpy(), w.numpy()[ids.numpy()])
    with pytest.raises(IndexError):
        F.embedding(ac.tensor([10]), w)


# ---- shapes of integer and bool tensors ------------------------------------------

@pytest.mark.parametrize("dtype", [np.int64, np.bool_])
def test_shape_ops_keep_dtype_and_values(dtype):
    a = (rng.integers(-5, 5, (3, 4, 5)) > 0) if dtype is np.bool_ else rng.integers(-9, 9, (3, 4, 5))
    t = ac.tensor(a)
    checks = [(t.reshape(12, 5), a.reshape(12, 5)), (t.permute(2, 0, 1), a.transpose(2, 0, 1)),
              (t.transpose(0, 2), a.swapaxes(0, 2)), (t[1:, ::2, -1], a[1:, ::2, -1]),
              (t.T, a.T), (t.flatten(1), a.reshape(3, 20)), (t.unsqueeze(0), a[None]),
              (ac.cat([t, t], 1), np.concatenate([a, a], 1)), (ac.stack([t, t], 3), np.stack([a, a], 3)),
              (t.clone(), a), (t.detach(), a), (t.keep(), a)]
    for got, want in checks:
        assert got.numpy().dtype == a.dtype
        np.testing.assert_array_equal(got.numpy(), want)


def test_copy_and_fill_convert_into_the_destination_dtype():
    x = ac.zeros(3, dtype=ac.int64)
    x.copy_(ac.tensor([1.9, -2.5, 3.0]))
    assert x.tolist() == [1, -2, 3]
    x.fill_(7)
    assert x.tolist() == [7, 7, 7]
    m = ac.zeros(2, dtype=ac.bool)
    m.fill_(2)
    assert m.tolist() == [True, True]


# ---- formatting and Python protocols ----------------------------------------------

def test_format_index_and_repr():
    assert f"{ac.tensor(3.14159):.2f}" == "3.14" and f"{ac.tensor([7]):d}" == "7"
    assert list(range(ac.tensor(3))) == [0, 1, 2]
    assert [10, 20, 30][ac.tensor(1)] == 20
    with pytest.raises(TypeError):
        [1, 2][ac.tensor(1.0)]
    assert repr(ac.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(ac.tensor([True, False])) == "tensor([ True, False])"


# ---- devices --------------------------------------------------------------------------

def test_devices_on_the_cpu():
    x = ac.ones(2)
    assert x.device == ac.device("cpu") == "cpu" and str(x.device) == "cpu" and not x.is_cuda
    assert ac.device("cuda:1").index == 1 and ac.device("cpu").type == "cpu"
    assert ac.zeros(2, device="cpu").device == x.device and ac.tensor([1], device=ac.device("cpu"))
    assert not ac.backends.mps.is_available()
    if not ac.cuda.is_available():
        assert ac.cuda.device_count() == 0
        assert not ac.accelerator.is_available() and ac.accelerator.current_accelerator() is None
        for move in (lambda: x.to("cuda"), lambda: x.cuda(), lambda: ac.zeros(2, device="cuda")):
            with pytest.raises(ac.DeviceError, match="cuda"):
                move()
    assert issubclass(ac.DeviceError, RuntimeError)
    with pytest.raises(ValueError):
        ac.device("tpu")


# ---- memory -------------------------------------------------------------------------

def test_integer_tensors_made_in_a_scope_are_freed_with_it():
    start = ac.memory_stats()["bytes_in_use"]
    for _ in range(50):
        with ac.checkpoint():
            x = ac.randn(64, 10)
            y = ac.tensor(rng.integers(0, 10, 64))
            correct = x.argmax(1).eq(y).sum().item()
            assert 0 <= correct <= 64
    assert ac.memory_stats()["bytes_in_use"] == start


# ---- PyTorch parity ------------------------------------------------------------------

def test_matches_pytorch_where_installed():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.integers(-1, 2, (5,))
    ours, theirs = ac.tensor(a), torch.tensor(a)
    assert (ours > ac.tensor(b)).tolist() == (theirs > torch.tensor(b)).tolist()
    assert ours.argmax(1).tolist() == theirs.argmax(1).tolist()
    assert ac.tensor(b).sum().item() == torch.tensor(b).sum().item()
    assert ac.tensor([1.7, -1.7]).long().tolist() == torch.tensor([1.7, -1.7]).long().tolist()
    assert str(ac.tensor([1, 2]).dtype).split(".")[1] == str(torch.tensor([1, 2]).dtype).split(".")[1]
    mask = theirs > 0
    np.testing.assert_array_equal(ours.masked_fill(ac.tensor(mask.numpy()), -1.0).numpy(),
                                  theirs.masked_fill(mask, -1.0).numpy())


def test_uint8_images_stay_one_byte_a_pixel_until_converted():
    images = rng.integers(0, 256, (64, 784)).astype(np.uint8)
    x = ac.from_numpy(images)
    assert x.dtype is ac.uint8 and x.element_size() == 1 and x.type() == "aicraft.ByteTensor"
    np.testing.assert_array_equal(x.numpy(), images)
    scaled = x.float() * (1 / 255)
    np.testing.assert_allclose(scaled.numpy(), images / 255, rtol=1e-6)
    np.testing.assert_allclose((x * (1 / 255)).numpy(), images / 255, rtol=1e-6)   # promotes
    assert (x > 128).sum().item() == int((images > 128).sum())
    assert x.sum().dtype is ac.int64 and x.sum().item() == int(images.sum())
    assert x[3, 5:9].tolist() == images[3, 5:9].tolist()
    assert ac.cat([x, x]).shape == (128, 784) and x.T.numpy().dtype == np.uint8
    full = ac.full((2,), 7, dtype=ac.uint8)
    assert full.tolist() == [7, 7] and full.dtype is ac.uint8
    with pytest.raises(TypeError):
        F.embedding(ac.tensor([1], dtype=ac.uint8), ac.ones(3, 2))
