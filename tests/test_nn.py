"""aicraft.nn: Module registration and traversal, state_dict / load_state_dict,
modes, zero_grad, containers, repr, layers and losses against NumPy float64,
initialisers' distributions, gradient clipping against NumPy, and a short
training run."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn
from conftest import check_gradients

rng = np.random.default_rng(5)


class Block(nn.Module):
    """A module with a parameter, a child, a persistent and a transient buffer."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(ac.ones(3))
        self.fc = nn.Linear(3, 2)
        self.register_buffer("count", ac.zeros(1))
        self.register_buffer("scratch", ac.zeros(2), persistent=False)
        self.note = ac.zeros(4)          # a plain tensor attribute: not registered

    def forward(self, x):
        return self.fc(x * self.scale)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.layers = nn.ModuleList([nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1)])
        self.head_bias = nn.Parameter(ac.zeros(1))

    def forward(self, x):
        x = self.first(x)
        for layer in self.layers:
            x = layer(x)
        return x + self.head_bias


# ---- registration and traversal ----------------------------------------------------

def test_parameters_register_on_attribute_set_in_order():
    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["head_bias", "first.scale", "first.fc.weight", "first.fc.bias",
                     "layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert len(list(net.parameters())) == 8
    assert [n for n, _ in net.first.named_parameters(recurse=False)] == ["scale"]
    assert "note" not in dict(net.first.named_parameters())
    assert [n for n, _ in net.named_buffers()] == ["first.count", "first.scratch"]


def test_children_and_modules():
    net = Net()
    assert [n for n, _ in net.named_children()] == ["first", "layers"]
    assert list(net.children()) == [net.first, net.layers]
    kinds = [type(m).__name__ for m in net.modules()]
    assert kinds == ["Net", "Block", "Linear", "ModuleList", "Linear", "ReLU", "Linear"]
    assert [n for n, _ in net.named_modules()][:3] == ["", "first", "first.fc"]


def test_shared_parameter_is_listed_once():
    shared = nn.Linear(3, 3)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(model.parameters())) == 2
    assert len(list(model.modules())) == 3
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_assignment_rules():
    block = Block()
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        block.scale = ac.ones(3)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'fc'"):
        block.fc = 3
    block.scale = None                           # an absent parameter, as bias=False
    assert "scale" not in dict(block.named_parameters())
    block.fc = nn.Parameter(ac.ones(2))          # a parameter replaces the child module
    assert "fc" not in dict(block.named_children())
    del block.fc
    assert not hasattr(block, "fc")

    class TooEarly(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ac.ones(1))
            super().__init__()

    with pytest.raises(AttributeError, match="super\\(\\).__init__"):
        TooEarly()


def test_parameter_made_in_a_scope_lives_at_root():
    with ac.checkpoint():
        p = nn.Parameter(ac.randn(3, 2))
        layer = nn.Linear(2, 2)
    assert p.shape == (3, 2) and p.requires_grad
    assert layer(ac.ones(1, 2)).shape == (1, 2)    # no ScopeError: the weights are at root


def test_parameter_shares_memory_with_root_data_and_mixes_with_tensors():
    data = ac.zeros(3)
    p = nn.Parameter(data)
    with ac.no_grad():
        data.fill_(2.0)
    np.testing.assert_array_equal(p.numpy(), [2, 2, 2])
    x = ac.ones(3)
    for value in (x + p, p + x, x * p, x.sub(p), p * 2.0, 1.0 - p):
        assert value.shape == (3,) and value.requires_grad
    frozen = nn.Parameter(ac.ones(2), requires_grad=False)
    assert not frozen.requires_grad
    assert repr(frozen).startswith("Parameter containing:\ntensor(")


# ---- state_dict ----------------------------------------------------------------------

def test_state_dict_keys_include_persistent_buffers():
    net = Net()
    keys = list(net.state_dict())
    assert keys == ["head_bias", "first.scale", "first.count", "first.fc.weight", "first.fc.bias",
                    "layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias"]
    state = net.state_dict()
    assert not state["first.scale"].requires_grad
    with ac.no_grad():
        net.first.scale.fill_(5.0)
    np.testing.assert_array_equal(state["first.scale"].numpy(), [5, 5, 5])   # shares memory
    assert net.state_dict(keep_vars=True)["first.scale"] is net.first.scale


