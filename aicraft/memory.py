"""memory.py - scopes (ac.checkpoint), memory counters and limits, thread count.

`with ac.checkpoint():` opens a C scope: every tensor made inside lives in its
arena and is freed in one move when the block ends, even on an exception.
Tensor wrappers made inside are marked dead then, so later use raises
ScopeError instead of touching freed memory. Keep what must outlive the step
with Tensor.keep(), or make it at root.
"""
from typing import Any, Dict, Optional

from aicraft._ffi import ffi, lib
from aicraft.errors import ScopeError, raise_error
from aicraft._scope import Scope, orphans as _orphans, stack as _stack, tls as _tls

_mem_checkpoint, _mem_restore = lib.ac_mem_checkpoint, lib.ac_mem_restore


class checkpoint(Scope):
    """A memory scope: `with ac.checkpoint(): ...` frees the step's tensors at the end."""

    __slots__ = ("_cp",)

    def __init__(self) -> None:
        self._cp = None
        self.alive = False

    def __enter__(self) -> "checkpoint":
        if self._cp is not None:
            raise ScopeError("checkpoint: this scope is already open; make a new ac.checkpoint()")
        if _orphans:
            end_orphans(_stack())
        cp = _mem_checkpoint()
        if cp.depth < 0:
            raise_error()
        self._cp = cp
        self.open()
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> bool:
        if self.alive:        # else never opened, or already ended by an outer scope's restore
            try:
                foreign = self.stack is not _tls.stack
            except AttributeError:          # a thread that never opened a scope
                foreign = True
            if foreign:
                # Exited on another thread (a generator suspended inside the block and
                # collected there): a C scope ends on its own thread only, so its
                # thread ends it, at its next checkpoint's entry or exit.
                _orphans.append(self)
                return False
            stack = self.stack
            self.close()
            if _mem_restore(self._cp) < 0:
                raise_error()
            if _orphans:
                end_orphans(stack)
        return False

    @property
    def depth(self) -> Optional[int]:
        """The nesting depth this scope opened at (1 for the outermost); None before enter."""
        return None if self._cp is None else self._cp.depth


def end_orphans(stack):
    """End the scopes on top of this thread's stack that were exited on another
    thread, innermost first (an orphan under a scope still open waits for it)."""
    while stack and stack[-1] in _orphans:
        scope = stack[-1]
        scope.close()
        if _mem_restore(scope._cp) < 0:
            raise_error()


def memory_stats() -> Dict[str, int]:
    """Process-wide counters: bytes_in_use, peak_bytes, live_tensors, live_nodes,
    arena_reserved, memory_limit (0 when none), heap_allocations (mallocs libac
    has made so far: flat across warm training steps), spare_grad_bytes
    (dropped grads kept for their parameter's next backward, not in bytes_in_use)
    and root_cached_bytes (freed root tensors each thread keeps for the next of
    the same size, such as the next batch; not in bytes_in_use); for CUDA,
    cuda_mallocs (flat across warm training steps too), device_bytes_in_use and
    device_peak_bytes (CUDA tensors' data, all devices) and device_reserved
    (device memory held, in use or cached)."""
    if _orphans:
        end_orphans(_stack())
    stats = ffi.new("AcMemStats *")
    if lib.ac_memory_stats(stats) < 0:
        raise_error()
    return {name: getattr(stats, name) for name in
            ("bytes_in_use", "peak_bytes", "live_tensors", "live_nodes", "arena_reserved", "memory_limit",
             "heap_allocations", "spare_grad_bytes", "root_cached_bytes", "cuda_mallocs",
             "device_bytes_in_use", "device_peak_bytes", "device_reserved")}


def set_memory_limit(limit: int) -> None:
    """Make allocations past limit bytes fail with MemoryError; None (or 0) lifts it."""
    if limit is None:
        limit = 0
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError("set_memory_limit: limit must be an int number of bytes or None")
    if not 0 <= limit < 2 ** 63:
        raise ValueError("set_memory_limit: limit %d is out of range [0, 2**63)" % limit)
    if lib.ac_set_memory_limit(limit) < 0:
        raise_error()


def set_num_threads(n: int) -> None:
    """Threads used by large ops (1..256)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError("set_num_threads: n must be an int, not %s" % type(n).__name__)
    if not 1 <= n <= 256:
        raise ValueError("set_num_threads: n %d is out of range [1, 256]" % n)
    if lib.ac_set_num_threads(n) < 0:
        raise_error()


def get_num_threads() -> int:
    return lib.ac_get_num_threads()
