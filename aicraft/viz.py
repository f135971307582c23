"""viz.py - the autograd graph behind a tensor, as text or Graphviz DOT."""
import sys

from aicraft._ffi import ffi, lib
from aicraft.errors import raise_error
from aicraft.tensor import Tensor


def _render(c_fn, t):
    if not isinstance(t, Tensor):
        raise TypeError("expected a Tensor, got %s" % type(t).__name__)
    length = c_fn(t._ptr, ffi.NULL, 0)
    if length < 0:
        raise_error(t)
    buf = ffi.new("char[]", length + 1)
    if c_fn(t._ptr, buf, length + 1) < 0:
        raise_error(t)
    return ffi.string(buf, length).decode("utf-8", "replace")


def to_dot(t):
    """The graph behind t in Graphviz DOT (render with `dot -Tpng`)."""
    return _render(lib.ac_graph_dot, t)


def to_text(t):
    """The graph behind t, one op per line."""
    return _render(lib.ac_graph_text, t)


def print_graph(t, file=None):
    """Print to_text(t) to file (default sys.stdout)."""
    print(to_text(t), end="", file=sys.stdout if file is None else file)
