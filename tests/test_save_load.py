"""test_save_load.py - ac.save / ac.load of whole objects, as torch.save/torch.load
without pickle: tensors, state dicts of models and optimizers, nested
containers; paths and file objects; refusals and corrupt structures.
"""
import io
import json
import math
import struct

import numpy as np
import pytest

import aicraft as ac
from aicraft._ffi import ffi, lib


def header_of(raw):
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n])


def same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, ac.Tensor):
        assert a.shape == b.shape and np.array_equal(a.numpy(), b.numpy(), equal_nan=True)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def round_trip(obj, tmp_path):
    """obj through a path and through io.BytesIO; both loads."""
    path = tmp_path / "obj.safetensors"
    ac.save(obj, path)
    buf = io.BytesIO()
    ac.save(obj, buf)
    assert buf.getvalue() == path.read_bytes()
    buf.seek(0)
    return ac.load(path), ac.load(buf)


NESTED = {"epoch": 3, "lr": 0.5, "best": float("inf"), "nan": float("nan"), "done": False, "note": "ñ 🙂",
          "none": None, 7: "int key", "pairs": [(1, 2.5), ("a", [None, True])], "empty": {}, "nothing": []}


def test_a_tensor_and_nested_structures_round_trip(tmp_path):
    x = ac.randn(3, 4)
    for obj in (x, NESTED, {"w": x, "meta": NESTED, "list": [x, ac.ones(2)]}, [x], (1, x), 5, "s", None):
        for loaded in round_trip(obj, tmp_path):
            same(obj, loaded)


def test_numpy_arrays_load_as_arrays_of_their_dtype():
    buf = io.BytesIO()   # as torch.load gives back a saved ndarray (float64 stays float64)
    ac.save({"a": [np.arange(3, dtype=np.float64)]}, buf)
    buf.seek(0)
    loaded = ac.load(buf)["a"][0]
    assert isinstance(loaded, np.ndarray) and loaded.dtype == np.float64 and loaded.tolist() == [0.0, 1.0, 2.0]


def test_model_state_dict_round_trips_through_a_file_object():
    ac.manual_seed(0)
    model = ac.nn.Sequential(ac.nn.Linear(4, 8), ac.nn.ReLU(), ac.nn.Linear(8, 2))
    other = ac.nn.Sequential(ac.nn.Linear(4, 8), ac.nn.ReLU(), ac.nn.Linear(8, 2))
    buf = io.BytesIO()
    ac.save(model.state_dict(), buf)
    buf.seek(0)
    other.load_state_dict(ac.load(buf))
    x = ac.randn(5, 4)
    assert np.array_equal(model(x).numpy(), other(x).numpy())


def test_plain_state_dict_stays_plain_safetensors_that_c_reads(tmp_path):
    path = tmp_path / "plain.safetensors"
    ac.save({"w": ac.ones(2, 3), "b": ac.zeros(3)}, path)
    assert "__metadata__" not in header_of(path.read_bytes())
    d = lib.ac_load_safetensors(str(path).encode())
    assert d != ffi.NULL
    try:
        names = [ffi.string(lib.ac_state_dict_name(d, i)).decode() for i in range(lib.ac_state_dict_size(d))]
        assert names == ["w", "b"]
    finally:
        lib.ac_state_dict_free(d)


def test_structured_file_is_safetensors_with_its_structure_in_metadata(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    ac.save({"model": {"w": ac.ones(2)}, "step": 4}, path)
    header = header_of(path.read_bytes())
    assert json.loads(header["__metadata__"]["aicraft"]) == \
        {"dict": [["model", {"dict": [["w", {"tensor": "0"}]]}], ["step", 4]]}
    assert header["0"]["shape"] == [2] and header["0"]["dtype"] == "F32"


@pytest.mark.parametrize("make", [lambda ps: ac.optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: ac.optim.Adam(ps, lr=0.01, betas=(0.8, 0.9))])
def test_optimizer_state_dict_round_trips(tmp_path, make):
    ac.manual_seed(1)
    a, b = ac.nn.Linear(3, 2), ac.nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    opt_a, opt_b = make(a.parameters()), make(b.parameters())
    x = ac.randn(4, 3)

    def step(model, opt):
        opt.zero_grad()
        (model(x) ** 2).sum().backward()
        opt.step()

    for _ in range(3):
        step(a, opt_a)
    path = tmp_path / "opt.safetensors"
    ac.save({"model": a.state_dict(), "opt": opt_a.state_dict()}, path)
    saved = ac.load(path)
    b.load_state_dict(saved["model"])
    opt_b.load_state_dict(saved["opt"])
    same(opt_a.state_dict(), opt_b.state_dict())
    step(a, opt_a)
    step(b, opt_b)
    for p, q in zip(a.parameters(), b.parameters()):
        assert np.array_equal(p.numpy(), q.numpy())


def test_a_whole_module_round_trips_and_unsavable_values_are_refused(tmp_path):
    ac.save(ac.nn.Linear(2, 2), tmp_path / "m.safetensors")   # as torch.save(model): tests/test_checkpoint_io.py
    assert isinstance(ac.load(tmp_path / "m.safetensors"), ac.nn.Linear)
    with pytest.raises(TypeError, match="cannot save a complex"):
        ac.save([1j], tmp_path / "c.safetensors")
    assert not (tmp_path / "c.safetensors").exists()


def structured_file(structure, tensors=b""):
    header = {"__metadata__": {"aicraft": structure}}
    if tensors:
        header["0"] = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    text = json.dumps(header).encode()
    return io.BytesIO(struct.pack("<Q", len(text)) + text + tensors)


@pytest.mark.parametrize("structure, mention", [
    ("{not json", "not valid JSON"),
    ('{"tensor": "9"}', "bad 'tensor'"),
    ('{"dict": [[["k"], 1]]}', "bad 'dict'"),
    ('{"list": 3}', "bad 'list'"),
    ('{"a": 1, "b": 2}', "keys"),
    ('[1, 2]', "bare list"),
    ('{"code": "print(1)"}', "bad 'code'"),
])
def test_corrupt_structures_raise_format_error(structure, mention):
    with pytest.raises(ac.FormatError, match=mention):
        ac.load(structured_file(structure, b"\0" * 4))


def test_corrupt_bytes_in_a_file_object_raise_format_error():
    buf = io.BytesIO()
    ac.save({"w": [ac.randn(3)], "n": 1}, buf)
    raw = buf.getvalue()
    for n in range(len(raw)):
        with pytest.raises(ac.FormatError):
            ac.load(io.BytesIO(raw[:n]))
    same(ac.load(io.BytesIO(raw))["n"], 1)


def test_load_and_save_reject_bad_targets(tmp_path):
    with pytest.raises(TypeError, match="file object"):
        ac.load(3)
    with pytest.raises(OSError):
        ac.load(tmp_path / "missing.safetensors")
    with pytest.raises(io.UnsupportedOperation):
        ac.save({"w": ac.ones(1)}, io.BufferedReader(io.BytesIO()))   # not writable
