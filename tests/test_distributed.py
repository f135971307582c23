"""test_distributed.py - data-parallel training over MPI: aicraft.distributed,
DistributedDataParallel, DistributedSampler and the launcher, in real jobs of 1, 2
and 3 ranks (tests/mpi/job.py, started by `python -m aicraft.distributed.run`
or plain mpiexec, each bounded by `timeout`); and what one process can check:
calls before init, the sampler's arithmetic, the thread pool's size from the CPU
affinity. The jobs need mpi4py and an MPI runtime (`pip install .[mpi]`;
`make test` installs them).
"""
import json
import os
import subprocess
import sys
import time

import pytest

import aicraft as ac
import aicraft.distributed as dist
from aicraft.data import DataLoader, DistributedSampler, TensorDataset
from aicraft.distributed import run
from aicraft.nn.parallel import DistributedDataParallel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(ROOT, "tests", "mpi", "job.py")
# Forces MPICH's TCP transport: no shared memory between ranks on one machine
# (NOLOCAL), the libfabric network module, and libfabric's tcp provider.
TCP_ONLY = {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}

needs_mpi = pytest.mark.skipif(not dist.is_available() or run.find_mpiexec() is None,
                               reason="needs mpi4py and mpiexec: pip install .[mpi]")


def launch(tmp_path, n, *job_args, env=None, launcher=(), limit=60):
    """Run tests/mpi/job.py on n ranks under `timeout limit`; (completed process,
    seconds taken, {rank: its results})."""
    results = tmp_path / ("job%d" % len(list(tmp_path.iterdir())))
    results.mkdir()
    if launcher == "mpiexec":
        start = [run.find_mpiexec(), "-n", str(n), sys.executable]
    else:
        start = [sys.executable, "-m", "aicraft.distributed.run", "-n", str(n), *launcher]
    environ = {k: v for k, v in os.environ.items() if k != "AC_NUM_THREADS"}   # the affinity decides
    environ.update(PYTHONPATH=ROOT, JOB_RESULTS=str(results), **(env or {}))
    began = time.monotonic()
    proc = subprocess.run(["timeout", str(limit), *start, JOB, *map(str, job_args)], cwd=ROOT,
                          env=environ, capture_output=True, text=True)
    seconds = time.monotonic() - began
    found = {int(f.stem[len("rank"):]): json.loads(f.read_text()) for f in results.glob("rank*.json")}
    return proc, seconds, found


def ran(proc):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


# ---- one process ------------------------------------------------------------------

def test_import_aicraft_never_imports_mpi():
    code = ("import sys, aicraft, aicraft.distributed, aicraft.nn.parallel\n"
            "print('mpi4py' in sys.modules, aicraft.distributed.is_initialized())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


@pytest.mark.parametrize("call", [
    lambda: dist.all_reduce(ac.ones(2)), lambda: dist.broadcast(ac.ones(2)), lambda: dist.barrier(),
    lambda: dist.all_gather([ac.ones(2)], ac.ones(2)), lambda: dist.get_rank(),
    lambda: dist.get_world_size(), lambda: dist.destroy_process_group(),
    lambda: DistributedDataParallel(ac.nn.Linear(2, 2)), lambda: DistributedSampler(range(4))])
def test_calls_before_init_process_group_say_so(call):
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="has not been initialized; call aicraft.distributed.init_process_group"):
        call()


def test_init_process_group_refuses_other_backends_and_bad_arguments():
    with pytest.raises(ValueError, match="backend 'gloo' is not available; aicraft runs on MPI"):
        dist.init_process_group("gloo")
    with pytest.raises(TypeError, match="rank must be an int, not str"):
        dist.init_process_group("mpi", rank="0")
    assert not dist.is_initialized()


def epochs_of(length, replicas, drop_last, shuffle=True, epochs=3):
    """Each epoch: the lists of indices of every rank's sampler."""
    samplers = [DistributedSampler(range(length), num_replicas=replicas, rank=r, shuffle=shuffle,
                                   seed=3, drop_last=drop_last) for r in range(replicas)]
    seen = []
    for epoch in range(epochs):
        for s in samplers:
            s.set_epoch(epoch)
        seen.append([list(s) for s in samplers])
    return samplers, seen


