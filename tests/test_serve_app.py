"""test_serve_app.py - make_app's WSGI application called in this process, as gunicorn
calls it: what it serves, flat memory over thousands of mixed requests, the memory limit
answered 503 with the worker going on, and the statuses of its refusals."""
import gc
import http
import io
import sys
import warnings

import numpy as np
import orjson
import pytest

import aicraft as ac
from aicraft import nn
from aicraft.serve import ModuleServable, ProgramServable, QueueFull, TensorSpec, make_app


def call(app, method, path, body=b"", headers=None):
    """(status, headers, body) of one request through the WSGI callable."""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(len(body)),
               "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr}
    environ.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in (headers or {}).items()})
    started = []
    result = app(environ, lambda status, headers: started.append((status, headers)))
    data = b"".join(result)
    if hasattr(result, "close"):
        result.close()
    status = int(started[0][0].split()[0])
    assert started[0][0] == "%d %s" % (status, http.HTTPStatus(status).phrase)
    return status, dict(started[0][1]), data


def infer_json(x, name="input__0"):
    return orjson.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape),
                                     "data": x.ravel().tolist()}]})


def infer_binary(x):
    header = orjson.dumps({"inputs": [{"name": "input__0", "datatype": "FP32", "shape": list(x.shape),
                                       "parameters": {"binary_data_size": x.nbytes}}],
                           "parameters": {"binary_data_output": True}})
    return header + x.tobytes(), {"Inference-Header-Content-Length": str(len(header))}


def mlp(seed=0, hidden=16):
    ac.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 3))


def learner(module, lr=0.1, compile=False):
    return ModuleServable(module, "clf", [TensorSpec("input__0", "FP32", (-1, 8))],
                          [TensorSpec("output__0", "FP32", (-1, 3))], nn.CrossEntropyLoss(),
                          ac.optim.SGD(module.parameters(), lr=lr), compile=compile)


def test_a_module_is_served_with_widths_from_its_linear_layers():
    module = mlp()
    app = make_app(module)
    status, _, body = call(app, "GET", "/v2/models/model")
    assert status == 200 and orjson.loads(body)["inputs"] == [{"name": "input__0", "datatype": "FP32", "shape": [-1, 8]}]
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    status, _, body = call(app, "POST", "/v2/models/model/versions/1/infer", infer_json(x))
    with ac.no_grad():
        np.testing.assert_array_equal(orjson.loads(body)["outputs"][0]["data"], module(ac.from_numpy(x)).numpy().ravel())
    assert call(app, "GET", "/v2/models/model/versions/1/ready")[0] == 200
    assert call(app, "POST", "/learn", orjson.dumps({"inputs": x.tolist(), "labels": [0] * 5}))[0] == 409
    with pytest.raises(TypeError, match="no Linear layer"):
        make_app(nn.ReLU())
    with pytest.raises(TypeError, match="neither an nn.Module nor a servable"):
        make_app(object())
    with pytest.raises(ValueError, match="named alike"):
        make_app([module, mlp(1)])
    with pytest.raises(ValueError, match="no models"):
        make_app([])


def test_several_models_each_under_its_name():
    a, b = mlp(1), mlp(2)
    app = make_app({"a": a, "b": b})
    x = np.ones((2, 8), np.float32)
    for name, module in (("a", a), ("b", b)):
        body, headers = infer_binary(x)
        status, answer_headers, answer = call(app, "POST", "/v2/models/%s/infer" % name, body, headers)
        assert status == 200
        length = int(answer_headers["Inference-Header-Content-Length"])
        with ac.no_grad():
            np.testing.assert_array_equal(np.frombuffer(answer[length:], np.float32).reshape(2, 3),
                                          module(ac.from_numpy(x)).numpy())
    status, _, body = call(app, "GET", "/v2/models/c")
    assert status == 404 and "unknown model 'c'" in orjson.loads(body)["error"]


def test_learn_takes_one_step_equal_to_the_same_step_in_process():
    served, reference = learner(mlp(4)), learner(mlp(4))
    app = make_app(served)
    x = np.random.default_rng(1).standard_normal((6, 8)).astype(np.float32)
    labels = np.array([0, 1, 2, 0, 1, 2])
    for _ in range(3):
        status, _, body = call(app, "POST", "/learn", orjson.dumps({"inputs": x.tolist(), "labels": labels.tolist()}))
        assert status == 200
        assert orjson.loads(body)["loss"] == reference.learn({"input__0": x}, labels)
    np.testing.assert_array_equal(served.infer({"input__0": x})["output__0"],
                                  reference.infer({"input__0": x})["output__0"])


def test_a_compiled_servable_gives_the_eager_bits_and_sees_each_step():
    eager, compiled = learner(mlp(7)), learner(mlp(7), compile=True)
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # every batch size recorded, none run eagerly
        for step in range(3):
            for rows in (1, 5, 1, 32, 0):
                x = ac.from_numpy(rng.standard_normal((rows, 8)).astype(np.float32))
                want, got = eager.infer({"input__0": x}), compiled.infer({"input__0": x})
                assert np.array_equal(got["output__0"].numpy(), want["output__0"].numpy()), (step, rows)
            x = rng.standard_normal((6, 8)).astype(np.float32)
            labels = ac.from_numpy(np.array([0, 1, 2, 0, 1, 2]))
            assert compiled.learn({"input__0": x}, labels) == eager.learn({"input__0": x}, labels)


