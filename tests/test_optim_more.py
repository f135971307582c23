"""test_optim_more.py - aicraft.optim.Adadelta, RMSprop, Adagrad and LBFGS.

Several steps of each are compared with NumPy float64 versions of PyTorch's
documented algorithms written below, and with torch.optim itself when torch is
installed; LBFGS also fits a least-squares problem and a small MLP through a
closure. Then state_dict round trips, memory that stays flat over many steps
inside `with ac.checkpoint()`, and bad arguments.
"""
import numpy as np
import pytest

import aicraft as ac
from aicraft import optim
from test_optim import RTOL, ATOL, assert_steps_close, make_grads, run_aicraft, run_reference, run_torch, set_grad


# ---- float64 references of torch.optim's algorithms ----------------------------

class AdadeltaReference:
    def __init__(self, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
        self.lr, self.rho, self.eps, self.weight_decay = lr, rho, eps, weight_decay
        self.v = self.u = 0.0

    def step(self, p, g):
        g = g + self.weight_decay * p
        self.v = self.rho * self.v + (1 - self.rho) * g * g
        delta = np.sqrt(self.u + self.eps) / np.sqrt(self.v + self.eps) * g
        self.u = self.rho * self.u + (1 - self.rho) * delta * delta
        return p - self.lr * delta


class RmspropReference:
    def __init__(self, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
        self.lr, self.alpha, self.eps, self.weight_decay = lr, alpha, eps, weight_decay
        self.momentum, self.centered = momentum, centered
        self.v = self.g_avg = self.buf = 0.0

    def step(self, p, g):
        g = g + self.weight_decay * p
        self.v = self.alpha * self.v + (1 - self.alpha) * g * g
        v = self.v
        if self.centered:
            self.g_avg = self.alpha * self.g_avg + (1 - self.alpha) * g
            v = v - self.g_avg ** 2
        avg = np.sqrt(v) + self.eps
        if self.momentum > 0:
            self.buf = self.momentum * self.buf + g / avg
            return p - self.lr * self.buf
        return p - self.lr * g / avg


class AdagradReference:
    def __init__(self, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
        self.lr, self.lr_decay, self.weight_decay, self.eps = lr, lr_decay, weight_decay, eps
        self.sum = initial_accumulator_value
        self.t = 0

    def step(self, p, g):
        self.t += 1
        g = g + self.weight_decay * p
        clr = self.lr / (1 + (self.t - 1) * self.lr_decay)
        self.sum = self.sum + g * g
        return p - clr * g / (np.sqrt(self.sum) + self.eps)


CASES = [
    ("Adadelta", AdadeltaReference, dict()),
    ("Adadelta", AdadeltaReference, dict(lr=0.5, rho=0.6, eps=1e-4, weight_decay=0.1)),
    ("Adadelta", AdadeltaReference, dict(rho=1.0)),    # the edge PyTorch allows: nothing moves
    ("RMSprop", RmspropReference, dict()),
    ("RMSprop", RmspropReference, dict(lr=0.01, alpha=0.9, weight_decay=0.1)),
    ("RMSprop", RmspropReference, dict(lr=0.01, momentum=0.9)),
    ("RMSprop", RmspropReference, dict(lr=0.005, alpha=0.8, centered=True)),
    ("RMSprop", RmspropReference, dict(lr=0.005, momentum=0.5, centered=True, weight_decay=0.05)),
    ("RMSprop", RmspropReference, dict(lr=0.01, alpha=0.3, centered=True)),   # lerp's other branch
    ("Adagrad", AdagradReference, dict()),
    ("Adagrad", AdagradReference, dict(lr=0.1, lr_decay=0.2, weight_decay=0.1)),
    ("Adagrad", AdagradReference, dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-6)),
]
CASE_IDS = ["%s-%d" % (name, i) for i, (name, _, _) in enumerate(CASES)]


@pytest.mark.parametrize("name, reference, options", CASES, ids=CASE_IDS)
def test_matches_float64_reference(name, reference, options):
    p0 = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    grads = make_grads(6, (3, 4), seed=2)
    got = run_aicraft(lambda params: getattr(optim, name)(params, **options), p0, grads)
    assert_steps_close(got, run_reference(reference(**options), p0, grads))


@pytest.mark.parametrize("name, reference, options", CASES, ids=CASE_IDS)
def test_matches_torch(name, reference, options):
    torch = pytest.importorskip("torch")
    p0 = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    grads = make_grads(8, (4, 3), seed=6)
    got = run_aicraft(lambda params: getattr(optim, name)(params, **options), p0, grads)
    assert_steps_close(got, run_torch(getattr(torch.optim, name), options, p0, grads), rtol=1e-5)


@pytest.mark.parametrize("name", ["Adadelta", "RMSprop", "Adagrad", "LBFGS"])
def test_defaults_are_pytorchs(name):
    torch = pytest.importorskip("torch")
    mine = getattr(optim, name)([ac.zeros(2, requires_grad=True)]).defaults
    theirs = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)]).defaults
    assert {key: theirs[key] for key in mine} == mine


