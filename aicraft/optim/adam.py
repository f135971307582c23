"""adam.py - aicraft.optim.Adam and AdamW, as torch.optim.Adam / AdamW (amsgrad off).

The update (libac/src/optim/adam.c), per parameter p with gradient g, at step t:
    Adam:  g = g + weight_decay * p          AdamW:  p = p * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
"""
from typing import Any, Iterable, Tuple

from aicraft import _trace
from aicraft._ffi import lib
from aicraft.errors import raise_error
from aicraft.optim.optimizer import Optimizer, root_zeros_like

_adam_step = lib.ac_adam_step


class Adam(Optimizer):
    """Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0).

    State per parameter: "step" (an int), "exp_avg" and "exp_avg_sq".
    """

    _state_tensors = ("exp_avg", "exp_avg_sq")
    _decoupled = 0

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0) -> None:
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        self._check_group(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group):
        betas = group["betas"]
        if not 0.0 <= group["lr"]:
            raise ValueError("Invalid learning rate: %s" % group["lr"])
        if not 0.0 <= group["eps"]:
            raise ValueError("Invalid epsilon value: %s" % group["eps"])
        if len(betas) != 2:
            raise ValueError("betas must be a pair (beta1, beta2), not %r" % (betas,))
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError("Invalid beta parameter at index %d: %s" % (i, beta))
        if not 0.0 <= group["weight_decay"]:
            raise ValueError("Invalid weight_decay value: %s" % group["weight_decay"])

    def _step_group(self, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, decoupled = group["weight_decay"], self._decoupled
        trace = _trace.recording()
        for p, ptr, entries in self._with_grad(group):
            if not entries:
                entries["step"] = 0
                entries["exp_avg"] = root_zeros_like(p)
                entries["exp_avg_sq"] = root_zeros_like(p)
            step = entries["step"] + 1
            if _adam_step(ptr, entries["exp_avg"]._ptr, entries["exp_avg_sq"]._ptr, step, lr, beta1,
                          beta2, eps, weight_decay, decoupled) < 0:
                raise_error(p)
            entries["step"] = step
            if trace is not None:   # a compiled step reads these per call
                trace.bind_counter(0, entries, "step")
                trace.bind_item(1, group, "lr", lr)


class AdamW(Adam):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2): Adam with
    weight decay applied to the parameter directly instead of through the gradient."""

    _decoupled = 1

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
