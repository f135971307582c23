"""rnn.py - sequence layers: nn.Embedding, nn.RNN, nn.LSTM, nn.GRU, nn.RNNCell,
nn.LSTMCell, nn.GRUCell, and the functional `embedding`.

Parameter names, shapes, initialisation and gate order are PyTorch's
(`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`, `..._reverse`), so a
state_dict saved from PyTorch loads and gives the same outputs. Each layer and
direction is one C call (ac_rnn_tanh / ac_rnn_relu / ac_lstm / ac_gru: one GEMM for the input projection of
all steps, then one GEMM and one fused gate loop per step); this module only
stacks layers, joins directions and shapes the states.
"""
import math

from aicraft._args import _as_int, _is_numpy
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live, _wrap
from aicraft.autograd import no_grad
from aicraft.creation import cat, stack, tensor, zeros
from aicraft.errors import ShapeError, raise_error
from aicraft.nn import init
from aicraft.nn.module import Module, Parameter, factory_kwargs
from aicraft.tensor import Tensor

__all__ = ["Embedding", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "embedding"]

_NULL = ffi.NULL


def _unsupported(what, arg):
    raise NotImplementedError("%s: %s is not supported by aicraft" % (what, arg))


def _ids(input, fn):
    """Class ids as a Tensor (floats holding integers); NumPy arrays and lists are copied."""
    if isinstance(input, Tensor):
        return input
    if isinstance(input, (list, tuple)) or _is_numpy(input, "ndarray"):
        return tensor(input)
    raise TypeError("%s: input must be a Tensor of ids, not %s" % (fn, type(input).__name__))


