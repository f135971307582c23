"""tests/cuda: the GPU suite (make test-cuda). Every test here compares a CUDA run with
the CPU path, or checks device memory; without a usable GPU each one is skipped, saying
why (CUDA's own reason)."""
import pytest

import aicraft as ac


def _reason():
    from aicraft._ffi import ffi, lib
    if lib.ac_cuda_device_count() >= 1:
        return None
    return "no CUDA device: " + ffi.string(lib.ac_last_error()).decode()


def pytest_collection_modifyitems(config, items):
    reason = _reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "tests/cuda/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def seeded():
    ac.manual_seed(0)
    yield
    if ac.cuda.is_available():
        ac.cuda.synchronize()
