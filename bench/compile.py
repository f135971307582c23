"""bench/compile.py - ac.compile's replay and mlir backends against eager aicraft and PyTorch.

Cases, each timed in one run with repetitions interleaved (so a noisy machine
slows every column alike), medians reported:
  - FDUAI's linear regression: X 256x1, y = 2x + 1 + noise, scalar w and b, MSE,
    SGD lr 0.1, 100 steps, each step one call from Python (eager aicraft steps
    each in their own ac.checkpoint());
  - MLP 784-128-10: inference at batch 1, and an Adam training step at batch 32;
  - the demo CNN (demos/mnist_cnn.py): inference at batch 1;
  - the time to compile the MLP training step (record; for mlir also emit, lower
    with the MLIR 19 tools, link and load).
Everything runs on one thread. The mlir column is empty when its tools are missing.
With --cpu-time the calls are timed in this process's CPU time rather than wall
time, which a machine shared with other work disturbs less (compile times stay
wall time: the mlir tools run in subprocesses).

    python bench/compile.py [--repeats 15] [--no-torch-compile] [--cpu-time]

Prints the CPU and SIMD path, a table, then one JSON line. PyTorch columns are
empty when torch is not installed; torch.compile's where it does not run.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import numpy as np  # noqa: E402

import aicraft as ac  # noqa: E402
import aicraft.nn.functional as F  # noqa: E402
from aicraft import _mlir, nn, optim  # noqa: E402
from common import host, host_line  # noqa: E402
from compile_steps import regression_data, regression_step, training_step  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

TARGETS = {"fduai": 8.0, "fduai_vs_torch": 100.0, "mlp_infer": 1.5, "mlp_adam": 1.2, "cnn_infer": 1.3}
MLIR_TARGETS = {"fduai": 12.0}
COMPILE_TARGET_MS = {"replay": 50.0, "mlir": 3000.0}
BACKENDS = ["replay"] if _mlir.missing_tool() else ["replay", "mlir"]


clock = time.perf_counter   # time.process_time with --cpu-time


def timed(fn, calls):
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls


# ---- cases: each returns {column: one-call function}, called `calls` times per timing ----

def fduai_case(use_torch_compile):
    x_np, y_np = regression_data()
    x, y = ac.tensor(x_np), ac.tensor(y_np)
    eager_step = regression_step(ac)[0]

    def eager():
        for _ in range(100):
            with ac.checkpoint():
                eager_step(x, y)

    def steps(compiled):
        def run():
            for _ in range(100):
                compiled(x, y)
        return run
    cases = {"aicraft eager": eager}
    for backend in BACKENDS:
        cases[backend] = steps(ac.compile(regression_step(ac)[0], backend=backend))
    if torch is not None:
        tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)

        def torch_steps(compile_step):
            step = regression_step(torch)[0]
            return torch.compile(step) if compile_step else step

        torch_step = torch_steps(False)

        def torch_eager():
            for _ in range(100):
                torch_step(tx, ty)
        cases["torch eager"] = torch_eager
        if use_torch_compile:
            compiled_step = torch_steps(True)

            def torch_compiled():
                for _ in range(100):
                    compiled_step(tx, ty)
            cases["torch.compile"] = torch_compiled
    return cases


def mlp_ac():
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def mlp_torch():
    return torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def cnn_ac():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))


def cnn_torch():
    t = torch.nn
    return t.Sequential(
        t.Conv2d(1, 16, 3, padding=1), t.ReLU(), t.MaxPool2d(2),
        t.Conv2d(16, 32, 3, padding=1), t.ReLU(), t.MaxPool2d(2),
        t.Flatten(), t.Linear(32 * 7 * 7, 128), t.ReLU(), t.Dropout(0.25), t.Linear(128, 10))


def inference_case(make_ac, make_torch, shape, use_torch_compile):
    x_np = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    model = make_ac().eval()
    x = ac.tensor(x_np)

    def eager():
        with ac.no_grad(), ac.checkpoint():
            model(x)

    def call(compiled):
        def run():
            with ac.no_grad(), ac.checkpoint():
                compiled(x)
        return run
    cases = {"aicraft eager": eager}
    for backend in BACKENDS:
        cases[backend] = call(ac.compile(model, backend=backend))
    if torch is not None:
        tmodel, tx = make_torch().eval(), torch.from_numpy(x_np)
        tcompiled = torch.compile(tmodel) if use_torch_compile else None

        def torch_eager():
            with torch.no_grad():
                tmodel(tx)
        cases["torch eager"] = torch_eager
        if tcompiled is not None:
            def torch_compiled():
                with torch.no_grad():
                    tcompiled(tx)
            cases["torch.compile"] = torch_compiled
    return cases


def adam_case(use_torch_compile):
    rng = np.random.default_rng(2)
    x_np = rng.standard_normal((32, 784)).astype(np.float32)
    y_np = rng.integers(0, 10, 32)
    x, y = ac.tensor(x_np), ac.tensor(y_np)

    def ac_step():
        model = mlp_ac()
        return training_step(model, optim.Adam(model.parameters(), lr=1e-3), F.cross_entropy)
    eager_step = ac_step()

    def eager():
        with ac.checkpoint():
            eager_step(x, y)

    def call(compiled):
        def run():
            with ac.checkpoint():
                compiled(x, y)
        return run
    cases = {"aicraft eager": eager}
    for backend in BACKENDS:
        cases[backend] = call(ac.compile(ac_step(), backend=backend))
    if torch is not None:
        tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)

        def torch_step():
            model = mlp_torch()
            return training_step(model, torch.optim.Adam(model.parameters(), lr=1e-3),
                                 torch.nn.functional.cross_entropy)
        teager = torch_step()
        cases["torch eager"] = lambda: teager(tx, ty)
        if use_torch_compile:
            tcompiled = torch.compile(torch_step())
            cases["torch.compile"] = lambda: tcompiled(tx, ty)
    return cases


def compile_time_ms(backend):
    """Wall time of the first (compiling) call of a fresh compiled MLP Adam step (batch 32)."""
    rng = np.random.default_rng(3)
    x, y = ac.tensor(rng.standard_normal((32, 784)).astype(np.float32)), ac.tensor(rng.integers(0, 10, 32))
    model = mlp_ac()
    _mlir.clear_cache()   # each time a build from scratch
    compiled = ac.compile(training_step(model, optim.Adam(model.parameters(), lr=1e-3), F.cross_entropy),
                          backend=backend)
    start = time.perf_counter()
    with ac.checkpoint():
        compiled(x, y)
    return (time.perf_counter() - start) * 1e3


def measure(cases, calls, repeats):
    """Median seconds per call of each column, runs interleaved; None where it failed."""
    times = {name: [] for name in cases}
    for name, fn in list(cases.items()):   # warm up; drop a column that cannot run
        try:
            for _ in range(max(3, calls // 10)):
                fn()
        except Exception as e:  # torch.compile without a working compiler, say
            print("  (%s skipped: %s)" % (name, str(e).splitlines()[0][:100]))
            del cases[name]
            del times[name]
    for _ in range(repeats):
        for name, fn in cases.items():
            times[name].append(timed(fn, calls))
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--cpu-time", action="store_true", help="time calls in CPU time, not wall time")
    args = parser.parse_args()
    global clock
    if args.cpu_time:
        clock = time.process_time
    ac.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    use_tc = torch is not None and not args.no_torch_compile
    print(host_line() + "; aicraft threads: 1; timed in %s; load %.2f" % (
        "CPU time" if args.cpu_time else "wall time", os.getloadavg()[0]))
    ac.manual_seed(0)
    if torch is not None:
        torch.manual_seed(0)
    rows = [
        ("FDUAI 100 SGD steps", "fduai", fduai_case(use_tc), 1),
        ("MLP 784-128-10 infer b=1", "mlp_infer", inference_case(mlp_ac, mlp_torch, (1, 784), use_tc), 200),
        ("MLP Adam step b=32", "mlp_adam", adam_case(use_tc), 20),
        ("CNN infer b=1", "cnn_infer", inference_case(cnn_ac, cnn_torch, (1, 1, 28, 28), use_tc), 20),
    ]
    columns = ["aicraft eager", "replay", "mlir", "torch eager", "torch.compile"]
    results = {}
    print("\n%-26s %13s %13s %13s %13s %13s %9s %9s %7s" % (("case",) + tuple(columns)
                                                           + ("replay x", "mlir x", "target")))
    for title, key, cases, calls in rows:
        medians = measure(cases, calls, args.repeats)
        results[key] = {name: medians[name] * 1e6 for name in medians}
        speedups = []
        for backend in ("replay", "mlir"):
            if backend in medians:
                results[key][backend + "_speedup"] = medians["aicraft eager"] / medians[backend]
                speedups.append("%8.2fx" % results[key][backend + "_speedup"])
            else:
                speedups.append("%9s" % "-")
        target = "%.1fx" % TARGETS[key] + ("/%.0fx" % MLIR_TARGETS[key] if key in MLIR_TARGETS else "")
        cells = ["%10.1f us" % (medians[c] * 1e6) if c in medians else "%13s" % "-" for c in columns]
        print("%-26s %s %s %7s" % (title, " ".join(cells), " ".join(speedups), target))
    if "torch eager" in results["fduai"]:
        for backend in BACKENDS:
            vs_torch = results["fduai"]["torch eager"] / results["fduai"][backend]
            results["fduai"][backend + "_vs_torch_eager"] = vs_torch
            print("FDUAI: %s is %.1fx PyTorch eager (target %.0fx)" % (backend, vs_torch, TARGETS["fduai_vs_torch"]))
    for backend in BACKENDS:
        ms = statistics.median(compile_time_ms(backend) for _ in range(max(3, args.repeats // 5)))
        results["compile_ms_" + backend] = ms
        print("compile time of the MLP Adam step, %s: %.1f ms (target <= %.0f ms)"
              % (backend, ms, COMPILE_TARGET_MS[backend]))
    print("load at the end: %.2f" % os.getloadavg()[0])
    print(json.dumps({"bench": "compile", **host(), "clock": "cpu" if args.cpu_time else "wall",
                      "results": results}))


if __name__ == "__main__":
    main()
