"""losses.py - the functional losses with torch's signatures and options, composed of
aicraft's C ops where no single C op does it (autograd then comes for free):
cross_entropy on (N, C, d1, ...) and on class probabilities, with weight,
ignore_index and label_smoothing together; nll_loss; binary_cross_entropy(_with_logits)
with weight and pos_weight; kl_div, huber_loss, soft_margin_loss, margin_ranking_loss,
hinge_embedding_loss, cosine_embedding_loss, triplet_margin_loss,
triplet_margin_with_distance_loss, poisson_nll_loss, gaussian_nll_loss,
multilabel_soft_margin_loss, multi_margin_loss.

torch's deprecated size_average and reduce are taken where torch takes them
(positionally too) and mapped to a reduction as torch maps them.
aicraft.nn.functional re-exports every one; nn.*Loss modules (loss.py) call them.
"""
import math

import aicraft.functional as _base
from aicraft._args import _scalar
from aicraft._ffi import lib
from aicraft._wrapping import _wrap
from aicraft.creation import from_numpy
from aicraft.dtypes import float32
from aicraft.errors import ShapeError, raise_error
from aicraft.functional import _input, _reduction, _target
from aicraft.tensor import Tensor
from aicraft.linalg import pairwise_distance  # the losses' distance, F.pairwise_distance

