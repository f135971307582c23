"""ac.save/ac.load of the checkpoints training scripts write, still without pickle."""
import argparse
import io
import pickle

import numpy as np
import pytest

import aicraft as ac
from aicraft import nn, optim


def round_trip(obj, **load_kw):
    buf = io.BytesIO()
    ac.save(obj, buf)
    buf.seek(0)
    return ac.load(buf, **load_kw)


def test_checkpoint_of_state_dicts_args_numbers_and_arrays():
    ac.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = optim.Adam(model.parameters(), lr=1e-3)
    model(ac.ones(2, 3)).sum().backward()
    opt.step()
    ck = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 7, "best": float("inf"),
          "name": "run", "hist": [0.5, (1, 2)], "none": None, "flags": {True, False},
          "f64": np.linspace(0, 1, 5), "u16": np.array([[1, 65535]], np.uint16), "c64": np.array([1 + 2j], np.complex64),
          "np_scalar": np.float64(2.5), "b": b"\x00\xff"}
    back = round_trip(ck, map_location="cpu", weights_only=True)
    assert back["epoch"] == 7 and back["best"] == float("inf") and back["name"] == "run"
    assert back["hist"] == [0.5, (1, 2)] and back["none"] is None and back["flags"] == {True, False}
    for key in ("f64", "u16", "c64"):
        assert back[key].dtype == ck[key].dtype and np.array_equal(back[key], ck[key])
    assert back["np_scalar"] == 2.5 and back["b"] == b"\x00\xff"
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other.load_state_dict(back["model"])
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(model.parameters(), other.parameters()))
    opt2 = optim.Adam(other.parameters(), lr=1e-3)
    opt2.load_state_dict(back["optimizer"])
    assert opt2.state_dict()["param_groups"][0]["lr"] == 1e-3


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Embedding(5, 4)
        self.dec = nn.Linear(4, 5)
        self.dec.weight = self.enc.weight
        self.act = nn.functional.relu


def test_whole_module_needs_allowlist_and_keeps_ties():
    buf = io.BytesIO()
    ac.save(Tied(), buf)
    with pytest.raises(pickle.UnpicklingError, match="safe_globals"):
        ac.load(io.BytesIO(buf.getvalue()))
    with ac.serialization.safe_globals([Tied]):
        m = ac.load(io.BytesIO(buf.getvalue()))
    assert isinstance(m, Tied) and m.dec.weight is m.enc.weight and isinstance(m.dec.weight, nn.Parameter)
    assert m.act is nn.functional.relu
    assert list(m.state_dict()) == list(Tied().state_dict())
    m2 = ac.load(io.BytesIO(buf.getvalue()), weights_only=False)   # by import, as torch's unpickler
    assert isinstance(m2, Tied)


def test_aicraft_modules_and_namespace():
    t = round_trip(nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                  dim_feedforward=8))
    assert isinstance(t, nn.Transformer) and len(list(t.parameters())) == 34
    with pytest.raises(pickle.UnpicklingError):
        round_trip({"args": argparse.Namespace(lr=0.1)})
    assert round_trip({"args": argparse.Namespace(lr=0.1)}, weights_only=False)["args"].lr == 0.1
    assert ac.nn.modules.linear.NonDynamicallyQuantizableLinear is nn.Linear
    assert ac.nn.modules.transformer.TransformerEncoder is nn.TransformerEncoder


def test_map_location_forms():
    for loc in ("cpu", ac.device("cpu"), {"cpu": "cpu"}, lambda storage, loc: storage, None):
        assert round_trip({"w": ac.ones(2)}, map_location=loc)["w"].tolist() == [1.0, 1.0]
    with pytest.raises(NotImplementedError):
        round_trip({"w": ac.ones(2)}, pickle_module=pickle)


@pytest.mark.parametrize("structure, mention", [
    ('{"ndarray": "0", "dtype": "<f8", "shape": [3]}', "holds 4 bytes"),
    ('{"ndarray": "0", "dtype": "|O", "shape": [1]}', "bad NumPy array"),
    ('{"object": "os.system", "state": []}', "not allowed"),
    ('{"global": "os.system"}', "not allowed"),
    ('{"lib": "printf"}', "unknown libac"),
    ('{"ref": 0}', "missing object"),
    ('{"parameter": "0"}', "keys"),
])
def test_bad_structures_are_refused(structure, mention):
    import json
    import struct
    header = {"__metadata__": {"aicraft": structure}, "0": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with pytest.raises((ac.FormatError, pickle.UnpicklingError), match=mention):
        ac.load(io.BytesIO(struct.pack("<Q", len(text)) + text + b"\0" * 4))
