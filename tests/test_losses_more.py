"""The losses' options and the losses aicraft gained, against torch: values and the
gradients of every float input, per reduction; the modules' torch signatures; bad inputs."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn as nn
import aicraft.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
rng = np.random.default_rng(5)
N, C = 4, 5


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def both(value, grad=False):
    """(aicraft's, torch's) of a NumPy array or a plain value."""
    if not isinstance(value, np.ndarray):
        return value, value
    return ac.tensor(value, requires_grad=grad), torch.tensor(value, requires_grad=grad)


def check(name, arrays, grads=(0,), **kwargs):
    """F.name against torch's on arrays (those at grads require grad) and kwargs."""
    pairs = [both(a, i in grads) for i, a in enumerate(arrays)]
    kw_pairs = {k: both(v) for k, v in kwargs.items()}
    out = getattr(F, name)(*[p[0] for p in pairs], **{k: v[0] for k, v in kw_pairs.items()})
    out_t = getattr(TF, name)(*[p[1] for p in pairs], **{k: v[1] for k, v in kw_pairs.items()})
    assert out.shape == tuple(out_t.shape)
    g = arr(*out_t.shape)
    out.backward(ac.tensor(g))
    out_t.backward(torch.tensor(g))
    scale = max(1.0, float(np.abs(out_t.detach().numpy()).max()))
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-4, atol=1e-5 * scale)
    for a, t in pairs:
        if isinstance(a, ac.Tensor) and a.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5,
                                       equal_nan=True)


