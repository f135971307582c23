"""_trace.py - the graph a compiled function is recording on this thread.

aicraft.compile starts and stops it; the optimizers tell it which of their
scalar arguments change from call to call (the learning rate a scheduler sets,
Adam's step count), and zero_grad records its call even for a parameter that
has no gradient yet. Their param groups are ParamGroups, which keep the values
a compiled call reads in C memory. Nothing here imports the rest of aicraft but
_ffi.
"""
import threading

from aicraft._ffi import ffi, lib

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


# Bumped by every change a recorded graph cannot follow by reading values per
# call: a parameter, buffer or submodule replaced or removed (a quantized layer
# swapped in), an optimizer's state dict loaded, a param group added, a group
# option other than its bound lr set. A compiled function records again after one.
EPOCH = [0]


def changed():
    """Recorded graphs may no longer fit: compiled functions record again."""
    EPOCH[0] += 1


def recording():
    """The Trace recording on this thread, or None."""
    return getattr(_local, "trace", None)


def start(trace):
    _local.trace = trace


def stop():
    _local.trace = None


class ParamGroup(dict):
    """An optimizer's param group: a dict, as PyTorch's, that also keeps a C double
    for each key a compiled step reads (cell), written whenever the key is set, so
    that a compiled call reads the learning rate in C (ac_graph_bind_scalar)."""

    __slots__ = ("_cells",)

    def cell(self, key):
        """The double holding self[key] from now on."""
        try:
            cells = self._cells
        except AttributeError:
            cells = self._cells = {}
        cell = cells.get(key)
        if cell is None:
            cell = cells[key] = ffi.new("double *", self[key])
        return cell

    def __setitem__(self, key, value):
        try:
            cells = self._cells   # made when a recording first binds this group's lr
        except AttributeError:
            cells = None
        cell = cells.get(key) if cells is not None else None
        if cell is not None:
            try:   # first: a value C cannot take leaves the group as it was
                cell[0] = value
            except OverflowError:
                raise ValueError("param group: %s=%r is out of a double's range" % (key, value)) from None
        elif cells is not None and key in self and not _same(dict.get(self, key), value):
            changed()   # a value a recorded graph holds as a constant (betas, momentum)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        if hasattr(self, "_cells"):
            changed()
        dict.__delitem__(self, key)

    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other):
        self.update(other)
        return self

    def __reduce__(self):   # a copy is a group of its own: the cells stay with this one
        return type(self), (dict(self),)


def _same(old, new):
    """Whether a group option set again keeps its value (no new recording)."""
    if old is new:
        return True
    try:
        return type(old) is type(new) and bool(old == new)
    except Exception:   # a tensor of several elements, say: take it as changed
        return False
