"""ac.backends.cudnn: aicraft does not use cuDNN. is_available() is False; benchmark,
deterministic, enabled and allow_tf32 are attributes a script may set (as with torch
on a machine without cuDNN, they change nothing: aicraft's results are deterministic
and its CUDA convolutions are its own)."""
import contextlib

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    """None: no cuDNN library is loaded."""
    return None


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """Set the switches for a block, restoring them after (they change nothing here)."""
    import sys
    here = sys.modules[__name__]
    old = (here.enabled, here.benchmark, here.deterministic, here.allow_tf32)
    here.enabled, here.benchmark, here.deterministic, here.allow_tf32 = enabled, benchmark, deterministic, allow_tf32
    try:
        yield
    finally:
        here.enabled, here.benchmark, here.deterministic, here.allow_tf32 = old
