"""utils - gradient clipping: clip_grad_norm_, its halves get_total_norm and
clip_grads_with_norm_, and clip_grad_value_ (torch.nn.utils); and the `rnn` submodule
(pad_sequence).

The clipping changes the parameters' .grad in place with C calls; nothing records a graph.
"""
import math

from aicraft._args import _scalar
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live
from aicraft.autograd import no_grad
from aicraft.creation import tensor
from aicraft.errors import raise_error
from aicraft.nn.utils import rnn
from aicraft.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm", "rnn"]


def _tensors(tensors, fn, what):
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError("%s: %s must be tensors, got %s" % (fn, what, type(t).__name__))
    return tensors


def _grads(parameters, fn):
    return [p.grad for p in _tensors(parameters, fn, "parameters") if p.grad is not None]


def _norm_type(norm_type, fn):
    norm_type = math.inf if norm_type in ("inf", math.inf) else _scalar(norm_type)
    if norm_type is None:
        raise TypeError("%s: norm_type must be a number" % fn)
    if not norm_type > 0:
        raise ValueError("%s: norm_type must be > 0, got %g" % (fn, norm_type))
    return float(norm_type)


def _device_norm(g, norm_type):
    """One tensor's norm with ops, for a device without a total-norm kernel."""
    if norm_type == math.inf:
        return g.abs().amax().item()
    return (g.abs() ** norm_type).sum().item() ** (1.0 / norm_type)


def _total_norm(tensors, norm_type):
    """The norm of the tensors as one vector: one C pass over each, in double."""
    ptrs = [_live(t) for t in tensors]
    if any(p.device != 0 for p in ptrs):
        with no_grad():
            norms = [_device_norm(t, norm_type) for t in tensors]
        if norm_type == math.inf:
            return max(norms)
        return sum(n ** norm_type for n in norms) ** (1.0 / norm_type)
    out = ffi.new("double *")
    if lib.ac_total_norm(ffi.new("AcTensor *[]", ptrs), len(ptrs), norm_type, out) < 0:
        raise_error(*tensors)
    return out[0]


def _scale(grads, max_norm, total):
    """Each grad times max_norm / (total + 1e-6) when that is below 1 (or NaN), in place."""
    ptrs = [_live(g) for g in grads]
    if any(p.device != 0 for p in ptrs):   # no scale kernel there: in-place ops
        coef = max_norm / (total + 1e-6)
        if not coef >= 1.0:
            with no_grad():
                for g in grads:
                    g.mul_(coef)
        return
    if lib.ac_clip_grads_with_norm(ffi.new("AcTensor *[]", ptrs), len(ptrs), max_norm, total) < 0:
        raise_error(*grads)


def _check_finite(total, norm_type, fn):
    if not math.isfinite(total):
        raise RuntimeError("%s: the total norm of order %g of the gradients is non-finite, so it "
                           "cannot be clipped" % (fn, norm_type))


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of order norm_type of the tensors (a tensor or an iterable of them)
    taken together as one vector, as a scalar tensor. foreach is accepted for
    PyTorch's signature; there is one way here."""
    norm_type = _norm_type(norm_type, "get_total_norm")
    tensors = _tensors(tensors, "get_total_norm", "tensors")
    if not tensors:
        return tensor(0.0)
    total = _total_norm(tensors, norm_type)
    if error_if_nonfinite:
        _check_finite(total, norm_type, "get_total_norm")
    return tensor(total)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the gradients so that their joint norm (of order norm_type, over all
    of them as one vector) is at most max_norm. Returns the norm before clipping."""
    max_norm = _scalar(max_norm)
    if max_norm is None:
        raise TypeError("clip_grad_norm_: max_norm must be a number")
    norm_type = _norm_type(norm_type, "clip_grad_norm_")
    grads = _grads(parameters, "clip_grad_norm_")
    if not grads:
        return tensor(0.0)
    total = _total_norm(grads, norm_type)
    if error_if_nonfinite:
        _check_finite(total, norm_type, "clip_grad_norm_")
    _scale(grads, max_norm, total)
    return tensor(total)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the parameters' gradients in place by max_norm / (total_norm + 1e-6) when
    that is below 1: clip_grad_norm_ after get_total_norm. total_norm is a number or a
    one-element tensor; foreach is accepted for PyTorch's signature."""
    max_norm = _scalar(max_norm)
    if isinstance(total_norm, Tensor):
        total_norm = total_norm.item()
    total_norm = _scalar(total_norm)
    if max_norm is None or total_norm is None:
        raise TypeError("clip_grads_with_norm_: max_norm and total_norm must be numbers")
    grads = _grads(parameters, "clip_grads_with_norm_")
    if grads:
        _scale(grads, max_norm, total_norm)


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient element to [-clip_value, clip_value]."""
    clip_value = _scalar(clip_value)
    if clip_value is None:
        raise TypeError("clip_grad_value_: clip_value must be a number")
    with no_grad():
        for g in _grads(parameters, "clip_grad_value_"):
            g.copy_(g.clamp(-clip_value, clip_value))
