"""packed.py - Linear layers for inference whose weights libac packs once for its
GEMM (ac_packed_linear_*), where nn.Linear packs them on every forward: at 32 rows
of 784 inputs and 128 outputs that packing is a fifth of nn.Linear's time. Every
batch size sums each output in the same order, so each row has the same bits whatever
rows come with it (a service that joins requests into batches answers each as it
would alone); they are nn.Linear's bits from five rows on, and its values to
rounding below (nn.Linear sums a few rows in another order).

    served = ac.nn.packed.pack_linear(model)   # a copy; model stays as it is
    with ac.no_grad():
        y = served(x)

A packed layer holds a copy of its float layer's weight (as panels: about as many
bytes) and bias, made when it is made: training or loading the float model later
does not reach it (pack again). It has no parameters or buffers and does not train:
its input may not require grad while grad mode is on. CPU only.

An nn.Linear directly followed by an nn.ReLU in an nn.Sequential becomes one
LinearReLU (PyTorch's name for the fused module), whose GEMM applies the ReLU as it
stores the output, where it adds the bias: no pass of its own over the output, and
the bits of a packed Linear followed by ac.relu. The ReLU's place holds an
nn.Identity, as torch.ao.quantization.fuse_modules leaves it, so the indices and
state_dict keys of the other modules stay as they were.
"""
import copy

from aicraft._ffi import ffi, lib
from aicraft.errors import raise_error
from aicraft._wrapping import _wrap
from aicraft.nn import layers
from aicraft.nn.module import Module
from aicraft.tensor import Tensor

__all__ = ["Linear", "LinearReLU", "pack_linear"]


class Linear(Module):
    """y = x W^T + b, nn.Linear's forward, from a copy of W packed once: each row the
    same bits in a batch of any size. Made from a float nn.Linear by from_float (or
    pack_linear)."""

    _activation = lib.AC_ACTIVATION_NONE

    def __init__(self, weight, bias=None):
        """A packed copy of weight (out_features, in_features) and bias (out_features,)."""
        super().__init__()
        for name, t in (("weight", weight), ("bias", bias)):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("packed %s: %s must be a Tensor, not %s"
                                % (type(self).__name__, name, type(t).__name__))
        p = lib.ac_packed_linear_new(weight._ptr, ffi.NULL if bias is None else bias._ptr,
                                     self._activation)
        if not p:
            raise_error(weight, bias)
        self.__dict__["_packed"] = ffi.gc(p, lib.ac_packed_linear_free)
        self.in_features = lib.ac_packed_linear_in_features(p)
        self.out_features = lib.ac_packed_linear_out_features(p)

    @classmethod
    def from_float(cls, mod):
        """The packed copy of a float nn.Linear."""
        if type(mod) is not layers.Linear:
            raise TypeError("packed %s.from_float: expected an nn.Linear, not %s"
                            % (cls.__name__, type(mod).__name__))
        return cls(mod.weight, mod.bias)

    def __deepcopy__(self, memo):
        """A copy sharing the packed block, which nothing changes."""
        copied = memo[id(self)] = type(self).__new__(type(self))
        for key, value in self.__dict__.items():
            copied.__dict__[key] = value if key == "_packed" else copy.deepcopy(value, memo)
        return copied

    def nbytes(self):
        """The bytes of the packed block: the weight's panels and the bias."""
        return lib.ac_packed_linear_nbytes(self._packed)

    def forward(self, input):
        try:
            p = lib.ac_packed_linear_forward(self._packed, input._ptr)
        except AttributeError:
            raise layers._not_a_tensor(self, input) from None
        if not p:
            raise_error(input)
        return _wrap(p)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s, packed" % (
            self.in_features, self.out_features, bool(lib.ac_packed_linear_has_bias(self._packed)))


class LinearReLU(Linear):
    """y = relu(x W^T + b): a packed Linear followed by ReLU, one GEMM that applies
    the ReLU as it stores the output (the bits of the packed Linear and then ac.relu).
    Made from the float nn.Linear by from_float, or by pack_linear from an nn.Linear
    directly followed by an nn.ReLU in an nn.Sequential."""

    _activation = lib.AC_ACTIVATION_RELU


def pack_linear(model, inplace=False):
    """model with each nn.Linear in it (or model itself, if it is one) replaced by a
    packed Linear: for inference, as ac.quantization.quantize_dynamic but in float32.
    An nn.Linear directly followed by an nn.ReLU in an nn.Sequential (anywhere in the
    model) becomes one packed LinearReLU, and the ReLU an nn.Identity, as
    torch.ao.quantization.fuse_modules fuses them: the other modules keep their
    indices and state_dict keys. A ReLU after anything else stays as it is.
    A copy unless inplace (packing in place drops the float weights)."""
    if not isinstance(model, Module):
        raise TypeError("pack_linear: model must be an nn.Module, not %s" % type(model).__name__)
    if type(model) is layers.Linear:
        return Linear.from_float(model)
    if not inplace:
        model = copy.deepcopy(model)
    for module in list(model.modules()):
        children = list(module._modules.items())
        for index, (name, child) in enumerate(children):
            if type(child) is not layers.Linear:
                continue
            # only a Sequential runs its children in order, each on the one before's output
            after = children[index + 1] if index + 1 < len(children) else (None, None)
            if type(module) is layers.Sequential and type(after[1]) is layers.ReLU:
                setattr(module, name, LinearReLU.from_float(child))
                setattr(module, after[0], layers.Identity())
            else:
                setattr(module, name, Linear.from_float(child))
    return model
