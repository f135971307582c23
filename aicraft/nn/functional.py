"""functional.py - aicraft.nn.functional (`import aicraft.nn.functional as F`).

Everything aicraft.functional offers is re-exported from it; this module adds
`linear`, `nll_loss`, `smooth_l1_loss`, the layer functions (conv2d, layer_norm,
dropout2d, ...), and gives the losses torch.nn.functional's signatures
(`F.cross_entropy(x, y, label_smoothing=0.1)`). Arguments PyTorch takes that
aicraft does not implement raise NotImplementedError when given a non-default
value, rather than being silently ignored; its deprecated size_average and
reduce are not taken.
"""
import aicraft.functional as _base
from aicraft._args import _scalar
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _wrap
from aicraft.errors import ShapeError, raise_error
from aicraft.functional import _input, _reduction, _target
from aicraft.nn.conv import (adaptive_avg_pool2d, avg_pool2d, batch_norm, conv2d,  # noqa: F401
                             dropout, dropout2d, max_pool2d)
from aicraft.nn.norm import layer_norm  # noqa: F401
from aicraft.nn.rnn import embedding
from aicraft.tensor import Tensor

# Every public function of aicraft.functional, including ones added there later.
for _name, _value in list(vars(_base).items()):
    if not _name.startswith("_") and callable(_value) and \
            getattr(_value, "__module__", None) == _base.__name__:
        globals()[_name] = _value
del _name, _value

_NULL = ffi.NULL


def linear(input, weight, bias=None):
    """input @ weight.T + bias, for input (..., in), weight (out, in), bias (out) or None."""
    for value, what in ((input, "input"), (weight, "weight")):
        _input(value, "linear", what)
    if bias is not None:
        _input(bias, "linear", "bias")
    p = lib.ac_linear(input._ptr, weight._ptr, _NULL if bias is None else bias._ptr)
    if p:
        return _wrap(p)
    raise_error(input, weight, bias)


def _unsupported(fn, what):
    raise NotImplementedError("%s(): %s is not supported by aicraft" % (fn, what))


def mse_loss(input, target, *, reduction="mean"):
    """Mean (or summed, or elementwise) squared error."""
    return _base.mse_loss(input, target, reduction)


def l1_loss(input, target, *, reduction="mean"):
    """Mean (or summed, or elementwise) absolute error."""
    return _base.l1_loss(input, target, reduction)


def smooth_l1_loss(input, target, *, reduction="mean", beta=1.0):
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


def binary_cross_entropy(input, target, weight=None, *, reduction="mean"):
    """BCE of probabilities in [0, 1] against targets in [0, 1]."""
    if weight is not None:
        _unsupported("binary_cross_entropy", "weight")
    return _base.binary_cross_entropy(input, target, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, *, reduction="mean",
                                     pos_weight=None):
    """BCE of sigmoid(input), computed stably from the logits."""
    if weight is not None or pos_weight is not None:
        _unsupported("binary_cross_entropy_with_logits", "weight" if weight is not None else "pos_weight")
    return _base.binary_cross_entropy_with_logits(input, target, reduction)


def cross_entropy(input, target, weight=None, *, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy of logits (N, C) or (C) against class indices (N) or ().

    One fused C op; with a class weight or an ignore_index that is not the
    default it is log_softmax followed by nll_loss (no label smoothing then)."""
    if weight is None and ignore_index == -100:
        return _base.cross_entropy(input, target, reduction, label_smoothing)
    if label_smoothing:
        _unsupported("cross_entropy", "label_smoothing together with weight or ignore_index")
    _input(input, "cross_entropy")
    return nll_loss(input.log_softmax(1 if input.dim() > 1 else 0), target, weight,
                    ignore_index=ignore_index, reduction=reduction)


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


def nll_loss(input, target, weight=None, *, ignore_index=-100, reduction="mean"):
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
    from aicraft.creation import from_numpy
    terms = input * from_numpy(coef)
    return terms.sum(class_dim) if reduction == "none" else terms.sum()


# ---- activations (aicraft/pointwise.py): silu, leaky_relu, softplus, gelu(approximate=),
# softmax(dtype=), ... with torch.nn.functional's signatures ----
from aicraft import pointwise as _pointwise  # noqa: E402
globals().update(_pointwise.functional_functions())

# ---- one_hot (aicraft/shapes.py) ----
from aicraft.shapes import one_hot  # noqa: E402,F401

# Norms and distances (aicraft/linalg.py).
from aicraft.linalg import cosine_similarity, normalize, pairwise_distance, pdist  # noqa: E402,F401

# ---- nnops: convolutions, pads, pools, resizing, norms, attention, losses (one block) ----
from aicraft.nn.attention import scaled_dot_product_attention  # noqa: E402,F401
from aicraft.nn.convnd import conv1d, conv_transpose1d, conv_transpose2d  # noqa: E402,F401
from aicraft.nn.dropouts import (alpha_dropout, bilinear, dropout1d, dropout2d,  # noqa: E402,F401
                                 dropout3d, feature_alpha_dropout)
from aicraft.nn.fold import channel_shuffle, fold, unfold  # noqa: E402,F401
from aicraft.nn.norm import (group_norm, instance_norm, local_response_norm,  # noqa: E402,F401
                             rms_norm)
from aicraft.nn.padding import pad  # noqa: E402,F401
from aicraft.nn.pooling import (adaptive_avg_pool1d, adaptive_avg_pool3d,  # noqa: E402,F401
                                adaptive_max_pool1d, adaptive_max_pool1d_with_indices,
                                adaptive_max_pool2d, adaptive_max_pool2d_with_indices,
                                avg_pool1d, lp_pool1d, lp_pool2d, max_pool1d,
                                max_pool1d_with_indices, max_pool2d_with_indices, max_unpool1d,
                                max_unpool2d, max_unpool3d)
from aicraft.nn.sparse import embedding, embedding_bag  # noqa: E402,F401,F811
from aicraft.nn.upsampling import (interpolate, pixel_shuffle, pixel_unshuffle,  # noqa: E402,F401
                                   upsample, upsample_bilinear, upsample_nearest)
from aicraft.nn.volumetric import (adaptive_max_pool3d, avg_pool3d, conv3d,  # noqa: E402,F401
                                   conv_transpose3d, max_pool3d)
_nll_loss, _smooth_l1_loss = nll_loss, smooth_l1_loss   # the forms losses.py builds on
from aicraft.nn.losses import (binary_cross_entropy,  # noqa: E402,F401,F811
                               binary_cross_entropy_with_logits, cosine_embedding_loss,
                               cross_entropy, gaussian_nll_loss, hinge_embedding_loss, huber_loss,
                               kl_div, l1_loss, margin_ranking_loss, mse_loss, multi_margin_loss,
                               multilabel_margin_loss, multilabel_soft_margin_loss, nll_loss,
                               poisson_nll_loss, smooth_l1_loss,
                               soft_margin_loss, triplet_margin_loss,
                               triplet_margin_with_distance_loss)
# ---- end nnops ----
