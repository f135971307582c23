"""optimizer.py - aicraft.optim.Optimizer, the base of every optimizer in aicraft.optim.

As torch.optim.Optimizer: `param_groups` (a list of dicts, each holding
"params" and its own options), `state` (a dict per parameter), `zero_grad`,
`step(closure)`, `state_dict` and `load_state_dict`. The update math is in C
(libac/src/optim); a subclass's `_step_group` makes one C call per parameter
that has a gradient.

State tensors always live at root, never in a scope: a step may run inside
`with ac.checkpoint():`, and the state must outlive it.
"""
import warnings
from collections import defaultdict
from numbers import Integral, Real
from typing import Any, Callable, Dict, Iterable, Optional

from aicraft import _trace
from aicraft._ffi import lib
from aicraft._wrapping import _live, _wrap
from aicraft.autograd import enable_grad
from aicraft.creation import tensor as _tensor
from aicraft.errors import ShapeError, raise_error
from aicraft.tensor import Tensor

_SET_MESSAGE = ("optimizer parameters need to be organized in ordered collections, but the ordering "
                "of tensors in sets will change between runs. Please use a list instead.")


def root_zeros_like(param):
    """A tensor of zeros with param's shape, made at root whatever scope is open."""
    p = lib.ac_tensor_keep(_live(param))
    if not p:
        raise_error(param)
    t = _wrap(p)
    if lib.ac_tensor_fill_(p, 0.0) < 0:
        raise_error(t)
    return t


