"""Compiled steps follow every change a user makes to an optimizer or a module
between calls: load_state_dict (another lr, a rewind to an older checkpoint), a
param group added, an option other than lr set, a parameter replaced after the
first compiled call, a model quantized in place after compiling. Each is compared
with the same eager calls step by step, with the replay and the mlir backends
(mlir skips without its tools). Optimizers that a graph cannot replay (Adagrad)
run eagerly with a warning instead of skipping their update, and out-of-range
state dicts are refused at load_state_dict."""
import warnings

import numpy as np
import pytest

import aicraft as ac
from aicraft import _mlir, nn, optim

MISSING = _mlir.missing_tool()
BACKENDS = ["replay", pytest.param("mlir", marks=pytest.mark.skipif(MISSING is not None, reason=MISSING or ""))]
OPTIMIZERS = {
    "SGD": lambda params: optim.SGD(params, lr=0.05, momentum=0.9),
    "Adam": lambda params: optim.Adam(params, lr=0.01),
}


def close(backend):
    return dict(rtol=0, atol=0) if backend == "replay" else dict(rtol=1e-5, atol=1e-5)


class Run:
    """A model, an optimizer and a training step, eager or compiled, made the same way."""

    def __init__(self, backend, opt_name, compiled):
        ac.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        self.opt = OPTIMIZERS[opt_name](self.model.parameters())
        rng = np.random.default_rng(1)
        self.x = ac.tensor(rng.standard_normal((5, 3)).astype(np.float32))
        self.y = ac.tensor(rng.standard_normal((5, 2)).astype(np.float32))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # an mlir graph that falls back to replay warns
            self.step = ac.compile(self._step, backend=backend) if compiled else self._step

    def _step(self, x, y):
        self.opt.zero_grad()
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        self.opt.step()
        return loss

    def __call__(self):
        with ac.checkpoint():
            return self.step(self.x, self.y).item()

    def weights(self):
        return [p.numpy() for p in self.model.parameters()]


def lockstep(backend, opt_name, plan):
    """Run plan (a list of "step" or functions of a Run) on an eager and a compiled
    Run, comparing losses and weights after every entry."""
    eager, compiled = Run(backend, opt_name, False), Run(backend, opt_name, True)
    for i, what in enumerate(plan):
        if what == "step":
            a, b = eager(), compiled()
            np.testing.assert_allclose(b, a, **close(backend), err_msg="loss at entry %d" % i)
        else:
            what(eager)
            what(compiled)
        for wa, wb in zip(eager.weights(), compiled.weights()):
            np.testing.assert_allclose(wb, wa, **close(backend), err_msg="weights after entry %d" % i)
    return eager, compiled


