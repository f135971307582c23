"""Losses: mse_loss, cross_entropy (class indices, label smoothing),
binary_cross_entropy and binary_cross_entropy_with_logits, each with
reductions none, mean and sum. Forward values against NumPy float64;
gradients against central differences of float64 NumPy code."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.functional as F
from conftest import check_gradients
from thread_counts import assert_same_for_thread_counts

rng = np.random.default_rng(7)
REDUCTIONS = ["none", "mean", "sum"]


def reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def np_mse(x, t, reduction):
    return reduce((x - t) ** 2, reduction)


def np_log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def np_cross_entropy(x, target, reduction, smoothing=0.0):
    """PyTorch's definition: (1 - e) * nll + e * mean over classes of -log p."""
    logp = np_log_softmax(x)
    classes = target.astype(np.int64)
    nll = -np.take_along_axis(logp, classes[..., None], axis=-1)[..., 0]
    loss = (1 - smoothing) * nll + smoothing * (-logp.mean(axis=-1))
    return reduce(loss, reduction)


def np_bce(p, t, reduction):
    log_p = np.maximum(np.log(p), -100.0)
    log_q = np.maximum(np.log1p(-p), -100.0)
    return reduce(-(t * log_p + (1 - t) * log_q), reduction)


def np_bce_logits(x, t, reduction):
    return reduce(np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x))), reduction)


# ---- mse ------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(3, 4), (5,), (), (2, 1, 3)])
def test_mse_forward_and_gradients(reduction, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    t = rng.standard_normal(shape).astype(np.float32)
    out = check_gradients(lambda a, b: F.mse_loss(a, b, reduction=reduction),
                          lambda a, b: np_mse(a, b, reduction), [x, t])
    expected = np_mse(x.astype(np.float64), t.astype(np.float64), reduction)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-7)


def test_mse_requires_the_same_shape():
    with pytest.raises(ac.ShapeError, match=r"mse_loss.*\(3, 1\).*\(3,\)"):
        F.mse_loss(ac.zeros(3, 1), ac.zeros(3))
    assert F.mse_loss(ac.tensor([1.0, 3.0]), [0.0, 1.0]).item() == 2.5


def test_mse_default_reduction_is_mean():
    x, t = ac.tensor([[1.0, 2.0], [3.0, 4.0]]), ac.tensor([[0.0, 0.0], [0.0, 0.0]])
    assert F.mse_loss(x, t).item() == pytest.approx(7.5)


def test_bad_reduction_is_rejected():
    for loss in (F.mse_loss, F.binary_cross_entropy, F.binary_cross_entropy_with_logits):
        with pytest.raises(ValueError, match="reduction"):
            loss(ac.full((2,), 0.5), ac.full((2,), 0.5), reduction="avg")
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(ac.zeros(2, 3), [0, 1], reduction="max")


# ---- cross entropy ----------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 1.0])
def test_cross_entropy_forward_and_gradient(reduction, smoothing):
    x = (rng.standard_normal((6, 5)) * 2).astype(np.float32)
    target = np.array([0, 4, 2, 2, 1, 3], dtype=np.float32)
    out = check_gradients(
        lambda a: F.cross_entropy(a, ac.tensor(target), reduction=reduction, label_smoothing=smoothing),
        lambda a: np_cross_entropy(a, target, reduction, smoothing), [x])
    expected = np_cross_entropy(x.astype(np.float64), target, reduction, smoothing)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_of_one_sample(reduction):
    x = rng.standard_normal(7).astype(np.float32)
    target = np.array(3.0, dtype=np.float32)
    out = check_gradients(lambda a: F.cross_entropy(a, ac.tensor(target), reduction=reduction),
                          lambda a: np_cross_entropy(a, target, reduction), [x])
    assert out.shape == ()


def test_cross_entropy_accepts_a_list_of_classes():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    got = F.cross_entropy(ac.tensor(x), [3, 0, 1]).item()
    assert got == pytest.approx(np_cross_entropy(x.astype(np.float64), np.array([3, 0, 1]), "mean"), rel=1e-6)


