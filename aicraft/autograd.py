"""autograd.py - grad mode: ac.no_grad(), ac.enable_grad(), ac.set_grad_enabled(), ac.is_grad_enabled().

Grad mode is per thread in C (ac_set_grad_enabled returns the previous mode), so
each context restores exactly the mode it found. The contexts also work as
function decorators, as PyTorch's do. Also the callbacks Tensor.backward()
runs when it is done (after_backward).
"""
import functools
from typing import Any, Callable, List, TypeVar, cast

from aicraft._ffi import lib

F = TypeVar("F", bound=Callable[..., Any])

# Called, in order, with no arguments, when a Tensor.backward() has filled the
# leaves' grads: DistributedDataParallel averages its gradients over ranks here.
# A callback that is done removes itself.
after_backward: List[Callable[[], None]] = []


class _GradMode:
    """Set grad mode on enter, restore the previous mode on exit."""

    __slots__ = ("_previous",)
    _enabled = True

    def __init__(self) -> None:
        self._previous = []

    def __enter__(self) -> None:
        self._previous.append(lib.ac_set_grad_enabled(self._enabled))
        return None

    def __exit__(self, *exc: Any) -> bool:
        lib.ac_set_grad_enabled(self._previous.pop())
        return False

    def __call__(self, fn: F) -> F:
        if not callable(fn):
            raise TypeError("%s() decorates a function, not %s" % (type(self).__name__, type(fn).__name__))
        mode = type(self)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with mode():
                return fn(*args, **kwargs)
        return cast(F, wrapper)


class no_grad(_GradMode):
    """Ops inside record no graph. `with ac.no_grad():` or `@ac.no_grad()`."""

    __slots__ = ()
    _enabled = False


class enable_grad(_GradMode):
    """Ops inside record the graph again, e.g. inside a no_grad block."""

    __slots__ = ()
    _enabled = True


class set_grad_enabled(_GradMode):
    """Set grad mode now; used as a context, restore the previous mode on exit."""

    __slots__ = ("_mode",)

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, (bool, int)):
            raise TypeError("set_grad_enabled: mode must be a bool, not %s" % type(mode).__name__)
        super().__init__()
        self._mode = bool(mode)
        self._previous.append(lib.ac_set_grad_enabled(self._mode))

    def __enter__(self) -> None:
        return None

    def __call__(self, fn: F) -> F:
        raise TypeError("set_grad_enabled cannot decorate; use no_grad() or enable_grad()")


def is_grad_enabled() -> bool:
    """True when ops on this thread record graphs."""
    return bool(lib.ac_is_grad_enabled())
