"""io.py - ac.save and ac.load, as torch.save/torch.load but never pickle: the
file is safetensors, and loading one runs no code.

What can be saved: a Tensor (or NumPy array), an int, float, bool, str or
None, and dicts (str or int keys), lists and tuples of those, nested: a
model's or an optimizer's state_dict, a checkpoint {"model": ..., "epoch": 3}.
A plain {name: tensor} dict is written as a plain safetensors file, which C
(ac_load_safetensors) and other safetensors readers load as is. Anything else
stores its tensors under the generated names "0", "1", ... and the structure
as JSON in the header's __metadata__ under the key "aicraft".

Writing is here (a NumPy array per tensor, its dtype named from the array's
dtype). Reading is libac's strict reader (ac_load_safetensors), which checks
the whole file before anything is made; then the structure is read back from
the header it has checked. libac reads paths, so a file object is copied to
a temporary file first. Loaded tensors are root tensors owned by Python,
whatever ac.checkpoint() is open.
"""
import itertools
import json
import numbers
import os
import struct
from collections.abc import Mapping

from aicraft._args import _is_numpy
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live, _wrap
from aicraft.creation import from_numpy
from aicraft.errors import FormatError, raise_error
from aicraft.tensor import Tensor

__all__ = ["save", "load"]

STRUCTURE_KEY = "aicraft"
_DTYPE_NAMES = {"float32": "F32", "int64": "I64", "bool": "BOOL", "uint8": "U8", "int8": "I8"}
_serial = itertools.count()                  # temporary names of saves in flight
_SAVABLE = "Tensors, NumPy arrays, numbers, strings, None, and dicts, lists and tuples of them"
MAX_DEPTH = 100                              # nesting save writes and load reads: no RecursionError


def _c_path(path, what):
    try:
        return os.fsencode(path)
    except TypeError:
        raise TypeError("%s: f must be a path (str, bytes, os.PathLike) or a binary file object, not %s"
                        % (what, type(path).__name__)) from None


def _check_name(name):
    if not isinstance(name, str):
        raise TypeError("save: state_dict keys must be str, not %s" % type(name).__name__)
    if "\0" in name:
        raise ValueError("save: the name %r holds a NUL character" % name)
    if name == "__metadata__":
        raise ValueError('save: the name "__metadata__" is reserved by safetensors')
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("save: the name %r is not valid Unicode (a lone surrogate?)" % name) from None
    return name


def _as_tensor(value):
    if _is_numpy(value, "ndarray"):
        if value.dtype.kind not in "biuf":
            raise TypeError("save: cannot save a NumPy array of dtype %s; ac.save takes %s" % (value.dtype, _SAVABLE))
        return from_numpy(value)
    _live(value)                             # raises ScopeError for a tensor whose scope ended
    return value


def _is_plain(obj):
    return isinstance(obj, Mapping) and all(
        isinstance(k, str) and (isinstance(v, Tensor) or _is_numpy(v, "ndarray")) for k, v in obj.items())


def _refuse(obj, where):
    if hasattr(obj, "state_dict"):
        raise TypeError("save: cannot save a %s object%s; save its model.state_dict() (or "
                        "optimizer.state_dict()) instead" % (type(obj).__name__, where))
    raise TypeError("save: cannot save a %s%s; ac.save takes %s" % (type(obj).__name__, where, _SAVABLE))


def _describe(obj, tensors, where, depth=0):
    """obj as JSON-ready structure; its tensors appended to tensors, named by position."""
    if depth > MAX_DEPTH:
        raise ValueError("save: the structure nests deeper than %d levels (at %s); a cycle?"
                         % (MAX_DEPTH, where[:200] + "..."))
    if isinstance(obj, Tensor) or _is_numpy(obj, "ndarray"):
        tensors.append((str(len(tensors)), _as_tensor(obj)))
        return {"tensor": tensors[-1][0]}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        return float(obj)
    if isinstance(obj, Mapping):
        items = []
        for key, value in obj.items():
            if isinstance(key, bool) or not isinstance(key, (str, numbers.Integral)):
                raise TypeError("save: dict keys must be str or int, not %s (at %s)"
                                % (type(key).__name__, where or "the top level"))
            key = key if isinstance(key, str) else int(key)
            items.append([key, _describe(value, tensors, "%s[%r]" % (where, key), depth + 1)])
        return {"dict": items}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_describe(v, tensors, "%s[%d]" % (where, i), depth + 1) for i, v in enumerate(obj)]}
    _refuse(obj, " (at %s)" % where if where else "")


