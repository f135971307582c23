"""accelerator.py - ac.accelerator as PyTorch's torch.accelerator: which accelerator
this process can use: a CUDA GPU, or None (the CPU is not an accelerator)."""
from aicraft import cuda, dtypes


def is_available():
    return cuda.is_available()


def current_accelerator(check_available=False):
    """The accelerator's device, or None when there is none (RuntimeError then, with
    check_available)."""
    if cuda.is_available():
        return dtypes.device("cuda")
    if check_available:
        raise RuntimeError("current_accelerator: no accelerator is available")
    return None


def device_count():
    return cuda.device_count()
