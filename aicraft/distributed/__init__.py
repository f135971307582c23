"""aicraft.distributed - data-parallel training over MPI, with torch.distributed's names.

    import aicraft.distributed as dist
    dist.init_process_group("mpi")      # in each rank of `python -m aicraft.distributed.run -n 2 ...`
    t = ac.ones(3)
    dist.all_reduce(t)                  # in place: every rank now holds the sum over ranks
    dist.destroy_process_group()

MPI comes from mpi4py, imported by init_process_group: `import aicraft` (and
this module) never loads it. On one machine the ranks talk over shared memory;
on several, over whatever the MPI runtime finds (TCP, InfiniBand).

A tensor goes to MPI as its own memory with its element type stated (MPI.FLOAT
for float32, MPI.INT64_T for int64): collectives work in place and copy
nothing. A rank that raises ends the whole job: init_process_group installs a
sys.excepthook that prints the traceback and calls MPI_Abort, so the other
ranks do not wait forever in a collective.
"""
import enum
import importlib.util
import sys
import time
from typing import Any, List, Optional

from aicraft._ffi import ffi
from aicraft._wrapping import _live
from aicraft.tensor import Tensor

__all__ = ["ReduceOp", "is_available", "init_process_group", "is_initialized", "get_rank",
           "get_world_size", "all_reduce", "broadcast", "all_gather", "barrier",
           "destroy_process_group"]


class ReduceOp(enum.Enum):
    """How all_reduce combines the ranks' tensors."""
    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


class _Group:
    """The default process group: a duplicate of MPI's COMM_WORLD (so the user's own
    MPI calls never mix with ours), its rank and size."""

    def __init__(self, mpi: Any) -> None:
        self.MPI = mpi
        self.comm = mpi.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.excepthook = None   # the hook ours replaced, while ours is installed
        self.on_destroy: List[Any] = []   # called by destroy_process_group (DDP's shared windows)


_group: Optional[_Group] = None

# MPI's element type for each aicraft dtype code (see dtypes.py), by name in mpi4py.MPI.
_MPI_TYPES = {0: ("FLOAT", 4), 1: ("INT64_T", 8), 2: ("C_BOOL", 1), 3: ("UINT8_T", 1)}
_REDUCIBLE = (0, 1)   # float32 and int64: bool and uint8 have no sum in MPI


def is_available() -> bool:
    """True when mpi4py is installed (without importing it)."""
    return importlib.util.find_spec("mpi4py") is not None


def _load_mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise RuntimeError("init_process_group: the mpi backend needs mpi4py and an MPI runtime: "
                           "pip install 'aicraft[mpi]' (mpi4py, mpich) (%s)" % exc) from None
    return MPI


