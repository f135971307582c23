"""sparse.py - F.embedding_bag and nn.EmbeddingBag (modes sum, mean and max, offsets or
2-D bags, per_sample_weights, padding_idx, include_last_offset), with torch's
signatures; F.embedding and nn.Embedding with max_norm (and integer weights) on top of
rnn.py's lookup.

The bags are laid out as a dense (bags, longest bag) table of row numbers, short bags
padded with a row past the end; one embedding lookup (libac's C op, whose backward
sums into the weight's rows) of an extended weight fills it, and a sum, mean or max
over the bag dim finishes. Building the table is NumPy work on the ids, not on the
embeddings.
"""
import math

from aicraft.creation import from_numpy, zeros
from aicraft.errors import ShapeError
from aicraft.nn import init
from aicraft.nn.module import Module, Parameter, factory_kwargs
from aicraft.nn.rnn import Embedding as _RnnEmbedding
from aicraft.tensor import Tensor

__all__ = ["embedding_bag", "EmbeddingBag", "embedding", "Embedding"]


def _ids(value, fn, what):
    import numpy as np
    ids = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
    if ids.dtype.kind not in "iu":
        raise TypeError("%s: %s must hold integers (int64), got dtype %s" % (fn, what, ids.dtype))
    return ids.astype(np.int64)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """The sum, mean or max of each bag of embeddings, as torch's F.embedding_bag: input 2-D
    (bags, length) without offsets, or 1-D with offsets (each bag's start). max_norm as in
    embedding; sparse=True gives a dense gradient; scale_grad_by_freq is refused."""
    import numpy as np
    fn = "embedding_bag"
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if scale_grad_by_freq:   # torch's bag gradients are not scaled by each id's count
        raise NotImplementedError("%s: scale_grad_by_freq is not supported by aicraft" % fn)
    if not isinstance(weight, Tensor) or weight.ndim != 2:
        raise ShapeError("%s: weight must be a 2-D Tensor (num_embeddings, embedding_dim)" % fn)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. "
                                  "per_sample_weights is only supported for mode='sum' (got "
                                  "mode='%s'). Please open a feature request on GitHub." % mode)
    num, dim = weight.shape
    ids = _ids(input, fn, "input")
    if ids.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a "
                             "mini-batch of fixed length sequences.")
        bags, length = ids.shape
        starts = np.arange(bags, dtype=np.int64) * length
        flat = ids.reshape(-1)
    elif ids.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        starts = _ids(offsets, fn, "offsets").reshape(-1)
        flat = ids
        if include_last_offset:
            if starts.size < 1:
                raise ValueError("%s: include_last_offset needs at least one offset" % fn)
            starts = starts[:-1]
        if starts.size and (starts[0] != 0 or np.any(np.diff(starts) < 0) or
                            starts[-1] > flat.size):
            raise ValueError("%s: offsets must start at 0, not decrease and stay within input "
                             "(%d ids)" % (fn, flat.size))
    else:
        raise ValueError("input has to be 1D or 2D Tensor, but got Tensor of dimension %d"
                         % ids.ndim)
    if flat.size and (flat.min() < 0 or flat.max() >= num):
        bad = flat[(flat < 0) | (flat >= num)][0]
        raise IndexError("%s: index %d is out of range for %d embeddings" % (fn, bad, num))
    if max_norm is not None:
        _renorm_rows(weight, flat, float(max_norm), norm_type)
    pad_row = -1 if padding_idx is None else int(padding_idx) % num if num else -1
    ends = np.append(starts[1:], flat.size) if starts.size else starts
    lengths = ends - starts
    longest = int(lengths.max()) if lengths.size else 0
    # position k of bag b holds id flat[starts[b] + k], or num (an appended row) past its end
    column = np.arange(longest, dtype=np.int64)
    where = starts[:, None] + column[None, :]
    inside = column[None, :] < lengths[:, None]
    table = np.where(inside, flat[np.minimum(where, max(flat.size - 1, 0))] if flat.size else 0, num)
    if pad_row >= 0:
        inside &= table != pad_row
        table = np.where(inside, table, num)
    counts = inside.sum(1)
    filler = float("-inf") if mode == "max" else 0.0
    from aicraft.creation import cat, full
    extended = cat([weight, full((1, dim), filler)], 0)
    from aicraft.nn.rnn import embedding
    rows = embedding(from_numpy(table), extended)            # (bags, longest, dim)
    if per_sample_weights is not None:
        if not isinstance(per_sample_weights, Tensor) or \
                tuple(per_sample_weights.shape) != tuple(ids.shape):
            raise ShapeError("%s: per_sample_weights must have input's shape %s"
                             % (fn, tuple(ids.shape)))
        flat_weights = per_sample_weights.reshape(-1)
        spread = np.where(inside, np.minimum(where, max(flat.size - 1, 0)), flat.size)
        padded = cat([flat_weights, zeros(1)], 0)
        rows = rows * padded.index_select(0, from_numpy(spread.reshape(-1))).reshape(
            *table.shape, 1)
    if mode == "sum":
        out = rows.sum(1) if longest else zeros(len(starts), dim)
    elif mode == "mean":
        out = rows.sum(1) if longest else zeros(len(starts), dim)
        divisor = np.maximum(counts, 1).astype(np.float32).reshape(-1, 1)
        out = out / from_numpy(divisor)
    else:
        if not longest:
            return zeros(len(starts), dim)
        out = rows.max(1)[0]
        empty = counts == 0
        if empty.any():
            out = out.masked_fill(from_numpy(empty.reshape(-1, 1)), 0.0)
    return out


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings, as torch.nn.EmbeddingBag: weight
    (num_embeddings, embedding_dim), N(0, 1), the padding_idx row zero."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise ValueError("mode has to be one of sum, mean or max")
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.mode = mode
        self.max_norm = None if max_norm is None else float(max_norm)
        self.norm_type = float(norm_type)
        self.scale_grad_by_freq, self.sparse = bool(scale_grad_by_freq), bool(sparse)
        self.include_last_offset = bool(include_last_offset)
        if padding_idx is not None:
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError("padding_idx must be within num_embeddings")
            padding_idx %= self.num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(zeros(self.num_embeddings, self.embedding_dim))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (self.num_embeddings, self.embedding_dim):
                raise ShapeError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight)
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            values = self.weight.numpy()
            values[self.padding_idx] = 0.0
            from aicraft.autograd import no_grad
            with no_grad():
                self.weight.copy_(from_numpy(values))

    def forward(self, input, offsets=None, per_sample_weights=None):
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse,
                             per_sample_weights=per_sample_weights,
                             include_last_offset=self.include_last_offset,
                             padding_idx=self.padding_idx)

    def extra_repr(self):
        s = "%d, %d, mode='%s'" % (self.num_embeddings, self.embedding_dim, self.mode)
        if self.padding_idx is not None:
            s += ", padding_idx=%d" % self.padding_idx
        return s


# ---- embedding with max_norm and integer weights ---------------------------------------

def _renorm_rows(weight, ids, max_norm, norm_type):
    """torch's embedding_renorm_: each row ids names whose norm exceeds max_norm is scaled
    in place to max_norm / (norm + 1e-7), outside autograd."""
    import numpy as np
    rows = np.unique(ids.reshape(-1))
    if not rows.size:
        return
    values = weight.detach().numpy()
    picked = values[rows].astype(np.float64)
    p = float(norm_type)
    if math.isinf(p):
        norms = np.abs(picked).max(1)
    else:
        norms = (np.abs(picked) ** p).sum(1) ** (1.0 / p)
    scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    values[rows] = (picked * scale[:, None]).astype(values.dtype)
    from aicraft.autograd import no_grad
    with no_grad():
        weight.copy_(from_numpy(values))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of weight (num, dim) picked by the ids in input (any shape), as torch's
    F.embedding: padding_idx's row gets no gradient; with max_norm, the rows looked up are
    first renormalised in place; scale_grad_by_freq divides each row's gradient by its
    id's count; an integer weight is gathered exactly. sparse=True is taken, and the
    gradient is dense (the same values; aicraft has no sparse tensors)."""
    import numpy as np
    from aicraft.nn import rnn
    if not isinstance(weight, Tensor):
        raise TypeError("embedding: weight must be a Tensor, not %s" % type(weight).__name__)
    if max_norm is not None:
        ids = _ids(input, "embedding", "input")
        if weight.ndim != 2:
            raise ShapeError("embedding: weight %s must be 2-D" % (tuple(weight.shape),))
        if ids.size and (ids.min() < 0 or ids.max() >= weight.shape[0]):
            raise IndexError("embedding: an id is out of range for %d embeddings" % weight.shape[0])
        _renorm_rows(weight, ids, float(max_norm), norm_type)
    if weight.dtype != "float32" and weight.ndim == 2:
        ids = _ids(input, "embedding", "input")
        if ids.size and (ids.min() < 0 or ids.max() >= weight.shape[0]):
            raise IndexError("embedding: an id is out of range for %d embeddings" % weight.shape[0])
        picked = weight.index_select(0, from_numpy(np.ascontiguousarray(ids.reshape(-1))))
        return picked.reshape(*ids.shape, weight.shape[1])
    out = rnn.embedding(input, weight, padding_idx)
    if scale_grad_by_freq and out.requires_grad:
        ids = _ids(input, "embedding", "input")
        out = _scaled_gradient(out, ids, weight.shape[0])
    return out


def _scaled_gradient(rows, ids, num):
    """rows (.., dim) looked up by ids, their values unchanged and their gradient divided by
    how often each id occurs in ids (torch's scale_grad_by_freq): rows.detach() plus
    (rows - rows.detach()) times the scale, whose value is zero."""
    import numpy as np
    flat = ids.reshape(-1)
    counts = np.bincount(flat[(flat >= 0) & (flat < num)], minlength=num + 1)
    scale = 1.0 / np.maximum(counts[np.clip(flat, 0, num)], 1)
    scale = from_numpy(scale.astype(np.float32).reshape(*ids.shape, 1))
    return rows.detach() + (rows - rows.detach()) * scale


class Embedding(_RnnEmbedding):
    """A lookup table of num_embeddings vectors of size embedding_dim, as torch.nn.Embedding
    (N(0, 1), the padding_idx row zero and never updated; max_norm renormalises the rows
    looked up, in place)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, None, norm_type, False,
                         False, _weight, _freeze)
        self.max_norm = None if max_norm is None else float(max_norm)
        self.norm_type = float(norm_type)
        self.scale_grad_by_freq, self.sparse = bool(scale_grad_by_freq), bool(sparse)
        factory_kwargs(self, device, dtype)

    def forward(self, input):
        if self.max_norm is None and not self.scale_grad_by_freq:
            return super().forward(input)
        return embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                         self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        text = super().extra_repr()
        return text if self.max_norm is None else text + ", max_norm=%s" % self.max_norm
