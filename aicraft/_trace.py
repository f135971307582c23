"""_trace.py - the graph a compiled function is recording on this thread.

aicraft.compile starts and stops it; the optimizers tell it which of their
scalar arguments change from call to call (the learning rate a scheduler sets,
Adam's step count), and zero_grad records its call even for a parameter that
has no gradient yet. Nothing here imports the rest of aicraft but _ffi.
"""
import threading

from aicraft._ffi import lib

_local = threading.local()

# How a compiled call gets a recorded scalar argument (Trace.scalars):
ITEM = 0      # mapping[key] read per call (a param group's "lr")
COUNTER = 1   # mapping[key] + 1 per call, stored back after the call ran (Adam's "step")
LATER = 2     # value on every call after the recording one (SGD's momentum step)


class Trace:
    """A recording graph and its per-call scalars: (node, attr, how, mapping, key,
    value) tuples, value being what the recording call used (LATER: the one later
    calls use)."""

    __slots__ = ("graph", "scalars")

    def __init__(self, graph):
        self.graph = graph
        self.scalars = []

    def _bind(self, attr, how, mapping, key, value):
        self.scalars.append((lib.ac_graph_num_nodes(self.graph) - 1, attr, how, mapping, key, value))

    def bind_item(self, attr, mapping, key, value):
        """Scalar argument `attr` of the op just recorded is mapping[key] on each
        later call; value is what the recorded call used."""
        self._bind(attr, ITEM, mapping, key, value)

    def bind_counter(self, attr, mapping, key):
        """Scalar argument `attr` of the op just recorded is mapping[key] + 1 on
        each later call, which then stores that back (a step count)."""
        self._bind(attr, COUNTER, mapping, key, None)

    def bind_later(self, attr, value):
        """Scalar argument `attr` of the op just recorded is value on later calls."""
        self._bind(attr, LATER, None, None, value)


def recording():
    """The Trace recording on this thread, or None."""
    return getattr(_local, "trace", None)


def start(trace):
    _local.trace = trace


def stop():
    _local.trace = None
