"""lr_scheduler.py - learning-rate schedules, as torch.optim.lr_scheduler.

A scheduler rewrites `group["lr"]` of its optimizer's param groups each time
`step()` is called (once per epoch, after the optimizer's steps). As in
PyTorch, most schedules are chainable: each step scales the group's current
lr, so two schedulers on one optimizer multiply. Stepping once per epoch from
the start gives the closed forms in each class's docstring; `step(epoch)` (as
in PyTorch, deprecated) jumps straight to the closed form.
"""
import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from aicraft.optim.optimizer import Optimizer

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler.")


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError("%s is not an Optimizer" % type(optimizer).__name__)


class LRScheduler:
    """Base class: remembers each group's initial lr and the epoch count `last_epoch`."""

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError("param 'initial_lr' is not specified in param_groups[%d] when "
                                   "resuming an optimizer" % i)
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self):
        """The lr of each group for epoch self.last_epoch, from the groups' current lrs."""
        raise NotImplementedError

    def get_last_lr(self):
        """The lrs the last step() set, one per param group."""
        return self._last_lr

    def step(self, epoch=None):
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Everything but the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler     # PyTorch's older name


def _group_lrs(scheduler):
    return [group["lr"] for group in scheduler.optimizer.param_groups]


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch); lr_lambda is one function or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(optimizer)
        n_groups = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n_groups:
                raise ValueError("Expected %d lr_lambdas, but got %d" % (n_groups, len(lr_lambda)))
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n_groups
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base_lr * fn(self.last_epoch) for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        """As the base; of the lambdas, only callable objects are saved (their __dict__),
        plain functions are not."""
        state = {key: value for key, value in self.__dict__.items()
                 if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) or not hasattr(fn, "__dict__")
                               else dict(fn.__dict__) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        saved = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)


class StepLR(LRScheduler):
    """lr = initial_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size < 1:
            raise ValueError("step_size must be a positive int, not %r" % (step_size,))
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _group_lrs(self)
        return [lr * self.gamma for lr in _group_lrs(self)]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = initial_lr * gamma ** (number of milestones <= epoch); a repeated milestone counts twice."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return _group_lrs(self)
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [lr * factor for lr in _group_lrs(self)]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = initial_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return _group_lrs(self)
        return [lr * self.gamma for lr in _group_lrs(self)]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
    (past T_max the cosine climbs back, as PyTorch's)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if isinstance(T_max, bool) or not isinstance(T_max, int) or T_max < 1:
            raise ValueError("T_max must be a positive int, not %r" % (T_max,))
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        epoch, t_max, eta_min = self.last_epoch, self.T_max, self.eta_min
        lrs = _group_lrs(self)
        if epoch == 0:
            return lrs
        if self._step_count == 1 and epoch > 0:
            return [eta_min + (base_lr - eta_min) * (1 + math.cos(epoch * math.pi / t_max)) / 2
                    for base_lr in self.base_lrs]
        if (epoch - 1 - t_max) % (2 * t_max) == 0:
            # the bottom of the curve: the ratio below would divide by zero
            return [lr + (base_lr - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
                    for base_lr, lr in zip(self.base_lrs, lrs)]
        ratio = (1 + math.cos(math.pi * epoch / t_max)) / (1 + math.cos(math.pi * (epoch - 1) / t_max))
        return [ratio * (lr - eta_min) + eta_min for lr in lrs]

    def _get_closed_form_lr(self):
        cosine = math.cos(math.pi * self.last_epoch / self.T_max)
        return [self.eta_min + (base_lr - self.eta_min) * (1 + cosine) / 2 for base_lr in self.base_lrs]


__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR"]
