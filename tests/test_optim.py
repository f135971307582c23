"""test_optim.py - aicraft.optim.SGD, Adam and AdamW.

Several steps of each optimizer are compared with NumPy float64 versions of
PyTorch's algorithms written below (and with torch.optim itself when torch is
installed); then param groups, skipped parameters, state_dict round trips,
state that outlives `with ac.checkpoint()`, a warm training loop that makes no
malloc (zero_grad's dropped grads reused), and bad arguments.
"""
import gc

import numpy as np
import pytest

import aicraft as ac
from aicraft import optim

RTOL, ATOL = 2e-5, 1e-6


# ---- float64 references of torch.optim's single-tensor algorithms --------------

class SgdReference:
    def __init__(self, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov
        self.buf = None

    def step(self, p, g):
        d = g + self.weight_decay * p
        if self.momentum:
            if self.buf is None:
                self.buf = d.copy()
            else:
                self.buf = self.momentum * self.buf + (1 - self.dampening) * d
            d = d + self.momentum * self.buf if self.nesterov else self.buf
        return p - self.lr * d


class AdamReference:
    def __init__(self, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False):
        self.lr, self.betas, self.eps = lr, betas, eps
        self.weight_decay, self.decoupled = weight_decay, decoupled
        self.m = self.v = None
        self.t = 0

    def step(self, p, g):
        beta1, beta2 = self.betas
        if self.m is None:
            self.m, self.v = np.zeros_like(p), np.zeros_like(p)
        self.t += 1
        if self.decoupled:
            p = p * (1 - self.lr * self.weight_decay)
        else:
            g = g + self.weight_decay * p
        self.m = beta1 * self.m + (1 - beta1) * g
        self.v = beta2 * self.v + (1 - beta2) * g * g
        m_hat = self.m / (1 - beta1 ** self.t)
        v_hat = self.v / (1 - beta2 ** self.t)
        return p - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


# ---- helpers -------------------------------------------------------------------

def make_grads(n_steps, shape, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(n_steps)]


def set_grad(param, grad):
    """Give param the gradient grad (a NumPy array): backward of sum(param * grad)."""
    param.grad = None
    (param * ac.tensor(grad)).sum().backward()


def run_aicraft(make_optimizer, p0, grads):
    """aicraft's parameter after each step."""
    p = ac.tensor(p0, requires_grad=True)
    opt = make_optimizer([p])
    values = []
    for g in grads:
        set_grad(p, g)
        opt.step()
        values.append(p.numpy())
    return values


def run_reference(reference, p0, grads):
    p = p0.astype(np.float64)
    values = []
    for g in grads:
        p = reference.step(p, g.astype(np.float64))
        values.append(p)
    return values


def assert_steps_close(got, expected, rtol=RTOL, atol=ATOL):
    for step, (a, b) in enumerate(zip(got, expected), 1):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg="after step %d" % step)


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, weight_decay=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.05),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
]

ADAM_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6),
    dict(lr=0.01, betas=(0.3, 0.5)),     # beta1 < 0.5: PyTorch's lerp takes its other branch
]


@pytest.mark.parametrize("options", SGD_CASES)
def test_sgd_matches_float64_reference(options):
    p0 = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    grads = make_grads(6, (3, 4), seed=2)
    got = run_aicraft(lambda params: optim.SGD(params, **options), p0, grads)
    assert_steps_close(got, run_reference(SgdReference(**options), p0, grads))


@pytest.mark.parametrize("options", ADAM_CASES)
@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_adam_and_adamw_match_float64_reference(cls, options):
    p0 = np.random.default_rng(3).standard_normal((5,)).astype(np.float32)
    grads = make_grads(6, (5,), seed=4)
    options = dict(options)
    if cls is optim.AdamW:
        options.setdefault("weight_decay", 1e-2)     # AdamW's default
    reference = AdamReference(decoupled=cls is optim.AdamW, **options)
    got = run_aicraft(lambda params: cls(params, **options), p0, grads)
    assert_steps_close(got, run_reference(reference, p0, grads))


def test_adamw_default_weight_decay_shrinks_parameters():
    opt = optim.AdamW([ac.zeros(2, requires_grad=True)])
    assert opt.param_groups[0]["weight_decay"] == 1e-2
    p0 = np.full(4, 3.0, np.float32)
    zero = [np.zeros(4, np.float32)] * 3
    # with a zero gradient only the decoupled decay moves p: p *= (1 - lr * wd) per step
    got = run_aicraft(lambda params: optim.AdamW(params, lr=0.1), p0, zero)
    np.testing.assert_allclose(got[-1], 3.0 * (1 - 0.1 * 1e-2) ** 3, rtol=1e-6)