def test_load_state_dict_round_trip_copies_in_place():
    src, dst = Net(), Net()
    weight = dst.first.fc.weight
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dst.first.fc.weight is weight                       # same object, new values
    for (name, a), (_, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    x = ac.tensor(rng.standard_normal((4, 3)))
    np.testing.assert_array_equal(src(x).numpy(), dst(x).numpy())


def test_load_state_dict_accepts_numpy_arrays():
    layer = nn.Linear(2, 2)
    layer.load_state_dict({"weight": np.eye(2), "bias": np.array([1.0, -1.0])})
    np.testing.assert_array_equal(layer.weight.numpy(), np.eye(2))
    np.testing.assert_array_equal(layer.bias.numpy(), [1, -1])


def test_load_state_dict_strict_and_non_strict_keys():
    net = Net()
    state = net.state_dict()
    before = net.first.scale.numpy()
    partial = OrderedDict((k, v) for k, v in state.items() if k != "head_bias")
    partial["extra.weight"] = ac.zeros(1)
    partial["first.scale"] = ac.full((3,), 7.0)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(partial)
    message = str(info.value)
    assert 'Missing key(s) in state_dict: "head_bias"' in message
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in message
    np.testing.assert_array_equal(net.first.scale.numpy(), before)   # nothing was copied
    result = net.load_state_dict(partial, strict=False)
    assert result == (["head_bias"], ["extra.weight"])
    assert result.missing_keys == ["head_bias"]
    np.testing.assert_array_equal(net.first.scale.numpy(), [7, 7, 7])


def test_load_state_dict_shape_mismatch_raises_even_when_not_strict():
    layer = nn.Linear(3, 2)
    before = layer.weight.numpy()
    bad = {"weight": ac.zeros(2, 4), "bias": ac.zeros(2)}
    for strict in (True, False):
        with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with "
                                               r"shape \(2, 4\) from checkpoint, the shape in "
                                               r"current model is \(2, 3\)"):
            layer.load_state_dict(bad, strict=strict)
    np.testing.assert_array_equal(layer.weight.numpy(), before)
    with pytest.raises(TypeError):
        layer.load_state_dict({"weight": [[1, 2, 3]] * 2, "bias": ac.zeros(2)})


# ---- modes, gradients, containers, repr ---------------------------------------------

def test_train_and_eval_reach_every_module():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.layers.train(False)
    assert net.training and not net.layers[0].training


def test_zero_grad():
    layer = nn.Linear(3, 2)
    layer(ac.ones(4, 3)).sum().backward()
    assert layer.weight.grad is not None
    layer.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(layer.weight.grad.numpy(), np.zeros((2, 3)))
    layer.zero_grad()
    assert layer.weight.grad is None and layer.bias.grad is None


def test_sequential_indexing_and_iteration():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    model = nn.Sequential(a, b, c)
    assert len(model) == 3
    assert model[0] is a and model[-1] is c and list(model) == [a, b, c]
    head = model[:2]
    assert isinstance(head, nn.Sequential) and list(head) == [a, b]
    with pytest.raises(IndexError):
        model[3]
    x = ac.tensor(rng.standard_normal((5, 2)))
    np.testing.assert_allclose(model(x).numpy(), c(b(a(x))).numpy())
    model.append(nn.Sigmoid())
    assert len(model) == 4 and [n for n, _ in model.named_children()] == ["0", "1", "2", "3"]
    named = nn.Sequential(OrderedDict([("fc", a), ("act", b)]))
    assert named.fc is a and list(named.state_dict()) == ["fc.weight", "fc.bias"]


