"""amp.py - ac.amp.autocast and ac.amp.GradScaler, as torch.amp's, for aicraft, which
computes in float32.

autocast(device_type, dtype=None, enabled=True, cache_enabled=None) is a context
manager and decorator that changes nothing: ops inside compute in float32 as
everywhere (torch would run some ops in float16/bfloat16 there; aicraft keeps the
float32 result, which is at least as accurate). It checks its arguments as torch does.

GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
growth_interval=2000, enabled=True) is torch's loss scaler. Asked for on "cuda" with
no GPU it disables itself with a warning, as torch's does; disabled, scale() returns
its input, step() calls optimizer.step(), unscale_() and update() do nothing and
get_scale() is 1.0. Enabled (on "cpu", or "cuda" with a GPU) it scales, unscales,
skips steps whose gradients are not finite and adapts its scale as torch's does.
"""
import functools
import math
import warnings
from collections.abc import Mapping

from aicraft import cuda

__all__ = ["autocast", "GradScaler", "is_autocast_available"]

_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "xla", "hpu", "mtia", "meta")


def is_autocast_available(device_type):
    """True for "cpu" and "cuda" (where autocast is accepted; it keeps float32)."""
    return device_type in ("cpu", "cuda")


class autocast:
    """Mixed precision region: in aicraft ops keep computing in float32 (see the module)."""

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError("autocast: device_type must be a str such as 'cuda' or 'cpu', not %s"
                             % type(device_type).__name__)
        if device_type not in _DEVICE_TYPES:
            raise RuntimeError("autocast: unknown device_type %r" % device_type)
        if not isinstance(enabled, bool):
            raise ValueError("autocast: enabled must be a bool, not %s" % type(enabled).__name__)
        from aicraft import dtypes
        if dtype is not None and not isinstance(dtype, dtypes.dtype):
            raise ValueError("autocast: dtype must be an aicraft dtype, not %r" % (dtype,))
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else (
            dtypes.float16 if device_type == "cuda" else dtypes.bfloat16)
        self._enabled = enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


def _map(value, fn):
    """fn applied to every Tensor in value (nested lists, tuples, dicts)."""
    from aicraft.tensor import Tensor
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, fn) for v in value)
    if isinstance(value, Mapping):
        return {k: _map(v, fn) for k, v in value.items()}
    raise ValueError("GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, not %s"
                     % type(value).__name__)


_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    """torch.amp.GradScaler's loss scaling (see the module)."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not isinstance(device, str):
            device = str(device)
        device_type = device.split(":")[0]
        if enabled and device_type == "cuda":
            if not cuda.is_available():
                warnings.warn("GradScaler is enabled, but CUDA is not available.  Disabling.")
                enabled = False
        if growth_factor <= 1.0:
            raise ValueError("GradScaler: growth_factor should be > 1, got %r" % (growth_factor,))
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError("GradScaler: backoff_factor should be in (0, 1), got %r" % (backoff_factor,))
        self._device = device
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def scale(self, outputs):
        """outputs times the scale (the same object when disabled)."""
        if not self._enabled:
            return outputs
        scale = self._scale
        return _map(outputs, lambda t: t * scale)

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": False})

    def unscale_(self, optimizer):
        """Divide optimizer's gradients by the scale, in place, noting any that is not finite."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        from aicraft.autograd import no_grad
        inv = 1.0 / self._scale
        found_inf = False
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    grad = param.grad
                    if grad is None or grad.numel() == 0:
                        continue
                    grad.mul_(inv)
                    if not math.isfinite(grad.abs().max().item()):
                        found_inf = True
        state["found_inf"] = found_inf
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless a gradient was not finite (then skipped, None)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """Adapt the scale: back off after a step with non-finite gradients, grow after
        growth_interval steps without; or set it to new_scale."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(s["found_inf"] for s in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


# ---- ac.cuda.amp (scripts helper): torch.cuda.amp's names over aicraft.amp ----

def _make_amp_module():
    """aicraft.cuda.amp as a module (importable: `from aicraft.cuda.amp import GradScaler`)."""
    import sys
    import types

    _amp = sys.modules[__name__]
    module = types.ModuleType("aicraft.cuda.amp", "torch.cuda.amp's autocast and GradScaler "
                              "(see aicraft.amp): autocast keeps float32, GradScaler is torch's.")

    class autocast(_amp.autocast):
        """torch.cuda.amp.autocast(enabled=True, dtype=float16, cache_enabled=True)."""

        def __init__(self, enabled=True, dtype=None, cache_enabled=True):
            super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class GradScaler(_amp.GradScaler):
        """torch.cuda.amp.GradScaler: aicraft.amp.GradScaler on "cuda"."""

        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True):
            super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)

    autocast.__module__ = GradScaler.__module__ = module.__name__
    module.autocast, module.GradScaler = autocast, GradScaler
    sys.modules[module.__name__] = module
    return module


# Made here, above cuda.py, and hung on it as cuda.amp.
cuda.amp = _make_amp_module()
