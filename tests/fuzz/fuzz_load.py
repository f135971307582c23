"""fuzz_load.py - atheris over ac.load's nested structure (aicraft/io.py): the
saved structure's JSON, the part of a file that libac's reader does not check.

Each input is the structure's text. It goes, as __metadata__["aicraft"], into a
safetensors file that holds three tensors named "0", "1" and "2" (float32,
int64, bool), and ac.load reads the file. It must return a structure or raise
FormatError (or TypeError/ValueError for what ac.save cannot write back); what
it returns must save and load back to the same structure. Anything else (a
RecursionError, an unhashable TypeError, a crash) is a finding.
    python tests/fuzz/fuzz_load.py -max_total_time=600 build/fuzz/corpus-load tests/fuzz/corpus/load
tests/test_fuzz_load_corpus.py replays tests/fuzz/corpus/load in make test.
"""
import io
import json
import math
import struct
import sys

import aicraft as ac

TENSORS = (("F32", [2], struct.pack("<2f", 1.5, -2.0)), ("I64", [3], struct.pack("<3q", 1, -2, 3)),
           ("BOOL", [2], b"\x01\x00"))


def file_with(text):
    """The bytes of a safetensors file with TENSORS and text as the saved structure."""
    header, data = {"__metadata__": {"aicraft": text}}, b""
    for i, (dtype, shape, raw) in enumerate(TENSORS):
        header[str(i)] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    head = json.dumps(header).encode("utf-8", "surrogatepass")
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + data


def plain(value):
    """value with its tensors as (dtype, values) and NaN as a string: comparable with ==."""
    if isinstance(value, ac.Tensor):
        return ("tensor", str(value.dtype), value.tolist())
    if isinstance(value, dict):
        return ("dict", [(k, plain(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [plain(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def check(data):
    text = data.decode("utf-8", "surrogateescape")
    try:
        loaded = ac.load(io.BytesIO(file_with(text)))
    except ac.FormatError:
        return
    out = io.BytesIO()
    try:
        ac.save(loaded, out)
    except (TypeError, ValueError):   # keys or values save does not write (a bool key, say)
        return
    again = ac.load(io.BytesIO(out.getvalue()))
    assert plain(again) == plain(loaded), (plain(loaded), plain(again))


def main():
    import atheris
    ac.set_memory_limit(1 << 28)
    atheris.instrument_all()
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
