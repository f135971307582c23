"""_shared.py - tensors in shared memory (Tensor.share_memory_/is_shared, their pickling,
Module.share_memory): see aicraft.multiprocessing. Kept apart so that `import aicraft`
does not import Python's multiprocessing."""
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live, _wrap
from aicraft.errors import raise_error


def shared_name(tensor):
    """(name, byte offset) of the shared object tensor's data is in, or None."""
    name = ffi.new("char[%d]" % lib.AC_SHARED_NAME_MAX)
    offset = ffi.new("int64_t *")
    if lib.ac_tensor_shared_name(_live(tensor), name, lib.AC_SHARED_NAME_MAX, offset) == 1:
        return ffi.string(name).decode("ascii"), int(offset[0])
    return None


def share_memory_(tensor):
    """Move tensor's data into shared memory, in place (the same Tensor object); returns it.
    The tensor gets a copy of its data there: other tensors that shared its old memory
    (it was made as a view of them) keep the old memory."""
    from aicraft import dtypes
    p = _live(tensor)
    if shared_name(tensor) is not None:
        return tensor
    if tensor.device != dtypes.CPU:
        return tensor   # as torch: CUDA tensors are shared through CUDA IPC; here they stay put
    if p.scope_depth:
        raise RuntimeError("share_memory_: a tensor made inside an ac.checkpoint() scope cannot be shared "
                           "(make it outside, or .keep() it first)")
    if p.node != ffi.NULL:
        raise RuntimeError("share_memory_: only a leaf tensor can be moved into shared memory, not an op's "
                           "result (detach() it first)")
    q = lib.ac_tensor_share(p)
    if q == ffi.NULL:
        raise_error(tensor)
    if p.requires_grad:
        lib.ac_tensor_set_requires_grad(q, 1)
    tensor._ptr = q
    lib.ac_tensor_free(p)
    return tensor


def is_shared(tensor):
    """True when tensor's data is in shared memory."""
    return shared_name(tensor) is not None


def _rebuild_shared(name, offset, shape, dtype_name, requires_grad):
    from aicraft import dtypes
    d = getattr(dtypes, dtype_name)
    shape_array = ffi.new("int64_t[]", list(shape) or [0])
    p = lib.ac_tensor_open_shared(name.encode("ascii"), offset, shape_array, len(shape), d.code)
    if p == ffi.NULL:
        raise_error()
    t = _wrap(p)
    if requires_grad:
        t.requires_grad_(True)
    return t


def reduce_tensor(tensor, plain_reduce):
    """Tensor.__reduce__: a shared tensor by its object's name, any other by value."""
    where = shared_name(tensor) if tensor._ptr != ffi.NULL else None
    if where is None:
        return plain_reduce(tensor)
    name, offset = where
    return _rebuild_shared, (name, offset, tuple(tensor.shape), tensor.dtype.name, bool(tensor.requires_grad))


def share_module_memory(module):
    """Module.share_memory(): every parameter and buffer into shared memory; returns module."""
    for m in module.modules():
        for registry in (m._parameters, m._buffers):
            for t in registry.values():
                if t is not None:
                    share_memory_(t)
    return module


def bind(tensor_cls, module_cls):
    plain_reduce = tensor_cls.__reduce__
    tensor_cls.share_memory_ = share_memory_
    tensor_cls.is_shared = is_shared
    tensor_cls.__reduce__ = lambda self: reduce_tensor(self, plain_reduce)
    module_cls.share_memory = share_module_memory


