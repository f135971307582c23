"""parallel.py - DistributedDataParallel, as torch.nn.parallel's: one replica of the
model per rank, its gradients averaged over the ranks in every backward.

    dist.init_process_group("mpi")
    model = DistributedDataParallel(nn.Sequential(...))   # rank 0's weights everywhere
    loss_fn(model(x), y).backward()                      # each .grad: the mean over ranks
    optimizer.step()                                     # so every rank stays the same

The gradients travel in buckets (as PyTorch's and Horovod's do): the parameters,
last first, grouped into flat float32 fusion buffers made once here, the first
bucket small (1 MiB) so that its reduction starts early. Every parameter has a
post-accumulate-grad hook, which libac's backward walk calls once that
parameter's gradient is final; when a bucket's gradients are all final, one C
call copies them into its buffer (ac_grads_to_flat) and a non-blocking MPI
Iallreduce starts summing it over the ranks while backward computes the layers
below. When backward returns, DDP waits for the buckets and copies each back
divided by the world size (ac_grads_from_flat). Buckets start in the same order
on every rank (an earlier bucket first), as MPI's collectives need; a step
allocates nothing.

When every rank runs on one machine, the buffers are the ranks' parts of one MPI
shared-memory window instead, and the Iallreduce becomes an Ibarrier after which
each rank averages all the parts into its grads in one C call
(ac_grads_mean_of_flats): see _SharedWindow.

gradient_as_bucket_view=True (as PyTorch's) makes each parameter's .grad a
view into its bucket (ac_tensor_set_grad, ac_tensor_view_flat), so backward
writes the gradients straight into the buffer and the copy into it goes away.
As in PyTorch, zero_grad() still sets .grad to None, and the next backward
fills the same view again.
"""
import contextlib
import os
import weakref
from typing import Any, Iterator, List, Optional

from aicraft import distributed
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live
from aicraft._grad import after_backward, is_grad_enabled
from aicraft.creation import zeros
from aicraft.errors import raise_error
from aicraft.nn.module import Module

__all__ = ["DistributedDataParallel"]

_DEFAULT_BUCKET_CAP_MB = 25.0
_FIRST_BUCKET_BYTES = 2 ** 20   # PyTorch's first bucket, when bucket_cap_mb is left to its default


