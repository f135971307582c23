"""layer_norm (C's norm.c) with nn.LayerNorm, and dropout2d (C's dropout.c,
feature dropout) with nn.Dropout2d: layer norm against float64 NumPy, gradients
of input, weight and bias against central differences, parity with PyTorch;
dropout2d zeroes whole channels, scales the rest, is the identity in eval;
errors for bad input."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn
from conftest import check_gradients

rng = np.random.default_rng(17)


def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(np.ndim(x) - k, np.ndim(x)))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


@pytest.mark.parametrize("shape,k", [((4, 6), 1), ((2, 3, 5), 1), ((2, 3, 4), 2), ((7,), 1)])
def test_layer_norm_forward_matches_numpy(shape, k):
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    w = rng.standard_normal(shape[-k:]).astype(np.float32)
    b = rng.standard_normal(shape[-k:]).astype(np.float32)
    got = F.layer_norm(ac.tensor(x), shape[-k:], ac.tensor(w), ac.tensor(b)).numpy()
    np.testing.assert_allclose(got, np_layer_norm(x.astype(np.float64), k, w, b), rtol=1e-5, atol=1e-5)
    got = F.layer_norm(ac.tensor(x), shape[-k:]).numpy()
    np.testing.assert_allclose(got, np_layer_norm(x.astype(np.float64), k), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,k", [((3, 5), 1), ((2, 3, 4), 2)])
def test_layer_norm_gradients_of_input_weight_bias(shape, k):
    x = rng.standard_normal(shape)
    w = rng.standard_normal(shape[-k:])
    b = rng.standard_normal(shape[-k:])
    check_gradients(lambda x, w, b: F.layer_norm(x, shape[-k:], w, b, eps=1e-3),
                    lambda x, w, b: np_layer_norm(x, k, w, b, eps=1e-3), [x, w, b],
                    rtol=2e-3, atol=2e-4)
    check_gradients(lambda x: F.layer_norm(x, shape[-k:], eps=1e-3),
                    lambda x: np_layer_norm(x, k, eps=1e-3), [x], rtol=2e-3, atol=2e-4)


def test_layer_norm_module_parameters_and_state_dict():
    m = nn.LayerNorm((3, 4))
    assert list(m.state_dict()) == ["weight", "bias"]
    np.testing.assert_array_equal(m.weight.numpy(), np.ones((3, 4), np.float32))
    np.testing.assert_array_equal(m.bias.numpy(), np.zeros((3, 4), np.float32))
    assert list(nn.LayerNorm(4, bias=False).state_dict()) == ["weight"]
    assert list(nn.LayerNorm(4, elementwise_affine=False).state_dict()) == []


def test_layer_norm_matches_torch():
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    tm = torch.nn.LayerNorm(8, eps=1e-4)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(rng.standard_normal(8).astype(np.float32)))
        tm.bias.copy_(torch.tensor(rng.standard_normal(8).astype(np.float32)))
    m = nn.LayerNorm(8, eps=1e-4)
    assert list(m.state_dict()) == list(tm.state_dict())
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    g = rng.standard_normal(x.shape).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    tm(tx).backward(torch.tensor(g))
    ax = ac.tensor(x, requires_grad=True)
    out = m(ax)
    out.backward(ac.tensor(g))
    np.testing.assert_allclose(out.numpy(), tm(tx).detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m.bias.grad.numpy(), tm.bias.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_layer_norm_inside_a_scope_frees_everything():
    m = nn.LayerNorm(6)
    x = ac.tensor(rng.standard_normal((4, 6)).astype(np.float32), requires_grad=True)
    before = ac.memory_stats()["bytes_in_use"]
    for _ in range(3):
        with ac.checkpoint():
            m(x).sum().backward()
    x.grad = None
    m.zero_grad()
    assert ac.memory_stats()["bytes_in_use"] <= before


def test_layer_norm_bad_inputs():
    x = ac.randn(2, 3)
    with pytest.raises(ac.ShapeError, match="layer_norm"):
        F.layer_norm(x, (4,))
    with pytest.raises(ac.ShapeError, match="normalized shape"):
        F.layer_norm(x, (3,), ac.ones(4))
    with pytest.raises(ac.ShapeError, match="fewer dims"):
        F.layer_norm(x, (1, 2, 3))
    with pytest.raises(ValueError, match="eps"):
        F.layer_norm(x, (3,), eps=-1.0)
    with pytest.raises(TypeError):
        F.layer_norm(x.numpy(), (3,))
    with pytest.raises(TypeError):
        F.layer_norm(x, (3,), weight=np.ones(3))
    with pytest.raises(TypeError):
        nn.LayerNorm(3)("x")
    with pytest.raises(ValueError):
        nn.LayerNorm(())
    assert F.layer_norm(x, 3).shape == (2, 3)   # still usable


def test_dropout2d_zeroes_whole_channels_and_scales():
    ac.manual_seed(3)
    x = ac.ones(8, 16, 3, 5)
    y = F.dropout2d(x, 0.25).numpy()
    per_channel = y.reshape(8, 16, -1)
    assert set(np.unique(per_channel)) <= {0.0, np.float32(1 / 0.75)}
    assert (per_channel.min(axis=2) == per_channel.max(axis=2)).all()   # a channel is all or nothing
    dropped = (per_channel[:, :, 0] == 0).mean()
    assert 0.1 < dropped < 0.4


def test_dropout2d_gradient_follows_the_mask():
    ac.manual_seed(4)
    x = ac.tensor(rng.standard_normal((2, 6, 2, 2)).astype(np.float32), requires_grad=True)
    y = F.dropout2d(x, 0.5)
    y.sum().backward()
    kept = y.numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 2.0, 0.0))


def test_dropout2d_3d_input_is_n_c_l_as_torch():
    ac.manual_seed(5)
    y = F.dropout2d(ac.ones(4, 6, 5), 0.5).numpy()
    assert (y.min(axis=2) == y.max(axis=2)).all()


def test_dropout2d_module_eval_is_identity_and_seeded():
    m = nn.Dropout2d(0.5)
    x = ac.randn(2, 4, 3, 3)
    ac.manual_seed(9)
    a = m(x).numpy()
    ac.manual_seed(9)
    np.testing.assert_array_equal(a, m(x).numpy())
    m.eval()
    assert m(x) is x
    assert F.dropout2d(x, 0.5, training=False) is x


def test_dropout2d_bad_inputs():
    with pytest.raises(ValueError, match="probability"):
        nn.Dropout2d(1.5)
    with pytest.raises(ValueError, match="probability"):
        F.dropout2d(ac.ones(1, 2, 3, 3), -0.1)
    with pytest.raises(ac.ShapeError, match="dropout2d"):
        F.dropout2d(ac.ones(2), 0.5)      # 2-d inputs: element-wise, as torch (test_script_api.py)
    with pytest.raises(TypeError):
        F.dropout2d([1.0], 0.5)
    with pytest.raises(TypeError):
        nn.Dropout2d()(np.ones((1, 2, 2, 2)))
