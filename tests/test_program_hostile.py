"""Exported programs with flipped bits: every load either succeeds or raises
FormatError (a run that would need more than the machine has: MemoryError), and
none allocates more than the reader's bound for a file of its size (512 MiB of
tensors and 128 MiB of scratch for these small files), whatever its recorded
shapes ask."""
import os

import pytest

import aicraft as ac

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz", "corpus", "program")
BOUND = (512 + 128) << 20


@pytest.mark.parametrize("name", ["cnn", "fn", "lstm"])
def test_bit_flipped_programs_fail_with_format_error_within_the_bound(name, tmp_path):
    data = open(os.path.join(CORPUS, name + ".acprog"), "rb").read()
    path = str(tmp_path / "flipped.acprog")
    kinds = set()
    for pos in range(0, len(data), 3):            # every third byte, one bit each, all bits in turn
        flipped = bytearray(data)
        flipped[pos] ^= 1 << (pos % 8)
        with open(path, "wb") as f:
            f.write(flipped)
        before = ac.memory_stats()["bytes_in_use"]
        try:
            ac.load_program(path)
            kinds.add("ok")
        except (ac.FormatError, MemoryError) as e:
            kinds.add(type(e).__name__)
        peak = ac.memory_stats()["peak_bytes"]
        assert peak - before <= BOUND or peak <= BOUND, (pos, peak)
    assert "FormatError" in kinds