def _padding_index(padding_idx, num_embeddings, fn):
    """padding_idx as C wants it: a row in [0, num), or -1 for none (negatives count from the end)."""
    if padding_idx is None:
        return -1
    index = _as_int(padding_idx, fn + ": padding_idx")
    if not -num_embeddings <= index < num_embeddings:
        raise ValueError("%s: padding_idx %d must be within num_embeddings (%d)"
                         % (fn, index, num_embeddings))
    return index % num_embeddings


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of weight (num, dim) picked by the ids in input (any shape): (..., dim).

    The row padding_idx gets no gradient. Ids must be integers in [0, num)."""
    if max_norm is not None:
        _unsupported("embedding", "max_norm")
    if scale_grad_by_freq or sparse:
        _unsupported("embedding", "scale_grad_by_freq" if scale_grad_by_freq else "sparse")
    ids = _ids(input, "embedding")
    if not isinstance(weight, Tensor):
        raise TypeError("embedding: weight must be a Tensor, not %s" % type(weight).__name__)
    num = weight.shape[0] if weight.ndim else 0
    p = lib.ac_embedding(_live(ids), _live(weight), _padding_index(padding_idx, num, "embedding"))
    if p:
        return _wrap(p)
    raise_error(ids, weight)


class Embedding(Module):
    """A lookup table of num_embeddings vectors of size embedding_dim, initialised N(0, 1)
    (the padding_idx row, if any, zero and never updated)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        if max_norm is not None:
            _unsupported("Embedding", "max_norm")
        if scale_grad_by_freq or sparse:
            _unsupported("Embedding", "scale_grad_by_freq" if scale_grad_by_freq else "sparse")
        self.num_embeddings = _as_int(num_embeddings, "Embedding: num_embeddings")
        self.embedding_dim = _as_int(embedding_dim, "Embedding: embedding_dim")
        if self.num_embeddings < 0 or self.embedding_dim < 0:
            raise ValueError("Embedding: num_embeddings and embedding_dim must be >= 0, got %d and %d"
                             % (self.num_embeddings, self.embedding_dim))
        self.padding_idx = None if padding_idx is None else \
            _padding_index(padding_idx, self.num_embeddings, "Embedding")
        if _weight is None:
            self.weight = Parameter(zeros(self.num_embeddings, self.embedding_dim),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (self.num_embeddings, self.embedding_dim):
                raise ShapeError("Embedding: _weight %s does not match (%d, %d)"
                                 % (tuple(_weight.shape), self.num_embeddings, self.embedding_dim))
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            values = self.weight.numpy()
            values[self.padding_idx] = 0.0
            with no_grad():
                self.weight.copy_(tensor(values))

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding holding a copy of embeddings (num, dim); frozen unless freeze=False."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            raise ValueError("Embedding.from_pretrained: embeddings must be a 2-d Tensor")
        num, dim = embeddings.shape
        return cls(num, dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings.detach().clone(), _freeze=freeze)

    def forward(self, input):
        ids = _ids(input, "Embedding")   # held here: a copy made from NumPy must outlive the call
        p = lib.ac_embedding(_live(ids), self.weight._ptr,
                             -1 if self.padding_idx is None else self.padding_idx)
        if p:
            return _wrap(p)
        raise_error(ids, self.weight)

    def extra_repr(self):
        text = "%d, %d" % (self.num_embeddings, self.embedding_dim)
        return text if self.padding_idx is None else text + ", padding_idx=%d" % self.padding_idx


# ---- recurrent layers -------------------------------------------------------------

def _run_layer(c_fn, is_lstm, x, h0, c0, weights, batch_first, reverse):
    """One layer in one direction: (output, h_n, c_n or None), wrapped."""
    w_ih, w_hh, b_ih, b_hh = weights
    h_n = ffi.new("AcTensor **")
    args = [_live(x), _NULL if h0 is None else _live(h0)]
    if is_lstm:
        args.append(_NULL if c0 is None else _live(c0))
    args += [w_ih._ptr, w_hh._ptr, _NULL if b_ih is None else b_ih._ptr,
             _NULL if b_hh is None else b_hh._ptr, 1 if batch_first else 0, 1 if reverse else 0,
             h_n]
    c_n = ffi.new("AcTensor **") if is_lstm else None
    if is_lstm:
        args.append(c_n)
    p = c_fn(*args)
    if not p:
        raise_error(x, h0, c0, *weights)
    return _wrap(p), _wrap(h_n[0]), (_wrap(c_n[0]) if is_lstm else None)


def _plain_rnn_fn(nonlinearity, what):
    """The C layer function of a plain RNN with nonlinearity 'tanh' or 'relu'."""
    if nonlinearity == "tanh":
        return lib.ac_rnn_tanh
    if nonlinearity == "relu":
        return lib.ac_rnn_relu
    raise ValueError("%s: unknown nonlinearity %r (expected 'tanh' or 'relu')" % (what, nonlinearity))


class _RNNBase(Module):
    """What RNN, LSTM and GRU share: parameters per layer and direction, the state checks,
    and the walk over layers (with dropout on the outputs of all but the last layer
    while training, as PyTorch's)."""

    _mode = None      # "RNN", "LSTM" or "GRU"
    _gates = 0
    _c_fn = None

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = self._mode
        self.input_size = _as_int(input_size, name + ": input_size")
        self.hidden_size = _as_int(hidden_size, name + ": hidden_size")
        self.num_layers = _as_int(num_layers, name + ": num_layers")
        if self.input_size < 0 or self.hidden_size <= 0 or self.num_layers <= 0:
            raise ValueError("%s: input_size must be >= 0, hidden_size and num_layers > 0, got %d, %d "
                             "and %d" % (name, self.input_size, self.hidden_size, self.num_layers))
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("%s: dropout should be a number in [0, 1], got %r" % (name, dropout))
        if proj_size:
            _unsupported(name, "proj_size")
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.proj_size = 0
        self._directions = 2 if self.bidirectional else 1
        gate_rows = self._gates * self.hidden_size
        self._layer_weights = []
        for layer in range(self.num_layers):
            layer_input = self.input_size if layer == 0 else self.hidden_size * self._directions
            for direction in range(self._directions):
                suffix = "_l%d%s" % (layer, "_reverse" if direction else "")
                shapes = (("weight_ih", (gate_rows, layer_input)), ("weight_hh", (gate_rows, self.hidden_size)))
                if self.bias:
                    shapes += (("bias_ih", (gate_rows,)), ("bias_hh", (gate_rows,)))
                for prefix, shape in shapes:
                    setattr(self, prefix + suffix, Parameter(zeros(*shape)))
                self._layer_weights.append(suffix)
        self.reset_parameters()
        factory_kwargs(self, device, dtype)

    def flatten_parameters(self):
        """Nothing to do (torch packs cuDNN's weights here; aicraft's are used as they are)."""

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for param in self.parameters():
            init.uniform_(param, -bound, bound)

    def _weights(self, suffix):
        d = self.__dict__
        if self.bias:
            return d["weight_ih" + suffix], d["weight_hh" + suffix], d["bias_ih" + suffix], \
                d["bias_hh" + suffix]
        return d["weight_ih" + suffix], d["weight_hh" + suffix], None, None

    def _check_state(self, state, what, batch, unbatched):
        """state (layers * directions, batch, hidden), or 2-d for an unbatched input."""
        if not isinstance(state, Tensor):
            raise TypeError("%s: %s must be a Tensor, not %s" % (self._mode, what, type(state).__name__))
        expected = (self.num_layers * self._directions, self.hidden_size) if unbatched else \
            (self.num_layers * self._directions, batch, self.hidden_size)
        if tuple(state.shape) != expected:
            raise ShapeError("%s: %s %s must be (num_layers * num_directions, %shidden_size) = %s"
                             % (self._mode.lower(), what, tuple(state.shape),
                                "" if unbatched else "batch, ", expected))
        return state.unsqueeze(1) if unbatched else state

    def _states(self, input, hx):
        """(x, h0, c0, unbatched) with x 3-d and the states 3-d or None."""
        if not isinstance(input, Tensor):
            raise TypeError("%s: input must be a Tensor, not %s" % (self._mode, type(input).__name__))
        if input.ndim not in (2, 3):
            raise ShapeError("%s: input %s must be 3-d (%s) or 2-d (seq, features) unbatched"
                             % (self._mode.lower(), tuple(input.shape),
                                "batch, seq, features" if self.batch_first else "seq, batch, features"))
        unbatched = input.ndim == 2
        x = input.unsqueeze(0 if self.batch_first else 1) if unbatched else input
        batch = x.shape[0 if self.batch_first else 1]
        h0 = c0 = None
        if hx is not None:
            if self._gates == 4:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError("LSTM: hx must be a tuple (h0, c0)")
                h0 = self._check_state(hx[0], "h0", batch, unbatched)
                c0 = self._check_state(hx[1], "c0", batch, unbatched)
            else:
                h0 = self._check_state(hx, "h0", batch, unbatched)
        return x, h0, c0, unbatched

    def _layer(self, x, h0, c0, k, direction):
        """Layer-direction k on x: (output, h_n, c_n or None)."""
        return _run_layer(self._c_fn, self._gates == 4, x, h0, c0,
                          self._weights(self._layer_weights[k]), self.batch_first, direction)

    def _run(self, input, hx):
        """(output, h_n, c_n or None) over every layer and direction."""
        x, h0, c0, unbatched = self._states(input, hx)
        is_lstm = self._gates == 4
        finals_h, finals_c = [], []
        k = 0
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self._directions):
                out, h_n, c_n = self._layer(x, None if h0 is None else h0[k],
                                            None if c0 is None else c0[k], k, direction)
                outputs.append(out)
                finals_h.append(h_n)
                finals_c.append(c_n)
                k += 1
            x = outputs[0] if len(outputs) == 1 else cat(outputs, 2)
            if self.dropout and self.training and layer + 1 < self.num_layers:
                p = lib.ac_dropout(x._ptr, self.dropout, 1)
                if not p:
                    raise_error(x)
                x = _wrap(p)
        h_n = finals_h[0].unsqueeze(0) if len(finals_h) == 1 else stack(finals_h, 0)
        c_n = None
        if is_lstm:
            c_n = finals_c[0].unsqueeze(0) if len(finals_c) == 1 else stack(finals_c, 0)
        if unbatched:
            x = x.squeeze(0 if self.batch_first else 1)
            h_n = h_n.squeeze(1)
            c_n = None if c_n is None else c_n.squeeze(1)
        return x, h_n, c_n

    def extra_repr(self):
        text = "%d, %d" % (self.input_size, self.hidden_size)
        if self.num_layers != 1:
            text += ", num_layers=%d" % self.num_layers
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += ", dropout=%g" % self.dropout
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


