"""ac.compile with the replay backend: compiled calls give the same bits as eager
calls (MLP, CNN and LSTM training steps, CNN eval, LSTM forward, indexing, cat
and stack, softmax/cross-entropy, broadcasts, reductions), per-call state
(Adam's step, a cosine schedule, dropout's draws) is read per call, input
signatures retrace and are capped, bad inputs fail clearly, ops a graph cannot
replay fall back to eager with a warning, and 1,000 compiled calls leave
memory flat."""
import copy
import warnings

import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn, optim
from aicraft._ffi import lib
from compile_steps import training_step

rng = np.random.default_rng(12)


def tensor(*shape):
    return ac.tensor(rng.standard_normal(shape).astype(np.float32))


def params_of(model):
    return [p.numpy().copy() for p in model.parameters()]


def assert_same_bits(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 5))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(6 * 2 * 2, 16), nn.Tanh(), nn.Dropout(0.25), nn.Linear(16, 3))


def train(make_model, make_opt, x, y, steps, compiled, scheduled=False):
    """Losses and final parameters of `steps` training steps, eager or compiled."""
    ac.manual_seed(0)
    model = make_model()
    opt = make_opt(model.parameters())
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps) if scheduled else None

    step = training_step(model, opt, F.cross_entropy)

    run = ac.compile(step) if compiled else step
    ac.manual_seed(1)
    losses = []
    for _ in range(steps):
        with ac.checkpoint():
            losses.append(run(x, y).item())
        if sched is not None:
            sched.step()
    return losses, params_of(model), model, opt


def test_mlp_adam_steps_with_dropout_and_cosine_schedule_end_where_eager_ends():
    x, y = tensor(16, 20), ac.tensor(rng.integers(0, 5, 16))
    adam = lambda p: optim.Adam(p, lr=0.01)  # noqa: E731
    eager = train(mlp, adam, x, y, 50, compiled=False, scheduled=True)
    compiled = train(mlp, adam, x, y, 50, compiled=True, scheduled=True)
    assert eager[0] == compiled[0]
    assert_same_bits(eager[1], compiled[1])
    assert eager[0][-1] < eager[0][0]
    steps = [compiled[3].state[p]["step"] for p in compiled[2].parameters()]
    assert steps == [50] * 4   # Adam's count advanced per call


@pytest.mark.parametrize("make_opt", [lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
                                      lambda p: optim.Adam(p, lr=0.01, weight_decay=0.01)])
def test_cnn_training_steps_match_eager(make_opt):
    x, y = tensor(6, 1, 8, 8), ac.tensor(rng.integers(0, 3, 6))
    eager = train(cnn, make_opt, x, y, 6, compiled=False)
    compiled = train(cnn, make_opt, x, y, 6, compiled=True)
    assert eager[0] == compiled[0]
    assert_same_bits(eager[1], compiled[1])
    bn = [m for m in compiled[2] if isinstance(m, nn.BatchNorm2d)][0]
    bn_eager = [m for m in eager[2] if isinstance(m, nn.BatchNorm2d)][0]
    np.testing.assert_array_equal(bn.running_mean.numpy(), bn_eager.running_mean.numpy())
    np.testing.assert_array_equal(bn.running_var.numpy(), bn_eager.running_var.numpy())


def test_cnn_eval_and_train_modes_are_separate_graphs():
    ac.manual_seed(2)
    model = cnn()
    compiled = ac.compile(model)
    x = tensor(3, 1, 8, 8)
    model.eval()
    with ac.no_grad():
        expected = model(x).numpy()
        first, second = compiled(x).numpy(), compiled(x).numpy()
    np.testing.assert_array_equal(first, expected)
    np.testing.assert_array_equal(second, expected)
    model.train()
    with ac.no_grad():
        ac.manual_seed(5)
        expected = model(x).numpy()
        ac.manual_seed(5)
        compiled(x)                         # records the training-mode graph
        ac.manual_seed(5)
        replayed = compiled(x).numpy()
    np.testing.assert_array_equal(replayed, expected)
    assert len(compiled._graphs) == 2


