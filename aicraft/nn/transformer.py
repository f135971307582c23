"""transformer.py - nn.MultiheadAttention, nn.TransformerEncoderLayer and
nn.TransformerEncoder, composed from differentiable ops (linear, batched matmul,
softmax, dropout, layer_norm), so autograd needs nothing of its own here.

Names, shapes and initialisation are PyTorch's, so state_dicts carry over:
attention has `in_proj_weight` (3E, E), `in_proj_bias` (3E) and `out_proj`; an
encoder layer has `self_attn`, `linear1`, `linear2`, `norm1`, `norm2`; the
encoder `layers.<i>` and `norm`. Masks are float and added to the attention
scores (0 keeps, -inf hides, as generate_square_subsequent_mask makes them);
bool masks need bool tensors, which aicraft does not have yet.
"""
import copy
import math

from aicraft.errors import ShapeError
from aicraft.nn import functional as F
from aicraft.nn import init
from aicraft.nn.conv import Dropout
from aicraft.nn.layers import Linear, ModuleList
from aicraft.nn.module import Module, Parameter, factory_kwargs
from aicraft.nn.norm import LayerNorm
from aicraft.creation import zeros
from aicraft.dtypes import bool as bool_, float32
from aicraft._args import _as_int
from aicraft.tensor import Tensor

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


def _unsupported(what, arg):
    raise NotImplementedError("%s: %s is not supported by aicraft" % (what, arg))


def _float_mask(mask, what):
    """mask as a float additive mask (or None): a bool mask, True where attention is
    not allowed as PyTorch reads it, becomes 0 / -inf; TypeError for anything else."""
    if mask is None:
        return None
    if isinstance(mask, Tensor) and mask.dtype is bool_:
        return zeros(mask.shape).masked_fill(mask, float("-inf"))
    if not isinstance(mask, Tensor) or mask.dtype is not float32:
        raise TypeError("MultiheadAttention: %s must be a bool or float32 Tensor, not %s"
                        % (what, getattr(mask, "dtype", type(mask).__name__)))
    return mask


def _check_dropout(p, what):
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError("%s: dropout must be a number in [0, 1], got %r" % (what, p))
    return float(p)


