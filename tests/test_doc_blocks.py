"""The Python blocks of README.md and of every guide in docs/ run as written, each in a
fresh process, so the examples never go stale. A block may be skipped only with a marker
on the line before it: <!-- readme-test: skip (reason) --> (used for blocks that download
data)."""
import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(?:^(<!-- readme-test: skip \(([^)]+)\) -->)\n)?^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
MARKER = re.compile(r"^<!-- readme-test: skip", re.MULTILINE)
FILES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def blocks_of(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        text = f.read()
    return text, [(m.group(3), m.group(2)) for m in BLOCK.finditer(text)]


BLOCKS = [(name, i, code, skip) for name in FILES for i, (code, skip) in enumerate(blocks_of(name)[1])]


def test_docs_have_python_blocks_and_few_skips():
    assert len(blocks_of("README.md")[1]) >= 1
    assert len(FILES) >= 10, FILES
    assert len(BLOCKS) >= 8
    assert sum(1 for *_, skip in BLOCKS if skip) <= 2


def test_readme_stays_short():
    """The README says what aicraft is, how to start and where the guides are (issue 31);
    everything else lives in docs/."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) <= 300


def test_every_skip_marker_names_a_reason_and_sits_on_a_block():
    for name in FILES:
        text, blocks = blocks_of(name)
        markers = len(MARKER.findall(text))
        assert markers == sum(1 for _, skip in blocks if skip), "%s: a skip marker not on a block, or no reason" % name


@pytest.mark.parametrize("name,index,code,skip", BLOCKS, ids=["%s:block%d" % (b[0], b[1]) for b in BLOCKS])
def test_doc_block_runs(name, index, code, skip, tmp_path):
    if skip:
        pytest.skip("%s marks it: %s" % (name, skip))
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, "%s block %d failed:\n%s\n%s" % (name, index, code, run.stderr)