def test_state_holds_what_pytorch_keeps():
    g = np.array([0.5, -1.0], np.float32)
    p = ac.tensor([1.0, 1.0], requires_grad=True)
    adagrad = optim.Adagrad([p], initial_accumulator_value=0.25)
    assert adagrad.state[p]["step"] == 0          # made with the optimizer, as PyTorch does
    np.testing.assert_array_equal(adagrad.state[p]["sum"].numpy(), [0.25, 0.25])
    for _ in range(2):
        set_grad(p, g)
        adagrad.step()
    assert adagrad.state[p]["step"] == 2
    np.testing.assert_allclose(adagrad.state[p]["sum"].numpy(), 0.25 + 2 * g * g, rtol=1e-6)

    assert sorted(_states(optim.RMSprop, p, g)) == ["square_avg", "step"]
    assert sorted(_states(optim.RMSprop, p, g, momentum=0.9, centered=True)) == [
        "grad_avg", "momentum_buffer", "square_avg", "step"]
    state = _states(optim.Adadelta, p, g, rho=0.5)
    np.testing.assert_allclose(state["square_avg"].numpy(), 0.5 * g * g, rtol=1e-6)
    assert state["step"] == 1


def _states(cls, p, g, **options):
    opt = cls([p], **options)
    set_grad(p, g)
    opt.step()
    return opt.state[p]


def test_parameters_without_grad_are_skipped():
    a = ac.tensor([1.0, 2.0], requires_grad=True)
    b = ac.tensor([3.0, 4.0], requires_grad=True)
    for cls in (optim.Adadelta, optim.RMSprop, optim.Adagrad):
        opt = cls([a, b])
        a.grad = b.grad = None
        set_grad(a, np.array([1.0, 1.0], np.float32))
        opt.step()
        np.testing.assert_array_equal(b.numpy(), [3.0, 4.0])
        assert opt.state[a]["step"] == 1 and opt.state[b].get("step", 0) == 0


# ---- LBFGS: float64 reference and problems ---------------------------------------

def least_squares(seed, m=30, n=8):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    return a, b


def lbfgs_reference(grad_fn, x0, lr, max_iter, history_size, n_steps):
    """torch.optim.LBFGS without line search, in float64: the point of every
    evaluation. The problems below never meet the tolerances in these steps."""
    x = x0.astype(np.float64)
    dirs, stps, ro = [], [], []
    points, prev_g, d, t, h_diag = [], None, None, None, 1.0
    n_iter_total = 0
    for _ in range(n_steps):
        points.append(x.copy())
        g = grad_fn(x)
        for n_iter in range(1, max_iter + 1):
            n_iter_total += 1
            if n_iter_total > 1:
                y, s = g - prev_g, d * t
                ys = y @ s
                if ys > 1e-10:
                    if len(dirs) == history_size:
                        dirs.pop(0), stps.pop(0), ro.pop(0)
                    dirs.append(y), stps.append(s), ro.append(1.0 / ys)
                    h_diag = ys / (y @ y)
            q, al = -g, [0.0] * len(dirs)
            for i in reversed(range(len(dirs))):
                al[i] = (stps[i] @ q) * ro[i]
                q = q - al[i] * dirs[i]
            d = q * h_diag
            for i in range(len(dirs)):
                d = d + (al[i] - (dirs[i] @ d) * ro[i]) * stps[i]
            prev_g = g
            t = min(1.0, 1.0 / np.abs(g).sum()) * lr if n_iter_total == 1 else lr
            x = x + t * d
            if n_iter == max_iter:
                break
            points.append(x.copy())
            g = grad_fn(x)
    return points, x


def fit(opt, closure_of, n_steps):
    """Step opt n_steps times; the parameters at every closure call."""
    points = []
    closure = closure_of(points)
    for _ in range(n_steps):
        opt.step(closure)
    return points


def lstsq_closure(opt, x, a, b):
    at, bt = ac.tensor(a), ac.tensor(b)

    def closure_of(points):
        def closure():
            points.append(x.numpy().copy())
            opt.zero_grad()
            loss = ((at @ x - bt) ** 2).mean()
            loss.backward()
            return loss
        return closure
    return closure_of


