"""test_serve_protocol.py - aicraft/serve/protocol.py without a server: infer requests
read from JSON and from the binary tensor data extension, each refusal a 400 that names
what is wrong, answers written both ways and read back as a client reads them."""
import json
import os
import subprocess
import sys

import numpy as np
import orjson
import pytest

from aicraft.serve import TensorSpec, protocol, wire
from aicraft.serve.protocol import ProtocolError, check_inputs, encode_infer, parse_infer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATATYPES = {datatype: np.dtype(name) for datatype, name in wire.NUMPY_TYPES.items()}


def json_request(*inputs, **extra):
    return orjson.dumps(dict({"inputs": [dict(i) for i in inputs]}, **extra))


def tensor(name, datatype, shape, data):
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def binary_request(arrays, json_inputs=(), **extra):
    """(body, header length) with arrays (name -> array) as binary tensors, after json_inputs."""
    inputs = list(json_inputs) + [
        {"name": name, "datatype": next(k for k, d in DATATYPES.items() if d == a.dtype.newbyteorder("<")),
         "shape": list(a.shape), "parameters": {"binary_data_size": a.nbytes}} for name, a in arrays.items()]
    header = orjson.dumps(dict({"inputs": inputs}, **extra))
    return header + b"".join(a.astype(a.dtype.newbyteorder("<")).tobytes() for a in arrays.values()), len(header)


def refused(body, header_length=None, match=""):
    with pytest.raises(ProtocolError, match=match) as info:
        parse_infer(body, header_length)
    assert info.value.status == 400
    return str(info.value)


# ---- reading -------------------------------------------------------------------

def test_json_tensors_flat_and_nested_read_as_their_datatype():
    request = parse_infer(json_request(tensor("x", "FP32", [2, 3], [1, 2.5, 3, 4, 5, 6]),
                                       tensor("n", "INT64", [2, 2], [[1, -2], [3, 2 ** 62]]),
                                       tensor("b", "BOOL", [3], [True, False, True]),
                                       tensor("u", "UINT8", [1, 2], [0, 255]), id="7"))
    assert request.id == "7" and request.outputs is None and request.binary_output is False
    inputs = {name: np.asarray(a) for name, a in request.inputs.items()}
    np.testing.assert_array_equal(inputs["x"], np.array([[1, 2.5, 3], [4, 5, 6]], np.float32))
    assert inputs["x"].dtype == np.float32
    np.testing.assert_array_equal(inputs["n"], np.array([[1, -2], [3, 2 ** 62]], np.int64))
    assert inputs["b"].dtype == np.bool_ and inputs["b"].tolist() == [True, False, True]
    assert inputs["u"].dtype == np.uint8 and inputs["u"].tolist() == [[0, 255]]
    assert [request.inputs[name].datatype for name in "xnbu"] == ["FP32", "INT64", "BOOL", "UINT8"]


def test_binary_tensors_read_bit_exact_with_json_ones_beside():
    rng = np.random.default_rng(0)
    arrays = {"a": rng.standard_normal((3, 5)).astype(np.float32), "b": rng.integers(-9, 9, (4,)).astype(np.int64),
              "c": np.array([True, False]), "d": rng.standard_normal((2, 2)).astype(np.float16)}
    body, length = binary_request(arrays, [tensor("j", "INT32", [2], [1, 2])],
                                  outputs=[{"name": "y", "parameters": {"binary_data": True}}, {"name": "z"}])
    request = parse_infer(body, str(length))
    for name, array in arrays.items():
        assert np.asarray(request.inputs[name]).dtype == array.dtype
        np.testing.assert_array_equal(np.asarray(request.inputs[name]), array)
    assert np.asarray(request.inputs["j"]).tolist() == [1, 2]
    assert request.outputs == [("y", True), ("z", False)]


@pytest.mark.parametrize("data, datatype, match", [
    ([1.5, 2], "INT64", "fractions"),        # a cast would truncate it
    ([True, 2], "INT64", "true or false"),      # a cast would read it as 1
    ([1.0, True], "FP32", "true or false"),
    ([[1.0], [False]], "FP32", "true or false"),
    (["1.5", 2], "FP32", "strings"),            # a cast would parse it
    ([None, 2], "FP32", "null"),
    ([{}, 2], "FP32", "objects"),
    ([2 ** 63, 0], "INT64", "range|past 64 bits"),
    ([2 ** 63, 1.5], "UINT64", "fractions"),
    ([-129, 0], "INT8", "range"),
    ([1, 0], "BOOL", "integers"),
    ([300, 0], "UINT8", "range"),
    ([-1, 0], "UINT32", "range"),
    ([1e39, 0], "FP32", "range"),
    ([1e300, 0], "FP16", "range"),
    ([1, 2, 3], "FP32", "3 values"),
    ([[1, 2], [3]], "FP32", "ragged"),
    ([[1, [2]], [3, 4]], "FP32", "ragged"),
    ("12", "FP32", "list"),
])
def test_json_data_that_does_not_fit_its_datatype_is_refused(data, datatype, match):
    refused(json_request(tensor("x", datatype, [2], data)), match=match)


