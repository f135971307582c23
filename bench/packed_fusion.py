"""bench/packed_fusion.py - the served 784-128-10 MLP (Linear, ReLU, Linear, Softmax)
packed (nn.packed.Linear, the ReLU a module of its own) against packed with the ReLU
fused into the first layer's GEMM (nn.packed.LinearReLU, what pack_linear makes), that
fused model through ac.compile (one C call a forward, as `python -m aicraft.serve` runs
it), and the float model (nn.Linear) for scale: a forward of 1 row and of 32 rows.

Forwards run under ac.no_grad() on fixed inputs. Batches of calls alternate between the
models, so a noisy machine slows all alike; each cell is the median time per call. The
fused and compiled models' outputs are checked to be the unfused one's bits first.

    python bench/packed_fusion.py [--repeats 15] [--quick] [--threads 1]

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

import aicraft as ac  # noqa: E402
from aicraft import nn  # noqa: E402
from common import calls_for, host, host_line  # noqa: E402

ROWS = (1, 32)
BATCH_SECONDS = 0.02


def models():
    """{"float": the MLP, "packed": its Linear layers packed, the ReLU apart,
    "fused": pack_linear's, the ReLU in the first layer's GEMM, "compiled": that
    through ac.compile}."""
    ac.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10), nn.Softmax(dim=1))
    packed = nn.Sequential(nn.packed.Linear.from_float(mlp[0]), nn.ReLU(),
                           nn.packed.Linear.from_float(mlp[2]), nn.Softmax(dim=1))
    fused = nn.packed.pack_linear(mlp)
    assert type(fused[0]) is nn.packed.LinearReLU and type(fused[1]) is nn.Identity
    return {"float": mlp, "packed": packed, "fused": fused, "compiled": ac.compile(fused)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="3 batches (a smoke run)")
    parser.add_argument("--threads", type=int, default=1, help="libac's threads (default 1, as served)")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    ac.set_num_threads(args.threads)
    table = models()
    inputs = {rows: ac.randn(rows, 784) for rows in ROWS}
    with ac.no_grad():
        for x in inputs.values():
            unfused = table["packed"](x).numpy().view(np.uint32)
            for name in ("fused", "compiled", "compiled"):   # compiled: recorded, then replayed
                assert np.array_equal(table[name](x).numpy().view(np.uint32), unfused), name
        calls, samples = {}, {}
        for _ in range(repeats):
            for rows, x in inputs.items():
                for name, model in table.items():
                    fn = lambda model=model, x=x: model(x)  # noqa: E731
                    key = (rows, name)
                    if key not in calls:
                        calls[key] = calls_for(fn, BATCH_SECONDS)
                    n = calls[key]
                    samples.setdefault(key, []).append(timeit.timeit(fn, number=n) / n * 1e6)
    med = {key: statistics.median(v) for key, v in samples.items()}
    print(host_line())
    print("784-128-10 MLP forward, %d thread(s), us per call (median of %d interleaved batches); "
          "fusion = packed / fused, compiling = fused / compiled (> 1: faster)" % (args.threads, repeats))
    header = "%5s %9s %9s %9s %9s %8s %9s" % ("rows", "float", "packed", "fused", "compiled", "fusion",
                                             "compiling")
    print(header)
    print("-" * len(header))
    results = []
    for rows in ROWS:
        f, p, u, c = (med[(rows, name)] for name in ("float", "packed", "fused", "compiled"))
        results.append({"rows": rows, "float_us": f, "packed_us": p, "fused_us": u, "compiled_us": c,
                        "fusion": p / u, "compiling": u / c})
        print("%5d %9.2f %9.2f %9.2f %9.2f %7.3fx %8.3fx" % (rows, f, p, u, c, p / u, u / c))
    print(json.dumps({"bench": "packed_fusion", **host(), "threads": args.threads, "repeats": repeats,
                      "aicraft": ac.__version__, "results": results}))


if __name__ == "__main__":
    main()
