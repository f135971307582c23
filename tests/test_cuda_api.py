"""The CUDA API where there is no GPU (this suite's machines): importing aicraft does
not initialise CUDA, is_available() is False, and every way onto a GPU raises
DeviceError with CUDA's reason while the library goes on working; the C calls fail
with AC_ERR_DEVICE; and a build without CUDA (AC_CUDA=0) imports and trains.
tests/cuda/ covers the GPU itself."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from aicraft._ffi import ffi, lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
no_gpu = pytest.mark.skipif(ac.cuda.is_available(), reason="a GPU is available: tests/cuda covers it")


def test_import_does_not_initialise_cuda():
    code = ("import aicraft as ac, aicraft.nn, aicraft.optim, aicraft.data\n"
            "x = ac.randn(4, 3, requires_grad=True); (x * x).sum().backward()\n"
            "print(ac.cuda.is_initialized(), ac._ffi.lib.ac_cuda_is_initialized())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "0"]


@no_gpu
def test_without_a_gpu_cuda_is_unavailable():
    assert ac.cuda.is_available() is False and ac.cuda.device_count() == 0
    assert ac.cuda.is_initialized() is bool(lib.ac_cuda_is_built())
    assert ac.cuda.memory_allocated() == 0 and ac.cuda.max_memory_allocated() == 0
    assert ac.memory_stats()["cuda_mallocs"] == 0
    assert ac.accelerator.current_accelerator() is None


@no_gpu
@pytest.mark.parametrize("move, op", [
    (lambda x: x.to("cuda"), "to"), (lambda x: x.cuda(), "to"), (lambda x: x.to(ac.device("cuda", 1)), "to"),
    (lambda x: ac.zeros(2, device="cuda"), "zeros"), (lambda x: ac.tensor([1.0], device="cuda:0"), "tensor"),
    (lambda x: ac.randn(3, device="cuda"), "randn"), (lambda x: ac.zeros_like(x, device="cuda"), "zeros"),
    (lambda x: nn.Linear(2, 3).to("cuda"), "Module.to"), (lambda x: nn.Linear(2, 3).cuda(), "Module.to"),
    (lambda x: ac.cuda.synchronize(), "synchronize"), (lambda x: ac.cuda.current_device(), "cuda"),
])
def test_without_a_gpu_moving_there_raises_with_the_reason(move, op):
    x = ac.ones(2)
    with pytest.raises(ac.DeviceError, match=r"^%s: cuda:\d is not available: \S" % op) as info:
        move(x)
    if not lib.ac_cuda_is_built():
        assert "no CUDA" in str(info.value)
    assert x.device == "cpu" and (x + 1).tolist() == [2.0, 2.0]   # still usable


@no_gpu
def test_without_a_gpu_module_to_leaves_the_module_where_it_was():
    m = nn.Linear(2, 3)
    before = m.weight
    with pytest.raises(ac.DeviceError):
        m.to("cuda")
    assert m.weight is before and m.weight.device == "cpu" and m(ac.ones(1, 2)).shape == (1, 3)


@no_gpu
def test_c_api_without_a_device_fails_with_a_message():
    assert lib.ac_cuda_device_count() == lib.AC_ERR_DEVICE
    assert "is not available: " in ffi.string(lib.ac_last_error()).decode()
    assert lib.ac_cuda_synchronize(-1) == lib.AC_ERR_DEVICE
    x = ac.ones(3)
    assert lib.ac_tensor_to(x._ptr, lib.AC_CUDA, 0) == ffi.NULL
    assert lib.ac_last_error_code() == lib.AC_ERR_DEVICE
    assert ffi.string(lib.ac_last_error()).decode().startswith("to: cuda:0 is not available: ")
    assert lib.ac_cuda_is_available() == 0 and lib.ac_last_error_code() == lib.AC_OK


def test_c_api_bad_arguments():
    x = ac.ones(3)
    for args in [(ffi.NULL, lib.AC_CPU, 0), (x._ptr, 7, 0), (x._ptr, lib.AC_CPU, 1), (x._ptr, lib.AC_CUDA, -1)]:
        assert lib.ac_tensor_to(*args) == ffi.NULL and lib.ac_last_error_code() == lib.AC_ERR_ARG
    assert lib.ac_cuda_synchronize(-2) == lib.AC_ERR_ARG
    with pytest.raises(TypeError):
        x.to(3)
    with pytest.raises(ValueError):
        ac.cuda.synchronize("cpu")


def test_copy_to_the_cpu_is_a_differentiable_copy():
    x = ac.randn(3, 4, requires_grad=True)
    assert x.to("cpu") is x and x.cpu() is x
    p = lib.ac_tensor_to(x._ptr, lib.AC_CPU, 0)
    assert p != ffi.NULL and p != x._ptr
    from aicraft._wrapping import _wrap
    y = _wrap(p)
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)


@pytest.fixture(scope="module")
def cpu_only_tree(tmp_path_factory):
    """A copy of the sources with the extension built by AC_CUDA=0."""
    tree = tmp_path_factory.mktemp("cpu_only")
    shutil.copytree(os.path.join(ROOT, "libac"), str(tree / "libac"))
    shutil.copytree(os.path.join(ROOT, "aicraft"), str(tree / "aicraft"),   # less what a build made
                    ignore=lambda folder, names: [n for n in names if n.startswith("_libac") or n == "__pycache__"
                                                  or (folder.endswith("aicraft") and n in ("lib", "include"))])
    for name in ("build_ffi.py", "setup.py", "README.md"):
        shutil.copy(os.path.join(ROOT, name), str(tree / name))
    env = dict(os.environ, AC_CUDA="0")
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=str(tree), env=env,
                   check=True, capture_output=True)
    return tree


def test_build_without_cuda_imports_trains_and_links_no_cuda(cpu_only_tree):
    code = """
