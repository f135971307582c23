"""test_serve_wire.py - aicraft/serve/wire.py: the protocol's arrays made from and turned
into JSON data, bytes, aicraft tensors and NumPy arrays (NumPy the reference), rows joined
and split; and a worker serving an aicraft model that never imports NumPy."""
import os
import subprocess
import sys

import numpy as np
import pytest

import aicraft as ac
from aicraft.serve import wire

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RNG = np.random.default_rng(0)
VALUES = {
    "BOOL": RNG.integers(0, 2, (3, 4)).astype(bool),
    "UINT8": RNG.integers(0, 256, (3, 4)), "UINT16": RNG.integers(0, 2 ** 16, (3, 4)),
    "UINT32": RNG.integers(0, 2 ** 32, (3, 4)), "UINT64": RNG.integers(0, 2 ** 63, (3, 4)).astype(np.uint64) * 2 + 1,
    "INT8": RNG.integers(-128, 128, (3, 4)), "INT16": RNG.integers(-2 ** 15, 2 ** 15, (3, 4)),
    "INT32": RNG.integers(-2 ** 31, 2 ** 31, (3, 4)), "INT64": RNG.integers(-2 ** 63, 2 ** 63 - 1, (3, 4)),
    "FP16": RNG.standard_normal((3, 4)) * 1000, "FP32": RNG.standard_normal((3, 4)) * 1e30,
    "FP64": RNG.standard_normal((3, 4)) * 1e300,
}


@pytest.mark.parametrize("datatype", sorted(VALUES))
def test_json_data_packs_as_numpy_casts_it_and_reads_back(datatype):
    expected = VALUES[datatype].astype(wire.NUMPY_TYPES[datatype])
    for data in (expected.tolist(), expected.ravel().tolist()):       # nested by rows, and flat
        array = wire.from_json(data, datatype, (3, 4))
        assert array.shape == (3, 4) and len(array) == 3
        assert bytes(array.data) == expected.tobytes()
        assert wire.to_json(array) == expected.ravel().tolist()
        np.testing.assert_array_equal(np.asarray(array), expected)
    assert wire.from_numpy(expected, datatype).data == expected.tobytes()
    view, copied = np.asarray(array), np.array(array, copy=True)
    assert not view.flags.writeable and copied.flags.writeable and copied.base is None


def test_json_floats_not_finite_are_refused_on_the_way_out():
    array = wire.from_numpy(np.array([1.0, np.inf], np.float32), "FP32")
    with pytest.raises(ValueError, match="not finite"):
        wire.to_json(array)


def test_numbers_past_the_range_are_out_of_range():
    for data, datatype in (([1e39], "FP32"), ([70000.0], "FP16"), ([2 ** 64], "UINT64"), ([-1], "UINT8")):
        with pytest.raises(wire.OutOfRange, match="range"):
            wire.from_json(data, datatype, (1,))
    with pytest.raises(wire.WireError) as info:
        wire.from_json([1.5], "INT32", (1,))
    assert not isinstance(info.value, wire.OutOfRange)


def test_deep_or_ragged_nests_are_refused():
    deep = [0.5]
    for _ in range(9):
        deep = [deep]
    with pytest.raises(wire.WireError, match="nest"):
        wire.from_json(deep, "FP32", (1,) * 9)
    for data in ([[1, 2], [3]], [[[1, 2], [3, 4]], [[1], [2], [3], [4]]], [1, [2]]):
        with pytest.raises(wire.WireError, match="ragged"):
            wire.from_json(data, "FP32", (4,))


@pytest.mark.parametrize("datatype", sorted(wire.TENSOR_DTYPES))
def test_tensors_in_and_out_bit_exact(datatype):
    expected = VALUES[datatype].astype(wire.NUMPY_TYPES[datatype])
    t = wire.to_tensor(wire.from_numpy(expected, datatype))
    assert t.dtype == wire.TENSOR_DTYPES[datatype] and tuple(t.shape) == (3, 4)
    np.testing.assert_array_equal(t.numpy(), expected)
    back = wire.from_tensor(t, datatype)
    assert back.datatype == datatype and back.shape == (3, 4) and back.data == expected.tobytes()


def test_tensor_outputs_cast_only_within_their_kind():
    ints = ac.tensor([[1, -2], [3, 4]])
    as_float = wire.from_tensor(ints, "FP32")
    np.testing.assert_array_equal(np.asarray(as_float), np.array([[1, -2], [3, 4]], np.float32))
    assert wire.to_json(wire.from_tensor(ac.tensor([True, False]), "UINT8")) == [1, 0]
    with pytest.raises(TypeError, match="FP32; the servable names INT64"):
        wire.from_tensor(ac.tensor([1.5]), "INT64")
    with pytest.raises(TypeError, match="aicraft tensor holds"):
        wire.to_tensor(wire.zeros("FP16", (2,)))
    with pytest.raises(TypeError, match="INT32"):
        wire.from_result(wire.zeros("INT32", (2,)), "INT64")


def test_a_tensor_after_its_scope_is_a_scope_error():
    with ac.checkpoint():
        t = ac.ones(2)
    with pytest.raises(ac.ScopeError):
        wire.from_tensor(t, "FP32")


def test_rows_join_and_split_as_numpy_concatenates_and_slices():
    parts = [RNG.standard_normal((n, 3)).astype(np.float32) for n in (1, 4, 2)]
    joined = wire.join([wire.from_numpy(p, "FP32") for p in parts])
    whole = np.concatenate(parts)
    assert joined.shape == (7, 3)
    np.testing.assert_array_equal(np.asarray(joined), whole)
    np.testing.assert_array_equal(np.asarray(wire.rows(joined, 1, 5)), whole[1:5])
    assert wire.rows(joined, 2, 2).shape == (0, 3)


def test_a_worker_serving_an_aicraft_model_never_imports_numpy():
    code = """
import io, sys, orjson
import aicraft as ac
from aicraft import nn
from aicraft.serve import ModuleServable, TensorSpec, make_app
ac.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
servable = ModuleServable(model, "m", [TensorSpec("input__0", "FP32", (-1, 4))],
                          [TensorSpec("output__0", "FP32", (-1, 3))], loss_fn=nn.CrossEntropyLoss(),
                          optimizer=ac.optim.SGD(model.parameters(), lr=0.1))
app = make_app(servable, max_batch_size=4)
app.warm_up()
def call(path, body, length=None):
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": path, "CONTENT_LENGTH": str(len(body)),
               "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr}
    if length:
        environ["HTTP_INFERENCE_HEADER_CONTENT_LENGTH"] = str(length)
    status = []
    out = b"".join(app(environ, lambda s, h: status.append(s)))
    assert status[0].startswith("200"), out
    return out
header = orjson.dumps({"inputs": [{"name": "input__0", "datatype": "FP32", "shape": [2, 4],
                                   "parameters": {"binary_data_size": 32}}],
                       "parameters": {"binary_data_output": True}})
call("/v2/models/m/infer", header + bytes(32), len(header))
call("/v2/models/m/infer", orjson.dumps({"inputs": [{"name": "input__0", "datatype": "FP32", "shape": [1, 4],
                                                     "data": [1, 2, 3, 4]}]}))
call("/predict", b'{"inputs": [[1, 2, 3, 4]]}')
call("/learn", b'{"inputs": [[1, 2, 3, 4]], "labels": [2]}')
print("numpy" in sys.modules)
"""
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                         capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.split() == ["False"], run.stdout + run.stderr
