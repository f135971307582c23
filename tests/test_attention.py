"""nn.MultiheadAttention, nn.TransformerEncoderLayer and nn.TransformerEncoder
(composed in Python from differentiable ops): state_dict keys and shapes equal
to PyTorch's; with the same weights, the same outputs, attention weights and
gradients as torch, with and without float masks (a causal -inf mask, a key
padding mask), batch_first, norm_first, train mode with dropout 0 and eval
mode; bad input."""
import numpy as np
import pytest

import aicraft as ac
from aicraft import nn

rng = np.random.default_rng(29)
torch = pytest.importorskip("torch")


def load_from_torch(m, tm):
    assert list(m.state_dict()) == list(tm.state_dict())
    for k, v in m.state_dict().items():
        assert tuple(v.shape) == tuple(tm.state_dict()[k].shape), k
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})


def causal_mask(n):
    return np.triu(np.full((n, n), -np.inf, np.float32), 1)


def compare_grads(m, tm, pairs):
    for a, t in pairs:
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-3, atol=1e-5)
    t_params = dict(tm.named_parameters())
    for name, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), rtol=1e-3,
                                   atol=1e-5, err_msg=name)


@pytest.mark.parametrize("masks", ["none", "causal", "padding", "both", "per_head"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_torch(masks, batch_first):
    E, heads, L, N = 8, 2, 5, 3
    tm = torch.nn.MultiheadAttention(E, heads, batch_first=batch_first)
    with torch.no_grad():
        tm.in_proj_bias.normal_()
        tm.out_proj.bias.normal_()
    m = nn.MultiheadAttention(E, heads, batch_first=batch_first)
    load_from_torch(m, tm)
    shape = (N, L, E) if batch_first else (L, N, E)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    attn = kpm = None
    if masks in ("causal", "both"):
        attn = causal_mask(L)
    if masks == "per_head":
        attn = rng.standard_normal((N * heads, L, L)).astype(np.float32)
    if masks in ("padding", "both"):
        kpm = np.zeros((N, L), np.float32)
        kpm[0, -2:] = -np.inf
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    aq, ak, av = (ac.tensor(a, requires_grad=True) for a in (q, k, v))
    t_out, t_w = tm(tq, tk, tv, attn_mask=None if attn is None else torch.tensor(attn),
                    key_padding_mask=None if kpm is None else torch.tensor(kpm))
    a_out, a_w = m(aq, ak, av, attn_mask=None if attn is None else ac.tensor(attn),
                   key_padding_mask=None if kpm is None else ac.tensor(kpm))
    np.testing.assert_allclose(a_out.numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(a_w.numpy(), t_w.detach().numpy(), rtol=1e-4, atol=1e-6)
    g = rng.standard_normal(t_out.shape).astype(np.float32)
    (t_out * torch.tensor(g)).sum().backward()
    (a_out * ac.tensor(g)).sum().backward()
    compare_grads(m, tm, [(aq, tq), (ak, tk), (av, tv)])


def test_multihead_attention_per_head_weights_unbatched_and_no_weights():
    tm = torch.nn.MultiheadAttention(6, 3, bias=False)
    m = nn.MultiheadAttention(6, 3, bias=False)
    load_from_torch(m, tm)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t_out, t_w = tm(*(torch.tensor(x),) * 3, average_attn_weights=False)
    a_out, a_w = m(*(ac.tensor(x),) * 3, average_attn_weights=False)
    np.testing.assert_allclose(a_out.numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(a_w.numpy(), t_w.detach().numpy(), rtol=1e-4, atol=1e-6)
    assert m(*(ac.tensor(x),) * 3, need_weights=False)[1] is None


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_matches_torch_train_and_eval(norm_first, activation):
    d, heads, ff, L, N = 8, 2, 16, 6, 2
    t_layer = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation=activation,
                                               norm_first=norm_first)
    tm = torch.nn.TransformerEncoder(t_layer, 2, norm=torch.nn.LayerNorm(d),
                                     enable_nested_tensor=False)
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation=activation,
                                       norm_first=norm_first)
    m = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(d))
    with torch.no_grad():
        for p in tm.parameters():
            p.add_(0.1 * torch.randn(p.shape))   # layers differ, biases non-zero
    load_from_torch(m, tm)
    x = rng.standard_normal((L, N, d)).astype(np.float32)
    mask = causal_mask(L)
    tx, ax = torch.tensor(x, requires_grad=True), ac.tensor(x, requires_grad=True)
    t_out = tm(tx, mask=torch.tensor(mask))
    a_out = m(ax, mask=ac.tensor(mask))
    np.testing.assert_allclose(a_out.numpy(), t_out.detach().numpy(), rtol=1e-4, atol=1e-4)
    g = rng.standard_normal(x.shape).astype(np.float32)
    (t_out * torch.tensor(g)).sum().backward()
    (a_out * ac.tensor(g)).sum().backward()
    compare_grads(m, tm, [(ax, tx)])
    tm.eval()
    m.eval()
    with torch.no_grad():
        t_eval = tm(tx, mask=torch.tensor(mask))
    with ac.no_grad():
        np.testing.assert_allclose(m(ax, mask=ac.tensor(mask)).numpy(), t_eval.numpy(),
                                   rtol=1e-4, atol=1e-4)


def test_encoder_layers_start_as_copies_and_dropout_acts_in_training():
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.5)
    enc = nn.TransformerEncoder(layer, 3)
    w = [enc.layers[i].linear1.weight.numpy() for i in range(3)]
    np.testing.assert_array_equal(w[0], layer.linear1.weight.numpy())
    np.testing.assert_array_equal(w[0], w[2])
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    x = ac.randn(5, 2, 4)
    ac.manual_seed(1)
    a = enc(x).numpy()
    ac.manual_seed(2)
    assert not np.allclose(a, enc(x).numpy())
    enc.eval()
    np.testing.assert_array_equal(enc(x).numpy(), enc(x).numpy())


