"""job.py - what each rank runs in tests/test_distributed.py's MPI jobs:

    python -m aicraft.distributed.run -n N tests/mpi/job.py WHAT [args]

WHAT is one of the functions below; each rank writes what it returns to
$JOB_RESULTS/rank<r>.json (rank 0's holds the comparisons).

The model is the MNIST MLP (784-128-10) on synthetic data standing in for MNIST:
pixels uniform in [0, 1), labels from a fixed random linear teacher. Real MNIST
would need a download, and the comparison here does not depend on the data.
"""
import json
import os
import signal
import sys
import time

import numpy as np

import aicraft as ac
import aicraft.distributed as dist
from aicraft import nn, optim
from aicraft._ffi import ffi
from aicraft.data import DistributedSampler
from aicraft.nn.parallel import DistributedDataParallel
from aicraft._wrapping import _live


def synthetic_mnist(steps, batch, seed=1234):
    """steps batches of batch flattened 28x28 images and their labels (int64)."""
    rng = np.random.default_rng(seed)
    x = rng.random((steps, batch, 784), dtype=np.float32)
    teacher = rng.standard_normal((784, 10)).astype(np.float32)
    return x, (x @ teacher).argmax(axis=2).astype(np.int64)


def mlp(seed):
    ac.manual_seed(seed)
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def make_optimizer(name, params):
    if name == "sgd":
        return optim.SGD(params, lr=0.01, momentum=0.9)
    return optim.Adam(params, lr=1e-3)


def fit(model, optimizer, x, y, warm_steps=None, set_to_none=True):
    """Train on every batch; returns heap allocations made after warm_steps steps."""
    loss_fn = nn.CrossEntropyLoss()
    allocations = 0
    for step in range(len(x)):
        if step == warm_steps:
            allocations = ac.memory_stats()["heap_allocations"]
        with ac.checkpoint():
            optimizer.zero_grad(set_to_none)
            loss = loss_fn(model(ac.from_numpy(x[step])), ac.from_numpy(y[step]))
            loss.backward()
            optimizer.step()
    if warm_steps is None:
        return 0
    return ac.memory_stats()["heap_allocations"] - allocations


def flat_weights(model):
    return np.concatenate([p.numpy().ravel() for p in model.parameters()])


def grads_in_buckets(model):
    """Whether every parameter's grad lies in its bucket's memory (this rank's buffer,
    or its parts of the shared window)."""
    def span(t):
        start = int(ffi.cast("uintptr_t", t.data))
        return start, start + 4 * t.size
    inside = []
    for bucket in model._buckets:
        parts = [_live(bucket.flat)] if bucket.slots is None else [s[dist.get_rank()] for s in bucket.slots]
        for p in bucket.params:
            g = span(_live(p).grad)
            inside.append(any(lo <= g[0] and g[1] <= hi for lo, hi in map(span, parts)))
    return all(inside)


def train(steps, batch, bucket_cap_mb):
    """N ranks of batch b against one process of batch N * b, for SGD and Adam, with
    the gradients copied into the buckets and as views of them (Adam's steps then
    zero the grads in place, SGD's drop them)."""
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    x, y = synthetic_mnist(int(steps), size * int(batch))
    mine = slice(rank * int(batch), (rank + 1) * int(batch))
    result = {"world_size": size, "threads": ac.get_num_threads()}
    for name in ("sgd", "adam", "sgd views", "adam views"):
        views = name.endswith("views")
        # Each rank starts from its own weights: DDP must replace them with rank 0's.
        model = DistributedDataParallel(mlp(seed=100 + rank), bucket_cap_mb=float(bucket_cap_mb),
                                        gradient_as_bucket_view=views)
        result["buckets"] = len(model._buckets)
        allocations = fit(model, make_optimizer(name.split()[0], model.parameters()), x[:, mine], y[:, mine],
                          warm_steps=10, set_to_none=name != "adam views")
        in_buckets = grads_in_buckets(model)
        weights = ac.from_numpy(flat_weights(model))
        everyone = [ac.empty(weights.numel()) for _ in range(size)]
        dist.all_gather(everyone, weights)
        allocations_everywhere = ac.tensor([allocations])
        dist.all_reduce(allocations_everywhere, dist.ReduceOp.MAX)
        if rank == 0:
            alone = mlp(seed=100)
            fit(alone, make_optimizer(name.split()[0], alone.parameters()), x, y)
            result[name] = {
                "max_diff": float(np.abs(flat_weights(alone) - weights.numpy()).max()),
                "ranks_identical": all(np.array_equal(t.numpy(), weights.numpy()) for t in everyone),
                "heap_allocations_after_warmup": int(allocations_everywhere.item()),
                "grads_in_buckets": in_buckets,
            }
    dist.destroy_process_group()
    return result


