"""test_serve.py - demos/serve.py under gunicorn, over loopback.

Each test starts its own gunicorn (--preload, 4 threads a worker) on a free
port with weights it wrote itself, and stops it at the end, whatever happened.
Answers are checked against a float64 NumPy forward of the same weights.

/learn is checked on one worker: every worker holds its own copy of the
weights (they load before the fork), so only with one worker do concurrent
steps all land on the same copy. N concurrent steps on the same rows must
equal N sequential NumPy steps: the losses they answer, and the predictions
after. A torn or lost update would repeat a loss or shift the predictions.
(Under CPython's GIL, steps left unlocked overlap only now and then, so a
missing lock is caught some of the time, not every time.)
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("gunicorn")

import aicraft as ac  # noqa: E402
from aicraft import nn  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import serve_hostile  # noqa: E402
START_SECONDS = 30
REQUEST_SECONDS = 20


# ---- the service -------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """gunicorn serving demos.serve:app, or what command(port) (an argv) starts with
    `workers` workers; stop() ends it and its workers."""

    def __init__(self, tmp_path, weights, workers, env=None, command=None):
        self.port = free_port()
        self.log_path = tmp_path / ("gunicorn-%d.log" % self.port)
        self.workers = workers
        environment = dict(os.environ, AICRAFT_WEIGHTS=str(weights), AC_NUM_THREADS="1")
        environment.pop("SERVE_BACKEND", None)
        environment.update(env or {})
        if command is None:
            argv = [sys.executable, "-m", "gunicorn", "-c", "demos/gunicorn_conf.py", "--no-control-socket",
                    "--preload", "-w", str(workers), "--threads", "4", "-b", "127.0.0.1:%d" % self.port,
                    "demos.serve:app"]
        else:
            argv = command(self.port)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                argv, cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)

    def log(self):
        return self.log_path.read_text(errors="replace")

    def wait_ready(self):
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail("gunicorn exited with %d:\n%s" % (self.process.returncode, self.log()))
            try:
                if self.request("GET", "/healthz")[0] == 200 and len(self.worker_pids()) == self.workers:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        pytest.fail("gunicorn did not answer within %d s:\n%s" % (START_SECONDS, self.log()))

    def worker_pids(self):
        """The pids whose parent is the gunicorn master."""
        pids = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open("/proc/%s/stat" % entry) as f:
                        stat = f.read()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.process.pid:
                    pids.add(int(entry))
        return pids

    def request(self, method, path, body=None, headers=None):
        """(status, parsed JSON or text) of one request on a new connection."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_SECONDS)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            data = response.read()
            if response.getheader("Content-Type") == "application/json":
                return response.status, json.loads(data)
            return response.status, data.decode()
        finally:
            conn.close()

    def post(self, path, payload):
        return self.request("POST", path, json.dumps(payload))

    def metrics(self):
        status, text = self.request("GET", "/metrics")
        assert status == 200
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def stop(self):
        if self.process.poll() is None:
            # gunicorn's quick shutdown, sent to the master alone: workers that get
            # SIGINT too (as from killpg) sometimes hang in gunicorn 27's exit.
            os.kill(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


@pytest.fixture
def serve(tmp_path):
    """serve(workers, **env) -> a started Server; every one is stopped at the end."""
    servers = []

    def start(workers, weights=None, **env):
        server = Server(tmp_path, weights or weights_file(tmp_path), workers, env)
        servers.append(server)
        return server.wait_ready()

    yield start
    for server in servers:
        server.stop()


# ---- weights and the NumPy model ---------------------------------------------

def weights_file(tmp_path):
    path = tmp_path / "mlp.safetensors"
    if not path.exists():
        ac.manual_seed(7)
        model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        ac.save(model.state_dict(), str(path))
    return path


def load_weights(path):
    """[W1, b1, W2, b2] as float64 arrays."""
    state = ac.load(str(path))
    return [state[name].numpy().astype(np.float64) for name in ("0.weight", "0.bias", "2.weight", "2.bias")]


def softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def forward(weights, x):
    w1, b1, w2, b2 = weights
    return softmax(np.maximum(x @ w1.T + b1, 0.0) @ w2.T + b2)


def sgd_step(weights, x, labels, lr):
    """(new weights, loss): one SGD step of mean cross entropy, by hand."""
    w1, b1, w2, b2 = weights
    pre = x @ w1.T + b1
    hidden = np.maximum(pre, 0.0)
    probs = softmax(hidden @ w2.T + b2)
    rows = np.arange(len(x))
    loss = -np.log(probs[rows, labels]).mean()
    dz = probs.copy()
    dz[rows, labels] -= 1.0
    dz /= len(x)
    dh = (dz @ w2) * (pre > 0)
    grads = [dh.T @ x, dh.sum(0), dz.T @ hidden, dz.sum(0)]
    return [w - lr * g for w, g in zip(weights, grads)], loss


def rows(n, seed):
    """n input rows, float32 values sent exactly through JSON."""
    return np.random.default_rng(seed).standard_normal((n, 784)).astype(np.float32)


def check_prediction(weights, x, answer):
    status, result = answer
    assert status == 200, result
    probs = np.array(result["probs"])
    expected = forward(weights, x.astype(np.float64))
    np.testing.assert_allclose(probs, expected, rtol=1e-4, atol=1e-6)
    classes = np.array(result["classes"])
    assert classes.shape == (len(x),)
    top2 = np.sort(expected, 1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-5       # a near tie may go either way in float32
    np.testing.assert_array_equal(classes[clear], expected.argmax(1)[clear])
    np.testing.assert_array_equal(classes, probs.argmax(1))


def predict(server, x):
    return server.post("/predict", {"inputs": x.tolist()})


# ---- tests -------------------------------------------------------------------

def test_concurrent_predictions_equal_numpy_forward(serve, tmp_path):
    # Two pool threads: the master ran a full batch on the pool before forking,
    # so the workers' large ops run on a pool rebuilt after the fork.
    server = serve(2, AC_NUM_THREADS="2")
    weights = load_weights(weights_file(tmp_path))
    cases = [rows([1, 4, 1, 32, 1, 2][i % 6], seed=i) for i in range(300)]
    bodies = [json.dumps({"inputs": x.tolist()}) for x in cases]
    # 256 rows fit in 1 MB only when written short: one decimal.
    full = np.round(rows(256, seed=1000).astype(np.float64), 1)
    bodies.append(json.dumps({"inputs": full.tolist()}, separators=(",", ":")))
    cases.append(full.astype(np.float32))
    assert len(bodies[-1]) < 1 << 20

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda body: server.request("POST", "/predict", body), bodies))
    for x, answer in zip(cases, answers):
        check_prediction(weights, x, answer)


