"""batch_norm (C's norm.c) with nn.BatchNorm1d/2d, and dropout (C's dropout.c)
with nn.Dropout: batch norm forward against float64 NumPy in train and eval,
running statistics (momentum, unbiased variance, cumulative average, updated
inside ac.checkpoint()), gradients against central differences; dropout's
mask rate, scaling, eval identity and seeding; errors."""
import os
import subprocess
import sys

import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn
from conftest import check_gradients
from thread_counts import assert_same_for_thread_counts

rng = np.random.default_rng(13)


def channel_axes(x):
    return (0,) + tuple(range(2, np.ndim(x)))


def channel_shape(x):
    return (1, -1) + (1,) * (np.ndim(x) - 2)


def np_batch_norm_train(x, w=None, b=None, eps=1e-5):
    x = np.asarray(x, np.float64)
    axes = channel_axes(x)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * np.asarray(w, np.float64).reshape(channel_shape(x))
    if b is not None:
        y = y + np.asarray(b, np.float64).reshape(channel_shape(x))
    return y


def np_batch_norm_eval(x, mean, var, w, b, eps=1e-5):
    shape = channel_shape(x)
    x = np.asarray(x, np.float64)
    y = (x - np.reshape(mean, shape)) / np.sqrt(np.reshape(var, shape).astype(np.float64) + eps)
    return y * np.reshape(w, shape) + np.reshape(b, shape)


SHAPES = [(8, 3), (4, 3, 5), (3, 2, 4, 5), (2, 4, 1, 1)]


