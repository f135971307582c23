"""adaptive.py - aicraft.optim.Adadelta, RMSprop and Adagrad, as torch.optim's.

Each scales a parameter's step element by element by its squared gradients.
The updates (libac/src/optim/adaptive.c), per parameter p with gradient g,
after g = g + weight_decay * p:

    Adadelta:  v = rho * v + (1 - rho) * g^2
               delta = sqrt(u + eps) / sqrt(v + eps) * g
               u = rho * u + (1 - rho) * delta^2
               p = p - lr * delta
    RMSprop:   v = alpha * v + (1 - alpha) * g^2
               centered: g_avg = alpha * g_avg + (1 - alpha) * g;  v~ = v - g_avg^2
               avg = sqrt(v~ or v) + eps
               momentum > 0: buf = momentum * buf + g / avg;  p = p - lr * buf
               else:         p = p - lr * g / avg
    Adagrad:   sum = sum + g^2
               p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)
"""
from aicraft._ffi import ffi, lib
from aicraft.errors import raise_error
from aicraft.optim.optimizer import Optimizer, root_zeros_like

_NULL = ffi.NULL


def _check_at_least_zero(group, names):
    """PyTorch's checks: each option named is a number >= 0 (NaN fails too)."""
    for key, label in names:
        if not 0.0 <= group[key]:
            raise ValueError("Invalid %s: %s" % (label, group[key]))


class Adadelta(Optimizer):
    """Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0).

    State per parameter: "step" (an int), "square_avg" and "acc_delta".
    """

    _state_tensors = ("square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0):
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        self._check_group(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check_at_least_zero(group, [("lr", "learning rate")])
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError("Invalid rho value: %s" % group["rho"])
        _check_at_least_zero(group, [("eps", "epsilon value"), ("weight_decay", "weight_decay value")])

    def _step_group(self, group):
        lr, rho, eps, weight_decay = group["lr"], group["rho"], group["eps"], group["weight_decay"]
        for p, ptr, entries in self._with_grad(group):
            if not entries:
                entries.update(step=0, square_avg=root_zeros_like(p), acc_delta=root_zeros_like(p))
            if lib.ac_adadelta_step(ptr, entries["square_avg"]._ptr, entries["acc_delta"]._ptr, lr,
                                    rho, eps, weight_decay) < 0:
                raise_error(p)
            entries["step"] += 1


class RMSprop(Optimizer):
    """RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False).

    State per parameter: "step" (an int), "square_avg", and "momentum_buffer" when
    momentum > 0 and "grad_avg" when centered, made on the parameter's first step.
    """

    _state_tensors = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False):
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered)
        self._check_group(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check_at_least_zero(group, [("lr", "learning rate"), ("eps", "epsilon value"),
                                     ("momentum", "momentum value"),
                                     ("weight_decay", "weight_decay value"), ("alpha", "alpha value")])

    def _step_group(self, group):
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        weight_decay, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
        for p, ptr, entries in self._with_grad(group):
            if not entries:
                entries.update(step=0, square_avg=root_zeros_like(p))
                if momentum > 0:
                    entries["momentum_buffer"] = root_zeros_like(p)
                if centered:
                    entries["grad_avg"] = root_zeros_like(p)
            buf, grad_avg = entries.get("momentum_buffer"), entries.get("grad_avg")
            if lib.ac_rmsprop_step(ptr, entries["square_avg"]._ptr, _NULL if buf is None else buf._ptr,
                                   _NULL if grad_avg is None else grad_avg._ptr, lr, alpha, eps,
                                   weight_decay, momentum, bool(centered)) < 0:
                raise_error(p)
            entries["step"] += 1


class Adagrad(Optimizer):
    """Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10).

    State per parameter, made for every parameter when the optimizer is (as
    PyTorch does): "step" (an int) and "sum", filled with initial_accumulator_value.
    """

    _state_tensors = ("sum",)

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10):
        defaults = dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, eps=eps)
        self._check_group(defaults)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _check_group(self, group):
        _check_at_least_zero(group, [("lr", "learning rate"), ("lr_decay", "lr_decay value"),
                                     ("weight_decay", "weight_decay value"),
                                     ("initial_accumulator_value", "initial_accumulator_value value"),
                                     ("eps", "epsilon value")])

    def _init_state(self, p, group):
        total = root_zeros_like(p)
        if lib.ac_tensor_fill_(total._ptr, group["initial_accumulator_value"]) < 0:
            raise_error(total)
        self.state[p].update(step=0, sum=total)

    def _step_group(self, group):
        lr, lr_decay, weight_decay, eps = group["lr"], group["lr_decay"], group["weight_decay"], group["eps"]
        for p, ptr, entries in self._with_grad(group):
            if not entries:           # a parameter of a group added after construction
                self._init_state(p, group)
            step = entries["step"] + 1
            if lib.ac_adagrad_step(ptr, entries["sum"]._ptr, step, lr, lr_decay, weight_decay, eps) < 0:
                raise_error(p)
            entries["step"] = step