class Optimizer:
    """Base class: holds the parameter groups and the per-parameter state.

    Subclasses set `_state_tensors` (the names of their state entries that are
    tensors of the parameter's shape) and define `_check_group(group)` and
    `_step_group(group)`.
    """

    _state_tensors = ()

    def __init__(self, params: Iterable[Any], defaults: Dict[str, Any]) -> None:
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        if isinstance(params, set):
            raise TypeError(_SET_MESSAGE)
        param_groups = list(params)
        if not param_groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __setattr__(self, name, value):
        if name in ("state", "param_groups") and name in self.__dict__:
            _trace.changed()   # compiled steps hold the old ones: they record again
        object.__setattr__(self, name, value)

    def add_param_group(self, param_group):
        """Add a group of parameters with options of its own; missing options take the defaults."""
        if not isinstance(param_group, dict):
            raise TypeError("param_group must be a dict, but got %s" % type(param_group).__name__)
        if "params" not in param_group:
            raise KeyError("param_group must have a 'params' entry")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(_SET_MESSAGE)
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is %s"
                                % type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "they are updated once per occurrence", stacklevel=2)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        group = _trace.ParamGroup(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        _check_numbers(group)
        self._check_group(group)
        if self.param_groups:
            _trace.changed()   # compiled steps step the groups they recorded: they record again
        self.param_groups.append(group)

    def _check_group(self, group):
        """Raise ValueError for an option out of range (subclasses)."""

    def _step_group(self, group):
        raise NotImplementedError

    def _with_grad(self, group):
        """(p, its AcTensor*, its state dict) for each parameter of group that has a grad:
        the parameters a step updates."""
        state = self.state
        for p in group["params"]:
            ptr = _live(p)
            if ptr.grad:
                yield p, ptr, state[p]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's gradient (or fill it with zeros when set_to_none is False)."""
        # A compiled step records the call even without a grad: later calls have one.
        tracing = _trace.recording() is not None
        for group in self.param_groups:
            for p in group["params"]:
                ptr = _live(p)
                if not ptr.grad and not (tracing and set_to_none):
                    continue
                rc = lib.ac_tensor_zero_grad(ptr) if set_to_none else lib.ac_tensor_fill_(ptr.grad, 0.0)
                if rc < 0:
                    raise_error(p)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """One update of every parameter that has a gradient. closure, if given,
        re-evaluates the model and returns the loss, which step returns."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._step_group(group)
        return loss

    # ---- saving and loading ------------------------------------------------

    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}, as PyTorch.

        Parameters are numbered in the order of the groups. Unlike PyTorch, the
        state tensors are copies, so the dict is a snapshot that later steps do
        not change.
        """
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {key: value for key, value in group.items() if key != "params"}
            start = len(index)
            for i, p in enumerate(group["params"]):
                index.setdefault(id(p), start + i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {}
        for p, entries in self.state.items():
            key = index[id(p)] if isinstance(p, Tensor) else p
            state[key] = {name: value.keep() if isinstance(value, Tensor) else value
                          for name, value in entries.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Take options and state from a dict made by state_dict(); its tensors are copied.
        Nothing changes if the dict does not fit this optimizer."""
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("state"), dict) \
                or not isinstance(state_dict.get("param_groups"), (list, tuple)):
            raise ValueError("load_state_dict: expected a dict with a 'state' dict and a 'param_groups' "
                             "list, as state_dict() returns")
        saved_groups = state_dict["param_groups"]
        for saved in saved_groups:
            if not isinstance(saved, dict) or not isinstance(saved.get("params"), (list, tuple)):
                raise ValueError("load_state_dict: each param group must be a dict with a 'params' list")
        for entries in state_dict["state"].values():
            if not isinstance(entries, dict):
                raise ValueError("load_state_dict: each parameter's state must be a dict, not %s"
                                 % type(entries).__name__)
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for group, saved in zip(self.param_groups, saved_groups):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match "
                                 "the size of optimizer's group")
        param_of = {}
        for group, saved in zip(self.param_groups, saved_groups):
            param_of.update(zip(saved["params"], group["params"]))
        state = defaultdict(dict)
        for key, entries in state_dict["state"].items():
            if key in param_of:
                p = param_of[key]
                state[p] = {name: self._load_entry(p, key, name, value) for name, value in entries.items()}
            else:
                state[key] = entries
        groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            new_group = _trace.ParamGroup(saved)
            new_group["params"] = group["params"]
            for name, default in self.defaults.items():
                if name not in new_group:
                    raise ValueError("load_state_dict: a param group lacks the option %r" % name)
            _check_numbers(new_group)
            self._check_group(new_group)
            groups.append(new_group)
        self.state = state
        self.param_groups = groups

    def _load_entry(self, param, index, name, value):
        """A saved state entry as this optimizer keeps it: tensors as root copies of
        the parameter's shape, one-element values (PyTorch's step) as numbers."""
        import numpy as np
        if name in self._state_tensors and value is not None:
            t = value if isinstance(value, Tensor) else _tensor(np.asarray(value, dtype=np.float32))
            if t.shape != param.shape:
                raise ShapeError("load_state_dict: state %r of parameter %s has shape %s, but the "
                                 "parameter has shape %s" % (name, index, t.shape, param.shape))
            return t.keep()
        if value is None or isinstance(value, Real):
            number = value
        else:
            try:
                number = float(np.asarray(value, dtype=np.float64).reshape(()))
            except (TypeError, ValueError):
                raise ValueError("load_state_dict: state %r of parameter %s is %s, not a number"
                                 % (name, index, type(value).__name__)) from None
            number = int(number) if number.is_integer() else number
        if name == "step" and number is not None:   # a step count C takes as an int64
            if isinstance(number, Integral) and not isinstance(number, bool):
                number = int(number)
            elif isinstance(number, Real) and float(number).is_integer():
                number = int(number)
            if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < 2 ** 53:
                raise ValueError("load_state_dict: state 'step' of parameter %s is %r, not a step count "
                                 "(an int in [0, 2**53))" % (index, number))
        elif isinstance(number, Real):
            _check_number(name, number)
        return number

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append("Parameter Group %d" % i)
            for key in sorted(group):
                if key != "params":
                    lines.append("    %s: %s" % (key, group[key]))
        lines.append(")")
        return "\n".join(lines)


def _check_number(name, value):
    try:
        float(value)
    except OverflowError:
        raise ValueError("Invalid %s value: %r is out of a double's range" % (name, value)) from None


def _check_numbers(group):
    """ValueError for an option C cannot take as a double (lr=10**400), before any step does."""
    for name, value in group.items():
        if name == "params":
            continue
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, Real) and not isinstance(v, bool):
                _check_number(name, v)
