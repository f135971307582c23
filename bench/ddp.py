"""ddp.py - data-parallel training of the MNIST MLP (784-128-10, ReLU, Adam 1e-3,
cross entropy) at batch 64 per rank: aicraft on 1 and 2 ranks (MPI, one thread
per rank) against PyTorch's DistributedDataParallel with gloo on 2 ranks (one
thread each).

    python bench/ddp.py                  # 5 interleaved rounds of 600 steps
    python bench/ddp.py --repeats 3 --steps 300

Each measurement is a fresh job: aicraft's through `python -m
aicraft.distributed.run -n N` (each rank pinned to a core, so its thread pool
has one thread), PyTorch's as N processes joined by gloo over TCP on this
machine (each pinned to a core, torch.set_num_threads(1)). A job warms up for
20 steps, then times --steps steps between two barriers; samples/s counts every
rank's samples. The jobs take turns, the order alternating between rounds, and
the table shows medians; "fast steps" is the same from the 1st percentile of
the step time: what the code does when, for once, no other process takes the
ranks' cores, on a machine other work keeps busy. "aicraft 1 rank, 2 threads" (the rank not pinned) is
for reference: one process using both cores through its thread pool.

The data: the first 10,000 MNIST training images when data/MNIST/raw holds them,
else synthetic ones (see common.py); each rank reads its own slice of every
global batch. Prints the host and load, a table, then one JSON line.
PyTorch: `pip install torch==2.13.0`; MPI: `pip install .[mpi]`.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

from common import ROOT, host, host_line, load_mnist_uint8, torch_version

BATCH = 64
WARMUP = 20

# name: (framework, ranks, pinned)
CONFIGS = {
    "aicraft 1 rank": ("aicraft", 1, True),
    "aicraft 2 ranks": ("aicraft", 2, True),
    "PyTorch DDP (gloo) 2 ranks": ("torch", 2, True),
    "aicraft 1 rank, 2 threads": ("aicraft", 1, False),
}


# ---- the work of one rank ---------------------------------------------------------

def batches(rank, world):
    """An endless sequence of (images uint8, labels uint8): this rank's slice of each
    global batch of world * BATCH images."""
    images, labels, _ = load_mnist_uint8()
    step = world * BATCH
    start = 0
    while True:
        if start + step > len(images):
            start = 0
        mine = slice(start + rank * BATCH, start + (rank + 1) * BATCH)
        yield images[mine], labels[mine]
        start += step


def aicraft_worker(steps):
    sys.path.insert(0, ROOT)
    import aicraft as ac
    import aicraft.distributed as dist
    from aicraft import nn, optim
    from aicraft.nn.parallel import DistributedDataParallel

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    ac.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)))
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    data = batches(rank, world)

    def step():
        images, labels = next(data)
        with ac.checkpoint():
            x = (ac.from_numpy(images).float() * (1 / 255) - 0.1307) * (1 / 0.3081)
            loss = loss_fn(model(x), ac.from_numpy(labels).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    report(rank, world, step, steps, dist.barrier, ac.get_num_threads())
    dist.destroy_process_group()


def torch_worker(rank, world, port, steps):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[rank % len(os.sched_getaffinity(0))]})
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                                        torch.nn.Linear(128, 10)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = batches(rank, world)

    def step():
        images, labels = next(data)
        x = torch.from_numpy(images).float().mul_(1 / 255).sub_(0.1307).mul_(1 / 0.3081)
        loss = loss_fn(model(x), torch.from_numpy(labels).long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    report(rank, world, step, steps, dist.barrier, torch.get_num_threads())
    dist.destroy_process_group()


def report(rank, world, step, steps, barrier, threads):
    """Warm up, time `steps` steps between barriers; rank 0 prints one JSON line: the
    samples/s, and the samples/s of its step time's 1st percentile (a step ends with
    the gradients' all-reduce, so every rank's step takes as long as the slowest's)."""
    for _ in range(WARMUP):
        step()
    barrier()
    times = []
    start = time.perf_counter()
    for _ in range(steps):
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        fast_step = sorted(times)[len(times) // 100]
        print(json.dumps({"samples_per_s": steps * BATCH * world / elapsed, "threads": threads,
                          "fast_samples_per_s": BATCH * world / fast_step}), flush=True)


# ---- the driver ---------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(framework, ranks, pinned, steps):
    """One job; rank 0's report."""
    me = os.path.abspath(__file__)
    if framework == "aicraft":
        cmd = [sys.executable, "-m", "aicraft.distributed.run", "-n", str(ranks),
               "--bind-to", "core" if pinned else "none", me, "--aicraft-worker", str(steps)]
        out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    else:
        port = free_port()
        procs = [subprocess.Popen([sys.executable, me, "--torch-worker", str(r), str(ranks), str(port),
                                   str(steps)], stdout=subprocess.PIPE, text=True) for r in range(ranks)]
        out = procs[0].communicate()[0]
        for p in procs:
            if p.wait() != 0:
                raise RuntimeError("a PyTorch rank failed")
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=600, help="timed steps per job")
    parser.add_argument("--aicraft-worker", type=int, metavar="STEPS", help=argparse.SUPPRESS)
    parser.add_argument("--torch-worker", type=int, nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.aicraft_worker:
        return aicraft_worker(args.aicraft_worker)
    if args.torch_worker:
        return torch_worker(*args.torch_worker)

    version = torch_version()
    names = [n for n in CONFIGS if version or CONFIGS[n][0] != "torch"]
    load_before = os.getloadavg()
    runs = {name: [] for name in names}
    fast_runs = {name: [] for name in names}
    threads = {}
    for rep in range(args.repeats):
        for name in (names if rep % 2 == 0 else names[::-1]):
            result = run_job(*CONFIGS[name], args.steps)
            runs[name].append(result["samples_per_s"])
            fast_runs[name].append(result["fast_samples_per_s"])
            threads[name] = result["threads"]
    load_after = os.getloadavg()
    speed = {name: statistics.median(v) for name, v in runs.items()}
    fast = {name: statistics.median(v) for name, v in fast_runs.items()}

    _, _, data = load_mnist_uint8()
    print(host_line())
    print("load average (1 min) before %.2f, after %.2f, on %d cores" % (load_before[0], load_after[0],
                                                                          os.cpu_count()))
    print("MLP 784-128-10, Adam 1e-3, batch %d per rank; PyTorch %s" % (BATCH, version or "not installed"))
    print("data: %s; %d interleaved rounds of %d steps, medians\n" % (data, args.repeats, args.steps))
    base, fast_base = speed["aicraft 1 rank"], fast["aicraft 1 rank"]
    print("%-30s %8s %12s %8s %14s %8s" % ("", "threads", "samples/s", "vs 1", "fast steps", "vs 1"))
    for name in names:
        print("%-30s %8d %12.0f %7.2fx %14.0f %7.2fx" % (name, threads[name], speed[name], speed[name] / base,
                                                         fast[name], fast[name] / fast_base))
    print("(fast steps: samples/s at the 1st percentile of the step time, what the ranks do while")
    print(" other processes leave them their cores; vs 1: against aicraft 1 rank)")
    torch_name = "PyTorch DDP (gloo) 2 ranks"
    for label, table in (("whole runs", speed), ("fast steps", fast)):
        line = "%s: aicraft 2 ranks / aicraft 1 rank = %.2fx (target >= 1.6x)" % (
            label, table["aicraft 2 ranks"] / table["aicraft 1 rank"])
        if torch_name in table:
            line += ", / PyTorch DDP 2 ranks = %.2fx (target >= 2x)" % (
                table["aicraft 2 ranks"] / table[torch_name])
        print(line if label == "fast steps" else "\n" + line)
    print(json.dumps({"bench": "ddp", **host(), "data": data, "torch": version, "batch_per_rank": BATCH,
                      "repeats": args.repeats, "steps": args.steps,
                      "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
                      "samples_per_s": {name: round(v) for name, v in speed.items()},
                      "fast_step_samples_per_s": {name: round(v) for name, v in fast.items()},
                      "runs": {name: [round(v) for v in runs[name]] for name in names}}))


if __name__ == "__main__":
    main()
