"""_ffi.py - the one place that imports the compiled module aicraft._libac.

Everything else in the package reaches C through `ffi` and `lib` from here.
"""
try:
    from aicraft._libac import ffi, lib
except ImportError as exc:  # pragma: no cover - only when the extension was never built
    raise ImportError(
        "aicraft's compiled core (aicraft._libac) is missing: build it with "
        "`python setup.py build_ext --inplace` or install with `pip install .` (%s)" % exc
    ) from exc

NULL = ffi.NULL

__all__ = ["ffi", "lib", "NULL"]
