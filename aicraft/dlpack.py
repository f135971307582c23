"""dlpack.py - zero-copy exchange with NumPy, PyTorch and any library that speaks DLPack.

    n = np.from_dlpack(t)          # n and t share memory
    t = ac.from_dlpack(torch_t)    # so do t and torch_t

Tensor.__dlpack__ wraps libac's managed tensor (libac/src/dlpack.c) in a capsule
named as the protocol says: "dltensor_versioned" (DLPack 1.x) when the consumer
asks for max_version 1 or more, else "dltensor"; ac.from_dlpack takes either in.
The capsule holds a root tensor alive until its consumer is done with it; a
tensor made in an ac.checkpoint() scope dies with the scope, so it is refused
(keep() it first). An imported tensor keeps its producer alive. CFFI cannot
make or read Python objects, so the capsule calls go through ctypes.pythonapi.
"""
import functools
from typing import Any, Optional, Tuple

from aicraft._ffi import ffi, lib
from aicraft._wrapping import _wrap
from aicraft.errors import DeviceError, raise_error
from aicraft.tensor import Tensor

_CPU = 1                            # DLPack's kDLCPU
# Capsule names, untaken and taken, for the unversioned (0) and versioned (1) ABIs.
# Kept as module constants: a capsule keeps the pointer to its name, not a copy.
_NAMES = (b"dltensor", b"dltensor_versioned")
_USED_NAMES = (b"used_dltensor", b"used_dltensor_versioned")
_DESTRUCTOR = int(ffi.cast("uintptr_t", ffi.addressof(lib, "_py_dlpack_capsule_destructor")))


@functools.lru_cache(maxsize=None)
def _capsule_api():
    """(PyCapsule_New, _IsValid, _GetPointer, _SetName) of this Python, made on first
    use: ctypes costs 0.4 MB that `import aicraft` need not pay. Fresh ctypes objects:
    pythonapi's shared ones may carry other argtypes."""
    import ctypes

    def capi(name, restype, *argtypes):
        fn = ctypes.pythonapi[name]
        fn.restype = restype
        fn.argtypes = argtypes
        return fn
    obj, ptr, name = ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p
    return (capi("PyCapsule_New", obj, ptr, name, ptr),
            capi("PyCapsule_IsValid", ctypes.c_int, obj, name),
            capi("PyCapsule_GetPointer", ptr, obj, name),
            capi("PyCapsule_SetName", ctypes.c_int, obj, name))


def to_capsule(tensor: "Tensor", stream: Optional[int] = None,
               max_version: Optional[Tuple[int, int]] = None,
               dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
    """A DLPack capsule sharing tensor's memory (a copy's, when copy is True)."""
    if stream is not None:
        raise ValueError("__dlpack__: stream must be None for a CPU tensor, got %r" % (stream,))
    if dl_device is not None and tuple(dl_device) != (_CPU, 0):
        raise BufferError("__dlpack__: the tensor is on the CPU (1, 0); it cannot be exported to "
                          "device %r" % (tuple(dl_device),))
    if tensor.requires_grad:
        raise RuntimeError("__dlpack__: cannot export a tensor that requires grad; use "
                           "tensor.detach()")
    if copy:
        tensor = tensor.keep()
    versioned = 1 if max_version is not None and max_version[0] >= 1 else 0
    managed = lib.ac_to_dlpack(tensor._ptr, versioned)
    if managed == ffi.NULL:
        raise_error(tensor)
    try:
        return _capsule_api()[0](int(ffi.cast("uintptr_t", managed)), _NAMES[versioned], _DESTRUCTOR)
    except BaseException:
        lib.ac_dlpack_delete(managed, versioned)
        raise


def _capsule_of(ext: Any) -> Any:
    """ext's DLPack capsule, versioned when ext's __dlpack__ offers one."""
    if not hasattr(ext, "__dlpack__"):
        return ext                      # a capsule itself, as older APIs hand out
    if hasattr(ext, "__dlpack_device__"):
        device = tuple(ext.__dlpack_device__())
        if device[0] != _CPU:
            raise DeviceError("from_dlpack: the data is on DLPack device %r, not the CPU (1); "
                              "move it to the CPU first" % (device,))
    try:
        return ext.__dlpack__(max_version=(1, 0))
    except TypeError:                   # a producer older than DLPack 1.0
        return ext.__dlpack__()


def from_dlpack(ext: Any) -> "Tensor":
    """A tensor sharing the memory of ext: an object with __dlpack__ (a NumPy array, a
    PyTorch tensor, an aicraft tensor) or a DLPack capsule. float32, int64, bool and
    uint8, row-major contiguous and writable, on the CPU; anything else raises, saying
    what to convert, and so does a bool tensor holding a byte other than 0 or 1
    (ValueError, as the safetensors reader refuses it). ext's memory lives as long
    as the tensor."""
    capsule = _capsule_of(ext)
    for versioned in (1, 0):
        if _capsule_api()[1](capsule, _NAMES[versioned]):
            break
    else:
        raise TypeError("from_dlpack: expected an object with __dlpack__ or an unused DLPack "
                        "capsule, got %s" % type(ext).__name__)
    managed = ffi.cast("void *", _capsule_api()[2](capsule, _NAMES[versioned]))
    p = lib.ac_from_dlpack(managed, versioned)
    if p == ffi.NULL:
        raise_error()       # the capsule, still untaken, gives the data back when it dies
    _capsule_api()[3](capsule, _USED_NAMES[versioned])
    return _wrap(p)


def _dlpack(self: Tensor, *, stream: Optional[int] = None, max_version: Optional[Tuple[int, int]] = None,
            dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
    """A DLPack capsule sharing this tensor's memory (np.from_dlpack, torch.from_dlpack).
    A tensor made in an ac.checkpoint() scope dies with it: keep() it first."""
    return to_capsule(self, stream, max_version, dl_device, copy)


def bind(cls: Any) -> None:
    cls.__dlpack__ = _dlpack
