"""C programs build against an installed aicraft without the source tree, three ways:
the header and libac.a the Python package carries (aicraft.get_include/get_lib), and
from a `make install` prefix through pkg-config, shared (aicraft.pc) and static
(aicraft-static.pc, which must not pick libac.so even though it sits beside libac.a)."""
import os
import shutil
import subprocess

import pytest

import aicraft
from conftest import c_link_libs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "demos", "c", "linear_regression.c")
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def run_without_loader_path(exe, **extra):
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(extra)
    return subprocess.run([exe], env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if CC is None or shutil.which("make") is None or shutil.which("pkg-config") is None:
        pytest.skip("needs a C compiler, make and pkg-config")
    prefix = str(tmp_path_factory.mktemp("prefix"))
    subprocess.run(["make", "-s", "install", "PREFIX=" + prefix], cwd=ROOT, check=True,
                   capture_output=True)
    return prefix


def pkg_config(prefix, *args):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    out = subprocess.run(["pkg-config", *args], env=env, check=True, capture_output=True, text=True)
    return out.stdout.split()


def test_package_carries_header_and_static_library(tmp_path):
    if CC is None:
        pytest.skip("needs a C compiler")
    assert os.path.isfile(os.path.join(aicraft.get_include(), "ac.h"))
    lib = os.path.join(aicraft.get_lib(), "libac.a")
    exe = str(tmp_path / "linreg")
    subprocess.run([CC, "-std=c99", DEMO, "-I", aicraft.get_include(), lib, *c_link_libs(),
                    "-o", exe], check=True)
    run = run_without_loader_path(exe)
    assert run.returncode == 0, run.stderr
    assert "(true 2)" in run.stdout


def test_pkg_config_static_route_needs_no_loader_path(prefix, tmp_path):
    exe = str(tmp_path / "linreg_static")
    flags = pkg_config(prefix, "--cflags", "--libs", "aicraft-static")
    assert os.path.join(prefix, "lib", "libac.a") in flags
    subprocess.run([CC, DEMO, *flags, "-o", exe], check=True)
    run = run_without_loader_path(exe)
    assert run.returncode == 0, run.stderr
    needed = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True).stdout
    assert "libac.so" not in needed


def test_pkg_config_shared_route_links_libac_so(prefix, tmp_path):
    exe = str(tmp_path / "linreg_shared")
    subprocess.run([CC, DEMO, *pkg_config(prefix, "--cflags", "--libs", "aicraft"), "-o", exe],
                   check=True)
    run = run_without_loader_path(exe, LD_LIBRARY_PATH=os.path.join(prefix, "lib"))
    assert run.returncode == 0, run.stderr
    needed = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True).stdout
    assert "libac.so" in needed
    assert pkg_config(prefix, "--modversion", "aicraft") == [aicraft.__version__]


def test_static_library_carries_cuda_runtime_exactly_when_built_with_cuda():
    """libac.a links with -lm -lpthread alone: in a CUDA build it holds cudart itself."""
    from aicraft._ffi import lib as libac
    symbols = subprocess.run(["nm", "--defined-only", os.path.join(aicraft.get_lib(), "libac.a")],
                             capture_output=True, text=True, check=True).stdout
    assert (" T cudaMalloc\n" in symbols) == bool(libac.ac_cuda_is_built())
