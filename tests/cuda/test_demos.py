"""The MNIST demos on the GPU reach the accuracy of their CPU runs (MNIST must be in
data/: the device machine has no network)."""
import os
import re
import subprocess
import sys

import pytest
from gpu import needs_gpu, seeded  # noqa: F401 (seeded: an autouse fixture)

pytestmark = needs_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("demo, epochs, floor", [("mnist_mlp.py", 1, 95.0), ("mnist_cnn.py", 1, 98.0)])
def test_demo_on_cuda_reaches_its_cpu_accuracy(demo, epochs, floor, tmp_path):
    if not os.path.isdir(os.path.join(ROOT, "data", "MNIST")):
        pytest.skip("MNIST is not in data/ (run the demo once on a machine with network)")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "demos", demo), "--device", "cuda", "--epochs",
                          str(epochs), "--out", str(tmp_path / "w.safetensors"), "--data", os.path.join(ROOT, "data")]
                         + (["--plot", str(tmp_path / "loss.png")] if demo == "mnist_mlp.py" else
                            ["--program", str(tmp_path / "cnn.acprog")]),
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    accuracy = float(re.search(r"test accuracy: ([\d.]+)%", run.stdout).group(1))
    assert accuracy >= floor, run.stdout