def test_softmax_cross_entropy_broadcasts_and_reductions_match_eager():
    def fn(a, b, c, target):
        s = (a * b + c) / (b.abs() + 1.0) - a.exp().clamp(max=3.0)
        s = s.sigmoid() + s.tanh() * 0.5 - (s ** 2).sqrt().log1p()
        logits = s.sum(dim=1) + s.mean(dim=(0, 1), keepdim=True).squeeze(0)
        return {
            "softmax": F.softmax(logits, dim=1),
            "log_softmax": F.log_softmax(logits, dim=-1),
            "loss": F.cross_entropy(logits, target, label_smoothing=0.1),
            "stats": s.max().reshape(1) + s.min() + s.var(dim=0).sum() + s.std(dim=-1).sum(),
            "shape": s.reshape(4, -1).transpose(0, 1).flatten().unsqueeze(0).permute(1, 0),
        }
    a, b, c = tensor(4, 3, 5), tensor(3, 1), tensor(5)
    target = ac.tensor(rng.integers(0, 5, 4))
    compiled = ac.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled(a, b, c, target)
        got = compiled(a, b, c, target)
    expected = fn(a, b, c, target)
    assert set(got) == set(expected)
    for key in expected:
        np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy())


def test_indexing_cat_and_stack_match_eager():
    def fn(x, pair):
        a, b = pair
        picked = x[1:, ::2] + x[0, :3] - x[1:, -1:]
        return ac.cat([picked, a[2][None], b[:, None].squeeze(1)], 0), ac.stack((a, b, a), dim=-1)
    compiled = ac.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):   # the first call records, the others replay
            x, pair = tensor(4, 6), (tensor(3, 3), tensor(3, 3))
            got, expected = compiled(x, pair), fn(x, pair)
            assert_same_bits([t.numpy() for t in got], [t.numpy() for t in expected])
    assert len(compiled._graphs) == 1


LSTM_CASES = [   # layers, bidirectional, batch_first, with (h0, c0)
    (1, False, False, False), (1, False, True, True), (2, False, False, True),
    (2, True, True, False), (2, True, False, True)]


def lstm_inputs(lstm, with_states):
    x = tensor(4, 6, 3)
    if not with_states:
        return (x,)
    batch = 4 if lstm.batch_first else 6
    states = lstm.num_layers * (2 if lstm.bidirectional else 1)
    return x, (tensor(states, batch, 5), tensor(states, batch, 5))


