"""dynamic.py - the dynamically quantized layers: Linear, LSTM and GRU with int8
weights (symmetric, one float32 scale per output row) whose inputs are quantized
per row at run time and multiplied in exact int32 by libac (ac_qlinear_*,
ac_qlstm, ac_qgru). Biases stay float32. Inference only: they run under
ac.no_grad() and have no parameters.

Each projection is one packed C block; the layer's buffers are views of it, so
state_dict() shares its memory (the int8 `weight`, its `weight_scale` and the
`bias`; an LSTM's `weight_ih_l0`, `weight_ih_l0_scale`, ...), and
load_state_dict() writes into it. ac.save stores them as safetensors I8 and F32.
"""
from aicraft import dtypes
from aicraft._args import _as_int
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live, _wrap
from aicraft.creation import zeros
from aicraft.errors import raise_error
from aicraft.nn import layers, rnn
from aicraft.nn.module import Module
from aicraft.tensor import Tensor

__all__ = ["Linear", "LSTM", "GRU"]

_NULL = ffi.NULL


def _pack(weight, bias):
    """The packed block of a float weight (out, in) and bias (or None), owned by Python."""
    q = lib.ac_qlinear_pack(_live(weight), _NULL if bias is None else _live(bias))
    if not q:
        raise_error(weight, bias)
    return ffi.gc(q, lib.ac_qlinear_free)


def _view(fn, q):
    p = fn(q)
    if not p:
        raise_error()
    return _wrap(p)


def _register_views(module, q, weight, scale, bias):
    """The block's weight, scales and bias (None when it has none) as buffers of module."""
    module.register_buffer(weight, _view(lib.ac_qlinear_weight, q))
    module.register_buffer(scale, _view(lib.ac_qlinear_scale, q))
    module.register_buffer(bias, _view(lib.ac_qlinear_bias, q) if lib.ac_qlinear_has_bias(q) else None)


def _inference_only(module):
    if lib.ac_is_grad_enabled():
        raise RuntimeError("%s (quantized, dynamic): runs under ac.no_grad() only; its int8 weights "
                           "cannot be trained" % type(module).__name__)


class Linear(Module):
    """y = x W^T + b with W in int8 (one scale per output row) and x quantized per row
    at run time: torch.ao.nn.quantized.dynamic.Linear. Make one from a float layer
    with from_float (or ac.quantization.quantize_dynamic)."""

    def __init__(self, in_features, out_features, bias_=True, dtype=dtypes.qint8):
        """Zero weights (load a quantized state_dict into it), made without float ones."""
        super().__init__()
        if dtype is not dtypes.qint8:
            raise ValueError("quantized Linear: dtype must be aicraft.qint8, not %r" % (dtype,))
        in_features = _as_int(in_features, "quantized Linear: in_features")
        out_features = _as_int(out_features, "quantized Linear: out_features")
        if in_features < 0 or out_features < 0:
            raise ValueError("quantized Linear: in_features and out_features must be >= 0, got %d "
                             "and %d" % (in_features, out_features))
        weight, scale = zeros(out_features, in_features, dtype=dtypes.int8), zeros(out_features)
        bias = zeros(out_features) if bias_ else None
        q = lib.ac_qlinear_new(weight._ptr, scale._ptr, _NULL if bias is None else bias._ptr)
        if not q:
            raise_error()
        self._set_packed(in_features, out_features, ffi.gc(q, lib.ac_qlinear_free))

    def _set_packed(self, in_features, out_features, q):
        self.in_features, self.out_features = in_features, out_features
        self.__dict__["_packed"] = q
        _register_views(self, q, "weight", "weight_scale", "bias")

    @classmethod
    def from_float(cls, mod):
        """The quantized copy of a float nn.Linear."""
        if type(mod) is not layers.Linear:
            raise TypeError("quantized Linear.from_float: expected an nn.Linear, not %s"
                            % type(mod).__name__)
        self = cls.__new__(cls)
        Module.__init__(self)
        self._set_packed(mod.in_features, mod.out_features, _pack(mod.weight, mod.bias))
        return self

    def _blocks(self):
        return [self._packed]

    def __deepcopy__(self, memo):
        """A copy with a packed block of its own."""
        copy = Linear(self.in_features, self.out_features, self.bias is not None)
        copy.load_state_dict(self.state_dict())
        copy.train(self.training)
        return copy

    def forward(self, input):
        _inference_only(self)
        if not isinstance(input, Tensor):
            raise TypeError("quantized Linear: input must be a Tensor, not %s" % type(input).__name__)
        p = lib.ac_qlinear_forward(self._packed, _live(input))
        if not p:
            raise_error(input)
        return _wrap(p)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, dtype=aicraft.qint8" % (
            self.in_features, self.out_features)


