"""bench/elementwise.py - aicraft's transcendental ops against NumPy (and PyTorch), in one run.

exp, tanh, sigmoid and gelu over 1M floats, and softmax over the rows of a
(1024, 1024) matrix. NumPy's sigmoid is 1 / (1 + exp(-x)), its softmax
exp(x - max) / sum, and it has no erf, so gelu is compared with PyTorch only
(when installed: `pip install torch==2.13.0`). aicraft runs on 1 thread and on
all of its threads; NumPy's ufuncs use one thread, PyTorch gets aicraft's count.
Batches of calls alternate between the libraries, so a noisy machine slows all
alike; each cell is the median time per call. Every call allocates its result,
in every library.

    python bench/elementwise.py [--repeats 15] [--quick]

Prints a table, then one JSON line.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import aicraft as ac  # noqa: E402
from common import host, host_line  # noqa: E402

try:
    import torch
except ImportError:  # the table says so; aicraft and NumPy are still measured
    torch = None

SHAPE = (1024, 1024)
BATCH_SECONDS = 0.02   # time per batch of calls to one library


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cases():
    """name -> {library: fn}; x is standard normal, as activations are."""
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    a = ac.from_numpy(x)
    table = {
        "exp": {"numpy": lambda: np.exp(x), "aicraft": lambda: a.exp()},
        "tanh": {"numpy": lambda: np.tanh(x), "aicraft": lambda: a.tanh()},
        "sigmoid": {"numpy": lambda: 1.0 / (1.0 + np.exp(-x)), "aicraft": lambda: a.sigmoid()},
        "gelu": {"aicraft": lambda: a.gelu()},
        "softmax rows": {"numpy": lambda: numpy_softmax(x), "aicraft": lambda: a.softmax(1)},
    }
    if torch is not None:
        t = torch.from_numpy(x)
        table["exp"]["torch"] = lambda: torch.exp(t)
        table["tanh"]["torch"] = lambda: torch.tanh(t)
        table["sigmoid"]["torch"] = lambda: torch.sigmoid(t)
        table["gelu"]["torch"] = lambda: torch.nn.functional.gelu(t)
        table["softmax rows"]["torch"] = lambda: torch.softmax(t, 1)
    return table


def largest_difference(table):
    """Per case, the largest |aicraft - other| / max(|other|, 1) over the output,
    other being NumPy's result, else PyTorch's."""
    out = {}
    for name, fns in table.items():
        ours = fns["aicraft"]().numpy().astype(np.float64)
        if "numpy" in fns:
            other = fns["numpy"]().astype(np.float64)
        elif "torch" in fns:
            other = fns["torch"]().numpy().astype(np.float64)
        else:
            out[name] = None
            continue
        out[name] = float(np.max(np.abs(ours - other) / np.maximum(np.abs(other), 1.0)))
    return out


def calls_for(fn):
    n = 1
    while timeit.timeit(fn, number=n) < BATCH_SECONDS and n < 1 << 16:
        n *= 2
    return n


def measure(table, threads, repeats):
    """Median ms per call for each (case, column); columns: numpy, torch, aicraft
    on 1 thread, aicraft on `threads`."""
    columns = [("numpy", "numpy", None), ("torch", "torch", None),
               ("aicraft 1t", "aicraft", 1), ("aicraft", "aicraft", threads)]
    runs = [(name, column, lib, n_threads, fns[lib])
            for name, fns in table.items()
            for column, lib, n_threads in columns if lib in fns]
    calls = {}
    samples = {(name, column): [] for name, column, _, _, _ in runs}
    for _ in range(repeats):
        for name, column, lib, n_threads, fn in runs:
            if n_threads is not None:
                ac.set_num_threads(n_threads)
            if (name, column) not in calls:
                calls[(name, column)] = calls_for(fn)
            n = calls[(name, column)]
            samples[(name, column)].append(timeit.timeit(fn, number=n) / n * 1e3)
    ac.set_num_threads(threads)
    return {key: statistics.median(values) for key, values in samples.items()}


def show(value, fmt):
    return "-" if value is None else fmt % value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="interleaved batches per cell")
    parser.add_argument("--quick", action="store_true", help="3 batches (a smoke run)")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    threads = ac.get_num_threads()
    if torch is not None:
        torch.set_num_threads(threads)

    table = cases()
    differences = largest_difference(table)
    times = measure(table, threads, repeats)

    print(host_line())
    print("elementwise ops over %d floats, ms per call (median of %d interleaved batches); "
          "speedup = NumPy / aicraft; %s, Python %s, NumPy %s, PyTorch %s"
          % (SHAPE[0] * SHAPE[1], repeats, platform.machine(), platform.python_version(),
             np.__version__, torch.__version__ if torch is not None else "not installed"))
    header = "%-13s %8s %8s %11s %11s %11s %11s %10s" % (
        "case", "numpy", "torch", "aicraft 1t", "aicraft %dt" % threads,
        "speedup 1t", "speedup %dt" % threads, "max diff")
    print(header)
    print("-" * len(header))
    rows = []
    for name in table:
        cell = {column: times.get((name, column)) for column in
                ("numpy", "torch", "aicraft 1t", "aicraft")}
        speedup_1 = cell["numpy"] / cell["aicraft 1t"] if cell["numpy"] else None
        speedup_n = cell["numpy"] / cell["aicraft"] if cell["numpy"] else None
        rows.append({"case": name,
                     "numpy_ms": cell["numpy"], "torch_ms": cell["torch"],
                     "aicraft_1t_ms": cell["aicraft 1t"], "aicraft_ms": cell["aicraft"],
                     "speedup_vs_numpy_1t": speedup_1, "speedup_vs_numpy": speedup_n,
                     "max_diff": differences[name]})
        print("%-13s %8s %8s %11s %11s %11s %11s %10s" % (
            name, show(cell["numpy"], "%.3f"), show(cell["torch"], "%.3f"),
            show(cell["aicraft 1t"], "%.3f"), show(cell["aicraft"], "%.3f"),
            show(speedup_1, "%.2fx"), show(speedup_n, "%.2fx"), show(differences[name], "%.1e")))
    print("max diff: largest |aicraft - NumPy| / max(|NumPy|, 1); PyTorch's result for gelu")
    print(json.dumps({"bench": "elementwise", **host(), "elements": SHAPE[0] * SHAPE[1],
                      "threads": threads, "repeats": repeats,
                      "numpy": np.__version__,
                      "torch": None if torch is None else torch.__version__,
                      "aicraft": ac.__version__, "results": rows}))


if __name__ == "__main__":
    main()