def bad_requests():
    """(description, method, path, body, headers, expected status)."""
    good_row = [0.5] * 784
    post = "POST"
    return [
        ("malformed JSON", post, "/predict", b'{"inputs": [[1, 2', None, 400),
        ("not UTF-8", post, "/predict", b'{"inputs": [[\xff\xfe]]}', None, 400),
        ("nesting deeper than the parser goes", post, "/predict", b"[" * 200000, None, 400),
        ("not an object", post, "/predict", b"[[0.5]]", None, 400),
        ("no inputs", post, "/predict", b"{}", None, 400),
        ("an unknown key", post, "/predict", json.dumps({"inputs": [good_row], "x": 1}), None, 400),
        ("inputs not a list", post, "/predict", json.dumps({"inputs": 5}), None, 400),
        ("no rows", post, "/predict", json.dumps({"inputs": []}), None, 400),
        ("a short row", post, "/predict", json.dumps({"inputs": [[0.5] * 783]}), None, 400),
        ("a long row", post, "/predict", json.dumps({"inputs": [[0.5] * 785]}), None, 400),
        ("ragged rows", post, "/predict", json.dumps({"inputs": [good_row, good_row[:-1]]}), None, 400),
        ("a flat row", post, "/predict", json.dumps({"inputs": good_row}), None, 400),
        ("rows nested too deep", post, "/predict", json.dumps({"inputs": [[good_row]]}), None, 400),
        ("a string", post, "/predict", json.dumps({"inputs": [good_row[:-1] + ["a"]]}), None, 400),
        ("a number as a string", post, "/predict", json.dumps({"inputs": [good_row[:-1] + ["1.5"]]}), None, 400),
        ("null", post, "/predict", json.dumps({"inputs": [good_row[:-1] + [None]]}), None, 400),
        ("true", post, "/predict", json.dumps({"inputs": [good_row[:-1] + [True]]}), None, 400),
        ("an object", post, "/predict", json.dumps({"inputs": [good_row[:-1] + [{}]]}), None, 400),
        ("NaN", post, "/predict", json.dumps({"inputs": [good_row[:-1] + [float("nan")]]}), None, 400),
        ("Infinity", post, "/predict", json.dumps({"inputs": [good_row[:-1] + [float("-inf")]]}), None, 400),
        ("1e400", post, "/predict", '{"inputs": [[%s1e400]]}' % ("0.5," * 783), None, 400),
        ("past float32", post, "/predict", json.dumps({"inputs": [good_row[:-1] + [1e39]]}), None, 400),
        ("an integer past float", post, "/predict", '{"inputs": [[%s%s]]}' % ("0," * 783, "9" * 400), None, 400),
        ("257 rows", post, "/predict", json.dumps({"inputs": [[0] * 784] * 257}), None, 400),
        ("an empty body", post, "/predict", b"", None, 400),
        ("labels missing", post, "/learn", json.dumps({"inputs": [good_row]}), None, 400),
        ("too few labels", post, "/learn", json.dumps({"inputs": [good_row] * 2, "labels": [1]}), None, 400),
        ("a label past the classes", post, "/learn", json.dumps({"inputs": [good_row], "labels": [10]}), None, 400),
        ("a negative label", post, "/learn", json.dumps({"inputs": [good_row], "labels": [-1]}), None, 400),
        ("a fractional label", post, "/learn", json.dumps({"inputs": [good_row], "labels": [1.5]}), None, 400),
        ("a true label", post, "/learn", json.dumps({"inputs": [good_row] * 2, "labels": [1, True]}), None, 400),
        ("a label list of lists", post, "/learn", json.dumps({"inputs": [good_row], "labels": [[1]]}), None, 400),
        ("a row too short to learn", post, "/learn", json.dumps({"inputs": [[0.5]], "labels": [1]}), None, 400),
        ("GET /predict", "GET", "/predict", None, None, 405),
        ("PUT /learn", "PUT", "/learn", b"{}", None, 405),
        ("POST /healthz", post, "/healthz", b"{}", None, 405),
        ("DELETE /metrics", "DELETE", "/metrics", None, None, 405),
        ("an unknown path", "GET", "/weights", None, None, 404),
        ("the root", "GET", "/", None, None, 404),
    ]