def test_module_list():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
    layers.append(nn.Tanh())
    layers.insert(0, nn.Identity())
    assert len(layers) == 4 and isinstance(layers[0], nn.Identity) and isinstance(layers[-1], nn.Tanh)
    assert [n for n, _ in layers.named_parameters()] == ["1.weight", "1.bias", "2.weight", "2.bias"]
    del layers[0]
    assert [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_repr_like_pytorch():
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10, bias=False),
                          nn.Softmax(dim=1))
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Linear(in_features=784, out_features=128, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Linear(in_features=128, out_features=10, bias=False)\n"
        "  (3): Softmax(dim=1)\n"
        ")")
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert repr(nn.CrossEntropyLoss(label_smoothing=0.1)) == "CrossEntropyLoss(label_smoothing=0.1)"


def test_forward_is_required():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(ac.ones(1))


# ---- layers against NumPy ------------------------------------------------------------

def np_softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


@pytest.mark.parametrize("layer, reference", [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.GELU(), lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
    (nn.Softmax(dim=1), lambda x: np_softmax(x, 1)),
    (nn.Softmax(dim=0), lambda x: np_softmax(x, 0)),
    (nn.LogSoftmax(dim=-1), lambda x: np.log(np_softmax(x, -1))),
    (nn.Identity(54, unused=1), lambda x: x),
])
def test_activation_layers(layer, reference):
    x = rng.standard_normal((4, 5))
    out = check_gradients(layer, reference, [x], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(out.numpy(), reference(x.astype(np.float32).astype(np.float64)),
                               rtol=1e-5, atol=1e-6)


def test_flatten():
    x = ac.tensor(rng.standard_normal((2, 3, 4, 5)))
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
    assert nn.Flatten(start_dim=2)(x).shape == (2, 3, 20)
    np.testing.assert_array_equal(nn.Flatten()(x).numpy(), x.numpy().reshape(2, 60))


# ---- losses against NumPy -------------------------------------------------------------

def np_reduce(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](loss)


def np_log_softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def np_nll(logp, target, reduction, weight=None, ignore_index=-100):
    target = np.asarray(target).astype(np.int64)
    weight = np.ones(logp.shape[1]) if weight is None else weight
    kept = target != ignore_index
    safe = np.where(kept, target, 0)
    w = np.where(kept, weight[safe], 0.0)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1).squeeze(1)
    loss = -w * picked
    if reduction == "mean":
        return loss.sum() / w.sum()
    return np_reduce(loss, reduction)