class _Bucket:
    """Parameters whose gradients travel together, and their fusion buffer: its own
    (Iallreduce), or every rank's in a shared window (see _SharedWindow)."""

    def __init__(self, named: List[Any]) -> None:
        self.names = [name for name, _ in named]
        self.params = [param for _, param in named]   # keeps the pointers below alive
        self.pointers = ffi.new("AcTensor *[]", [_live(p) for p in self.params])
        self.size = sum(p.numel() for p in self.params)
        self.flat = self.buffer = None
        self.window = self.slots = None   # slots[step % 2][rank]: the ranks' buffers, when shared
        self.parity = 0
        self.views = None       # views[parity][i]: params[i]'s grad in this rank's buffer, as bucket views
        self.ready = 0          # parameters whose gradient is final, in this backward
        self.request = None     # the Iallreduce or Ibarrier under way

    def own_buffer(self, group: Any) -> None:
        self.flat = zeros(self.size).keep()   # at root
        self.buffer = distributed.typed_buffer(group, "DistributedDataParallel", self.flat)

    def make_views(self, parts: List[Any]) -> None:
        """Each parameter's grad := its slice of parts[0] (this rank's buffer, or its
        part of the window for even steps; parts[1] for odd ones), holding the
        gradient it had. Views keep their buffer alive (a window's memory: see
        _SharedWindow.free)."""
        self.views = []
        for part in parts:
            views, offset = [], 0
            for p in self.pointers:
                view = lib.ac_tensor_view_flat(part, offset, p.shape, p.ndim)
                if view == ffi.NULL:
                    raise_error()
                views.append(ffi.gc(view, lib.ac_tensor_free))
                offset += p.size
            self.views.append(views)
        for p, view in zip(self.pointers, self.views[0]):
            if (p.grad and lib.ac_tensor_copy_(view, p.grad) < 0) or lib.ac_tensor_set_grad(p, view) < 0:
                raise_error()

    def drop_views(self) -> None:
        """A grad that is one of the views gets a copy of its own; the views go."""
        for i, p in enumerate(self.pointers):
            grad = p.grad
            if not grad:
                rc = lib.ac_tensor_set_grad(p, ffi.NULL)   # forgets the view backward would fill
            elif grad in (self.views[0][i], self.views[-1][i]):
                copy = lib.ac_tensor_keep(grad)
                rc = lib.ac_tensor_set_grad(p, copy) if copy != ffi.NULL else -1
                lib.ac_tensor_free(copy)
            else:
                continue
            if rc < 0:
                raise_error()
        for views in self.views:
            for view in views:
                ffi.release(view)
        self.views = None

    def start(self, group: Any) -> None:
        """Copy the gradients into the buffer (bucket views are there already) and start
        summing it over the ranks (or, in a shared window, start the barrier after
        which every rank can read it)."""
        flat = _live(self.flat) if self.slots is None else self.slots[self.parity][group.rank]
        if lib.ac_grads_to_flat(self.pointers, len(self.params), flat) < 0:
            raise_error()
        if self.slots is None:
            self.request = group.comm.Iallreduce(group.MPI.IN_PLACE, self.buffer, op=group.MPI.SUM)
        else:
            self.window.win.Sync()   # our writes, visible before the barrier
            self.request = self.window.node.Ibarrier()

    def finish(self, group: Any) -> None:
        """Every gradient of the bucket := its mean over the ranks."""
        self.request.Wait()
        self.request = None
        pointers, n, parity = self.pointers, len(self.params), self.parity
        self.parity ^= 1
        for i in range(n):
            if pointers[i].grad == ffi.NULL:
                raise RuntimeError("DistributedDataParallel: parameter %r got no gradient in this "
                                   "backward; every parameter that requires grad must take part in "
                                   "the loss on every rank" % self.names[i])
        if self.slots is None:   # in place when the grads are views of flat
            rc = lib.ac_grads_from_flat(pointers, n, 1.0 / group.size, _live(self.flat))
        else:
            if self.views is not None:
                # The other ranks still read this step's part of ours: the mean goes into
                # our other part, which they read last step, before this step's barrier,
                # and the grads move there (see _SharedWindow).
                for p, view in zip(pointers, self.views[parity ^ 1]):
                    if lib.ac_tensor_set_grad(p, view) < 0:
                        raise_error()
            self.window.win.Sync()   # the other ranks' writes, visible to our reads
            rc = lib.ac_grads_mean_of_flats(pointers, n, 1.0 / group.size, self.slots[parity], group.size)
        if rc < 0:
            raise_error()


class _SharedWindow:
    """When every rank runs on this machine: the buckets of every rank, twice, in one
    MPI shared-memory window (MPI_Win_allocate_shared). A rank copies its gradients
    into its part, and after a barrier each rank averages all the parts straight into
    its own grads (ac_grads_mean_of_flats, in rank order: the same bits on every
    rank). That replaces the all-reduce: MPICH's Allreduce of a 400 KB bucket copies
    it through shared memory several times over, where this reads each other
    rank's part once. Steps alternate between the two copies, so a rank can write
    the next step's gradients while another still reads this step's: the barrier
    of a step also tells that the step before it has been read everywhere.

    As bucket views, a rank's grads are its part of step k's copy: backward writes
    them there, and after step k's barrier the mean goes into the rank's part of
    the other copy (read by the others in step k - 1, which they finished before
    that barrier), where the grads then move for step k + 1.

    The window and the tensors over it live until destroy_process_group, which
    frees them (freeing a window is collective: never at garbage collection)."""

    def __init__(self, group: Any, node: Any, buckets: List[_Bucket], as_views: bool) -> None:
        MPI = group.MPI
        total = sum(b.size for b in buckets)
        self.MPI = MPI
        self.node = node
        self.buckets = buckets
        self.win = MPI.Win.Allocate_shared(2 * total * 4, 4, comm=node)
        self.win.Lock_all(MPI.MODE_NOCHECK)   # the passive epoch Win.Sync needs
        bases = [ffi.from_buffer("float[]", self.win.Shared_query(r)[0]) for r in range(node.size)]
        self.tensors = []
        offset = 0
        for bucket in buckets:
            bucket.window = self
            bucket.slots = []
            for parity in (0, 1):
                views = [self._view(base + parity * total + offset, bucket.size) for base in bases]
                bucket.slots.append(ffi.new("AcTensor *[]", views))
            offset += bucket.size
            if as_views:
                bucket.make_views([slots[group.rank] for slots in bucket.slots])
        group.on_destroy.append(self.free)

    def _view(self, data: Any, size: int) -> Any:
        t = lib.ac_tensor_from_external(data, ffi.new("int64_t[1]", [size]), 1, lib.AC_FLOAT32, ffi.NULL, ffi.NULL)
        if t == ffi.NULL:
            raise_error()
        self.tensors.append(t)
        return t

    def free(self) -> None:
        """The parameters get their grads back in memory of their own; then the
        window goes, unless a tensor over it is still held somewhere (a .grad taken
        while it was a bucket view): then every rank keeps it, to the process's end."""
        for bucket in self.buckets:
            if bucket.views is not None:
                bucket.drop_views()
        held = any(t.refcount > 1 for t in self.tensors)
        for t in self.tensors:
            lib.ac_tensor_free(t)
        self.tensors = []
        if self.node.allreduce(held, op=self.MPI.LOR):
            return   # the window stays mapped, locked and unfreed
        self.win.Unlock_all()
        self.win.Free()
        self.node.Free()