def test_lbfgs_matches_float64_reference_on_least_squares():
    a, b = least_squares(3)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    x = ac.zeros(a.shape[1], requires_grad=True)
    opt = optim.LBFGS([x], lr=0.3, max_iter=5, history_size=3)
    points = fit(opt, lstsq_closure(opt, x, a, b), n_steps=3)
    expected, x_end = lbfgs_reference(lambda v: 2 * a64.T @ (a64 @ v - b64) / len(b), np.zeros(a.shape[1]),
                                      lr=0.3, max_iter=5, history_size=3, n_steps=3)
    assert len(points) == len(expected) == 15
    for i, (got, want) in enumerate(zip(points, expected)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg="evaluation %d" % i)
    np.testing.assert_allclose(x.numpy(), x_end, rtol=1e-4, atol=1e-5)
    assert opt.state[x]["func_evals"] == 15 and opt.state[x]["n_iter"] == 15
    assert len(opt.state[x]["old_dirs"]) == 3


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_solves_least_squares(line_search_fn):
    a, _ = least_squares(4)
    # b in the range of a: the loss goes to 0, where float32 still tells points apart
    b = a @ np.random.default_rng(4).standard_normal(a.shape[1]).astype(np.float32)
    x = ac.zeros(a.shape[1], requires_grad=True)
    opt = optim.LBFGS([x], line_search_fn=line_search_fn)
    losses = []
    closure = lstsq_closure(opt, x, a, b)([])
    for _ in range(5):
        losses.append(opt.step(closure).item())
    solution = np.linalg.lstsq(a.astype(np.float64), b.astype(np.float64), rcond=None)[0]
    np.testing.assert_allclose(x.numpy(), solution, rtol=1e-3, atol=1e-4)
    assert losses == sorted(losses, reverse=True)


def test_lbfgs_strong_wolfe_steps_meet_the_wolfe_conditions():
    a, b = least_squares(5)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)

    def loss_grad(v):
        r = a64 @ v - b64
        return r @ r / len(b), 2 * a64.T @ r / len(b)

    x = ac.zeros(a.shape[1], requires_grad=True)
    opt = optim.LBFGS([x], max_iter=1, line_search_fn="strong_wolfe")
    closure = lstsq_closure(opt, x, a, b)([])
    for _ in range(4):
        before = x.numpy().astype(np.float64)
        f0, g0 = loss_grad(before)
        opt.step(closure)
        step = x.numpy().astype(np.float64) - before
        f1, g1 = loss_grad(x.numpy().astype(np.float64))
        assert f1 <= f0 + 1e-4 * (g0 @ step) + 1e-6          # sufficient decrease
        assert abs(g1 @ step) <= 0.9 * abs(g0 @ step) + 1e-6   # curvature


def mlp_pair(seed):
    """An aicraft MLP and its torch twin with the same weights, and the data."""
    torch = pytest.importorskip("torch")
    ac.manual_seed(seed)
    model = ac.nn.Sequential(ac.nn.Linear(3, 8), ac.nn.Tanh(), ac.nn.Linear(8, 1))
    twin = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    with torch.no_grad():
        for mine, theirs in zip(model.parameters(), twin.parameters()):
            theirs.copy_(torch.tensor(mine.numpy()))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (40, 3)).astype(np.float32)
    y = (np.sin(x[:, :1]) + x[:, 1:2] * x[:, 2:]).astype(np.float32)
    return torch, model, twin, x, y


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_trains_an_mlp_as_torch_does(line_search_fn):
    torch, model, twin, x, y = mlp_pair(seed=8)
    lr = 1 if line_search_fn else 0.5
    opt = optim.LBFGS(model.parameters(), lr=lr, max_iter=4, history_size=5, line_search_fn=line_search_fn)
    topt = torch.optim.LBFGS(twin.parameters(), lr=lr, max_iter=4, history_size=5,
                             line_search_fn=line_search_fn)
    xa, ya, xt, yt = ac.tensor(x), ac.tensor(y), torch.tensor(x), torch.tensor(y)
    loss_fn, torch_loss_fn = ac.nn.MSELoss(), torch.nn.MSELoss()

    def closure():
        opt.zero_grad()
        loss = loss_fn(model(xa), ya)
        loss.backward()
        return loss

    def torch_closure():
        topt.zero_grad()
        loss = torch_loss_fn(twin(xt), yt)
        loss.backward()
        return loss

    losses = []
    for step in range(3):
        loss, torch_loss = opt.step(closure).item(), topt.step(torch_closure).item()
        losses.append(loss)
        assert loss == pytest.approx(torch_loss, rel=1e-4)
        for mine, theirs in zip(model.parameters(), twin.parameters()):
            np.testing.assert_allclose(mine.numpy(), theirs.detach().numpy(), rtol=1e-3, atol=1e-4,
                                       err_msg="after step %d" % step)
        assert opt.state[model[0].weight]["func_evals"] == topt.state[twin[0].weight]["func_evals"]
    assert losses[-1] < 0.5 * losses[0]