import aicraft as ac
from aicraft import nn, optim
from aicraft._ffi import lib
assert lib.ac_cuda_is_built() == 0 and not ac.cuda.is_available() and ac.cuda.device_count() == 0
assert not ac.cuda.is_initialized()
try:
    ac.zeros(2, device="cuda")
except ac.DeviceError as e:
    assert "this build of libac has no CUDA" in str(e), e
else:
    raise AssertionError("no DeviceError")
ac.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = optim.Adam(model.parameters(), lr=0.05)
x, y = ac.randn(32, 4), ac.randint(0, 2, (32,))
losses = []
for _ in range(30):
    with ac.checkpoint():
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        losses.append(loss.item())
assert losses[-1] < 0.5 * losses[0], losses
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", code], cwd=str(cpu_only_tree), capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
    [so] = [f for f in os.listdir(str(cpu_only_tree / "aicraft")) if f.startswith("_libac") and f.endswith(".so")]
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(cpu_only_tree / "aicraft" / so)],
                             capture_output=True, text=True, check=True).stdout
    assert "ac_cuda_is_available" in symbols
    everything = subprocess.run(["nm", str(cpu_only_tree / "aicraft" / so)], capture_output=True, text=True).stdout
    assert "cudaMalloc" not in everything and "cudaMalloc" not in symbols
    assert not os.path.exists(str(cpu_only_tree / "aicraft" / "lib" / "libcudart_static.a"))


def test_this_build_links_cuda_when_it_has_it():
    import aicraft._libac as ext
    symbols = subprocess.run(["nm", ext.__file__], capture_output=True, text=True).stdout
    assert ("cudaMalloc" in symbols) == bool(lib.ac_cuda_is_built())


def test_allow_tf32_is_a_process_wide_switch():
    assert ac.backends.cuda.matmul.allow_tf32 is False
    ac.backends.cuda.matmul.allow_tf32 = True
    try:
        assert lib.ac_cuda_allow_tf32() == 1 and ac.backends.cuda.matmul.allow_tf32 is True
    finally:
        ac.backends.cuda.matmul.allow_tf32 = False
    assert lib.ac_cuda_set_allow_tf32(2) == lib.AC_ERR_ARG and lib.ac_cuda_allow_tf32() == 0
    assert ac.backends.cuda.is_built() is bool(lib.ac_cuda_is_built())
