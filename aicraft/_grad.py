"""_grad.py - grad mode: no_grad(), enable_grad(), set_grad_enabled(), is_grad_enabled(),
inference_mode() (aicraft.autograd and aicraft re-export them).

Grad mode is per thread in C (ac_set_grad_enabled returns the previous mode), so
each context restores exactly the mode it found. The contexts also work as
function decorators, as PyTorch's do. Also what Tensor.backward() needs from
Python: the callbacks it runs when it is done (after_backward), the hooks C's
backward walk calls when a leaf's gradient is final
(Tensor.register_post_accumulate_grad_hook), and the exceptions raised inside
that walk (by a hook, or by a custom Function's backward: autograd.py), which
backward() raises once C has stopped.

Beneath tensor.py: it knows the C tensor, never the Tensor class.
"""
import functools
import weakref
from typing import Any, Callable, Dict, List, Tuple, TypeVar, cast

from aicraft._ffi import ffi, lib
from aicraft.errors import raise_error

F = TypeVar("F", bound=Callable[..., Any])

# Called, in order, with no arguments, when a Tensor.backward() has filled the
# leaves' grads: DistributedDataParallel averages its gradients over ranks here.
# A callback that is done removes itself.
after_backward: List[Callable[[], None]] = []

# The post-accumulate-grad hooks, by the address of their leaf's AcTensor: (a weak
# reference to the leaf's Tensor, its hooks in order). C calls _py_grad_hook with
# the leaf; an exception a hook raises waits in _hook_errors for
# Tensor.backward, which raises it once C's backward has stopped.
_grad_hooks: Dict[int, Tuple[Any, List[Callable[[Any], None]]]] = {}
_hook_errors: List[BaseException] = []
_function_errors: List[BaseException] = []   # a custom Function's backward's (autograd.py)


def _address(ptr: Any) -> int:
    return int(ffi.cast("uintptr_t", ptr))


class RemovableHandle:
    """What register_post_accumulate_grad_hook returns: remove() takes the hook away."""

    __slots__ = ("_key", "_entry", "_hook")

    def __init__(self, key: int, entry: Tuple[Any, List[Callable[[Any], None]]], hook: Callable[[Any], None]):
        self._key, self._entry, self._hook = key, entry, hook

    def remove(self) -> None:
        ref, hooks = self._entry
        if self._hook in hooks:
            hooks.remove(self._hook)
        tensor = ref()
        if not hooks and _grad_hooks.get(self._key) is self._entry:
            del _grad_hooks[self._key]
            if tensor is not None and tensor._ptr != ffi.NULL:   # NULL: its scope ended
                lib.ac_tensor_set_grad_hook(tensor._ptr, ffi.NULL, ffi.NULL)


def add_grad_hook(tensor: Any, ptr: Any, hook: Callable[[Any], None]) -> RemovableHandle:
    """Tensor.register_post_accumulate_grad_hook's work: ptr is tensor's live AcTensor."""
    if not callable(hook):
        raise TypeError("register_post_accumulate_grad_hook: hook must be callable, not %s"
                        % type(hook).__name__)
    key = _address(ptr)
    entry = _grad_hooks.get(key)
    if entry is None or entry[0]() is not tensor:
        if lib.ac_tensor_set_grad_hook(ptr, lib._py_grad_hook, ffi.NULL) < 0:
            raise_error(tensor)

        def forget(ref: Any, key: int = key) -> None:
            if key in _grad_hooks and _grad_hooks[key][0] is ref:
                del _grad_hooks[key]
        entry = _grad_hooks[key] = (weakref.ref(tensor, forget), [])
    entry[1].append(hook)
    return RemovableHandle(key, entry, hook)


@ffi.def_extern()
def _py_grad_hook(leaf: Any, user: Any) -> int:
    entry = _grad_hooks.get(_address(leaf))
    tensor = entry[0]() if entry is not None else None
    if tensor is None:
        return 0
    try:
        for hook in tuple(entry[1]):
            hook(tensor)
    except BaseException as exc:   # noqa: B902 - raised again by Tensor.backward
        _hook_errors.append(exc)
        return -1
    return 0


def raise_hook_error() -> None:
    """Raise the exception a grad hook (or a custom Function's backward) raised during
    the backward that just failed."""
    if _function_errors:
        exc = _function_errors.pop()
        _function_errors.clear()
        raise exc
    if _hook_errors:
        exc = _hook_errors.pop()
        _hook_errors.clear()
        raise exc


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


class inference_mode(_GradMode):
    """no_grad for inference: `with ac.inference_mode():` or `@ac.inference_mode()`;
    inference_mode(False) records graphs as usual."""

    __slots__ = ("_mode",)

    def __init__(self, mode=True):
        if callable(mode) and not isinstance(mode, bool):   # used bare: @inference_mode
            raise TypeError("inference_mode: use it as @inference_mode() (with parentheses)")
        super().__init__()
        self._mode = bool(mode)

    def __enter__(self):
        self._previous.append(lib.ac_set_grad_enabled(0 if self._mode else lib.ac_is_grad_enabled()))
        return None

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper


def is_inference_mode_enabled():
    return not is_grad_enabled()