def test_lbfgs_gradient_of_an_unused_parameter_counts_as_zero():
    a, b = least_squares(6)
    x = ac.zeros(a.shape[1], requires_grad=True)
    unused = ac.tensor([[1.0, 2.0]], requires_grad=True)
    opt = optim.LBFGS([unused, x], max_iter=10)
    opt.step(lstsq_closure(opt, x, a, b)([]))
    np.testing.assert_array_equal(unused.numpy(), [[1.0, 2.0]])
    assert opt.state[unused]["n_iter"] > 1       # state sits with the first parameter
    assert opt.state[unused]["d"].shape == (a.shape[1] + 2,)


def test_lbfgs_stops_at_once_when_the_gradient_is_zero():
    x = ac.tensor([1.0, -1.0], requires_grad=True)
    opt = optim.LBFGS([x])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (x * 0.0).sum()
        loss.backward()
        return loss

    with ac.no_grad():                            # the closure still runs with grad on
        assert opt.step(closure).item() == 0.0
    assert len(calls) == 1 and opt.state[x] == {"func_evals": 1, "n_iter": 0}
    np.testing.assert_array_equal(x.numpy(), [1.0, -1.0])


# ---- state_dict ----------------------------------------------------------------

def _lstsq_closure_for(x, at, bt, opt_box):
    def closure():
        opt_box[0].zero_grad()
        loss = ((at @ x - bt) ** 2).mean()
        loss.backward()
        return loss
    return closure


