"""serve_profile.py - where a served request's time and a worker's memory go, for
bench/serve_load.sh: aicraft, PyTorch and ONNX Runtime (bench/serve_backends.py).

    python bench/serve_profile.py [--repeats N]

Time: each of bench/serve_requests.py's four requests (JSON and binary, 1 and 32
rows) through make_app's WSGI callable in this process, with no server and no
socket, against the servable's infer alone on the request's wire Arrays (the inputs
made into what it takes, its outputs into wire Arrays, as make_app calls it): CPU
microseconds per request, the median of 5 runs of N. A served request costs these
plus what gunicorn and HTTP add, the same for all three (serve_load.sh's CPU
ms/request minus the app's).

Memory: the resident size of a fresh process that imports what every worker does
(Python, orjson, gunicorn's threaded worker; then aicraft.serve, whose WSGI code all
three run), then the same plus each runtime and its model, after an infer of 32 rows:
what each runtime adds to a worker, apart from the floor they share (for PyTorch and
ONNX Runtime, NumPy too: their servables take NumPy arrays).
Prints a table, then one JSON line.
"""
import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path[:0] = [ROOT, BENCH]
import aicraft as ac  # noqa: E402
import serve_backends  # noqa: E402
import serve_requests  # noqa: E402
from aicraft.serve import make_app, wire  # noqa: E402

BASE = "import orjson, gunicorn.app.base, gunicorn.workers.gthread"
FLOOR = BASE + ", aicraft, aicraft.serve"
RESIDENT = "int(open('/proc/self/statm').read().split()[1]) * __import__('os').sysconf('SC_PAGE_SIZE') / 2**20"


def environ_of(raw):
    """(WSGI environ without its input, body) of one whole HTTP request."""
    head, body = raw.split(b"\r\n\r\n", 1)
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": serve_requests.PATH,
               "CONTENT_LENGTH": headers["Content-Length"], "wsgi.errors": sys.stderr}
    if "Inference-Header-Content-Length" in headers:
        environ["HTTP_INFERENCE_HEADER_CONTENT_LENGTH"] = headers["Inference-Header-Content-Length"]
    return environ, body


def cpu_us(fn, repeats):
    """Median over 5 runs of the CPU microseconds of one fn() call."""
    for _ in range(repeats // 10):
        fn()
    runs = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(repeats):
            fn()
        runs.append((time.process_time() - start) / repeats * 1e6)
    return round(statistics.median(runs), 1)


def request_times(backend, weights, requests, repeats):
    """{request name: {"app_us", "model_us"}} for backend."""
    servable = serve_backends.servable(backend, weights)
    app = make_app(servable)
    infer = app.run[servable.name]      # the servable's infer on wire Arrays
    times = {}
    for name, (environ, body) in requests.items():
        rows = 1 if name.endswith("_1") else 32
        x = {"input__0": wire.from_numpy(serve_requests.rows()[:rows], "FP32")}

        def request():
            out = app(dict(environ, **{"wsgi.input": io.BytesIO(body)}), lambda status, headers: None)
            b"".join(out)

        def model():
            with ac.checkpoint():
                infer(x)

        times[name] = {"app_us": cpu_us(request, repeats), "model_us": cpu_us(model, repeats)}
    return times


def resident_mb(backend, weights_path):
    """RSS, MB, of a fresh process with the floor imported, and backend's model made
    (None: the floor alone; "base": the floor without aicraft)."""
    code = BASE if backend == "base" else FLOOR
    if backend not in (None, "base"):
        code += ("; import sys; sys.path.insert(0, 'bench'); import serve_backends as b; "
                 "m = b.servable(%r, b.load_weights(%r)); "
                 "from aicraft.serve import wire; "
                 "m.infer({'input__0': wire.input_maker(m)(wire.zeros('FP32', (32, 784)))})" % (backend, weights_path))
    out = subprocess.run([sys.executable, "-c", code + "; print(%s)" % RESIDENT], check=True,
                         capture_output=True, text=True, env=dict(os.environ, AC_NUM_THREADS="1"),
                         cwd=ROOT)
    return round(float(out.stdout.split()[-1]), 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1000)
    args = parser.parse_args()
    ac.set_num_threads(1)
    weights = serve_backends.random_weights()
    directory = os.path.join(os.environ.get("TMPDIR", "/tmp"), "serve_profile.%d" % os.getpid())
    os.makedirs(directory)
    try:
        serve_requests.write(directory)
        requests = {}
        for name in serve_requests.NAMES:
            with open(os.path.join(directory, name + ".http"), "rb") as f:
                requests[name] = environ_of(f.read())
        weights_path = os.path.join(directory, "mlp.safetensors")
        ac.save(weights, weights_path)
        times = {b: request_times(b, weights, requests, args.repeats) for b in serve_backends.BACKENDS}
        base, floor = resident_mb("base", weights_path), resident_mb(None, weights_path)
        resident = {b: resident_mb(b, weights_path) for b in serve_backends.BACKENDS}
    finally:
        for name in os.listdir(directory):
            os.remove(os.path.join(directory, name))
        os.rmdir(directory)

    print("CPU us per request in process (make_app's WSGI call / the servable's infer alone):")
    print("%-12s" % "" + "".join("%20s" % name for name in serve_requests.NAMES))
    for b in serve_backends.BACKENDS:
        print("%-12s" % b + "".join("%20s" % ("%.1f / %.1f" % (times[b][n]["app_us"], times[b][n]["model_us"]))
                                    for n in serve_requests.NAMES))
    print("RSS of a fresh process, MB: %s %.1f; with aicraft and aicraft.serve too (the floor all three "
          "services share) %.1f; then with each runtime and its model: %s"
          % (BASE[len("import "):], base, floor,
             ", ".join("%s %.1f (+%.1f)" % (b, resident[b], resident[b] - floor) for b in serve_backends.BACKENDS)))
    print(json.dumps({"bench": "serve_profile", "cpu_us": times, "base_rss_mb": base, "floor_rss_mb": floor,
                      "rss_mb": resident}))


if __name__ == "__main__":
    main()
