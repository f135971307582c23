"""module.py - nn.Parameter and nn.Module, the base of every layer and model.

A Module registers what is assigned to it: a Parameter goes to `_parameters`,
a Module to `_modules`, a tensor named by register_buffer to `_buffers`. Each
is also kept in the instance __dict__, so `self.weight` in forward is a plain
attribute read, not a trip through __getattr__.

Parameters and buffers live at root (outside any ac.checkpoint() scope): a
model is built once and then trained with a scope around each step.
"""
from collections import OrderedDict, namedtuple
from typing import Any, Dict, Iterator, Mapping, Tuple, TypeVar

from aicraft import _trace, dtypes
from aicraft._args import _is_numpy
from aicraft._ffi import lib
from aicraft._wrapping import _live, _shape_of
from aicraft.errors import raise_error
from aicraft.tensor import Tensor

M = TypeVar("M", bound="Module")

__all__ = ["Parameter", "Module", "factory_kwargs"]


class Parameter(Tensor):
    """A tensor that a Module registers as a parameter (requires grad by default).

    Made from a root tensor it shares that tensor's memory, as PyTorch's does;
    made from a tensor inside an ac.checkpoint() scope it is a root copy, so
    it outlives the scope.
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from aicraft.creation import zeros
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError("Parameter: data must be a Tensor, not %s" % type(data).__name__)
        src = _live(data)
        p = lib.ac_tensor_detach(src) if lib.ac_mem_depth() == 0 else lib.ac_tensor_keep(src)
        if not p:
            raise_error(data)
        self = object.__new__(cls)
        self._ptr = p
        self._scope = None
        if lib.ac_tensor_set_requires_grad(p, 1 if requires_grad else 0) < 0:
            raise_error(self)
        return self

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        copy = Parameter(Tensor.__deepcopy__(self, {}), self.requires_grad)
        memo[id(self)] = copy
        return copy

    def __reduce__(self):
        return Parameter, (self.detach(), self.requires_grad)

    __str__ = __repr__


_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _root_tensor(value, what):
    """value as a tensor that outlives any scope open now (None stays None)."""
    if value is None:
        return None
    if not isinstance(value, Tensor):
        raise TypeError("cannot assign '%s' as %s (a Tensor or None expected)"
                        % (type(value).__name__, what))
    return value if value._scope is None else value.keep()


def factory_kwargs(module, device, dtype):
    """A constructor's `device=`/`dtype=` (PyTorch's factory keywords), applied to module's
    parameters and buffers once they are built: dtype must be None or float32 (aicraft's
    modules compute in float32; any other dtype raises TypeError rather than being ignored),
    device moves them (DeviceError when it cannot be used). Every layer calls this last."""
    what = type(module).__name__
    if dtype is not None and dtypes.checked(dtype, what) is not dtypes.float32:
        raise TypeError("%s: aicraft modules hold float32 parameters only, not %r" % (what, dtype))
    if device is not None:
        target = dtypes.checked_device(device, what)
        if target != dtypes.CPU:
            module.to(target)
    return module


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module:
    """Base class of layers and models: subclass it, assign layers and Parameters
    in __init__ (after super().__init__()), and write forward()."""

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers"] = set()
        d["_modules"] = OrderedDict()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError('Module [%s] is missing the required "forward" function'
                                  % type(self).__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ---- registration ------------------------------------------------------

    def _registries(self, name):
        try:
            d = self.__dict__
            return d["_parameters"], d["_buffers"], d["_modules"]
        except KeyError:
            raise AttributeError("cannot assign %r before %s.__init__() called super().__init__()"
                                 % (name, type(self).__name__)) from None

    def _register(self, registry, name, value):
        """Put value under name in registry (and the instance dict), removing it elsewhere."""
        registries = self._registries(name)
        if any(name in r and r[name] is not value for r in registries):
            _trace.changed()   # compiled calls hold the one replaced: they record again
        for other in registries:
            if other is not registry:
                other.pop(name, None)
        if registry is not self._buffers:
            self._non_persistent_buffers.discard(name)
        registry[name] = value
        self.__dict__[name] = value

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            self._register(self._registries(name)[0], name, value)
        elif isinstance(value, Module):
            self._register(self._registries(name)[2], name, value)
        elif name in d.get("_parameters", ()):
            if value is not None:
                raise TypeError("cannot assign '%s' as parameter '%s' (nn.Parameter or None expected)"
                                % (type(value).__name__, name))
            self._register(d["_parameters"], name, None)
        elif name in d.get("_modules", ()):
            if value is not None:
                raise TypeError("cannot assign '%s' as child module '%s' (nn.Module or None expected)"
                                % (type(value).__name__, name))
            self._register(d["_modules"], name, None)
        elif name in d.get("_buffers", ()):
            self._register(d["_buffers"], name, _root_tensor(value, "buffer '%s'" % name))
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                _trace.changed()
                del registry[name]
                self._non_persistent_buffers.discard(name)
                self.__dict__.pop(name, None)
                return
        object.__delattr__(self, name)

    def _check_name(self, name, kind):
        if not isinstance(name, str):
            raise TypeError("%s name must be a str, not %s" % (kind, type(name).__name__))
        if not name or "." in name:
            raise KeyError('%s name can\'t be empty or contain ".", got %r' % (kind, name))
        if name in self.__dict__ and name not in self._parameters and name not in self._buffers \
                and name not in self._modules:
            raise KeyError("attribute '%s' already exists" % name)

    def register_parameter(self, name, param):
        """Add a parameter (a Parameter, or None for an absent one such as bias=False)."""
        self._registries(name)
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError("cannot assign '%s' as parameter '%s' (nn.Parameter or None expected)"
                            % (type(param).__name__, name))
        self._register(self._parameters, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """Add a tensor that is module state but not a parameter (saved in state_dict
        unless persistent=False). A tensor made inside a scope is kept as a root copy."""
        self._registries(name)
        self._check_name(name, "buffer")
        self._register(self._buffers, name, _root_tensor(tensor, "buffer '%s'" % name))
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        """Add a child module (or None)."""
        self._registries(name)
        self._check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError("%s is not a Module subclass" % type(module).__name__)
        self._register(self._modules, name, module)

    register_module = add_module

    # ---- traversal ---------------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) for this module and every module below it, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name,
                                            remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, registry, prefix, recurse, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[Tuple[str, "Parameter"]]:
        """(dotted name, Parameter) in registration order, each shared parameter once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator["Parameter"]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def get_submodule(self, target=""):
        """The module at dotted path target ("" is self); AttributeError naming the missing part."""
        if not isinstance(target, str):
            raise TypeError("get_submodule: target must be a str, not %s" % type(target).__name__)
        module = self
        if target == "":
            return module
        for part in target.split("."):
            child = module._modules.get(part) if isinstance(module, Module) else None
            if child is None:
                raise AttributeError("%s has no attribute `%s`" % (type(module).__name__, part))
            module = child
        return module

    def _get_member(self, target, registry, kind):
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        members = getattr(module, registry)
        if name not in members:
            raise AttributeError("%s has no %s `%s`" % (type(module).__name__, kind, name))
        return members[name]

    def get_parameter(self, target):
        """The parameter at dotted path target ("layer.0.weight")."""
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target):
        """The buffer at dotted path target ("bn.running_mean")."""
        return self._get_member(target, "_buffers", "buffer")

    def apply(self, fn):
        """Call fn on every submodule, then on self (for custom initialisation)."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- devices, dtypes and sharing ---------------------------------------

    def to(self, *args, **kwargs):
        """PyTorch's Module.to for what aicraft has: a device ("cpu", "cuda", "cuda:1", a
        device), the dtype float32, or a tensor (its device and dtype); returns self.
        Parameters and buffers move to the device in place (the same Tensor objects,
        so make the optimizer after, or before: it holds those objects; grads are
        dropped). Any other device or dtype raises, rather than leaving the module
        where it was unnoticed."""
        unknown = set(kwargs) - {"device", "dtype", "non_blocking", "memory_format", "copy"}
        if unknown:
            raise TypeError("Module.to() got an unexpected keyword argument %r" % sorted(unknown)[0])
        if len(args) > 3:
            raise TypeError("Module.to() takes at most 3 positional arguments, got %d" % len(args))
        device = None
        for arg in list(args) + [kwargs.get("device"), kwargs.get("dtype")]:
            if arg is None or isinstance(arg, bool):   # None, or non_blocking given positionally
                continue
            if isinstance(arg, Tensor):
                device, arg = arg.device, arg.dtype
            if isinstance(arg, (str, dtypes.device)):
                device = dtypes.checked_device(arg, "Module.to")
            elif dtypes.checked(arg, "Module.to") is not dtypes.float32:
                raise TypeError("Module.to(): aicraft modules hold float32 only, not %s" % (arg,))
        if device is not None:
            for module in self.modules():
                for registry in (module._parameters, module._buffers):
                    for t in registry.values():
                        if t is not None and t.device != device:
                            t._move_(device)
                            _trace.changed()   # a new AcTensor under the same Tensor
        return self

    def cuda(self, device=None):
        """self.to("cuda") (or the given device)."""
        return self.to(dtypes.device("cuda") if device is None else device)

    def cpu(self):
        """self.to("cpu")."""
        return self.to(dtypes.CPU)

    def float(self):
        """Returns self: parameters are already float32."""
        return self

    def _refuse_dtype(self, name):
        raise TypeError("Module.%s(): aicraft modules hold float32 parameters only; %s is not "
                        "supported (keep the model in float32)" % (name, name))

    def double(self):
        """Refused: aicraft computes in float32 (TypeError, never a silent float32 model)."""
        self._refuse_dtype("double")

    def half(self):
        """Refused: aicraft computes in float32."""
        self._refuse_dtype("half")

    def bfloat16(self):
        """Refused: aicraft computes in float32."""
        self._refuse_dtype("bfloat16")

    def type(self, dst_type):
        """self for float32 (or "aicraft.FloatTensor"); any other type raises TypeError."""
        if dst_type in (dtypes.float32, "aicraft.FloatTensor", "torch.FloatTensor"):
            return self
        raise TypeError("Module.type(): aicraft modules hold float32 parameters only, not %r" % (dst_type,))

    def share_memory(self):
        """Put every parameter and buffer in shared memory (see aicraft.multiprocessing),
        so processes this one forks or spawns update the same values; returns self."""
        from aicraft._shared import share_module_memory
        return share_module_memory(self)

    # ---- modes and gradients -----------------------------------------------

    def train(self: M, mode: bool = True) -> M:
        """Set training mode (Dropout, BatchNorm) here and below; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            module.__dict__["training"] = mode
        return self

    def eval(self: M) -> M:
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's .grad (set_to_none) or fill it with zeros."""
        for param in self.parameters():
            p = _live(param)
            if set_to_none:
                lib.ac_tensor_zero_grad(p)
            elif p.grad:
                lib.ac_tensor_fill_(p.grad, 0.0)

    # ---- state -------------------------------------------------------------

    def state_dict(self, *, destination: Any = None, prefix: str = "",
                   keep_vars: bool = False) -> Dict[str, Tensor]:
        """Parameters and persistent buffers by dotted name (this module's own first,
        then each child's). Values share memory with the module (detached unless
        keep_vars)."""
        if destination is None:
            destination = OrderedDict()
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> Any:
        """Copy values from state_dict into the parameters and buffers, in place.

        Every key and shape is checked before anything is copied. A shape
        mismatch raises; so do missing or unexpected keys when strict. Returns
        (missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError("load_state_dict: expected a mapping, got %s" % type(state_dict).__name__)
        own = self.state_dict(keep_vars=True)
        missing = [key for key in own if key not in state_dict]
        unexpected = [key for key in state_dict.keys() if key not in own]
        errors, copies = [], []
        for key, dst in own.items():
            if key not in state_dict:
                continue
            src = _as_tensor(state_dict[key], key)
            src_shape, dst_shape = _shape_of(_live(src)), _shape_of(_live(dst))
            if src_shape != dst_shape:
                errors.append("size mismatch for %s: copying a param with shape %s from checkpoint, "
                              "the shape in current model is %s." % (key, src_shape, dst_shape))
            elif dst.dtype is dtypes.int8 and src.dtype is not dtypes.int8:
                # quantized weights: converting floats to int8 would not give their values
                errors.append("dtype mismatch for %s: copying a %s tensor from checkpoint into the "
                              "int8 one in current model." % (key, src.dtype.name))
            copies.append((dst, src))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: %s. "
                              % ", ".join('"%s"' % k for k in unexpected))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: %s. "
                              % ", ".join('"%s"' % k for k in missing))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for %s:\n\t%s"
                               % (type(self).__name__, "\n\t".join(errors)))
        for dst, src in copies:
            if lib.ac_tensor_copy_(dst._ptr, src._ptr) < 0:
                raise_error(dst, src)
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing ----------------------------------------------------------

    def extra_repr(self):
        """The text inside this module's parentheses in repr (layers override it)."""
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines.extend(extra.split("\n"))
        for name, module in self._modules.items():
            lines.append("(%s): %s" % (name, _addindent(repr(module), 2)))
        name = type(self).__name__
        if not lines:
            return name + "()"
        if len(lines) == 1 and not self._modules:
            return "%s(%s)" % (name, lines[0])
        return name + "(\n  " + "\n  ".join(lines) + "\n)"


def _as_tensor(value, key):
    """A state_dict value (a Tensor or a NumPy array) as a Tensor."""
    if isinstance(value, Tensor):
        return value
    if _is_numpy(value, "ndarray"):
        from aicraft.creation import from_numpy
        return from_numpy(value)
    raise TypeError("load_state_dict: value for %r must be a Tensor or a NumPy array, not %s"
                    % (key, type(value).__name__))