@pytest.mark.parametrize("make", [
    lambda params: optim.Adadelta(params, lr=0.5, weight_decay=0.01),
    lambda params: optim.RMSprop(params, lr=0.01, momentum=0.9, centered=True),
    lambda params: optim.Adagrad(params, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
    lambda params: optim.LBFGS(params, lr=0.5, max_iter=3, history_size=2),
    lambda params: optim.LBFGS(params, max_iter=3, history_size=2, line_search_fn="strong_wolfe"),
], ids=["adadelta", "rmsprop", "adagrad", "lbfgs", "lbfgs-wolfe"])
def test_state_dict_round_trip_resumes_identically(make):
    a, b = least_squares(7)
    at, bt = ac.tensor(a), ac.tensor(b)
    x = ac.zeros(a.shape[1], requires_grad=True)
    box = [make([x])]
    closure = _lstsq_closure_for(x, at, bt, box)
    for _ in range(3):
        box[0].step(closure)
    saved = box[0].state_dict()
    x_saved = x.numpy()
    for _ in range(3):
        box[0].step(closure)

    x2 = ac.tensor(x_saved, requires_grad=True)
    box2 = [make([x2])]
    box2[0].load_state_dict(saved)
    closure2 = _lstsq_closure_for(x2, at, bt, box2)
    for _ in range(3):
        box2[0].step(closure2)
    np.testing.assert_array_equal(x2.numpy(), x.numpy())


def test_lbfgs_state_dict_is_a_snapshot_and_checks_sizes():
    a, b = least_squares(8)
    x = ac.zeros(a.shape[1], requires_grad=True)
    opt = optim.LBFGS([x], max_iter=4, history_size=2)
    closure = lstsq_closure(opt, x, a, b)([])
    opt.step(closure)
    saved = opt.state_dict()
    before = [v.numpy() for v in saved["state"][0]["old_dirs"]]
    assert len(before) == 2
    opt.step(closure)                 # the history is full: its vectors are rewritten in place
    for v, kept in zip(saved["state"][0]["old_dirs"], before):
        np.testing.assert_array_equal(v.numpy(), kept)
    other = optim.LBFGS([ac.zeros(a.shape[1] + 1, requires_grad=True)])
    with pytest.raises(ac.ShapeError, match="parameters have 9 elements"):
        other.load_state_dict(saved)
    assert not other.state


# ---- memory: many steps inside ac.checkpoint() --------------------------------------

def mlp_and_data(seed):
    ac.manual_seed(seed)
    model = ac.nn.Sequential(ac.nn.Linear(6, 12), ac.nn.Tanh(), ac.nn.Linear(12, 2))
    rng = np.random.default_rng(seed)
    x = ac.tensor(rng.standard_normal((16, 6)).astype(np.float32))
    y = ac.tensor(rng.standard_normal((16, 2)).astype(np.float32))
    return model, x, y


@pytest.mark.parametrize("make", [
    lambda params: optim.Adadelta(params),
    lambda params: optim.RMSprop(params, lr=0.001, momentum=0.9, centered=True),
    lambda params: optim.Adagrad(params, lr=0.05),
    lambda params: optim.LBFGS(params, lr=0.1, max_iter=3, history_size=3),
    lambda params: optim.LBFGS(params, max_iter=3, history_size=3, line_search_fn="strong_wolfe"),
], ids=["adadelta", "rmsprop", "adagrad", "lbfgs", "lbfgs-wolfe"])
def test_steps_inside_checkpoint_keep_memory_flat(make):
    model, x, y = mlp_and_data(seed=9)
    opt, loss_fn = make(model.parameters()), ac.nn.MSELoss()

    def closure():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    def train_step():
        with ac.checkpoint():
            return opt.step(closure).item()

    first = [train_step() for _ in range(5)]
    start = ac.memory_stats()
    in_use = set()
    for _ in range(60):
        last = train_step()
        in_use.add(ac.memory_stats()["bytes_in_use"])
    end = ac.memory_stats()
    assert in_use == {start["bytes_in_use"]}
    assert end["heap_allocations"] == start["heap_allocations"]
    assert end["live_tensors"] == start["live_tensors"]
    assert last < first[0]
    for value in opt.state[model[0].weight].values():
        if isinstance(value, ac.Tensor):
            value.numpy()                         # root state, alive after every scope ended


# ---- bad arguments -------------------------------------------------------------

def test_bad_options_raise_like_pytorch():
    p = ac.zeros(2, requires_grad=True)
    bad = [
        (optim.Adadelta, dict(lr=-1.0), "learning rate"),
        (optim.Adadelta, dict(rho=1.5), "rho"),
        (optim.Adadelta, dict(rho=-0.1), "rho"),
        (optim.Adadelta, dict(eps=-1e-6), "epsilon"),
        (optim.Adadelta, dict(weight_decay=-1), "weight_decay"),
        (optim.RMSprop, dict(lr=float("nan")), "learning rate"),
        (optim.RMSprop, dict(eps=-1.0), "epsilon"),
        (optim.RMSprop, dict(momentum=-0.9), "momentum"),
        (optim.RMSprop, dict(weight_decay=-0.1), "weight_decay"),
        (optim.RMSprop, dict(alpha=-0.5), "alpha"),
        (optim.Adagrad, dict(lr=-0.1), "learning rate"),
        (optim.Adagrad, dict(lr_decay=-1), "lr_decay"),
        (optim.Adagrad, dict(weight_decay=-1), "weight_decay"),
        (optim.Adagrad, dict(initial_accumulator_value=-1), "initial_accumulator_value"),
        (optim.Adagrad, dict(eps=-1), "epsilon"),
        (optim.LBFGS, dict(lr=-1), "learning rate"),
        (optim.LBFGS, dict(line_search_fn="backtracking"), "strong_wolfe"),
        (optim.LBFGS, dict(history_size=0), "history_size"),
        (optim.LBFGS, dict(max_iter=2.5), "max_iter"),
    ]
    for cls, options, message in bad:
        with pytest.raises(ValueError, match=message):
            cls([p], **options)
    with pytest.raises(ValueError, match="rho"):
        optim.Adadelta([p]).add_param_group({"params": [ac.zeros(1, requires_grad=True)], "rho": 2})
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.RMSprop(p)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.Adagrad([p * 2])


def test_lbfgs_refuses_groups_and_a_missing_closure():
    a, b = ac.zeros(2, requires_grad=True), ac.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = optim.LBFGS([a])
    with pytest.raises(TypeError):
        opt.step()
    with pytest.raises(TypeError, match="closure"):
        opt.step(None)
    opt.add_param_group({"params": [b]})
    with pytest.raises(ValueError, match="parameter groups"):
        opt.step(lambda: 0.0)


def test_state_of_the_wrong_shape_is_refused_and_nothing_changes():
    p = ac.zeros(3, requires_grad=True)
    source = optim.RMSprop([p], momentum=0.5)
    set_grad(p, np.ones(3, np.float32))
    source.step()
    saved = source.state_dict()
    target = optim.RMSprop([ac.zeros(4, requires_grad=True)], lr=0.5, momentum=0.5)
    with pytest.raises(ac.ShapeError, match="square_avg"):
        target.load_state_dict(saved)
    assert target.param_groups[0]["lr"] == 0.5 and not target.state
