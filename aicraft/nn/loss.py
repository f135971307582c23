"""loss.py - the loss layers, with torch's signatures (positional and keyword, the
deprecated size_average/reduce mapped to a reduction as torch maps them): MSELoss,
L1Loss, SmoothL1Loss, HuberLoss, CrossEntropyLoss, NLLLoss, BCELoss, BCEWithLogitsLoss,
KLDivLoss, SoftMarginLoss, MarginRankingLoss, HingeEmbeddingLoss, CosineEmbeddingLoss,
TripletMarginLoss, TripletMarginWithDistanceLoss, PoissonNLLLoss, GaussianNLLLoss,
MultiLabelSoftMarginLoss, MultiMarginLoss. Each holds its options and calls
aicraft.nn.functional.
"""
from typing import Any, Optional

from aicraft.functional import _reduction
from aicraft.nn import functional as F
from aicraft.nn.losses import _legacy
from aicraft.nn.module import Module

__all__ = ["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "CrossEntropyLoss", "NLLLoss",
           "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "SoftMarginLoss", "MarginRankingLoss",
           "HingeEmbeddingLoss", "CosineEmbeddingLoss", "TripletMarginLoss",
           "TripletMarginWithDistanceLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss", "MultiLabelMarginLoss"]


class _Loss(Module):
    def __init__(self, size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        reduction = _legacy(size_average, reduce, reduction)
        if not (type(self) is KLDivLoss and reduction == "batchmean"):
            _reduction(reduction, type(self).__name__)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Optional[bool] = None,
                 reduce: Optional[bool] = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error; reduction 'mean', 'sum' or 'none'."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error; reduction 'mean', 'sum' or 'none'."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Squared error below beta, absolute error above it (F.smooth_l1_loss)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        if not isinstance(beta, (int, float)) or isinstance(beta, bool) or beta < 0:
            raise ValueError("SmoothL1Loss: beta must be a number >= 0, got %r" % (beta,))
        self.beta = float(beta)

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Squared error below delta, delta-scaled absolute error above it (F.huber_loss)."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = float(delta)

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities, each term times weight when given."""

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of sigmoid(logits), computed stably from the logits; weight
    scales each term, pos_weight the positive ones."""

    def __init__(self, weight: Any = None, size_average: Optional[bool] = None,
                 reduce: Optional[bool] = None, reduction: str = "mean",
                 pos_weight: Any = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of log-probabilities at the target classes."""

    def __init__(self, weight: Any = None, size_average: Optional[bool] = None,
                 ignore_index: int = -100, reduce: Optional[bool] = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of logits against class indices or class probabilities, with class
    weights, ignore_index and label smoothing."""

    def __init__(self, weight: Any = None, size_average: Optional[bool] = None,
                 ignore_index: int = -100, reduce: Optional[bool] = None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError("CrossEntropyLoss: label_smoothing %r is not in [0, 1]" % (label_smoothing,))
        self.ignore_index = ignore_index
        self.label_smoothing = float(label_smoothing)

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)

    def extra_repr(self):
        return "label_smoothing=%g" % self.label_smoothing if self.label_smoothing else ""


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of target from input (log-probabilities)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = bool(log_target)

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SoftMarginLoss(_Loss):
    """log(1 + exp(-y x)) (F.soft_margin_loss)."""

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class _MarginLoss(_Loss):
    _default_margin = 0.0

    def __init__(self, margin=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = float(self._default_margin if margin is None else margin)


class MarginRankingLoss(_MarginLoss):
    """max(0, -y (x1 - x2) + margin) (F.margin_ranking_loss)."""

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    """x where y is 1, max(0, margin - x) where y is -1 (F.hinge_embedding_loss)."""
    _default_margin = 1.0

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(_MarginLoss):
    """1 - cos(x1, x2) where y is 1, max(0, cos - margin) where y is -1."""

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """max(0, margin + d(a, p) - d(a, n)) with the p-norm distance."""

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError("TripletMarginLoss: expected margin to be greater than 0, got %r"
                             % (margin,))
        self.margin, self.p, self.eps, self.swap = float(margin), float(p), float(eps), bool(swap)

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """TripletMarginLoss with any distance function."""

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        self.distance_function = distance_function
        self.margin, self.swap = float(margin), bool(swap)

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """Negative log likelihood of a Poisson target (F.poisson_nll_loss)."""

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = bool(log_input), bool(full), float(eps)

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Negative log likelihood of a Gaussian target (F.gaussian_nll_loss)."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full, self.eps = bool(full), float(eps)

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Per-class logistic loss averaged over the classes (F.multilabel_soft_margin_loss)."""

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss (F.multi_margin_loss)."""

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p, self.margin = int(p), float(margin)

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-class multi-label hinge loss (F.multilabel_margin_loss)."""

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)