def sampler(length, epochs):
    """Each epoch, the indices every rank's DistributedSampler gives, gathered on rank 0."""
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    result = {}
    for drop_last in (False, True):
        s = DistributedSampler(range(int(length)), shuffle=True, seed=7, drop_last=drop_last)
        epochs_seen = []
        for epoch in range(int(epochs)):
            s.set_epoch(epoch)
            mine = ac.tensor(list(s), dtype=ac.int64)
            everyone = [ac.empty(len(s), dtype=ac.int64) for _ in range(size)]
            dist.all_gather(everyone, mine)
            epochs_seen.append([t.tolist() for t in everyone])
        result["drop_last" if drop_last else "padded"] = epochs_seen
    dist.destroy_process_group()
    return result


def collectives():
    """all_reduce with each op, broadcast, all_gather and barrier, on float32 and int64;
    then the bad calls."""
    result = {}
    try:
        dist.init_process_group("mpi", world_size=99)
    except ValueError as e:
        result["wrong_world_size"] = str(e)
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    for op in ("SUM", "AVG", "MAX", "MIN"):
        t = ac.tensor([rank + 1.0, -2.0 * rank, 0.5])
        dist.all_reduce(t, getattr(dist.ReduceOp, op))
        result[op] = t.tolist()
    counts = ac.tensor([rank, 1], dtype=ac.int64)
    dist.all_reduce(counts)
    result["int64_sum"] = counts.tolist()
    with ac.checkpoint():                       # a scoped tensor works like any other
        scoped = ac.full((2, 3), float(rank))
        dist.broadcast(scoped, src=size - 1)
        result["broadcast"] = scoped.tolist()
    with ac.checkpoint():
        ended = ac.ones(3)
    try:
        dist.all_reduce(ended)
    except ac.ScopeError as e:
        result["ended_scope"] = str(e)
    parts = [ac.empty(2) for _ in range(size)]
    dist.all_gather(parts, ac.tensor([rank, 10.0 * rank]))
    result["all_gather"] = [p.tolist() for p in parts]
    norm = nn.BatchNorm1d(2)                    # buffers: rank 0's at start and at each forward
    norm.running_mean.fill_(float(rank))
    model = DistributedDataParallel(norm)
    result["buffers_at_start"] = norm.running_mean.tolist()
    norm.running_mean.fill_(rank + 5.0)
    model.eval()
    model(ac.ones(4, 2))
    result["buffers_after_forward"] = norm.running_mean.tolist()
    result["bad_calls"] = bad_calls(size)
    dist.barrier()
    dist.destroy_process_group()
    return result


def bad_calls(size):
    """Each bad call's exception type and message; none of them reaches MPI."""
    calls = {
        "non_tensor": lambda: dist.all_reduce([1.0, 2.0]),
        "numpy_array": lambda: dist.broadcast(np.ones(3, np.float32)),
        "op": lambda: dist.all_reduce(ac.ones(2), "sum"),
        "avg_int64": lambda: dist.all_reduce(ac.tensor([1]), dist.ReduceOp.AVG),
        "sum_bool": lambda: dist.all_reduce(ac.tensor([True])),
        "src": lambda: dist.broadcast(ac.ones(2), src=size),
        "gather_list": lambda: dist.all_gather([ac.ones(2)] * (size + 1), ac.ones(2)),
        "gather_sizes": lambda: dist.all_gather([ac.ones(3)] * size, ac.ones(2)),
        "init_twice": lambda: dist.init_process_group("mpi"),
        "ddp_module": lambda: DistributedDataParallel(lambda x: x),
        "ddp_bucket": lambda: DistributedDataParallel(mlp(0), bucket_cap_mb=0),
        "ddp_view": lambda: DistributedDataParallel(mlp(0), gradient_as_bucket_view=1),
    }
    found = {}
    for name, call in calls.items():
        try:
            call()
            found[name] = None
        except Exception as e:
            found[name] = [type(e).__name__, str(e)]
    return found