def _rebuild(desc, tensors, depth=0):
    if depth > MAX_DEPTH:
        raise FormatError("load: the saved structure nests deeper than %d levels" % MAX_DEPTH)
    if isinstance(desc, dict):
        if len(desc) != 1:
            raise FormatError("load: the saved structure holds an object with keys %s" % sorted(desc))
        (kind, body), = desc.items()
        if kind == "tensor" and isinstance(body, str) and body in tensors:
            return tensors[body]
        if kind == "dict" and isinstance(body, list) and all(
                isinstance(p, list) and len(p) == 2 and isinstance(p[0], (str, int)) for p in body):
            return {key: _rebuild(value, tensors, depth + 1) for key, value in body}
        if kind in ("list", "tuple") and isinstance(body, list):
            items = [_rebuild(value, tensors, depth + 1) for value in body]
            return items if kind == "list" else tuple(items)
        raise FormatError("load: the saved structure holds a bad %r entry" % kind)
    if isinstance(desc, list):
        raise FormatError("load: the saved structure holds a bare list")
    return desc


def _safetensors_bytes(named, metadata):
    """The whole file for [(name, Tensor)] and a metadata dict (or None)."""
    arrays = [(name, t.numpy()) for name, t in named]
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, array in arrays:
        dtype = _DTYPE_NAMES.get(array.dtype.name)
        if dtype is None:
            raise TypeError("save: tensor '%s' has dtype %s, which safetensors files here do not hold"
                            % (name, array.dtype))
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    text += b" " * (-len(text) % 8)          # the data starts 8-byte aligned
    parts = [struct.pack("<Q", len(text)), text]
    parts += [array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes() for _, array in arrays]
    return b"".join(parts)


def save(obj, f):
    """Write obj (see the module's docstring) to f, a path or a binary file object.

    A path is written whole to a temporary file and renamed into place. A
    Module, or any object other than those listed, raises TypeError.
    """
    if _is_plain(obj):
        named = [(_check_name(k), _as_tensor(v)) for k, v in obj.items()]
        metadata = None
    else:
        named = []
        structure = _describe(obj, named, "")
        metadata = {STRUCTURE_KEY: json.dumps(structure, allow_nan=True)}
    data = _safetensors_bytes(named, metadata)
    if hasattr(f, "write"):
        f.write(data)
        return
    path = os.fsdecode(_c_path(f, "save"))
    tmp = "%s.tmp-%d-%d" % (path, os.getpid(), next(_serial))
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _load_path(c_path):
    """{name: Tensor} in file order, and the __metadata__ dict, from a file libac has checked."""
    d = lib.ac_load_safetensors(c_path)
    if d == ffi.NULL:
        raise_error()
    try:
        tensors = {}
        for i in range(lib.ac_state_dict_size(d)):
            name = ffi.string(lib.ac_state_dict_name(d, i)).decode("utf-8")
            p = lib.ac_state_dict_tensor(d, i)
            lib.ac_tensor_retain(p)          # the wrapper owns this reference
            tensors[name] = _wrap(p)
    finally:
        lib.ac_state_dict_free(d)
    with open(c_path, "rb") as f:            # the header libac just checked
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length).decode("utf-8"))
    return tensors, header.get("__metadata__", {})


def load(f):
    """What save wrote to f (a path or a binary file object): a {name: Tensor} dict
    for a plain safetensors file, else the saved structure with its tensors."""
    if hasattr(f, "read"):
        import tempfile     # here: its import costs more than the rest of this module's
        fd, tmp = tempfile.mkstemp(suffix=".safetensors")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(f.read())
            tensors, metadata = _load_path(os.fsencode(tmp))
        finally:
            os.remove(tmp)
    else:
        tensors, metadata = _load_path(_c_path(f, "load"))
    if STRUCTURE_KEY not in metadata:
        return tensors
    text = metadata[STRUCTURE_KEY]
    if not isinstance(text, str):
        raise FormatError("load: the saved structure is a %s, not JSON text" % type(text).__name__)
    try:
        structure = json.loads(text)
    except RecursionError:
        raise FormatError("load: the saved structure nests deeper than %d levels" % MAX_DEPTH) from None
    except ValueError as exc:
        raise FormatError("load: the saved structure is not valid JSON (%s)" % exc) from None
    return _rebuild(structure, tensors)