def test_attention_bad_inputs():
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(NotImplementedError):
        nn.MultiheadAttention(6, 2, kdim=3)
    m = nn.MultiheadAttention(4, 2)
    x = ac.randn(3, 2, 4)
    with pytest.raises(TypeError, match="bool or float32"):
        m(x, x, x, attn_mask=np.zeros((3, 3), bool))       # a NumPy array, not a Tensor
    with pytest.raises(TypeError, match="bool or float32"):
        m(x, x, x, attn_mask=ac.zeros(3, 3, dtype=ac.int64))
    with pytest.raises(ac.ShapeError, match="attn_mask"):
        m(x, x, x, attn_mask=ac.zeros(2, 3))
    with pytest.raises(ac.ShapeError, match="key_padding_mask"):
        m(x, x, x, key_padding_mask=ac.zeros(3, 3))
    with pytest.raises(ac.ShapeError, match="embed_dim"):
        m(ac.randn(3, 2, 5), ac.randn(3, 2, 5), ac.randn(3, 2, 5))
    with pytest.raises(ac.ShapeError):
        m(x, ac.randn(3, 4), x)
    with pytest.raises(TypeError):
        m("x", x, x)
    with pytest.raises(RuntimeError, match="is_causal"):
        m(x, x, x, is_causal=True)
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(4, 2, activation="swish")
    with pytest.raises(ValueError, match="dropout"):
        nn.TransformerEncoderLayer(4, 2, dropout=2.0)
    with pytest.raises(TypeError):
        nn.TransformerEncoder(nn.Linear(2, 2), 2)
    with pytest.raises(ValueError):
        nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8), -1)
    assert m(x, x, x)[0].shape == (3, 2, 4)   # still usable


def test_bool_masks_equal_their_float_forms():
    ac.manual_seed(5)
    m = nn.MultiheadAttention(8, 2)
    x = ac.randn(5, 3, 8)
    hide = np.triu(np.ones((5, 5), bool), 1)
    pad = np.zeros((3, 5), bool)
    pad[1, 3:] = True
    as_float = lambda b: ac.tensor(np.where(b, -np.inf, 0.0).astype(np.float32))
    out_b, w_b = m(x, x, x, attn_mask=ac.tensor(hide), key_padding_mask=ac.tensor(pad))
    out_f, w_f = m(x, x, x, attn_mask=as_float(hide), key_padding_mask=as_float(pad))
    np.testing.assert_array_equal(out_b.numpy(), out_f.numpy())
    np.testing.assert_array_equal(w_b.numpy(), w_f.numpy())
    assert w_b.numpy()[1, :, 3:].max() == 0.0
