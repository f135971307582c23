"""accelerator.py - ac.accelerator as PyTorch's torch.accelerator: which accelerator
this build can use. None so far (the CPU is not an accelerator)."""
from aicraft import cuda


def is_available():
    return cuda.is_available()


def current_accelerator(check_available=False):
    """The accelerator's device, or None when there is none."""
    return None


def device_count():
    return cuda.device_count()
