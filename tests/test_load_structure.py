"""ac.save/ac.load on hostile structures: every failure is a documented type
(FormatError for a bad file, ValueError/TypeError for what save cannot write),
never RecursionError or an unhashable TypeError from inside aicraft."""
import io
import json
import struct

import pytest

import aicraft as ac


def _file_with_structure(text, tensors=()):
    """A safetensors file whose __metadata__ holds `text` as the saved structure."""
    header = {"__metadata__": {"aicraft": text}}
    offset, data = 0, b""
    for name, values in tensors:
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": [len(values)], "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    return io.BytesIO(struct.pack("<Q", len(head)) + head + data)


@pytest.mark.parametrize("body", ['[1]', '{"a": 1}', '1.5', 'null', '["0"]'])
def test_load_tensor_entry_of_unhashable_or_wrong_type_is_format_error(body):
    f = _file_with_structure('{"list": [{"tensor": %s}]}' % body, [("0", [1.0])])
    with pytest.raises(ac.FormatError):
        ac.load(f)


@pytest.mark.parametrize("text", ["[" * 100000, '{"list":[' * 5000 + "1" + "]}" * 5000,
                                  '{"list":[' * 500 + "1" + "]}" * 500])
def test_load_deep_nesting_is_format_error(text):
    with pytest.raises(ac.FormatError, match="nests deeper|not valid JSON"):
        ac.load(_file_with_structure(text))


def test_load_structure_that_is_not_text_is_format_error():
    header = json.dumps({"__metadata__": {"aicraft": 5}}).encode()
    header += b" " * (-len(header) % 8)
    with pytest.raises(ac.FormatError):
        ac.load(io.BytesIO(struct.pack("<Q", len(header)) + header))


def test_save_deep_nesting_is_value_error():
    deep = leaf = {}
    for _ in range(5000):
        leaf["a"] = [{}]
        leaf = leaf["a"][0]
    with pytest.raises(ValueError, match="nests deeper"):
        ac.save(deep, io.BytesIO())


def test_save_cycle_is_value_error():
    cycle = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="cycle"):
        ac.save({"x": cycle}, io.BytesIO())


def test_moderate_nesting_round_trips():
    deep = leaf = {}
    for _ in range(40):
        leaf["a"] = [{"t": ac.ones(2)}]
        leaf = leaf["a"][0]
    buf = io.BytesIO()
    ac.save(deep, buf)
    buf.seek(0)
    back = ac.load(buf)
    for _ in range(40):
        back = back["a"][0]
        assert back["t"].tolist() == [1.0, 1.0]