@pytest.mark.parametrize("values", [2, 3000])       # headers searched as they are, and with numbers deleted
def test_a_bool_in_number_data_is_found_in_headers_of_any_size(values):
    assert len(json_request(tensor("x", "FP32", [2], [0.5] * 2))) < protocol.SCAN_BYTES
    assert len(json_request(tensor("x", "FP32", [3000], [0.5] * 3000))) > protocol.SCAN_BYTES
    for place in (0, values // 2, values - 1):
        for value in (True, False):
            data = [0.5] * values
            data[place] = value
            refused(json_request(tensor("x", "FP32", [values], data)), match="true or false")
            refused(json_request(tensor("x", "FP32", [1, values], [data])), match="true or false")
    request = parse_infer(json_request(tensor("x", "FP32", [values], [0.5] * values),
                                       tensor("b", "BOOL", [2], [True, False])))
    assert wire.to_json(request.inputs["x"]) == [0.5] * values
    assert wire.to_json(request.inputs["b"]) == [True, False]


@pytest.mark.parametrize("change, match", [
    ({"datatype": "BYTES"}, "datatype"),
    ({"datatype": "BF16"}, "datatype"),
    ({"datatype": None}, "datatype"),
    ({"shape": [-1, 2]}, "shape"),
    ({"shape": [2.0]}, "shape"),
    ({"shape": [True, 2]}, "shape"),
    ({"shape": [1] * 9}, "shape"),
    ({"shape": "2"}, "shape"),
    ({"name": 3}, "name"),
    ({"parameters": {"shared_memory_region": "r"}}, "shared memory"),
    ({"parameters": []}, "parameters"),
])
def test_bad_input_fields_are_refused(change, match):
    item = dict(tensor("x", "FP32", [2], [1, 2]), **change)
    refused(json_request(item), match=match)


def test_bad_request_shapes_are_refused():
    good = tensor("x", "FP32", [1], [1])
    refused(b"not json", match="not JSON")
    refused(b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [NaN]}]}', match="not JSON")
    refused(b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1e400]}]}', match="not JSON")
    refused(b"[1]", match="object")
    refused(b"{}", match="inputs")
    refused(json_request(), match="inputs")
    refused(json_request(good, good), match="twice")
    refused(json_request(good, id=5), match="id")
    refused(json_request({"name": "x", "datatype": "FP32", "shape": [1]}), match="neither")
    refused(json_request(good, parameters={"binary_data_output": "yes"}), match="binary_data_output")
    refused(json_request(good, outputs={"name": "y"}), match="outputs")
    refused(json_request(good, outputs=[{"name": "y", "parameters": {"classification": 2}}]), match="classification")
    refused(json_request(good, outputs=[{"name": "y", "parameters": {"binary_data": 1}}]), match="binary_data")
    refused(json_request(good, outputs=[{}]), match="name")
    # a deep or long nest of lists is refused before it is parsed
    refused(b'{"inputs": ' + b"[" * 5000 + b"]" * 5000 + b"}", match="lists")
    lists = parse_infer(json_request(tensor("x", "FP32", [2047, 1], [[0]] * 2047)))   # 2049 lists
    assert lists.inputs["x"].shape == (2047, 1)


def test_binary_byte_counts_must_add_up():
    array = np.zeros((2, 3), np.float32)
    body, length = binary_request({"x": array})
    assert parse_infer(body, str(length)).inputs["x"].shape == (2, 3)
    refused(body + b"\0", str(length), match="after the JSON header")
    refused(body[:-1], str(length), match="past the end")
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3],
                                     "parameters": {"binary_data_size": 20}}]}).encode()
    refused(header + bytes(20), str(len(header)), match="takes 24")
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [0] * 6,
                                     "parameters": {"binary_data_size": 24}}]}).encode()
    refused(header + bytes(24), str(len(header)), match="both")
    refused(body, "x", match="not a number")
    refused(body, str(len(body) + 1), match="Inference-Header-Content-Length")
    refused(body, "0", match="Inference-Header-Content-Length")
    # binary tensors need the header's length
    refused(body[:length], None, match="past the end")
    bad_bool, length = binary_request({"x": np.array([True, False])})
    refused(bad_bool[:-1] + b"\x02", str(length), match="BOOL")


