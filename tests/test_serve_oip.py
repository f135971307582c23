"""test_serve_oip.py - `python -m aicraft.serve` under gunicorn, driven by Triton's own
HTTP client (tritonclient.http) over KServe's Open Inference Protocol v2: health, server
and model metadata, infer with JSON and with binary tensors both ways, each answer equal
to the module run in this process; and with plain HTTP, the error paths: each gets its
status and KServe's error body ({"error": "..."}).

The server runs as tests/test_serve.py runs demos/serve.py (its Server and fixture).
"""
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("gunicorn")
httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

import aicraft as ac  # noqa: E402
import aicraft.serve  # noqa: E402,F401
from aicraft.serve.servable import load_mlp  # noqa: E402
from test_serve import ROOT, START_SECONDS, Server, free_port, raw_request, weights_file  # noqa: E402

MODEL = "mlp"      # the weights file's stem


def serve_command(path, workers, *options):
    return lambda port: [sys.executable, "-m", "aicraft.serve", str(path), "--bind", "127.0.0.1:%d" % port,
                         "--workers", str(workers), "--threads", "4", *options]


@pytest.fixture
def server(tmp_path):
    """`python -m aicraft.serve` on the MLP's weights, 2 workers; stopped at the end."""
    path = weights_file(tmp_path)
    started = Server(tmp_path, path, 2, command=serve_command(path, 2, "--learn", "0.01"))
    try:
        yield started.wait_ready()
    finally:
        started.stop()


def client(server):
    return httpclient.InferenceServerClient("127.0.0.1:%d" % server.port, network_timeout=20)


def expected(tmp_path, x):
    module = load_mlp(str(weights_file(tmp_path)))
    with ac.no_grad():
        return module(ac.from_numpy(x)).numpy()


def rows(n, seed):
    return np.random.default_rng(seed).standard_normal((n, 784)).astype(np.float32)


def test_health_and_metadata(server):
    c = client(server)
    assert c.is_server_live() and c.is_server_ready()
    assert c.is_model_ready(MODEL) and c.is_model_ready(MODEL, "1")
    assert not c.is_model_ready("nothing")
    assert "binary_tensor_data" in c.get_server_metadata()["extensions"]
    metadata = c.get_model_metadata(MODEL)
    assert metadata == {"name": MODEL, "versions": ["1"], "platform": "aicraft",
                        "inputs": [{"name": "input__0", "datatype": "FP32", "shape": [-1, 784]}],
                        "outputs": [{"name": "output__0", "datatype": "FP32", "shape": [-1, 10]}]}
    with pytest.raises(InferenceServerException, match="unknown model"):
        c.get_model_metadata("nothing")


@pytest.mark.parametrize("binary_in", [False, True], ids=["json-in", "binary-in"])
@pytest.mark.parametrize("binary_out", [False, True], ids=["json-out", "binary-out"])
def test_infer_equals_the_module_in_process(server, tmp_path, binary_in, binary_out):
    c = client(server)
    for n, seed in ((1, 1), (32, 2), (7, 3)):
        x = rows(n, seed)
        given = httpclient.InferInput("input__0", list(x.shape), "FP32")
        given.set_data_from_numpy(x, binary_data=binary_in)
        result = c.infer(MODEL, [given], outputs=[httpclient.InferRequestedOutput("output__0", binary_data=binary_out)],
                         request_id="r%d" % n)
        assert result.get_response()["id"] == "r%d" % n
        got = result.as_numpy("output__0")
        assert got.dtype == np.float32 and got.shape == (n, 10)
        # The same kernels on the same bits: JSON carries each float32 exactly.
        np.testing.assert_array_equal(got, expected(tmp_path, x))