def np_cross_entropy(x, target, reduction, smoothing=0.0):
    logp = np_log_softmax(x, 1)
    nll = -np.take_along_axis(logp, target.astype(np.int64)[:, None], axis=1)[:, 0]
    return np_reduce((1 - smoothing) * nll - smoothing * logp.mean(axis=1), reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    check_gradients(lambda a: nn.MSELoss(reduction=reduction)(a, ac.tensor(t)),
                    lambda a: np_reduce((a - t.astype(np.float32)) ** 2, reduction), [x])


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_loss_with_label_smoothing(reduction, smoothing):
    x = rng.standard_normal((6, 4)) * 3
    target = rng.integers(0, 4, 6).astype(np.float64)
    loss_fn = nn.CrossEntropyLoss(reduction=reduction, label_smoothing=smoothing)
    check_gradients(lambda a: loss_fn(a, ac.tensor(target)),
                    lambda a: np_cross_entropy(a, target, reduction, smoothing), [x],
                    rtol=1e-3, atol=1e-5)
    out = F.cross_entropy(ac.tensor(x), ac.tensor(target), reduction=reduction,
                          label_smoothing=smoothing)
    np.testing.assert_allclose(out.numpy(), np_cross_entropy(x.astype(np.float32).astype(np.float64),
                                                             target, reduction, smoothing),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
    logp = np_log_softmax(rng.standard_normal((5, 3)))
    target = np.array([0, 2, 1, 1, 2])
    check_gradients(lambda a: nn.NLLLoss(reduction=reduction)(a, ac.tensor(target)),
                    lambda a: np_nll(a, target, reduction), [logp])


def test_nll_loss_with_weight_and_ignore_index():
    logp = np_log_softmax(rng.standard_normal((6, 4)))
    target = np.array([0, 3, -100, 1, 3, 2])
    weight = np.array([1.0, 2.0, 0.5, 3.0])
    for reduction in ("mean", "sum", "none"):
        loss_fn = nn.NLLLoss(weight=ac.tensor(weight), reduction=reduction)
        check_gradients(lambda a: loss_fn(a, target),
                        lambda a: np_nll(a, target, reduction, weight.astype(np.float32)), [logp])
    assert "weight" in nn.NLLLoss(weight=ac.tensor(weight)).state_dict()
    got = F.nll_loss(ac.tensor(logp), ac.tensor(target.clip(0)), ignore_index=3)
    np.testing.assert_allclose(got.item(), np_nll(logp, target.clip(0), "mean", ignore_index=3),
                               rtol=1e-5)
    # through cross_entropy (log_softmax then nll_loss when ignore_index is set)
    x = rng.standard_normal((6, 4))
    got = F.cross_entropy(ac.tensor(x), ac.tensor(target.clip(0)), ignore_index=3)
    np.testing.assert_allclose(got.item(), np_nll(np_log_softmax(x), target.clip(0), "mean",
                                                  ignore_index=3), rtol=1e-5)


def test_nll_loss_bad_targets():
    logp = ac.zeros(3, 4)
    with pytest.raises(IndexError, match="nll_loss: target 4 at position 1 is not a class index in"):
        F.nll_loss(logp, [0, 4, 1])
    with pytest.raises(IndexError, match="not a class index"):
        F.nll_loss(logp, [0, 1.5, 1])
    with pytest.raises(ac.ShapeError, match="nll_loss: target"):
        F.nll_loss(logp, [0, 1])
    assert F.cross_entropy(logp, [0, 1, 2], ignore_index=1, label_smoothing=0.1).shape == ()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_losses(reduction):
    p = rng.uniform(0.05, 0.95, (3, 4))
    logits = rng.standard_normal((3, 4)) * 2
    t = rng.uniform(0, 1, (3, 4))
    t32 = t.astype(np.float32).astype(np.float64)
    check_gradients(lambda a: nn.BCELoss(reduction=reduction)(a, ac.tensor(t)),
                    lambda a: np_reduce(-(t32 * np.log(a) + (1 - t32) * np.log1p(-a)), reduction),
                    [p], rtol=1e-3)
    check_gradients(lambda a: nn.BCEWithLogitsLoss(reduction=reduction)(a, ac.tensor(t)),
                    lambda a: np_reduce(np.maximum(a, 0) - a * t32 + np.log1p(np.exp(-np.abs(a))),
                                        reduction), [logits], rtol=1e-3)


def test_loss_options_are_checked():
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        nn.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(ValueError, match="reduction"):
        F.binary_cross_entropy_with_logits(ac.zeros(2), ac.zeros(2), pos_weight=ac.ones(2),
                                           reduction="avg")


# ---- init ------------------------------------------------------------------------------

def test_calculate_gain():
    assert nn.init.calculate_gain("linear") == 1.0
    assert nn.init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert nn.init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert nn.init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    with pytest.raises(ValueError):
        nn.init.calculate_gain("swish")


def uniform_ok(values, bound):
    """All inside [-bound, bound), mean near 0, variance near bound^2 / 3."""
    n = values.size
    assert values.min() >= -bound and values.max() < bound
    assert values.max() > 0.95 * bound and values.min() < -0.95 * bound
    assert abs(values.mean()) < 4 * bound / math.sqrt(3 * n)
    assert values.var() == pytest.approx(bound ** 2 / 3, rel=0.05)


def normal_ok(values, std):
    n = values.size
    assert abs(values.mean()) < 4 * std / math.sqrt(n)
    assert values.std() == pytest.approx(std, rel=0.05)


def test_uniform_initialisers():
    ac.manual_seed(0)
    w = ac.zeros(200, 300)
    assert nn.init.kaiming_uniform_(w, a=math.sqrt(5)) is w
    uniform_ok(w.numpy(), 1 / math.sqrt(300))
    uniform_ok(nn.init.kaiming_uniform_(w, nonlinearity="relu").numpy(), math.sqrt(6 / 300))
    uniform_ok(nn.init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu").numpy(),
               math.sqrt(6 / 200))
    uniform_ok(nn.init.xavier_uniform_(w).numpy(), math.sqrt(6 / 500))
    uniform_ok(nn.init.xavier_uniform_(w, gain=2.0).numpy(), 2 * math.sqrt(6 / 500))
    values = nn.init.uniform_(w, -2.0, 3.0).numpy()
    assert values.min() >= -2 and values.max() < 3 and values.mean() == pytest.approx(0.5, abs=0.02)


def test_normal_initialisers():
    ac.manual_seed(1)
    w = ac.zeros(200, 300)
    normal_ok(nn.init.kaiming_normal_(w, nonlinearity="relu").numpy(), math.sqrt(2 / 300))
    normal_ok(nn.init.xavier_normal_(w).numpy(), math.sqrt(2 / 500))
    values = nn.init.normal_(w, 1.0, 0.5).numpy()
    assert values.mean() == pytest.approx(1.0, abs=0.01) and values.std() == pytest.approx(0.5, rel=0.02)


def test_constant_initialisers():
    w = ac.randn(3, 4)
    np.testing.assert_array_equal(nn.init.zeros_(w).numpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(nn.init.ones_(w).numpy(), np.ones((3, 4)))
    np.testing.assert_array_equal(nn.init.constant_(w, 0.25).numpy(), np.full((3, 4), 0.25))
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(ac.zeros(5))
    with pytest.raises(ValueError, match="mode"):
        nn.init.kaiming_normal_(w, mode="fan_avg")


def test_linear_default_init_is_pytorch_s():
    ac.manual_seed(2)
    layer = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    uniform_ok(layer.weight.numpy(), bound)
    b = layer.bias.numpy()
    assert b.min() >= -bound and b.max() < bound and b.std() > 0.4 * bound
    ac.manual_seed(2)
    again = nn.Linear(400, 300)
    np.testing.assert_array_equal(again.weight.numpy(), layer.weight.numpy())   # seeded


# ---- gradient clipping ----------------------------------------------------------------

def params_with_grads(grads):
    params = []
    for g in grads:
        p = nn.Parameter(ac.zeros(*g.shape))
        (p * ac.tensor(g)).sum().backward()
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_matches_numpy(norm_type):
    grads = [rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    flat = np.concatenate([g.ravel() for g in grads]).astype(np.float64)
    total = np.abs(flat).max() if norm_type == math.inf else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    params = params_with_grads(grads)
    got = nn.utils.clip_grad_norm_(params, max_norm=0.5, norm_type=norm_type)
    assert got.item() == pytest.approx(total, rel=1e-5)
    coef = 0.5 / (total + 1e-6)
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-5, atol=1e-7)
    # under the limit: unchanged
    params = params_with_grads(grads)
    nn.utils.clip_grad_norm_(params, max_norm=total * 2, norm_type=norm_type)
    for p, g in zip(params, grads):
        np.testing.assert_array_equal(p.grad.numpy(), g)



@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_matches_torch_over_many_chunks(norm_type):
    torch = pytest.importorskip("torch")
    shapes = [(300, 250), (40000,), (3, 7)]   # more than one chunk of the kernel's sums
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    params = params_with_grads(grads)
    torch_params = [torch.zeros(s, requires_grad=True) for s in shapes]
    for p, g in zip(torch_params, grads):
        p.grad = torch.from_numpy(g.copy())
    got = nn.utils.clip_grad_norm_(params, 0.25, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(torch_params, 0.25, norm_type)
    assert got.item() == pytest.approx(expected.item(), rel=1e-5)
    for p, tp in zip(params, torch_params):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-9)


def test_get_total_norm_as_torch_and_same_for_thread_counts():
    torch = pytest.importorskip("torch")
    from thread_counts import assert_same_for_thread_counts
    arrays = [rng.standard_normal((1000, 101)).astype(np.float32), rng.standard_normal(9).astype(np.float32)]
    for norm_type in (2.0, 1.0, 2.5, math.inf, "inf"):
        expected = torch.nn.utils.get_total_norm([torch.from_numpy(a) for a in arrays], norm_type)
        got = assert_same_for_thread_counts(
            lambda: [nn.utils.get_total_norm([ac.tensor(a) for a in arrays], norm_type).item()])
        assert got[0] == pytest.approx(expected.item(), rel=1e-5)
    assert nn.utils.get_total_norm(ac.tensor([3.0, -4.0])).item() == 5.0
    assert nn.utils.get_total_norm([]).item() == 0.0


def test_clip_grads_with_norm_as_torch():
    torch = pytest.importorskip("torch")
    grads = [rng.standard_normal((300, 70)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    for total in (0.5, 40.0, float("nan"), float("inf")):
        params = params_with_grads(grads)
        torch_params = [torch.zeros(g.shape, requires_grad=True) for g in grads]
        for p, g in zip(torch_params, grads):
            p.grad = torch.from_numpy(g.copy())
        nn.utils.clip_grads_with_norm_(params, 2.0, ac.tensor(total) if total == 40.0 else total)
        torch.nn.utils.clip_grads_with_norm_(torch_params, 2.0, torch.tensor(total))
        for p, tp in zip(params, torch_params):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="max_norm and total_norm must be numbers"):
        nn.utils.clip_grads_with_norm_(params, None, 1.0)
    with pytest.raises(TypeError, match="parameters must be tensors"):
        nn.utils.clip_grads_with_norm_([1.0], 1.0, 1.0)
    nn.utils.clip_grads_with_norm_([nn.Parameter(ac.zeros(2))], 1.0, 5.0)   # no grads: nothing to do


def test_get_total_norm_bad_inputs():
    t = ac.tensor([1.0, np.nan])
    assert math.isnan(nn.utils.get_total_norm([t]).item())
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.get_total_norm([t], error_if_nonfinite=True)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="norm_type must be > 0"):
            nn.utils.get_total_norm([t], bad)
    with pytest.raises(TypeError, match="norm_type must be a number"):
        nn.utils.get_total_norm([t], "two")
    with pytest.raises(TypeError, match="tensors must be tensors"):
        nn.utils.get_total_norm([t, [1.0]])
    with pytest.raises(TypeError, match="parameters must be tensors"):
        nn.utils.clip_grad_norm_([np.ones(2)], 1.0)
    ids = ac.tensor(np.arange(3))   # int64
    with pytest.raises((TypeError, ValueError)):
        nn.utils.get_total_norm([ids])
    assert nn.utils.get_total_norm([ac.tensor([6.0, 8.0])]).item() == 10.0   # still usable

def test_clip_grad_value():
    g = rng.standard_normal((3, 4)).astype(np.float32) * 2
    (p,) = params_with_grads([g])
    nn.utils.clip_grad_value_(p, 0.7)
    np.testing.assert_array_equal(p.grad.numpy(), np.clip(g, -0.7, 0.7))
    nn.utils.clip_grad_value_([nn.Parameter(ac.zeros(2))], 1.0)      # no grad: nothing to do


def test_clip_grad_norm_nonfinite():
    (p,) = params_with_grads([np.array([np.inf, 1.0], np.float32)])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


# ---- training --------------------------------------------------------------------------

def test_tiny_mlp_learns_a_separable_problem_without_leaking():
    """Two interleaved classes (by the sign of x0 * x1), learnt by SGD in scopes."""
    data_rng = np.random.default_rng(0)
    x = data_rng.uniform(-1, 1, (256, 2)).astype(np.float32)
    y = (x[:, 0] * x[:, 1] > 0).astype(np.float32)
    ac.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 2))
    loss_fn = nn.CrossEntropyLoss()
    inputs, targets = ac.tensor(x), ac.tensor(y)
    losses, lr = [], 1.0
    before = None
    for step in range(300):
        if step == 10:
            before = ac.memory_stats()
        with ac.checkpoint():
            loss = loss_fn(model(inputs), targets)
            model.zero_grad()
            loss.backward()
            with ac.no_grad():
                for p in model.parameters():
                    p -= p.grad * lr
            losses.append(loss.item())
    after = ac.memory_stats()
    assert losses[-1] < 0.1 < losses[0]
    with ac.no_grad():
        accuracy = (model(inputs).argmax(1).numpy() == y).mean()
    assert accuracy > 0.97
    assert after["bytes_in_use"] == before["bytes_in_use"]
    assert after["live_tensors"] == before["live_tensors"]