@pytest.mark.parametrize("compile", [False, True])
def test_memory_is_flat_over_thousands_of_mixed_requests(compile):
    app = make_app(learner(mlp(5, hidden=64), compile=compile))
    rng = np.random.default_rng(2)
    one, batch = rng.standard_normal((1, 8)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
    binary, headers = infer_binary(batch)
    requests = [
        ("POST", "/v2/models/clf/infer", infer_json(one), None, 200),
        ("POST", "/v2/models/clf/infer", binary, headers, 200),
        ("POST", "/predict", orjson.dumps({"inputs": batch.tolist()}), None, 200),
        ("POST", "/learn", orjson.dumps({"inputs": batch.tolist(), "labels": [1] * 32}), None, 200),
        ("POST", "/v2/models/clf/infer", infer_json(one, name="x"), None, 400),
        ("POST", "/v2/models/clf/infer", binary[:-4], headers, 400),
        ("POST", "/v2/models/clf/infer", b"{\"inputs\": [", None, 400),
        ("POST", "/v2/models/none/infer", b"{}", None, 404),
        ("GET", "/v2/models/clf/infer", b"", None, 405),
        ("GET", "/metrics", b"", None, 200),
    ]

    def send(count):
        for i in range(count):
            method, path, body, headers, status = requests[i % len(requests)]
            assert call(app, method, path, body, headers)[0] == status, path

    app.warm_up()
    send(100)
    gc.collect()        # what earlier tests left to the collector goes now, not mid-count
    before = ac.memory_stats()
    send(3000)
    after = ac.memory_stats()
    for key in ("bytes_in_use", "live_tensors", "live_nodes"):
        assert after[key] == before[key], key


def test_past_the_memory_limit_a_request_gets_503_and_the_next_is_answered():
    module = nn.Sequential(nn.Linear(784, 4096), nn.ReLU(), nn.Linear(4096, 10))
    big = np.zeros((256, 784), np.float32)           # its hidden layer takes 4 MB
    small = np.zeros((1, 784), np.float32)
    try:
        app = make_app(module, memory_limit=ac.memory_stats()["bytes_in_use"] + (2 << 20))
        body, headers = infer_binary(big)
        for _ in range(3):
            status, _, answer = call(app, "POST", "/v2/models/model/infer", body, headers)
            assert status == 503 and "memory limit" in orjson.loads(answer)["error"]
            body_small, headers_small = infer_binary(small)
            assert call(app, "POST", "/v2/models/model/infer", body_small, headers_small)[0] == 200
    finally:
        ac.set_memory_limit(None)


class Refusing:
    """A servable whose infer raises what it is given."""
    name, version, platform = "r", "1", "test"
    inputs = [TensorSpec("input__0", "FP32", (-1, 2))]
    outputs = [TensorSpec("output__0", "FP32", (-1, 2))]

    def __init__(self, error):
        self.error = error

    def infer(self, inputs):
        raise self.error


@pytest.mark.parametrize("error, status", [(QueueFull(), 503), (MemoryError("past the limit"), 503),
                                           (RuntimeError("a bug"), 500)])
def test_what_a_servable_raises_becomes_a_status(error, status, capsys):
    app = make_app(Refusing(error))
    got, _, body = call(app, "POST", "/v2/models/r/infer", infer_json(np.zeros((1, 2), np.float32)))
    assert got == status and orjson.loads(body)["error"]
    assert ("Traceback" in capsys.readouterr().err) == (status == 500)
    assert call(app, "GET", "/v2/health/ready")[0] == 200


def test_predict_on_a_model_of_no_fixed_width_is_a_409():
    odd = type("Odd", (Refusing,), {"inputs": [TensorSpec("input__0", "FP32", (-1, -1))]})(None)
    status, _, body = call(make_app(odd), "POST", "/predict", orjson.dumps({"inputs": [[1, 2]]}))
    assert status == 409 and "/v2/models/r/infer" in orjson.loads(body)["error"]


class Hoarding:
    """A servable that keeps a tensor of every request (a leak in user code)."""
    name, version, platform = "h", "1", "test"
    inputs = [TensorSpec("input__0", "FP32", (-1, 2))]
    outputs = [TensorSpec("output__0", "FP32", (-1, 2))]

    def __init__(self):
        self.kept = []

    def infer(self, inputs):
        self.kept.append(ac.zeros(1024))
        return {"output__0": inputs["input__0"]}


def test_what_a_request_leaves_behind_ends_with_its_scope():
    servable = Hoarding()
    app = make_app(servable)
    body = infer_json(np.zeros((1, 2), np.float32))
    assert call(app, "POST", "/v2/models/h/infer", body)[0] == 200
    gc.collect()        # what earlier tests left to the collector goes now, not mid-count
    before = ac.memory_stats()["bytes_in_use"]
    for _ in range(50):
        assert call(app, "POST", "/v2/models/h/infer", body)[0] == 200
    assert ac.memory_stats()["bytes_in_use"] == before and len(servable.kept) == 51


def test_a_program_is_served_at_its_shapes_and_never_batched(tmp_path):
    module = mlp(6)
    ac.export(module, ac.zeros(2, 8), str(tmp_path / "p.acp"))
    # A batch of joined requests would not have the program's 2 rows: no batcher for it.
    app = make_app(ProgramServable(str(tmp_path / "p.acp"), "p"), max_batch_size=8)
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    status, _, body = call(app, "POST", "/v2/models/p/infer", infer_json(x))
    with ac.no_grad():
        want = module(ac.from_numpy(x)).numpy()
    assert status == 200 and orjson.loads(body)["outputs"][0]["data"] == want.ravel().tolist()
    status, _, body = call(app, "POST", "/v2/models/p/infer", infer_json(x[:1]))
    assert status == 400 and "the model takes [2, 8]" in orjson.loads(body)["error"]
    assert call(app, "POST", "/learn", orjson.dumps({"inputs": x.tolist(), "labels": [0, 1]}))[0] == 409



@pytest.mark.parametrize("method, path, size, expected", [
    ("POST", "/v2/models/model/infer", 2 << 20, 413),       # over max_body_bytes
    ("POST", "/predict", 20 << 20, 413),                     # past the drain bound too
    ("POST", "/v2/models/nowhere/infer", 3 << 20, 404),     # a body sent where none is taken
    ("POST", "/v2/health/ready", 3 << 20, 405),
])
def test_a_refused_body_is_answered_first_then_read_and_dropped_within_its_bound(method, path, size, expected):
    # A socket closed over unread bytes sends a reset, which can reach a client before
    # it has read its 4xx; so the service answers, then reads and drops what is left
    # (up to MAX_DRAIN_BYTES), when the server closes the response.
    from aicraft.serve.body import MAX_DRAIN_BYTES
    app = make_app(mlp())
    stream = io.BytesIO(b"0" * size)
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(size),
               "wsgi.input": stream, "wsgi.errors": sys.stderr}
    started = []
    result = app(environ, lambda status, headers: started.append(status))
    first = next(iter(result))
    assert int(started[0].split()[0]) == expected and b"error" in first
    assert stream.tell() == 0      # the answer does not wait for the body
    result.close()
    assert stream.tell() == min(size, MAX_DRAIN_BYTES)