def test_infer_without_named_outputs_answers_all_in_binary(server, tmp_path):
    # tritonclient then sets the request's binary_data_output parameter
    x = rows(3, 4)
    given = httpclient.InferInput("input__0", [3, 784], "FP32")
    given.set_data_from_numpy(x)
    result = client(server).infer(MODEL, [given])
    assert result.get_output("output__0")["parameters"]["binary_data_size"] == 3 * 10 * 4
    np.testing.assert_array_equal(result.as_numpy("output__0"), expected(tmp_path, x))


def test_infer_errors_reach_the_client(server):
    c = client(server)
    given = httpclient.InferInput("input__0", [2, 783], "FP32")
    given.set_data_from_numpy(np.zeros((2, 783), np.float32))
    with pytest.raises(InferenceServerException, match="shape"):
        c.infer(MODEL, [given])
    given = httpclient.InferInput("input__0", [2, 784], "INT64")
    given.set_data_from_numpy(np.zeros((2, 784), np.int64))
    with pytest.raises(InferenceServerException, match="INT64"):
        c.infer(MODEL, [given])


def oip_json(shape, data, datatype="FP32", name="input__0"):
    return json.dumps({"inputs": [{"name": name, "datatype": datatype, "shape": shape, "data": data}]})


def binary_body(shape, payload, size=None, datatype="FP32"):
    """(body, headers) of a binary infer request whose binary_data_size is size
    (default: the payload's length)."""
    header = json.dumps({"inputs": [{"name": "input__0", "datatype": datatype, "shape": shape,
                                     "parameters": {"binary_data_size": len(payload) if size is None else size}}]})
    return header.encode() + payload, {"Inference-Header-Content-Length": str(len(header))}


def error_cases():
    """(description, method, path, body, headers, status)."""
    infer = "/v2/models/%s/infer" % MODEL
    row = [0.5] * 784
    ok_bytes = np.zeros((2, 784), np.float32).tobytes()
    return [
        ("an unknown model", "POST", "/v2/models/nothing/infer", oip_json([1, 784], row), None, 404),
        ("an unknown model's metadata", "GET", "/v2/models/nothing", None, None, 404),
        ("an unknown version", "GET", "/v2/models/%s/versions/2" % MODEL, None, None, 404),
        ("an unknown route", "GET", "/v2/models/%s/config" % MODEL, None, None, 404),
        ("an unknown path", "GET", "/v3", None, None, 404),
        ("GET infer", "GET", infer, None, None, 405),
        ("POST metadata", "POST", "/v2/models/%s" % MODEL, b"{}", None, 405),
        ("DELETE health", "DELETE", "/v2/health/ready", None, None, 405),
        ("an unknown datatype", "POST", infer, oip_json([1, 784], row, "FP8"), None, 400),
        ("BYTES", "POST", infer, oip_json([1, 784], ["a"] * 784, "BYTES"), None, 400),
        ("the model's datatype differs", "POST", infer, oip_json([1, 784], [0] * 784, "INT64"), None, 400),
        ("a short row", "POST", infer, oip_json([1, 783], row[:-1]), None, 400),
        ("shape and data disagree", "POST", infer, oip_json([2, 784], row), None, 400),
        ("a string in FP32 data", "POST", infer, oip_json([1, 784], row[:-1] + ["1.5"]), None, 400),
        ("true in FP32 data", "POST", infer, oip_json([1, 784], row[:-1] + [True]), None, 400),
        ("past FP32", "POST", infer, oip_json([1, 784], row[:-1] + [1e39]), None, 400),
        ("an unknown input", "POST", infer, oip_json([1, 784], row, name="x"), None, 400),
        ("an unknown output", "POST", infer,
         json.dumps({"inputs": json.loads(oip_json([1, 784], row))["inputs"], "outputs": [{"name": "y"}]}), None, 400),
        ("not JSON", "POST", infer, b"inputs=1", None, 400),
        ("no inputs", "POST", infer, b'{"inputs": []}', None, 400),
        ("a byte count short of the shape", "POST", infer, *binary_body([2, 784], ok_bytes[:-4]), 400),
        ("bytes past the tensors", "POST", infer, *binary_body([2, 784], ok_bytes + b"\0" * 4, len(ok_bytes)), 400),
        ("a binary_data_size past the body", "POST", infer, *binary_body([2, 784], ok_bytes[:-8], len(ok_bytes)), 400),
        ("a header length past the body", "POST", infer, b'{"inputs": []}',
         {"Inference-Header-Content-Length": "99"}, 400),
        ("a compressed body", "POST", infer, oip_json([1, 784], row), {"Content-Encoding": "gzip"}, 415),
    ]