class RNN(_RNNBase):
    """A multi-layer Elman RNN: h' = tanh(W_ih x + b_ih + W_hh h + b_hh), or relu with
    nonlinearity='relu'.

    forward(input, h0=None) -> output, h_n, with LSTM's shapes."""

    _mode = "RNN"
    _gates = 1

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        c_fn = _plain_rnn_fn(nonlinearity, "RNN")
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity
        self._c_fn = c_fn

    def forward(self, input, hx=None):
        output, h_n, _ = self._run(input, hx)
        return output, h_n

    def extra_repr(self):
        text = _RNNBase.extra_repr(self)
        return text + ", nonlinearity='relu'" if self.nonlinearity == "relu" else text


class LSTM(_RNNBase):
    """A multi-layer LSTM (PyTorch's equations, gate order i, f, g, o).

    forward(input, (h0, c0)=None) -> output, (h_n, c_n): input (seq, batch, input_size),
    or (batch, seq, input_size) with batch_first, or (seq, input_size) unbatched;
    states (num_layers * num_directions, batch, hidden_size)."""

    _mode = "LSTM"
    _gates = 4
    _c_fn = staticmethod(lib.ac_lstm)

    def forward(self, input, hx=None):
        output, h_n, c_n = self._run(input, hx)
        return output, (h_n, c_n)