def test_the_command_reads_sizes_counts_and_seconds_and_refuses_the_rest(capsys):
    from aicraft.serve.__main__ import parser
    args = parser().parse_args(["m.safetensors", "--memory-limit", "512M", "--max-body", "64kb",
                                "-w", "3", "--max-queue-delay", "0.005"])
    assert (args.memory_limit, args.max_body, args.workers, args.max_queue_delay) == (512 << 20, 64 << 10, 3, 0.005)
    for option, value, message in [("--memory-limit", "0", "'0' is not >= 1"),
                                   ("--memory-limit", "inf", "'inf' is not a size such as 512M"),
                                   ("--max-body", "12X", "'12X' is not a size such as 512M"),
                                   ("--workers", "0", "'0' is not >= 1"),
                                   ("--threads", "1.5", "'1.5' is not a whole number"),
                                   ("--max-queue-delay", "-1", "'-1' is not >= 0"),
                                   ("--max-queue-delay", "nan", "'nan' is not >= 0"),
                                   ("--timeout", "soon", "'soon' is not a whole number")]:
        with pytest.raises(SystemExit):
            parser().parse_args(["m.safetensors", option, value])
        assert message in capsys.readouterr().err


@pytest.mark.parametrize("rows, match", [
    ([[1.0] * 7 + [1e39]], "finite float32"),                 # past float32's range
    ([[1.0] * 7], "rows of 8 numbers"),                       # a short row
    ([[1.0] * 8, [1.0] * 7], "rows of 8 numbers"),            # ragged
    ([1.0] * 8, "rows of 8 numbers"),                          # flat, not rows
    ([[1.0] * 7 + [[2.0]]], "rows of 8 numbers"),             # a list among the numbers
])
def test_predict_names_what_is_wrong_with_its_rows(rows, match):
    status, _, body = call(make_app(mlp()), "POST", "/predict", orjson.dumps({"inputs": rows}))
    assert status == 400 and match in orjson.loads(body)["error"]


def test_predict_gives_the_softmax_of_the_logits_and_its_argmax():
    model = mlp(seed=4)
    x = np.random.default_rng(4).normal(0, 3, (5, 8)).astype(np.float32)
    status, _, body = call(make_app(model), "POST", "/predict", orjson.dumps({"inputs": x.tolist()}))
    w = {name: t.numpy().astype(np.float64) for name, t in model.state_dict().items()}
    logits = np.maximum(x @ w["0.weight"].T + w["0.bias"], 0) @ w["2.weight"].T + w["2.bias"]
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    answer = orjson.loads(body)
    assert status == 200 and answer["classes"] == probs.argmax(1).tolist()
    np.testing.assert_allclose(answer["probs"], probs, rtol=0, atol=1e-6)
