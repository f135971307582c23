"""cuda.py - ac.cuda as PyTorch's torch.cuda: whether a GPU can be used, waiting for
it, and its memory counters.

Importing aicraft runs none of this: the first call here that needs a device (or the
first tensor moved to one) initialises CUDA in libac, so a process may fork after
import (gunicorn --preload). Without a driver or device, is_available() is False and
device_count() 0; moving a tensor to "cuda" raises DeviceError with CUDA's reason.
ac.cuda.amp (torch.cuda.amp's autocast and GradScaler) is made by amp.py, above this.
"""
from typing import Any

from aicraft._ffi import lib
from aicraft.errors import raise_error


def is_available() -> bool:
    return bool(lib.ac_cuda_is_available())


def is_initialized() -> bool:
    """True once a call has initialised CUDA (whatever it found)."""
    return bool(lib.ac_cuda_is_initialized())


def device_count() -> int:
    """The number of usable GPUs; 0 when there is none (or no driver, or no CUDA build)."""
    return max(lib.ac_cuda_device_count(), 0)


def _index(device: Any) -> int:
    """The device index of device (None, an int, "cuda:1", a device) for these calls."""
    from aicraft import dtypes
    if device is None:
        return 0
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    d = dtypes.device(device)
    if d.type != "cuda":
        raise ValueError("cuda: expected a CUDA device, got %s" % d)
    return 0 if d.index is None else d.index


def current_device() -> int:
    """The device CUDA tensors go to by default: 0 (DeviceError when there is none)."""
    if lib.ac_cuda_device_count() < 0:
        raise_error()
    return 0


def synchronize(device: Any = None) -> None:
    """Wait until the work issued to device (default 0) has finished."""
    if lib.ac_cuda_synchronize(_index(device)) < 0:
        raise_error()


def manual_seed(seed: int) -> None:
    """Seeds nothing of its own: random tensors made with device="cuda" are drawn by the
    thread's generator, which ac.manual_seed seeds, and then copied to the device."""


manual_seed_all = manual_seed


def memory_allocated(device: Any = None) -> int:
    """Bytes of CUDA tensors' data in use now (all devices together)."""
    from aicraft.memory import memory_stats
    _index(device)
    return memory_stats()["device_bytes_in_use"]


def max_memory_allocated(device: Any = None) -> int:
    """The highest memory_allocated() seen so far."""
    from aicraft.memory import memory_stats
    _index(device)
    return memory_stats()["device_peak_bytes"]


def memory_reserved(device: Any = None) -> int:
    """Device bytes libac holds from cudaMalloc, in use or cached for reuse."""
    from aicraft.memory import memory_stats
    _index(device)
    return memory_stats()["device_reserved"]
