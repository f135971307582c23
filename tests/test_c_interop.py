"""Python saves a model, a C program linked against libac.a loads the file and runs
the same forward pass: the outputs must be identical, bit for bit."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from conftest import c_link_libs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


@pytest.fixture(scope="module")
def mlp_forward(tmp_path_factory):
    if CC is None or shutil.which("make") is None:
        pytest.skip("needs a C compiler and make")
    subprocess.run(["make", "-s", "lib"], cwd=ROOT, check=True, capture_output=True)
    exe = str(tmp_path_factory.mktemp("interop") / "mlp_forward")
    subprocess.run([CC, "-std=c99", "-O2", "-I", os.path.join(ROOT, "libac", "include"),
                    os.path.join(ROOT, "tests", "interop", "mlp_forward.c"),
                    os.path.join(ROOT, "build", "libac.a"), *c_link_libs(), "-o", exe],
                   check=True)
    return exe


def test_python_save_c_load_gives_identical_outputs(mlp_forward, tmp_path):
    ac.manual_seed(3)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 5))
    weights = str(tmp_path / "mlp.safetensors")
    ac.save(model.state_dict(), weights)
    x = np.random.default_rng(0).standard_normal((7, 20)).astype(np.float32)
    x.tofile(tmp_path / "x.f32")
    subprocess.run([mlp_forward, weights, str(tmp_path / "x.f32"), "7", "20",
                    str(tmp_path / "y.f32")], check=True)
    from_c = np.fromfile(tmp_path / "y.f32", dtype=np.float32).reshape(7, 5)
    with ac.no_grad():
        from_python = model(ac.from_numpy(x)).numpy()
    assert np.array_equal(from_c, from_python)
    assert np.abs(from_python).max() > 0      # a real forward pass, not zeros


def test_c_program_reports_a_corrupt_file(mlp_forward, tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    np.zeros((1, 20), np.float32).tofile(tmp_path / "x.f32")
    run = subprocess.run([mlp_forward, str(bad), str(tmp_path / "x.f32"), "1", "20",
                          str(tmp_path / "y.f32")], capture_output=True, text=True)
    assert run.returncode == 1
    assert "load:" in run.stderr and "bad.safetensors" in run.stderr


def test_c_predict_demo_counts_what_python_counts(tmp_path):
    """demos/c/predict.c on a small IDX test set: the same correct count as the model in
    Python (argmax gives int64 indices in C too)."""
    if CC is None or shutil.which("make") is None:
        pytest.skip("needs a C compiler and make")
    from aicraft.data.datasets import write_idx
    subprocess.run(["make", "-s", "lib"], cwd=ROOT, check=True, capture_output=True)
    exe = str(tmp_path / "predict")
    subprocess.run([CC, "-std=c99", "-O2", "-I", os.path.join(ROOT, "libac", "include"),
                    os.path.join(ROOT, "demos", "c", "predict.c"), os.path.join(ROOT, "build", "libac.a"),
                    *c_link_libs(), "-o", exe], check=True)
    rng = np.random.default_rng(5)
    images = rng.integers(0, 256, (300, 28, 28)).astype(np.uint8)
    labels = rng.integers(0, 10, 300).astype(np.uint8)
    write_idx(str(tmp_path / "t10k-images-idx3-ubyte"), images)
    write_idx(str(tmp_path / "t10k-labels-idx1-ubyte"), labels)
    ac.manual_seed(4)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    ac.save(model.state_dict(), str(tmp_path / "mlp.safetensors"))
    with ac.no_grad():
        x = (ac.from_numpy(images.reshape(300, 784)).float() / 255 - 0.1307) / 0.3081
        correct = model(x).argmax(1).eq(ac.from_numpy(labels).long()).sum().item()
    run = subprocess.run([exe, str(tmp_path / "mlp.safetensors"), str(tmp_path)], check=True,
                         capture_output=True, text=True)
    assert "(%d/300)" % correct in run.stdout, run.stdout
    assert 0 < correct < 300
