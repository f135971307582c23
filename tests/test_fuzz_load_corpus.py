"""Replays tests/fuzz/corpus/load (fuzz_load.py's seeds and its regression inputs)
through fuzz_load.check, as make test replays the C fuzzers' corpora: each saved
structure loads and round-trips through ac.save, or is refused with FormatError."""
import glob
import os
import sys

import pytest

FUZZ = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz")
sys.path.insert(0, FUZZ)
import fuzz_load  # noqa: E402

INPUTS = sorted(glob.glob(os.path.join(FUZZ, "corpus", "load", "*")))


def test_the_corpus_is_there():
    assert len(INPUTS) >= 5


@pytest.mark.parametrize("path", INPUTS, ids=[os.path.basename(p) for p in INPUTS])
def test_load_corpus_input(path):
    with open(path, "rb") as f:
        fuzz_load.check(f.read())
