"""loss.py - the loss layers: MSELoss, L1Loss, SmoothL1Loss, CrossEntropyLoss,
NLLLoss, BCELoss, BCEWithLogitsLoss. Each holds its options and calls aicraft.nn.functional.
"""
from typing import Any

from aicraft.functional import _reduction
from aicraft.nn import functional as F
from aicraft.nn.module import Module

__all__ = ["MSELoss", "L1Loss", "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss",
           "BCEWithLogitsLoss"]


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        _reduction(reduction, type(self).__name__)
        self.reduction = reduction


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

    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        if not isinstance(beta, (int, float)) or isinstance(beta, bool) or beta < 0:
            raise ValueError("SmoothL1Loss: beta must be a number >= 0, got %r" % (beta,))
        self.beta = float(beta)

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class BCELoss(_Loss):
    """Binary cross entropy of probabilities."""

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of sigmoid(logits), computed stably from the logits."""

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, reduction=self.reduction)


class NLLLoss(_Loss):
    """Negative log likelihood of log-probabilities at the target classes."""

    def __init__(self, weight=None, *, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_Loss):
    """Cross entropy of logits against class indices, with optional label smoothing."""

    def __init__(self, weight: Any = None, *, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError("CrossEntropyLoss: label_smoothing %r is not in [0, 1]" % (label_smoothing,))
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.label_smoothing = float(label_smoothing)

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)

    def extra_repr(self):
        return "label_smoothing=%g" % self.label_smoothing if self.label_smoothing else ""
