"""test_data.py - Dataset, TensorDataset, DataLoader, random_split and the transforms.

References are computed here with NumPy (float64 where there is arithmetic).
"""
import numpy as np
import pytest

import aicraft as ac
from aicraft.data import DataLoader, Dataset, Subset, TensorDataset, default_collate, random_split
from aicraft.data import transforms as T


def numbered_dataset(n, feature_dim=3):
    """Sample i has features i*10 + (0, 1, 2, ...) and label i % 7: every batch tells which samples it holds."""
    ids = np.arange(n)
    x = (ids[:, None] * 10 + np.arange(feature_dim)[None, :]).astype(np.float32)
    return TensorDataset(x, (ids % 7).astype(np.int64))


def ids_of(batch_x):
    return (batch_x.numpy()[:, 0] / 10).round().astype(int).tolist()


class PlainDataset(Dataset):
    """A dataset without __getitems__: the loader must fetch samples one by one."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"x": np.full((2, 2), i, np.uint8), "y": i * 0.5}


# ---- TensorDataset ------------------------------------------------------------

def test_tensor_dataset_indexes_rows_of_every_array():
    x = np.arange(12, dtype=np.uint8).reshape(4, 3)
    y = np.array([3, 1, 4, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    row, label = ds[2]
    assert row.tolist() == [6, 7, 8] and row.dtype == np.uint8 and label == 4
    bx, by = ds.__getitems__(np.array([3, 0]))
    assert bx.tolist() == [[9, 10, 11], [0, 1, 2]] and by.tolist() == [1, 3]


def test_tensor_dataset_accepts_aicraft_tensors():
    ds = TensorDataset(ac.tensor([[1.0, 2.0], [3.0, 4.0]]), np.array([0, 1]))
    x, y = ds[1]
    assert x.tolist() == [3.0, 4.0] and y == 1


def test_tensor_dataset_rejects_bad_inputs():
    with pytest.raises(ValueError, match="first dimensions differ"):
        TensorDataset(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()
    with pytest.raises(TypeError, match="numpy.ndarray"):
        TensorDataset([1, 2, 3])
    with pytest.raises(ValueError, match="0-d"):
        TensorDataset(np.array(1.0))


# ---- DataLoader ---------------------------------------------------------------

def test_loader_yields_every_sample_once_in_order_without_shuffle():
    loader = DataLoader(numbered_dataset(10), batch_size=4)
    assert len(loader) == 3
    seen = []
    sizes = []
    for x, y in loader:
        seen += ids_of(x)
        sizes.append(x.shape[0])
        np.testing.assert_array_equal(y.numpy(), np.array(ids_of(x)) % 7)
    assert seen == list(range(10))
    assert sizes == [4, 4, 2]


def test_shuffled_loader_covers_every_sample_once_per_epoch_and_reshuffles():
    loader = DataLoader(numbered_dataset(23), batch_size=5, shuffle=True, seed=1)
    epochs = []
    for _ in range(3):
        order = [i for x, _ in loader for i in ids_of(x)]
        assert sorted(order) == list(range(23))
        epochs.append(order)
    assert epochs[0] != list(range(23))
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2]


def test_same_seed_same_order_and_different_seeds_differ():
    def orders(**kwargs):
        loader = DataLoader(numbered_dataset(50), batch_size=8, shuffle=True, **kwargs)
        return [[i for x, _ in loader for i in ids_of(x)] for _ in range(2)]

    assert orders(seed=7) == orders(seed=7)
    assert orders(seed=7) != orders(seed=8)
    assert orders(generator=np.random.default_rng(3)) == orders(seed=3)


def test_drop_last_leaves_out_the_short_batch_and_len_agrees():
    ds = numbered_dataset(10)
    for batch_size, drop_last, expected in [(4, True, [4, 4]), (4, False, [4, 4, 2]), (5, True, [5, 5]),
                                            (11, True, []), (11, False, [10]), (1, True, [1] * 10)]:
        loader = DataLoader(ds, batch_size=batch_size, drop_last=drop_last, shuffle=True, seed=0)
        sizes = [x.shape[0] for x, _ in loader]
        assert sizes == expected
        assert len(loader) == len(expected)


def test_collate_keeps_integer_data_integer_with_batch_shapes():
    images = np.random.default_rng(0).integers(0, 256, (9, 2, 3), dtype=np.uint8)
    labels = np.arange(9, dtype=np.uint8)
    x, y = next(iter(DataLoader(TensorDataset(images, labels), batch_size=4)))
    assert isinstance(x, ac.Tensor) and isinstance(y, ac.Tensor)
    assert x.shape == (4, 2, 3) and y.shape == (4,)
    assert x.dtype == ac.uint8 and y.dtype == ac.uint8      # as PyTorch's default_collate
    np.testing.assert_array_equal(x.numpy(), images[:4])
    np.testing.assert_array_equal(y.numpy(), [0, 1, 2, 3])


def test_dataset_without_getitems_is_collated_sample_by_sample():
    loader = DataLoader(PlainDataset(5), batch_size=2)
    batches = list(loader)
    assert len(batches) == 3
    first = batches[0]
    assert set(first) == {"x", "y"}
    assert first["x"].shape == (2, 2, 2) and first["y"].shape == (2,)
    np.testing.assert_array_equal(first["x"].numpy()[1], np.ones((2, 2)))
    np.testing.assert_array_equal(batches[2]["y"].numpy(), [2.0])


def test_custom_collate_receives_the_list_of_samples():
    received = []

    def collate(samples):
        received.append(samples)
        return len(samples)

    loader = DataLoader(numbered_dataset(5), batch_size=2, collate_fn=collate)
    assert list(loader) == [2, 2, 1]
    assert isinstance(received[0], list) and len(received[0][0]) == 2
    assert received[2][0][0].tolist() == [40.0, 41.0, 42.0]


def test_default_collate_stacks_tuples_numbers_and_tensors():
    x, y = default_collate([(np.array([1, 2]), 3), (np.array([4, 5]), 6)])
    np.testing.assert_array_equal(x.numpy(), [[1, 2], [4, 5]])
    np.testing.assert_array_equal(y.numpy(), [3, 6])
    stacked = default_collate([ac.tensor([1.0, 2.0]), ac.tensor([3.0, 4.0])])
    np.testing.assert_array_equal(stacked.numpy(), [[1, 2], [3, 4]])
    assert default_collate(["a", "b"]) == ["a", "b"]


def test_loader_rejects_bad_arguments():
    ds = numbered_dataset(4)
    for bad in (0, -1, 2.5, True, None):
        with pytest.raises(ValueError, match="batch_size"):
            DataLoader(ds, batch_size=bad)
    with pytest.raises(ValueError, match="not both"):
        DataLoader(ds, shuffle=True, seed=1, generator=np.random.default_rng(1))
    with pytest.raises(TypeError, match="Generator"):
        DataLoader(ds, shuffle=True, generator=42)
    with pytest.raises(TypeError, match="callable"):
        DataLoader(ds, collate_fn=3)


def test_empty_dataset_gives_no_batches():
    loader = DataLoader(TensorDataset(np.zeros((0, 3))), batch_size=4, shuffle=True, seed=0)
    assert len(loader) == 0 and list(loader) == []


# ---- random_split ---------------------------------------------------------------

def test_random_split_sizes_are_disjoint_and_cover_the_dataset():
    ds = numbered_dataset(20)
    parts = random_split(ds, [5, 0, 15], seed=0)
    assert [len(p) for p in parts] == [5, 0, 15]
    ids = [sorted(int(p[i][0][0] // 10) for i in range(len(p))) for p in parts]
    assert sorted(ids[0] + ids[2]) == list(range(20))
    assert not set(ids[0]) & set(ids[2])


def test_random_split_by_fractions_follows_pytorch_rounding():
    ds = numbered_dataset(11)
    assert [len(p) for p in random_split(ds, [0.5, 0.5], seed=0)] == [6, 5]
    assert [len(p) for p in random_split(ds, [0.3, 0.3, 0.4], seed=0)] == [4, 3, 4]
    assert [len(p) for p in random_split(numbered_dataset(10), [0.3, 0.3, 0.4], seed=0)] == [3, 3, 4]


def test_random_split_is_reproducible_by_seed_and_random_without_order():
    ds = numbered_dataset(30)
    a = random_split(ds, [10, 20], seed=5)
    b = random_split(ds, [10, 20], seed=5)
    c = random_split(ds, [10, 20], seed=6)
    assert a[0].indices.tolist() == b[0].indices.tolist()
    assert a[0].indices.tolist() != c[0].indices.tolist()
    assert a[0].indices.tolist() != list(range(10))


def test_random_split_rejects_lengths_that_do_not_fit():
    ds = numbered_dataset(10)
    with pytest.raises(ValueError, match="sum to 9"):
        random_split(ds, [4, 5])
    with pytest.raises(ValueError):
        random_split(ds, [11, -1])
    with pytest.raises(ValueError, match="empty"):
        random_split(ds, [])


def test_subset_batches_take_the_fast_path_and_the_plain_one():
    ds = numbered_dataset(12)
    sub = Subset(ds, [11, 3, 5])
    x, y = next(iter(DataLoader(sub, batch_size=3)))
    assert ids_of(x) == [11, 3, 5]
    np.testing.assert_array_equal(y.numpy(), [11 % 7, 3, 5])
    plain = Subset(PlainDataset(6), [4, 1])
    batch = next(iter(DataLoader(plain, batch_size=2)))
    np.testing.assert_array_equal(batch["y"].numpy(), [2.0, 0.5])


# ---- transforms ---------------------------------------------------------------

def test_to_tensor_scales_uint8_to_unit_range_with_a_channel_dim():
    image = np.random.default_rng(1).integers(0, 256, (5, 4), dtype=np.uint8)
    out = T.ToTensor()(image)
    assert isinstance(out, ac.Tensor) and out.shape == (1, 5, 4)
    out = out.numpy()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0], image.astype(np.float64) / 255.0, rtol=1e-6, atol=1e-7)
    assert out.max() <= 1.0 and out.min() >= 0.0


def test_to_tensor_moves_channels_first_and_leaves_floats_unscaled():
    hwc = np.random.default_rng(2).integers(0, 256, (4, 5, 3), dtype=np.uint8)
    out = T.ToTensor()(hwc)
    assert out.shape == (3, 4, 5)
    np.testing.assert_allclose(out, hwc.transpose(2, 0, 1) / 255.0, rtol=1e-6, atol=1e-7)
    floats = np.array([[2.5, -1.0]])
    np.testing.assert_array_equal(T.ToTensor()(floats), floats[None])


def test_to_tensor_batch_matches_per_sample_results():
    batch = np.random.default_rng(3).integers(0, 256, (6, 4, 4), dtype=np.uint8)
    out = T.ToTensor().batch(batch)
    assert out.shape == (6, 1, 4, 4)
    np.testing.assert_array_equal(out, np.stack([T.ToTensor()(im) for im in batch]))
    with pytest.raises(ValueError, match="ToTensor"):
        T.ToTensor()(np.zeros(3, np.uint8))


def test_normalize_per_channel_and_single_value():
    rng = np.random.default_rng(4)
    x = rng.random((2, 3, 4, 4)).astype(np.float32)
    mean, std = [0.1, 0.2, 0.3], [0.5, 0.25, 2.0]
    out = T.Normalize(mean, std).batch(x)
    expected = (x.astype(np.float64) - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(T.Normalize(mean, std)(x[0]), expected[0], rtol=1e-6, atol=1e-6)
    on_tensor = T.Normalize(mean, std)(ac.tensor(x[0]))
    assert isinstance(on_tensor, ac.Tensor)
    np.testing.assert_allclose(on_tensor.numpy(), expected[0], rtol=1e-6, atol=1e-6)
    flat = rng.random((3, 784)).astype(np.float32)
    out = T.Normalize((0.1307,), (0.3081,)).batch(flat)
    assert out.shape == (3, 784) and out.dtype == np.float32
    np.testing.assert_allclose(out, (flat.astype(np.float64) - 0.1307) / 0.3081, rtol=1e-5, atol=1e-6)


def test_normalize_rejects_bad_statistics_and_mismatched_channels():
    with pytest.raises(ValueError, match="zeros"):
        T.Normalize([0.5], [0.0])
    with pytest.raises(ValueError, match="match"):
        T.Normalize([0.1, 0.2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="channels"):
        T.Normalize([0.1, 0.2, 0.3], [1, 1, 1])(np.zeros((1, 4, 4), np.float32))


def test_flatten_sample_and_batch():
    x = np.arange(24).reshape(2, 3, 4)
    assert T.Flatten()(x).shape == (24,)
    assert T.Flatten().batch(x).shape == (2, 12)
    np.testing.assert_array_equal(T.Flatten().batch(x)[1], np.arange(12, 24))
    assert T.Flatten()(ac.ones(2, 3)).shape == (6,)


def test_lambda_applies_its_function_to_samples_and_batches():
    images = np.random.default_rng(6).integers(0, 256, (3, 2, 2), dtype=np.uint8)
    pipeline = T.Compose([T.ToTensor(), T.Lambda(lambda x: x * 3 + 1)])
    one = pipeline(images[0])
    assert isinstance(one, ac.Tensor)
    np.testing.assert_allclose(one.numpy(), images[0][None] / 255.0 * 3 + 1, rtol=1e-6)
    np.testing.assert_allclose(pipeline.batch(images), images[:, None] / 255.0 * 3 + 1, rtol=1e-6)
    assert repr(pipeline) == "Compose(ToTensor(), Lambda())"
    with pytest.raises(TypeError, match="Lambda"):
        T.Lambda(3)


def test_compose_batch_equals_stacked_per_sample_results_even_with_a_lambda():
    images = np.random.default_rng(5).integers(0, 256, (4, 3, 3), dtype=np.uint8)
    pipeline = T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.25,)), lambda x: x * 2, T.Flatten()])
    batch = pipeline.batch(images)
    assert batch.shape == (4, 9) and batch.dtype == np.float32
    np.testing.assert_allclose(batch, np.stack([pipeline(im).numpy() for im in images]), rtol=1e-6)
    np.testing.assert_allclose(batch, ((images.reshape(4, 9) / 255.0 - 0.5) / 0.25) * 2, rtol=1e-5, atol=1e-5)


def train_on(batches, epochs):
    """Linear/ReLU/Linear trained with SGD, a step per batch in its own scope; for each step,
    bytes_in_use before and after it, heap_allocations after it, and the loss."""
    ac.manual_seed(3)
    model = ac.nn.Sequential(ac.nn.Linear(6, 16), ac.nn.ReLU(), ac.nn.Linear(16, 1))
    opt, loss_fn = ac.optim.SGD(model.parameters(), lr=0.05), ac.nn.MSELoss()
    steps = []
    for epoch in range(epochs):
        for x, y in batches(epoch):
            in_use = ac.memory_stats()["bytes_in_use"]
            with ac.checkpoint():
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                value = loss.item()
            stats = ac.memory_stats()
            steps.append((in_use, stats["bytes_in_use"], stats["heap_allocations"], value))
    return steps


def test_a_training_loop_over_a_loader_makes_no_malloc_once_warm():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((100, 6)).astype(np.float32)
    y = (x @ rng.standard_normal((6, 1)) + 0.5).astype(np.float32)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, seed=1)   # 6 batches of 16, one of 4
    steps = train_on(lambda epoch: loader, epochs=4)
    # each batch is made at root while the last one is still alive, then the last one is
    # freed: from the second epoch on, every size has been seen and is taken from the cache
    assert len({heap for _, _, heap, _ in steps[len(loader):]}) == 1
    assert all(after == before for before, after, _, _ in steps[1:])   # the first makes the grads
    assert steps[-1][3] < 0.5 * steps[0][3]
    # the same batches, all made up front (nothing reused): the same losses, bit for bit
    replay = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, seed=1)
    epochs = [[(ac.from_numpy(bx.numpy()), ac.from_numpy(by.numpy())) for bx, by in replay] for _ in range(4)]
    assert [loss for *_, loss in train_on(lambda epoch: epochs[epoch], epochs=4)] == [loss for *_, loss in steps]
