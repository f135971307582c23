"""The README's Python blocks run as written, each in a fresh process, so its examples
never go stale. A block may be skipped only with a marker on the line before it:
<!-- readme-test: skip (reason) --> (used for blocks that download data)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(?:^(<!-- readme-test: skip \(([^)]+)\) -->)\n)?^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def readme_blocks():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return [(m.group(3), m.group(2)) for m in BLOCK.finditer(text)]


BLOCKS = readme_blocks()


def test_readme_has_python_blocks_and_few_skips():
    assert len(BLOCKS) >= 3
    assert sum(1 for _, skip in BLOCKS if skip) <= 2


@pytest.mark.parametrize("code,skip", BLOCKS, ids=["block%d" % i for i in range(len(BLOCKS))])
def test_readme_block_runs(code, skip, tmp_path):
    if skip:
        pytest.skip("README marks it: " + skip)
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, "README block failed:\n%s\n%s" % (code, run.stderr)
