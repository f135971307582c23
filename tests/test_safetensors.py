"""test_safetensors.py - ac.save / ac.load: round trips, files checked by an
independent NumPy reader and written by an independent NumPy writer (both in
this file), corrupt files, bad arguments, scopes and leaks. When the
`safetensors` package is installed, files are also cross-checked with it.
"""
import json
import os
import struct

import numpy as np
import pytest

import aicraft as ac

NAMES = ["layer.0.weight", 'say "hi" \\ back\\slash', "unicode ñ 日本 🙂", "control\n\t\x01", ""]


# ---- an independent reader and writer -----------------------------------------

def numpy_read(path):
    """(header dict, {name: array}) parsed with struct, json and np.frombuffer."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        kind = {"F32": "<f4", "I64": "<i8", "BOOL": "?", "U8": "u1"}[info["dtype"]]
        begin, end = info["data_offsets"]
        arrays[name] = np.frombuffer(data[begin:end], dtype=kind).reshape(info["shape"])
    return header, arrays, n, len(data)


def numpy_write(path, arrays, metadata=None, ensure_ascii=True, data_order=None, pad=True):
    """Write arrays (name -> array) as F32 safetensors; data_order lays out the data
    in another order than the header lists the tensors."""
    blobs = {name: np.ascontiguousarray(a, dtype="<f4").tobytes() for name, a in arrays.items()}
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in data_order or list(arrays):
        header_entry = {"dtype": "F32", "shape": list(np.shape(arrays[name])),
                        "data_offsets": [offset, offset + len(blobs[name])]}
        header[name] = header_entry
        offset += len(blobs[name])
    ordered = {k: header[k] for k in (["__metadata__"] if metadata is not None else []) + list(arrays)}
    text = json.dumps(ordered, ensure_ascii=ensure_ascii).encode("utf-8")
    if pad:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name in data_order or list(arrays):
            f.write(blobs[name])


def raw_file(path, header_bytes, data=b""):
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes + data)


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def sample_arrays():
    rng = np.random.default_rng(0)
    return {
        NAMES[0]: rng.standard_normal((3, 4)).astype(np.float32),
        NAMES[1]: np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40], np.float32),
        NAMES[2]: np.array(42.5, np.float32),                      # 0-d
        NAMES[3]: np.zeros((0, 5), np.float32),                    # no elements
        NAMES[4]: rng.standard_normal((1, 2, 1, 3, 1, 1, 2, 1)).astype(np.float32),
    }


# ---- round trips ---------------------------------------------------------------

def test_round_trip_keeps_names_order_shapes_and_bits(tmp_path):
    arrays = sample_arrays()
    path = tmp_path / "model.safetensors"
    ac.save({k: ac.tensor(v) for k, v in arrays.items()}, path)
    loaded = ac.load(path)
    assert list(loaded) == list(arrays)
    for name, expected in arrays.items():
        t = loaded[name]
        assert isinstance(t, ac.Tensor)
        assert t.shape == expected.shape
        assert not t.requires_grad
        assert same_bits(t.numpy(), expected), name


def test_file_written_by_aicraft_parses_with_an_independent_numpy_reader(tmp_path):
    arrays = sample_arrays()
    path = str(tmp_path / "model.safetensors")
    ac.save({k: ac.tensor(v) for k, v in arrays.items()}, path)
    header, read, header_len, data_len = numpy_read(path)
    assert header_len % 8 == 0                                    # data starts aligned
    assert list(header) == list(arrays)
    offset = 0
    for name, expected in arrays.items():
        info = header[name]
        assert info["dtype"] == "F32"
        assert info["shape"] == list(expected.shape)
        assert info["data_offsets"] == [offset, offset + 4 * expected.size]
        offset += 4 * expected.size
        assert same_bits(read[name], expected), name
    assert offset == data_len


def test_file_written_by_numpy_is_read_by_aicraft(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {"b": rng.standard_normal(7).astype(np.float32),
              "é 🙂": rng.standard_normal((2, 3)).astype(np.float32),
              'q"\\': np.array(-1.25, np.float32),
              "empty": np.zeros((4, 0), np.float32)}
    for ensure_ascii in (True, False):
        path = tmp_path / ("numpy_%s.safetensors" % ensure_ascii)
        numpy_write(path, arrays, metadata={"format": "pt", "note": 'x"y'}, ensure_ascii=ensure_ascii,
                    data_order=list(reversed(list(arrays))), pad=not ensure_ascii)
        loaded = ac.load(path)
        assert list(loaded) == list(arrays)
        for name, expected in arrays.items():
            assert same_bits(loaded[name].numpy(), expected), name


def test_numpy_arrays_keep_their_dtype_and_tensors_make_a_plain_file(tmp_path):
    # as torch.save/torch.load: a NumPy array comes back as the same array (float64 stays
    # float64, nothing narrowed); a dict of Tensors is a plain safetensors file
    path = tmp_path / "np.safetensors"
    big = np.array([1, -2, 2 ** 40 + 1])
    arrays = {"f64": np.arange(6, dtype=np.float64).reshape(2, 3) / 3, "i": big,
              "b": np.array([[True, False]]), "u": np.array([0, 200, 255], np.uint8), "s": np.array(2.5)}
    ac.save(arrays, path)
    loaded = ac.load(path)
    for name, expected in arrays.items():
        assert isinstance(loaded[name], np.ndarray) and loaded[name].dtype == expected.dtype, name
        assert loaded[name].shape == expected.shape and same_bits(loaded[name], expected), name
    ac.save({k: ac.tensor(v) for k, v in arrays.items() if k != "f64"}, path)
    header = numpy_read(path)[0]
    assert [header[k]["dtype"] for k in ("i", "b", "u")] == ["I64", "BOOL", "U8"] and header["s"]["shape"] == []
    loaded = ac.load(path)
    assert loaded["i"].dtype == ac.int64 and loaded["i"].tolist() == big.tolist()
    assert loaded["s"].shape == ()


def test_save_replaces_an_existing_file_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "w.safetensors"
    ac.save({"w": ac.ones(3)}, path)
    ac.save({"w": ac.full((2,), 5.0), "v": ac.zeros(1)}, path)
    loaded = ac.load(path)
    assert list(loaded) == ["w", "v"]
    assert loaded["w"].tolist() == [5.0, 5.0]
    assert os.listdir(tmp_path) == ["w.safetensors"]


def test_paths_may_be_str_bytes_or_pathlike(tmp_path):
    for path in (str(tmp_path / "s.st"), os.fsencode(tmp_path / "b.st"), tmp_path / "p.st"):
        ac.save({"x": ac.ones(2)}, path)
        assert ac.load(path)["x"].tolist() == [1.0, 1.0]


# ---- ownership and scopes ------------------------------------------------------

def test_tensors_saved_and_loaded_inside_a_checkpoint_outlive_it(tmp_path):
    path = tmp_path / "scoped.safetensors"
    with ac.checkpoint():
        x = ac.arange(0, 4) * 2                     # a scoped tensor
        ac.save({"x": x}, path)
        loaded = ac.load(path)
    assert loaded["x"].tolist() == [0.0, 2.0, 4.0, 6.0]
    assert (loaded["x"] + 1).tolist() == [1.0, 3.0, 5.0, 7.0]


def test_loaded_tensors_are_independent_copies(tmp_path):
    path = tmp_path / "copy.safetensors"
    w = ac.ones(3)
    ac.save({"w": w}, path)
    a, b = ac.load(path)["w"], ac.load(path)["w"]
    a.fill_(7.0)
    assert b.tolist() == [1.0, 1.0, 1.0] and w.tolist() == [1.0, 1.0, 1.0]


def test_save_and_load_do_not_leak(tmp_path):
    path = tmp_path / "leak.safetensors"
    state = {"w": ac.randn(64, 32), "b": ac.zeros(32)}
    ac.save(state, path)
    ac.load(path)
    before = ac.memory_stats()
    for _ in range(20):
        ac.save(state, path)
        loaded = ac.load(path)
        del loaded
    after = ac.memory_stats()
    assert after["bytes_in_use"] == before["bytes_in_use"]
    assert after["live_tensors"] == before["live_tensors"]


# ---- errors --------------------------------------------------------------------

@pytest.mark.parametrize("value", [object(), 1j, lambda: 0, np.array(["a", "b"]), np.array([None])])
def test_save_of_an_unsupported_value_raises_type_error(tmp_path, value):
    with pytest.raises(TypeError, match="save"):
        ac.save({"a": ac.ones(1), "bad": [1, value]}, tmp_path / "x.safetensors")
    assert not os.path.exists(tmp_path / "x.safetensors")


def test_save_checks_the_dict_and_its_keys(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match="keys must be str or int"):
        ac.save({(1, 2): ac.ones(1)}, path)
    with pytest.raises(TypeError, match="path"):
        ac.save({"a": ac.ones(1)}, 3.5)
    with pytest.raises(ValueError, match="NUL"):
        ac.save({"a\0b": ac.ones(1)}, path)
    with pytest.raises(ValueError, match="reserved"):
        ac.save({"__metadata__": ac.ones(1)}, path)


def test_tensor_whose_scope_ended_raises_scope_error(tmp_path):
    with ac.checkpoint():
        x = ac.ones(2) * 3
    with pytest.raises(ac.ScopeError):
        ac.save({"x": x}, tmp_path / "x.safetensors")


def test_io_errors_raise_os_error_naming_the_path(tmp_path):
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(OSError, match="missing.safetensors"):
        ac.load(missing)
    target = tmp_path / "no_dir" / "x.safetensors"
    with pytest.raises(OSError, match="no_dir"):
        ac.save({"x": ac.ones(1)}, target)
    with pytest.raises(OSError):
        ac.load(tmp_path)                           # a directory


def _record(name="a", dtype="F32", shape=(1,), offsets=(0, 4)):
    return '"%s":{"dtype":"%s","shape":%s,"data_offsets":%s}' % (
        name, dtype, json.dumps(list(shape)), json.dumps(list(offsets)))


CORRUPT = [
    ("bad json", b'{"a":', b"", "expected"),
    ("not an object", b"[]", b"", "expected"),
    ("trailing garbage", ("{%s}x" % _record()).encode(), b"\0" * 4, "only spaces"),
    ("dtype F16", ("{%s}" % _record(dtype="F16", offsets=(0, 2))).encode(), b"\0" * 2, "F16"),
    ("dtype I32", ("{%s}" % _record(dtype="I32", offsets=(0, 4))).encode(), b"\0" * 4, "I32"),
    ("I64 offsets vs shape", ("{%s}" % _record(dtype="I64", offsets=(0, 4))).encode(), b"\0" * 4,
     "I64 shape .1,. needs 8"),
    ("bool byte 2", ("{%s}" % _record(dtype="BOOL", offsets=(0, 1))).encode(), b"\x02", "not 0 or 1"),
    ("negative dim", ("{%s}" % _record(shape=(-1,))).encode(), b"\0" * 4, "negative"),
    ("nine dims", ("{%s}" % _record(shape=(1,) * 9)).encode(), b"\0" * 4, "more than 8"),
    ("huge dims", ("{%s}" % _record(shape=(2 ** 32, 2 ** 32))).encode(), b"\0" * 4, "too many"),
    ("offsets vs shape", ("{%s}" % _record(shape=(2,))).encode(), b"\0" * 4, "needs 8"),
    ("offsets out of data", ("{%s}" % _record(offsets=(4, 8))).encode(), b"\0" * 4, "not a range"),
    ("truncated data", ("{%s}" % _record(shape=(4,), offsets=(0, 16))).encode(), b"\0" * 10,
     "not a range"),
    ("overlap", ("{%s,%s}" % (_record("a", shape=(2,), offsets=(0, 8)),
                              _record("b", offsets=(4, 8)))).encode(), b"\0" * 8, "overlaps"),
    ("gap", ("{%s,%s}" % (_record("a"), _record("b", offsets=(8, 12)))).encode(), b"\0" * 12,
     "no tensor"),
    ("bytes left over", ("{%s}" % _record()).encode(), b"\0" * 8, "no tensor"),
    ("duplicate name", ("{%s,%s}" % (_record("a"), _record("a", offsets=(4, 8)))).encode(),
     b"\0" * 8, "twice"),
    ("metadata not strings", b'{"__metadata__":{"k":1}}', b"", "not a string"),
    ("lone surrogate", b'{"\\udc00":{}}', b"", "surrogate"),
    ("invalid utf-8", b'{"\xff":{}}', b"", "UTF-8"),
]


@pytest.mark.parametrize("what,header,data,mention", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_corrupt_files_raise_format_error(tmp_path, what, header, data, mention):
    path = tmp_path / "corrupt.safetensors"
    raw_file(path, header, data)
    with pytest.raises(ac.FormatError, match=mention) as info:
        ac.load(path)
    assert isinstance(info.value, ValueError)
    assert "corrupt.safetensors" in str(info.value)


def test_bad_header_lengths_raise_format_error(tmp_path):
    path = tmp_path / "len.safetensors"
    body = ("{%s}" % _record()).encode()
    cases = [(b"", "fewer than"), (b"\x01\x02", "fewer than"),
             (struct.pack("<Q", len(body) + 5) + body + b"\0" * 4, "past the end"),
             (struct.pack("<Q", 100_000_001) + body + b"\0" * 4, "limit"),
             (struct.pack("<Q", 2 ** 64 - 1) + body + b"\0" * 4, "limit")]
    for raw, mention in cases:
        with open(path, "wb") as f:
            f.write(raw)
        with pytest.raises(ac.FormatError, match=mention):
            ac.load(path)


def test_every_truncation_of_a_valid_file_is_rejected(tmp_path):
    good, bad = tmp_path / "good.safetensors", tmp_path / "bad.safetensors"
    ac.save({"w": ac.randn(3, 2), "b": ac.ones(2)}, good)
    raw = good.read_bytes()
    for n in range(len(raw)):
        bad.write_bytes(raw[:n])
        with pytest.raises(ac.FormatError):
            ac.load(bad)
    assert list(ac.load(good)) == ["w", "b"]         # still usable


# ---- the reference implementation, when installed -------------------------------

def test_reference_safetensors_package_agrees(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = sample_arrays()
    ours, theirs = tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors"
    ac.save({k: ac.tensor(v) for k, v in arrays.items()}, ours)
    read = st.load_file(str(ours))
    assert set(read) == set(arrays)
    for name, expected in arrays.items():
        assert read[name].dtype == np.float32 and same_bits(read[name], expected), name
    st.save_file(arrays, str(theirs), metadata={"format": "np"})
    loaded = ac.load(theirs)
    assert set(loaded) == set(arrays)
    for name, expected in arrays.items():
        assert same_bits(loaded[name].numpy(), expected), name
