"""ac.compile with the mlir backend: compiled calls match eager calls within 1e-5
(MLP, CNN train and eval, LSTM forward and training steps, softmax/cross-entropy,
broadcasts and reductions), covered training steps run as one native function whose derived
backward pass matches libac's, N compiled steps end within 1e-4 of N eager
steps (Adam with dropout and a cosine schedule; a CNN whose convolutions and
backward libac runs), missing tools give a clear error, the native-segment
entry points reject bad arguments, and 1,000 calls leave memory flat."""
import warnings

import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import _mlir, nn, optim
from aicraft._ffi import ffi, lib
from compile_steps import regression_data, regression_step, training_step

MISSING = _mlir.missing_tool()
needs_tools = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

rng = np.random.default_rng(21)


def step_losses(run, x, y, steps, after_step=None):
    """The losses of `steps` calls of run(x, y), each in its own checkpoint."""
    losses = []
    for _ in range(steps):
        with ac.checkpoint():
            losses.append(run(x, y).item())
        if after_step is not None:
            after_step()
    return losses


def tensor(*shape):
    return ac.tensor(rng.standard_normal(shape).astype(np.float32))


def assert_close(got, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def segments(compiled):
    """(first node, node count) of each native segment of the last call's graph, and its node count."""
    graph = compiled._last.graph
    return [(first, count) for first, count, _ in _mlir.plan(graph)], lib.ac_graph_num_nodes(graph)


def sgd_regression(backend, steps):
    """FDUAI's case: y = 2x + 1 + noise, w and b scalars, MSE, SGD lr 0.1."""
    x_np, y_np = regression_data()
    step, w, b = regression_step(ac)
    run = ac.compile(step, backend=backend) if backend else step
    losses = step_losses(run, ac.tensor(x_np), ac.tensor(y_np), steps)
    return losses, [w.numpy(), b.numpy(), w.grad.numpy(), b.grad.numpy()], run


@needs_tools
def test_sgd_regression_is_one_native_step_and_ends_where_eager_ends():
    eager_losses, eager_params, _ = sgd_regression(None, 100)
    losses, params, compiled = sgd_regression("mlir", 100)
    found, n_nodes = segments(compiled)
    assert found == [(0, n_nodes)]   # zero_grad, forward, backward and both updates
    assert_close(losses, eager_losses, rtol=1e-4)
    for got, expected in zip(params, eager_params):
        assert_close(got, expected, rtol=1e-4)
    assert losses[-1] < losses[0] / 50


def mse_mlp():
    return nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 8), nn.Sigmoid(), nn.Linear(8, 3))


def mse_steps(backend, make_opt, steps, x, y):
    ac.manual_seed(4)
    model = mse_mlp()
    opt = make_opt(model.parameters())
    step = training_step(model, opt, lambda out, y: F.mse_loss(out * 0.5 - out.mean(dim=0)
                                                               + (out ** 2).sum() * 0.01, y))
    run = ac.compile(step, backend=backend) if backend else step
    losses = step_losses(run, x, y, steps)
    return losses, [p.numpy() for p in model.parameters()], [p.grad.numpy() for p in model.parameters()], run


@needs_tools
@pytest.mark.parametrize("make_opt", [lambda p: optim.SGD(p, lr=0.05, weight_decay=0.01),
                                      lambda p: optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1),
                                      lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
                                      lambda p: optim.Adam(p, lr=0.01),
                                      lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1)])
def test_derived_backward_of_an_mlp_step_matches_libacs(make_opt):
    x, y = tensor(10, 12), tensor(10, 3)
    eager = mse_steps(None, make_opt, 20, x, y)
    compiled = mse_steps("mlir", make_opt, 20, x, y)
    found, n_nodes = segments(compiled[3])
    assert found == [(0, n_nodes)]
    assert_close(compiled[0], eager[0], rtol=1e-4)
    for got, expected in zip(compiled[1] + compiled[2], eager[1] + eager[2]):
        assert_close(got, expected, rtol=1e-4, atol=1e-5)


def dropout_mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 5))


@needs_tools
def test_adam_steps_with_dropout_and_cosine_schedule_end_where_eager_ends():
    x, y = tensor(16, 20), ac.tensor(rng.integers(0, 5, 16))

    def train(backend):
        ac.manual_seed(0)
        model = dropout_mlp()
        opt = optim.Adam(model.parameters(), lr=0.01)
        sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=50)
        step = training_step(model, opt, F.cross_entropy)
        run = ac.compile(step, backend=backend) if backend else step
        ac.manual_seed(1)
        losses = step_losses(run, x, y, 50, after_step=sched.step)
        return losses, [p.numpy() for p in model.parameters()], run
    eager, compiled = train(None), train("mlir")
    found, n_nodes = segments(compiled[2])
    assert found == [(0, n_nodes)]   # dropout draws through libac's generator, in the op's order
    assert_close(compiled[0], eager[0], rtol=1e-4)
    for got, expected in zip(compiled[1], eager[1]):
        assert_close(got, expected, rtol=1e-4, atol=1e-5)
    assert eager[0][-1] < eager[0][0]


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(6 * 2 * 2, 16), nn.Tanh(), nn.Dropout(0.25), nn.Linear(16, 3))


