"""nn.RNN and nn.RNNCell (tanh and relu, over C's ac_rnn_tanh / ac_rnn_relu):
outputs against a float64 NumPy Elman RNN, gradients of input, state and every
weight against central differences (both directions, batch_first), parity with
torch.nn.RNN (2 layers, bidirectional, relu), state_dict keys, bad input."""
import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from conftest import check_gradients

rng = np.random.default_rng(23)


def np_rnn_layer(x, h0, w_ih, w_hh, b_ih, b_hh, relu, reverse):
    """x (T, B, I) -> (output (T, B, H), h_n (B, H)), float64."""
    act = (lambda v: np.maximum(v, 0.0)) if relu else np.tanh
    h = h0
    out = [None] * x.shape[0]
    for t in (range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])):
        pre = x[t] @ w_ih.T + h @ w_hh.T
        if b_ih is not None:
            pre = pre + b_ih + b_hh
        h = act(pre)
        out[t] = h
    return np.stack(out), h


def c_layer(relu):
    fn = ac._ffi.lib.ac_rnn_relu if relu else ac._ffi.lib.ac_rnn_tanh

    def run(x, h0, w_ih, w_hh, b_ih, b_hh, batch_first, reverse):
        from aicraft.nn.rnn import _run_layer
        return _run_layer(fn, False, x, h0, None, (w_ih, w_hh, b_ih, b_hh), batch_first, reverse)
    return run


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_rnn_layer_gradients(relu, reverse, batch_first):
    T, B, I, H = 4, 3, 2, 5
    x = rng.standard_normal((B, T, I) if batch_first else (T, B, I))
    h0 = rng.standard_normal((B, H)) * 0.5
    w = [rng.standard_normal(s) * 0.6 for s in ((H, I), (H, H), (H,), (H,))]
    run = c_layer(relu)

    def ac_fn(x, h0, w_ih, w_hh, b_ih, b_hh):
        out, h_n, _ = run(x, h0, w_ih, w_hh, b_ih, b_hh, batch_first, reverse)
        return ac.cat([out.reshape(-1), h_n.reshape(-1)])

    def np_fn(x, h0, w_ih, w_hh, b_ih, b_hh):
        seq = np.swapaxes(x, 0, 1) if batch_first else x
        out, h_n = np_rnn_layer(seq, h0, w_ih, w_hh, b_ih, b_hh, relu, reverse)
        out = np.swapaxes(out, 0, 1) if batch_first else out
        return np.concatenate([out.reshape(-1), h_n.reshape(-1)])

    check_gradients(ac_fn, np_fn, [x, h0] + w, rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("relu", [False, True])
def test_rnn_layer_without_bias_or_state(relu):
    x = rng.standard_normal((3, 2, 4))
    w = [rng.standard_normal(s) * 0.5 for s in ((6, 4), (6, 6))]
    run = c_layer(relu)
    check_gradients(lambda x, a, b: run(x, None, a, b, None, None, False, False)[0],
                    lambda x, a, b: np_rnn_layer(x, np.zeros((2, 6)), a, b, None, None, relu, False)[0],
                    [x] + w, rtol=2e-3, atol=2e-4)


def torch_pair(torch, **kwargs):
    tm = getattr(torch.nn, kwargs.pop("kind", "RNN"))(**kwargs)
    m = getattr(nn, type(tm).__name__)(**kwargs)
    assert list(m.state_dict()) == list(tm.state_dict())
    for k, v in m.state_dict().items():
        assert tuple(v.shape) == tuple(tm.state_dict()[k].shape), k
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return tm, m


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(nonlinearity="relu"),
    dict(num_layers=2),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, nonlinearity="relu", batch_first=True),
    dict(bias=False),
])
def test_rnn_matches_torch(kwargs):
    torch = pytest.importorskip("torch")
    tm, m = torch_pair(torch, input_size=3, hidden_size=5, **kwargs)
    batch_first = kwargs.get("batch_first", False)
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    x = rng.standard_normal((2, 6, 3) if batch_first else (6, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((layers, 2, 5)).astype(np.float32)
    tx, th = torch.tensor(x, requires_grad=True), torch.tensor(h0, requires_grad=True)
    ax, ah = ac.tensor(x, requires_grad=True), ac.tensor(h0, requires_grad=True)
    t_out, t_hn = tm(tx, th)
    a_out, a_hn = m(ax, ah)
    np.testing.assert_allclose(a_out.numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(a_hn.numpy(), t_hn.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = rng.standard_normal(t_out.shape).astype(np.float32)
    gh = rng.standard_normal(t_hn.shape).astype(np.float32)
    ((t_out * torch.tensor(g)).sum() + (t_hn * torch.tensor(gh)).sum()).backward()
    ((a_out * ac.tensor(g)).sum() + (a_hn * ac.tensor(gh)).sum()).backward()
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ah.grad.numpy(), th.grad.numpy(), rtol=1e-4, atol=1e-5)
    t_params = dict(tm.named_parameters())
    for name, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_cell_matches_torch(nonlinearity):
    torch = pytest.importorskip("torch")
    tm, m = torch_pair(torch, kind="RNNCell", input_size=4, hidden_size=3, nonlinearity=nonlinearity)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    h = rng.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(m(ac.tensor(x), ac.tensor(h)).numpy(),
                               tm(torch.tensor(x), torch.tensor(h)).detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m(ac.tensor(x[0])).numpy(), tm(torch.tensor(x[0])).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_rnn_unbatched_and_default_state():
    m = nn.RNN(3, 4, num_layers=2)
    out, h_n = m(ac.randn(5, 3))
    assert out.shape == (5, 4) and h_n.shape == (2, 4)
    assert "nonlinearity='relu'" in repr(nn.RNN(3, 4, nonlinearity="relu"))


def test_rnn_bad_inputs():
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNNCell(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError):
        nn.RNN(3, 0)
    m = nn.RNN(3, 4)
    with pytest.raises(ac.ShapeError, match="features"):
        m(ac.randn(5, 2, 2))
    with pytest.raises(ac.ShapeError, match="h0"):
        m(ac.randn(5, 2, 3), ac.randn(1, 3, 4))
    with pytest.raises(TypeError):
        m(np.zeros((5, 2, 3)))
    with pytest.raises(TypeError):
        nn.RNNCell(3, 4)(ac.randn(2, 3), np.zeros((2, 4)))
    lib = ac._ffi.lib
    ffi = ac._ffi.ffi
    assert lib.ac_rnn_tanh(ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, 0, 0,
                           ffi.NULL) == ffi.NULL
    assert "rnn_tanh" in ffi.string(lib.ac_last_error()).decode()
    assert m(ac.randn(5, 2, 3))[0].shape == (5, 2, 4)   # still usable