def test_cross_entropy_is_stable_for_huge_logits():
    x = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, 1e4], [1e4, 1e4, 1e4]], dtype=np.float32)
    target = np.array([1, 2, 0], dtype=np.float32)
    t = ac.tensor(x, requires_grad=True)
    loss = F.cross_entropy(t, ac.tensor(target), reduction="none")
    np.testing.assert_allclose(loss.numpy(), np_cross_entropy(x.astype(np.float64), target, "none"),
                               rtol=1e-6, atol=1e-6)
    loss.backward(ac.ones(3))
    grad = t.grad.numpy()
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad.sum(axis=1), 0.0, atol=1e-6)


@pytest.mark.parametrize("bad", [5.0, -1.0, 1.5, float("nan"), 1e9])
def test_cross_entropy_rejects_bad_class_indices(bad):
    x = ac.zeros(2, 5, requires_grad=True)
    with pytest.raises(IndexError, match="cross_entropy.*target") as info:
        F.cross_entropy(x, ac.tensor([0.0, bad]))
    assert "position 1" in str(info.value)
    assert F.cross_entropy(x, ac.tensor([0.0, 4.0])).item() == pytest.approx(np.log(5.0))


def test_cross_entropy_rejects_bad_shapes_and_smoothing():
    with pytest.raises(ac.ShapeError, match="cross_entropy"):
        F.cross_entropy(ac.zeros(2, 3), ac.zeros(3))
    with pytest.raises(ac.ShapeError, match="cross_entropy"):
        F.cross_entropy(ac.zeros(2, 3, 4), ac.zeros(2))
    with pytest.raises(ac.ShapeError, match="cross_entropy"):
        F.cross_entropy(ac.zeros(3), ac.zeros(1))
    for smoothing in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="label_smoothing"):
            F.cross_entropy(ac.zeros(2, 3), ac.zeros(2), label_smoothing=smoothing)


def test_cross_entropy_gives_no_gradient_to_the_target():
    x = ac.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    target = ac.tensor([1.0, 2.0], requires_grad=True)
    F.cross_entropy(x, target).backward()
    assert x.grad is not None
    assert target.grad is None


# ---- binary cross entropy -------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(4, 3), (), (5,)])
def test_binary_cross_entropy_forward_and_gradients(reduction, shape):
    p = rng.uniform(0.05, 0.95, shape).astype(np.float32)
    t = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    out = check_gradients(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
                          lambda a, b: np_bce(a, b, reduction), [p, t], rtol=2e-4)
    expected = np_bce(p.astype(np.float64), t.astype(np.float64), reduction)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=2e-6, atol=1e-6)


def test_binary_cross_entropy_clamps_log_at_minus_100():
    p = ac.tensor([0.0, 1.0, 0.0, 1.0])
    t = ac.tensor([1.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(F.binary_cross_entropy(p, t, reduction="none").numpy(), [100, 100, 0, 0])


@pytest.mark.parametrize("bad", [1.5, -0.01, float("nan")])
def test_binary_cross_entropy_rejects_values_outside_0_1(bad):
    with pytest.raises(ValueError, match="binary_cross_entropy"):
        F.binary_cross_entropy(ac.tensor([0.5, bad]), ac.tensor([0.0, 1.0]))
    with pytest.raises(ac.ShapeError, match="binary_cross_entropy"):
        F.binary_cross_entropy(ac.full((2,), 0.5), ac.full((3,), 0.5))
    assert F.binary_cross_entropy(ac.tensor([0.5]), ac.tensor([1.0])).item() == pytest.approx(np.log(2))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(4, 3), (), (2, 2, 2)])
def test_bce_with_logits_forward_and_gradients(reduction, shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    t = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    out = check_gradients(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
                          lambda a, b: np_bce_logits(a, b, reduction), [x, t])
    expected = np_bce_logits(x.astype(np.float64), t.astype(np.float64), reduction)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-6)


