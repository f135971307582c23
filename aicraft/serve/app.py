"""app.py - make_app: the WSGI application serving models over KServe's Open Inference
Protocol v2, and the service's own /predict, /learn, /healthz and /metrics.

    GET  /v2                                  server metadata
    GET  /v2/health/live, /v2/health/ready    liveness, readiness
    GET  /v2/models/{name}[/versions/{v}]     model metadata
    GET  /v2/models/{name}[/versions/{v}]/ready
    POST /v2/models/{name}[/versions/{v}]/infer
    POST /predict, /learn                     JSON rows for the first model (rows.py)
    GET  /healthz, /metrics

Every request runs inside `with ac.checkpoint():`, so whatever the library allocates
for it is handed back when the request ends, answered or refused. A request that would
take libac past the worker's memory limit is answered 503 and the worker goes on.
"""
import ctypes
import http
import io
import sys
import threading
import time
import traceback

import orjson

import aicraft as ac
from aicraft import nn
from aicraft.serve import protocol, rows, wire
from aicraft.serve.batching import Batcher, QueueFull
from aicraft.serve.body import DrainAfter, read_body
from aicraft.serve.metrics import Metrics
from aicraft.serve.protocol import ProtocolError
from aicraft.serve.servable import ModuleServable, linear_specs

MAX_BODY_BYTES = 1 << 20
JSON = [("Content-Type", "application/json")]
# "200 OK", ...: made once (HTTPStatus(status).phrase costs 0.6 us a request)
STATUS_LINES = {status.value: "%d %s" % (status.value, status.phrase) for status in http.HTTPStatus}


def make_app(models, *, max_batch_size=1, max_queue_delay_s=0.0, max_queue=64, memory_limit=None,
             max_body_bytes=MAX_BODY_BYTES):
    """The WSGI application serving models: a servable, an nn.Module (an MLP: served as
    "model", FP32 rows in and out, predictions only), or a list or dict (name -> either)
    of them; the first is the one /predict and /learn use.

    max_batch_size > 1 joins concurrent infer requests of a model in one worker into
    batches of up to that many rows, waiting up to max_queue_delay_s for more
    (batching.Batcher), for models whose inputs and outputs all take any size along
    their first dimension (a program's fixed shapes do not); past max_queue waiting
    requests, 503. memory_limit: bytes libac
    may hold in each worker (ac.set_memory_limit; a request past it gets 503).
    max_body_bytes: larger bodies get 413."""
    servables = _servables(models)
    if memory_limit is not None:
        ac.set_memory_limit(memory_limit)
    return Service(servables, max_batch_size, max_queue_delay_s, max_queue, max_body_bytes)


def _servables(models):
    if isinstance(models, dict):
        items = list(models.items())
    elif isinstance(models, (list, tuple)):
        items = [(None, m) for m in models]
    else:
        items = [(None, models)]
    if not items:
        raise ValueError("make_app: no models to serve")
    servables = []
    for name, model in items:
        if isinstance(model, nn.Module):
            inputs, outputs = linear_specs(model)
            model = ModuleServable(model, name or "model", inputs, outputs)
        elif name is not None and name != model.name:
            raise ValueError("make_app: the servable under %r is named %r" % (name, model.name))
        for attribute in ("name", "version", "platform", "inputs", "outputs", "infer"):
            if not hasattr(model, attribute):
                raise TypeError("make_app: %s is neither an nn.Module nor a servable (it has no %s)"
                                % (type(model).__name__, attribute))
        servables.append(model)
    names = [s.name for s in servables]
    if len(set(names)) != len(names):
        raise ValueError("make_app: two models are named alike: %s" % names)
    return servables