# ---- torch.optim itself, when it is installed ----------------------------------

def run_torch(torch_cls, options, p0, grads):
    torch = pytest.importorskip("torch")
    p = torch.tensor(p0, requires_grad=True)
    opt = torch_cls([p], **options)
    values = []
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
        values.append(p.detach().numpy().copy())
    return values


@pytest.mark.parametrize("options", SGD_CASES)
def test_sgd_matches_torch(options):
    torch = pytest.importorskip("torch")
    p0 = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    grads = make_grads(8, (4, 3), seed=6)
    got = run_aicraft(lambda params: optim.SGD(params, **options), p0, grads)
    assert_steps_close(got, run_torch(torch.optim.SGD, options, p0, grads), rtol=1e-5)


@pytest.mark.parametrize("options", ADAM_CASES + [dict(lr=0.01, weight_decay=0.05)])
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_and_adamw_match_torch(name, options):
    torch = pytest.importorskip("torch")
    p0 = np.random.default_rng(7).standard_normal((4, 3)).astype(np.float32)
    grads = make_grads(8, (4, 3), seed=8)
    got = run_aicraft(lambda params: getattr(optim, name)(params, **options), p0, grads)
    assert_steps_close(got, run_torch(getattr(torch.optim, name), options, p0, grads), rtol=1e-5)


# ---- groups, skipping, zero_grad, closures -------------------------------------

def test_param_groups_use_their_own_options():
    rng = np.random.default_rng(9)
    a0, b0 = rng.standard_normal(3).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    ga, gb = make_grads(4, 3, seed=10), make_grads(4, 2, seed=11)
    a, b = ac.tensor(a0, requires_grad=True), ac.tensor(b0, requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.01, "momentum": 0.5}], lr=0.1, momentum=0.9)
    assert opt.param_groups[1]["lr"] == 0.01 and opt.param_groups[0]["lr"] == 0.1
    assert opt.param_groups[1]["dampening"] == 0     # missing options take the defaults
    for g_a, g_b in zip(ga, gb):
        set_grad(a, g_a)
        set_grad(b, g_b)
        opt.step()
    ref_a = run_reference(SgdReference(lr=0.1, momentum=0.9), a0, ga)[-1]
    ref_b = run_reference(SgdReference(lr=0.01, momentum=0.5), b0, gb)[-1]
    np.testing.assert_allclose(a.numpy(), ref_a, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(b.numpy(), ref_b, rtol=RTOL, atol=ATOL)


def test_add_param_group_later_and_changed_lr_take_effect():
    a = ac.tensor([1.0, 2.0], requires_grad=True)
    b = ac.tensor([3.0], requires_grad=True)
    opt = optim.SGD([a], lr=0.5)
    opt.add_param_group({"params": [b], "lr": 0.25})
    set_grad(a, np.array([1.0, 1.0], np.float32))
    set_grad(b, np.array([2.0], np.float32))
    opt.param_groups[0]["lr"] = 1.0          # as a scheduler does
    opt.step()
    np.testing.assert_allclose(a.numpy(), [0.0, 1.0])
    np.testing.assert_allclose(b.numpy(), [2.5])


def test_parameters_without_grad_are_skipped_and_get_no_state():
    a = ac.tensor([1.0, 2.0], requires_grad=True)
    b = ac.tensor([3.0, 4.0], requires_grad=True)
    for opt in (optim.SGD([a, b], lr=0.1, momentum=0.9), optim.Adam([a, b], lr=0.1)):
        set_grad(a, np.array([1.0, 1.0], np.float32))
        opt.step()
        assert b not in opt.state
        np.testing.assert_array_equal(b.numpy(), [3.0, 4.0])
        assert a in opt.state
    assert optim.Adam([a]).state_dict()["state"] == {}


def test_optimizer_state_holds_the_momentum_buffer_and_adam_moments():
    g = np.array([0.5, -1.0], np.float32)
    p = ac.tensor([1.0, 1.0], requires_grad=True)
    sgd = optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.5)
    for _ in range(2):
        set_grad(p, g)
        sgd.step()
    # buf = g, then 0.9 g + 0.5 g
    np.testing.assert_allclose(sgd.state[p]["momentum_buffer"].numpy(), 1.4 * g, rtol=1e-6)
    q = ac.tensor([1.0, 1.0], requires_grad=True)
    adam = optim.Adam([q], lr=0.1)
    for _ in range(3):
        set_grad(q, g)
        adam.step()
    state = adam.state[q]
    assert state["step"] == 3
    np.testing.assert_allclose(state["exp_avg"].numpy(), (1 - 0.9 ** 3) * g, rtol=1e-5)
    np.testing.assert_allclose(state["exp_avg_sq"].numpy(), (1 - 0.999 ** 3) * g * g, rtol=1e-4)