@needs_tools
def test_cnn_train_steps_and_eval_match_eager():
    x, y = tensor(6, 1, 8, 8), ac.tensor(rng.integers(0, 3, 6))

    def train(backend):
        ac.manual_seed(0)
        model = cnn()
        opt = optim.Adam(model.parameters(), lr=0.01)
        step = training_step(model, opt, F.cross_entropy)
        run = ac.compile(step, backend=backend) if backend else step
        ac.manual_seed(1)
        losses = [run(x, y).item() for _ in range(5)]
        return losses, model, run
    eager, compiled = train(None), train("mlir")
    graph = compiled[2]._last.graph
    backward = [k for k in range(lib.ac_graph_num_nodes(graph))
                if ffi.string(lib.ac_graph_node_op(graph, k)) == b"backward"][0]
    assert segments(compiled[2])[0][0][0] > backward   # libac runs conv and backward; the updates are native
    assert_close(compiled[0], eager[0], rtol=1e-4)
    for got, expected in zip(compiled[1].parameters(), eager[1].parameters()):
        assert_close(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)
    model = compiled[1].eval()
    predict = ac.compile(model, backend="mlir")
    with ac.no_grad():
        expected = model(x).numpy()
        predict(x)
        got = predict(x).numpy()
    assert segments(predict)[0]   # the linear layers and activations are native
    assert_close(got, expected)


@needs_tools
def test_mlp_inference_and_lstm_forward_match_eager():
    ac.manual_seed(7)
    mlp = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).eval()
    lstm = nn.LSTM(6, 8, batch_first=True)
    x, seq = tensor(3, 784), tensor(2, 5, 6)
    predict = ac.compile(mlp, backend="mlir")
    run_lstm = ac.compile(lambda s: lstm(s)[0].tanh() * 2.0, backend="mlir")
    with ac.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            got, got_lstm = predict(x).numpy(), run_lstm(seq).numpy()
        expected, expected_lstm = mlp(x).numpy(), (lstm(seq)[0].tanh() * 2.0).numpy()
    found, n_nodes = segments(predict)
    assert found == [(0, n_nodes)]
    assert_close(got, expected)
    assert_close(got_lstm, expected_lstm)
    found, n_nodes = segments(run_lstm)   # the layer runs on libac's kernel, what follows natively
    assert len(found) == 1 and found[0][0] + found[0][1] == n_nodes


@needs_tools
@pytest.mark.parametrize("layers,bidirectional,batch_first,with_states",
                         [(1, False, True, True), (2, True, False, False), (2, True, True, True)])
