"""bench/activations.py - the activations of training loops (silu, leaky_relu, gelu tanh,
mish, softplus) against PyTorch, forward alone and forward + backward, in one run.

1M standard-normal floats; forward + backward is y = f(x); y.backward(g) with g fixed,
x a leaf that requires grad (its .grad reset each call). Both libraries get the same
thread count. Batches of calls alternate between the libraries, so a noisy machine
slows both alike; each cell is the median time per call. Needs PyTorch.

    python bench/activations.py [--repeats 15] [--quick] [--threads N]

Prints a table, then one JSON line.
"""
import argparse
import json
import os
import statistics
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import aicraft as ac  # noqa: E402
import aicraft.nn.functional as F  # noqa: E402
from common import calls_for, host, host_line  # noqa: E402

N = 1 << 20
BATCH_SECONDS = 0.02

ACTIVATIONS = {
    "silu": (lambda x: F.silu(x), lambda x: torch.nn.functional.silu(x)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda x: torch.nn.functional.leaky_relu(x, 0.2)),
    "gelu tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    "mish": (lambda x: F.mish(x), lambda x: torch.nn.functional.mish(x)),
    "softplus": (lambda x: F.softplus(x), lambda x: torch.nn.functional.softplus(x)),
}


def cases():
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    g = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    a, ag = ac.from_numpy(x), ac.from_numpy(g)
    al = ac.from_numpy(x.copy()).requires_grad_()
    t, tg = torch.from_numpy(x), torch.from_numpy(g)
    tl = torch.from_numpy(x.copy()).requires_grad_()

    def ac_step(f):
        def run():
            al.grad = None
            f(al).backward(ag)
        return run

    def torch_step(f):
        def run():
            tl.grad = None
            f(tl).backward(tg)
        return run
    table = {}
    for name, (fa, ft) in ACTIVATIONS.items():
        table[(name, "forward")] = {"aicraft": lambda fa=fa: fa(a), "torch": lambda ft=ft: ft(t)}
        table[(name, "fwd+bwd")] = {"aicraft": ac_step(fa), "torch": torch_step(ft)}
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="3 batches (a smoke run)")
    parser.add_argument("--threads", type=int, default=None, help="default: aicraft's count")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    threads = args.threads or ac.get_num_threads()
    ac.set_num_threads(threads)
    torch.set_num_threads(threads)
    table = cases()
    calls, samples = {}, {}
    for _ in range(repeats):
        for key, fns in table.items():
            for lib, fn in fns.items():
                if (key, lib) not in calls:
                    calls[(key, lib)] = calls_for(fn, BATCH_SECONDS, 1 << 14)
                n = calls[(key, lib)]
                samples.setdefault((key, lib), []).append(timeit.timeit(fn, number=n) / n * 1e3)
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(host_line())
    print("activations over %d floats, %d thread(s), ms per call (median of %d interleaved batches); "
          "ratio = torch / aicraft (> 1: aicraft faster); PyTorch %s" % (N, threads, repeats, torch.__version__))
    header = "%-12s %-8s %9s %9s %7s" % ("activation", "pass", "torch", "aicraft", "ratio")
    print(header)
    print("-" * len(header))
    rows = []
    for (name, kind), _ in table.items():
        tt, ta = med[((name, kind), "torch")], med[((name, kind), "aicraft")]
        rows.append({"activation": name, "pass": kind, "torch_ms": tt, "aicraft_ms": ta, "ratio": tt / ta})
        print("%-12s %-8s %9.3f %9.3f %6.2fx" % (name, kind, tt, ta, tt / ta))
    print(json.dumps({"bench": "activations", **host(), "elements": N, "threads": threads,
                      "repeats": repeats, "torch": torch.__version__, "aicraft": ac.__version__,
                      "results": rows}))


if __name__ == "__main__":
    main()