@pytest.mark.parametrize("shape", SHAPES)
def test_train_forward_matches_numpy(shape):
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    w = rng.standard_normal(shape[1]).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    y = F.batch_norm(ac.tensor(x), None, None, ac.tensor(w), ac.tensor(b), training=True)
    np.testing.assert_allclose(y.numpy(), np_batch_norm_train(x, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", SHAPES)
def test_train_gradients(shape):
    arrays = [rng.standard_normal(shape) * 2 + 1, rng.standard_normal(shape[1]),
              rng.standard_normal(shape[1])]
    check_gradients(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                    np_batch_norm_train, arrays, rtol=2e-3, atol=2e-4)


def test_train_gradients_without_affine():
    arrays = [rng.standard_normal((4, 3, 3, 2))]
    check_gradients(lambda x: F.batch_norm(x, None, None, training=True),
                    np_batch_norm_train, arrays, rtol=2e-3, atol=2e-4)


def test_train_gradients_bias_only():
    """bias without weight: the node's inputs shift, the gradients must not."""
    arrays = [rng.standard_normal((5, 3)), rng.standard_normal(3)]
    check_gradients(lambda x, b: F.batch_norm(x, None, None, None, b, training=True),
                    lambda x, b: np_batch_norm_train(x, None, b), arrays, rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("shape", [(6, 3), (3, 3, 4, 2)])
def test_eval_uses_running_statistics(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    mean = rng.standard_normal(shape[1]).astype(np.float32)
    var = rng.uniform(0.5, 2.0, shape[1]).astype(np.float32)
    w = rng.standard_normal(shape[1]).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    rm, rv = ac.tensor(mean), ac.tensor(var)
    y = F.batch_norm(ac.tensor(x), rm, rv, ac.tensor(w), ac.tensor(b), training=False)
    np.testing.assert_allclose(y.numpy(), np_batch_norm_eval(x, mean, var, w, b),
                               rtol=1e-4, atol=1e-4)
    assert np.array_equal(rm.numpy(), mean) and np.array_equal(rv.numpy(), var)
    check_gradients(lambda t, wt, bt: F.batch_norm(t, rm, rv, wt, bt, training=False),
                    lambda a, wa, ba: np_batch_norm_eval(a, mean, var, wa, ba), [x, w, b],
                    rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("affine", [True, False])
def test_eval_over_many_planes_matches_pytorch_for_any_thread_count(affine):
    """Eval mode walks the planes in memory order, shared among the threads: odd channel
    counts and plane sizes, with and without the affine weight and bias."""
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((9, 37, 13, 11)).astype(np.float32)
    mean = rng.standard_normal(37).astype(np.float32)
    var = rng.uniform(0.5, 2.0, 37).astype(np.float32)
    w = rng.standard_normal(37).astype(np.float32) if affine else None
    b = rng.standard_normal(37).astype(np.float32) if affine else None

    def run():
        y = F.batch_norm(ac.tensor(x), ac.tensor(mean), ac.tensor(var),
                         None if w is None else ac.tensor(w), None if b is None else ac.tensor(b),
                         training=False, eps=1e-3)
        return [y.numpy()]
    y = assert_same_for_thread_counts(run)[0]
    expected = torch.nn.functional.batch_norm(
        torch.tensor(x), torch.tensor(mean), torch.tensor(var),
        None if w is None else torch.tensor(w), None if b is None else torch.tensor(b),
        training=False, eps=1e-3)
    np.testing.assert_allclose(y, expected.numpy(), rtol=1e-5, atol=1e-5)


def test_running_statistics_update_with_momentum():
    x = (rng.standard_normal((6, 3, 4, 4)) * 2 + 5).astype(np.float32)
    rm, rv = ac.zeros(3), ac.ones(3)
    F.batch_norm(ac.tensor(x), rm, rv, training=True, momentum=0.3)
    mean = x.astype(np.float64).mean(axis=(0, 2, 3))
    unbiased = x.astype(np.float64).var(axis=(0, 2, 3), ddof=1)
    np.testing.assert_allclose(rm.numpy(), 0.3 * mean, rtol=1e-5)
    np.testing.assert_allclose(rv.numpy(), 0.7 + 0.3 * unbiased, rtol=1e-5)


def test_statistics_are_stable_for_large_offsets():
    """Values around 1e4 with unit spread: a one-pass E[x^2] - E[x]^2 in float would fail."""
    x = (1e4 + rng.standard_normal((64, 2, 8, 8))).astype(np.float32)
    y = F.batch_norm(ac.tensor(x), None, None, training=True)
    np.testing.assert_allclose(y.numpy(), np_batch_norm_train(x), rtol=1e-3, atol=2e-3)


def test_module_buffers_state_dict_and_checkpoint():
    bn = nn.BatchNorm2d(3, momentum=0.5)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]
    assert [name for name, _ in bn.named_parameters()] == ["weight", "bias"]
    x = (rng.standard_normal((4, 3, 5, 5)) + 3).astype(np.float32)
    with ac.checkpoint():
        bn(ac.tensor(x)).sum().backward()
    # the running statistics are root tensors: the scope's end leaves them updated
    mean = x.astype(np.float64).mean(axis=(0, 2, 3))
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.5 * mean, rtol=1e-5)
    assert bn.num_batches_tracked.item() == 1.0
    assert bn.weight.grad is not None and bn.bias.grad is not None
    bn.eval()
    y = bn(ac.tensor(x))
    expected = np_batch_norm_eval(x, bn.running_mean.numpy(), bn.running_var.numpy(),
                                  bn.weight.numpy(), bn.bias.numpy())
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-4, atol=1e-4)
    assert bn.num_batches_tracked.item() == 1.0


def test_module_load_state_dict_round_trip():
    a, b = nn.BatchNorm1d(4), nn.BatchNorm1d(4)
    a(ac.tensor(rng.standard_normal((8, 4))))
    b.load_state_dict(a.state_dict())
    assert np.array_equal(b.running_var.numpy(), a.running_var.numpy())
    assert b.num_batches_tracked.item() == 1.0


def test_cumulative_average_when_momentum_is_none():
    bn = nn.BatchNorm1d(2, momentum=None)
    batches = [rng.standard_normal((5, 2)).astype(np.float32) + i for i in range(3)]
    for batch in batches:
        bn(ac.tensor(batch))
    expected = np.mean([batch.astype(np.float64).mean(axis=0) for batch in batches], axis=0)
    np.testing.assert_allclose(bn.running_mean.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_module_without_running_stats_uses_batch_statistics_in_eval():
    bn = nn.BatchNorm1d(3, affine=False, track_running_stats=False).eval()
    assert list(bn.state_dict()) == []
    x = rng.standard_normal((6, 3)).astype(np.float32)
    np.testing.assert_allclose(bn(ac.tensor(x)).numpy(), np_batch_norm_train(x),
                               rtol=1e-4, atol=1e-4)


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="expected more than 1 value per channel"):
        F.batch_norm(ac.zeros(1, 3), None, None, training=True)
    with pytest.raises(ValueError, match="eval mode needs running_mean"):
        F.batch_norm(ac.zeros(4, 3), None, None, training=False)
    with pytest.raises(ac.ShapeError,
                       match=r"batch_norm: weight \(4,\) does not fit input \(2, 3\)"):
        F.batch_norm(ac.zeros(2, 3), None, None, ac.ones(4), training=True)
    with pytest.raises(ac.ShapeError, match="batch_norm: input .* must be"):
        F.batch_norm(ac.zeros(3), None, None, training=True)
    with pytest.raises(ValueError, match="both be given"):
        F.batch_norm(ac.zeros(2, 3), ac.zeros(3), None, training=True)
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(ac.zeros(2, 3))
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        nn.BatchNorm1d(3)(ac.zeros(2, 3, 4, 4))


def test_conv_net_steps_leave_no_memory_behind():
    """Steps at root and inside ac.checkpoint() give back all they take."""
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Dropout(0.3), nn.Conv2d(4, 6, 3, stride=2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))
    x = ac.tensor(rng.standard_normal((5, 1, 12, 12)))

    def step():
        model.zero_grad()
        model(x).sum().backward()

    step()
    model.zero_grad()
    before = ac.memory_stats()
    for _ in range(3):
        step()
        with ac.checkpoint():
            step()
    model.zero_grad()
    after = ac.memory_stats()
    assert after["bytes_in_use"] == before["bytes_in_use"]
    assert after["live_tensors"] == before["live_tensors"]
    assert after["live_nodes"] == before["live_nodes"]


# ---- dropout -----------------------------------------------------------------------

def test_dropout_rate_and_scaling():
    x = rng.uniform(1.0, 2.0, (200, 500)).astype(np.float32)
    for p in (0.1, 0.5, 0.8):
        y = F.dropout(ac.tensor(x), p).numpy()
        kept = y != 0
        # 100,000 Bernoulli draws: 6 standard deviations of the kept fraction
        assert abs(kept.mean() - (1 - p)) < 6 * np.sqrt(p * (1 - p) / x.size)
        np.testing.assert_allclose(y[kept], x[kept] / (1 - p), rtol=1e-6)


def test_dropout_gradient_is_the_scaled_mask():
    x = ac.tensor(rng.standard_normal((50, 40)), requires_grad=True)
    y = F.dropout(x, 0.3)
    g = rng.standard_normal((50, 40)).astype(np.float32)
    y.backward(ac.tensor(g))
    mask = (y.numpy() != 0).astype(np.float64)
    np.testing.assert_allclose(x.grad.numpy(), g * mask / 0.7, rtol=1e-6)


def test_dropout_same_seed_same_mask():
    x = ac.ones(1000)
    ac.manual_seed(42)
    first = F.dropout(x, 0.5).numpy()
    second = F.dropout(x, 0.5).numpy()
    ac.manual_seed(42)
    again = F.dropout(x, 0.5).numpy()
    assert np.array_equal(first, again)
    assert not np.array_equal(first, second)


# (shape, feature dropout): one draw per element or per channel plane, over more
# than one chunk of draws (4096 per stream) and an odd last chunk.
@pytest.mark.parametrize("shape, feature", [((100003,), False), ((5, 1701, 3, 3), True)])
def test_dropout_mask_does_not_depend_on_thread_count(shape, feature):
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)

    def run():
        ac.manual_seed(7)
        xt = ac.tensor(x, requires_grad=True)
        y = (F.dropout2d if feature else F.dropout)(xt, 0.4)
        y.backward(ac.tensor(g))
        return [y.numpy(), xt.grad.numpy(), ac.rand(3).numpy()]
    assert_same_for_thread_counts(run)


