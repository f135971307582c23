"""backward() frees the graph it walks, as PyTorch does: a loss kept after
backward (a list of losses, a closure's result) holds no activations, at root
or in an ac.checkpoint() scope; retain_graph=True keeps the graph for another
backward; a second backward through a freed graph raises PyTorch's error.

The counters are process-wide, so every test compares them with the values it
saw at its own start, after a gc.collect() that clears Python cycles.
"""
import gc

import numpy as np
import pytest

import aicraft as ac
from aicraft import nn, optim
from conftest import numeric_grad

SECOND_TIME = "Trying to backward through the graph a second time"
rng = np.random.default_rng(5)


def stats():
    gc.collect()
    return ac.memory_stats()


def np_loss(x, w1, w2):
    """sum(tanh(x @ w1) @ w2 ** 2) in float64."""
    return float(((np.tanh(x @ w1) @ w2) ** 2).sum())


def ac_loss(x, w1, w2):
    return ((x @ w1).tanh() @ w2).pow(2).sum()


def leaves(*arrays):
    return [ac.tensor(a.astype(np.float32), requires_grad=True) for a in arrays]


ARRAYS = (rng.standard_normal((64, 32)), rng.standard_normal((32, 48)) * 0.3,
          rng.standard_normal((48, 5)) * 0.3)


def test_kept_loss_frees_its_activations_at_root():
    x, w1, w2 = leaves(*ARRAYS)
    before = stats()
    loss = ac_loss(x, w1, w2)
    built = stats()
    loss.backward()
    done = stats()
    activations = 4 * (64 * 48 * 2 + 64 * 5 * 2)       # x@w1, tanh, @w2, pow
    grads = 4 * (64 * 32 + 32 * 48 + 48 * 5)
    assert built["bytes_in_use"] - before["bytes_in_use"] >= activations
    assert done["bytes_in_use"] - before["bytes_in_use"] < grads + 4096
    assert done["live_nodes"] - before["live_nodes"] == 1  # the kept loss's own
    assert loss.item() == pytest.approx(np_loss(*ARRAYS), rel=1e-4)


def test_kept_loss_frees_its_activations_in_a_scope():
    x, w1, w2 = leaves(*ARRAYS)
    with ac.checkpoint():
        loss = ac_loss(x, w1, w2)
        built = stats()["bytes_in_use"]
        loss.backward()
        freed = built - stats()["bytes_in_use"]
        assert freed >= 4 * 64 * 48 * 2 - 4 * (64 * 32 + 32 * 48 + 48 * 5) - 8192
        assert loss.item() == pytest.approx(np_loss(*ARRAYS), rel=1e-4)
        with pytest.raises(RuntimeError, match=SECOND_TIME):
            loss.backward()


def test_twenty_held_losses_of_an_mlp_keep_almost_nothing():
    ac.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = ac.randn(256, 784)
    y = ac.tensor(rng.integers(0, 10, 256).astype(np.float32))

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step()                                  # grads and spares exist from here on
    before = stats()
    losses = [step() for _ in range(20)]
    after = stats()
    assert after["bytes_in_use"] - before["bytes_in_use"] < 20 * 1024   # a step's activations: > 1 MB
    assert after["live_nodes"] - before["live_nodes"] == 20
    assert all(np.isfinite(loss.item()) for loss in losses)


def test_retain_graph_allows_a_second_backward():
    x, w1, w2 = leaves(*ARRAYS)
    loss = ac_loss(x, w1, w2)
    loss.backward(retain_graph=True)
    loss.backward()
    expected = numeric_grad(np_loss, ARRAYS)
    for t, g in zip((x, w1, w2), expected):
        np.testing.assert_allclose(t.grad.numpy(), 2 * g, rtol=2e-3, atol=2e-4)
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        loss.backward(retain_graph=True)


def test_retain_graph_with_a_gradient_matches_pytorch():
    torch = pytest.importorskip("torch")
    data = rng.standard_normal((3, 4)).astype(np.float32)
    weights = rng.standard_normal((3, 4)).astype(np.float32)
    ours_x = ac.tensor(data, requires_grad=True)
    theirs_x = torch.tensor(data, requires_grad=True)
    ours, theirs = (ours_x.exp() * 2).sin(), (theirs_x.exp() * 2).sin()
    ours.backward(ac.tensor(weights), retain_graph=True)
    theirs.backward(torch.tensor(weights), retain_graph=True)
    ours.backward(ac.tensor(weights * 3))
    theirs.backward(torch.tensor(weights * 3))
    np.testing.assert_allclose(ours_x.grad.numpy(), theirs_x.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_second_backward_raises_pytorchs_error():
    torch = pytest.importorskip("torch")
    theirs = (torch.ones(2, requires_grad=True) * 3).exp().sum()
    theirs.backward()
    with pytest.raises(RuntimeError) as torch_error:
        theirs.backward()
    x = ac.ones(2, requires_grad=True)
    ours = (x * 3).exp().sum()
    ours.backward()
    grad = x.grad.numpy().copy()
    with pytest.raises(RuntimeError) as our_error:
        ours.backward()
    assert str(torch_error.value) in str(our_error.value)
    np.testing.assert_array_equal(x.grad.numpy(), grad)   # nothing was added
    assert ours.item() == pytest.approx(2 * np.exp(3.0), rel=1e-6)


def test_a_graph_built_on_a_freed_one_raises():
    x = ac.ones(3, requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        (loss * 2).backward()
    fresh = (x * 2).sum()                   # x itself is a leaf: new graphs from it work
    fresh.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0, 4.0])


def test_backward_rejects_a_bad_gradient_with_retain_graph():
    x = ac.ones(2, requires_grad=True)
    y = x * 2
    with pytest.raises(TypeError, match="backward: gradient must be a Tensor"):
        y.backward("ones", retain_graph=True)
    with pytest.raises(ac.ShapeError, match="backward: gradient of shape"):
        y.backward(ac.ones(3), retain_graph=True)
    with pytest.raises(ac.ShapeError, match="needs an explicit gradient"):
        y.backward(retain_graph=True)
    with ac.checkpoint():
        g = ac.ones(2)
    with pytest.raises(ac.ScopeError):
        y.backward(g, retain_graph=True)
    y.backward(ac.ones(2))                  # nothing was freed by the failures
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
