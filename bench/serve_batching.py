"""bench/serve_batching.py - aicraft.serve's adaptive batching and SharedModel's lock,
in process (no HTTP: bench/serve_load.sh measures the service).

    python bench/serve_batching.py [--rounds 5] [--seconds 1.0] [--quick]

Batching: the MNIST demo's MLP (784-128-10, random weights) and a wider one
(784-1024-1024-10), each behind an infer as the service's (no_grad, a scope per call,
NumPy in and out). 32 client threads each send
1-row requests back to back: requests/s with batching off (each thread calls infer, as
the app does with max_batch_size=1) and on (Batcher, max_batch_size 32, max_delay_s 0
and 1 ms); then one client: p50/p99 latency, off and on. The configurations alternate
round by round; each figure is the median over the rounds.

Lock: SharedModel.read() against update() around the same prediction (the wider MLP,
one libac thread each), in 4 forked processes at once (under read() predictions share
the lock; under update() they take turns); then the cost of one read() and one update()
alone, in microseconds.

Prints the CPU and SIMD path, the tables, then one JSON line.
"""
import argparse
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import numpy as np  # noqa: E402

import aicraft as ac  # noqa: E402
from aicraft import nn  # noqa: E402
from aicraft.serve.batching import Batcher  # noqa: E402
from aicraft.serve.shared import SharedModel  # noqa: E402
from common import host, host_line  # noqa: E402

CLIENTS = 32
PROCESSES = 4


MODELS = {"784-128-10": (784, 128, 10), "784-1024-1024-10": (784, 1024, 1024, 10)}


def make_model(widths):
    """An MLP of these widths (Linear, ReLU, ..., Linear), random weights."""
    ac.manual_seed(0)
    layers = []
    for n_in, n_out in zip(widths, widths[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def make_infer(model):
    def infer(inputs):
        with ac.no_grad(), ac.checkpoint():
            return {"output__0": model(ac.from_numpy(inputs["input__0"])).numpy()}
    return infer


def throughput(run, seconds):
    """Requests/s of CLIENTS threads each calling run on a 1-row input back to back."""
    row = {"input__0": np.random.default_rng(0).random((1, 784), dtype=np.float32)}
    counts = [0] * CLIENTS
    stop = threading.Event()
    start_line = threading.Barrier(CLIENTS + 1)

    def client(i):
        start_line.wait()
        while not stop.is_set():
            run(row)
            counts[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    start_line.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    done = sum(counts)
    elapsed = time.perf_counter() - start
    stop.set()
    for t in threads:
        t.join()
    return done / elapsed


def latencies(run, count):
    """(p50, p99) in microseconds of count 1-row calls of run, one after another."""
    row = {"input__0": np.random.default_rng(1).random((1, 784), dtype=np.float32)}
    times = []
    for _ in range(count):
        start = time.perf_counter()
        run(row)
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1e6, times[int(len(times) * 0.99)] * 1e6


def _predict_loop(conn, shared, which, seconds):
    x = ac.from_numpy(np.random.default_rng(2).random((1, 784), dtype=np.float32))
    ac.set_num_threads(1)   # a worker process each, as under gunicorn: the cores are the processes'
    lock = shared.read if which == "read" else shared.update
    count = 0
    conn.recv()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        with lock(), ac.no_grad(), ac.checkpoint():
            shared.module(x)
        count += 1
    conn.send(count / seconds)


def processes_throughput(shared, which, seconds):
    """Predictions/s of PROCESSES forked processes predicting under shared.read() or update()."""
    fork = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for _ in range(PROCESSES):
        parent, child = fork.Pipe()
        proc = fork.Process(target=_predict_loop, args=(child, shared, which, seconds))
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    for pipe in pipes:
        pipe.send("go")
    total = sum(pipe.recv() for pipe in pipes)
    for proc in procs:
        proc.join()
    return total


def lock_cost_us(enter, count=20000):
    start = time.perf_counter()
    for _ in range(count):
        with enter():
            pass
    return (time.perf_counter() - start) / count * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0, help="per throughput figure per round")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 0.3 s: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 2, 0.3
    print(host_line())
    print("libac threads: %d; %d client threads; %d rounds, medians" % (ac.get_num_threads(), CLIENTS, args.rounds))

    configs = {}   # (model, batching) -> the call a client makes
    for model_name, widths in MODELS.items():
        infer = make_infer(make_model(widths))
        latencies(infer, 200)   # warm-up
        configs[model_name, "off"] = infer
        configs[model_name, "on, delay 0"] = Batcher(infer, 32, 0.0, max_queue=CLIENTS).submit
        configs[model_name, "on, delay 1 ms"] = Batcher(infer, 32, 0.001, max_queue=CLIENTS).submit
    rps, p50, p99 = ({key: [] for key in configs} for _ in range(3))
    for _ in range(args.rounds):
        for key, run in configs.items():
            rps[key].append(throughput(run, args.seconds))
            a, b = latencies(run, max(200, int(2000 * args.seconds)))
            p50[key].append(a)
            p99[key].append(b)
    median = statistics.median
    print("\n%-18s %-16s %14s %14s %14s" % ("model", "batching", "32 clients r/s", "1 client p50", "1 client p99"))
    for key in configs:
        print("%-18s %-16s %14.0f %11.1f us %11.1f us" % (key + (median(rps[key]), median(p50[key]),
                                                                 median(p99[key]))))

    model = make_model(MODELS["784-1024-1024-10"])   # a prediction long beside the lock's own cost
    shared = SharedModel(model)
    per_process = {"read": [], "update": []}
    for _ in range(args.rounds):
        for which in per_process:
            per_process[which].append(processes_throughput(shared, which, args.seconds))
    read_us = median(lock_cost_us(shared.read) for _ in range(3))
    update_us = median(lock_cost_us(shared.update) for _ in range(3))
    print("\n%-44s %14s" % ("784-1024-1024-10, %d processes predicting" % PROCESSES, "predictions/s"))
    print("%-44s %14.0f" % ("under read() (shared)", median(per_process["read"])))
    print("%-44s %14.0f" % ("under update() (exclusive)", median(per_process["update"])))
    print("one read() alone: %.1f us; one update() alone: %.1f us" % (read_us, update_us))

    print(json.dumps({
        "bench": "serve_batching", **host(), "threads": ac.get_num_threads(), "rounds": args.rounds,
        "requests_per_s_32_clients": {"%s, %s" % key: round(median(v)) for key, v in rps.items()},
        "p50_us_1_client": {"%s, %s" % key: round(median(v), 1) for key, v in p50.items()},
        "p99_us_1_client": {"%s, %s" % key: round(median(v), 1) for key, v in p99.items()},
        "predictions_per_s_%d_processes" % PROCESSES: {k: round(median(v)) for k, v in per_process.items()},
        "lock_us": {"read": round(read_us, 2), "update": round(update_us, 2)}}))


if __name__ == "__main__":
    main()