class Service:
    """The WSGI callable make_app returns; warm_up readies a worker's threads."""

    def __init__(self, servables, max_batch_size, max_queue_delay_s, max_queue, max_body_bytes):
        self.models = {s.name: s for s in servables}
        self.default = servables[0]
        self.max_body_bytes = max_body_bytes
        # Requests join along the first dimension: only where every input and output has it free.
        self.run = {s.name: Batcher(_on_wire(s), max_batch_size, max_queue_delay_s, max_queue).submit
                    if max_batch_size > 1 and all(spec.shape[:1] == (-1,) for spec in s.inputs + s.outputs)
                    else _on_wire(s) for s in servables}
        self.metrics = Metrics({s.name: s.weight_bytes for s in servables if hasattr(s, "weight_bytes")})
        self.fixed = {
            "/v2": ("GET", lambda environ: protocol.server_metadata(ac.__version__)),
            "/v2/health/live": ("GET", lambda environ: {"live": True}),
            "/v2/health/ready": ("GET", lambda environ: {"ready": True}),
            "/predict": ("POST", self.predict),
            "/learn": ("POST", self.learn),
            "/healthz": ("GET", lambda environ: {"status": "ok"}),
            "/metrics": ("GET", lambda environ: self.metrics.render()),
        }

    # ---- routes ------------------------------------------------------------------

    def route(self, path):
        """(route label, method, handler) for path; ProtocolError (404) for no route.
        The label names the route, not the model, so the metrics cannot grow with what
        clients send."""
        if path in self.fixed:
            return (path,) + self.fixed[path]
        parts = path.split("/")
        if parts[:3] == ["", "v2", "models"] and len(parts) >= 4:
            servable, rest = self.model(parts[3], parts[4:])
            if rest == []:
                return "/v2/models/{name}", "GET", lambda environ: protocol.model_metadata(servable)
            if rest == ["ready"]:
                return "/v2/models/{name}/ready", "GET", lambda environ: {"name": servable.name, "ready": True}
            if rest == ["infer"]:
                return "/v2/models/{name}/infer", "POST", lambda environ: self.infer(servable, environ)
        raise ProtocolError(404, "no such path; the service takes /v2/... (KServe's Open Inference "
                            "Protocol v2), POST /predict, POST /learn, GET /healthz, GET /metrics")

    def model(self, name, rest):
        """(servable, what follows its name and version in the path)."""
        servable = self.models.get(name)
        if servable is None:
            raise ProtocolError(404, "unknown model %r; this service has %s" % (name, ", ".join(sorted(self.models))))
        if rest[:1] == ["versions"] and len(rest) >= 2:
            if rest[1] != servable.version:
                raise ProtocolError(404, "model %r has no version %r; it has %r" % (name, rest[1], servable.version))
            rest = rest[2:]
        return servable, rest

    def infer(self, servable, environ):
        body = read_body(environ, self.max_body_bytes)
        if environ.get("HTTP_CONTENT_ENCODING", "identity") != "identity":
            raise ProtocolError(415, "the service takes uncompressed bodies, not Content-Encoding %s"
                                % environ["HTTP_CONTENT_ENCODING"])
        request = protocol.parse_infer(body, environ.get("HTTP_INFERENCE_HEADER_CONTENT_LENGTH"))
        protocol.check_inputs(request.inputs, servable.inputs)
        return protocol.encode_infer(servable, request, self.run[servable.name](request.inputs))

    def predict(self, environ):
        return rows.predict(self.default, self.run[self.default.name], read_body(environ, self.max_body_bytes))

    def learn(self, environ):
        if getattr(self.default, "learn", None) is None:
            raise ProtocolError(409, "model %r does not learn: it is served without an optimizer, or "
                                "with int8 weights" % self.default.name)
        return rows.learn(self.default, read_body(environ, self.max_body_bytes))

    # ---- WSGI --------------------------------------------------------------------

    def answer(self, environ):
        """(route label, status, headers, body) of one request."""
        label = "other"
        try:
            label, method, handler = self.route(environ.get("PATH_INFO", ""))
            if environ["REQUEST_METHOD"] != method:
                raise ProtocolError(405, "%s takes %s" % (label, method), [("Allow", method)])
            with ac.checkpoint():
                result = handler(environ)
            if isinstance(result, tuple):                  # an encoded infer answer
                body, headers = result
            elif isinstance(result, str):
                body, headers = result.encode(), [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")]
            else:
                body, headers = orjson.dumps(result), JSON
            return label, 200, headers, body
        except ProtocolError as exc:
            return label, exc.status, exc.headers + JSON, protocol.error_body(str(exc))
        except QueueFull:
            return label, 503, JSON, protocol.error_body("the model's queue is full; try again")
        except MemoryError as exc:
            return label, 503, JSON, protocol.error_body("the request would pass the worker's memory "
                                                          "limit: %s" % str(exc)[:200])
        except Exception:     # a worker answers 500 and goes on; the traceback goes to the log
            traceback.print_exc(file=environ["wsgi.errors"])
            return label, 500, JSON, protocol.error_body("internal error; see the server log")

    def __call__(self, environ, start_response):
        start = time.perf_counter()
        label, status, headers, body = self.answer(environ)
        self.metrics.observe(label, status, time.perf_counter() - start)
        start_response(STATUS_LINES[status], headers + [("Content-Length", str(len(body)))])
        return [body] if status < 400 else DrainAfter(body, environ)

    # ---- warm-up -----------------------------------------------------------------

    def warm_up(self, pool=None, threads=1):
        """Before a worker takes connections, run on each of its `threads` request
        threads (pool: the executor they belong to; None: this thread) what a request
        does: each model's infer of one row and of 32, a refused body, and for a model
        that learns a step's forward and backward without its update (the weights stay
        as loaded). What their first use brings in (each thread's libac arena, code
        pages, the allocators' high-water marks) is then part of the worker's memory at
        rest, and bad traffic later finds nothing new to grow."""
        barrier = threading.Barrier(threads)

        def warm():
            barrier.wait()      # holds each task on its own thread until all have one
            for servable in self.models.values():
                for n in (1, 32):
                    self(_infer_environ(servable, n), lambda status, headers: None)
                self(_infer_environ(servable, 1, b"not json"), lambda status, headers: None)
                if _learns_from_rows(servable):
                    inputs = {spec.name: _zeros(spec, 8) for spec in servable.inputs}
                    with ac.checkpoint():
                        rows.learn_arrays(servable, inputs, wire.zeros("INT64", (8,)), step=False)

        if pool is None:
            warm()
        else:
            for future in [pool.submit(warm) for _ in range(threads)]:
                future.result()


def bound_malloc():
    """Under glibc, keep a worker's freed memory from staying resident. By default each
    of a worker's threads gets its own malloc arena, and freed blocks under a threshold
    that rises to 32 MB stay in them: bench/serve_hostile.py's mix left about 37 MB
    more per worker after its first 1,300 requests, 8 MB with these settings. Set
    before the workers fork and start their threads; elsewhere this does nothing."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
    mallopt(M_ARENA_MAX, 1)                 # a model's lock serialises the heavy work anyway
    mallopt(M_MMAP_THRESHOLD, 128 << 10)    # bodies and arrays past 128 KB go back on free
    # Up to 1 MB free at the heap's top stays: at 128 KB, a worker whose heap happened to
    # end in the freed buffer of a 32-row binary body (100 KB) gave it back after each
    # request and faulted its 40 pages in again for the next (116,000 faults a second,
    # a third of the worker's throughput).
    mallopt(M_TRIM_THRESHOLD, 1 << 20)


def _learns_from_rows(servable):
    """Whether servable is a ModuleServable that learns classes from rows (/learn's kind),
    whose step warm_up can take without its update."""
    if not isinstance(servable, ModuleServable) or servable.learn is None:
        return False
    try:
        rows.widths(servable)
    except ProtocolError:
        return False
    return True


def _on_wire(servable):
    """servable's infer on wire Arrays: the inputs as it takes them (aicraft tensors when
    its takes_tensors is true, else NumPy arrays), its outputs as wire Arrays of its specs'
    datatypes, made before the request's scope ends (a batch's rows go to other requests)."""
    as_input = wire.input_maker(servable)
    specs = servable.outputs

    def infer(inputs):
        results = servable.infer({name: as_input(a) for name, a in inputs.items()})
        return {spec.name: wire.from_result(results[spec.name], spec.datatype) for spec in specs}
    return infer


def _zeros(spec, batch):
    return wire.zeros(spec.datatype, [batch if d == -1 else d for d in spec.shape])


def _infer_environ(servable, batch, body=None):
    """The WSGI environ of a JSON infer request of zeros (batch rows where the batch size is free)."""
    if body is None:
        inputs = [{"name": spec.name, "datatype": spec.datatype, "shape": list(array.shape),
                   "data": wire.to_json(array)}
                  for spec, array in ((spec, _zeros(spec, batch)) for spec in servable.inputs)]
        body = orjson.dumps({"inputs": inputs})
    return {"REQUEST_METHOD": "POST", "PATH_INFO": "/v2/models/%s/infer" % servable.name,
            "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr}