def test_dropout_chunks_draw_different_masks():
    ac.manual_seed(3)
    kept = F.dropout(ac.ones(3 * 4096), 0.5).numpy() != 0
    chunks = kept.reshape(3, 4096)
    assert not np.array_equal(chunks[0], chunks[1]) and not np.array_equal(chunks[1], chunks[2])
    # each chunk's mask is a fair draw: 6 standard deviations of 4096 draws
    assert np.all(np.abs(chunks.mean(axis=1) - 0.5) < 6 * 0.5 / 64)



_SIMD_SCRIPT = """
import hashlib
import aicraft as ac
import aicraft.nn.functional as F
ac.manual_seed(11)
digest = hashlib.sha256()
for shape, fn in (((100003,), F.dropout), ((3, 4100, 2), F.dropout2d)):
    digest.update(fn(ac.ones(*shape), 0.3).numpy().tobytes())
print(digest.hexdigest())
"""


def test_dropout_mask_is_the_same_on_every_simd_path():
    """The 16 streams a chunk draws side by side run in AVX-512, AVX2 or plain C
    lanes (AC_SIMD, or the best set the CPU has): the same bits on each."""
    digests = set()
    for simd in ("generic", "avx2", "avx512"):
        run = subprocess.run([sys.executable, "-c", _SIMD_SCRIPT], env=dict(os.environ, AC_SIMD=simd),
                             capture_output=True, text=True, check=True)
        digests.add(run.stdout.strip())
    assert len(digests) == 1, digests

def test_dropout_edges():
    x = ac.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    y = F.dropout(x, 1.0)
    assert np.array_equal(y.numpy(), np.zeros((4, 5), np.float32))
    y.sum().backward()
    assert np.array_equal(x.grad.numpy(), np.zeros((4, 5), np.float32))
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="between 0 and 1"):
            F.dropout(x, p)


def test_dropout_module_train_and_eval():
    drop = nn.Dropout(0.25)
    assert repr(drop) == "Dropout(p=0.25, inplace=False)"
    x = ac.ones(64, 64)
    y = drop(x).numpy()
    assert set(np.unique(y).tolist()) <= {0.0, np.float32(1 / 0.75)}
    drop.eval()
    assert drop(x) is x
    with pytest.raises(ValueError):
        nn.Dropout(2.0)