def set_lr_by_state_dict(run):
    sd = run.opt.state_dict()
    for group in sd["param_groups"]:
        group["lr"] = 0.2
    run.opt.load_state_dict(sd)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_compiled_step_follows_load_state_dict_with_another_lr(backend, opt_name):
    eager, compiled = lockstep(backend, opt_name, ["step"] * 3 + [set_lr_by_state_dict] + ["step"] * 3)
    if opt_name == "Adam":
        for p, q in zip(compiled.model.parameters(), eager.model.parameters()):
            assert compiled.opt.state[p]["step"] == eager.opt.state[q]["step"] == 6


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_compiled_step_follows_a_rewind_to_an_older_checkpoint(backend, opt_name):
    saved = {}

    def save(run):
        saved[id(run)] = (run.opt.state_dict(), run.model.state_dict())

    def rewind(run):
        opt_state, model_state = saved[id(run)]
        run.model.load_state_dict(model_state)
        run.opt.load_state_dict(opt_state)

    eager, compiled = lockstep(backend, opt_name, ["step"] * 2 + [save] + ["step"] * 3 + [rewind] + ["step"] * 3)
    if opt_name == "Adam":
        for p, q in zip(compiled.model.parameters(), eager.model.parameters()):
            assert compiled.opt.state[p]["step"] == eager.opt.state[q]["step"] == 5


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_compiled_step_follows_a_param_group_added(backend, opt_name):
    def add_head(run):
        head = run.model[2]
        run.opt.param_groups[0]["params"] = [p for p in run.opt.param_groups[0]["params"]
                                             if all(p is not q for q in head.parameters())]
        run.opt.add_param_group({"params": list(head.parameters()), "lr": 0.3})

    def freeze_head_start(run):   # the head's parameters start in no group: only the body steps
        head = run.model[2]
        run.opt.param_groups[0]["params"] = [p for p in run.opt.param_groups[0]["params"]
                                             if all(p is not q for q in head.parameters())]

    lockstep(backend, opt_name, [freeze_head_start] + ["step"] * 2 + [add_head] + ["step"] * 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_compiled_step_follows_options_other_than_lr(backend, opt_name):
    def change(run):
        for group in run.opt.param_groups:
            if opt_name == "Adam":
                group["betas"] = (0.5, 0.9)
                group["weight_decay"] = 0.1
            else:
                group["momentum"] = 0.5
                group["weight_decay"] = 0.1

    lockstep(backend, opt_name, ["step"] * 2 + [change] + ["step"] * 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_compiled_step_follows_a_parameter_replaced(backend, opt_name):
    def replace(run):
        layer = run.model[0]
        new = nn.Parameter(ac.full((4, 3), 0.25))
        run.opt.param_groups[0]["params"] = [new if p is layer.weight else p
                                             for p in run.opt.param_groups[0]["params"]]
        run.opt.state.pop(layer.weight, None)
        layer.weight = new

    lockstep(backend, opt_name, ["step"] * 2 + [replace] + ["step"] * 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_module_follows_a_parameter_replaced_after_its_first_call(backend):
    ac.manual_seed(0)
    m = nn.Linear(3, 2)
    f = ac.compile(m, backend=backend)
    x = ac.randn(4, 3)
    with ac.no_grad():
        np.testing.assert_allclose(f(x).numpy(), m(x).numpy(), **close(backend))
        m.weight = nn.Parameter(ac.ones(2, 3))
        m.bias = nn.Parameter(ac.zeros(2))
        expected = x.numpy().sum(axis=1, keepdims=True).repeat(2, axis=1)
        np.testing.assert_allclose(f(x).numpy(), expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(f(x).numpy(), m(x).numpy(), **close(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_module_follows_a_submodule_deleted_or_swapped(backend):
    ac.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    f = ac.compile(m, backend=backend)
    x = ac.randn(4, 3)
    with ac.no_grad():
        f(x)
        m[1] = nn.Tanh()
        np.testing.assert_allclose(f(x).numpy(), np.tanh(m[0](x).numpy()), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_model_follows_quantization_in_place(backend):
    ac.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    m.eval()
    f = ac.compile(m, backend=backend)
    x = ac.randn(5, 8)
    with ac.no_grad():
        before = f(x).numpy()
        ac.quantization.quantize_dynamic(m, inplace=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # a quantized layer a graph cannot hold runs eagerly
            got = f(x).numpy()
        expected = m(x).numpy()
    assert isinstance(m[0], nn.quantized.dynamic.Linear)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert not np.array_equal(got, before)   # int8 weights: not the float result


def test_compiled_step_that_replaces_nothing_keeps_replaying():
    run = Run("replay", "Adam", True)
    for _ in range(5):
        run()
    graphs = dict(run.step._graphs)
    for _ in range(3):
        run()
    assert run.step._graphs == graphs   # no new recording without a change


@pytest.mark.parametrize("name", ["Adagrad", "RMSprop", "Adadelta"])
def test_compiled_step_with_an_optimizer_a_graph_cannot_replay_runs_eagerly(name):
    def make(compiled):
        ac.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = getattr(optim, name)(m.parameters(), lr=0.1)
        x, y = ac.randn(4, 3), ac.randn(4, 2)

        def step(x, y):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return m, (ac.compile(step) if compiled else step), x, y

    me, fe, x, y = make(False)
    mc, fc, xc, yc = make(True)
    with pytest.warns(UserWarning, match="cannot be recorded"):
        fc(xc, yc)
    fe(x, y)
    for _ in range(3):
        assert fc(xc, yc).item() == fe(x, y).item()
    np.testing.assert_array_equal(mc.weight.numpy(), me.weight.numpy())


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("change", [
    lambda sd: sd["param_groups"][0].__setitem__("lr", 10 ** 400),
    lambda sd: sd["param_groups"][0].__setitem__("weight_decay", -(10 ** 400)),
    lambda sd: [entries.__setitem__("step", 2 ** 70) for entries in sd["state"].values()],
    lambda sd: [entries.__setitem__("step", -1) for entries in sd["state"].values()],
    lambda sd: [entries.__setitem__("step", "three") for entries in sd["state"].values()],
    lambda sd: sd.pop("param_groups"),
    lambda sd: sd["param_groups"][0].pop("params"),
    lambda sd: sd["param_groups"][0].pop("lr"),
    lambda sd: sd["state"].__setitem__(0, [1, 2]),
], ids=["lr-huge", "wd-huge", "step-2**70", "step-negative", "step-str", "no-groups", "no-params",
        "no-lr", "state-not-dict"])
def test_load_state_dict_refuses_values_out_of_range_and_changes_nothing(opt_name, change):
    run = Run("replay", opt_name, False)
    run()
    sd = run.opt.state_dict()
    before = run.opt.state_dict()
    change(sd)
    with pytest.raises(ValueError):
        run.opt.load_state_dict(sd)
    assert repr(run.opt.state_dict()["param_groups"]) == repr(before["param_groups"])
    run()   # still usable


def test_optimizer_refuses_an_lr_out_of_a_doubles_range():
    with pytest.raises(ValueError):
        optim.Adam(nn.Linear(2, 2).parameters(), lr=10 ** 400)
    opt = optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(ValueError):
        opt.add_param_group({"params": [nn.Parameter(ac.zeros(2))], "lr": 10 ** 400})
