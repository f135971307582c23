"""cuda.py - ac.cuda as PyTorch's torch.cuda: this build has no CUDA backend, so
is_available() is False and device_count() 0. Nothing here touches a GPU."""


def is_available():
    return False


def device_count():
    return 0


def synchronize(device=None):
    """Nothing to wait for without a GPU."""


def manual_seed(seed):
    """Seeds nothing: there is no GPU generator (ac.manual_seed seeds the CPU's)."""


manual_seed_all = manual_seed