@pytest.mark.parametrize("layers,bidirectional,batch_first,with_states", LSTM_CASES)
def test_lstm_forward_matches_eager(layers, bidirectional, batch_first, with_states):
    ac.manual_seed(3)
    lstm = nn.LSTM(3, 5, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    compiled = ac.compile(lstm)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for grad in (False, True, True):   # each grad mode records once, then replays
            with ac.set_grad_enabled(grad):
                args = lstm_inputs(lstm, with_states)
                out, (h_n, c_n) = compiled(*args)
                expected, (h_e, c_e) = lstm(*args)
            assert_same_bits([out.numpy(), h_n.numpy(), c_n.numpy()],
                             [expected.numpy(), h_e.numpy(), c_e.numpy()])
    assert len(compiled._graphs) == 2


def lstm_steps(make_opt, compiled, steps=5):
    """Losses and parameters after steps of a 2-layer bidirectional LSTM with dropout
    between its layers, read through a slice of its output and its final states."""
    ac.manual_seed(4)
    lstm, head = nn.LSTM(3, 6, num_layers=2, bidirectional=True, batch_first=True, dropout=0.3), nn.Linear(12, 2)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = make_opt(params)

    def step(x, states, y):
        opt.zero_grad()
        out, (h_n, c_n) = lstm(x, states)
        loss = F.mse_loss(head(out[:, -1]), y) + (h_n * c_n).mean()
        loss.backward()
        opt.step()
        return loss
    run = ac.compile(step) if compiled else step
    data = np.random.default_rng(5)
    ac.manual_seed(6)
    losses = []
    for _ in range(steps):
        x, h0, c0, y = (ac.tensor(data.standard_normal(shape).astype(np.float32))
                        for shape in ((4, 7, 3), (4, 4, 6), (4, 4, 6), (4, 2)))
        with ac.checkpoint():
            losses.append(run(x, (h0, c0), y).item())
    return losses, [p.numpy().copy() for p in params]


@pytest.mark.parametrize("make_opt", [lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
                                      lambda p: optim.Adam(p, lr=0.01)])
def test_lstm_training_steps_match_eager(make_opt):
    eager = lstm_steps(make_opt, compiled=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = lstm_steps(make_opt, compiled=True)
    assert eager[0] == compiled[0]
    assert_same_bits(eager[1], compiled[1])


def test_second_input_shape_retraces():
    ac.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
    compiled = ac.compile(model)
    with ac.no_grad():
        for batch in (1, 5, 1, 5):
            x = tensor(batch, 6)
            np.testing.assert_array_equal(compiled(x).numpy(), model(x).numpy())
    assert len(compiled._graphs) == 2


def test_adam_steps_alternating_batch_shapes_match_eager():
    # A shape change on the last signature's fast path must not advance a per-call
    # counter (Adam's step count) unless that graph ran.
    batches = [(tensor(n, 20), ac.tensor(rng.integers(0, 5, n))) for n in (16, 8, 16, 16, 8, 8, 16)]
    results = []
    for compiled in (False, True):
        ac.manual_seed(0)
        model = mlp()
        opt = optim.Adam(model.parameters(), lr=0.01)

        step = training_step(model, opt, F.cross_entropy)
        run = ac.compile(step) if compiled else step
        ac.manual_seed(1)
        losses = [run(x, y).item() for x, y in batches]
        results.append((losses, params_of(model), [opt.state[p]["step"] for p in model.parameters()]))
    assert results[0][0] == results[1][0]
    assert_same_bits(results[0][1], results[1][1])
    assert results[1][2] == [len(batches)] * 4


def test_a_tuple_argument_never_takes_the_plain_tensors_fast_path():
    def fn(x, pair):
        (h,) = pair   # a tensor in pair's place would unpack along its first dim
        return x + h
    compiled = ac.compile(fn)
    x, h = tensor(1, 3), tensor(1, 3)
    for _ in range(2):
        np.testing.assert_array_equal(compiled(x, (h,)).numpy(), (x + h).numpy())
    assert compiled._last is None
    with pytest.raises(TypeError, match="argument 1 is tuple holding float"):
        compiled(x, (1.0,))


def test_a_compiled_call_inside_another_recording_is_recorded_there():
    inner = ac.compile(lambda x: x.exp() * 2.0)
    x = tensor(3)
    inner(x)
    inner(x)   # inner's fast path is warm
    outer = ac.compile(lambda x: inner(x) + 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outer(x)   # records inner's ops into outer's graph
        got = outer(x)
    np.testing.assert_array_equal(got.numpy(), (x.exp() * 2.0 + 1.0).numpy())
    assert lib.ac_graph_num_nodes(outer._last.graph) == 3


def test_two_param_groups_read_their_own_learning_rates_per_call():
    results = []
    for compiled in (False, True):
        ac.manual_seed(7)
        model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
        opt = optim.SGD([{"params": model[0].parameters(), "lr": 0.1},
                         {"params": model[1].parameters(), "lr": 0.02}], momentum=0.5)
        sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        x, y = ac.tensor(np.ones((5, 4), np.float32)), ac.tensor(np.zeros((5, 2), np.float32))
        step = training_step(model, opt, F.mse_loss)
        run = ac.compile(step) if compiled else step
        for _ in range(6):
            run(x, y)
            sched.step()
        results.append(params_of(model))
    assert_same_bits(results[0], results[1])


def test_a_learning_rate_set_in_any_way_is_read_per_call_in_c():
    results = []
    for compiled in (False, True):
        w = ac.zeros(3, requires_grad=True)
        opt = optim.SGD([w], lr=0.1)
        x, y = ac.tensor(np.arange(3, dtype=np.float32)), ac.tensor(np.ones(3, np.float32))
        step = training_step(lambda x: x * w, opt, F.mse_loss)
        run = ac.compile(step) if compiled else step
        group = opt.param_groups[0]
        losses = [run(x, y).item()]
        group["lr"] = 0.05
        losses.append(run(x, y).item())
        group.update(lr=0.2)
        losses.append(run(x, y).item())
        group |= {"lr": 0.01}
        losses.append(run(x, y).item())
        copied = copy.deepcopy(group)   # a group of its own: writing it changes nothing here
        copied["lr"] = 100.0
        losses.append(run(x, y).item())
        if compiled:
            with pytest.raises(TypeError):
                group["lr"] = "fast"
            assert group["lr"] == 0.01
        opt.load_state_dict(opt.state_dict())   # new groups: a new recording reads them
        run = ac.compile(step) if compiled else step
        opt.param_groups[0]["lr"] = 0.3
        losses.append(run(x, y).item())
        losses.append(run(x, y).item())
        results.append((losses, w.numpy()))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_grad_mode_and_constants_are_part_of_the_signature():
    compiled = ac.compile(lambda x, s=1.0: x * s)
    x = tensor(3)
    np.testing.assert_array_equal(compiled(x).numpy(), x.numpy())
    np.testing.assert_array_equal(compiled(x).numpy(), x.numpy())   # the fast path
    with ac.no_grad():
        np.testing.assert_array_equal(compiled(x).numpy(), x.numpy())
    np.testing.assert_array_equal(compiled(x, 2.0).numpy(), (x * 2.0).numpy())
    np.testing.assert_array_equal(compiled(x, 3.0).numpy(), (x * 3.0).numpy())
    np.testing.assert_array_equal(compiled(x).numpy(), x.numpy())
    assert len(compiled._graphs) == 4


def test_past_eight_signatures_calls_run_eagerly_with_one_warning():
    compiled = ac.compile(lambda x: (x * 2.0).sum(dim=0))
    for n in range(1, 9):
        compiled(tensor(n, 3))
    with pytest.warns(UserWarning, match="8 input signatures") as caught:
        out = compiled(tensor(9, 3))
    assert caught[0].filename == __file__
    assert out.shape == (3,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled(tensor(10, 3))             # warned once only


def test_wrong_shape_after_the_cache_is_full_raises_the_ops_shape_error():
    ac.manual_seed(4)
    model = nn.Linear(3, 2)
    compiled = ac.compile(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in range(1, 9):
            compiled(tensor(n, 3))
        with pytest.raises(ac.ShapeError, match="linear"):
            compiled(tensor(2, 7))


def test_bad_arguments_raise_clear_errors():
    compiled = ac.compile(lambda x: x + 1.0)
    with pytest.raises(TypeError, match="argument 0 is list"):
        compiled([1.0, 2.0])
    with pytest.raises(TypeError, match="argument 0 is ndarray"):
        compiled(np.ones(3, np.float32))
    with ac.checkpoint():
        dead = tensor(3)
    with pytest.raises(ac.ScopeError):
        compiled(dead)
    compiled(tensor(3))
    with ac.checkpoint():
        dead = tensor(3)
    with pytest.raises(ac.ScopeError):
        compiled(dead)                       # on the replay path too
    with pytest.raises(TypeError, match="callable"):
        ac.compile(3)
    with pytest.raises(ValueError, match="unknown backend"):
        ac.compile(lambda x: x, backend="fast")
    with pytest.raises(TypeError, match="example_inputs"):
        ac.compile(lambda x: x, example_inputs=[np.ones(3)])


def test_an_op_the_graph_cannot_replay_falls_back_to_eager_with_a_warning():
    def fn(x):
        return x[1:] * ac.rand(2)           # a random draw
    compiled = ac.compile(fn)
    x = tensor(3)
    with pytest.warns(UserWarning, match="cannot be recorded into a graph; this input signature runs eagerly") as caught:
        compiled(x)
    assert caught[0].filename == __file__   # the warning points at the caller
    ac.manual_seed(9)
    expected = fn(x).numpy()
    ac.manual_seed(9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(compiled(x).numpy(), expected)


def test_reading_a_gradient_as_a_tensor_falls_back_to_eager():
    w = ac.tensor(np.ones(3, np.float32), requires_grad=True)

    def step():
        w.grad = None
        (w * w).sum().backward()
        return w.grad * 2.0
    compiled = ac.compile(step)
    with pytest.warns(UserWarning, match="made inside an earlier op"):
        compiled()
    np.testing.assert_array_equal(compiled().numpy(), np.full(3, 4.0, np.float32))


def test_in_place_arithmetic_falls_back_to_eager():
    def fn(x):
        y = ac.zeros(3)                     # made by the graph, then written from an input
        y.add_(x)
        y *= 2.0
        return y + 1.0
    compiled = ac.compile(fn)
    with pytest.warns(UserWarning, match="add_ cannot be recorded"):
        compiled(ac.full((3,), 1.0))
    for value in (2.0, 3.0):
        x = ac.full((3,), value)
        np.testing.assert_array_equal(compiled(x).numpy(), fn(x).numpy())


def test_a_step_that_clips_gradients_falls_back_to_eager():
    def make():
        ac.manual_seed(0)
        model = nn.Linear(4, 3)
        return model, optim.SGD(model.parameters(), lr=0.5)

    def step(model, opt, x):
        loss = ((model(x) - 1.0) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        return loss
    (eager_model, eager_opt), (model, opt) = make(), make()
    compiled = ac.compile(lambda x: step(model, opt, x))
    with pytest.warns(UserWarning, match="total_norm cannot be recorded"):
        compiled(ac.full((2, 4), 1.0))
    step(eager_model, eager_opt, ac.full((2, 4), 1.0))
    for value in (2.0, 3.0):
        x = ac.full((2, 4), value)
        np.testing.assert_array_equal(compiled(x).numpy(), step(eager_model, eager_opt, x).numpy())
    assert_same_bits(params_of(model), params_of(eager_model))


def test_scoped_tensor_captured_from_outside_falls_back_to_eager():
    with ac.checkpoint():
        bias = tensor(3)
        compiled = ac.compile(lambda x: x + bias)
        with pytest.warns(UserWarning, match="made in a scope the graph does not own"):
            compiled(tensor(3))


def test_outputs_are_new_tensors_in_the_callers_scope():
    compiled = ac.compile(lambda x: (x * 3.0, x.sum()))
    x = tensor(4)
    compiled(x)
    a, s = compiled(x)
    b, _ = compiled(x)
    assert a._ptr != b._ptr and a._ptr.scope_depth == 0
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    with ac.checkpoint():
        inner, _ = compiled(x)
        assert inner._ptr.scope_depth == ac.memory.current_depth() if hasattr(ac.memory, "current_depth") \
            else inner._ptr.scope_depth > 0
    with pytest.raises(ac.ScopeError):
        inner.numpy()
    np.testing.assert_array_equal(s.numpy(), x.sum().numpy())


def test_thousand_compiled_steps_leave_memory_flat():
    ac.manual_seed(6)
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = tensor(8, 20), ac.tensor(rng.integers(0, 5, 8))

    step = training_step(model, opt, F.cross_entropy)
    compiled = ac.compile(step)
    for _ in range(20):
        with ac.checkpoint():
            compiled(x, y)
    before = ac.memory_stats()
    for _ in range(1000):
        with ac.checkpoint():
            compiled(x, y)
    after = ac.memory_stats()
    for key in ("bytes_in_use", "live_tensors", "live_nodes", "heap_allocations", "arena_reserved"):
        assert after[key] == before[key], key