def raw_request(server, method, path, headers, body_part):
    """Send headers and part of a body, then read the answer without sending the rest."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=REQUEST_SECONDS)
    try:
        conn.putrequest(method, path)
        for name, value in headers:
            conn.putheader(name, value)
        conn.endheaders()
        conn.send(body_part)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_bad_requests_get_4xx_and_change_nothing(serve, tmp_path):
    server = serve(2)
    weights = load_weights(weights_file(tmp_path))
    pids = server.worker_pids()
    for description, method, path, body, headers, expected in bad_requests():
        status, answer = server.request(method, path, body, headers)
        assert status == expected, "%s: got %d %s" % (description, status, answer)
        assert isinstance(answer, dict) and answer["error"], description
    # A body over 1 MB is refused from its Content-Length, before it is read.
    status, answer = raw_request(server, "POST", "/predict",
                                 [("Content-Length", str(2 << 20))], b'{"inputs": [[' + b"0," * 1000)
    assert status == 413 and answer["error"]
    # No Content-Length (a chunked body): refused too.
    status, answer = raw_request(server, "POST", "/predict", [("Transfer-Encoding", "chunked")],
                                 b"2\r\n{}\r\n0\r\n\r\n")
    assert status == 411 and answer["error"]

    assert server.worker_pids() == pids, "a worker died:\n" + server.log()
    x = rows(32, seed=5)
    for _ in range(4):       # both workers, most likely
        check_prediction(weights, x, predict(server, x))
    assert "Traceback" not in server.log()


def test_hostile_mix_gets_its_statuses_and_no_dropped_connection(serve):
    # bench/serve_hostile.py's mix, each request on its own connection: valid
    # ones, a truncated body, non-JSON, a short row, NaN, 1e999, 257 rows, a
    # 2 MB body (413 from its Content-Length), random bytes, a random request line.
    server = serve(2)
    pids = server.worker_pids()
    kinds = len(serve_hostile.mix())
    assert serve_hostile.run(server.port, 4 * kinds) == []
    assert server.worker_pids() == pids, "a worker died:\n" + server.log()
    assert "Traceback" not in server.log()


def test_concurrent_learning_equals_sequential_steps(serve, tmp_path):
    lr, steps = 0.002, 40
    server = serve(1, AICRAFT_LR=str(lr))
    # Few rows of short numbers: a request is read in far less time than its
    # step takes, so concurrent steps would overlap if nothing kept them apart.
    x = np.random.default_rng(11).integers(-1, 2, (4, 784)).astype(np.float32)
    labels = np.arange(4)
    payload = {"inputs": x.astype(int).tolist(), "labels": labels.tolist()}
    start = threading.Barrier(steps)

    def learn(_):
        start.wait(REQUEST_SECONDS)
        return server.post("/learn", payload)

    with ThreadPoolExecutor(steps) as pool:
        answers = list(pool.map(learn, range(steps)))
    assert all(status == 200 for status, _ in answers), answers

    weights, losses = load_weights(weights_file(tmp_path)), []
    for _ in range(steps):
        before = weights
        weights, loss = sgd_step(weights, x.astype(np.float64), labels, lr)
        losses.append(loss)
    expected = forward(weights, x.astype(np.float64))
    # The check can see one step more or less, and tell each step's loss apart.
    assert np.abs(forward(before, x.astype(np.float64)) - expected).max() > 1e-3
    assert min(np.diff(sorted(losses))) > 1e-3

    # Each step saw the weights all the steps before it left: the answered
    # losses are the sequential ones, each once, in whatever order they came.
    np.testing.assert_allclose(sorted(a["loss"] for _, a in answers), sorted(losses), rtol=1e-4)
    status, result = predict(server, x)
    assert status == 200
    np.testing.assert_allclose(result["probs"], expected, rtol=1e-3, atol=1e-5)


def test_a_diverged_model_answers_500_not_null(serve):
    # One step at this rate makes the weights NaN. JSON has no NaN, and the
    # service's JSON writer would put null in its place: it must refuse instead.
    server = serve(1, AICRAFT_LR="1e38")
    x = rows(4, seed=30)
    payload = {"inputs": x.tolist(), "labels": [0, 1, 2, 3]}
    status, answer = server.post("/learn", payload)
    assert status == 200 and np.isfinite(answer["loss"])
    for path, body in (("/predict", {"inputs": x.tolist()}), ("/learn", payload)):
        status, answer = server.post(path, body)
        assert status == 500 and answer["error"], (path, status, answer)
    assert server.request("GET", "/healthz") == (200, {"status": "ok"})


def test_memory_in_use_is_flat_over_2000_requests(serve):
    server = serve(1)
    # Short numbers keep the 2,000 requests quick to parse.
    small = np.round(rows(1, seed=20).astype(np.float64), 2)
    batch = np.round(rows(8, seed=21).astype(np.float64), 2)
    bodies = [
        ("/predict", json.dumps({"inputs": small.tolist()})),
        ("/predict", json.dumps({"inputs": batch.tolist()})),
        ("/learn", json.dumps({"inputs": batch.tolist(), "labels": list(range(8))})),
        ("/predict", json.dumps({"inputs": [[0.5] * 783]})),                 # refused: 400
        ("/predict", '{"inputs": [[%sNaN]]}' % ("0.5," * 783)),              # refused: 400
        ("/predict", '{"inputs": [[0.5, '),                                 # refused: 400
    ]
    expected_status = [200, 200, 200, 400, 400, 400]

    def send(count, offset):
        def one(i):
            path, body = bodies[(offset + i) % len(bodies)]
            return server.request("POST", path, body)[0]
        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(one, range(count)))
        assert statuses == [expected_status[(offset + i) % len(bodies)] for i in range(count)]

    send(100, 0)
    first = server.metrics()
    send(1900, 100)
    after = server.metrics()
    for name in ("aicraft_bytes_in_use", "aicraft_live_tensors", "aicraft_live_nodes"):
        assert after[name] == first[name], name
    assert after['serve_requests_total{path="/learn",status="200"}'] >= 300
    # The 1,900 requests and the first /metrics, each timed once.
    assert after["serve_request_seconds_count"] - first["serve_request_seconds_count"] == 1901


def test_missing_weights_stop_the_start(tmp_path):
    environment = dict(os.environ, AICRAFT_WEIGHTS=str(tmp_path / "none.safetensors"))
    done = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", "demos/gunicorn_conf.py", "--no-control-socket", "--preload", "-w", "2",
         "-b", "127.0.0.1:%d" % free_port(), "demos.serve:app"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=START_SECONDS)
    assert done.returncode != 0
    assert "none.safetensors" in done.stderr and "no such file" in done.stderr


def test_quantized_service_predicts_and_refuses_to_learn(serve, tmp_path):
    weights = weights_file(tmp_path)
    server = serve(1, AICRAFT_QUANTIZE="1")
    x = rows(5, 21)
    status, result = predict(server, x)
    assert status == 200
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    model.load_state_dict(ac.load(str(weights)))
    quantized = ac.quantization.quantize_dynamic(model)
    with ac.no_grad():
        expected = quantized(ac.tensor(x)).softmax(1).numpy()
    np.testing.assert_allclose(np.array(result["probs"]), expected, rtol=1e-6, atol=1e-7)
    status, result = server.post("/learn", {"inputs": x.tolist(), "labels": [0] * 5})
    assert status == 409 and "int8" in result["error"]
    float_bytes = 4 * (784 * 128 + 128 + 128 * 10 + 10)
    assert 0 < server.metrics()['aicraft_weight_bytes{model="mnist"}'] <= 0.27 * float_bytes
    # an already quantized file is served as it is, without AICRAFT_QUANTIZE
    int8_path = tmp_path / "mlp_int8.safetensors"
    ac.save(quantized.state_dict(), str(int8_path))
    server = serve(1, weights=int8_path)
    status, result = predict(server, x)
    assert status == 200
    np.testing.assert_allclose(np.array(result["probs"]), expected, rtol=1e-6, atol=1e-7)
    assert server.post("/learn", {"inputs": x.tolist(), "labels": [0] * 5})[0] == 409