def _shared_memory_fits(group: Any, buckets: List[_Bucket]) -> bool:
    """Whether /dev/shm, where MPICH maps a shared window, has room for every rank's
    buckets twice with room to spare (a container's may hold only 64 MB); the ranks
    agree, so that all of them take the same path."""
    try:
        fs = os.statvfs("/dev/shm")
        free = fs.f_bavail * fs.f_frsize
    except OSError:
        free = 0
    fits = 2 * (2 * 4 * sum(b.size for b in buckets)) * group.size <= free
    return bool(group.comm.allreduce(int(fits), op=group.MPI.MIN))


class DistributedDataParallel(Module):
    """Wraps module for data-parallel training over the ranks of
    aicraft.distributed's default group (init_process_group first).

    broadcast_buffers: also copy rank 0's buffers (BatchNorm's running
    statistics) to every rank at each forward. bucket_cap_mb: the size of a
    gradient bucket (default 25, the first bucket 1 MiB, as PyTorch's).
    gradient_as_bucket_view: each parameter's .grad is a view into its bucket,
    which saves copying the gradients into it (zero_grad sets .grad to None,
    and the next backward fills the same view; on ranks sharing memory the
    grads alternate between two views, one per step's parity).
    no_sync(): skip the averaging for gradient accumulation.
    """

    def __init__(self, module: Module, broadcast_buffers: bool = True,
                 bucket_cap_mb: Optional[float] = None, gradient_as_bucket_view: bool = False) -> None:
        super().__init__()
        group = distributed.default_group("DistributedDataParallel")
        if not isinstance(module, Module):
            raise TypeError("DistributedDataParallel: module must be an aicraft.nn.Module, not %s"
                            % type(module).__name__)
        if not isinstance(gradient_as_bucket_view, bool):
            raise TypeError("DistributedDataParallel: gradient_as_bucket_view must be a bool, not %s"
                            % type(gradient_as_bucket_view).__name__)
        if bucket_cap_mb is not None and (isinstance(bucket_cap_mb, bool) or not isinstance(
                bucket_cap_mb, (int, float)) or not bucket_cap_mb > 0):
            raise ValueError("DistributedDataParallel: bucket_cap_mb must be a number > 0, got %r"
                             % (bucket_cap_mb,))
        self.module = module
        self.broadcast_buffers = bool(broadcast_buffers)
        self.require_backward_grad_sync = True
        self.gradient_as_bucket_view = gradient_as_bucket_view
        for tensor in list(module.parameters()) + list(module.buffers()):
            distributed.broadcast(tensor, 0)
        cap = (bucket_cap_mb or _DEFAULT_BUCKET_CAP_MB) * 2 ** 20
        self._group = group
        self._buckets = self._make_buckets(_FIRST_BUCKET_BYTES if bucket_cap_mb is None else cap, cap)
        node = group.comm.Split_type(group.MPI.COMM_TYPE_SHARED) if group.size > 1 else None
        if node is not None and node.size == group.size and _shared_memory_fits(group, self._buckets):
            _SharedWindow(group, node, self._buckets, gradient_as_bucket_view)
        else:
            if node is not None:
                node.Free()
            for bucket in self._buckets:
                bucket.own_buffer(group)
                if gradient_as_bucket_view:
                    bucket.make_views([_live(bucket.flat)])
        self._armed = False     # this backward averages the gradients
        self._next = 0          # the next bucket to start
        self._sync = self._finish_buckets   # the after_backward callback, while armed
        self._hooks = self._add_hooks() if group.size > 1 else []   # one rank: nothing to reduce

    def _make_buckets(self, first_cap: float, cap: float) -> List[_Bucket]:
        """The parameters that require grad, last first (backward's order), in buckets
        filled as PyTorch fills them: a bucket closes once it holds first_cap bytes
        (the first) or cap bytes (the others) or more."""
        named = [(n, p) for n, p in self.module.named_parameters() if p.requires_grad]
        buckets, current, size = [], [], 0
        for name, param in reversed(named):
            current.append((name, param))
            size += 4 * param.numel()
            if size >= (cap if buckets else first_cap):
                buckets.append(_Bucket(current))
                current, size = [], 0
        if current:
            buckets.append(_Bucket(current))
        return buckets

    def _add_hooks(self) -> List[Any]:
        """A post-accumulate-grad hook on each parameter. The hooks hold this object
        weakly, so that the parameters' hooks do not keep it alive."""
        me = weakref.ref(self)
        handles = []
        for bucket in self._buckets:
            for param in bucket.params:
                def ready(param: Any, bucket: _Bucket = bucket) -> None:
                    ddp = me()
                    if ddp is not None and ddp._armed:
                        ddp._grad_ready(bucket)
                handles.append(param.register_post_accumulate_grad_hook(ready))
        return handles

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        group = distributed.default_group("DistributedDataParallel")
        if group is not self._group:
            raise RuntimeError("DistributedDataParallel: the process group this model was wrapped in "
                               "has been destroyed; wrap the module again")
        if group.size > 1:
            if self.broadcast_buffers:
                for buffer in self.module.buffers():
                    distributed.broadcast(buffer, 0)
            if self.require_backward_grad_sync and is_grad_enabled():
                self._arm()
        return self.module(*inputs, **kwargs)

    def _arm(self) -> None:
        """The next backward averages the gradients: start counting afresh (a backward
        that failed may have left buckets counted or started)."""
        for bucket in self._buckets:
            if bucket.request is not None:
                bucket.request.Wait()
                bucket.request = None
            bucket.ready = 0
        self._next = 0
        self._armed = True
        if self._sync not in after_backward:
            after_backward.append(self._sync)

    def _grad_ready(self, bucket: _Bucket) -> None:
        """A parameter's gradient is final: start the buckets that are complete, in order.
        MPI moves a non-blocking collective on only inside MPI calls (there is no
        progress thread: it would take the rank's one core), so each call also tests
        the started ones, which lets them progress between backward's nodes."""
        bucket.ready += 1
        buckets = self._buckets
        if self._next:   # one test moves every started one on
            buckets[self._next - 1].request.Test()
        while self._next < len(buckets) and buckets[self._next].ready == len(buckets[self._next].params):
            buckets[self._next].start(distributed.default_group("DistributedDataParallel"))
            self._next += 1

    def _finish_buckets(self) -> None:
        after_backward.remove(self._sync)
        self._armed = False
        group = distributed.default_group("DistributedDataParallel")
        started = self._buckets[:self._next]
        try:
            for bucket in started:
                bucket.finish(group)
        finally:
            for bucket in started:   # after an error: the other requests, so none is left
                if bucket.request is not None:
                    bucket.request.Wait()
                    bucket.request = None
        if self._next < len(self._buckets):
            bucket = self._buckets[self._next]
            missing = [name for name, p in zip(bucket.names, bucket.params) if _live(p).grad == ffi.NULL]
            raise RuntimeError("DistributedDataParallel: parameter %r got no gradient in this "
                               "backward; every parameter that requires grad must take part in "
                               "the loss on every rank" % (missing or bucket.names)[0])

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Forwards inside leave their gradients on this rank, to accumulate; the first
        backward after a forward outside averages all that accumulated."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous
