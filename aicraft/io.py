"""io.py - ac.save and ac.load, as torch.save/torch.load but never pickle: the
file is safetensors, and loading one runs no code.

What can be saved: a Tensor or Parameter, a NumPy array (kept as an array of
its own dtype, float64 included), an int, float, bool, str, bytes or None, a
dtype or device, and dicts (str or int keys; OrderedDicts stay OrderedDicts),
lists, tuples and sets of those, nested: a model's or an optimizer's
state_dict, a checkpoint {"model": ..., "optimizer": ..., "args": ..., "epoch": 3};
also a whole Module (or any plain object of a module-level class, such as an
argparse.Namespace): its class by name and its attributes, module-level
functions and classes by name. A tensor or object met twice (tied weights) is
stored once and comes back shared.

A plain {name: tensor} dict is written as a plain safetensors file, which C
(ac_load_safetensors) and other safetensors readers load as is. Anything else
stores its tensors under the generated names "0", "1", ... (a NumPy array as
its bytes, a 1-d uint8 tensor) and the structure as JSON in the header's
__metadata__ under the key "aicraft". Loading checks every entry of that
structure (kinds, keys, names of tensors, array byte counts) and rebuilds
objects only of allowed classes (see load), setting their attributes without
running their code.

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
from collections import OrderedDict
from collections.abc import Mapping

from aicraft._args import _is_numpy
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live, _wrap
from aicraft.creation import from_numpy
from aicraft.errors import FormatError, raise_error
from aicraft.tensor import Tensor

__all__ = ["save", "load", "safe_globals", "add_safe_globals", "get_safe_globals",
           "clear_safe_globals"]

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
    from aicraft.nn.module import Parameter
    return type(obj) in (dict, OrderedDict) and all(
        isinstance(k, str) and isinstance(v, Tensor) and not isinstance(v, Parameter) for k, v in obj.items())


def _refuse(obj, where):
    if hasattr(obj, "state_dict"):
        raise TypeError("save: cannot save a %s object%s; save its model.state_dict() (or "
                        "optimizer.state_dict()) instead" % (type(obj).__name__, where))
    raise TypeError("save: cannot save a %s%s; ac.save takes %s" % (type(obj).__name__, where, _SAVABLE))


class _Saver:
    """obj as a JSON-ready structure; its tensors appended to tensors, named by position.

    A tensor met twice (tied weights) is stored once and referenced by its name; an
    object (a Module, an argparse.Namespace, ...) met twice is stored once and then
    referenced as {"ref": k}, so loading gives back the same sharing."""

    def __init__(self, tensors):
        self.tensors = tensors
        self.tensor_names = {}    # id(Tensor) -> name
        self.objects = {}         # id(object) -> its index, in the order first met
        self.keep = []            # keeps described objects alive, so ids stay unique
        self.depth = 0

    def tensor(self, value):
        name = self.tensor_names.get(id(value))
        if name is None:
            name = str(len(self.tensors))
            self.tensors.append((name, _as_tensor(value)))
            self.tensor_names[id(value)] = name
            self.keep.append(value)
        return name

    def describe(self, obj, where):
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise ValueError("save: the structure nests deeper than %d levels (at %s); a cycle?"
                                 % (MAX_DEPTH, where[:200] + "..."))
            return self.describe_one(obj, where)
        finally:
            self.depth -= 1

    def describe_one(self, obj, where):
        from aicraft.nn.module import Parameter
        if isinstance(obj, Parameter):
            return {"parameter": self.tensor(obj), "requires_grad": bool(obj.requires_grad)}
        if isinstance(obj, Tensor):
            return {"tensor": self.tensor(obj)}
        if _is_numpy(obj, "ndarray"):
            return self.ndarray(obj, where)
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if _is_numpy(obj, "bool_"):
            return bool(obj)
        if isinstance(obj, numbers.Integral):
            return int(obj)
        if isinstance(obj, numbers.Real):
            return float(obj)
        if isinstance(obj, bytes):
            import base64
            return {"bytes": base64.b64encode(obj).decode("ascii")}
        from aicraft import dtypes
        if isinstance(obj, dtypes.dtype):
            return {"dtype": obj.name}
        if isinstance(obj, dtypes.device):
            return {"device": str(obj)}
        if isinstance(obj, Mapping) and type(obj) in (dict, OrderedDict):
            items = []
            for key, value in obj.items():
                if isinstance(key, bool) or not isinstance(key, (str, numbers.Integral)):
                    raise TypeError("save: dict keys must be str or int, not %s (at %s)"
                                    % (type(key).__name__, where or "the top level"))
                key = key if isinstance(key, str) else int(key)
                items.append([key, self.describe(value, "%s[%r]" % (where, key))])
            return {"odict" if type(obj) is OrderedDict else "dict": items}
        if type(obj) in (list, tuple, set, frozenset):
            kind = {list: "list", tuple: "tuple", set: "set", frozenset: "set"}[type(obj)]
            return {kind: [self.describe(v, "%s[%d]" % (where, i)) for i, v in enumerate(obj)]}
        if isinstance(obj, type) or callable(obj) and not hasattr(obj, "__dict__") or \
                type(obj).__name__ in ("function", "builtin_function_or_method"):
            return self.global_name(obj, where)
        return self.instance(obj, where)

    def ndarray(self, array, where):
        if array.dtype.kind not in "biufc" or array.dtype.fields is not None:
            raise TypeError("save: cannot save a NumPy array of dtype %s%s; ac.save takes %s"
                            % (array.dtype, " (at %s)" % where if where else "", _SAVABLE))
        import numpy as np
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
        name = str(len(self.tensors))
        self.tensors.append((name, from_numpy(data.reshape(-1).view(np.uint8))))
        return {"ndarray": name, "dtype": data.dtype.str, "shape": list(array.shape)}

    def global_name(self, obj, where):
        from aicraft._ffi import lib as _lib
        name = getattr(obj, "__name__", None)
        if isinstance(name, str) and getattr(_lib, name, None) is obj:
            return {"lib": name}
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if not module or not qualname or "<" in qualname:
            _refuse(obj, " (at %s: only module-level functions and classes can be saved)" % where)
        return {"global": "%s.%s" % (module, qualname)}

    def instance(self, obj, where):
        index = self.objects.get(id(obj))
        if index is not None:
            return {"ref": index}
        cls = type(obj)
        state = getattr(obj, "__dict__", None)
        if state is None or "<" in cls.__qualname__ or getattr(cls, "__slots__", ()) or \
                cls.__reduce_ex__ is not object.__reduce_ex__ or cls.__reduce__ is not object.__reduce__:
            _refuse(obj, " (at %s)" % where if where else "")
        self.objects[id(obj)] = len(self.objects)
        self.keep.append(obj)
        fields = [[key, self.describe(value, "%s.%s" % (where or cls.__name__, key))]
                  for key, value in state.items()]
        return {"object": "%s.%s" % (cls.__module__, cls.__qualname__), "state": fields}


def _describe(obj, tensors, where):
    return _Saver(tensors).describe(obj, where)


# ---- what load may build: torch's weights_only allowlist ----------------------------

_SAFE_GLOBALS = {}


def _global_key(obj):
    return "%s.%s" % (getattr(obj, "__module__", "?"), getattr(obj, "__qualname__", getattr(obj, "__name__", "?")))


def add_safe_globals(safe_globals):
    """Allow load (weights_only) to rebuild these classes and functions: objects, or
    (object, "module.name") pairs naming them as the file does."""
    for item in safe_globals:
        if isinstance(item, tuple):
            obj, name = item
            _SAFE_GLOBALS[name] = obj
        else:
            _SAFE_GLOBALS[_global_key(item)] = item


def get_safe_globals():
    return list(_SAFE_GLOBALS.values())


def clear_safe_globals():
    _SAFE_GLOBALS.clear()


class safe_globals:
    """Context manager: add_safe_globals for the block only."""

    def __init__(self, safe_globals):
        self._globals = list(safe_globals)

    def __enter__(self):
        self._saved = dict(_SAFE_GLOBALS)
        add_safe_globals(self._globals)

    def __exit__(self, *exc):
        _SAFE_GLOBALS.clear()
        _SAFE_GLOBALS.update(self._saved)
        return False


def _lookup(module, qualname):
    import importlib
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _resolve(name, weights_only):
    """The class or function a file names "module.qualname": from the allowlist, aicraft's
    own modules, or (weights_only=False only) by importing its module, as torch does."""
    if not isinstance(name, str) or not name:
        raise FormatError("load: the saved structure names a bad global %r" % (name,))
    if name in _SAFE_GLOBALS:
        return _SAFE_GLOBALS[name]
    for i in range(len(name) - 1, 0, -1):   # module.qualname: try the longest module first
        if name[i] != ".":
            continue
        module, qualname = name[:i], name[i + 1:]
        own = module == "aicraft" or module.startswith("aicraft.")
        if not (own or weights_only is False):
            continue
        try:
            return _lookup(module, qualname)
        except (ImportError, AttributeError):
            continue
    import pickle
    raise pickle.UnpicklingError(
        "Weights only load failed: the file holds an object of %s, which is not allowed. Load it "
        "with weights_only=False if you trust the file, or allow the class with "
        "aicraft.serialization.safe_globals([%s]) / add_safe_globals." % (name, name.rsplit(".", 1)[-1]))


class _Loader:
    def __init__(self, tensors, weights_only):
        self.tensors = tensors
        self.weights_only = weights_only
        self.parameters = {}
        self.objects = []
        self.depth = 0

    def tensor(self, name):
        if not isinstance(name, str) or name not in self.tensors:
            raise FormatError("load: the saved structure holds a bad 'tensor' entry (no tensor %r)" % (name,))
        return self.tensors[name]

    def rebuild(self, desc):
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise FormatError("load: the saved structure nests deeper than %d levels" % MAX_DEPTH)
            return self.rebuild_one(desc)
        finally:
            self.depth -= 1

    def rebuild_one(self, desc):
        if isinstance(desc, list):
            raise FormatError("load: the saved structure holds a bare list")
        if not isinstance(desc, dict):
            return desc
        keys = sorted(desc)
        kind = next((k for k in ("tensor", "parameter", "ndarray", "object", "dict", "odict", "list", "tuple",
                                 "set", "global", "lib", "ref", "bytes", "dtype", "device") if k in desc), None)
        expected = {"parameter": ["parameter", "requires_grad"], "ndarray": ["dtype", "ndarray", "shape"],
                    "object": ["object", "state"]}.get(kind, [kind])
        if kind is None and len(keys) == 1:
            raise FormatError("load: the saved structure holds a bad %r entry" % keys[0])
        if kind is None or keys != expected:
            raise FormatError("load: the saved structure holds an object with keys %s" % keys)
        body = desc[kind]
        if kind == "tensor":
            return self.tensor(body)
        if kind == "parameter":
            if body not in self.parameters:
                from aicraft.nn.module import Parameter
                self.parameters[body] = Parameter(self.tensor(body), bool(desc["requires_grad"]))
            return self.parameters[body]
        if kind == "ndarray":
            return self.ndarray(body, desc["dtype"], desc["shape"])
        if kind in ("dict", "odict"):
            if not (isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 and
                                                   isinstance(p[0], (str, int)) for p in body)):
                raise FormatError("load: the saved structure holds a bad %r entry" % kind)
            out = OrderedDict() if kind == "odict" else {}
            for key, value in body:
                out[key] = self.rebuild(value)
            return out
        if kind in ("list", "tuple", "set"):
            if not isinstance(body, list):
                raise FormatError("load: the saved structure holds a bad %r entry" % kind)
            items = [self.rebuild(value) for value in body]
            return {"list": list, "tuple": tuple, "set": set}[kind](items)
        if kind == "object":
            return self.instance(body, desc["state"])
        if kind == "ref":
            if not isinstance(body, int) or isinstance(body, bool) or not 0 <= body < len(self.objects):
                raise FormatError("load: the saved structure refers to a missing object %r" % (body,))
            return self.objects[body]
        if kind == "global":
            return _resolve(body, self.weights_only)
        if kind == "lib":
            obj = getattr(lib, body, None) if isinstance(body, str) and body.startswith("ac_") else None
            if obj is None:
                raise FormatError("load: the saved structure names an unknown libac function %r" % (body,))
            return obj
        if kind == "bytes":
            import base64
            import binascii
            try:
                return base64.b64decode(body.encode("ascii"), validate=True)
            except (AttributeError, ValueError, binascii.Error):
                raise FormatError("load: the saved structure holds bad bytes") from None
        if kind == "dtype":
            from aicraft import dtypes
            d = getattr(dtypes, body, None) if isinstance(body, str) else None
            if not isinstance(d, dtypes.dtype):
                raise FormatError("load: the saved structure names an unknown dtype %r" % (body,))
            return d
        from aicraft import dtypes
        try:
            return dtypes.device(body)
        except (TypeError, ValueError):
            raise FormatError("load: the saved structure names a bad device %r" % (body,)) from None

    def ndarray(self, name, dtype, shape):
        import numpy as np
        raw = self.tensor(name)
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = None
        if dt is None or dt.kind not in "biufc" or dt.fields is not None or not isinstance(shape, list) or \
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise FormatError("load: the saved structure holds a bad NumPy array entry (%r, %r)" % (dtype, shape))
        if raw.dtype.name != "uint8" or raw.ndim != 1:
            raise FormatError("load: the bytes of NumPy array %r are not a 1-d uint8 tensor" % name)
        count = 1
        for d in shape:
            count *= d
        if count * dt.itemsize != raw.shape[0]:
            raise FormatError("load: NumPy array %r holds %d bytes, its shape %s of %s needs %d"
                              % (name, raw.shape[0], shape, dt, count * dt.itemsize))
        return raw.numpy().view(dt).reshape(shape).astype(dt.newbyteorder("="))

    def instance(self, name, state):
        cls = _resolve(name, self.weights_only)
        if not isinstance(cls, type):
            raise FormatError("load: %s is not a class" % name)
        if not isinstance(state, list) or not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                                  for p in state):
            raise FormatError("load: the saved state of a %s is malformed" % name)
        obj = cls.__new__(cls)
        self.objects.append(obj)
        fields = {key: self.rebuild(value) for key, value in state}
        try:
            vars(obj).update(fields)
        except TypeError:
            raise FormatError("load: a %s cannot hold saved attributes" % name) from None
        return obj


def _rebuild(desc, tensors, weights_only=None):
    return _Loader(tensors, weights_only).rebuild(desc)


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


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """What save wrote to f (a path or a binary file object): a {name: Tensor} dict
    for a plain safetensors file, else the saved structure with its tensors.

    map_location: None or "cpu" (tensors load on the CPU), a device or "cuda[:i]"
    (moved there), a dict {saved location: location} (files hold CPU tensors, so the
    entry for "cpu" counts), or a callable (tensor, "cpu") -> tensor, as torch's.
    weights_only (None means True, as torch >= 2.6): objects other than tensors,
    arrays, numbers, strings and containers (a whole saved Module, an argparse
    Namespace) are rebuilt only when their class is aicraft's own or allowed with
    aicraft.serialization.safe_globals/add_safe_globals; weights_only=False also
    imports the module a class is named from, as torch's unpickler does. Rebuilding an
    object sets its attributes; no constructor or other code of it runs."""
    if pickle_module is not None:
        raise NotImplementedError("load: aicraft files are not pickles; pickle_module is not supported")
    if pickle_load_args.keys() - {"encoding"}:
        raise TypeError("load() got an unexpected keyword argument %r" % sorted(pickle_load_args)[0])
    if mmap not in (None, False):
        raise NotImplementedError("load: mmap=True is not supported")
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
    _map_location(tensors, map_location)
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
    return _rebuild(structure, tensors, weights_only)


def _map_location(tensors, map_location):
    """Put the loaded tensors where map_location says (in place, in tensors)."""
    from aicraft import dtypes
    if map_location is None:
        return
    if isinstance(map_location, Mapping):
        map_location = map_location.get("cpu", "cpu")
    if callable(map_location) and not isinstance(map_location, (str, dtypes.device)):
        for name, t in tensors.items():
            moved = map_location(t, "cpu")
            if moved is not None:
                if not isinstance(moved, Tensor):
                    raise TypeError("load: map_location returned %s, not a Tensor" % type(moved).__name__)
                tensors[name] = moved
        return
    target = dtypes.checked_device(map_location, "load")
    if target != dtypes.CPU:
        for t in tensors.values():
            t._move_(target)