__all__ = ["cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "kl_div", "huber_loss", "smooth_l1_loss", "l1_loss", "mse_loss", "soft_margin_loss",
           "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "poisson_nll_loss",
           "gaussian_nll_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "multilabel_margin_loss", "pairwise_distance"]


def _legacy(size_average, reduce, reduction):
    """torch's mapping of the deprecated size_average/reduce to a reduction."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(loss, reduction, fn):
    _reduction(reduction, fn)
    if reduction == "none":
        return loss
    return loss.mean() if reduction == "mean" else loss.sum()


def _tensor(value, fn, what):
    if not isinstance(value, Tensor):
        raise TypeError("%s(): argument '%s' must be Tensor, not %s" % (fn, what, type(value).__name__))
    return value


def _float(value, fn, what):
    _tensor(value, fn, what)
    if value.dtype != "float32":
        value = value.float()
    return value


def _softplus(z):
    """log(1 + exp(z)), stable for large |z|."""
    return z.relu() + (-z.abs()).exp().log1p()


def _channel_view(t, ndim, class_dim):
    """t (C,) shaped to broadcast along dim class_dim of an ndim-d tensor."""
    shape = [1] * ndim
    shape[class_dim] = -1
    return t.reshape(*shape)


# ---- class losses ----------------------------------------------------------------

# The one-C-op smooth L1 and NumPy's class indices, which the losses below build on.

def _smooth_l1_loss(input, target, *, reduction="mean", beta=1.0):
    """Huber-like loss: 0.5 (x - t)^2 / beta where abs(x - t) < beta, else abs(x - t) - 0.5 beta
    (beta 0 is l1_loss)."""
    _input(input, "smooth_l1_loss")
    target = _target(target, "smooth_l1_loss")
    b = _scalar(beta)
    if b is None:
        raise TypeError("smooth_l1_loss(): beta must be a number, not %s" % type(beta).__name__)
    if b < 0:
        raise ValueError("smooth_l1_loss(): beta must be >= 0, got %g" % b)
    p = lib.ac_smooth_l1_loss(input._ptr, target._ptr, _reduction(reduction, "smooth_l1_loss"), b)
    if p:
        return _wrap(p)
    raise_error(input, target)


def _class_indices(target, expected_shape, classes, ignore_index, fn):
    """target as an int64 array of expected_shape, every entry a class or ignore_index."""
    import numpy as np
    t = target.numpy() if isinstance(target, Tensor) else np.asarray(target)
    if t.dtype.kind not in "biuf":
        raise TypeError("%s(): target must hold class indices, got dtype %s" % (fn, t.dtype))
    if t.shape != expected_shape:
        raise ShapeError("%s: target %s does not fit input (expected %s)" % (fn, t.shape, expected_shape))
    indices = t.astype(np.int64)
    bad = (indices != t) | ((indices != ignore_index) & ((indices < 0) | (indices >= classes)))
    if bad.any():
        where = np.flatnonzero(bad)[0]
        raise IndexError("%s: target %s at position %d is not a class index in [0, %d)"
                         % (fn, t.reshape(-1)[where], where, classes))
    return indices


def _nll_loss(input, target, weight=None, *, ignore_index=-100, reduction="mean"):
    """Negative log likelihood of log-probabilities input (N, C, ...) or (C) at the
    target classes (N, ...) or (): -input[n, target[n]] * weight[target[n]].

    Computed as sum(input * coef), where coef holds -weight at each target class
    and zeros elsewhere, so backward is one multiply."""
    import numpy as np
    _input(input, "nll_loss")
    _reduction(reduction, "nll_loss")
    shape = input.shape
    if not shape:
        raise ShapeError("nll_loss: input () must be (N, C, ...) or (C,)")
    class_dim = 1 if len(shape) > 1 else 0
    classes = shape[class_dim]
    indices = _class_indices(target, shape[:1] + shape[2:] if class_dim else (), classes,
                             ignore_index, "nll_loss")
    if weight is None:
        class_weight = np.ones(classes)
    else:
        _input(weight, "nll_loss", "weight")
        class_weight = weight.numpy().astype(np.float64)
        if class_weight.shape != (classes,):
            raise ShapeError("nll_loss: weight %s does not fit input %s (expected (%d,))"
                             % (class_weight.shape, shape, classes))
    kept = indices != ignore_index
    safe = np.where(kept, indices, 0)
    item_weight = np.where(kept, class_weight[safe], 0.0)
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):   # all ignored: NaN, as PyTorch
            item_weight = item_weight / item_weight.sum()
    coef = np.zeros(shape, np.float32)
    np.put_along_axis(coef, np.expand_dims(safe, class_dim), np.expand_dims(-item_weight, class_dim),
                      axis=class_dim)
    terms = input * from_numpy(coef)
    return terms.sum(class_dim) if reduction == "none" else terms.sum()


def _class_targets(target, shape, classes, class_dim, ignore_index, fn):
    return _class_indices(target, shape[:1] + shape[2:] if class_dim else (), classes, ignore_index,
                          fn)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log likelihood of log-probabilities (N, C, d1, ...) or (C,) at the target
    classes, as torch's F.nll_loss."""
    return _nll_loss(input, target, weight, ignore_index=ignore_index,
                       reduction=_legacy(size_average, reduce, reduction))


def _probability_cross_entropy(input, target, weight, reduction, smoothing, class_dim, fn):
    classes = input.shape[class_dim]
    logp = input.log_softmax(class_dim)
    if smoothing:
        target = target * (1.0 - smoothing) + smoothing / classes
    terms = logp * target
    if weight is not None:
        terms = terms * _channel_view(weight, input.ndim, class_dim)
    if reduction == "none":
        return -terms.sum(class_dim)
    if reduction == "sum":
        return -terms.sum()
    return -terms.sum() / (input.numel() / classes) if input.numel() else -terms.sum() * float("nan")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Cross entropy of logits (N, C, d1, ...) or (C,) against class indices (N, d1, ...) or
    class probabilities (input's shape), as torch's F.cross_entropy."""
    fn = "cross_entropy"
    _input(input, fn)
    reduction = _legacy(size_average, reduce, reduction)
    _reduction(reduction, fn)
    smoothing = float(label_smoothing)
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError("%s: label_smoothing must be between 0.0 and 1.0. Got: %r" % (fn, smoothing))
    if input.ndim == 0:
        raise ShapeError("%s: input () must be (N, C, ...) or (C,)" % fn)
    class_dim = 1 if input.ndim > 1 else 0
    if weight is not None:
        _float(weight, fn, "weight")
        if tuple(weight.shape) != (input.shape[class_dim],):
            raise ShapeError("%s: weight %s does not fit input %s (expected (%d,))"
                             % (fn, tuple(weight.shape), tuple(input.shape), input.shape[class_dim]))
    if isinstance(target, Tensor) and target.dtype is float32 and \
            tuple(target.shape) == tuple(input.shape):
        return _probability_cross_entropy(input, target, weight, reduction, smoothing, class_dim,
                                          fn)
    if input.ndim <= 2 and weight is None and ignore_index == -100:
        return _base.cross_entropy(input, target, reduction, smoothing)   # one fused C op
    logp = input.log_softmax(class_dim)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not smoothing:
        return nll
    classes = input.shape[class_dim]
    indices = _class_targets(target, tuple(input.shape), classes, class_dim, ignore_index, fn)
    ignored = indices == ignore_index
    if weight is not None:
        smooth = -(logp * _channel_view(weight, input.ndim, class_dim)).sum(class_dim)
    else:
        smooth = -logp.sum(class_dim)
    if ignored.any():
        smooth = smooth.masked_fill(from_numpy(ignored), 0.0)
    if reduction == "none":
        total = smooth
    elif reduction == "sum":
        total = smooth.sum()
    else:
        kept = indices[~ignored]
        import numpy as np
        denominator = weight.numpy().astype(np.float64)[kept].sum() if weight is not None \
            else float(kept.size)
        total = smooth.sum() / float(denominator) if denominator else smooth.sum() * float("nan")
    return nll * (1.0 - smoothing) + total * (smoothing / classes)


# ---- binary losses -----------------------------------------------------------------

def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """BCE of probabilities in [0, 1] against targets in [0, 1], each term times weight
    (broadcast) when given, as torch's F.binary_cross_entropy."""
    fn = "binary_cross_entropy"
    reduction = _legacy(size_average, reduce, reduction)
    if weight is None:
        return _base.binary_cross_entropy(input, target, reduction)
    _reduction(reduction, fn)
    loss = _base.binary_cross_entropy(input, target, "none") * _float(weight, fn, "weight")
    return _reduce(loss, reduction, fn)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """BCE of sigmoid(input), computed stably from the logits; weight scales each term and
    pos_weight the positive term (broadcast along the last dim), as torch's."""
    fn = "binary_cross_entropy_with_logits"
    reduction = _legacy(size_average, reduce, reduction)
    if weight is None and pos_weight is None:
        return _base.binary_cross_entropy_with_logits(input, target, reduction)
    _reduction(reduction, fn)
    x, t = _float(input, fn, "input"), _float(target, fn, "target")
    if tuple(x.shape) != tuple(t.shape):
        raise ValueError("Target size (%s) must be the same as input size (%s)"
                         % (tuple(t.shape), tuple(x.shape)))
    if pos_weight is not None:
        log_weight = (_float(pos_weight, fn, "pos_weight") - 1.0) * t + 1.0
        loss = (1.0 - t) * x + log_weight * _softplus(-x)
    else:
        loss = _base.binary_cross_entropy_with_logits(x, t, "none")
    if weight is not None:
        loss = loss * _float(weight, fn, "weight")
    return _reduce(loss, reduction, fn)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean (or summed, or elementwise) squared error, times weight when given."""
    reduction = _legacy(size_average, reduce, reduction)
    if weight is None:
        return _base.mse_loss(input, target, reduction)
    return _reduce(_base.mse_loss(input, target, "none") * weight, reduction, "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean (or summed, or elementwise) absolute error, times weight when given."""
    reduction = _legacy(size_average, reduce, reduction)
    if weight is None:
        return _base.l1_loss(input, target, reduction)
    return _reduce(_base.l1_loss(input, target, "none") * weight, reduction, "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - beta / 2 (one C op)."""
    return _smooth_l1_loss(input, target, reduction=_legacy(size_average, reduce, reduction),
                             beta=beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - delta / 2): delta times smooth_l1_loss with
    beta = delta, as torch's F.huber_loss."""
    fn = "huber_loss"
    delta = float(delta)
    if not delta > 0:
        raise ValueError("%s: delta must be positive, got %r" % (fn, delta))
    _reduction(reduction, fn)
    loss = smooth_l1_loss(input, target, reduction="none" if weight is not None else reduction,
                          beta=delta) * delta
    if weight is not None:
        loss = _reduce(loss * weight, reduction, fn)
    return loss


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log target - input) (0 where target is 0), or exp(target) * (target - input)
    with log_target, reduced by 'mean', 'batchmean' (sum / batch size), 'sum' or 'none'."""
    fn = "kl_div"
    reduction = _legacy(size_average, reduce, reduction)
    if reduction not in ("mean", "batchmean", "sum", "none"):
        raise ValueError("%s(): reduction must be 'none', 'batchmean', 'mean' or 'sum', not %r"
                         % (fn, reduction))
    x, t = _float(input, fn, "input"), _float(target, fn, "target")
    if log_target:
        loss = t.exp() * (t - x)
    else:
        from aicraft.indexing import where
        # x log x is 0 at 0 (its gradient there NaN, as torch's xlogy gives)
        loss = where(t == 0.0, 0.0, t * t.log()) - t * x
    if reduction == "batchmean":
        batch = x.shape[0] if x.ndim else 1
        return loss.sum() / float(batch)
    return _reduce(loss, reduction, fn)


# ---- margin and embedding losses --------------------------------------------------------

def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), as torch's F.soft_margin_loss."""
    fn = "soft_margin_loss"
    x, y = _float(input, fn, "input"), _float(target, fn, "target")
    return _reduce(_softplus(-(y * x)), _legacy(size_average, reduce, reduction), fn)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    fn = "margin_ranking_loss"
    x1, x2, y = (_float(v, fn, w) for v, w in ((input1, "input1"), (input2, "input2"),
                                               (target, "target")))
    if x1.ndim != x2.ndim or x1.ndim != y.ndim:
        raise ValueError("margin_ranking_loss : All input tensors should have same dimension but "
                         "got sizes: input1: %s, input2: %s, target: %s "
                         % (tuple(x1.shape), tuple(x2.shape), tuple(y.shape)))
    return _reduce((-(y * (x1 - x2)) + float(margin)).relu(),
                   _legacy(size_average, reduce, reduction), fn)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1 (torch's sum of both
    where target is neither)."""
    fn = "hinge_embedding_loss"
    from aicraft.indexing import where
    x, y = _float(input, fn, "input"), _float(target, fn, "target")
    margin_part = where(y != 1.0, (float(margin) - x).relu(), 0.0)
    self_part = where(y != -1.0, x, 0.0)
    return _reduce(margin_part + self_part, _legacy(size_average, reduce, reduction), fn)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1."""
    fn = "cosine_embedding_loss"
    from aicraft.indexing import where
    x1, x2, y = (_float(v, fn, w) for v, w in ((input1, "input1"), (input2, "input2"),
                                               (target, "target")))
    if x1.ndim not in (1, 2) or tuple(x1.shape) != tuple(x2.shape) or y.ndim != x1.ndim - 1:
        raise ValueError("%s: expected input1 and input2 (N, D) or (D,) and target (N,) or (), "
                         "got %s, %s and %s" % (fn, tuple(x1.shape), tuple(x2.shape),
                                                tuple(y.shape)))
    eps = 1e-12
    dot = (x1 * x2).sum(-1)
    denom = (((x1 * x1).sum(-1) + eps) * ((x2 * x2).sum(-1) + eps)).sqrt()
    cos = dot / denom
    loss = where(y == 1.0, 1.0 - cos, 0.0) + where(y == -1.0, (cos - float(margin)).relu(), 0.0)
    return _reduce(loss, _legacy(size_average, reduce, reduction), fn)


def _minimum(a, b):
    from aicraft.indexing import where
    return where(a <= b, a, b)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the p-norm distance."""
    fn = "triplet_margin_loss"
    a, pos, neg = (_float(v, fn, w) for v, w in ((anchor, "anchor"), (positive, "positive"),
                                                 (negative, "negative")))
    if not a.ndim == pos.ndim == neg.ndim or a.ndim not in (1, 2):
        raise ValueError("%s: anchor, positive and negative must all be (N, D) or (D,), got %s, "
                         "%s and %s" % (fn, tuple(a.shape), tuple(pos.shape), tuple(neg.shape)))
    d_pos = pairwise_distance(a, pos, p, eps)
    d_neg = pairwise_distance(a, neg, p, eps)
    if swap:
        d_neg = _minimum(d_neg, pairwise_distance(pos, neg, p, eps))
    return _reduce((d_pos - d_neg + float(margin)).relu(), _legacy(size_average, reduce, reduction),
                   fn)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with any distance (pairwise_distance by default)."""
    fn = "triplet_margin_with_distance_loss"
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = _minimum(d_neg, dist(positive, negative))
    return _reduce((d_pos - d_neg + float(margin)).relu(), reduction, fn)


# ---- likelihood losses ----------------------------------------------------------------

def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(input) - target * input (log_input), else input - target * log(input + eps); with
    full, Stirling's term for target > 1, as torch's F.poisson_nll_loss."""
    fn = "poisson_nll_loss"
    x, t = _float(input, fn, "input"), _float(target, fn, "target")
    if log_input:
        loss = x.exp() - t * x
    else:
        loss = x - t * (x + float(eps)).log()
    if full:
        from aicraft.indexing import where
        safe = where(t > 1.0, t, 1.0)
        stirling = safe * safe.log() - safe + (safe * (2.0 * math.pi)).log() * 0.5
        loss = loss + where(t > 1.0, stirling, 0.0)
    return _reduce(loss, _legacy(size_average, reduce, reduction), fn)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log var + (input - target)^2 / var) (+ 0.5 log 2 pi with full), var clamped to
    eps without stopping its gradient, as torch's F.gaussian_nll_loss."""
    fn = "gaussian_nll_loss"
    x, t = _float(input, fn, "input"), _float(target, fn, "target")
    if isinstance(var, (int, float)):
        from aicraft.creation import full as _full
        var = _full(tuple(x.shape), float(var))
    v = _float(var, fn, "var")
    if tuple(v.shape) != tuple(x.shape):
        if tuple(x.shape[:-1]) == tuple(v.shape):
            v = v.unsqueeze(-1)
        elif not (tuple(x.shape[:-1]) == tuple(v.shape[:-1]) and v.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    if (v.detach() < 0).float().sum().item() > 0:
        raise ValueError("var has negative entry/entries")
    v = v + (v.detach().clamp(min=float(eps)) - v.detach())
    diff = x - t
    loss = (v.log() + diff * diff / v) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, fn)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """-(target log sigmoid(input) + (1 - target) log sigmoid(-input)), times weight,
    averaged over the classes (the last dim)."""
    fn = "multilabel_soft_margin_loss"
    x, y = _float(input, fn, "input"), _float(target, fn, "target")
    loss = y * _softplus(-x) + (1.0 - y) * _softplus(x)
    if weight is not None:
        loss = loss * _float(weight, fn, "weight")
    classes = x.shape[-1] if x.ndim else 1
    loss = loss.sum(-1) / float(classes) if x.ndim else loss
    return _reduce(loss, _legacy(size_average, reduce, reduction), fn)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """sum over i != y of max(0, margin - input[y] + input[i])^p / C (times weight[y]), as
    torch's F.multi_margin_loss, for input (N, C) or (C,)."""
    import numpy as np
    fn = "multi_margin_loss"
    x = _float(input, fn, "input")
    p = int(p)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if x.ndim > 2:
        raise ValueError("%s: input %s must be (N, C), (C,) or ()" % (fn, tuple(x.shape)))
    rows = x.reshape(1, -1) if x.ndim < 2 else x
    classes = rows.shape[1]
    flat = np.asarray(target.numpy() if isinstance(target, Tensor) else target).reshape(-1)
    indices = _class_targets(flat, tuple(rows.shape), classes, 1, -(2 ** 62), fn)
    onehot = np.zeros(tuple(rows.shape), dtype=np.float32)
    onehot[np.arange(rows.shape[0]), indices] = 1.0
    picked = (rows * from_numpy(onehot)).sum(1, keepdim=True)
    terms = (rows - picked + float(margin)).relu()
    if p == 2:
        terms = terms * terms
    if weight is not None:
        w = _float(weight, fn, "weight").index_select(0, from_numpy(indices))
        terms = terms * w.reshape(-1, 1)
    terms = terms * from_numpy(1.0 - onehot)
    loss = terms.sum(1) / float(classes)
    if x.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, _legacy(size_average, reduce, reduction), fn)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])) / C,
    the targets each row's class indices up to its first -1, as torch's
    F.multilabel_margin_loss."""
    import numpy as np
    fn = "multilabel_margin_loss"
    x = _float(input, fn, "input")
    if x.ndim > 2:
        raise ValueError("%s: input %s must be (N, C), (C,) or ()" % (fn, tuple(x.shape)))
    rows = x.reshape(1, -1) if x.ndim < 2 else x
    n, classes = rows.shape
    t = np.asarray(target.numpy() if isinstance(target, Tensor) else target)
    if t.dtype.kind not in "iu" or t.reshape(-1).size != n * classes:
        raise ShapeError("%s: target %s must be int64 of input's shape %s"
                         % (fn, t.shape, tuple(x.shape)))
    t = t.reshape(n, classes).astype(np.int64)
    listed = np.cumprod(t != -1, axis=1).astype(bool)       # entries before the first -1
    if np.any(listed & ((t < 0) | (t >= classes))):
        raise IndexError("%s: target holds a class outside [0, %d)" % (fn, classes))
    count = np.zeros((n, classes), dtype=np.float32)
    rows_at = np.repeat(np.arange(n), classes).reshape(n, classes)
    np.add.at(count, (rows_at[listed], t[listed]), 1.0)
    is_target = count > 0
    pair = count[:, :, None] * (~is_target)[:, None, :].astype(np.float32)   # (N, j, i)
    hinge = (1.0 - rows.unsqueeze(2) + rows.unsqueeze(1)).relu()
    loss = (hinge * from_numpy(pair)).sum((1, 2)) / float(classes)
    if x.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, _legacy(size_average, reduce, reduction), fn)
