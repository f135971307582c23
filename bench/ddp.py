"""ddp.py - data-parallel training of the MNIST MLP (784-128-10, ReLU, Adam 1e-3,
cross entropy) at batch 64 per rank: aicraft on 1 and 2 ranks (MPI, one thread
per rank) against PyTorch's DistributedDataParallel with gloo on 2 ranks (one
thread each). Both DDPs run with gradient_as_bucket_view=True (the grads are
views into the buckets, so none is copied into them; gloo supports it too);
"grads copied" is aicraft's DDP with the default False, for comparison.

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

--phases times the parts of a step on 1 and 2 ranks (pinned, one thread each):
data and forward, backward, DDP's reduction done by hand after backward (the
copy into the rank's part of the shared window, none with bucket views, a
barrier, the mean of the parts into the grads; for one rank the Allreduce
path), the optimizer (--grads-copied: DDP without bucket views); then
the step as DDP runs it (the reduction started from backward's hooks), MPI's
Allreduce of the bucket alone in a loop, and the floor under any all-reduce
here: one rank reading the bucket's bytes that the other has just written,
against reading bytes of its own.
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

# name: (framework, ranks, pinned, gradient_as_bucket_view)
CONFIGS = {
    "aicraft 1 rank": ("aicraft", 1, True, True),
    "aicraft 2 ranks": ("aicraft", 2, True, True),
    "aicraft 2 ranks, grads copied": ("aicraft", 2, True, False),
    "PyTorch DDP (gloo) 2 ranks": ("torch", 2, True, True),
    "aicraft 1 rank, 2 threads": ("aicraft", 1, False, True),
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


def aicraft_pixels(images):
    """A batch of MNIST images as the model's normalized input."""
    import aicraft as ac
    return (ac.from_numpy(images).float() * (1 / 255) - 0.1307) * (1 / 0.3081)


