"""The public API's inline type hints hold up: `mypy --strict` passes on a typed script
that uses tensors, nn, optim, data and DLPack (tests/typing/example.py), which also runs.
The package ships its py.typed marker."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "tests", "typing", "example.py")


def test_package_is_marked_typed():
    assert os.path.isfile(os.path.join(ROOT, "aicraft", "py.typed"))


def test_mypy_strict_passes_on_the_typed_example():
    pytest.importorskip("mypy")
    # silent: aicraft's own internals are not held to --strict, only what the script sees
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                          "--no-incremental", EXAMPLE], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_typed_example_runs():
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, EXAMPLE], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "loss" in run.stdout
