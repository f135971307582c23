"""nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell (over C's ac_lstm / ac_gru): outputs and
final states against a float64 NumPy implementation of PyTorch's gate equations
written here; gradients of every input and parameter against central differences
of it, over several steps, layers and both directions; weights with PyTorch's
names loaded from safetensors (and, when torch is importable, the same outputs
and gradients as torch.nn.LSTM/GRU/RNN, also at batches past and short of the
GEMM's tiles and odd sizes); bits that do not depend on the thread count;
ac_lstm with h0 or c0 alone; dropout between layers; backward through
1,000 steps with memory that grows linearly and is returned when the scope ends;
clear errors for bad input."""
import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from conftest import check_gradients, numeric_grad
from thread_counts import assert_same_for_thread_counts

rng = np.random.default_rng(5)


# ---- the NumPy reference (float64) -------------------------------------------------

def sigmoid(v):
    return 0.5 * (1.0 + np.tanh(0.5 * v))   # no overflow for large |v|


def np_lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh):
    gates = x @ w_ih.T + h @ w_hh.T
    if b_ih is not None:
        gates = gates + b_ih + b_hh
    i, f, g, o = np.split(gates, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def np_gru_step(x, h, w_ih, w_hh, b_ih, b_hh):
    gi, gh = x @ w_ih.T, h @ w_hh.T
    if b_ih is not None:
        gi, gh = gi + b_ih, gh + b_hh
    i_r, i_z, i_n = np.split(gi, 3, axis=-1)
    h_r, h_z, h_n = np.split(gh, 3, axis=-1)
    r, z = sigmoid(i_r + h_r), sigmoid(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def np_rnn(mode, x, h0, c0, params, num_layers, directions, batch_first):
    """PyTorch's multi-layer LSTM/GRU: (output, h_n, c_n or None); params by PyTorch name."""
    seq = np.swapaxes(x, 0, 1) if batch_first else x          # (T, B, I)
    T, B = seq.shape[:2]
    H = params["weight_hh_l0"].shape[1]
    h_n, c_n = [], []
    for layer in range(num_layers):
        outputs = []
        for d in range(directions):
            k = layer * directions + d
            suffix = "_l%d%s" % (layer, "_reverse" if d else "")
            w = [params.get(p + suffix) for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            h = np.zeros((B, H)) if h0 is None else h0[k]
            c = np.zeros((B, H)) if c0 is None else c0[k]
            out = [None] * T
            for t in (range(T - 1, -1, -1) if d else range(T)):
                if mode == "LSTM":
                    h, c = np_lstm_step(seq[t], h, c, *w)
                else:
                    h = np_gru_step(seq[t], h, *w)
                out[t] = h
            outputs.append(np.stack(out))
            h_n.append(h)
            c_n.append(c)
        seq = np.concatenate(outputs, axis=-1)
    output = np.swapaxes(seq, 0, 1) if batch_first else seq
    return output, np.stack(h_n), (np.stack(c_n) if mode == "LSTM" else None)


# ---- helpers ------------------------------------------------------------------------

def make_model(mode, input_size, hidden, scale=0.6, **kwargs):
    """A model whose parameters are fresh random float32 values; returns (model, params)."""
    model = (nn.LSTM if mode == "LSTM" else nn.GRU)(input_size, hidden, **kwargs)
    params = {name: (rng.standard_normal(p.shape) * scale).astype(np.float32)
              for name, p in model.named_parameters()}
    model.load_state_dict({name: ac.tensor(v) for name, v in params.items()})
    return model, params


def run_model(model, x, h0=None, c0=None):
    """(output, h_n, c_n or None) as NumPy arrays."""
    state = None
    if h0 is not None:
        state = (ac.tensor(h0), ac.tensor(c0)) if isinstance(model, nn.LSTM) else ac.tensor(h0)
    out, hidden = model(ac.tensor(x), state)
    if isinstance(model, nn.LSTM):
        return out.numpy(), hidden[0].numpy(), hidden[1].numpy()
    return out.numpy(), hidden.numpy(), None


def input_shape(T, B, I, batch_first):
    return (B, T, I) if batch_first else (T, B, I)


# ---- forward -----------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("num_layers,bidirectional,batch_first,bias,with_state", [
    (1, False, False, True, False),
    (1, False, True, True, True),
    (2, False, False, False, True),
    (2, True, True, True, True),
    (3, True, False, True, False),
])
def test_forward_matches_numpy(mode, num_layers, bidirectional, batch_first, bias, with_state):
    T, B, I, H = 6, 3, 5, 4
    D = 2 if bidirectional else 1
    model, params = make_model(mode, I, H, num_layers=num_layers, bidirectional=bidirectional,
                               batch_first=batch_first, bias=bias)
    x = rng.standard_normal(input_shape(T, B, I, batch_first)).astype(np.float32)
    h0 = c0 = None
    if with_state:
        h0 = rng.standard_normal((num_layers * D, B, H)).astype(np.float32)
        c0 = rng.standard_normal((num_layers * D, B, H)).astype(np.float32)
    out, h_n, c_n = run_model(model, x, h0, c0 if mode == "LSTM" else None)
    p64 = {k: v.astype(np.float64) for k, v in params.items()}
    ref_out, ref_h, ref_c = np_rnn(mode, x.astype(np.float64), h0, c0, p64, num_layers, D, batch_first)
    assert out.shape == ref_out.shape and h_n.shape == ref_h.shape
    np.testing.assert_allclose(out, ref_out, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(h_n, ref_h, rtol=1e-5, atol=2e-6)
    if mode == "LSTM":
        np.testing.assert_allclose(c_n, ref_c, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_saturated_gates_stay_finite(mode):
    """Pre-activations far past the exp range saturate the gates instead of overflowing."""
    model, params = make_model(mode, 3, 4, scale=40.0)
    x = (rng.standard_normal((5, 2, 3)) * 30).astype(np.float32)
    out, h_n, _ = run_model(model, x)
    ref_out, _, _ = np_rnn(mode, x.astype(np.float64), None, None,
                           {k: v.astype(np.float64) for k, v in params.items()}, 1, 1, False)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, ref_out, atol=1e-5)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_no_grad_forward_is_identical(mode):
    """Inference (no graph, per-step scratch) and training (saved states) give the same bits."""
    model, _ = make_model(mode, 4, 6, num_layers=2)
    x = rng.standard_normal((7, 3, 4)).astype(np.float32)
    with_graph = run_model(model, x)
    with ac.no_grad():
        without = run_model(model, x)
    for a, b in zip(with_graph, without):
        if a is not None:
            assert np.array_equal(a, b)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_unbatched_input(mode):
    model, params = make_model(mode, 3, 4, num_layers=2)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    out, hidden = model(ac.tensor(x))
    h_n = hidden[0] if mode == "LSTM" else hidden
    ref_out, ref_h, _ = np_rnn(mode, x[:, None].astype(np.float64), None, None,
                               {k: v.astype(np.float64) for k, v in params.items()}, 2, 1, False)
    assert out.shape == (5, 4) and h_n.shape == (2, 4)
    np.testing.assert_allclose(out.numpy(), ref_out[:, 0], rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(h_n.numpy(), ref_h[:, 0], rtol=1e-5, atol=2e-6)


def test_results_do_not_depend_on_thread_count():
    model, _ = make_model("LSTM", 16, 160, batch_first=True)
    x = rng.standard_normal((64, 5, 16)).astype(np.float32)
    results = []
    old = ac.get_num_threads()
    try:
        for threads in (1, 2):
            ac.set_num_threads(threads)
            model.zero_grad()
            xt = ac.tensor(x, requires_grad=True)
            out, (h, c) = model(xt)
            (out.sum() + (h * c).sum()).backward()
            results.append([out.numpy(), xt.grad.numpy(), model.weight_hh_l0.grad.numpy()])
    finally:
        ac.set_num_threads(old)
    for a, b in zip(*results):
        assert np.array_equal(a, b)


# ---- gradients ---------------------------------------------------------------------

def check_rnn_gradients(mode, num_layers=1, bidirectional=False, batch_first=False, bias=True,
                        with_state=True, T=4, B=2, I=3, H=3):
    D = 2 if bidirectional else 1
    model, params = make_model(mode, I, H, num_layers=num_layers, bidirectional=bidirectional,
                               batch_first=batch_first, bias=bias)
    names = list(params)
    x = rng.standard_normal(input_shape(T, B, I, batch_first)).astype(np.float32)
    states = []
    if with_state:
        states = [rng.standard_normal((num_layers * D, B, H)).astype(np.float32)
                  for _ in range(2 if mode == "LSTM" else 1)]
    out_shape = input_shape(T, B, D * H, batch_first)
    w_out = rng.standard_normal(out_shape).astype(np.float32)
    w_h = rng.standard_normal((num_layers * D, B, H)).astype(np.float32)
    w_c = rng.standard_normal((num_layers * D, B, H)).astype(np.float32)

    xt = ac.tensor(x, requires_grad=True)
    state_t = [ac.tensor(s, requires_grad=True) for s in states]
    if mode == "LSTM":
        out, (h_n, c_n) = model(xt, tuple(state_t) if state_t else None)
        loss = (out * ac.tensor(w_out)).sum() + (h_n * ac.tensor(w_h)).sum() + \
            (c_n * ac.tensor(w_c)).sum()
    else:
        out, h_n = model(xt, state_t[0] if state_t else None)
        loss = (out * ac.tensor(w_out)).sum() + (h_n * ac.tensor(w_h)).sum()
    loss.backward()

    def f64(x64, *rest):
        st, ps = rest[:len(states)], dict(zip(names, rest[len(states):]))
        h0 = st[0] if st else None
        c0 = st[1] if len(st) > 1 else None
        o, h, c = np_rnn(mode, x64, h0, c0, ps, num_layers, D, batch_first)
        total = np.sum(o * w_out) + np.sum(h * w_h)
        return total + (np.sum(c * w_c) if c is not None else 0.0)

    numeric = numeric_grad(f64, [x] + states + [params[n] for n in names])
    got = [xt.grad] + [s.grad for s in state_t] + [getattr(model, n).grad for n in names]
    labels = ["input"] + ["h0", "c0"][:len(states)] + names
    for label, g, expected in zip(labels, got, numeric):
        assert g is not None, "%s got no gradient" % label
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-3, atol=1e-4, err_msg=label)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_gradients_one_layer(mode):
    check_rnn_gradients(mode)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_gradients_two_layers_batch_first_no_state(mode):
    check_rnn_gradients(mode, num_layers=2, batch_first=True, with_state=False, T=5)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_gradients_bidirectional_two_layers(mode):
    check_rnn_gradients(mode, num_layers=2, bidirectional=True, T=3)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_gradients_without_bias(mode):
    check_rnn_gradients(mode, bias=False, batch_first=True)


def test_gradient_of_one_output_only():
    """Only h_n is used: gradients still reach every parameter and the input."""
    model, params = make_model("LSTM", 3, 4)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    xt = ac.tensor(x, requires_grad=True)
    _, (h_n, _) = model(xt)
    h_n.sum().backward()
    p64 = {k: v.astype(np.float64) for k, v in params.items()}
    expected = numeric_grad(lambda x64: np.sum(np_rnn("LSTM", x64, None, None, p64, 1, 1, False)[1]),
                            [x])[0]
    np.testing.assert_allclose(xt.grad.numpy(), expected, rtol=1e-3, atol=1e-4)


# ---- cells ------------------------------------------------------------------------

def test_lstm_cell_matches_numpy_and_gradients():
    cell = nn.LSTMCell(3, 4)
    p = {n: v.numpy().astype(np.float64) for n, v in cell.state_dict().items()}
    x = rng.standard_normal((2, 3)).astype(np.float32)
    h = rng.standard_normal((2, 4)).astype(np.float32)
    c = rng.standard_normal((2, 4)).astype(np.float32)
    xt, ht, ct = (ac.tensor(a, requires_grad=True) for a in (x, h, c))
    h1, c1 = cell(xt, (ht, ct))
    ref_h, ref_c = np_lstm_step(x, h, c, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    np.testing.assert_allclose(h1.numpy(), ref_h, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(c1.numpy(), ref_c, rtol=1e-5, atol=2e-6)
    (h1.sum() + (c1 * c1).sum()).backward()

    def f64(x64, h64, c64):
        a, b = np_lstm_step(x64, h64, c64, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
        return np.sum(a) + np.sum(b * b)

    for t, expected in zip((xt, ht, ct), numeric_grad(f64, [x, h, c])):
        np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-3, atol=1e-4)


def test_gru_cell_matches_numpy_unbatched_and_without_state():
    cell = nn.GRUCell(3, 5, bias=False)
    p = {n: v.numpy().astype(np.float64) for n, v in cell.state_dict().items()}
    x = rng.standard_normal(3).astype(np.float32)
    h1 = cell(ac.tensor(x))
    assert h1.shape == (5,)
    ref = np_gru_step(x[None], np.zeros((1, 5)), p["weight_ih"], p["weight_hh"], None, None)[0]
    np.testing.assert_allclose(h1.numpy(), ref, rtol=1e-5, atol=2e-6)
    h2 = cell(ac.tensor(x), h1)
    ref2 = np_gru_step(x[None], ref[None], p["weight_ih"], p["weight_hh"], None, None)[0]
    np.testing.assert_allclose(h2.numpy(), ref2, rtol=1e-5, atol=2e-6)


# ---- PyTorch's names and weights ------------------------------------------------------

@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_parameter_names_shapes_and_init(mode):
    G = 4 if mode == "LSTM" else 3
    model = (nn.LSTM if mode == "LSTM" else nn.GRU)(10, 20, num_layers=2, bidirectional=True)
    shapes = {n: p.shape for n, p in model.named_parameters()}
    expected = {}
    for layer in range(2):
        for suffix in ("", "_reverse"):
            s = "_l%d%s" % (layer, suffix)
            expected.update({"weight_ih" + s: (G * 20, 10 if layer == 0 else 40),
                             "weight_hh" + s: (G * 20, 20), "bias_ih" + s: (G * 20,),
                             "bias_hh" + s: (G * 20,)})
    assert shapes == expected
    assert list(shapes)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                "weight_ih_l0_reverse"]
    bound = 1 / np.sqrt(20)
    values = np.concatenate([p.numpy().ravel() for p in model.parameters()])
    assert np.abs(values).max() <= bound and values.std() > bound / 3


def test_weights_with_pytorch_names_load_from_safetensors(tmp_path):
    I, H = 4, 5
    params = {}
    for layer in range(2):
        params.update({"weight_ih_l%d" % layer: rng.standard_normal((4 * H, I if layer == 0 else H)),
                       "weight_hh_l%d" % layer: rng.standard_normal((4 * H, H)),
                       "bias_ih_l%d" % layer: rng.standard_normal(4 * H),
                       "bias_hh_l%d" % layer: rng.standard_normal(4 * H)})
    params = {k: (v * 0.4).astype(np.float32) for k, v in params.items()}
    path = tmp_path / "lstm.safetensors"
    ac.save(params, str(path))
    model = nn.LSTM(I, H, num_layers=2)
    model.load_state_dict(ac.load(str(path)))
    x = rng.standard_normal((6, 2, I)).astype(np.float32)
    out, h_n, c_n = run_model(model, x)
    ref = np_rnn("LSTM", x.astype(np.float64), None, None,
                 {k: v.astype(np.float64) for k, v in params.items()}, 2, 1, False)
    np.testing.assert_allclose(out, ref[0], rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(c_n, ref[2], rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_same_outputs_and_gradients_as_torch(mode, tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    cls = torch.nn.LSTM if mode == "LSTM" else torch.nn.GRU
    ref = cls(6, 7, num_layers=2, bidirectional=True, batch_first=True)
    path = tmp_path / "weights.safetensors"
    ac.save({k: v.detach().numpy() for k, v in ref.state_dict().items()}, str(path))
    model = (nn.LSTM if mode == "LSTM" else nn.GRU)(6, 7, num_layers=2, bidirectional=True,
                                                    batch_first=True)
    model.load_state_dict(ac.load(str(path)))
    x = rng.standard_normal((3, 9, 6)).astype(np.float32)
    h0 = rng.standard_normal((4, 3, 7)).astype(np.float32)
    c0 = rng.standard_normal((4, 3, 7)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    t_state = (torch.tensor(h0), torch.tensor(c0)) if mode == "LSTM" else torch.tensor(h0)
    t_out, t_hidden = ref(tx, t_state)
    t_h = t_hidden[0] if mode == "LSTM" else t_hidden
    (t_out.sum() + (t_h ** 2).sum()).backward()
    ax = ac.tensor(x, requires_grad=True)
    a_state = (ac.tensor(h0), ac.tensor(c0)) if mode == "LSTM" else ac.tensor(h0)
    a_out, a_hidden = model(ax, a_state)
    a_h = a_hidden[0] if mode == "LSTM" else a_hidden
    (a_out.sum() + (a_h * a_h).sum()).backward()
    np.testing.assert_allclose(a_out.numpy(), t_out.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a_h.numpy(), t_h.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(getattr(model, name).grad.numpy(), p.grad.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)


# ---- batch-major steps: batches past and short of the GEMM's 12-row tile ----------------

@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("num_layers,bidirectional,batch_first,with_state,B,H,I,T", [
    (1, False, False, True, 13, 33, 7, 5),    # a full 12-row tile and one row more
    (2, False, True, False, 20, 17, 11, 6),   # the LM's batch: 12 + 8 rows
    (2, True, False, True, 3, 9, 5, 4),       # rows few enough for gemm's unpacked path
    (1, True, True, False, 25, 20, 1, 3),     # one input feature
])
def test_layouts_and_odd_sizes_match_torch(mode, num_layers, bidirectional, batch_first,
                                           with_state, B, H, I, T):
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    kwargs = dict(num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first)
    ref = getattr(torch.nn, mode)(I, H, **kwargs)
    model = getattr(nn, mode)(I, H, **kwargs)
    model.load_state_dict({k: ac.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    D = 2 if bidirectional else 1
    x = rng.standard_normal(input_shape(T, B, I, batch_first)).astype(np.float32)
    states = [rng.standard_normal((num_layers * D, B, H)).astype(np.float32)
              for _ in range((2 if mode == "LSTM" else 1) if with_state else 0)]
    w_out = rng.standard_normal(input_shape(T, B, D * H, batch_first)).astype(np.float32)
    w_state = rng.standard_normal((num_layers * D, B, H)).astype(np.float32)

    def run(lib, make):
        xt = make(x)
        st = [make(v) for v in states]
        state = (tuple(st) if mode == "LSTM" else st[0]) if st else None
        out, hidden = (ref if lib is torch else model)(xt, state)
        finals = list(hidden) if mode == "LSTM" else [hidden]
        loss = (out * lib.tensor(w_out)).sum()
        for f in finals:
            loss = loss + (f * lib.tensor(w_state)).sum()
        loss.backward()
        return [out, *finals], [xt, *st]

    t_outs, t_inputs = run(torch, lambda v: torch.tensor(v, requires_grad=True))
    a_outs, a_inputs = run(ac, lambda v: ac.tensor(v, requires_grad=True))
    for a, t in zip(a_outs, t_outs):
        np.testing.assert_allclose(a.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, t in zip(a_inputs, t_inputs):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(getattr(model, name).grad.numpy(), p.grad.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("which", ["h0", "c0"])
def test_lstm_layer_with_one_initial_state_gradients(which):
    """ac_lstm with h0 or c0 alone: the other starts at zero."""
    from aicraft.nn.rnn import _run_layer
    T, B, I, H = 3, 14, 2, 3
    x = rng.standard_normal((T, B, I))
    state = rng.standard_normal((B, H))
    w = [rng.standard_normal(s) * 0.6 for s in ((4 * H, I), (4 * H, H), (4 * H,), (4 * H,))]

    def ac_fn(x, state, *weights):
        h0, c0 = (state, None) if which == "h0" else (None, state)
        out, h_n, c_n = _run_layer(ac._ffi.lib.ac_lstm, True, x, h0, c0, weights, False, False)
        return ac.cat([out.reshape(-1), h_n.reshape(-1), c_n.reshape(-1)])

    def np_fn(x, state, *weights):
        h = state if which == "h0" else np.zeros((B, H))
        c = state if which == "c0" else np.zeros((B, H))
        out = []
        for t in range(T):
            h, c = np_lstm_step(x[t], h, c, *weights)
            out.append(h)
        return np.concatenate([np.stack(out).reshape(-1), h.reshape(-1), c.reshape(-1)])

    check_gradients(ac_fn, np_fn, [x, state] + w, rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_bits_do_not_depend_on_thread_count(mode):
    """Batches wide enough that the gate loops and the step products split across threads."""
    T, B, I, H = 5, 150, 24, 48
    model = getattr(nn, mode)(I, H, num_layers=2, bidirectional=True, batch_first=True)
    x = rng.standard_normal((B, T, I)).astype(np.float32)
    h0 = rng.standard_normal((4, B, H)).astype(np.float32)
    c0 = rng.standard_normal((4, B, H)).astype(np.float32)

    def run():
        model.zero_grad()
        xt, ht, ct = (ac.tensor(v, requires_grad=True) for v in (x, h0, c0))
        out, hidden = model(xt, (ht, ct) if mode == "LSTM" else ht)
        finals = hidden if mode == "LSTM" else (hidden,)
        loss = (out * out).sum()
        for f in finals:
            loss = loss + f.sum()
        loss.backward()
        grads = [xt.grad, ht.grad] + ([ct.grad] if mode == "LSTM" else [])
        return [out.numpy()] + [g.numpy() for g in grads] + [p.grad.numpy() for p in model.parameters()]

    assert_same_for_thread_counts(run)


def test_bits_do_not_depend_on_thread_count_at_the_language_model_size():
    """The word-level language model's layer: a batch of 20 rows splits across threads."""
    model = nn.LSTM(200, 200)
    x = rng.standard_normal((3, 20, 200)).astype(np.float32)

    def run():
        model.zero_grad()
        xt = ac.tensor(x, requires_grad=True)
        out, (h, c) = model(xt)
        ((out * out).sum() + (h * c).sum()).backward()
        return [out.numpy(), xt.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]

    assert_same_for_thread_counts(run)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_a_second_backward_adds_to_the_grads(mode, batch_first):
    """The first backward fills the parameters' new grads in place; the second adds to them."""
    model = getattr(nn, mode)(6, 5, num_layers=2, bidirectional=True, batch_first=batch_first)
    x = ac.tensor(rng.standard_normal(input_shape(4, 3, 6, batch_first)).astype(np.float32))

    def backward():
        out, _ = model(x)
        (out * out).sum().backward()

    model.zero_grad()
    backward()
    once = [p.grad.numpy().copy() for p in model.parameters()]
    backward()
    for p, g in zip(model.parameters(), once):
        assert np.array_equal(p.grad.numpy(), 2 * g)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_frozen_weights_leave_the_other_grads_as_they_were(mode):
    """Weights without requires_grad get no grad; the biases, input and state get the
    same gradients as when every parameter trains."""
    model, _ = make_model(mode, 4, 3)
    x = rng.standard_normal((5, 2, 4)).astype(np.float32)
    h0 = rng.standard_normal((1, 2, 3)).astype(np.float32)

    def grads():
        model.zero_grad()
        xt, ht = ac.tensor(x, requires_grad=True), ac.tensor(h0, requires_grad=True)
        out, _ = model(xt, (ht, ac.tensor(h0)) if mode == "LSTM" else ht)
        (out * out).sum().backward()
        return [xt.grad.numpy(), ht.grad.numpy(), model.bias_ih_l0.grad.numpy(),
                model.bias_hh_l0.grad.numpy()]

    trained = grads()
    model.weight_ih_l0.requires_grad = False
    model.weight_hh_l0.requires_grad = False
    frozen = grads()
    assert model.weight_ih_l0.grad is None and model.weight_hh_l0.grad is None
    for a, b in zip(trained, frozen):
        assert np.array_equal(a, b)


# ---- long sequences and memory ---------------------------------------------------------

def test_backward_through_1000_steps():
    """The forget gate is biased open so the first input still matters at the end;
    spot gradients against central differences of the float64 reference."""
    T, B, I, H = 1000, 2, 3, 4
    model, params = make_model("LSTM", I, H, scale=0.3)
    params["bias_ih_l0"][H:2 * H] = 9.0
    model.load_state_dict({k: ac.tensor(v) for k, v in params.items()})
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    xt = ac.tensor(x, requires_grad=True)
    with ac.checkpoint():
        _, (h_n, c_n) = model(xt)
        c_n.sum().backward()
    p64 = {k: v.astype(np.float64) for k, v in params.items()}

    def loss_at(x64, w_hh):
        p = dict(p64, weight_hh_l0=w_hh)
        return np.sum(np_rnn("LSTM", x64, None, None, p, 1, 1, False)[2])

    eps = 1e-5
    x64, w64 = x.astype(np.float64), p64["weight_hh_l0"]
    for index in [(0, 0, 0), (0, 1, 2), (500, 1, 1)]:
        up, down = x64.copy(), x64.copy()
        up[index] += eps
        down[index] -= eps
        expected = (loss_at(up, w64) - loss_at(down, w64)) / (2 * eps)
        assert abs(expected) > 1e-3   # the gradient did travel back
        np.testing.assert_allclose(xt.grad.numpy()[index], expected, rtol=2e-3, atol=1e-5)
    for index in [(5, 1), (3 * H + 2, 3)]:
        up, down = w64.copy(), w64.copy()
        up[index] += eps
        down[index] -= eps
        expected = (loss_at(x64, up) - loss_at(x64, down)) / (2 * eps)
        np.testing.assert_allclose(model.weight_hh_l0.grad.numpy()[index], expected,
                                   rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_memory_grows_linearly_and_is_returned(mode):
    model, _ = make_model(mode, 8, 16)
    start = ac.memory_stats()["bytes_in_use"]
    used = {}
    for T in (250, 1000):
        x = ac.randn(T, 4, 8)
        before = ac.memory_stats()["bytes_in_use"]
        with ac.checkpoint():
            out, _ = model(x)
            used[T] = ac.memory_stats()["bytes_in_use"] - before
            out.sum().backward()
        model.zero_grad()   # the parameters' grads live at root
        assert ac.memory_stats()["bytes_in_use"] == before
        del x
    assert 3.6 < used[1000] / used[250] < 4.2
    assert ac.memory_stats()["bytes_in_use"] <= start


def test_training_loop_at_root_does_not_grow():
    model, _ = make_model("GRU", 3, 5, num_layers=2)
    x = ac.randn(6, 2, 3)
    counts = []
    for step in range(6):
        out, h = model(x)
        (out.sum() + h.sum()).backward()
        model.zero_grad()
        del out, h
        stats = ac.memory_stats()
        counts.append((stats["live_tensors"], stats["live_nodes"], stats["bytes_in_use"]))
    assert counts[-1] == counts[2]


# ---- bad input ---------------------------------------------------------------------------

def test_wrong_feature_size_is_a_shape_error():
    model = nn.LSTM(5, 4)
    with pytest.raises(ac.ShapeError, match=r"lstm: input \(3, 2, 6\) has 6 features, w_ih \(16, 5\) expects 5"):
        model(ac.randn(3, 2, 6))


def test_wrong_input_rank_is_a_shape_error():
    with pytest.raises(ac.ShapeError, match="must be 3-d"):
        nn.GRU(5, 4)(ac.randn(2, 3, 4, 5))


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_wrong_state_shape_is_a_shape_error(mode):
    model = (nn.LSTM if mode == "LSTM" else nn.GRU)(3, 4, num_layers=2)
    x = ac.randn(5, 2, 3)
    bad = ac.randn(1, 2, 4)
    with pytest.raises(ac.ShapeError, match=r"h0 \(1, 2, 4\) must be .* = \(2, 2, 4\)"):
        model(x, (bad, ac.randn(2, 2, 4)) if mode == "LSTM" else bad)
    if mode == "LSTM":
        with pytest.raises(ac.ShapeError, match=r"c0 \(2, 3, 4\)"):
            model(x, (ac.randn(2, 2, 4), ac.randn(2, 3, 4)))
        with pytest.raises(TypeError, match=r"tuple \(h0, c0\)"):
            model(x, ac.randn(2, 2, 4))
    out, _ = model(x)    # still usable
    assert out.shape == (5, 2, 4)


def test_cell_state_shape_errors():
    cell = nn.LSTMCell(3, 4)
    with pytest.raises(ac.ShapeError, match=r"h0 \(2, 5\) must be \(batch, hidden\) = \(2, 4\)"):
        cell(ac.randn(2, 3), (ac.randn(2, 5), ac.randn(2, 4)))
    with pytest.raises(ac.ShapeError, match="features"):
        nn.GRUCell(3, 4)(ac.randn(2, 7))


def test_empty_sequence_is_a_shape_error():
    with pytest.raises(ac.ShapeError, match="no time steps"):
        nn.LSTM(3, 4)(ac.zeros(0, 2, 3))


def test_unsupported_options_raise():
    with pytest.raises(NotImplementedError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError):
        nn.LSTM(3, 0)
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(3, 4, dropout=1.5)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_dropout_between_layers_only_while_training(mode):
    model, params = make_model(mode, 3, 8, num_layers=2, dropout=0.5)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    ref, _, _ = np_rnn(mode, x.astype(np.float64), None, None,
                       {k: v.astype(np.float64) for k, v in params.items()}, 2, 1, False)
    model.eval()
    np.testing.assert_allclose(run_model(model, x)[0], ref, rtol=1e-5, atol=2e-6)
    model.train()
    xt = ac.tensor(x, requires_grad=True)
    out, _ = model(xt)
    assert not np.allclose(out.numpy(), ref, atol=1e-3)   # some of layer 0's outputs were dropped
    out.sum().backward()
    assert np.isfinite(xt.grad.numpy()).all() and np.abs(xt.grad.numpy()).sum() > 0


def test_out_of_range_token_ids_in_a_language_model():
    embed, lstm = nn.Embedding(10, 4), nn.LSTM(4, 8)
    with pytest.raises(IndexError, match="embedding: index 12 at position 5 is out of range"):
        lstm(embed(ac.tensor([[1, 2], [3, 4], [5, 12]])))


@pytest.mark.parametrize("mode", ["lstm", "gru"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_a_warm_training_loop_makes_no_malloc(mode, batch_first):
    # The ops' scratch (batch-first copies, gate buffers, input projections)
    # comes from the step's scope, not the heap, once a checkpoint is open.
    ac.manual_seed(3)
    rnn = (nn.LSTM if mode == "lstm" else nn.GRU)(5, 8, batch_first=batch_first)
    head = nn.Linear(8, 1)
    params = list(rnn.parameters()) + list(head.parameters())
    opt = ac.optim.Adam(params, lr=1e-2)
    x = ac.randn(4, 6, 5) if batch_first else ac.randn(6, 4, 5)
    y = ac.randn(4, 1)

    def step():
        with ac.checkpoint():
            out, _ = rnn(x)
            last = out[:, -1] if batch_first else out[-1]
            loss = ((head(last) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with ac.no_grad():
                rnn(x)        # a forward with no graph: the projection is scratch too
            return loss.item()

    first = [step() for _ in range(5)]
    start = ac.memory_stats()
    for _ in range(50):
        last = step()
    end = ac.memory_stats()
    assert end["heap_allocations"] == start["heap_allocations"]
    assert end["bytes_in_use"] == start["bytes_in_use"]
    assert last < first[0]