def test_zero_grad_drops_or_zeroes_gradients():
    p = ac.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    set_grad(p, np.array([3.0, 4.0], np.float32))
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert p.grad is None
    opt.zero_grad()                      # nothing to drop is fine
    opt.step()                           # and a step without gradients changes nothing
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0])


def test_step_calls_the_closure_with_grad_enabled_and_returns_its_loss():
    p = ac.tensor([2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with ac.no_grad():
        loss = opt.step(closure)
    assert loss.item() == pytest.approx(4.0)
    np.testing.assert_allclose(p.numpy(), [2.0 - 0.1 * 4.0], rtol=1e-6)


def test_repr_lists_the_groups():
    opt = optim.SGD([ac.zeros(1, requires_grad=True)], lr=0.5, momentum=0.9)
    text = repr(opt)
    assert text.startswith("SGD (") and "Parameter Group 0" in text
    assert "lr: 0.5" in text and "momentum: 0.9" in text


# ---- state_dict ----------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda params: optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True),
    lambda params: optim.Adam(params, lr=0.01, weight_decay=0.01),
    lambda params: optim.AdamW(params, lr=0.01),
])
def test_state_dict_round_trip_resumes_identically(make):
    rng = np.random.default_rng(12)
    w0, b0 = rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    grads = [(g1, g2) for g1, g2 in zip(make_grads(6, (3, 2), 13), make_grads(6, 2, 14))]

    w, b = ac.tensor(w0, requires_grad=True), ac.tensor(b0, requires_grad=True)
    opt = make([{"params": [w]}, {"params": [b], "lr": 0.02}])
    for gw, gb in grads[:3]:
        set_grad(w, gw)
        set_grad(b, gb)
        opt.step()
    saved = opt.state_dict()
    assert sorted(saved) == ["param_groups", "state"]
    assert [group["params"] for group in saved["param_groups"]] == [[0], [1]]
    assert saved["param_groups"][1]["lr"] == 0.02
    assert sorted(saved["state"]) == [0, 1]
    w_saved, b_saved = w.numpy(), b.numpy()

    for gw, gb in grads[3:]:
        set_grad(w, gw)
        set_grad(b, gb)
        opt.step()

    # a fresh optimizer (with different options) on parameters restored to the saved values
    w2, b2 = ac.tensor(w_saved, requires_grad=True), ac.tensor(b_saved, requires_grad=True)
    opt2 = make([{"params": [w2]}, {"params": [b2]}])
    opt2.load_state_dict(saved)
    assert opt2.param_groups[1]["lr"] == 0.02
    assert opt2.param_groups[0]["params"][0] is w2
    for gw, gb in grads[3:]:
        set_grad(w2, gw)
        set_grad(b2, gb)
        opt2.step()
    np.testing.assert_array_equal(w2.numpy(), w.numpy())
    np.testing.assert_array_equal(b2.numpy(), b.numpy())


def test_state_dict_is_a_snapshot():
    p = ac.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    set_grad(p, np.array([1.0, -1.0], np.float32))
    opt.step()
    saved = opt.state_dict()
    before = saved["state"][0]["exp_avg"].numpy()
    opt.step()
    np.testing.assert_array_equal(saved["state"][0]["exp_avg"].numpy(), before)
    assert saved["state"][0]["step"] == 1


def test_load_state_dict_accepts_numpy_state_and_a_tensor_step():
    p = ac.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    opt.load_state_dict({
        "state": {0: {"step": np.float32(4.0), "exp_avg": np.array([0.1, 0.2]),
                      "exp_avg_sq": np.array([0.01, 0.04])}},
        "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0,
                          "params": [0]}],
    })
    assert opt.state[p]["step"] == 4
    np.testing.assert_allclose(opt.state[p]["exp_avg"].numpy(), [0.1, 0.2], rtol=1e-6)


