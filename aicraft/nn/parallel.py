"""parallel.py - DistributedDataParallel, as torch.nn.parallel's: one replica of the
model per rank, its gradients averaged over the ranks after every backward.

    dist.init_process_group("mpi")
    model = DistributedDataParallel(nn.Sequential(...))   # rank 0's weights everywhere
    loss_fn(model(x), y).backward()                      # each .grad: the mean over ranks
    optimizer.step()                                     # so every rank stays the same

The gradients travel in buckets (as PyTorch's and Horovod's do): the parameters,
last first, grouped into flat float32 fusion buffers of about bucket_cap_mb,
made once here. After backward each bucket is filled by one C call
(ac_grads_to_flat), summed over ranks by one MPI Allreduce in place, and copied
back divided by the world size by one C call (ac_grads_from_flat): a step
allocates nothing. The reduction runs when backward returns rather than
overlapping it, because libac's backward is one C call with no per-parameter
hook; for the small models aicraft trains it is a small part of the step.
"""
import contextlib
from typing import Any, Iterator, List

from aicraft import distributed
from aicraft._ffi import ffi, lib
from aicraft.autograd import after_backward, is_grad_enabled
from aicraft.creation import zeros
from aicraft.errors import raise_error
from aicraft.nn.module import Module
from aicraft.tensor import _live

__all__ = ["DistributedDataParallel"]


class _Bucket:
    """Parameters whose gradients travel together, and their fusion buffer."""

    def __init__(self, group: Any, named: List[Any]) -> None:
        self.names = [name for name, _ in named]
        self.params = [param for _, param in named]   # keeps the pointers below alive
        self.pointers = ffi.new("AcTensor *[]", [_live(p) for p in self.params])
        self.flat = zeros(sum(p.numel() for p in self.params)).keep()   # at root
        self.buffer = distributed.typed_buffer(group, "DistributedDataParallel", self.flat)

    def reduce(self, group: Any) -> None:
        """Every gradient of the bucket := its mean over the ranks."""
        pointers, flat, n = self.pointers, _live(self.flat), len(self.params)
        for i in range(n):
            if pointers[i].grad == ffi.NULL:
                raise RuntimeError("DistributedDataParallel: parameter %r got no gradient in this "
                                   "backward; every parameter that requires grad must take part in "
                                   "the loss on every rank" % self.names[i])
        if lib.ac_grads_to_flat(pointers, n, flat) < 0:
            raise_error(self.flat)
        group.comm.Allreduce(group.MPI.IN_PLACE, self.buffer, op=group.MPI.SUM)
        if lib.ac_grads_from_flat(pointers, n, 1.0 / group.size, flat) < 0:
            raise_error(self.flat)


class DistributedDataParallel(Module):
    """Wraps module for data-parallel training over the ranks of
    aicraft.distributed's default group (init_process_group first).

    broadcast_buffers: also copy rank 0's buffers (BatchNorm's running
    statistics) to every rank at each forward. bucket_cap_mb: the size of a
    gradient bucket. no_sync(): skip the averaging for gradient accumulation.
    """

    def __init__(self, module: Module, broadcast_buffers: bool = True, bucket_cap_mb: float = 25.0) -> None:
        super().__init__()
        group = distributed.default_group("DistributedDataParallel")
        if not isinstance(module, Module):
            raise TypeError("DistributedDataParallel: module must be an aicraft.nn.Module, not %s"
                            % type(module).__name__)
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) \
                or not bucket_cap_mb > 0:
            raise ValueError("DistributedDataParallel: bucket_cap_mb must be a number > 0, got %r"
                             % (bucket_cap_mb,))
        self.module = module
        self.broadcast_buffers = bool(broadcast_buffers)
        self.require_backward_grad_sync = True
        for tensor in list(module.parameters()) + list(module.buffers()):
            distributed.broadcast(tensor, 0)
        self._buckets = self._make_buckets(group, bucket_cap_mb * 2 ** 20)
        self._sync = self._average_gradients   # the after_backward callback, while armed

    def _make_buckets(self, group: Any, cap_bytes: float) -> List[_Bucket]:
        """The parameters that require grad, last first (backward's order), in buckets of
        about cap_bytes (a parameter larger than that gets a bucket of its own)."""
        named = [(n, p) for n, p in self.module.named_parameters() if p.requires_grad]
        buckets, current, size = [], [], 0
        for name, param in reversed(named):
            nbytes = 4 * param.numel()
            if current and size + nbytes > cap_bytes:
                buckets.append(_Bucket(group, current))
                current, size = [], 0
            current.append((name, param))
            size += nbytes
        if current:
            buckets.append(_Bucket(group, current))
        return buckets

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        group = distributed.default_group("DistributedDataParallel")
        if group.size > 1:
            if self.broadcast_buffers:
                for buffer in self.module.buffers():
                    distributed.broadcast(buffer, 0)
            if self.require_backward_grad_sync and is_grad_enabled() and self._sync not in after_backward:
                after_backward.append(self._sync)
        return self.module(*inputs, **kwargs)

    def _average_gradients(self) -> None:
        after_backward.remove(self._sync)
        group = distributed.default_group("DistributedDataParallel")
        for bucket in self._buckets:
            bucket.reduce(group)

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
