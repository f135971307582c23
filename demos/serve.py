"""serve.py - the MNIST MLP as a small WSGI service: predictions and online learning
in flat memory, under a real server.

    AICRAFT_WEIGHTS=data/mnist_mlp.safetensors AC_NUM_THREADS=1 \\
        gunicorn -c demos/gunicorn_conf.py --preload -w 2 --threads 4 -b 127.0.0.1:8000 demos.serve:app

    POST /predict  {"inputs": [[784 floats], ...]}        -> {"classes": [...], "probs": [[10 floats], ...]}
    POST /learn    {"inputs": [[784 floats], ...], "labels": [int, ...]}    -> {"loss": float}
    GET  /healthz  -> {"status": "ok"}
    GET  /metrics  Prometheus text: requests by path and status, a latency histogram,
                   libac's memory counters and the process's resident memory

Inputs are what the model takes: MNIST pixels in [0, 1], normalised as
demos/mnist_mlp.py trains on them ((x - 0.1307) / 0.3081), one row of 784 per
image, 1 to 256 rows a request, bodies up to 1 MB (a larger one is answered 413 and
read and dropped up to 16 MB, so that its client reads the 413). /learn takes one SGD step
(learning rate AICRAFT_LR, default 0.01) on the rows it is given.

Every request runs inside `with ac.checkpoint():`, so whatever the library
allocates for it is handed back when the request ends, answered or refused.
The weights load at import: under `gunicorn --preload` once, before the
workers fork. Each worker then holds its own copy, so /learn changes the
weights of the worker that answered it. One lock per worker serialises the
model's use: a step never interleaves with another step, and a prediction
sees the weights before a step or after it, never halfway.

AICRAFT_QUANTIZE=1 serves the model with int8 weights (ac.quantization.quantize_dynamic;
the weights file may be float32 or already quantized): predictions only, /learn
answers 409. The MLP's widths are read from the weights file, 784-128-10 as
demos/mnist_mlp.py trains it or wider; /metrics shows the bytes its weights take.

SERVE_BACKEND=torch serves the same weights through PyTorch with this same
WSGI code (demos/serve_torch.py), for bench/serve_load.sh's comparison.

JSON is read and written with orjson (a demo dependency, like gunicorn): a
32-row body holds 25,088 numbers, and the standard library's json took 3 ms
to read them, more than the rest of the request. It gives the same floats,
and writes each float so that it reads back as the same double.
"""
import bisect
import ctypes
import http
import io
import math
import os
import sys
import threading
import time
import traceback

import numpy as np
import orjson

import aicraft as ac
from aicraft import nn, optim

FEATURES, CLASSES = 784, 10
MAX_ROWS = 256
MAX_BODY_BYTES = 1 << 20
# What the service reads and drops of a body it refuses unread (413, 404, 405): a
# client that is still sending when the answer goes out then reads its answer,
# instead of a reset (a socket closed over unread bytes sends one). Past this,
# the connection may still be reset; the bound keeps a refused client's cost small.
MAX_DRAIN_BYTES = 16 << 20
DRAIN_SECONDS = 2.0
DRAIN_CHUNK = 64 << 10
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class AicraftMLP:
    """The MLP of the weights file (784-128-10 from demos/mnist_mlp.py) on aicraft:
    probabilities for rows, and one SGD step; int8 and predictions only when quantize."""

    def __init__(self, path, lr, quantize=False):
        state = ac.load(path)
        shapes = [state["%d.weight" % i].shape for i in range(0, len(state), 2) if "%d.weight" % i in state]
        quantized_file = any(name.endswith("weight_scale") for name in state)
        linear = nn.quantized.dynamic.Linear if quantized_file else nn.Linear   # no float copy of int8
        layers = []
        for out_features, in_features in shapes:
            layers += [linear(in_features, out_features), nn.ReLU()]
        self.model = nn.Sequential(*layers[:-1])
        self.model.load_state_dict(state)
        del state
        if quantize and not quantized_file:
            ac.quantization.quantize_dynamic(self.model, inplace=True)
        self.can_learn = not (quantize or quantized_file)
        self.weight_bytes = ac.quantization.weight_bytes(self.model)
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = optim.SGD(self.model.parameters(), lr=lr) if self.can_learn else None

    def predict(self, x):
        """(n, 10) float32 probabilities for x, a (n, 784) float32 array."""
        with ac.no_grad():
            return self.model(ac.from_numpy(x)).softmax(1).numpy()

    def learn(self, x, labels, update=True):
        """One SGD step on rows x with int64 labels; the loss before the step.
        update=False stops before the weights change (warm_up)."""
        loss = self.loss_fn(self.model(ac.from_numpy(x)), labels)
        # Zeroed, not dropped: the gradients stay allocated once, rather than
        # made anew by whichever request thread runs the next step.
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        if update:
            self.optimizer.step()
        return loss.item()


def bound_malloc():
    """Under glibc, keep a worker's freed memory from staying resident. By default
    each of a worker's threads gets its own malloc arena, and freed blocks under a
    threshold that rises to 32 MB stay in them: the hostile mix in
    bench/serve_hostile.py left about 37 MB more per worker after its first 1,300
    requests, 8 MB with these settings (the first use of the valid paths, which
    warm_up now moves to the worker's start). Set before the
    workers fork and start their threads; elsewhere this does nothing."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
    mallopt(M_ARENA_MAX, 1)                 # the model lock serialises the heavy work anyway
    mallopt(M_MMAP_THRESHOLD, 128 << 10)    # bodies and arrays past 128 KB go back on free
    mallopt(M_TRIM_THRESHOLD, 128 << 10)


# ---- requests ----------------------------------------------------------------

class BadRequest(Exception):
    """A request the service refuses: its status and a message for the client."""

    def __init__(self, status, message, headers=()):
        super().__init__(message)
        self.status = status
        self.headers = list(headers)


def read_json(environ, keys):
    """The body as a JSON object with exactly `keys`; BadRequest when it is not one."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        raise BadRequest(411, "the request needs a Content-Length") from None
    if length > MAX_BODY_BYTES:
        raise BadRequest(413, "the body is %d bytes; at most %d are taken" % (length, MAX_BODY_BYTES))
    if length <= 0:
        raise BadRequest(400, "the body is empty")
    body = environ["wsgi.input"].read(length)
    if len(body) != length:
        raise BadRequest(400, "the body ended after %d of %d bytes" % (len(body), length))
    # A valid body has a list per row (MAX_ROWS at most) and one per key (the list
    # of rows, the labels): one with more is refused unparsed, so that a long list
    # never becomes Python objects.
    if body.count(b"[") > MAX_ROWS + len(keys):
        raise BadRequest(400, "inputs must be a list of 1 to %d rows" % MAX_ROWS)
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:   # also for bad UTF-8 and nesting past 1024
        raise BadRequest(400, "the body is not JSON: %s" % str(exc)[:200]) from None
    if not isinstance(payload, dict) or set(payload) != set(keys):
        raise BadRequest(400, "the body must be a JSON object with the keys %s" % ", ".join(keys))
    # NumPy would read "1.5" as 1.5 and true as 1. A valid body has no strings
    # but its keys, and no 'r' or 'f' (the keys have neither; of JSON's other
    # tokens only true, false and Infinity do): three byte scans, not a walk
    # over every value.
    if body.count(b'"') != 2 * len(keys) or b"r" in body or b"f" in body:
        raise BadRequest(400, "inputs and labels must be numbers")
    return payload


def drain(environ):
    """Read and drop what is left of the request's body, up to MAX_DRAIN_BYTES and for
    at most DRAIN_SECONDS (each read waits DRAIN_SECONDS at most: a client that
    declares a body and never sends it holds no thread)."""
    try:
        left = min(int(environ.get("CONTENT_LENGTH") or 0), MAX_DRAIN_BYTES)
    except ValueError:
        return
    stream, sock = environ["wsgi.input"], environ.get("gunicorn.socket")
    deadline = time.monotonic() + DRAIN_SECONDS
    previous = sock.gettimeout() if sock is not None else None
    try:
        if sock is not None:
            sock.settimeout(DRAIN_SECONDS)
        while left > 0 and time.monotonic() < deadline:
            chunk = stream.read(min(left, DRAIN_CHUNK))
            if not chunk:
                break
            left -= len(chunk)
    except (OSError, ValueError):   # the client went away, or is too slow: nothing more to do
        pass
    finally:
        if sock is not None:
            try:
                sock.settimeout(previous)
            except OSError:
                pass


class DrainAfter:
    """A refusal's body, then drain(): the server sends the answer first (so a client
    that never sends its body still gets it at once) and calls close() after, which
    reads what is left of the refused body, so a client still sending it reads its
    answer instead of a reset."""

    def __init__(self, body, environ):
        self.body, self.environ = body, environ

    def __iter__(self):
        yield self.body

    def close(self):
        drain(self.environ)


def as_rows(rows):
    """rows (lists of 784 numbers) as a (n, 784) float32 array, in one conversion."""
    if not isinstance(rows, list) or not 1 <= len(rows) <= MAX_ROWS:
        raise BadRequest(400, "inputs must be a list of 1 to %d rows" % MAX_ROWS)
    try:
        with np.errstate(over="ignore"):      # past float32's range becomes inf, refused below
            x = np.asarray(rows, dtype=np.float32)
    except (ValueError, TypeError, OverflowError):
        x = None
    if x is None or x.ndim != 2 or x.shape[1] != FEATURES:
        raise BadRequest(400, "inputs must be rows of %d numbers each" % FEATURES)
    if not np.isfinite(x).all():
        raise BadRequest(400, "inputs must be finite float32 numbers")
    return x


def as_labels(labels, rows):
    """labels (ints in [0, 10), one per row) as an int64 array."""
    if not isinstance(labels, list) or len(labels) != rows:
        raise BadRequest(400, "labels must be a list of %d class indices, one per row" % rows)
    try:
        y = np.asarray(labels)
    except (ValueError, TypeError, OverflowError):
        y = None
    if y is None or y.dtype.kind not in "iu" or y.ndim != 1 or ((y < 0) | (y >= CLASSES)).any():
        raise BadRequest(400, "labels must be integers in [0, %d)" % CLASSES)
    return y.astype(np.int64)


# ---- metrics -----------------------------------------------------------------

class Metrics:
    """Request counts by path and status, and a latency histogram, for one worker."""

    def __init__(self, weight_bytes=None):
        self.weight_bytes = weight_bytes
        self.lock = threading.Lock()
        self.requests = {}
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self.seconds = 0.0

    def observe(self, path, status, seconds):
        with self.lock:
            self.requests[path, status] = self.requests.get((path, status), 0) + 1
            self.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
            self.seconds += seconds

    def render(self):
        with self.lock:
            requests, buckets, seconds = sorted(self.requests.items()), list(self.buckets), self.seconds
        lines = ["# HELP serve_requests_total Requests answered, by path and status.",
                 "# TYPE serve_requests_total counter"]
        lines += ['serve_requests_total{path="%s",status="%d"} %d' % (path, status, n)
                  for (path, status), n in requests]
        lines += ["# HELP serve_request_seconds Time from a request's arrival in the app to its answer.",
                  "# TYPE serve_request_seconds histogram"]
        total = 0
        for bound, n in zip(LATENCY_BUCKETS + ("+Inf",), buckets):
            total += n
            lines.append('serve_request_seconds_bucket{le="%s"} %d' % (bound, total))
        lines += ["serve_request_seconds_sum %.6f" % seconds, "serve_request_seconds_count %d" % total]
        stats = ac.memory_stats()
        for name, key, help_text in (
                ("aicraft_bytes_in_use", "bytes_in_use", "Bytes libac has allocated and not freed."),
                ("aicraft_peak_bytes", "peak_bytes", "Most bytes libac has had in use at once."),
                ("aicraft_live_tensors", "live_tensors", "Tensors libac holds."),
                ("aicraft_live_nodes", "live_nodes", "Autograd graph nodes libac holds."),
                ("aicraft_arena_reserved_bytes", "arena_reserved", "Bytes reserved by libac's scope arenas.")):
            lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name,
                      "%s %d" % (name, stats[key])]
        if self.weight_bytes is not None:
            lines += ["# HELP aicraft_weight_bytes Bytes the model's weights take (int8 when quantized).",
                      "# TYPE aicraft_weight_bytes gauge", "aicraft_weight_bytes %d" % self.weight_bytes]
        resident = resident_bytes()
        if resident is not None:
            lines += ["# HELP process_resident_memory_bytes Resident memory size in bytes.",
                      "# TYPE process_resident_memory_bytes gauge",
                      "process_resident_memory_bytes %d" % resident]
        return "\n".join(lines) + "\n"


def resident_bytes():
    """This process's resident memory, where /proc tells it (Linux); else None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


# ---- the app -----------------------------------------------------------------

def make_app(model, model_lock):
    """The WSGI callable serving `model` (an object with predict(x) and learn(x, labels)),
    one call at a time under model_lock."""
    metrics = Metrics(getattr(model, "weight_bytes", None))

    def predict(environ):
        x = as_rows(read_json(environ, ("inputs",))["inputs"])
        with model_lock:
            probs = model.predict(x)
        if not np.isfinite(probs).all():    # orjson would write NaN as null
            raise ValueError("predict: the model's output is not finite; has /learn diverged?")
        return {"classes": probs.argmax(1).tolist(), "probs": probs.tolist()}

    def learn(environ):
        if not getattr(model, "can_learn", True):
            raise BadRequest(409, "this service predicts with int8 weights (AICRAFT_QUANTIZE=1); "
                             "it does not learn")
        payload = read_json(environ, ("inputs", "labels"))
        x = as_rows(payload["inputs"])
        labels = as_labels(payload["labels"], len(x))
        with model_lock:
            loss = model.learn(x, labels)
        if not math.isfinite(loss):
            raise ValueError("learn: the loss is not finite; the step has diverged")
        return {"loss": loss}

    def healthz(environ):
        return {"status": "ok"}

    def metrics_page(environ):
        return metrics.render()

    routes = {"/predict": ("POST", predict), "/learn": ("POST", learn),
              "/healthz": ("GET", healthz), "/metrics": ("GET", metrics_page)}

    def answer(environ, path):
        """The handler's result (a JSON-able dict, or Prometheus text); BadRequest
        for a path or a method the service does not take."""
        if path not in routes:
            raise BadRequest(404, "no such path; try POST /predict, POST /learn, GET /healthz, GET /metrics")
        method, handler = routes[path]
        if environ["REQUEST_METHOD"] != method:
            raise BadRequest(405, "%s takes %s" % (path, method), [("Allow", method)])
        return handler(environ)

    def app(environ, start_response):
        start = time.perf_counter()
        path = environ.get("PATH_INFO", "")
        status, headers = 200, []
        try:
            with ac.checkpoint():
                result = answer(environ, path)
            if isinstance(result, str):
                body, content_type = result.encode(), "text/plain; version=0.0.4; charset=utf-8"
            else:
                body, content_type = orjson.dumps(result), "application/json"
        except BadRequest as exc:
            status, headers = exc.status, exc.headers
            body, content_type = orjson.dumps({"error": str(exc)}), "application/json"

        except Exception:     # a worker answers 500 and goes on; the traceback goes to the log
            traceback.print_exc(file=environ["wsgi.errors"])
            status = 500
            body, content_type = b'{"error": "internal error; see the server log"}', "application/json"
        # Only known paths become labels, so the metrics cannot grow with what clients send.
        metrics.observe(path if path in routes else "other", status, time.perf_counter() - start)
        start_response("%d %s" % (status, http.HTTPStatus(status).phrase),
                       headers + [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [body] if status < 400 else DrainAfter(body, environ)

    return app


def fail(message):
    """Say why the service cannot start, and exit. 3 is gunicorn's "worker failed to
    boot": without --preload it stops gunicorn instead of a loop of restarts."""
    print("serve: " + message, file=sys.stderr)
    sys.exit(3)


def load_model():
    """The model named by the environment; exits with a message when it cannot be loaded."""
    path = os.environ.get("AICRAFT_WEIGHTS", "")
    if not path:
        fail("set AICRAFT_WEIGHTS to a weights file (python demos/mnist_mlp.py writes one)")
    if not os.path.isfile(path):
        fail("AICRAFT_WEIGHTS=%s: no such file (python demos/mnist_mlp.py writes one)" % path)
    try:
        lr = float(os.environ.get("AICRAFT_LR", "0.01"))
    except ValueError:
        fail("AICRAFT_LR=%s is not a number" % os.environ["AICRAFT_LR"])
    backend = os.environ.get("SERVE_BACKEND", "aicraft")
    if backend == "aicraft":
        def mlp(path, lr):
            return AicraftMLP(path, lr, os.environ.get("AICRAFT_QUANTIZE", "0") == "1")
    elif backend == "torch":
        from demos.serve_torch import TorchMLP as mlp
    else:
        fail("SERVE_BACKEND=%s; use aicraft or torch" % backend)
    try:
        model = mlp(path, lr)
        # A full batch before the fork: a bad file fails here, once, and the
        # workers inherit a library whose thread pool has already run.
        with ac.checkpoint():
            model.predict(np.zeros((MAX_ROWS, FEATURES), np.float32))
    except Exception as exc:
        fail("cannot serve %s: %s" % (path, exc))
    return model


def warm_up(pool, threads):
    """Before a worker takes connections, run on each of its `threads` request
    threads (pool: the executor they belong to) what a request does: predictions of
    one row and of 32, a refused body, and a learning step's forward and backward
    without its update (the weights stay as loaded). What their first use brings in
    (each thread's libac arena, code pages, the allocators' high-water marks) is then
    part of the worker's RSS at rest, and bad traffic later finds nothing new to grow.
    demos/gunicorn_conf.py calls it from gunicorn's post_worker_init."""
    row = b"[" + b",".join([b"0.5"] * FEATURES) + b"]"
    barrier = threading.Barrier(threads)

    def warm():
        barrier.wait()      # holds each task on its own thread until all have one
        for body in (b'{"inputs": [%s]}' % row, b'{"inputs": [%s]}' % b",".join([row] * 32), b"not json"):
            environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/predict", "CONTENT_LENGTH": str(len(body)),
                       "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr}
            app(environ, lambda status, headers: None)
        if getattr(model, "can_learn", True):
            with model_lock, ac.checkpoint():
                model.learn(np.zeros((8, FEATURES), np.float32), np.zeros(8, np.int64), update=False)

    for future in [pool.submit(warm) for _ in range(threads)]:
        future.result()


bound_malloc()
model = load_model()
model_lock = threading.Lock()
app = make_app(model, model_lock)