class MultiheadAttention(Module):
    """Scaled dot-product attention over num_heads heads, as torch.nn.MultiheadAttention.

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output, weights or None).
    query (L, N, E), key and value (S, N, E); (N, L, E) with batch_first; or
    unbatched (L, E). attn_mask (L, S) or (N * num_heads, L, S) and key_padding_mask
    (N, S) are float and added to the scores. Weights are (N, L, S), averaged over
    heads, or (N, num_heads, L, S)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        self.embed_dim = _as_int(embed_dim, "MultiheadAttention: embed_dim")
        self.num_heads = _as_int(num_heads, "MultiheadAttention: num_heads")
        if self.embed_dim <= 0 or self.num_heads <= 0 or self.embed_dim % self.num_heads:
            raise ValueError("MultiheadAttention: embed_dim (%d) must be > 0 and divisible by "
                             "num_heads (%d)" % (self.embed_dim, self.num_heads))
        if add_bias_kv or add_zero_attn:
            _unsupported("MultiheadAttention", "add_bias_kv" if add_bias_kv else "add_zero_attn")
        if (kdim is not None and kdim != embed_dim) or (vdim is not None and vdim != embed_dim):
            _unsupported("MultiheadAttention", "kdim or vdim other than embed_dim")
        self.kdim = self.vdim = self.embed_dim
        self.head_dim = self.embed_dim // self.num_heads
        self.dropout = _check_dropout(dropout, "MultiheadAttention")
        self.batch_first = bool(batch_first)
        self.in_proj_weight = Parameter(zeros(3 * self.embed_dim, self.embed_dim))
        if bias:
            self.in_proj_bias = Parameter(zeros(3 * self.embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(self.embed_dim, self.embed_dim, bias=bias)
        self._reset_parameters()
        factory_kwargs(self, device, dtype)

    def _reset_parameters(self):
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _project(self, x, part):
        """x @ W_part^T + b_part for part 0 (query), 1 (key) or 2 (value)."""
        e = self.embed_dim
        bias = None if self.in_proj_bias is None else self.in_proj_bias[part * e:(part + 1) * e]
        return F.linear(x, self.in_proj_weight[part * e:(part + 1) * e], bias)

    def _heads(self, x, length, batch):
        """(length, batch, E) as (batch * heads, length, head_dim)."""
        return x.reshape(length, batch * self.num_heads, self.head_dim).transpose(0, 1)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        for x, what in ((query, "query"), (key, "key"), (value, "value")):
            if not isinstance(x, Tensor):
                raise TypeError("MultiheadAttention: %s must be a Tensor, not %s"
                                % (what, type(x).__name__))
        attn_mask = _float_mask(attn_mask, "attn_mask")
        key_padding_mask = _float_mask(key_padding_mask, "key_padding_mask")
        if is_causal and attn_mask is None:
            raise RuntimeError("MultiheadAttention: is_causal is a hint and needs attn_mask")
        unbatched = query.ndim == 2
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError("MultiheadAttention: query %s, key %s and value %s must all be 3-d "
                             "(or all 2-d, unbatched)" % (tuple(query.shape), tuple(key.shape),
                                                          tuple(value.shape)))
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        length, batch, e = query.shape
        source = key.shape[0]
        if e != self.embed_dim or tuple(key.shape) != (source, batch, e) or \
                tuple(value.shape) != (source, batch, e):
            raise ShapeError("MultiheadAttention: query %s, key %s and value %s do not fit "
                             "embed_dim %d (key and value must match)"
                             % (tuple(query.shape), tuple(key.shape), tuple(value.shape),
                                self.embed_dim))
        q = self._heads(self._project(query, 0), length, batch)
        k = self._heads(self._project(key, 1), source, batch)
        v = self._heads(self._project(value, 2), source, batch)
        scores = (q @ k.transpose(1, 2)) * (1.0 / math.sqrt(self.head_dim))
        if attn_mask is not None:
            if tuple(attn_mask.shape) not in ((length, source), (batch * self.num_heads, length, source)):
                raise ShapeError("MultiheadAttention: attn_mask %s must be (L, S) = %s or "
                                 "(N * num_heads, L, S) = %s" % (tuple(attn_mask.shape), (length, source),
                                                                 (batch * self.num_heads, length, source)))
            scores = scores + attn_mask
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (batch, source):
                raise ShapeError("MultiheadAttention: key_padding_mask %s must be (N, S) = %s"
                                 % (tuple(key_padding_mask.shape), (batch, source)))
            scores = scores.reshape(batch, self.num_heads, length, source) + \
                key_padding_mask.reshape(batch, 1, 1, source)
            scores = scores.reshape(batch * self.num_heads, length, source)
        weights = scores.softmax(-1)
        if self.training and self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout)
        out = (weights @ v).transpose(0, 1).reshape(length, batch, e)
        out = self.out_proj(out)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(batch, self.num_heads, length, source)
        if average_attn_weights:
            weights = weights.mean(1)
        return out, (weights.squeeze(0) if unbatched else weights)

    def extra_repr(self):
        return "embed_dim=%d, num_heads=%d" % (self.embed_dim, self.num_heads)


_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual connection and
    LayerNorm (after it, or before it with norm_first), as torch.nn.TransformerEncoderLayer.

    forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise ValueError("TransformerEncoderLayer: activation should be relu/gelu, not %r"
                                 % (activation,))
            activation_fn = _ACTIVATIONS[activation]
        elif callable(activation):
            activation_fn = activation
        else:
            raise TypeError("TransformerEncoderLayer: activation must be 'relu', 'gelu' or callable")
        dropout = _check_dropout(dropout, "TransformerEncoderLayer")
        # what TransformerEncoder needs to build copies of this layer
        self._config = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                            dropout=dropout, activation=activation, layer_norm_eps=layer_norm_eps,
                            batch_first=batch_first, norm_first=norm_first, bias=bias)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation_fn
        factory_kwargs(self, device, dtype)

    def _attention_block(self, x, mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _feed_forward_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._attention_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward_block(self.norm2(x))
        x = self.norm1(x + self._attention_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward_block(x))


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer (same starting weights, as PyTorch's deep
    copies), run in turn, then norm when given.

    forward(src, mask=None, src_key_padding_mask=None, is_causal=None)."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            raise TypeError("TransformerEncoder: encoder_layer must be a TransformerEncoderLayer, "
                            "not %s" % type(encoder_layer).__name__)
        self.num_layers = _as_int(num_layers, "TransformerEncoder: num_layers")
        if self.num_layers < 0:
            raise ValueError("TransformerEncoder: num_layers must be >= 0, got %d" % self.num_layers)
        if norm is not None and not isinstance(norm, Module):
            raise TypeError("TransformerEncoder: norm must be a Module or None")
        self.layers = _clones(encoder_layer, self.num_layers)
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


def _clones(layer, n):
    """n deep copies of layer (its class, weights and settings), as PyTorch's."""
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