def test_error_paths_get_their_status_and_a_kserve_body(server):
    pids = server.worker_pids()
    for description, method, path, body, headers, status in error_cases():
        got, answer = server.request(method, path, body, headers)
        assert got == status, "%s: got %d %s" % (description, got, answer)
        assert isinstance(answer, dict) and set(answer) == {"error"} and answer["error"], description
    # A body over the limit is refused from its Content-Length, before it is read.
    got, answer = raw_request(server, "POST", "/v2/models/%s/infer" % MODEL,
                              [("Content-Length", str(2 << 20))], b'{"inputs": [' + b"0," * 1000)
    assert got == 413 and answer["error"]
    assert server.worker_pids() == pids, "a worker died:\n" + server.log()
    assert "Traceback" not in server.log()


def test_a_learning_step_over_the_command_equals_one_in_process(tmp_path):
    # One worker: without --shared each worker learns on its own copy.
    path = weights_file(tmp_path)
    server = Server(tmp_path, path, 1, command=serve_command(path, 1, "--learn", "0.05"))
    try:
        server.wait_ready()
        x, labels = rows(4, 9), np.array([0, 1, 2, 3])
        servable = ac.serve.load_model(str(path), lr=0.05)
        want_loss = servable.learn({"input__0": x}, labels)
        status, answer = server.post("/learn", {"inputs": x.tolist(), "labels": labels.tolist()})
        assert status == 200 and answer["loss"] == pytest.approx(want_loss, rel=1e-6)
        given = httpclient.InferInput("input__0", [4, 784], "FP32")
        given.set_data_from_numpy(x)
        got = client(server).infer(MODEL, [given]).as_numpy("output__0")
        np.testing.assert_array_equal(got, servable.infer({"input__0": x})["output__0"])
        assert np.abs(got - expected(tmp_path, x)).max() > 1e-3     # the step changed the answer
    finally:
        server.stop()


def test_a_program_file_is_served(tmp_path):
    ac.manual_seed(3)
    module = ac.nn.Sequential(ac.nn.Linear(6, 5), ac.nn.Tanh(), ac.nn.Linear(5, 2))
    example = ac.randn(4, 6)
    path = tmp_path / "tiny.acp"
    ac.export(module, example, str(path))
    server = Server(tmp_path, path, 1, command=serve_command(path, 1))
    try:
        c = client(server.wait_ready())
        assert c.get_model_metadata("tiny")["inputs"] == [{"name": "input__0", "datatype": "FP32", "shape": [4, 6]}]
        x = np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)
        given = httpclient.InferInput("input__0", [4, 6], "FP32")
        given.set_data_from_numpy(x)
        with ac.no_grad():
            want = module(ac.from_numpy(x)).numpy()
        np.testing.assert_array_equal(c.infer("tiny", [given]).as_numpy("output__0"), want)
        given = httpclient.InferInput("input__0", [3, 6], "FP32")      # the program takes 4 rows
        given.set_data_from_numpy(x[:3])
        with pytest.raises(InferenceServerException, match="shape"):
            c.infer("tiny", [given])
    finally:
        server.stop()


def test_the_command_refuses_a_missing_file(tmp_path):
    done = subprocess.run(serve_command(tmp_path / "none.safetensors", 1)(free_port()), cwd=ROOT,
                          capture_output=True, text=True, timeout=START_SECONDS)
    assert done.returncode != 0 and "none.safetensors" in done.stderr and "no such file" in done.stderr