def test_check_inputs_against_the_model():
    specs = [TensorSpec("x", "FP32", (-1, 3)), TensorSpec("k", "INT64", (2,))]
    good = {"x": wire.zeros("FP32", (5, 3)), "k": wire.zeros("INT64", (2,))}
    check_inputs(good, specs)
    for inputs, match in (
            (dict(good, y=good["k"]), "unexpected input 'y'"),
            ({"x": good["x"]}, "input 'k' is missing"),
            (dict(good, x=wire.zeros("FP64", (5, 3))), "FP64; the model takes FP32"),
            (dict(good, x=wire.zeros("FP32", (5, 4))), r"shape \[5, 4\]"),
            (dict(good, x=wire.zeros("FP32", (5, 3, 1))), "shape"),
            (dict(good, k=wire.zeros("INT64", (3,))), "shape")):
        with pytest.raises(ProtocolError, match=match):
            check_inputs(inputs, specs)
    with pytest.raises(ValueError, match="datatype"):
        TensorSpec("x", "FLOAT", (1,))
    for shape in ((-2, 3), (1.0,), "3", (1,) * 9):
        with pytest.raises((ValueError, TypeError), match="shape"):
            TensorSpec("x", "FP32", shape)
    assert TensorSpec("x", "FP32", [-1, 3]).shape == (-1, 3)


# ---- writing -------------------------------------------------------------------

class Model:
    name, version = "m", "3"
    outputs = [TensorSpec("y", "FP32", (-1, 2)), TensorSpec("i", "INT64", (-1,))]


def on_wire(results):
    return {spec.name: wire.from_result(results[spec.name], spec.datatype) for spec in Model.outputs}


def read_answer(body, headers):
    """(JSON header, {name: array}) as a client reads an answer."""
    headers = dict(headers)
    length = int(headers.get("Inference-Header-Content-Length", len(body)))
    answer, tail, arrays = json.loads(body[:length]), body[length:], {}
    for output in answer["outputs"]:
        dtype = DATATYPES[output["datatype"]]
        if "data" in output:
            arrays[output["name"]] = np.array(output["data"], dtype).reshape(output["shape"])
        else:
            size = output["parameters"]["binary_data_size"]
            arrays[output["name"]] = np.frombuffer(tail[:size], dtype).reshape(output["shape"])
            tail = tail[size:]
    assert tail == b""
    return answer, arrays


def test_answers_in_json_and_binary_read_back_exactly():
    y = np.random.default_rng(1).standard_normal((3, 2)).astype(np.float32)
    results = {"y": y, "i": np.array([1, -5, 2 ** 40])}
    body, _ = binary_request({"x": np.zeros(1, np.float32)})
    for outputs, binary_output in (([], False), ([], True), ([{"name": "i"}, {"name": "y", "parameters": {"binary_data": True}}], False)):
        extra = {"outputs": outputs} if outputs else {"parameters": {"binary_data_output": binary_output}}
        request = parse_infer(json_request(tensor("x", "FP32", [1], [0]), id="q", **extra))
        body, headers = encode_infer(Model, request, on_wire(results))
        answer, arrays = read_answer(body, headers)
        assert answer["model_name"] == "m" and answer["model_version"] == "3" and answer["id"] == "q"
        names = [o["name"] for o in outputs] or ["y", "i"]
        assert [o["name"] for o in answer["outputs"]] == names
        for name in names:
            np.testing.assert_array_equal(arrays[name], results[name])
            assert arrays[name].dtype == DATATYPES[dict(y="FP32", i="INT64")[name]]
        binary = any("parameters" in o for o in answer["outputs"])
        assert ("Inference-Header-Content-Length" in dict(headers)) == binary
        assert dict(headers)["Content-Type"] == ("application/octet-stream" if binary else "application/json")


def test_an_answer_json_cannot_hold_is_an_error_not_null():
    results = {"y": np.array([[np.nan, 1]], np.float32), "i": np.array([1])}
    request = parse_infer(json_request(tensor("x", "FP32", [1], [0])))
    with pytest.raises(ValueError, match="not finite"):
        encode_infer(Model, request, on_wire(results))
    request.binary_output = True           # binary carries NaN as it is
    _, arrays = read_answer(*encode_infer(Model, request, on_wire(results)))
    assert np.isnan(arrays["y"][0, 0])
    request = parse_infer(json_request(tensor("x", "FP32", [1], [0]), outputs=[{"name": "nope"}]))
    with pytest.raises(ProtocolError, match="unknown output 'nope'") as info:
        encode_infer(Model, request, on_wire(results))
    assert info.value.status == 400


def test_import_aicraft_loads_no_part_of_the_service():
    code = ("import sys, aicraft\n"
            "print(*[m for m in ('aicraft.serve', 'gunicorn', 'orjson', 'multiprocessing') if m in sys.modules])")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                         capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.split() == [], run.stdout + run.stderr