def test_load_state_dict_rejects_a_dict_that_does_not_fit():
    a, b = ac.zeros(2, requires_grad=True), ac.zeros(3, requires_grad=True)
    source = optim.SGD([a, b], lr=0.1, momentum=0.9)
    set_grad(a, np.ones(2, np.float32))
    set_grad(b, np.ones(3, np.float32))
    source.step()
    saved = source.state_dict()
    with pytest.raises(ValueError, match="number of parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(saved)
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.SGD([a], lr=0.1).load_state_dict(saved)
    swapped = optim.SGD([b, a], lr=0.3, momentum=0.9)
    with pytest.raises(ac.ShapeError, match="momentum_buffer"):
        swapped.load_state_dict(saved)
    assert swapped.param_groups[0]["lr"] == 0.3 and not swapped.state   # left unchanged


# ---- memory: state outlives the step's scope -----------------------------------

@pytest.mark.parametrize("make", [
    lambda params: optim.SGD(params, lr=0.05, momentum=0.9),
    lambda params: optim.Adam(params, lr=0.01),
])
def test_state_survives_checkpoint_and_memory_stays_flat(make):
    rng = np.random.default_rng(15)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    w = ac.tensor(w0, requires_grad=True)
    xt = ac.tensor(x)
    opt = make([w])
    reference = make([ac.tensor(w0, requires_grad=True)])
    ref_w = reference.param_groups[0]["params"][0]
    in_use = []
    for _ in range(6):
        opt.zero_grad()
        with ac.checkpoint():
            loss = ((xt @ w) ** 2).mean()
            loss.backward()
            opt.step()
        in_use.append(ac.memory_stats()["bytes_in_use"])
        # the same steps with no scope at all
        reference.zero_grad()
        ((xt @ ref_w) ** 2).mean().backward()
        reference.step()
    assert len(set(in_use[1:])) == 1, in_use      # only the first step makes state
    for value in opt.state[w].values():
        if isinstance(value, ac.Tensor):
            value.numpy()                         # alive after every scope ended
    np.testing.assert_array_equal(w.numpy(), ref_w.numpy())


def test_first_step_inside_checkpoint_makes_root_state():
    w = ac.tensor([1.0, -1.0], requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    with ac.checkpoint():
        (w * w).sum().backward()
        opt.step()
    np.testing.assert_allclose(opt.state[w]["exp_avg"].numpy(), [0.2, -0.2], rtol=1e-6)


# ---- bad arguments -------------------------------------------------------------

def test_bad_options_raise_like_pytorch():
    p = ac.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD([p], lr=-0.1)
    with pytest.raises(ValueError, match="momentum"):
        optim.SGD([p], lr=0.1, momentum=-1)
    with pytest.raises(ValueError, match="weight_decay"):
        optim.SGD([p], lr=0.1, weight_decay=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match="index 0"):
        optim.Adam([p], betas=(1.0, 0.999))
    with pytest.raises(ValueError, match="index 1"):
        optim.Adam([p], betas=(0.9, -0.1))
    with pytest.raises(ValueError, match="epsilon"):
        optim.Adam([p], eps=-1e-8)
    with pytest.raises(ValueError, match="learning rate"):
        optim.AdamW([p], lr=float("nan"))
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD([p], lr=0.1).add_param_group({"params": [ac.zeros(1, requires_grad=True)], "lr": -1})


def test_bad_params_raise_like_pytorch():
    p = ac.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="only optimize Tensors"):
        optim.SGD([p, np.zeros(2)], lr=0.1)
    with pytest.raises(TypeError, match="sets"):
        optim.SGD({p}, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.Adam([p * 2])
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.warns(UserWarning, match="duplicate"):
        optim.SGD([p, p], lr=0.1)


def test_param_from_an_ended_scope_raises_scope_error():
    with ac.checkpoint():
        p = ac.zeros(2, requires_grad=True)
        opt = optim.SGD([p], lr=0.1)
    with pytest.raises(ac.ScopeError):
        opt.step()


# ---- memory: a warm PyTorch-style loop makes no malloc ---------------------------

def make_mlp_and_batches(seed=21):
    ac.manual_seed(seed)
    model = ac.nn.Sequential(ac.nn.Linear(8, 16), ac.nn.ReLU(), ac.nn.Linear(16, 4))
    rng = np.random.default_rng(seed)
    batches = [(ac.tensor(rng.standard_normal((32, 8)).astype(np.float32)),
                ac.tensor(rng.standard_normal((32, 4)).astype(np.float32))) for _ in range(4)]
    return model, batches


def train_step(model, opt, loss_fn, x, y, set_to_none):
    with ac.checkpoint():
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=set_to_none)
        loss.backward()
        opt.step()
        return loss.item()


@pytest.mark.parametrize("set_to_none", [True, False])
@pytest.mark.parametrize("make", [
    lambda params: optim.SGD(params, lr=0.05, momentum=0.9),
    lambda params: optim.Adam(params, lr=0.01),
], ids=["sgd", "adam"])
def test_a_warm_training_loop_makes_no_malloc(make, set_to_none):
    model, batches = make_mlp_and_batches()
    opt, loss_fn = make(model.parameters()), ac.nn.MSELoss()
    first = [train_step(model, opt, loss_fn, x, y, set_to_none) for x, y in batches]
    start = ac.memory_stats()
    in_use = set()
    for step in range(200):
        x, y = batches[step % len(batches)]
        last = train_step(model, opt, loss_fn, x, y, set_to_none)
        in_use.add(ac.memory_stats()["bytes_in_use"])
    end = ac.memory_stats()
    assert in_use == {start["bytes_in_use"]}
    assert end["heap_allocations"] == start["heap_allocations"]
    assert end["live_tensors"] == start["live_tensors"]
    assert last < 0.8 * first[-1]          # and it learned


def mlp_grads_float64(model, x, y):
    """d mean((relu(x W1^T + b1) W2^T + b2 - y)^2) / d(W1, b1, W2, b2), in float64."""
    w1, b1, w2, b2 = (p.numpy().astype(np.float64) for p in model.parameters())
    x, y = x.numpy().astype(np.float64), y.numpy().astype(np.float64)
    pre = x @ w1.T + b1
    h = np.maximum(pre, 0.0)
    d_out = 2.0 * (h @ w2.T + b2 - y) / y.size
    d_pre = (d_out @ w2) * (pre > 0)
    return [d_pre.T @ x, d_pre.sum(0), d_out.T @ h, d_out.sum(0)]


def test_a_reused_grad_holds_the_new_gradient():
    model, batches = make_mlp_and_batches(seed=5)
    opt, loss_fn = optim.SGD(model.parameters(), lr=0.05), ac.nn.MSELoss()
    for x, y in batches:
        train_step(model, opt, loss_fn, x, y, True)
    x, y = batches[1]
    expected = mlp_grads_float64(model, x, y)
    opt.zero_grad()
    spare = ac.memory_stats()
    assert spare["spare_grad_bytes"] > 0
    with ac.checkpoint():
        loss_fn(model(x), y).backward()
    assert ac.memory_stats()["heap_allocations"] == spare["heap_allocations"]   # the spares were used
    for p, g in zip(model.parameters(), expected):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-4, atol=1e-6)


