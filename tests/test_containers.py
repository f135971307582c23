"""nn.ModuleDict, ParameterDict, ParameterList and the Module API around them, against torch."""
import pytest
import torch

import aicraft as ac
from aicraft import nn


def _model(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = lib.nn.ModuleDict({"a": lib.nn.Linear(2, 3), "b": lib.nn.ReLU()})
            self.blocks["c"] = lib.nn.Linear(3, 1, False)
            self.plist = lib.nn.ParameterList([lib.nn.Parameter(lib.zeros(2)), lib.ones(3)])
            self.pdict = lib.nn.ParameterDict({"x": lib.nn.Parameter(lib.zeros(1))})
            self.pdict["y"] = lib.ones(4)
            self.register_buffer("tmp", lib.zeros(2), persistent=False)
    return M()


def test_state_dict_keys_and_parameters_as_torch():
    a, t = _model(ac), _model(torch)
    assert list(a.state_dict()) == list(t.state_dict())
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in a.named_modules()] == [n for n, _ in t.named_modules()]
    assert [type(m).__name__ for m in a.children()] == [type(m).__name__ for m in t.children()]
    assert isinstance(a.plist[1], nn.Parameter) and isinstance(a.pdict["y"], nn.Parameter)


def test_state_dict_round_trip():
    a, b = _model(ac), _model(ac)
    with ac.no_grad():
        a.plist[0].fill_(3.0)
        a.pdict["y"].fill_(-1.0)
    b.load_state_dict(a.state_dict())
    assert b.plist[0].tolist() == [3.0, 3.0] and b.pdict["y"].tolist() == [-1.0] * 4


def test_module_dict_protocol():
    d = nn.ModuleDict()
    d.update([("x", nn.ReLU()), ("y", nn.Tanh())])
    d.update({"z": nn.Sigmoid()})
    assert list(d.keys()) == ["x", "y", "z"] and len(d) == 3 and "y" in d
    assert isinstance(d.pop("y"), nn.Tanh) and list(d) == ["x", "z"]
    del d["x"]
    assert list(d.items())[0][0] == "z"
    d.clear()
    assert len(d) == 0
    with pytest.raises(TypeError):
        d["w"] = 3
    with pytest.raises(TypeError):
        d[1] = nn.ReLU()
    with pytest.raises(KeyError):
        d["missing"]


def test_parameter_list_protocol():
    p = nn.ParameterList()
    p.append(ac.zeros(2)).extend([ac.ones(1), ac.ones(3)])
    assert len(p) == 3 and [q.shape[0] for q in p] == [2, 1, 3]
    assert p[-1].shape == (3,) and len(p[1:]) == 2
    p[0] = ac.full((5,), 2.0)
    assert p[0].tolist() == [2.0] * 5 and isinstance(p[0], nn.Parameter)
    with pytest.raises(IndexError):
        p[3]
    with pytest.raises(TypeError):
        p.append("x")


def test_parameter_dict_protocol():
    d = nn.ParameterDict({"a": ac.zeros(1)})
    assert d.get("b") is None and d.setdefault("b", ac.ones(2)).shape == (2,)
    assert list(d) == ["a", "b"] and d.popitem()[0] == "b"
    e = d | {"c": ac.ones(1)}
    assert list(e) == ["a", "c"] and list(d) == ["a"]


def test_repr_as_torch():
    for lib in (ac, torch):
        torch.manual_seed(0)
    a, t = _model(ac), _model(torch)
    assert repr(a).replace("aicraft", "torch") == repr(t)


def test_module_api_gaps():
    m = _model(ac)
    assert m.get_submodule("blocks.a") is m.blocks["a"]
    assert m.get_parameter("blocks.a.weight") is m.blocks["a"].weight
    with pytest.raises(AttributeError):
        m.get_submodule("blocks.nope")
    assert m.apply(lambda mod: None) is m
    assert all(not p.requires_grad for p in m.requires_grad_(False).parameters())
    assert "tmp" not in m.state_dict() and "tmp" in dict(m.named_buffers())
    for name in ("double", "half", "bfloat16"):
        with pytest.raises(TypeError):
            getattr(m, name)()
    assert m.float() is m and m.to("cpu", ac.float32) is m
    with pytest.raises(TypeError):
        m.to(ac.float64)


@pytest.mark.parametrize("make", [
    lambda lib, **kw: lib.nn.Linear(3, 4, True, **kw),
    lambda lib, **kw: lib.nn.Conv2d(1, 2, 3, **kw),
    lambda lib, **kw: lib.nn.BatchNorm2d(3, **kw),
    lambda lib, **kw: lib.nn.LayerNorm(3, **kw),
    lambda lib, **kw: lib.nn.Embedding(5, 3, **kw),
    lambda lib, **kw: lib.nn.LSTM(2, 3, **kw),
    lambda lib, **kw: lib.nn.GRUCell(2, 3, **kw),
    lambda lib, **kw: lib.nn.MultiheadAttention(4, 2, **kw),
    lambda lib, **kw: lib.nn.TransformerEncoderLayer(4, 2, 8, **kw),
])
def test_factory_keywords(make):
    m = make(ac, device="cpu", dtype=ac.float32)
    t = make(torch, device="cpu", dtype=torch.float32)
    assert [tuple(p.shape) for p in m.parameters()] == [tuple(p.shape) for p in t.parameters()]
    with pytest.raises(TypeError):
        make(ac, dtype=ac.float64)


def test_linear_positional_device_dtype():
    m = nn.Linear(3, 4, False, "cpu", ac.float32)
    assert m.bias is None and m.weight.shape == (4, 3)
