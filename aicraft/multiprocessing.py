"""aicraft.multiprocessing - torch.multiprocessing for aicraft: Python's multiprocessing
(Process, Pool, Queue, set_start_method, get_context, ...) with tensors that can live in
shared memory, so several processes train one model (Hogwild):

    model.share_memory()          # parameters and buffers move into shared memory
    mp.set_start_method("spawn")  # or fork
    procs = [mp.Process(target=train, args=(model,)) for _ in range(4)]

A tensor in shared memory (Tensor.share_memory_(), is_shared()) pickles as the name of
its shared object, so a spawned process (or one that receives it through a Queue) maps
the same memory, and a forked one inherits the mapping: every process reads and writes
one copy. The memory is libac's (POSIX shm, mmap MAP_SHARED), freed when the last
reference in a process goes; the creating process's release also removes the name, so
it must keep the tensor alive while others still have to open it (as the parent of a
Hogwild run does: it holds the model). Gradients are not shared (they are made per
process, lazily, as in torch). Tensors not in shared memory pickle as copies.
"""
import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403 - Process, Pool, Queue, Lock, ... as torch re-exports them

from aicraft._shared import is_shared, share_memory_, share_module_memory, shared_name  # noqa: F401

__all__ = list(getattr(_mp, "__all__", [])) + ["spawn", "start_processes", "get_sharing_strategy",
                                               "set_sharing_strategy", "get_all_sharing_strategies",
                                               "ProcessContext", "ProcessRaisedException"]

_STRATEGY = "file_system"


def get_all_sharing_strategies():
    """{"file_system"}: shared tensors are named POSIX shared-memory objects."""
    return {"file_system"}


def get_sharing_strategy():
    return _STRATEGY


def set_sharing_strategy(new_strategy):
    """Only "file_system" (named shared memory); "file_descriptor" raises NotImplementedError."""
    if new_strategy != "file_system":
        raise NotImplementedError("set_sharing_strategy: aicraft shares tensors through named shared memory "
                                  "(\"file_system\"), not %r" % (new_strategy,))


# ---- torch.multiprocessing.spawn ------------------------------------------------

class ProcessRaisedException(Exception):
    pass


class ProcessContext:
    def __init__(self, processes):
        self.processes = processes

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        """Wait for every process; True when all are done. Raises when one failed."""
        for p in self.processes:
            p.join(timeout)
        for i, p in enumerate(self.processes):
            if p.exitcode not in (0, None):
                for other in self.processes:
                    if other.is_alive():
                        other.terminate()
                raise ProcessRaisedException("process %d terminated with exit code %d" % (i, p.exitcode))
        return all(p.exitcode is not None for p in self.processes)


def _wrap_fn(fn, i, args):
    fn(i, *args)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """fn(i, *args) in nprocs processes of start_method, as torch.multiprocessing.start_processes."""
    ctx = _mp.get_context(start_method)
    processes = []
    for i in range(nprocs):
        p = ctx.Process(target=_wrap_fn, args=(fn, i, args), daemon=daemon)
        p.start()
        processes.append(p)
    context = ProcessContext(processes)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """start_processes with the spawn method, as torch.multiprocessing.spawn."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
