"""functional.py - activations and losses as functions (`import aicraft.functional as F`).

Names and arguments follow torch.nn.functional.
"""
from aicraft._args import _is_numpy, _scalar
from aicraft._ffi import lib
from aicraft._wrapping import _wrap
from aicraft.errors import raise_error
from aicraft.tensor import Tensor

_REDUCTIONS = {"none": lib.AC_REDUCTION_NONE, "mean": lib.AC_REDUCTION_MEAN, "sum": lib.AC_REDUCTION_SUM}


def _input(x, fn, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError("%s(): argument '%s' must be a Tensor, not %s" % (fn, what, type(x).__name__))
    return x


def _target(target, fn):
    """A target tensor; NumPy arrays and lists are copied into one."""
    if isinstance(target, Tensor):
        return target
    if isinstance(target, (list, tuple)) or _is_numpy(target, "ndarray") or _scalar(target) is not None:
        from aicraft.creation import tensor
        return tensor(target)
    raise TypeError("%s(): target must be a Tensor, array or list, not %s" % (fn, type(target).__name__))


def _reduction(reduction, fn):
    try:
        return _REDUCTIONS[reduction]
    except (KeyError, TypeError):
        raise ValueError("%s(): reduction must be 'none', 'mean' or 'sum', not %r" % (fn, reduction)) from None


def _loss(name, c_fn):
    def loss(input, target, reduction="mean"):
        _input(input, name)
        target = _target(target, name)
        p = c_fn(input._ptr, target._ptr, _reduction(reduction, name))
        if p:
            return _wrap(p)
        raise_error(input, target)
    loss.__name__ = name
    return loss


def relu(input: Tensor) -> Tensor:
    return _input(input, "relu").relu()


def sigmoid(input: Tensor) -> Tensor:
    return _input(input, "sigmoid").sigmoid()


def tanh(input: Tensor) -> Tensor:
    return _input(input, "tanh").tanh()


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU in its exact (erf) form; the tanh approximation is not offered."""
    if approximate != "none":
        raise ValueError("gelu(): only approximate='none' is supported")
    return _input(input, "gelu").gelu()


def softmax(input: Tensor, dim: int) -> Tensor:
    return _input(input, "softmax").softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    return _input(input, "log_softmax").log_softmax(dim)


mse_loss = _loss("mse_loss", lib.ac_mse_loss)
mse_loss.__doc__ = "Mean (or summed, or elementwise) squared error."
l1_loss = _loss("l1_loss", lib.ac_l1_loss)
l1_loss.__doc__ = "Mean (or summed, or elementwise) absolute error."
binary_cross_entropy = _loss("binary_cross_entropy", lib.ac_binary_cross_entropy)
binary_cross_entropy.__doc__ = "BCE of probabilities in [0, 1] against targets in [0, 1]."
binary_cross_entropy_with_logits = _loss("binary_cross_entropy_with_logits", lib.ac_bce_with_logits)
binary_cross_entropy_with_logits.__doc__ = "BCE of sigmoid(logits), computed stably from the logits."


def cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of logits (N, C) or (C) against class indices (N) or ()."""
    _input(input, "cross_entropy")
    target = _target(target, "cross_entropy")
    smoothing = _scalar(label_smoothing)
    if smoothing is None:
        raise TypeError("cross_entropy(): label_smoothing must be a number")
    p = lib.ac_cross_entropy(input._ptr, target._ptr, _reduction(reduction, "cross_entropy"), smoothing)
    if p:
        return _wrap(p)
    raise_error(input, target)


# ---- activations (activations.py): silu, leaky_relu, softplus, gelu(approximate=), softmax(dtype=),
# ... with torch.nn.functional's signatures ----
from aicraft import activations as _activations  # noqa: E402
globals().update(_activations.functional_functions())
