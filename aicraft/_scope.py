"""_scope.py - the Python side of libac's scopes: which ac.checkpoint() scopes are
open on which thread, and the tensor wrappers each one marks dead when it ends.

Beneath _wrapping.py (which wraps tensors into the open scope) and memory.py (which
opens and closes them); it knows nothing of Tensor beyond its `_ptr` slot.

A wrapper's `_ptr` is set to NULL when its scope ends, so a dead tensor reaches C
as NULL, C fails, and the error path reports ScopeError: ops pay nothing for the
check on success, and no freed pointer is ever handed to C. Marking is eager
because the alternative, a generation number compared on every use, would cost
each op a Python attribute lookup per operand; here it costs one store per
wrapper made in the scope, and nothing for a scope that made none.
"""
import threading
import weakref

from aicraft._ffi import ffi

_NULL = ffi.NULL
_ref = weakref.ref

tls = threading.local()   # tls.stack: this thread's open scopes, index i at C depth i + 1
                          # tls.end: its _ThreadEnd

# One entry per scope Python has open, over all threads. Ops test it for emptiness
# alone: while it is empty every new tensor is root and needs no lookup. It is a
# list rather than a count because list.append and list.pop are atomic under the
# GIL, where `count += 1` would need a lock.
open_scopes = []

# The scopes exited on a thread other than their own and not yet ended there (see
# memory.checkpoint), over all threads: while it is empty, entering and exiting a
# checkpoint skip looking for them.
orphans = []


class Scope:
    """One open C scope: an ac.checkpoint(), or a scope C opened around a Python
    callback (gradcheck)."""

    __slots__ = ("stack", "wrappers", "alive")

    def open(self):
        """Start holding the wrappers of the C scope just opened on this thread (its
        depth is its place in the thread's stack)."""
        try:      # a C scope belongs to one thread: its stack tells which
            self.stack = tls.stack
        except AttributeError:
            self.stack = stack()
        self.stack.append(self)
        # The wrappers to mark dead: small ones and borrowed ones themselves (they
        # live to the scope's end), others as weak references (they may free early).
        self.wrappers = []
        self.alive = True
        open_scopes.append(None)

    def close(self):
        """Mark this scope, and the inner ones still open on this thread, dead: every
        wrapper made in them now reads as ended (restoring a C scope ends the scopes
        inside it)."""
        scopes = self.stack
        while True:
            scope = scopes.pop()
            open_scopes.pop()
            if orphans and scope in orphans:
                orphans.remove(scope)
            scope.alive = False
            for t in scope.wrappers:
                if type(t) is _ref:
                    t = t()
                    if t is None:
                        continue
                t._ptr = _NULL
            scope.wrappers = None
            if scope is self:
                return


def stack():
    """This thread's open scopes; index i holds the scope at C depth i + 1."""
    try:
        return tls.stack
    except AttributeError:
        tls.stack = []
        tls.end = _ThreadEnd(tls.stack)
        return tls.stack


class _ThreadEnd:
    """Held by one thread's tls alone, so it dies when that thread ends: the
    thread's scopes still open (a generator suspended inside `with
    ac.checkpoint():`) are marked dead, as libac frees their memory then."""

    __slots__ = ("stack",)

    def __init__(self, stack):
        self.stack = stack

    def __del__(self):
        if self.stack:
            self.stack[0].close()
