"""What the tests/cuda modules share (not a conftest.py: that would shadow tests/
conftest.py for `from conftest import ...`): the mark that skips a module, saying
CUDA's own reason, when there is no usable GPU, and a fixture seeding each test."""
import pytest

import aicraft as ac
from aicraft._ffi import ffi, lib


def _reason():
    if lib.ac_cuda_device_count() >= 1:
        return ""
    return "no CUDA device: " + ffi.string(lib.ac_last_error()).decode()


REASON = _reason()
needs_gpu = pytest.mark.skipif(bool(REASON), reason=REASON)


@pytest.fixture(autouse=True)
def seeded():
    ac.manual_seed(0)
    yield
    if not REASON:
        ac.cuda.synchronize()