def test_a_grad_someone_holds_is_not_reused():
    model, batches = make_mlp_and_batches(seed=6)
    opt, loss_fn = optim.Adam(model.parameters(), lr=0.01), ac.nn.MSELoss()
    for x, y in batches:
        train_step(model, opt, loss_fn, x, y, True)
    weight = model[0].weight
    held = weight.grad
    kept = held.numpy()
    opt.zero_grad()
    x, y = batches[2]
    expected = mlp_grads_float64(model, x, y)[0]
    with ac.checkpoint():
        loss_fn(model(x), y).backward()
    np.testing.assert_array_equal(held.numpy(), kept)
    np.testing.assert_allclose(weight.grad.numpy(), expected, rtol=1e-4, atol=1e-6)


def test_spare_grads_are_freed_with_their_parameters():
    gc.collect()
    start = ac.memory_stats()
    model, batches = make_mlp_and_batches(seed=7)
    opt, loss_fn = optim.SGD(model.parameters(), lr=0.05), ac.nn.MSELoss()
    for x, y in batches:
        train_step(model, opt, loss_fn, x, y, True)
    opt.zero_grad()
    assert ac.memory_stats()["spare_grad_bytes"] > start["spare_grad_bytes"]
    del model, opt, batches, x, y
    gc.collect()
    end = ac.memory_stats()
    assert end["spare_grad_bytes"] == start["spare_grad_bytes"]
    assert end["bytes_in_use"] == start["bytes_in_use"]
    assert end["live_tensors"] == start["live_tensors"]