def aicraft_training(rank, world, bucket_view):
    """The MLP in aicraft's DDP, its Adam and loss, this rank's batches, and train(images,
    labels): one step as DDP runs it, in a scope of its own."""
    import aicraft as ac
    from aicraft import nn, optim
    from aicraft.nn.parallel import DistributedDataParallel
    ac.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)),
                                    gradient_as_bucket_view=bool(bucket_view))
    optimizer, loss_fn = optim.Adam(model.parameters(), lr=1e-3), nn.CrossEntropyLoss()

    def train(images, labels):
        with ac.checkpoint():
            loss = loss_fn(model(aicraft_pixels(images)), ac.from_numpy(labels).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model, optimizer, loss_fn, batches(rank, world), train


def aicraft_worker(steps, bucket_view):
    sys.path.insert(0, ROOT)
    import aicraft as ac
    import aicraft.distributed as dist

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    _, _, _, data, train = aicraft_training(rank, world, bucket_view)
    report(rank, world, lambda: train(*next(data)), steps, dist.barrier, ac.get_num_threads())
    dist.destroy_process_group()


def phases_worker(steps, bucket_view):
    """Rank 0 prints one JSON line: {phase: [median us, 10th percentile us]}."""
    sys.path.insert(0, ROOT)
    import numpy as np
    import aicraft as ac
    import aicraft.distributed as dist
    from aicraft._ffi import lib
    from aicraft._wrapping import _live

    dist.init_process_group("mpi")
    group = dist.default_group("bench")
    rank, world, MPI = group.rank, group.size, group.MPI
    model, optimizer, loss_fn, data, train = aicraft_training(rank, world, bucket_view)
    (bucket,) = model._buckets
    flat_tensor = ac.zeros(bucket.size)   # the by-hand reduction's own buffer
    n, flat, buffer = len(bucket.params), _live(flat_tensor), dist.typed_buffer(group, "bench", flat_tensor)
    clock = time.perf_counter
    times = {}

    def timed(name, began):
        now = clock()
        times.setdefault(name, []).append(now - began)
        return now

    def by_hand():   # the reduction after backward, each part timed
        images, labels = next(data)
        t = clock()
        with ac.checkpoint():
            x = aicraft_pixels(images)
            with model.no_sync():
                loss = loss_fn(model(x), ac.from_numpy(labels).long())
            t = timed("data and forward", t)
            optimizer.zero_grad()
            loss.backward()
            t = timed("backward", t)
            if bucket.slots is None:   # one rank: the Iallreduce path's parts
                lib.ac_grads_to_flat(bucket.pointers, n, flat)
                t = timed("grads into the bucket", t)
                group.comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
                t = timed("reduce: Allreduce / barrier", t)
                lib.ac_grads_from_flat(bucket.pointers, n, 1.0 / world, flat)
            else:                      # ranks sharing a window: DDP's parts, alternating as it does
                parity = bucket.parity
                bucket.parity ^= 1
                lib.ac_grads_to_flat(bucket.pointers, n, bucket.slots[parity][rank])   # as views: no copy
                t = timed("grads into the bucket", t)
                bucket.window.win.Sync()
                bucket.window.node.Barrier()
                bucket.window.win.Sync()
                t = timed("reduce: Allreduce / barrier", t)
                for p, view in zip(bucket.pointers, bucket.views[parity ^ 1] if bucket.views else ()):
                    lib.ac_tensor_set_grad(p, view)   # the grads move to the other part, as DDP's
                lib.ac_grads_mean_of_flats(bucket.pointers, n, 1.0 / world, bucket.slots[parity], world)
            t = timed("bucket(s) into grads", t)
            optimizer.step()
            timed("optimizer step", t)

    def as_shipped():
        images, labels = next(data)
        t = clock()
        train(images, labels)
        timed("step as DDP runs it", t)

    for _ in range(WARMUP):
        by_hand()
        as_shipped()
    times.clear()
    group.comm.Barrier()
    for _ in range(steps):   # interleaved, so that both see the same load
        by_hand()
        as_shipped()
    times["sum of the parts"] = [sum(parts) for parts in zip(*[v for k, v in times.items()
                                                              if k != "step as DDP runs it"])]
    for _ in range(steps):
        t = clock()
        group.comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
        timed("Allreduce %d KB alone, in a loop" % (flat.size * 4 // 1000), t)
    if world == 2:   # rank 1 writes the bucket's bytes into a shared window, rank 0 reads them
        node = group.comm.Split_type(MPI.COMM_TYPE_SHARED)
        nbytes = flat.size * 4
        window = MPI.Win.Allocate_shared(nbytes if rank == 1 else 0, 1, comm=node)
        peer = np.frombuffer(window.Shared_query(1)[0], np.float32)
        own, out = np.ones(flat.size, np.float32), np.empty(flat.size, np.float32)
        for _ in range(steps):
            if rank == 1:
                peer[:] = own   # dirty in rank 1's cache, as a gradient just computed
            node.Barrier()
            if rank == 0:
                t = clock()
                np.copyto(out, peer)
                timed("read %d KB the other rank wrote" % (nbytes // 1000), t)
                own += 1.0   # own bytes, just written
                t = clock()
                np.copyto(out, own)
                timed("read %d KB this rank wrote" % (nbytes // 1000), t)
            node.Barrier()
        window.Free()
        node.Free()
    if rank == 0:
        print(json.dumps({k: [statistics.median(v) * 1e6, sorted(v)[len(v) // 10] * 1e6]
                          for k, v in times.items()}), flush=True)
    dist.destroy_process_group()


def phases(steps, bucket_view):
    """Run the phases worker on 1 and 2 ranks and print its table."""
    me = os.path.abspath(__file__)
    load_before = os.getloadavg()
    found = {}
    for ranks in (1, 2):
        out = subprocess.run([sys.executable, "-m", "aicraft.distributed.run", "-n", str(ranks), me,
                              "--phases-worker", str(steps), str(int(bucket_view))], cwd=ROOT, check=True, capture_output=True,
                             text=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout
        found[ranks] = json.loads(out.strip().splitlines()[-1])
    print(host_line())
    print("load average (1 min) before %.2f, after %.2f, on %d cores" % (load_before[0], os.getloadavg()[0],
                                                                          os.cpu_count()))
    print("MLP 784-128-10, Adam, batch %d per rank, ranks pinned one core each, gradient_as_bucket_view=%s; "
          "%d steps; microseconds per step, median (10th percentile)\n" % (BATCH, bucket_view, steps))
    print("%-36s %18s %18s" % ("", "1 rank", "2 ranks"))
    for name in found[2]:
        cells = ["%9.1f (%6.1f)" % tuple(found[r][name]) if name in found[r] else "" for r in (1, 2)]
        print("%-36s %18s %18s" % (name, cells[0], cells[1]))
    one = found[1]["sum of the parts"][1] - sum(found[1][k][1] for k in found[1] if "bucket" in k or "reduce:" in k)
    print("\n(10th percentiles) 2 ranks / 1 rank in samples/s, as DDP runs: %.2fx; "
          "the parts summed: %.2fx" % (2 * found[1]["step as DDP runs it"][1] / found[2]["step as DDP runs it"][1],
                                       2 * found[1]["sum of the parts"][1] / found[2]["sum of the parts"][1]))
    compute = found[2]["sum of the parts"][1] - sum(found[2][k][1] for k in found[2]
                                                    if "bucket" in k or "reduce:" in k)
    print("without the reduction (its three parts left out): %.2fx" % (2 * one / compute))
    print(json.dumps({"bench": "ddp_phases", **host(), "steps": steps, "batch_per_rank": BATCH,
                      "gradient_as_bucket_view": bucket_view,
                      "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
                      "us_median_p10": {str(r): {k: [round(a, 1), round(b, 1)] for k, (a, b) in found[r].items()}
                                        for r in found}}))


def torch_worker(rank, world, port, steps, bucket_view):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[rank % len(os.sched_getaffinity(0))]})
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                                        torch.nn.Linear(128, 10)),
                                    gradient_as_bucket_view=bool(bucket_view))
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


def run_job(framework, ranks, pinned, bucket_view, steps):
    """One job; rank 0's report."""
    me = os.path.abspath(__file__)
    if framework == "aicraft":
        cmd = [sys.executable, "-m", "aicraft.distributed.run", "-n", str(ranks),
               "--bind-to", "core" if pinned else "none", me, "--aicraft-worker", str(steps),
               str(int(bucket_view))]
        out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    else:
        port = free_port()
        procs = [subprocess.Popen([sys.executable, me, "--torch-worker", str(r), str(ranks), str(port),
                                   str(steps), str(int(bucket_view))], stdout=subprocess.PIPE, text=True)
                 for r in range(ranks)]
        out = procs[0].communicate()[0]
        codes = [p.wait() for p in procs]
        # gloo sometimes aborts in its teardown ("terminate called without an
        # active exception") after the timed steps: keep a report made before.
        if any(codes) and '"samples_per_s"' not in out:
            raise RuntimeError("a PyTorch rank failed (exit codes %s)" % codes)
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=600, help="timed steps per job")
    parser.add_argument("--aicraft-worker", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--torch-worker", type=int, nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--phases", action="store_true", help="where a step's time goes, on 1 and 2 ranks")
    parser.add_argument("--phases-worker", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--grads-copied", action="store_true",
                        help="--phases: DDP with gradient_as_bucket_view=False (the grads copied into the bucket)")
    args = parser.parse_args()
    if args.phases_worker:
        return phases_worker(*args.phases_worker)
    if args.phases:
        return phases(args.steps, not args.grads_copied)
    if args.aicraft_worker:
        return aicraft_worker(*args.aicraft_worker)
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