class _QuantizedRNN:
    """What the quantized LSTM and GRU add to their float classes: packed blocks for each
    layer and direction in place of parameters, and the int8 C layer."""

    def __init__(self, *args, dtype=dtypes.qint8, **kwargs):
        if dtype is not dtypes.qint8:
            raise ValueError("quantized %s: dtype must be aicraft.qint8, not %r" % (self._mode, dtype))
        self._pack_from(self._float_class(*args, **kwargs))

    def _pack_from(self, mod):
        Module.__init__(self)
        for key, value in mod.__dict__.items():     # sizes and flags, not the registries
            if not key.startswith("_") or key in ("_directions", "_layer_weights"):
                if not isinstance(value, Tensor):
                    self.__dict__[key] = value
        blocks = []
        for suffix in mod._layer_weights:
            w_ih, w_hh, b_ih, b_hh = mod._weights(suffix)
            pair = (_pack(w_ih, b_ih), _pack(w_hh, b_hh))
            for q, name in zip(pair, ("ih", "hh")):
                _register_views(self, q, "weight_%s%s" % (name, suffix),
                                "weight_%s%s_scale" % (name, suffix), "bias_%s%s" % (name, suffix))
            blocks.append(pair)
        self.__dict__["_packed"] = blocks

    @classmethod
    def from_float(cls, mod):
        """The quantized copy of a float nn.LSTM / nn.GRU."""
        if type(mod) is not cls._float_class:
            raise TypeError("quantized %s.from_float: expected an nn.%s, not %s"
                            % (cls._mode, cls._mode, type(mod).__name__))
        self = cls.__new__(cls)
        self._pack_from(mod)
        return self

    def _blocks(self):
        return [q for pair in self._packed for q in pair]

    def __deepcopy__(self, memo):
        """A copy with packed blocks of its own."""
        copy = self.from_float(self._float_class(
            self.input_size, self.hidden_size, self.num_layers, self.bias, self.batch_first,
            self.dropout, self.bidirectional))
        copy.load_state_dict(self.state_dict())
        copy.train(self.training)
        return copy

    def _layer(self, x, h0, c0, k, direction):
        ih, hh = self._packed[k]
        h_n = ffi.new("AcTensor **")
        bf = 1 if self.batch_first else 0
        h0p = _NULL if h0 is None else _live(h0)
        if self._gates == 4:
            c_n = ffi.new("AcTensor **")
            p = lib.ac_qlstm(_live(x), h0p, _NULL if c0 is None else _live(c0), ih, hh, bf,
                             direction, h_n, c_n)
        else:
            c_n = None
            p = lib.ac_qgru(_live(x), h0p, ih, hh, bf, direction, h_n)
        if not p:
            raise_error(x, h0, c0)
        return _wrap(p), _wrap(h_n[0]), (_wrap(c_n[0]) if c_n is not None else None)

    def forward(self, input, hx=None):
        _inference_only(self)
        return super().forward(input, hx)

    def extra_repr(self):
        return super().extra_repr() + ", dtype=aicraft.qint8"


class LSTM(_QuantizedRNN, rnn.LSTM):
    """An LSTM with int8 weights: torch.ao.nn.quantized.dynamic.LSTM. Same arguments,
    shapes and outputs as nn.LSTM."""

    _float_class = rnn.LSTM


class GRU(_QuantizedRNN, rnn.GRU):
    """A GRU with int8 weights: torch.ao.nn.quantized.dynamic.GRU. Same arguments,
    shapes and outputs as nn.GRU."""

    _float_class = rnn.GRU
