"""bench/serve_backends.py and bench/serve_requests.py: the MNIST MLP on aicraft,
PyTorch and ONNX Runtime computes the same probabilities, and the requests
bench/serve_load.sh sends carry the rows they say, in JSON and in binary."""
import io
import os
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("tritonclient.http")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import serve_backends  # noqa: E402
import serve_requests  # noqa: E402

from aicraft.serve import make_app  # noqa: E402


def numpy_mlp(weights, x):
    """The reference: the MLP in float64 NumPy."""
    w = {name: v.numpy().astype(np.float64) for name, v in weights.items()}
    hidden = np.maximum(x @ w["0.weight"].T + w["0.bias"], 0)
    logits = hidden @ w["2.weight"].T + w["2.bias"]
    e = np.exp(logits - logits.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def weights():
    return serve_backends.random_weights(seed=3)


@pytest.mark.parametrize("backend", serve_backends.BACKENDS)
@pytest.mark.parametrize("rows", [1, 32, 257])
def test_each_backend_computes_the_mlp(weights, backend, rows):
    x = np.random.default_rng(rows).normal(0, 1, (rows, 784)).astype(np.float32)
    servable = serve_backends.servable(backend, weights)
    out = servable.infer({"input__0": x})["output__0"]
    assert out.dtype == np.float32 and out.shape == (rows, 10)
    np.testing.assert_allclose(out, numpy_mlp(weights, x), rtol=0, atol=1e-5)


def test_the_backends_agree_and_describe_the_same_model(weights):
    x = np.random.default_rng(0).normal(0, 2, (32, 784)).astype(np.float32)
    servables = [serve_backends.servable(b, weights) for b in serve_backends.BACKENDS]
    outs = [s.infer({"input__0": x})["output__0"] for s in servables]
    for out in outs[1:]:
        np.testing.assert_allclose(out, outs[0], rtol=0, atol=1e-5)
    assert [s.platform for s in servables] == ["aicraft", "pytorch", "onnxruntime"]
    for s in servables:
        assert (s.name, s.version) == ("mnist_mlp", "1")
        assert [(t.name, t.datatype, tuple(t.shape)) for t in s.inputs] == [("input__0", "FP32", (-1, 784))]
        assert [(t.name, t.datatype, tuple(t.shape)) for t in s.outputs] == [("output__0", "FP32", (-1, 10))]


def test_the_onnx_graph_is_the_mlp_with_a_dynamic_batch(weights):
    model = serve_backends.onnx_model(weights)
    assert [node.op_type for node in model.graph.node] == ["Gemm", "Relu", "Gemm", "Softmax"]
    (batch, features), = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                          for i in model.graph.input]
    assert (batch, features) == ("batch", 784)


def test_an_unknown_backend_is_refused(weights):
    with pytest.raises(ValueError, match="backend 'tensorflow'; use one of aicraft, torch, onnxruntime"):
        serve_backends.servable("tensorflow", weights)


def split_request(raw):
    """(headers dict, body) of one whole HTTP request."""
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST %s HTTP/1.1" % serve_requests.PATH
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert int(headers["Content-Length"]) == len(body)
    return headers, body


def test_the_request_files_carry_the_same_rows_in_json_and_binary(tmp_path):
    import orjson
    serve_requests.write(str(tmp_path))
    x = serve_requests.rows().astype(np.float32)
    for rows in (1, 32):
        headers, body = split_request((tmp_path / ("json_%d.http" % rows)).read_bytes())
        (tensor,) = orjson.loads(body)["inputs"]
        assert headers["Content-Type"] == "application/json" and tensor["shape"] == [rows, 784]
        np.testing.assert_array_equal(np.asarray(tensor["data"], np.float32).reshape(rows, 784), x[:rows])

        headers, body = split_request((tmp_path / ("binary_%d.http" % rows)).read_bytes())
        length = int(headers["Inference-Header-Content-Length"])
        header = orjson.loads(body[:length])
        assert header["inputs"][0]["parameters"]["binary_data_size"] == rows * 784 * 4 == len(body) - length
        assert header["outputs"] == [{"name": "output__0", "parameters": {"binary_data": True}}]
        np.testing.assert_array_equal(np.frombuffer(body[length:], "<f4").reshape(rows, 784), x[:rows])


def call(app, raw):
    """One whole HTTP request through a WSGI app: (status line, headers dict, body)."""
    headers, body = split_request(raw)
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": serve_requests.PATH, "QUERY_STRING": "",
               "CONTENT_LENGTH": headers["Content-Length"], "CONTENT_TYPE": headers["Content-Type"],
               "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr}
    if "Inference-Header-Content-Length" in headers:
        environ["HTTP_INFERENCE_HEADER_CONTENT_LENGTH"] = headers["Inference-Header-Content-Length"]
    answer = {}
    out = b"".join(app(environ, lambda status, h: answer.update(status=status, headers=dict(h))))
    return answer["status"], answer["headers"], out


def test_every_backend_answers_the_bench_requests_alike_through_make_app(tmp_path, weights):
    import tritonclient.http as triton
    serve_requests.write(str(tmp_path))
    apps = [make_app(serve_backends.servable(b, weights)) for b in serve_backends.BACKENDS]
    x = serve_requests.rows().astype(np.float32)
    for name in serve_requests.NAMES:
        raw = (tmp_path / (name + ".http")).read_bytes()
        rows = 1 if name.endswith("_1") else 32
        for app in apps:
            status, headers, body = call(app, raw)
            assert status.startswith("200"), body[:300]
            length = headers.get("Inference-Header-Content-Length")
            assert (length is not None) == name.startswith("binary")
            result = triton.InferResult.from_response_body(body, header_length=int(length) if length else None)
            np.testing.assert_allclose(result.as_numpy("output__0"), numpy_mlp(weights, x[:rows]),
                                       rtol=0, atol=1e-5)


WRK_REPORT = """Running 2s test @ http://127.0.0.1:8732
  1 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.02ms  812.40us  14.88ms   92.10%
    Req/Sec     7.93k     0.98k    8.79k    85.00%
  Latency Distribution
     50%  842.00us
     75%    1.08ms
     90%    1.52ms
     99%    1.20s
  15779 requests in 2.00s, 14.24MB read
Requests/sec:   7884.66
Transfer/sec:      7.12MB
"""


def test_serve_report_reads_wrk_in_every_unit(tmp_path):
    import serve_report
    path = tmp_path / "wrk"
    path.write_text(WRK_REPORT)
    assert serve_report.read_wrk(str(path)) == {"rps": 7884.66, "requests": 15779, "p50": 0.842, "p99": 1200.0}
    assert serve_report.milliseconds("2.50m") == 150000.0
