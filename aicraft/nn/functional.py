"""functional.py - aicraft.nn.functional (`import aicraft.nn.functional as F`).

Everything aicraft.functional offers is re-exported from it; this module adds
`linear`, the layer functions (conv2d, layer_norm, dropout2d, ...), and the losses
with torch.nn.functional's signatures (losses.py: `F.cross_entropy(x, y,
label_smoothing=0.1)`). Arguments PyTorch takes that
aicraft does not implement raise NotImplementedError when given a non-default
value, rather than being silently ignored; its deprecated size_average and
reduce are not taken.
"""
import aicraft.functional as _base
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _wrap
from aicraft.errors import raise_error
from aicraft.functional import _input
from aicraft.nn.conv import (adaptive_avg_pool2d, avg_pool2d, batch_norm, conv2d,  # noqa: F401
                             dropout, dropout2d, max_pool2d)
from aicraft.nn.norm import layer_norm  # noqa: F401
from aicraft.nn.rnn import embedding

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


# ---- activations (aicraft/activations.py): silu, leaky_relu, softplus, gelu(approximate=),
# softmax(dtype=), ... with torch.nn.functional's signatures ----
from aicraft import activations as _activations  # noqa: E402
globals().update(_activations.functional_functions())

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
from aicraft.nn.losses import (binary_cross_entropy,  # noqa: E402,F401,F811
                               binary_cross_entropy_with_logits, cosine_embedding_loss,
                               cross_entropy, gaussian_nll_loss, hinge_embedding_loss, huber_loss,
                               kl_div, l1_loss, margin_ranking_loss, mse_loss, multi_margin_loss,
                               multilabel_margin_loss, multilabel_soft_margin_loss, nll_loss,
                               poisson_nll_loss, smooth_l1_loss,
                               soft_margin_loss, triplet_margin_loss,
                               triplet_margin_with_distance_loss)
# ---- end nnops ----