@pytest.mark.parametrize("length, replicas", [(10, 3), (12, 3), (7, 2), (2, 3), (100, 1)])
def test_distributed_sampler_covers_the_data_once_per_epoch(length, replicas):
    samplers, seen = epochs_of(length, replicas, drop_last=False)
    for ranks in seen:
        everything = sorted(i for r in ranks for i in r)
        assert set(everything) == set(range(length))
        assert len(everything) == -(-length // replicas) * replicas   # padded to equal shares
        assert {len(r) for r in ranks} == {len(samplers[0])}
    if length > 2:
        assert seen[0] != seen[1]                                      # set_epoch reshuffles
    samplers, dropped = epochs_of(length, replicas, drop_last=True)
    for ranks in dropped:
        everything = [i for r in ranks for i in r]
        assert len(everything) == len(set(everything)) == length // replicas * replicas


def test_distributed_sampler_without_shuffle_deals_in_turn_and_feeds_a_dataloader():
    _, seen = epochs_of(7, 3, drop_last=False, shuffle=False, epochs=1)
    assert seen[0] == [[0, 3, 6], [1, 4, 0], [2, 5, 1]]
    data = TensorDataset(ac.arange(10).float())
    sampler = DistributedSampler(data, num_replicas=2, rank=1, shuffle=False)
    batches = [b[0].tolist() for b in DataLoader(data, batch_size=2, sampler=sampler)]
    assert batches == [[1.0, 3.0], [5.0, 7.0], [9.0]]


def test_distributed_sampler_refuses_bad_arguments():
    data = range(5)
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, 1\], got 2"):
        DistributedSampler(data, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas must be a positive int, got 0"):
        DistributedSampler(data, num_replicas=0, rank=0)
    with pytest.raises(TypeError, match="shuffle must be a bool"):
        DistributedSampler(data, num_replicas=1, rank=0, shuffle="yes")
    with pytest.raises(TypeError, match="seed must be an int"):
        DistributedSampler(data, num_replicas=1, rank=0, seed=0.5)
    with pytest.raises(TypeError, match="epoch must be an int"):
        DistributedSampler(data, num_replicas=1, rank=0).set_epoch("1")


def threads_in_subprocess(code, **env):
    environ = {k: v for k, v in os.environ.items() if k != "AC_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env=dict(environ, PYTHONPATH=ROOT, **env), check=True)
    return int(out.stdout)


def test_thread_pool_is_sized_from_the_cpu_affinity():
    pinned = ("import os\nos.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
              "import aicraft\nprint(aicraft.get_num_threads())")
    free = "import os, aicraft\nprint(aicraft.get_num_threads() - len(os.sched_getaffinity(0)))"
    assert threads_in_subprocess(pinned) == 1
    assert threads_in_subprocess(free) == 0
    assert threads_in_subprocess(pinned, AC_NUM_THREADS="3") == 3   # the variable still wins


def test_launcher_builds_the_mpiexec_command_and_refuses_bad_arguments(capsys):
    args = run.parse(["-n", "3", "--hostfile", "hosts", "train.py", "--epochs", "2"])
    assert run.command(args, "/x/mpiexec") == [
        "/x/mpiexec", "-n", "3", "--hostfile", "hosts", "--bind-to", "core", sys.executable, "-m", "mpi4py",
        "train.py", "--epochs", "2"]
    with pytest.raises(SystemExit):
        run.parse(["-n", "0", "train.py"])
    assert "-n must be at least 1" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
def test_launcher_removes_only_the_shared_memory_files_nobody_maps():
    import mmap
    paths = ["/dev/shm/mpich_shm_aicraft_test_%d_%s" % (os.getpid(), which) for which in ("mapped", "left")]
    for path in paths:
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
    with open(paths[0], "r+b") as f:
        mapping = mmap.mmap(f.fileno(), 4096)
    try:
        assert paths[1] in run.remove_leftover_segments()
        assert os.path.exists(paths[0]) and not os.path.exists(paths[1])
    finally:
        mapping.close()
    assert paths[0] in run.remove_leftover_segments()
    assert not os.path.exists(paths[0])


# ---- MPI jobs ---------------------------------------------------------------------

@needs_mpi
@pytest.mark.parametrize("ranks, bucket_mb, env", [(1, 25, None), (2, 25, None), (3, 1e-5, None),
                                                   (2, 25, TCP_ONLY)])
def test_n_ranks_of_batch_b_train_as_one_process_of_batch_n_times_b(tmp_path, ranks, bucket_mb, env):
    """100 steps of SGD (momentum) and of Adam, with the grads copied into the buckets
    and with the grads as views of them (gradient_as_bucket_view); each rank starts
    from its own random weights, which DDP replaces with rank 0's. 10-byte buckets:
    one per parameter. On one machine the buckets are parts of a shared window; over
    TCP, buffers of each rank's own."""
    proc, _, results = launch(tmp_path, ranks, "train", 100, 8, bucket_mb, env=env)
    ran(proc)
    assert sorted(results) == list(range(ranks))
    assert results[0]["buckets"] == (4 if bucket_mb < 1 else 1)
    for name in ("sgd", "adam", "sgd views", "adam views"):
        r = results[0][name]
        assert r["max_diff"] < 1e-5, (name, r)
        assert r["ranks_identical"], name
        assert r["heap_allocations_after_warmup"] == 0, name   # on every rank (MAX over ranks)
        assert r["grads_in_buckets"] is name.endswith("views"), name


@needs_mpi
@pytest.mark.parametrize("ranks, env", [(2, None), (3, None), (2, TCP_ONLY)])
def test_buckets_reduce_while_backward_runs_and_match_a_reduce_after_it(tmp_path, ranks, env):
    """On one machine the ranks average through a shared-memory window; over TCP (no
    shared memory) through Iallreduce."""
    proc, _, results = launch(tmp_path, ranks, "overlap", 8, env=env)
    ran(proc)
    r = results[0]
    assert r["shared_window"] is (env is None)
    assert r["buckets"] == 4
    assert r["started"][0] >= 2   # the last layer's weight and bias, before the first layer's weight
    assert r["max_diff"] <= 1e-6
    # PyTorch's layout: the first bucket closes at 1 MiB or more, the others at 25 MiB (or at
    # bucket_cap_mb, all of them, when it is given); the parameters last first.
    assert r["default_buckets"] == [["2.bias", "2.weight"], ["1.bias", "1.weight", "0.bias", "0.weight"]]
    assert r["explicit_buckets"] == [["2.bias", "2.weight"], ["1.bias", "1.weight"], ["0.bias", "0.weight"]]
    assert r["unused"] == ("DistributedDataParallel: parameter 'unused.bias' got no gradient in this "
                           "backward; every parameter that requires grad must take part in the loss on "
                           "every rank")
    assert r["old_group"] == ("DistributedDataParallel: the process group this model was wrapped in has "
                              "been destroyed; wrap the module again")
    assert all(results[k] == r for k in range(ranks))


@needs_mpi
@pytest.mark.parametrize("env", [None, TCP_ONLY])
def test_gradient_as_bucket_view_matches_pytorch(tmp_path, env):
    """aicraft's DDP and PyTorch's (gloo) in the same 2 ranks: the same grads after
    each backward, and zero_grad leaves None (set_to_none) or zeros as PyTorch's,
    with the grads in a shared window and in each rank's own buffers (TCP)."""
    pytest.importorskip("torch")
    proc, _, results = launch(tmp_path, 2, "bucket_view_parity", 8, env=env, limit=120)
    ran(proc)
    r = results[0]
    assert r["after_zero_grad"]["aicraft"] == r["after_zero_grad"]["torch"] == [
        ["none"] * 4, ["zeros"] * 4, ["none"] * 4]
    assert r["max_grad_diff"] <= 1e-6 * max(1.0, r["max_grad"])
    assert r["after_destroy"] == [True, True]


@needs_mpi
def test_ranks_bound_to_cores_run_one_thread_each(tmp_path):
    _, _, results = launch(tmp_path, 2, "threads")
    assert [results[r] for r in (0, 1)] == [{"threads": 1, "cores": 1}] * 2
    _, _, free = launch(tmp_path, 2, "threads", launcher=("--bind-to", "none"))
    assert free[0]["threads"] == free[0]["cores"] == len(os.sched_getaffinity(0))


@needs_mpi
def test_no_sync_accumulates_then_averages_once(tmp_path):
    proc, _, results = launch(tmp_path, 2, "accumulate", 20, 8)
    ran(proc)
    assert results[0]["max_diff"] < 1e-5


@needs_mpi
def test_sampler_in_a_job_from_a_host_file_covers_the_data_once_per_epoch(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:3\n")
    proc, _, results = launch(tmp_path, 3, "sampler", 10, 2, launcher=("--hostfile", str(hosts)))
    ran(proc)
    assert results[0] == results[1] == results[2]
    for ranks in results[0]["padded"]:
        indices = [i for r in ranks for i in r]
        assert len(indices) == 12 and set(indices) == set(range(10))
    for ranks in results[0]["drop_last"]:
        indices = [i for r in ranks for i in r]
        assert len(indices) == len(set(indices)) == 9
    assert results[0]["padded"][0] != results[0]["padded"][1]


@needs_mpi
def test_collectives_and_bad_calls(tmp_path):
    proc, _, results = launch(tmp_path, 3, "collectives")
    ran(proc)
    for rank in (0, 1, 2):
        assert ("MPI started this process as rank %d of 3" % rank) in results[rank].pop("wrong_world_size")
    r = results[0]
    assert results[1] == results[2] == r
    assert r["SUM"] == [6.0, -6.0, 1.5]
    assert r["AVG"] == [2.0, -2.0, 0.5]
    assert r["MAX"] == [3.0, 0.0, 0.5]
    assert r["MIN"] == [1.0, -4.0, 0.5]
    assert r["int64_sum"] == [3, 3]
    assert r["broadcast"] == [[2.0] * 3] * 2
    assert r["all_gather"] == [[0.0, 0.0], [1.0, 10.0], [2.0, 20.0]]
    assert "ac.checkpoint() scope ended" in r["ended_scope"]
    assert r["buffers_at_start"] == [0.0, 0.0] and r["buffers_after_forward"] == [5.0, 5.0]
    bad = r["bad_calls"]
    assert bad["non_tensor"] == ["TypeError", "all_reduce: tensor must be an aicraft Tensor, not list"]
    assert bad["numpy_array"] == ["TypeError", "broadcast: tensor must be an aicraft Tensor, not ndarray"]
    assert bad["op"] == ["TypeError", "all_reduce: op must be a ReduceOp, not str"]
    assert bad["avg_int64"] == ["TypeError", "all_reduce: ReduceOp.AVG needs a float32 tensor, not aicraft.int64"]
    assert bad["sum_bool"] == ["TypeError", "all_reduce: reduces float32 and int64 tensors, not aicraft.bool"]
    assert bad["src"] == ["ValueError", "broadcast: src 3 is not a rank of this job (0..2)"]
    assert bad["gather_list"] == ["ValueError", "all_gather: tensor_list has 4 tensors; it needs one per rank (3)"]
    assert bad["gather_sizes"][0] == "ValueError" and "tensor_list[0] has 3 elements" in bad["gather_sizes"][1]
    assert bad["init_twice"] == ["ValueError", "trying to initialize the default process group twice!"]
    assert bad["ddp_module"][0] == "TypeError" and "must be an aicraft.nn.Module" in bad["ddp_module"][1]
    assert bad["ddp_bucket"][0] == "ValueError" and "bucket_cap_mb" in bad["ddp_bucket"][1]
    assert bad["ddp_view"] == ["TypeError", "DistributedDataParallel: gradient_as_bucket_view must be a "
                                            "bool, not int"]


@needs_mpi
def test_forced_tcp_transport_shares_no_memory(tmp_path):
    _, _, default = launch(tmp_path, 2, "transport")
    proc, _, tcp = launch(tmp_path, 2, "transport", env=TCP_ONLY)
    ran(proc)
    # By default the ranks on one machine share a segment and hold no TCP connection
    # to each other; forced, they share none and every rank holds one.
    assert default[0]["shared_segment"] and default[0]["min_tcp_connections"] == 0
    assert not tcp[0]["shared_segment"] and tcp[0]["min_tcp_connections"] >= 1
    assert tcp[0]["sum"] == default[0]["sum"] == 2.0


def shm_files():
    return {name for name in os.listdir("/dev/shm") if name.startswith("mpich_shm_")} \
        if os.path.isdir("/dev/shm") else set()


@needs_mpi
@pytest.mark.parametrize("how, launcher", [("raise", "run"), ("raise", "mpiexec"), ("kill", "run")])
def test_a_failing_rank_ends_the_job(tmp_path, how, launcher):
    """Rank 1 raises or is SIGKILLed while rank 0 waits in a barrier: the job ends
    non-zero within seconds, a raise with its traceback; the launcher then removes
    the shared-memory file MPICH leaves behind."""
    before = shm_files()
    proc, seconds, results = launch(tmp_path, 2, "fail", how,
                                    launcher=() if launcher == "run" else "mpiexec", limit=40)
    assert proc.returncode not in (0, 124), proc.stdout + proc.stderr   # 124: timeout's
    assert seconds < 30
    if how == "raise":
        assert "RuntimeError: rank 1 fails on purpose" in proc.stdout + proc.stderr
    assert not results                                  # rank 0 never passed the barrier
    if launcher == "run":
        assert shm_files() <= before
    else:
        run.remove_leftover_segments()


MPI_DEMO = os.path.join(ROOT, "build", "demos", "mnist_mlp_mpi")


@needs_mpi
@pytest.mark.skipif(not os.path.exists(MPI_DEMO), reason="build/demos/mnist_mlp_mpi not built (make mpi-demo)")
def test_c_demo_on_two_ranks_trains_as_one_rank_of_the_double_batch(tmp_path):
    """demos/c/mnist_mlp_mpi.c on MNIST-shaped synthetic IDX files: 2 ranks of batch 16
    end with the weights of 1 rank of batch 32, the same on both ranks."""
    np = pytest.importorskip("numpy")
    from aicraft.data.datasets import write_idx
    rng = np.random.default_rng(0)
    teacher = rng.standard_normal((784, 10))
    for prefix, count in (("train", 512), ("t10k", 200)):
        images = rng.integers(0, 256, (count, 28, 28), dtype=np.uint8)
        write_idx(tmp_path / ("%s-images-idx3-ubyte" % prefix), images)
        write_idx(tmp_path / ("%s-labels-idx1-ubyte" % prefix),
                  (images.reshape(count, 784) @ teacher).argmax(1).astype(np.uint8))
    outputs = {}
    for ranks, batch in ((1, 32), (2, 16)):
        proc = subprocess.run(["timeout", "60", run.find_mpiexec(), "-n", str(ranks), MPI_DEMO, str(tmp_path),
                               "2", str(batch)], capture_output=True, text=True)
        ran(proc)
        outputs[ranks] = proc.stdout.splitlines()
    assert "epoch 2: loss" in outputs[2][1] and "(2 ranks," in outputs[2][1]
    sums = {}
    for ranks, lines in outputs.items():
        words = lines[-1].split()
        assert words[:4] == ["weights:", "sum", "of", "squares"] and words[-1] == "yes", lines
        sums[ranks] = float(words[4])
    assert sums[2] == pytest.approx(sums[1], rel=1e-5)