def init_process_group(backend: Optional[str] = "mpi", world_size: int = -1, rank: int = -1) -> None:
    """Join the job this process was started in (by mpiexec or aicraft.distributed.run;
    alone, it is a job of one). world_size and rank, when given, must be MPI's."""
    global _group
    if backend is not None and backend != "mpi":
        raise ValueError("init_process_group: backend %r is not available; aicraft runs on MPI "
                         "(backend='mpi')" % (backend,))
    for name, value in (("world_size", world_size), ("rank", rank)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("init_process_group: %s must be an int, not %s" % (name, type(value).__name__))
    if _group is not None:
        raise ValueError("trying to initialize the default process group twice!")
    group = _Group(_load_mpi())
    if world_size not in (-1, group.size) or rank not in (-1, group.rank):
        group.comm.Free()
        raise ValueError("init_process_group: world_size=%d, rank=%d were given but MPI started this "
                         "process as rank %d of %d" % (world_size, rank, group.rank, group.size))
    if group.size > 1:
        group.excepthook = sys.excepthook
        sys.excepthook = _abort_job
    _group = group


def _abort_job(exc_type: Any, exc: Any, traceback: Any) -> None:
    """sys.excepthook while a group of several ranks is up: the traceback, then MPI_Abort."""
    group = _group
    (group.excepthook if group is not None else sys.__excepthook__)(exc_type, exc, traceback)
    sys.stdout.flush()
    sys.stderr.flush()
    if group is not None:
        # The launcher forwards a rank's output through a pipe and stops reading it
        # once the abort tears the job down: give it a moment to pass the traceback on.
        time.sleep(0.25)
        group.MPI.COMM_WORLD.Abort(1)


def is_initialized() -> bool:
    return _group is not None


def default_group(what: str) -> _Group:
    """The default group, or the error torch.distributed gives before init."""
    if _group is None:
        raise ValueError("%s: the default process group has not been initialized; call "
                         "aicraft.distributed.init_process_group() first" % what)
    return _group


def get_rank() -> int:
    """This process's rank, 0 .. world_size - 1."""
    return default_group("get_rank").rank


def get_world_size() -> int:
    return default_group("get_world_size").size


def typed_buffer(g: _Group, what: str, tensor: Any, reduce: bool = False) -> List[Any]:
    """[buffer over tensor's memory, its MPI type]: MPI reads and writes the tensor in
    place, knowing its element type (a plain byte buffer would be summed as bytes)."""
    if not isinstance(tensor, Tensor):
        raise TypeError("%s: tensor must be an aicraft Tensor, not %s" % (what, type(tensor).__name__))
    p = _live(tensor)
    if reduce and p.dtype not in _REDUCIBLE:
        raise TypeError("%s: reduces float32 and int64 tensors, not %s" % (what, tensor.dtype))
    name, itemsize = _MPI_TYPES[p.dtype]
    return [ffi.buffer(p.data, p.size * itemsize), getattr(g.MPI, name)]


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM) -> None:
    """Combine tensor over the ranks, in place: afterwards every rank holds the same
    values (the sum, mean, max or min)."""
    g = default_group("all_reduce")
    if not isinstance(op, ReduceOp):
        raise TypeError("all_reduce: op must be a ReduceOp, not %s" % type(op).__name__)
    buf = typed_buffer(g, "all_reduce", tensor, reduce=True)
    if op is ReduceOp.AVG and _live(tensor).dtype != 0:
        raise TypeError("all_reduce: ReduceOp.AVG needs a float32 tensor, not %s" % tensor.dtype)
    mpi_op = g.MPI.MAX if op is ReduceOp.MAX else g.MPI.MIN if op is ReduceOp.MIN else g.MPI.SUM
    g.comm.Allreduce(g.MPI.IN_PLACE, buf, op=mpi_op)
    if op is ReduceOp.AVG and g.size > 1:
        import numpy as np
        values = np.frombuffer(buf[0], np.float32)
        values /= g.size


def _check_src(what: str, src: Any, size: int) -> int:
    if isinstance(src, bool) or not isinstance(src, int):
        raise TypeError("%s: src must be an int, not %s" % (what, type(src).__name__))
    if not 0 <= src < size:
        raise ValueError("%s: src %d is not a rank of this job (0..%d)" % (what, src, size - 1))
    return src


def broadcast(tensor: Tensor, src: int = 0) -> None:
    """Copy rank src's tensor into every rank's, in place (same shape everywhere)."""
    g = default_group("broadcast")
    buf = typed_buffer(g, "broadcast", tensor)
    g.comm.Bcast(buf, root=_check_src("broadcast", src, g.size))


def all_gather(tensor_list: List[Tensor], tensor: Tensor) -> None:
    """tensor_list[r] = rank r's tensor, on every rank; tensor_list holds world_size
    tensors of tensor's size and dtype."""
    g = default_group("all_gather")
    send = typed_buffer(g, "all_gather", tensor)
    if not isinstance(tensor_list, list):
        raise TypeError("all_gather: tensor_list must be a list of tensors, not %s"
                        % type(tensor_list).__name__)
    if len(tensor_list) != g.size:
        raise ValueError("all_gather: tensor_list has %d tensors; it needs one per rank (%d)"
                         % (len(tensor_list), g.size))
    p = _live(tensor)
    outs = []
    for i, out in enumerate(tensor_list):
        typed_buffer(g, "all_gather", out)
        q = _live(out)
        if q.size != p.size or q.dtype != p.dtype:
            raise ValueError("all_gather: tensor_list[%d] has %d elements of %s; tensor has %d of %s"
                             % (i, q.size, out.dtype, p.size, tensor.dtype))
        outs.append(q)
    nbytes = len(send[0])
    gathered = ffi.new("char[]", max(1, nbytes * g.size))
    g.comm.Allgather(send, [ffi.buffer(gathered, nbytes * g.size), send[1]])
    for i, q in enumerate(outs):
        ffi.memmove(q.data, gathered + i * nbytes, nbytes)


def barrier() -> None:
    """Wait until every rank has called barrier()."""
    default_group("barrier").comm.Barrier()


def destroy_process_group() -> None:
    """Leave the group (MPI itself stays up until the process exits, so
    init_process_group may be called again)."""
    global _group
    g = default_group("destroy_process_group")
    if g.excepthook is not None and sys.excepthook is _abort_job:
        sys.excepthook = g.excepthook
    _group = None
    for free in g.on_destroy:
        free()
    g.comm.Free()
