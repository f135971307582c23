"""container.py - nn.ModuleDict, nn.ParameterDict and nn.ParameterList, as PyTorch's.

Each keeps its members in the Module registries (`_modules` or `_parameters`)
under their key ("0", "1", ... for a list), so the parent module sees their
parameters and state_dict names them "blocks.attn.weight" or "params.0" as
torch does. A plain Tensor given to ParameterDict/ParameterList becomes a
Parameter, as in torch.
"""
from collections.abc import Mapping

from aicraft._args import _as_int
from aicraft.nn.module import Module, Parameter
from aicraft.tensor import Tensor

__all__ = ["ModuleDict", "ParameterDict", "ParameterList"]


def _pairs(values, what):
    """(key, value) pairs from a mapping or an iterable of pairs."""
    if isinstance(values, Mapping):
        return list(values.items())
    pairs = []
    for i, item in enumerate(values):
        try:
            key, value = item
        except (TypeError, ValueError):
            raise ValueError("%s.update: element #%d should be a (key, value) pair" % (what, i)) from None
        pairs.append((key, value))
    return pairs


def _key(key, what):
    if not isinstance(key, str):
        raise TypeError("%s keys must be str, not %s" % (what, type(key).__name__))
    return key


class ModuleDict(Module):
    """Modules by name, in insertion order; registered, so the parent sees their parameters."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(_key(key, "ModuleDict"), module)

    def __delitem__(self, key):
        del self._modules[key]
        self.__dict__.pop(key, None)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        for key in list(self._modules):
            del self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        if not hasattr(modules, "__iter__"):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, "
                            "but got " + type(modules).__name__)
        for key, module in _pairs(modules, "ModuleDict"):
            self[key] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward: call the modules it holds")


def _as_parameter(value):
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _describe_parameters(items, by_type):
    """torch's lines for a parameter container, indented as torch's:
    (key): Parameter containing: [aicraft.float32 of size AxB] (ParameterDict: the type name)."""
    lines = []
    for key, p in items:
        if p is None:
            continue
        device = "" if p.device.type == "cpu" else " (%s)" % p.device
        lines.append("  (%s): Parameter containing: [%s of size %s%s]"
                     % (key, p.type() if by_type else repr(p.dtype), "x".join(map(str, p.shape)), device))
    return "\n".join(lines)


class ParameterDict(Module):
    """Parameters by name, in insertion order (plain Tensors become Parameters)."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key in self._parameters:
            return self._parameters[key]
        raise KeyError(key)

    def __setitem__(self, key, value):
        value = _as_parameter(value)
        if value is not None and not isinstance(value, Parameter):
            raise TypeError("ParameterDict: cannot assign '%s' as parameter '%s' (a Tensor or None expected)"
                            % (type(value).__name__, key))
        self.register_parameter(_key(key, "ParameterDict"), value)

    def __delitem__(self, key):
        del self._parameters[key]
        self.__dict__.pop(key, None)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key):
        return key in self._parameters

    def __or__(self, other):
        out = ParameterDict(self.items())
        out.update(other)
        return out

    def copy(self):
        return ParameterDict(self.items())

    def clear(self):
        for key in list(self._parameters):
            del self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        if not self._parameters:
            raise KeyError("popitem(): ParameterDict is empty")
        key = next(reversed(self._parameters))
        return key, self.pop(key)

    def get(self, key, default=None):
        return self._parameters[key] if key in self._parameters else default

    def setdefault(self, key, default=None):
        if key not in self._parameters:
            self[key] = default
        return self._parameters[key]

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def update(self, parameters):
        if not hasattr(parameters, "__iter__"):
            raise TypeError("ParameterDict.update should be called with an iterable of key/value pairs, "
                            "but got " + type(parameters).__name__)
        for key, value in _pairs(parameters, "ParameterDict"):
            self[key] = value

    def extra_repr(self):
        return _describe_parameters(self._parameters.items(), True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward")


class ParameterList(Module):
    """A list of Parameters (plain Tensors become Parameters); state_dict keys "0", "1", ..."""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _index(self, index):
        n = len(self._parameters)
        i = _as_int(index, "ParameterList index")
        if not -n <= i < n:
            raise IndexError("index %d is out of range for a ParameterList of length %d" % (i, n))
        return i % n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParameterList(list(self._parameters.values())[index])
        return self._parameters[str(self._index(index))]

    def __setitem__(self, index, value):
        value = _as_parameter(value)
        if value is not None and not isinstance(value, Parameter):
            raise TypeError("ParameterList: cannot assign '%s' (a Tensor or None expected)" % type(value).__name__)
        self.register_parameter(str(self._index(index)), value)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __iadd__(self, values):
        return self.extend(values)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value):
        value = _as_parameter(value)
        if value is not None and not isinstance(value, Parameter):
            raise TypeError("ParameterList: cannot append '%s' (a Tensor or None expected)" % type(value).__name__)
        self.register_parameter(str(len(self._parameters)), value)
        return self

    def extend(self, values):
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return _describe_parameters(self._parameters.items(), False)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward")

