"""utils - gradient clipping: clip_grad_norm_ and clip_grad_value_ (torch.nn.utils),
and the `rnn` submodule (pad_sequence).

Both change the parameters' .grad in place with C ops; neither records a graph.
"""
import math

from aicraft.autograd import no_grad
from aicraft.nn.utils import rnn
from aicraft.creation import tensor
from aicraft._args import _scalar
from aicraft.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "rnn"]


def _grads(parameters, fn):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = []
    for p in parameters:
        if not isinstance(p, Tensor):
            raise TypeError("%s: parameters must be tensors, got %s" % (fn, type(p).__name__))
        g = p.grad
        if g is not None:
            grads.append(g)
    return grads


def _grad_norm(g, norm_type):
    if norm_type == math.inf:
        return g.abs().amax().item()
    if norm_type == 2.0:
        return math.sqrt((g * g).sum().item())
    if norm_type == 1.0:
        return g.abs().sum().item()
    return (g.abs() ** norm_type).sum().item() ** (1.0 / norm_type)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the gradients so that their joint norm (of order norm_type, over all
    of them as one vector) is at most max_norm. Returns the norm before clipping."""
    max_norm = _scalar(max_norm)
    norm_type = math.inf if norm_type in ("inf", math.inf) else _scalar(norm_type)
    if max_norm is None or norm_type is None:
        raise TypeError("clip_grad_norm_: max_norm and norm_type must be numbers")
    if norm_type <= 0:
        raise ValueError("clip_grad_norm_: norm_type must be > 0, got %g" % norm_type)
    grads = _grads(parameters, "clip_grad_norm_")
    if not grads:
        return tensor(0.0)
    with no_grad():
        norms = [_grad_norm(g, norm_type) for g in grads]
        if norm_type == math.inf:
            total = max(norms)
        else:
            total = sum(n ** norm_type for n in norms) ** (1.0 / norm_type)
        if error_if_nonfinite and not math.isfinite(total):
            raise RuntimeError("clip_grad_norm_: the total norm of order %g of the gradients is "
                               "non-finite, so it cannot be clipped" % norm_type)
        coef = max_norm / (total + 1e-6)
        if coef < 1.0:
            for g in grads:
                g.mul_(coef)
    return tensor(total)


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient element to [-clip_value, clip_value]."""
    clip_value = _scalar(clip_value)
    if clip_value is None:
        raise TypeError("clip_grad_value_: clip_value must be a number")
    with no_grad():
        for g in _grads(parameters, "clip_grad_value_"):
            g.copy_(g.clamp(-clip_value, clip_value))
