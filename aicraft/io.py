"""io.py - ac.save and ac.load: state dicts in the safetensors format.

The reading and writing are libac's (ac_save_safetensors / ac_load_safetensors),
so a C program reads the same files. Here a Python dict becomes an AcStateDict
and back. Loaded tensors are root tensors owned by Python, whatever
ac.checkpoint() is open.
"""
import os
from collections.abc import Mapping

import numpy as np

from aicraft._ffi import ffi, lib
from aicraft.creation import from_numpy
from aicraft.errors import raise_error
from aicraft.tensor import Tensor, _live, _wrap


def _c_path(path, what):
    try:
        return os.fsencode(path)
    except TypeError:
        raise TypeError("%s: path must be a str, bytes or os.PathLike, not %s"
                        % (what, type(path).__name__)) from None


def _c_name(name):
    if not isinstance(name, str):
        raise TypeError("save: state_dict keys must be str, not %s" % type(name).__name__)
    if "\0" in name:
        raise ValueError("save: the name %r holds a NUL character" % name)
    return name.encode("utf-8")


def save(state_dict, path):
    """Write state_dict (name -> Tensor or NumPy array) to path as float32 safetensors.

    The file is written whole to a temporary file and renamed into place.
    """
    if not isinstance(state_dict, Mapping):
        hint = "; pass model.state_dict()" if hasattr(state_dict, "state_dict") else ""
        raise TypeError("save: expected a dict of name -> Tensor, got %s%s"
                        % (type(state_dict).__name__, hint))
    c_path = _c_path(path, "save")
    entries = []
    for name, value in state_dict.items():
        c_name = _c_name(name)
        if isinstance(value, np.ndarray):
            value = from_numpy(value)
        elif not isinstance(value, Tensor):
            raise TypeError("save: state_dict['%s'] is a %s; only Tensors and NumPy arrays can be saved"
                            % (name, type(value).__name__))
        entries.append((c_name, value))
    d = lib.ac_state_dict_new()
    if d == ffi.NULL:
        raise_error()
    try:
        for c_name, tensor in entries:
            if lib.ac_state_dict_set(d, c_name, _live(tensor)) < 0:
                raise_error(tensor)
        if lib.ac_save_safetensors(d, c_path) < 0:
            raise_error()
    finally:
        lib.ac_state_dict_free(d)


def load(path):
    """Read a safetensors file of float32 tensors into a dict name -> Tensor, in file order."""
    d = lib.ac_load_safetensors(_c_path(path, "load"))
    if d == ffi.NULL:
        raise_error()
    try:
        out = {}
        for i in range(lib.ac_state_dict_size(d)):
            name = ffi.string(lib.ac_state_dict_name(d, i)).decode("utf-8")
            p = lib.ac_state_dict_tensor(d, i)
            lib.ac_tensor_retain(p)          # the wrapper owns this reference
            out[name] = _wrap(p)
        return out
    finally:
        lib.ac_state_dict_free(d)