def probabilities(*shape, axis=1):
    p = np.abs(arr(*shape)) + 0.05
    return (p / p.sum(axis, keepdims=True)).astype(np.float32)


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_on_spatial_inputs_and_options(reduction):
    x, t = arr(N, C, 3, 2), rng.integers(0, C, (N, 3, 2))
    weight = np.abs(arr(C)) + 0.1
    ignored = t.copy()
    ignored[1, 1, 1] = -1
    check("cross_entropy", [x, t], reduction=reduction)
    check("cross_entropy", [x, ignored], weight=weight, ignore_index=-1, label_smoothing=0.2,
          reduction=reduction)
    check("cross_entropy", [x[:, :, 0, 0], t[:, 0, 0]], ignore_index=2, label_smoothing=0.1,
          reduction=reduction)
    check("nll_loss", [x, t], weight=weight, reduction=reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_on_class_probabilities(reduction):
    check("cross_entropy", [arr(N, C, 3), probabilities(N, C, 3)], (0, 1), reduction=reduction,
          label_smoothing=0.1, weight=np.abs(arr(C)) + 0.1)
    check("cross_entropy", [arr(N, C), probabilities(N, C)], reduction=reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_weight_and_pos_weight(reduction):
    p = np.clip(np.abs(arr(N, C)), 0.05, 0.95).astype(np.float32)
    y = rng.random((N, C)).astype(np.float32)
    check("binary_cross_entropy", [p, y], (0, 1), weight=arr(C), reduction=reduction)
    check("binary_cross_entropy_with_logits", [arr(N, C), y], (0, 1), weight=arr(N, C),
          pos_weight=np.abs(arr(C)), reduction=reduction)
    check("binary_cross_entropy_with_logits", [arr(N, C) * 30, y], pos_weight=np.abs(arr(C)),
          reduction=reduction)                 # large logits stay finite


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    target = probabilities(N, C)
    target[0, 0] = 0.0                      # x log x is 0 there (its gradient NaN, as torch's)
    if log_target:
        target = np.log(probabilities(N, C))
    check("kl_div", [np.log(probabilities(N, C)), target], (0, 1), reduction=reduction,
          log_target=log_target)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction):
    check("huber_loss", [arr(N, C) * 2, arr(N, C)], (0, 1), reduction=reduction, delta=0.7)
    check("smooth_l1_loss", [arr(N, C) * 2, arr(N, C)], (0, 1), reduction=reduction, beta=0.4)
    check("poisson_nll_loss", [arr(N, C), np.abs(arr(N, C)) * 3], full=True, reduction=reduction)
    check("poisson_nll_loss", [np.abs(arr(N, C)), np.abs(arr(N, C)) * 3], log_input=False,
          reduction=reduction)
    check("gaussian_nll_loss", [arr(N, C), arr(N, C), np.abs(arr(N, C))], (0, 1, 2), full=True,
          reduction=reduction)
    check("gaussian_nll_loss", [arr(N, C), arr(N, C), np.abs(arr(N))], (0, 1, 2),
          reduction=reduction)
    check("gaussian_nll_loss", [arr(N, C), arr(N, C), np.abs(arr(N, 1)) * 1e-8], (0, 2),
          reduction=reduction)                # var clamped to eps, gradient passed through


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_and_embedding_losses(reduction):
    signs = np.sign(arr(N, C)).astype(np.float32)
    check("soft_margin_loss", [arr(N, C), signs], reduction=reduction)
    check("margin_ranking_loss", [arr(N), arr(N), signs[:, 0]], (0, 1), margin=0.3,
          reduction=reduction)
    check("hinge_embedding_loss", [arr(N, C), signs], margin=0.5, reduction=reduction)
    check("cosine_embedding_loss", [arr(N, C), arr(N, C), signs[:, 0]], (0, 1), margin=0.2,
          reduction=reduction)
    check("triplet_margin_loss", [arr(N, C), arr(N, C), arr(N, C)], (0, 1, 2), margin=0.5,
          swap=True,
          reduction=reduction)
    check("triplet_margin_loss", [arr(N, C), arr(N, C), arr(N, C)], (0, 1, 2), p=3,
          reduction=reduction)
    labels = (rng.random((N, C)) > 0.5).astype(np.float32)
    check("multilabel_soft_margin_loss", [arr(N, C), labels], weight=np.abs(arr(C)),
          reduction=reduction)
    check("multi_margin_loss", [arr(N, C), rng.integers(0, C, N)], reduction=reduction)
    check("multi_margin_loss", [arr(N, C), rng.integers(0, C, N)], p=2, margin=0.5,
          weight=np.abs(arr(C)), reduction=reduction)


def test_legacy_size_average_and_reduce_map_as_torch():
    x, y = ac.tensor(arr(3, 4)), ac.tensor(arr(3, 4))
    assert F.mse_loss(x, y, None, False).shape == (3, 4)
    np.testing.assert_allclose(F.mse_loss(x, y, False).item(), F.mse_loss(x, y, reduction="sum").item(),
                               rtol=1e-6)
    assert nn.L1Loss(None, False).reduction == "none"
    assert nn.CrossEntropyLoss(None, None, -100, None, "sum").reduction == "sum"


def test_loss_modules_match_functional_forms():
    x, t = ac.tensor(arr(N, C)), ac.tensor(rng.integers(0, C, N))
    w = ac.tensor(np.abs(arr(C)))
    for module, value in [
            (nn.CrossEntropyLoss(w, label_smoothing=0.1, ignore_index=1),
             F.cross_entropy(x, t, w, label_smoothing=0.1, ignore_index=1)),
            (nn.BCEWithLogitsLoss(pos_weight=w), F.binary_cross_entropy_with_logits(
                x, ac.ones(N, C), pos_weight=w)),
            (nn.HuberLoss(delta=0.5), F.huber_loss(x, ac.zeros(N, C), delta=0.5)),
            (nn.KLDivLoss(reduction="batchmean", log_target=True),
             F.kl_div(x, ac.zeros(N, C), reduction="batchmean", log_target=True)),
            (nn.MultiMarginLoss(p=2), F.multi_margin_loss(x, t, p=2))]:
        if isinstance(module, nn.CrossEntropyLoss):
            got = module(x, t)
        elif isinstance(module, nn.BCEWithLogitsLoss):
            got = module(x, ac.ones(N, C))
        elif isinstance(module, nn.MultiMarginLoss):
            got = module(x, t)
        else:
            got = module(x, ac.zeros(N, C))
        np.testing.assert_allclose(got.numpy(), value.numpy(), rtol=1e-6)
    assert nn.TripletMarginLoss(margin=0.5)(x, x, x).shape == ()
    assert nn.GaussianNLLLoss()(x, x, ac.ones(N, C)).shape == ()
    assert nn.PoissonNLLLoss(log_input=False)(ac.ones(N), ac.ones(N)).shape == ()
    assert nn.CosineEmbeddingLoss(0.1)(x, x, ac.ones(N)).shape == ()
    assert nn.MarginRankingLoss(0.1)(x[:, 0], x[:, 1], ac.ones(N)).shape == ()
    assert nn.HingeEmbeddingLoss()(x, ac.ones(N, C)).shape == ()
    assert nn.SoftMarginLoss()(x, ac.ones(N, C)).shape == ()
    assert nn.MultiLabelSoftMarginLoss()(x, ac.ones(N, C)).shape == ()


def test_loss_bad_inputs():
    x = ac.tensor(arr(N, C))
    with pytest.raises(ValueError, match="reduction"):
        F.kl_div(x, x, reduction="average")
    with pytest.raises(ValueError, match="delta"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, ac.tensor([0, 1, 2, 3]), label_smoothing=2.0)
    with pytest.raises(ac.ShapeError, match="weight"):
        F.cross_entropy(x, ac.tensor([0, 1, 2, 3]), weight=ac.ones(3))
    with pytest.raises(IndexError, match="not a class index"):
        F.cross_entropy(ac.zeros(2, 3, 4), ac.tensor([[0, 1, 2, 3], [0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="Target size"):
        F.binary_cross_entropy_with_logits(x, ac.zeros(N), pos_weight=ac.ones(C))
    with pytest.raises(ValueError, match="var"):
        F.gaussian_nll_loss(x, x, ac.ones(3))
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(x, x, -ac.ones(N, C))
    with pytest.raises(ValueError, match="p == 1"):
        F.multi_margin_loss(x, ac.tensor([0, 1, 2, 3]), p=3)
    with pytest.raises(TypeError):
        F.soft_margin_loss([1.0], x)
    with pytest.raises(ValueError, match="margin"):
        nn.TripletMarginLoss(margin=0.0)
