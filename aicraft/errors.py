"""errors.py - aicraft's exceptions and the translation of C error codes into them.

Every C call that fails (NULL or a negative status) ends in `raise_error`, which
reads the calling thread's error code and message and raises the matching
Python exception with C's message ("matmul: shapes (3, 4) and (5, 6) ...").
"""
from aicraft._ffi import ffi, lib


class ShapeError(ValueError):
    """Shapes that do not fit an op (AC_ERR_SHAPE)."""


class ScopeError(RuntimeError):
    """A tensor used after its ac.checkpoint() scope ended, or a scope misuse (AC_ERR_SCOPE)."""


class FormatError(ValueError):
    """A file whose content is corrupt or unsupported (AC_ERR_FORMAT)."""


class DeviceError(RuntimeError):
    """Tensors on different devices, or a device this build lacks (AC_ERR_DEVICE)."""


class GradcheckError(AssertionError):
    """ac.gradcheck found analytic and numeric gradients that disagree (AC_ERR_GRADCHECK)."""


_EXCEPTION_BY_CODE = {
    lib.AC_ERR_ARG: ValueError,
    lib.AC_ERR_SHAPE: ShapeError,
    lib.AC_ERR_MEMORY: MemoryError,
    lib.AC_ERR_SCOPE: ScopeError,
    lib.AC_ERR_INDEX: IndexError,
    lib.AC_ERR_STATE: RuntimeError,
    lib.AC_ERR_IO: OSError,
    lib.AC_ERR_FORMAT: FormatError,
    lib.AC_ERR_GRADCHECK: GradcheckError,
    lib.AC_ERR_DTYPE: TypeError,
    lib.AC_ERR_DEVICE: DeviceError,
}

SCOPE_ENDED = "tensor used after its ac.checkpoint() scope ended"


def last_error():
    """The calling thread's C error as (exception class, message)."""
    code = lib.ac_last_error_code()
    message = ffi.string(lib.ac_last_error()).decode("utf-8", "replace")
    cls = _EXCEPTION_BY_CODE.get(code, RuntimeError)
    if not message:
        message = "aicraft: operation failed (error code %d)" % code
    return cls, message


def raise_error(*tensors):
    """Raise the exception for the C call that just failed on `tensors`.

    A tensor whose scope has ended reaches C as NULL, so C reports a bad
    argument; the real cause, the dead scope, is reported instead.
    """
    for t in tensors:
        if getattr(t, "_ptr", None) is ffi.NULL:
            raise ScopeError(SCOPE_ENDED)
    cls, message = last_error()
    raise cls(message)