def test_bce_with_logits_is_stable_for_huge_logits():
    x = ac.tensor([1e4, -1e4, 1e4, -1e4], requires_grad=True)
    t = ac.tensor([0.0, 1.0, 1.0, 0.0])
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_array_equal(loss.numpy(), [1e4, 1e4, 0.0, 0.0])
    loss.backward(ac.ones(4))
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, -1.0, 0.0, 0.0])


def test_bce_with_logits_requires_the_same_shape():
    with pytest.raises(ac.ShapeError, match="binary_cross_entropy_with_logits|bce_with_logits"):
        F.binary_cross_entropy_with_logits(ac.zeros(4, 1), ac.zeros(4))


# ---- large inputs and threads -----------------------------------------------------

def test_reduced_losses_are_bit_identical_for_any_thread_count():
    x = rng.standard_normal((600, 100)).astype(np.float32)
    t = rng.uniform(0, 1, (600, 100)).astype(np.float32)
    classes = rng.integers(0, 100, 600).astype(np.float32)

    def run():
        logits = ac.tensor(x, requires_grad=True)
        losses = [F.mse_loss(logits, ac.tensor(t), reduction="sum"),
                  F.binary_cross_entropy_with_logits(logits, ac.tensor(t)),
                  F.cross_entropy(logits, ac.tensor(classes), label_smoothing=0.05)]
        sum(losses[1:], losses[0]).backward()
        return [loss.item() for loss in losses] + [logits.grad.numpy()]
    first = assert_same_for_thread_counts(run, (1, 2, 4))
    x64, t64 = x.astype(np.float64), t.astype(np.float64)
    np.testing.assert_allclose(first[0], np_mse(x64, t64, "sum"), rtol=1e-6)
    np.testing.assert_allclose(first[1], np_bce_logits(x64, t64, "mean"), rtol=1e-6)
    np.testing.assert_allclose(first[2], np_cross_entropy(x64, classes, "mean", 0.05), rtol=1e-6)



@pytest.mark.parametrize("reduction, smoothing", [("mean", 0.0), ("sum", 0.1), ("none", 0.0)])
def test_cross_entropy_over_wide_rows_matches_torch_for_any_thread_count(reduction, smoothing):
    """Rows of 1300 classes: the exps run in pieces (the last one short) while the
    next row is prefetched; forward and backward as PyTorch's, the same bits on
    1, 2 and 3 threads."""
    torch = pytest.importorskip("torch")
    x = (rng.standard_normal((37, 1300)) * 3).astype(np.float32)
    classes = rng.integers(0, 1300, 37)
    g = rng.standard_normal(37).astype(np.float32)

    def run():
        logits = ac.tensor(x, requires_grad=True)
        loss = F.cross_entropy(logits, ac.tensor(classes), reduction=reduction, label_smoothing=smoothing)
        loss.backward(ac.tensor(g) if reduction == "none" else None)
        return [loss.numpy(), logits.grad.numpy()]
    loss, grad = assert_same_for_thread_counts(run)
    tx = torch.tensor(x, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(tx, torch.tensor(classes), reduction=reduction,
                                              label_smoothing=smoothing)
    tloss.backward(torch.tensor(g) if reduction == "none" else None)
    np.testing.assert_allclose(loss, tloss.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-4, atol=1e-8)

def test_losses_of_empty_batches_follow_pytorch():
    # mean over no elements is NaN, sum is 0
    x = ac.zeros(0, 3, requires_grad=True)
    assert np.isnan(F.mse_loss(x, ac.zeros(0, 3)).item())
    assert F.mse_loss(x, ac.zeros(0, 3), reduction="sum").item() == 0.0
    assert np.isnan(F.cross_entropy(x, ac.zeros(0)).item())
    loss = F.cross_entropy(x, ac.zeros(0), reduction="sum")
    assert loss.item() == 0.0
    loss.backward()
    assert x.grad.shape == (0, 3)
