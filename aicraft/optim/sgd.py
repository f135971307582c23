"""sgd.py - aicraft.optim.SGD: stochastic gradient descent with momentum, as torch.optim.SGD.

The update (libac/src/optim/sgd.c), per parameter p with gradient g:
    g = g + weight_decay * p
    buf = g on the first step, else momentum * buf + (1 - dampening) * g
    g = g + momentum * buf if nesterov else buf      (when momentum != 0)
    p = p - lr * g
"""
from typing import Any, Iterable

from aicraft import _trace
from aicraft._ffi import ffi, lib
from aicraft.errors import raise_error
from aicraft.optim.optimizer import Optimizer, root_zeros_like

_NULL = ffi.NULL
_sgd_step = lib.ac_sgd_step


class SGD(Optimizer):
    """SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False).

    State per parameter (with momentum only): "momentum_buffer".
    """

    _state_tensors = ("momentum_buffer",)

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False) -> None:
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov)
        self._check_group(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group):
        if not 0.0 <= group["lr"]:
            raise ValueError("Invalid learning rate: %s" % group["lr"])
        if not 0.0 <= group["momentum"]:
            raise ValueError("Invalid momentum value: %s" % group["momentum"])
        if not 0.0 <= group["weight_decay"]:
            raise ValueError("Invalid weight_decay value: %s" % group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _step_group(self, group):
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        nesterov, weight_decay = group["nesterov"], group["weight_decay"]
        trace = _trace.recording()
        for p, ptr, entries in self._with_grad(group):
            if not momentum:
                rc = _sgd_step(ptr, _NULL, 1, lr, 0.0, dampening, nesterov, weight_decay)
            else:
                buf = entries.get("momentum_buffer")
                if buf is None:
                    # The first step writes the buffer; keep it only once that succeeded.
                    buf = root_zeros_like(p)
                    rc = _sgd_step(ptr, buf._ptr, 1, lr, momentum, dampening, nesterov, weight_decay)
                    if rc == 0:
                        entries["momentum_buffer"] = buf
                        if trace is not None:   # later calls find the buffer written
                            trace.bind_later(0, 2)
                else:
                    rc = _sgd_step(ptr, buf._ptr, 2, lr, momentum, dampening, nesterov, weight_decay)
            if rc < 0:
                raise_error(p)
            if trace is not None:   # a compiled step reads the lr per call
                trace.bind_item(1, group, "lr", lr)

