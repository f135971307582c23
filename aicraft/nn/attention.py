"""attention.py - F.scaled_dot_product_attention, torch's math path composed of
aicraft's C ops: two batched GEMMs (matmul) around a softmax, with the mask
(bool: True takes part; float: added), is_causal, scale, dropout_p and
enable_gqa. A row whose every score is masked gives zeros, as torch's.
"""
import math

from aicraft.tensor import Tensor

__all__ = ["scaled_dot_product_attention"]


def _heads_repeated(t, times):
    """(..., H, S, E) -> (..., H * times, S, E), each head repeated times over."""
    if times == 1:
        return t
    shape = tuple(t.shape)
    expanded = t.unsqueeze(-3).expand(*shape[:-2], times, *shape[-2:])
    return expanded.reshape(*shape[:-3], shape[-3] * times, *shape[-2:])


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value for query (..., L, E), key (..., S, E),
    value (..., S, Ev), as torch's F.scaled_dot_product_attention."""
    import numpy as np
    fn = "scaled_dot_product_attention"
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        if not isinstance(t, Tensor):
            raise TypeError("%s(): argument '%s' must be Tensor, not %s" % (fn, what, type(t).__name__))
        if t.ndim < 2:
            raise ValueError("%s: %s %s must have at least 2 dims" % (fn, what, tuple(t.shape)))
        if t.dtype != "float32":
            raise TypeError("%s: %s must be float32, got %s" % (fn, what, t.dtype))
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError("%s: query %s, key %s and value %s do not fit" % (
            fn, tuple(query.shape), tuple(key.shape), tuple(value.shape)))
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    if not 0.0 <= float(dropout_p) <= 1.0:
        raise ValueError("%s: dropout_p must be in [0, 1], got %r" % (fn, dropout_p))
    if enable_gqa and query.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hq % hk or hq % hv:
            raise ValueError("%s: query's %d heads are not a multiple of key's %d and value's %d"
                             % (fn, hq, hk, hv))
        key, value = _heads_repeated(key, hq // hk), _heads_repeated(value, hq // hv)
    L, S = query.shape[-2], key.shape[-2]
    s = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    scores = query @ key.transpose(-2, -1)
    if s != 1.0:
        scores = scores * s
    masked = False
    if is_causal:
        from aicraft.creation import from_numpy
        keep = from_numpy(np.tril(np.ones((L, S), dtype=bool)))
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        masked = True
    elif attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            raise TypeError("%s: attn_mask must be a Tensor or None" % fn)
        if attn_mask.dtype == "bool":
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        elif attn_mask.dtype == "float32":
            scores = scores + attn_mask
        else:
            raise TypeError("%s: attn_mask must be bool or float32, got %s" % (fn, attn_mask.dtype))
        masked = True
    if masked:   # rows with every score -inf: zeros, not NaN, and no gradient
        empty = scores.detach().max(-1, keepdim=True)[0] == float("-inf")
        attn = scores.masked_fill(empty, 0.0).softmax(-1).masked_fill(empty, 0.0)
    else:
        attn = scores.softmax(-1)
    if dropout_p > 0.0:
        from aicraft.nn.conv import dropout
        attn = dropout(attn, float(dropout_p), True)
    return attn @ value
