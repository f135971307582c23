"""The activations of aicraft/pointwise.py and nn/activation.py against torch: values
(odd shapes, special values, the boundaries where the formulas switch), gradients,
F.x and nn modules with torch's signatures, inplace forms, and bad inputs."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

NAN, INF = float("nan"), float("inf")
SPECIAL = [NAN, INF, -INF, -0.0, 0.0, -3.0, 3.0, -1.0, 1.0, -0.5, 0.5, 6.0, -6.0, 20.0, 21.0, -20.0,
           1e-20, -1e-20, 1e30, -1e30, 88.0, -88.0, -104.0, 50.0, -50.0]

# name: (F args, tolerance); each runs as F.name(x, *args) on aicraft and torch
ACTS = {
    "silu": ((), 1e-6),
    "leaky_relu": ((0.2,), 0),
    "softplus": ((), 1e-6),
    "softplus_beta": ((2.0, 5.0), 1e-6),
    "elu": ((), 1e-6),
    "elu_alpha": ((0.7,), 1e-6),
    "celu": ((1.5,), 1e-6),
    "selu": ((), 1e-6),
    "gelu_tanh": ((), 1e-6),
    "hardtanh": ((-0.5, 2.0), 0),
    "relu6": ((), 0),
    "mish": ((), 2e-6),
    "hardswish": ((), 1e-6),
    "hardsigmoid": ((), 1e-7),
    "hardshrink": ((0.3,), 0),
    "softshrink": ((0.3,), 1e-7),
    "tanhshrink": ((), 2e-6),
    "softsign": ((), 1e-7),
    "logsigmoid": ((), 1e-6),
    "threshold": ((0.25, -2.0), 0),
    "rrelu": ((0.1, 0.3), 0),
}


def _call(lib_f, name, x, args):
    if name == "gelu_tanh":
        return lib_f.gelu(x, approximate="tanh")
    base = name.split("_beta")[0].split("_alpha")[0]
    return getattr(lib_f, base)(x, *args)


def _draw(shape, seed=0, scale=4.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("name", sorted(ACTS))
def test_activation_values_and_grads_match_torch(name):
    args, tol = ACTS[name]
    x = _draw((5, 7, 3))
    x[0, :5, 0] = [-3.0, 3.0, 0.0, 0.3, -0.3]   # the switching points
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_a, out_t = _call(F, name, a, args), _call(TF, name, t, args)
    np.testing.assert_allclose(out_a.detach().numpy(), out_t.detach().numpy(), rtol=max(tol, 1e-7) * 4,
                               atol=max(tol, 1e-7))
    w = _draw((5, 7, 3), seed=1, scale=1.0)
    (out_a * ac.tensor(w)).sum().backward()
    (out_t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(ACTS))
def test_activation_special_values_match_torch(name):
    args, _ = ACTS[name]
    x = np.array(SPECIAL, np.float32)
    out_a = _call(F, name, ac.tensor(x), args).numpy()
    out_t = _call(TF, name, torch.tensor(x), args).numpy()
    np.testing.assert_allclose(out_a, out_t, rtol=4e-6, atol=1e-6, equal_nan=True)
    assert np.array_equal(np.isnan(out_a), np.isnan(out_t))
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    _call(F, name, a, args).sum().backward()
    _call(TF, name, t, args).sum().backward()
    finite = np.isfinite(x)
    np.testing.assert_allclose(a.grad.numpy()[finite], t.grad.numpy()[finite], rtol=2e-5, atol=1e-6)


def test_activations_refuse_integer_inputs_as_torch():
    for fn in (F.silu, F.leaky_relu, F.softplus, F.elu, F.hardswish, F.mish):
        with pytest.raises(TypeError):
            fn(ac.tensor([1, 2]))
    with pytest.raises(TypeError):
        nn.SiLU()(ac.tensor([1, 2]))


def test_bad_arguments():
    x = ac.zeros(3)
    with pytest.raises(ValueError):
        F.gelu(x, approximate="erf")
    with pytest.raises(ValueError):
        nn.GELU("fast")
    with pytest.raises(ValueError):
        F.hardtanh(x, 2.0, 1.0)
    with pytest.raises(ValueError):
        F.softshrink(x, -1.0)
    with pytest.raises(ValueError):
        F.softplus(x, beta=0)
    with pytest.raises(TypeError):
        F.leaky_relu(x, "0.1")
    with pytest.raises(TypeError):
        F.silu([1.0])
    with pytest.raises(TypeError):
        nn.LeakyReLU()([1.0])
    with pytest.raises(NotImplementedError):
        F.rrelu(x, training=True)
    with pytest.raises(TypeError):
        F.softmax(x, 0, dtype=ac.float64)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_glu_matches_torch(dim):
    x = _draw((4, 6, 2))
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    if x.shape[dim] % 2:
        with pytest.raises(ac.ShapeError):
            F.glu(a, dim)
        return
    out_a, out_t = F.glu(a, dim), TF.glu(t, dim)
    np.testing.assert_allclose(out_a.detach().numpy(), out_t.detach().numpy(), rtol=1e-6, atol=1e-6)
    out_a.sum().backward()
    out_t.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.GLU(dim)(a).detach().numpy(), out_t.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_glu_odd_dim_raises():
    with pytest.raises(ac.ShapeError):
        F.glu(ac.zeros(3, 5))


@pytest.mark.parametrize("shape, n", [((4, 3, 5, 2), 3), ((4, 3), 3), ((4, 3, 5), 1), ((7,), 1)])
def test_prelu_matches_torch(shape, n):
    x = _draw(shape)
    w = np.linspace(0.1, 0.4, n).astype(np.float32)
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    aw, tw = ac.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    out_a, out_t = F.prelu(a, aw), TF.prelu(t, tw)
    np.testing.assert_allclose(out_a.detach().numpy(), out_t.detach().numpy(), rtol=1e-6, atol=1e-7)
    out_a.sum().backward()
    out_t.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(aw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_prelu_module_learns_its_weight():
    m = nn.PReLU(3, init=0.1)
    assert [name for name, _ in m.named_parameters()] == ["weight"]
    assert m.weight.shape == (3,) and np.allclose(m.weight.numpy(), 0.1)
    out = m(ac.tensor(-np.ones((2, 3, 4), np.float32)))
    out.sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), [-8, -8, -8])
    with pytest.raises(ac.ShapeError):
        m(ac.zeros(2, 4))


@pytest.mark.parametrize("dim", [0, 1, -1, None])
def test_softmin_and_softmax_dtype_match_torch(dim):
    x = _draw((3, 4, 5))
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    if dim is None:     # torch's implicit dim for 3-d input: 0 (and a warning)
        out_t = TF.softmin(t, dim=0)
        out_a = F.softmin(a)
    else:
        out_a, out_t = F.softmin(a, dim), TF.softmin(t, dim)
    np.testing.assert_allclose(out_a.detach().numpy(), out_t.detach().numpy(), rtol=1e-5, atol=1e-7)
    (out_a * ac.tensor(x)).sum().backward()
    (out_t * torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)
    d = 0 if dim is None else dim
    np.testing.assert_allclose(F.softmax(ac.tensor(x), d, dtype=ac.float32).numpy(),
                               TF.softmax(torch.tensor(x), d, dtype=torch.float32).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(F.log_softmax(ac.tensor(x), dim=d, dtype=ac.float32).numpy(),
                               TF.log_softmax(torch.tensor(x), dim=d).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ac.tensor(x).softmax(d, dtype=ac.float32).numpy(),
                               torch.tensor(x).softmax(d).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(nn.Softmin(d)(ac.tensor(x)).numpy(), out_t.detach().numpy(), rtol=1e-5,
                               atol=1e-7)


# ---- modules: torch's constructor signatures, positional and keyword ------------------

MODULES = [
    ("SiLU", (), {}), ("SiLU", (), {"inplace": True}),
    ("LeakyReLU", (0.2,), {}), ("LeakyReLU", (), {"negative_slope": 0.1, "inplace": True}),
    ("LeakyReLU", (0.3, True), {}),
    ("Softplus", (2.0, 10.0), {}), ("Softplus", (), {"beta": 0.5, "threshold": 3.0}),
    ("ELU", (0.5,), {}), ("ELU", (), {"alpha": 2.0, "inplace": True}),
    ("CELU", (0.8,), {}), ("SELU", (), {}), ("SELU", (True,), {}),
    ("GELU", (), {}), ("GELU", ("tanh",), {}), ("GELU", (), {"approximate": "tanh"}),
    ("Hardtanh", (-2.0, 2.0), {}), ("Hardtanh", (), {"min_val": 0.0, "max_val": 1.0, "inplace": False}),
    ("ReLU6", (), {}), ("ReLU6", (True,), {}), ("Mish", (), {}), ("Hardswish", (), {}),
    ("Hardsigmoid", (), {}), ("Hardshrink", (0.7,), {}), ("Softshrink", (), {"lambd": 0.2}),
    ("Tanhshrink", (), {}), ("Softsign", (), {}), ("LogSigmoid", (), {}),
    ("Threshold", (0.1, 20.0), {}), ("Threshold", (), {"threshold": 0.5, "value": -1.0, "inplace": True}),
    ("GLU", (), {}), ("GLU", (1,), {}), ("Softmin", (1,), {}), ("Softmin", (), {"dim": -1}),
    ("Sigmoid", (), {}), ("Tanh", (), {}), ("RReLU", (0.1, 0.2), {}), ("PReLU", (), {}),
    ("PReLU", (4, 0.2), {}),
]


@pytest.mark.parametrize("name, args, kwargs", MODULES)
def test_modules_match_torch(name, args, kwargs):
    x = _draw((3, 4, 6))
    m_a, m_t = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    m_a.eval()
    m_t.eval()
    a, t = ac.tensor(x, requires_grad=True), torch.tensor(x.copy(), requires_grad=True)
    out_a = m_a(a)
    out_t = m_t(t * 1.0)     # a non-leaf: torch's inplace modules may write into it
    np.testing.assert_allclose(out_a.detach().numpy(), out_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    out_a.sum().backward()
    out_t.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert type(m_a).__name__ in repr(m_a)


def test_module_reprs_and_state():
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert repr(nn.GELU(approximate="tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.Hardtanh(-2.0, 2.0)) == "Hardtanh(min_val=-2.0, max_val=2.0)"
    assert nn.SiLU().state_dict() == {}
    assert list(nn.PReLU(2).state_dict()) == ["weight"]


def test_rrelu_module_refuses_training_mode():
    m = nn.RReLU()
    with pytest.raises(NotImplementedError):
        m(ac.zeros(3))
    m.eval()
    np.testing.assert_allclose(m(ac.tensor([-1.0, 2.0])).numpy(), [-(1 / 8 + 1 / 3) / 2, 2.0], rtol=1e-6)


# ---- inplace functional forms --------------------------------------------------------

@pytest.mark.parametrize("name, args", [("leaky_relu_", (0.2,)), ("elu_", ()), ("celu_", (1.3,)),
                                        ("selu_", ()), ("hardtanh_", (-0.5, 0.5)), ("threshold_", (0.1, 9.0)),
                                        ("rrelu_", (0.1, 0.3))])
def test_functional_inplace_forms_write_into_the_input(name, args):
    x = _draw((4, 5))
    a, t = ac.tensor(x), torch.tensor(x)
    out = getattr(F, name)(a, *args)
    getattr(TF, name)(t, *args)
    assert out is a
    np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-6, atol=1e-7)


def test_functional_inplace_argument():
    x = _draw((4, 5))
    a = ac.tensor(x)
    assert F.silu(a, inplace=True) is a
    np.testing.assert_allclose(a.numpy(), TF.silu(torch.tensor(x)).numpy(), rtol=1e-6, atol=1e-7)
    b = ac.tensor(x, requires_grad=True)
    out = F.leaky_relu(b, 0.1, inplace=True)    # a leaf that needs grad: a new tensor, with its graph
    out.sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), np.where(x > 0, 1.0, 0.1), rtol=1e-6)


def test_torch_level_names():
    x = ac.tensor(_draw((3,)))
    np.testing.assert_allclose(ac.celu(x, 0.5).numpy(), torch.celu(torch.tensor(x.numpy()), 0.5).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ac.selu(x).numpy(), torch.selu(torch.tensor(x.numpy())).numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.hardshrink(0.5).numpy(), torch.tensor(x.numpy()).hardshrink(0.5).numpy())
    y = ac.tensor(_draw((3,)))
    y.sigmoid_()
    assert y.numpy().min() > 0


def test_activations_in_a_training_loop_stay_flat_in_memory():
    model = nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Linear(16, 16), nn.LeakyReLU(0.1),
                          nn.Linear(16, 16), nn.Mish(), nn.Linear(16, 1))
    opt = ac.optim.SGD(model.parameters(), lr=0.01)
    x, y = ac.randn(32, 8), ac.randn(32, 1)

    def step():
        with ac.checkpoint():
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.item()
    first = step()
    used = ac.memory_stats()["bytes_in_use"]
    for _ in range(20):
        last = step()
    assert ac.memory_stats()["bytes_in_use"] == used
    assert last < first


@pytest.mark.parametrize("name, args", [("hardtanh", ()), ("hardtanh", (-2.5, 2.5)), ("relu6", ()),
                                        ("threshold", (1.5, 5.5)), ("threshold", (-1.5, 9.0)),
                                        ("softsign", ()), ("tanhshrink", ())])
@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
def test_integer_inputs_follow_torch(name, args, dtype):
    values = {"int64": [-3, -1, 0, 1, 2, 7, 2 ** 40], "uint8": [0, 1, 2, 7, 200], "bool": [True, False]}[dtype]
    t = torch.tensor(values, dtype=getattr(torch, dtype))
    a = ac.tensor(values, dtype=getattr(ac, dtype))
    try:
        expected = getattr(TF, name)(t, *args)
    except (RuntimeError, NotImplementedError):
        with pytest.raises((TypeError, ValueError)):
            getattr(F, name)(a, *args)
        return
    out = getattr(F, name)(a, *args)
    assert str(out.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    if expected.dtype == torch.float32:
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
    else:
        assert out.tolist() == expected.tolist()