class GRU(_RNNBase):
    """A multi-layer GRU (PyTorch's equations, gate order r, z, n).

    forward(input, h0=None) -> output, h_n, with LSTM's shapes."""

    _mode = "GRU"
    _gates = 3
    _c_fn = staticmethod(lib.ac_gru)

    def forward(self, input, hx=None):
        output, h_n, _ = self._run(input, hx)
        return output, h_n


class _CellBase(Module):
    """One step of a recurrent layer: the layer op run over a sequence of length 1."""

    _mode = None
    _gates = 0
    _c_fn = None

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        name = self._mode
        self.input_size = _as_int(input_size, name + ": input_size")
        self.hidden_size = _as_int(hidden_size, name + ": hidden_size")
        if self.input_size < 0 or self.hidden_size <= 0:
            raise ValueError("%s: input_size must be >= 0 and hidden_size > 0, got %d and %d"
                             % (name, self.input_size, self.hidden_size))
        self.bias = bool(bias)
        rows = self._gates * self.hidden_size
        self.weight_ih = Parameter(zeros(rows, self.input_size))
        self.weight_hh = Parameter(zeros(rows, self.hidden_size))
        if self.bias:
            self.bias_ih = Parameter(zeros(rows))
            self.bias_hh = Parameter(zeros(rows))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for param in self.parameters():
            init.uniform_(param, -bound, bound)

    def _check(self, input, state, what):
        if not isinstance(input, Tensor):
            raise TypeError("%s: input must be a Tensor, not %s" % (self._mode, type(input).__name__))
        if input.ndim not in (1, 2):
            raise ShapeError("%s: input %s must be (batch, input_size) or (input_size,)"
                             % (self._mode, tuple(input.shape)))
        if state is None:
            return
        if not isinstance(state, Tensor):
            raise TypeError("%s: %s must be a Tensor, not %s" % (self._mode, what, type(state).__name__))
        if state.ndim != input.ndim:
            raise ShapeError("%s: %s %s must be %d-d like input %s"
                             % (self._mode, what, tuple(state.shape), input.ndim, tuple(input.shape)))

    def _step(self, input, h, c):
        """(h', c' or None) for input (B, I) or (I,) and states of the same batching."""
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        if unbatched:
            h = None if h is None else h.unsqueeze(0)
            c = None if c is None else c.unsqueeze(0)
        weights = (self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        _, h_n, c_n = _run_layer(self._c_fn, self._gates == 4, x.unsqueeze(0), h, c, weights,
                                 False, False)
        if unbatched:
            h_n = h_n.squeeze(0)
            c_n = None if c_n is None else c_n.squeeze(0)
        return h_n, c_n

    def extra_repr(self):
        return "%d, %d%s" % (self.input_size, self.hidden_size, "" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """One Elman RNN step: forward(input, h=None) -> h' = tanh (or relu) of
    W_ih x + b_ih + W_hh h + b_hh."""

    _mode = "RNNCell"
    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        c_fn = _plain_rnn_fn(nonlinearity, "RNNCell")
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity
        self._c_fn = c_fn

    def forward(self, input, hx=None):
        self._check(input, hx, "h")
        return self._step(input, hx, None)[0]

    def extra_repr(self):
        text = _CellBase.extra_repr(self)
        return text + ", nonlinearity='relu'" if self.nonlinearity == "relu" else text


class LSTMCell(_CellBase):
    """One LSTM step: forward(input, (h, c)=None) -> (h', c'); input (batch, input_size)
    or (input_size,), states (batch, hidden_size) or (hidden_size,)."""

    _mode = "LSTMCell"
    _gates = 4
    _c_fn = staticmethod(lib.ac_lstm)

    def forward(self, input, hx=None):
        h = c = None
        if hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTMCell: hx must be a tuple (h, c)")
            h, c = hx
            self._check(input, h, "h")
            self._check(input, c, "c")
        else:
            self._check(input, None, "h")
        return self._step(input, h, c)


class GRUCell(_CellBase):
    """One GRU step: forward(input, h=None) -> h'."""

    _mode = "GRUCell"
    _gates = 3
    _c_fn = staticmethod(lib.ac_gru)

    def forward(self, input, hx=None):
        self._check(input, hx, "h")
        return self._step(input, hx, None)[0]