def _activation(activation, what):
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError("%s: activation should be relu/gelu, not %r" % (what, activation))
        return _ACTIVATIONS[activation]
    if callable(activation):
        return activation
    raise TypeError("%s: activation must be 'relu', 'gelu' or callable" % what)


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output (memory) and a feed-forward
    block, each with a residual connection and LayerNorm (after it, or before it with
    norm_first), as torch.nn.TransformerDecoderLayer.

    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, device=None,
                 dtype=None):
        super().__init__()
        activation_fn = _activation(activation, "TransformerDecoderLayer")
        dropout = _check_dropout(dropout, "TransformerDecoderLayer")
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation_fn
        factory_kwargs(self, device, dtype)

    def _self_block(self, x, mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _cross_block(self, x, memory, mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, memory, memory, attn_mask=mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)[0]
        return self.dropout2(x)

    def _feed_forward_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._self_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._cross_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                      memory_is_causal)
            return x + self._feed_forward_block(self.norm3(x))
        x = self.norm1(x + self._self_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._cross_block(x, memory, memory_mask, memory_key_padding_mask,
                                             memory_is_causal))
        return self.norm3(x + self._feed_forward_block(x))


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer run in turn over (tgt, memory), then norm when given.

    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        if not isinstance(decoder_layer, Module):
            raise TypeError("TransformerDecoder: decoder_layer must be a Module, not %s"
                            % type(decoder_layer).__name__)
        self.num_layers = _as_int(num_layers, "TransformerDecoder: num_layers")
        if self.num_layers < 0:
            raise ValueError("TransformerDecoder: num_layers must be >= 0, got %d" % self.num_layers)
        if norm is not None and not isinstance(norm, Module):
            raise TypeError("TransformerDecoder: norm must be a Module or None")
        self.layers = _clones(decoder_layer, self.num_layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder Transformer of "Attention Is All You Need", as torch.nn.Transformer:
    encoder (TransformerEncoder with a final LayerNorm) and decoder (TransformerDecoder with
    one), or custom_encoder/custom_decoder; weights with more than one dim xavier-uniform.

    forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None,
    tgt_is_causal=None, memory_is_causal=False) -> (T, N, E) ((N, T, E) with batch_first)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first
        factory_kwargs(self, device, dtype)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
                src_is_causal=None, tgt_is_causal=None, memory_is_causal=False):
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """(sz, sz) float mask: 0 on and below the diagonal, -inf above (hides the future)."""
        return generate_square_subsequent_mask(sz, device, dtype)


def generate_square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float32 mask: 0 on and below the diagonal, -inf above."""
    import numpy as np
    from aicraft.creation import tensor
    if dtype is not None and dtype is not float32:
        raise TypeError("generate_square_subsequent_mask: aicraft masks are float32, not %r" % (dtype,))
    n = _as_int(sz, "generate_square_subsequent_mask: sz")
    if n < 0:
        raise ValueError("generate_square_subsequent_mask: sz must be >= 0, got %d" % n)
    return tensor(np.triu(np.full((n, n), -np.inf, np.float32), 1), device=device)
