"""l1_loss and smooth_l1_loss (C's loss.c) with nn.L1Loss and nn.SmoothL1Loss:
values against float64 NumPy and PyTorch for several betas and every reduction,
gradients of input and target against central differences, bad input."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn
from conftest import check_gradients

rng = np.random.default_rng(31)


def np_smooth_l1(x, t, beta, reduction="mean"):
    d = np.abs(x - t)
    terms = np.where(d < beta, 0.5 * d * d / beta if beta > 0 else 0.0, d - 0.5 * beta)
    return {"none": terms, "mean": terms.mean(), "sum": terms.sum()}[reduction]


def np_l1(x, t, reduction="mean"):
    terms = np.abs(x - t)
    return {"none": terms, "mean": terms.mean(), "sum": terms.sum()}[reduction]


# points away from the kinks |x - t| = 0 and |x - t| = beta, where differences are not smooth
def away_from_kinks(shape, beta):
    x = rng.standard_normal(shape)
    d = rng.uniform(0.1, 3.0, shape) * rng.choice([-1.0, 1.0], shape)
    d = np.where(np.abs(np.abs(d) - beta) < 0.05, d + 0.1 * np.sign(d), d)
    return x, x - d


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0, 2.0])
def test_smooth_l1_values_and_gradients(beta, reduction):
    x, t = away_from_kinks((3, 4), beta)
    out = check_gradients(lambda x, t: F.smooth_l1_loss(x, t, reduction=reduction, beta=beta),
                          lambda x, t: np_smooth_l1(x, t, beta, reduction), [x, t],
                          rtol=1e-3, atol=1e-5)
    x32, t32 = x.astype(np.float32).astype(np.float64), t.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(out.numpy(), np_smooth_l1(x32, t32, beta, reduction), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_l1_values_and_gradients(reduction):
    x, t = away_from_kinks((5, 2), -1.0)
    check_gradients(lambda x, t: F.l1_loss(x, t, reduction=reduction),
                    lambda x, t: np_l1(x, t, reduction), [x, t], rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("beta", [0.0, 0.3, 1.0, 4.0])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_smooth_l1_and_l1_match_torch(beta, reduction):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((6, 7)).astype(np.float32) * 2
    t = rng.standard_normal((6, 7)).astype(np.float32)
    x[0, 0] = t[0, 0]   # the kink at 0: gradient 0 in both
    for ac_loss, t_loss in ((nn.SmoothL1Loss(reduction=reduction, beta=beta),
                             torch.nn.SmoothL1Loss(reduction=reduction, beta=beta)),
                            (nn.L1Loss(reduction=reduction), torch.nn.L1Loss(reduction=reduction))):
        tx, ax = torch.tensor(x, requires_grad=True), ac.tensor(x, requires_grad=True)
        t_out, a_out = t_loss(tx, torch.tensor(t)), ac_loss(ax, ac.tensor(t))
        np.testing.assert_allclose(a_out.numpy(), t_out.detach().numpy(), rtol=1e-5, atol=1e-6)
        t_out.sum().backward()
        a_out.sum().backward()
        np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_l1_losses_bad_inputs():
    x = ac.randn(2, 3)
    with pytest.raises(ac.ShapeError, match="smooth_l1_loss"):
        F.smooth_l1_loss(x, ac.randn(3, 2))
    with pytest.raises(ac.ShapeError, match="l1_loss"):
        F.l1_loss(x, ac.randn(2))
    with pytest.raises(ValueError, match="beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(TypeError, match="beta"):
        F.smooth_l1_loss(x, x, beta="1")
    with pytest.raises(ValueError, match="reduction"):
        F.smooth_l1_loss(x, x, reduction="avg")
    with pytest.raises(ValueError, match="reduction"):
        nn.L1Loss(reduction="avg")
    with pytest.raises(ValueError, match="beta"):
        nn.SmoothL1Loss(beta=-0.5)
    with pytest.raises(TypeError):
        F.l1_loss("x", x)
    lib, ffi = ac._ffi.lib, ac._ffi.ffi
    assert lib.ac_smooth_l1_loss(x._ptr, x._ptr, 1, float("inf")) == ffi.NULL
    assert "beta" in ffi.string(lib.ac_last_error()).decode()
    assert F.smooth_l1_loss(x, x).item() == 0.0   # still usable