def accumulate(steps, batch):
    """no_sync(): two half batches accumulated on each rank, averaged once, equal one
    synced step on the whole batch."""
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    x, y = synthetic_mnist(int(steps), size * int(batch))
    mine = slice(rank * int(batch), (rank + 1) * int(batch))
    half = int(batch) // 2
    loss_fn = nn.CrossEntropyLoss()
    model = DistributedDataParallel(mlp(seed=5))
    optimizer = optim.SGD(model.parameters(), lr=0.05)
    for step in range(int(steps)):
        xs, ys = x[step, mine], y[step, mine]
        optimizer.zero_grad()
        with model.no_sync():
            (loss_fn(model(ac.from_numpy(xs[:half])), ac.from_numpy(ys[:half])) * 0.5).backward()
        (loss_fn(model(ac.from_numpy(xs[half:])), ac.from_numpy(ys[half:])) * 0.5).backward()
        optimizer.step()
    result = {}
    if rank == 0:
        alone = mlp(seed=5)
        fit(alone, optim.SGD(alone.parameters(), lr=0.05), x, y)
        result["max_diff"] = float(np.abs(flat_weights(alone) - flat_weights(model)).max())
    dist.destroy_process_group()
    return result


def transport():
    """Whether the ranks share a memory segment of MPI's, and how many TCP
    connections each rank holds open (/proc/self/net/tcp*: state 01 is ESTABLISHED)."""
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    grads = ac.ones(1 << 18)
    dist.all_reduce(grads)                       # 1 MB: the transport carries it
    with open("/proc/self/maps") as f:
        segments = sorted({line.split()[-1] for line in f if "/dev/shm/" in line})
    sockets = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            sockets.add(link[len("socket:["):-1])
    established = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as f:
            rows = [line.split() for line in f.readlines()[1:]]
        established += sum(1 for row in rows if row[9] in sockets and row[3] == "01")
    summary = ac.tensor([established], dtype=ac.int64)
    dist.all_reduce(summary, dist.ReduceOp.MIN)
    shared = dist.get_world_size() > 1 and _same_on_every_rank(segments)
    result = {"sum": grads[0].item(), "min_tcp_connections": summary.item(), "shared_segment": shared}
    dist.destroy_process_group()
    return result


class OneHeadUsed(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(784, 10)
        self.unused = nn.Linear(784, 10)

    def forward(self, x):
        return self.used(x)


def overlap(batch):
    """DDP starts reducing the last layer's buckets while backward still computes the
    first layer, and the result equals averaging after backward; PyTorch's bucket
    layout; a parameter left out of the loss is an error on every rank."""
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    x, y = synthetic_mnist(1, size * int(batch))
    mine = slice(rank * int(batch), (rank + 1) * int(batch))
    x, y = ac.from_numpy(x[0, mine]), ac.from_numpy(y[0, mine])
    loss_fn = nn.CrossEntropyLoss()
    inner = mlp(seed=7)
    started = []   # buckets under way when the first layer's weight gets its gradient
    model = DistributedDataParallel(inner, bucket_cap_mb=1e-5)   # a bucket per parameter
    inner[0].weight.register_post_accumulate_grad_hook(lambda t: started.append(model._next))
    loss_fn(model(x), y).backward()
    overlapped = [p.grad.numpy() for p in model.parameters()]
    model.zero_grad()
    with model.no_sync():
        loss_fn(model(x), y).backward()
    diff = 0.0
    for p, grad in zip(model.parameters(), overlapped):
        dist.all_reduce(p.grad, dist.ReduceOp.AVG)
        diff = max(diff, float(np.abs(p.grad.numpy() - grad).max()))
    result = {"buckets": len(model._buckets), "started": started, "max_diff": diff,
              "shared_window": model._buckets[0].slots is not None}
    wide = nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 512), nn.Linear(512, 512))
    result["default_buckets"] = [b.names for b in DistributedDataParallel(wide)._buckets]
    result["explicit_buckets"] = [b.names for b in DistributedDataParallel(wide, bucket_cap_mb=1)._buckets]
    try:
        loss_fn(DistributedDataParallel(OneHeadUsed())(x), y).backward()
    except RuntimeError as exc:
        result["unused"] = str(exc)
    dist.destroy_process_group()
    dist.init_process_group("mpi")
    try:
        model(x)
    except RuntimeError as exc:
        result["old_group"] = str(exc)
    dist.destroy_process_group()
    return result