def test_lstm_forward_matches_eager(layers, bidirectional, batch_first, with_states):
    ac.manual_seed(3)
    lstm = nn.LSTM(3, 5, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    compiled = ac.compile(lstm, backend="mlir")
    states = layers * (2 if bidirectional else 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            x = tensor(4, 6, 3)
            h0, c0 = tensor(states, 4 if batch_first else 6, 5), tensor(states, 4 if batch_first else 6, 5)
            args = (x, (h0, c0)) if with_states else (x,)
            out, (h_n, c_n) = compiled(*args)
            expected, (h_e, c_e) = lstm(*args)
            for got, want in ((out, expected), (h_n, h_e), (c_n, c_e)):
                assert_close(got.numpy(), want.numpy())


@needs_tools
def test_lstm_adam_steps_end_where_eager_ends():
    def run(backend):
        ac.manual_seed(4)
        lstm, head = nn.LSTM(3, 6, num_layers=2, batch_first=True), nn.Linear(6, 2)
        params = list(lstm.parameters()) + list(head.parameters())
        opt = optim.Adam(params, lr=0.01)

        def step(x, y):
            opt.zero_grad()
            out, (h_n, _) = lstm(x)
            loss = F.mse_loss(head(out[:, -1]), y) + h_n.pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        call = ac.compile(step, backend=backend) if backend else step
        data = np.random.default_rng(5)
        losses = []
        for _ in range(10):
            x, y = (ac.tensor(data.standard_normal(shape).astype(np.float32)) for shape in ((4, 7, 3), (4, 2)))
            with ac.checkpoint():
                losses.append(call(x, y).item())
        return losses, [p.numpy() for p in params]
    eager = run(None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = run("mlir")
    assert_close(compiled[0], eager[0], rtol=1e-4)
    for got, want in zip(compiled[1], eager[1]):
        assert_close(got, want, rtol=1e-4, atol=1e-5)


@needs_tools
def test_softmax_cross_entropy_broadcasts_and_reductions_match_eager():
    def fn(a, b, c, target):
        s = (a * b + c) / (b.abs() + 1.0) - a.exp().clamp(max=3.0)
        s = s.sigmoid() + s.tanh() * 0.5 - (s ** 2).sqrt().log1p() + 2.0 / (s.cos() + 3.0) - s.sin()
        logits = s.sum(dim=1) + s.mean(dim=(0, 1), keepdim=True).squeeze(0)
        return {
            "softmax": F.softmax(logits, dim=1),
            "log_softmax": F.log_softmax(logits, dim=-1),
            "loss": F.cross_entropy(logits, target, label_smoothing=0.1),
            "sums": s.sum() + s.mean(dim=2).sum() - (1.0 - s).relu().mean(),
            "shape": s.reshape(4, -1).transpose(0, 1).flatten().unsqueeze(0).permute(1, 0),
        }
    a, b, c = tensor(4, 3, 5), tensor(3, 1), tensor(5)
    target = ac.tensor(rng.integers(0, 5, 4))
    compiled = ac.compile(fn, backend="mlir")
    compiled(a, b, c, target)
    got = compiled(a, b, c, target)
    expected = fn(a, b, c, target)
    assert segments(compiled)[0]
    for key in expected:
        assert_close(got[key].numpy(), expected[key].numpy())


@needs_tools
def test_thousand_calls_leave_memory_flat():
    losses, _, compiled = sgd_regression("mlir", 20)
    x, y = tensor(256, 1), tensor(256, 1)
    for _ in range(20):
        compiled(x, y)
    before = ac.memory_stats()
    for _ in range(1000):
        with ac.checkpoint():
            compiled(x, y)
    for _ in range(1000):
        compiled(x, y)
    after = ac.memory_stats()
    for key in ("bytes_in_use", "live_tensors", "live_nodes", "heap_allocations", "arena_reserved"):
        assert after[key] == before[key], key


def test_missing_tools_name_the_tool_and_its_package(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RuntimeError, match=r"mlir-opt-19.*mlir-19-tools"):
        ac.compile(lambda x: x * 2.0, backend="mlir")
    with pytest.raises(ValueError, match="unknown backend"):
        ac.compile(lambda x: x, backend="llvm")


def test_native_segment_entry_points_reject_bad_arguments():
    x = tensor(4)
    graph = lib.ac_graph_begin()
    assert lib.ac_graph_input(graph, x._ptr) == 0
    y = (x * 2.0).exp()
    assert lib.ac_graph_end(graph, [y._ptr], 1) == 0
    n_in, n_out, n_attr = ffi.new("int *"), ffi.new("int *"), ffi.new("int *")
    bufs, attrs = ffi.new("int[]", lib.AC_GRAPH_MAX_TENSORS), ffi.new("double[]", lib.AC_GRAPH_MAX_ATTRS)
    shape = ffi.new("int64_t[8]")
    fn = ffi.cast("AcNativeFn", 1)
    try:
        assert lib.ac_graph_node_info(graph, 0, n_in, n_out, bufs, n_attr, attrs) == 0
        assert (n_in[0], n_out[0], n_attr[0], attrs[0]) == (1, 1, 1, 2.0)
        assert lib.ac_graph_buffer_shape(graph, bufs[1], shape) == 1 and shape[0] == 4
        assert lib.ac_graph_num_inputs(graph) == 1 and lib.ac_graph_num_outputs(graph) == 1
        assert lib.ac_graph_input_buffer(graph, 0) == bufs[0]
        assert lib.ac_graph_node_info(graph, 2, n_in, n_out, bufs, n_attr, attrs) == lib.AC_ERR_INDEX
        assert lib.ac_graph_node_info(ffi.NULL, 0, n_in, n_out, bufs, n_attr, attrs) == lib.AC_ERR_ARG
        assert lib.ac_graph_node_info(graph, 0, ffi.NULL, n_out, bufs, n_attr, attrs) == lib.AC_ERR_ARG
        assert lib.ac_graph_buffer_shape(graph, 99, shape) == lib.AC_ERR_INDEX
        assert lib.ac_graph_buffer_dtype(graph, -1) == lib.AC_ERR_INDEX
        assert lib.ac_graph_input_buffer(graph, 1) == lib.AC_ERR_INDEX
        assert lib.ac_graph_output_buffer(graph, -1) == lib.AC_ERR_INDEX
        assert lib.ac_graph_add_native(graph, 0, 3, fn, [0], 1, 0) == lib.AC_ERR_INDEX
        assert lib.ac_graph_add_native(graph, 0, 1, ffi.NULL, [0], 1, 0) == lib.AC_ERR_ARG
        assert lib.ac_graph_add_native(graph, 0, 1, fn, [99], 1, 0) == lib.AC_ERR_INDEX
        assert lib.ac_graph_add_native(graph, 0, 1, fn, [-1], 1, 0) == lib.AC_ERR_INDEX
        assert lib.ac_graph_add_native(graph, 0, 1, fn, [0], 1, -4) == lib.AC_ERR_ARG
        assert "graph_add_native" in ffi.string(lib.ac_last_error()).decode()
        assert lib.ac_graph_add_native(graph, 0, 1, fn, [0], 1, 0) == 0
        assert lib.ac_graph_add_native(graph, 0, 2, fn, [0], 1, 0) == lib.AC_ERR_STATE
        assert lib.ac_graph_add_native(graph, 1, 1, fn, [0], 1, 0) == 0
    finally:
        lib.ac_graph_free(graph)
    np.testing.assert_allclose((x * 2.0).exp().numpy(), np.exp(2.0 * x.numpy()), rtol=1e-6)


@needs_tools
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_step_is_one_native_step_and_bad_targets_fail_cleanly(smoothing):
    x, y = tensor(16, 20), ac.tensor(rng.integers(0, 5, 16))

    def train(backend):
        ac.manual_seed(0)
        model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
        opt = optim.Adam(model.parameters(), lr=0.01)
        step = training_step(model, opt, lambda out, y: F.cross_entropy(out, y, label_smoothing=smoothing))
        run = ac.compile(step, backend=backend) if backend else step
        losses = [run(x, y).item() for _ in range(30)]
        return losses, model, run
    eager, compiled = train(None), train("mlir")
    found, n_nodes = segments(compiled[2])
    assert found == [(0, n_nodes)]
    assert_close(compiled[0], eager[0], rtol=1e-4)
    for got, expected in zip(compiled[1].parameters(), eager[1].parameters()):
        assert_close(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)
    before = [p.numpy().copy() for p in compiled[1].parameters()]
    bad = ac.tensor(np.array([0] * 15 + [5]))
    with pytest.raises(IndexError, match="cross_entropy"):
        compiled[2](x, bad)
    for got, expected in zip(compiled[1].parameters(), before):   # nothing was updated
        np.testing.assert_array_equal(got.numpy(), expected)
    compiled[2](x, y)   # still usable


@needs_tools
def test_derived_backward_through_softmax_and_log_softmax():
    x, target = tensor(12, 7), ac.tensor(np.eye(4, dtype=np.float32)[rng.integers(0, 4, 12)])

    def train(backend):
        ac.manual_seed(9)
        model = nn.Sequential(nn.Linear(7, 16), nn.Sigmoid(), nn.Linear(16, 4))
        opt = optim.SGD(model.parameters(), lr=0.2)
        step = training_step(model, opt, lambda out, t: -(F.log_softmax(out, dim=1) * t).sum() / 12.0
                             + (F.softmax(out, dim=-1) ** 2).mean())
        run = ac.compile(step, backend=backend) if backend else step
        return [run(x, target).item() for _ in range(15)], model, run
    eager, compiled = train(None), train("mlir")
    found, n_nodes = segments(compiled[2])
    assert found == [(0, n_nodes)]
    assert_close(compiled[0], eager[0], rtol=1e-4)
    for got, expected in zip(compiled[1].parameters(), eager[1].parameters()):
        assert_close(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)


@needs_tools
def test_a_failed_build_warns_and_runs_on_replay(monkeypatch):
    def broken(text):
        raise RuntimeError("compile: llc-19 failed on the emitted MLIR")
    monkeypatch.setattr(_mlir, "_build", broken)
    compiled = ac.compile(lambda a, b: (a * b).relu().sum(), backend="mlir")
    a, b = tensor(5, 3), tensor(3)
    with pytest.warns(UserWarning, match="runs on replay: compile: llc-19 failed"):
        first = compiled(a, b)
    second = compiled(a, b)
    assert first.item() == second.item() == (a * b).relu().sum().item()


@needs_tools
def test_a_loss_that_is_a_view_seeds_the_derived_backward():
    x = tensor(8, 3)

    def train(backend):
        w = ac.tensor(np.linspace(-1, 1, 3, dtype=np.float32), requires_grad=True)
        opt = optim.SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = ((x * w).tanh().sum(dim=1) ** 2).mean().reshape(1, 1)
            loss.backward()
            opt.step()
            return loss
        run = ac.compile(step, backend=backend) if backend else step
        return [run(x).item() for _ in range(5)], w.numpy(), run
    eager, compiled = train(None), train("mlir")
    found, n_nodes = segments(compiled[2])
    assert found == [(0, n_nodes)]
    assert_close(compiled[0], eager[0], rtol=1e-5)
    assert_close(compiled[1], eager[1], rtol=1e-5)
