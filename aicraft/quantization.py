"""quantization.py - ac.quantization.quantize_dynamic, as torch.ao.quantization's:
a model whose Linear, LSTM and GRU layers hold int8 weights (symmetric, one scale
per output row, values in [-127, 127]) and quantize their inputs per row at run
time (aicraft.nn.quantized.dynamic). A quarter of the weight memory, and faster
at small batches; everything else stays float32. The result is for inference:
it runs under ac.no_grad().

    qmodel = ac.quantization.quantize_dynamic(model, {nn.Linear, nn.LSTM}, dtype=ac.qint8)
    with ac.no_grad():
        y = qmodel(x)
    ac.save(qmodel.state_dict(), "model.q.safetensors")   # int8 weights as I8, scales as F32

A quantized model loads a saved quantized state_dict like any other: quantize the
float model (any weights), then load_state_dict(ac.load(path)).
"""
import copy

from aicraft._ffi import lib
from aicraft.dtypes import qint8
from aicraft.nn import layers, packed, rnn
from aicraft.nn.module import Module
from aicraft.nn.quantized import dynamic

__all__ = ["quantize_dynamic", "qint8", "weight_bytes"]

# The float layers quantize_dynamic replaces, and what it replaces them with.
DEFAULT_DYNAMIC_MAPPING = {layers.Linear: dynamic.Linear, rnn.LSTM: dynamic.LSTM,
                           rnn.GRU: dynamic.GRU}
_QUANTIZED = tuple(DEFAULT_DYNAMIC_MAPPING.values())


def _spec(qconfig_spec):
    """(types, names) from a set of layer classes and / or submodule names (a dict's keys)."""
    if qconfig_spec is None:
        return set(DEFAULT_DYNAMIC_MAPPING), set()
    types, names = set(), set()
    for entry in qconfig_spec:
        if isinstance(entry, str):
            names.add(entry)
        elif isinstance(entry, type) and issubclass(entry, Module):
            if entry not in DEFAULT_DYNAMIC_MAPPING:
                raise ValueError("quantize_dynamic: cannot quantize %s; aicraft quantizes nn.Linear, "
                                 "nn.LSTM and nn.GRU" % entry.__name__)
            types.add(entry)
        else:
            raise TypeError("quantize_dynamic: qconfig_spec holds %r; expected layer classes such as "
                            "nn.Linear, or submodule names" % (entry,))
    return types, names


def _swap(module, name, types, names):
    """module with the chosen layers below it replaced by their quantized versions."""
    if type(module) in types or name in names:
        if type(module) not in DEFAULT_DYNAMIC_MAPPING:
            raise ValueError("quantize_dynamic: cannot quantize '%s', a %s; aicraft quantizes "
                             "nn.Linear, nn.LSTM and nn.GRU" % (name, type(module).__name__))
        return DEFAULT_DYNAMIC_MAPPING[type(module)].from_float(module)
    for child_name, child in list(module._modules.items()):
        if child is not None:
            new = _swap(child, name + "." + child_name if name else child_name, types, names)
            if new is not child:
                setattr(module, child_name, new)
    return module


def quantize_dynamic(model, qconfig_spec=None, dtype=qint8, mapping=None, inplace=False):
    """model with its nn.Linear, nn.LSTM and nn.GRU layers (those in qconfig_spec: layer
    classes and / or submodule names; all three when None) replaced by int8 ones.

    A copy unless inplace (quantizing in place frees the float weights). dtype must be
    ac.qint8; mapping must be None (aicraft's layers only)."""
    if dtype is not qint8:
        raise ValueError("quantize_dynamic: dtype must be aicraft.qint8, not %r" % (dtype,))
    if mapping is not None:
        raise NotImplementedError("quantize_dynamic: a custom mapping is not supported by aicraft")
    if not isinstance(model, Module):
        raise TypeError("quantize_dynamic: model must be an nn.Module, not %s" % type(model).__name__)
    types, names = _spec(qconfig_spec)
    if not inplace:
        model = copy.deepcopy(model)
    return _swap(model, "", types, names)


def weight_bytes(model):
    """The bytes model's weights take: its parameters and buffers, the blocks of its
    quantized layers (int8 weights, scales and biases) and packed layers (nn.packed)
    counted once."""
    total = 0
    for module in model.modules():
        if isinstance(module, _QUANTIZED):
            total += sum(lib.ac_qlinear_nbytes(q) for q in module._blocks())
            continue
        if isinstance(module, packed.Linear):
            total += module.nbytes()
            continue
        for tensor in list(module._parameters.values()) + list(module._buffers.values()):
            if tensor is not None:
                total += tensor.numel() * tensor.dtype.itemsize
    return total