def bucket_view_parity(batch):
    """aicraft's and PyTorch's DDP (gloo) with gradient_as_bucket_view=True in the same
    ranks, from the same weights on the same data: the grads after each backward,
    and what zero_grad leaves (None; zeros with set_to_none=False)."""
    import torch
    import torch.distributed as torch_dist
    from mpi4py import MPI
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    port = MPI.COMM_WORLD.bcast(_free_port() if rank == 0 else None, root=0)
    torch.set_num_threads(1)
    torch_dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=size)
    model = DistributedDataParallel(mlp(seed=3), gradient_as_bucket_view=True)
    twin = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    with torch.no_grad():
        for t, p in zip(twin.parameters(), model.parameters()):
            t.copy_(torch.from_numpy(p.numpy()))
    twin = torch.nn.parallel.DistributedDataParallel(twin, gradient_as_bucket_view=True)
    x, y = synthetic_mnist(3, size * int(batch))
    mine = slice(rank * int(batch), (rank + 1) * int(batch))
    frameworks = {
        "aicraft": (model, optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                    ac.from_numpy, lambda g: g.numpy()),
        "torch": (twin, torch.optim.SGD(twin.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(),
                  torch.from_numpy, lambda g: g.numpy()),
    }
    seen = {name: [] for name in frameworks}
    grads = {name: [] for name in frameworks}
    for step in range(3):
        for name, (net, opt, loss_fn, to_tensor, to_numpy) in frameworks.items():
            loss_fn(net(to_tensor(x[step, mine])), to_tensor(y[step, mine])).backward()
            grads[name].append([to_numpy(p.grad).copy() for p in net.parameters()])
            opt.step()
            opt.zero_grad(set_to_none=step != 1)
            seen[name].append(["none" if p.grad is None else "zeros" if not to_numpy(p.grad).any() else "other"
                               for p in net.parameters()])
    diff = max(float(np.abs(a - b).max()) for step_a, step_b in zip(grads["aicraft"], grads["torch"])
               for a, b in zip(step_a, step_b))
    torch_dist.destroy_process_group()
    # A grad held past destroy_process_group stays readable, and so does the
    # parameter's, now in memory of its own.
    nn.CrossEntropyLoss()(model(ac.from_numpy(x[0, mine])), ac.from_numpy(y[0, mine])).backward()
    weight = model.module[0].weight
    held, expected = weight.grad, weight.grad.numpy()
    dist.destroy_process_group()
    after = [np.array_equal(held.numpy(), expected), np.array_equal(weight.grad.numpy(), expected)]
    return {"after_zero_grad": seen, "max_grad_diff": diff, "after_destroy": after,
            "max_grad": max(float(np.abs(g).max()) for step in grads["torch"] for g in step)}


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _same_on_every_rank(segments):
    """True when some /dev/shm segment is mapped by every rank."""
    from mpi4py import MPI
    everyone = MPI.COMM_WORLD.allgather(segments)
    return bool(set(everyone[0]).intersection(*map(set, everyone[1:])))


def fail(how):
    """Rank 1 raises (or is killed) while the others wait in a collective."""
    dist.init_process_group("mpi")
    if dist.get_rank() == 1:
        time.sleep(0.2)
        if how == "raise":
            raise RuntimeError("rank 1 fails on purpose")
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    return {"passed_barrier": True}


def threads():
    return {"threads": ac.get_num_threads(), "cores": len(os.sched_getaffinity(0))}


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    rank = os.environ.get("PMI_RANK", "0")   # the launcher's (MPICH's), readable before init
    out = {"train": train, "sampler": sampler, "collectives": collectives, "accumulate": accumulate,
           "transport": transport, "fail": fail, "threads": threads, "overlap": overlap,
           "bucket_view_parity": bucket_view_parity}[what](*args)
    with open(os.path.join(os.environ["JOB_RESULTS"], "rank%s.json" % rank), "w") as f:
        json.dump(out, f)
