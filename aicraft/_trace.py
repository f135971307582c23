"""_trace.py - the graph a compiled function is recording on this thread.

aicraft.compile starts and stops it; the optimizers tell it which of their
scalar arguments change from call to call (the learning rate a scheduler sets,
Adam's step count), and zero_grad records its call even for a parameter that
has no gradient yet. Nothing here imports the rest of aicraft but _ffi.
"""
import threading

from aicraft._ffi import lib

_local = threading.local()


class Trace:
    """A recording graph and its per-call scalars: [node, attr, getter, value] lists."""

    __slots__ = ("graph", "scalars")

    def __init__(self, graph):
        self.graph = graph
        self.scalars = []

    def bind_last(self, attr, getter, value):
        """Scalar argument `attr` of the op just recorded is getter() on each
        later call; value is what the recorded call used."""
        self.scalars.append([lib.ac_graph_num_nodes(self.graph) - 1, attr, getter, value])


def recording():
    """The Trace recording on this thread, or None."""
    return getattr(_local, "trace", None)


def start(trace):
    _local.trace = trace


def stop():
    _local.trace = None
