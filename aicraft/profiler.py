"""profiler.py - where the time goes: PyTorch's profiler interface over libac's.

    with ac.profiler.profile(record_shapes=False) as prof:
        with ac.profiler.record_function("step"):
            loss = loss_fn(model(x), y)
            loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")    # Perfetto or chrome://tracing

libac times each op on the profiled thread, each node's backward
("linear_backward"), each chunk of work the thread pool runs, on the thread that
runs it ("linear [task]"), and each record_function range, which is also the
scope of the events inside it. Times are microseconds, as PyTorch's.
"""
import atexit
import enum
import json
import os
import sys
import threading
from collections import namedtuple
from contextlib import ContextDecorator
from typing import Any, Dict, List, Optional, Tuple

from aicraft._ffi import ffi, lib
from aicraft.errors import DeviceError, raise_error

__all__ = ["profile", "record_function", "ProfilerActivity", "FunctionEvent", "FunctionEventAvg",
           "EventList"]

def _check_env_trace(path):
    """At exit: say on stderr when libac cannot write AC_PROFILE's trace (libac
    itself never prints; it writes the file after Python has finished)."""
    try:
        if len(os.fsencode(path)) >= 4096:
            raise OSError("the path is longer than 4095 bytes, so no profile was taken")
        with open(path, "ab"):
            pass
    except OSError as exc:
        sys.stderr.write("aicraft: warning: AC_PROFILE=%s: the trace cannot be written: %s\n" % (path, exc))


if os.environ.get("AC_PROFILE"):
    atexit.register(_check_env_trace, os.environ["AC_PROFILE"])

_tls = threading.local()   # _tls.guard: the profiling thread's _StopAtThreadEnd


class _StopAtThreadEnd:
    """Held by the profiling thread's tls alone: a thread that ends without
    stopping the profiler stops it as it ends (before join() returns), so the
    next start, on any thread, works. libac does the same for C threads, later."""

    __slots__ = ("armed",)

    def __init__(self):
        self.armed = True

    def __del__(self):
        if self.armed and lib.ac_profiler_stop() < 0:
            lib.ac_clear_error()


_KINDS = {lib.AC_EVENT_OP: "op", lib.AC_EVENT_BACKWARD: "backward", lib.AC_EVENT_TASK: "task",
          lib.AC_EVENT_RANGE: "range"}

FunctionEvent = namedtuple("FunctionEvent", [
    "name", "kind", "scope", "input_shapes", "thread", "depth", "start_us", "duration_us",
    "self_us", "cpu_memory_usage", "self_cpu_memory_usage", "flops"])
FunctionEvent.__doc__ = """One timed call: an op, a backward node, a pool chunk or a range."""


class FunctionEventAvg:
    """The events of one key (name; and scope or input shapes when grouped by them)."""

    __slots__ = ("key", "scope", "input_shapes", "count", "cpu_time_total",
                 "self_cpu_time_total", "cpu_memory_usage", "self_cpu_memory_usage", "flops")

    def __init__(self, key: str, scope: str, input_shapes: str) -> None:
        self.key, self.scope, self.input_shapes = key, scope, input_shapes
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = self.flops = 0

    def add(self, e: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total += e.duration_us
        self.self_cpu_time_total += e.self_us
        self.cpu_memory_usage += e.cpu_memory_usage
        self.self_cpu_memory_usage += e.self_cpu_memory_usage
        self.flops += e.flops

    @property
    def cpu_time(self) -> float:
        """Average time per call, microseconds."""
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return ("<FunctionEventAvg key=%s count=%d self_cpu_time_total=%.3fus cpu_time_total=%.3fus>"
                % (self.key, self.count, self.self_cpu_time_total, self.cpu_time_total))


_SORT_KEYS = ("self_cpu_time_total", "cpu_time_total", "cpu_time", "count", "cpu_memory_usage",
              "self_cpu_memory_usage", "flops")


def _time(us: float) -> str:
    if us >= 1e6:
        return "%.3fs" % (us / 1e6)
    if us >= 1e3:
        return "%.3fms" % (us / 1e3)
    return "%.3fus" % us


def _bytes(n: int) -> str:
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(n) >= size:
            return "%.2f %s" % (n / size, unit)
    return "%d b" % n


class EventList(list):
    """FunctionEventAvg rows, with PyTorch's table()."""

    def table(self, sort_by: Optional[str] = None, row_limit: int = 100) -> str:
        """The rows as a text table, largest first by sort_by (one of the FunctionEventAvg
        fields: self_cpu_time_total, cpu_time_total, cpu_time, count, cpu_memory_usage,
        self_cpu_memory_usage, flops), at most row_limit of them (< 0: all)."""
        if sort_by is not None and sort_by not in _SORT_KEYS:
            raise ValueError("table: sort_by %r is not one of %s" % (sort_by, ", ".join(_SORT_KEYS)))
        rows = sorted(self, key=lambda r: getattr(r, sort_by), reverse=True) if sort_by else list(self)
        if row_limit >= 0:
            rows = rows[:row_limit]
        self_total = sum(r.self_cpu_time_total for r in self) or 1.0
        scoped = any(r.scope for r in rows)
        shaped = any(r.input_shapes for r in rows)
        header = (["Name"] + (["Scope"] if scoped else [])
                  + ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                     "CPU Mem", "Self CPU Mem", "Total MFLOPs", "# of Calls"]
                  + (["Input Shapes"] if shaped else []))
        lines = []
        for r in rows:
            lines.append([r.key] + ([r.scope] if scoped else []) + [
                "%.2f%%" % (100.0 * r.self_cpu_time_total / self_total), _time(r.self_cpu_time_total),
                "%.2f%%" % (100.0 * r.cpu_time_total / self_total), _time(r.cpu_time_total),
                _time(r.cpu_time), _bytes(r.cpu_memory_usage), _bytes(r.self_cpu_memory_usage),
                "%.3f" % (r.flops / 1e6) if r.flops else "--", str(r.count)]
                + ([r.input_shapes] if shaped else []))
        widths = [max([len(h)] + [len(line[i]) for line in lines]) for i, h in enumerate(header)]
        rule = "  ".join("-" * w for w in widths)

        def fmt(cells: List[str]) -> str:   # text columns to the left, numbers to the right
            return "  ".join(c.ljust(w) if header[i] in ("Name", "Scope", "Input Shapes") else c.rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths)))

        out = [rule, fmt(header), rule] + [fmt(line) for line in lines] + [rule]
        out.append("Self CPU time total: %s" % _time(sum(r.self_cpu_time_total for r in self)))
        return "\n".join(out) + "\n"


class ProfilerActivity(enum.Enum):
    """What to profile, as torch.profiler.ProfilerActivity: aicraft runs on the CPU."""
    CPU = "cpu"
    CUDA = "cuda"


class profile:
    """Profile the ops this thread runs inside the block (PyTorch's torch.profiler.profile).
    record_shapes: also keep each op's input shapes (key_averages can group by them).
    activities (CPU only), profile_memory, with_flops and with_stack are accepted as
    PyTorch scripts pass them: bytes and FLOPs are always recorded, stacks never."""

    def __init__(self, activities: Optional[List[ProfilerActivity]] = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False) -> None:
        for name, flag in (("record_shapes", record_shapes), ("profile_memory", profile_memory),
                           ("with_stack", with_stack), ("with_flops", with_flops)):
            if not isinstance(flag, bool):
                raise TypeError("profile: %s must be a bool, got %s" % (name, type(flag).__name__))
        for activity in activities or ():
            if activity is ProfilerActivity.CUDA:
                raise DeviceError("profile: CUDA activity needs the CUDA backend; profile "
                                  "ProfilerActivity.CPU")
            if activity is not ProfilerActivity.CPU:
                raise TypeError("profile: activities must be ProfilerActivity members, got %r" % (activity,))
        self.record_shapes = record_shapes
        self._events: Optional[List[FunctionEvent]] = None

    def start(self) -> None:
        if lib.ac_profiler_start(int(self.record_shapes)) < 0:
            raise_error()
        _tls.guard = _StopAtThreadEnd()

    def stop(self) -> None:
        if lib.ac_profiler_stop() < 0:
            raise_error()
        guard = getattr(_tls, "guard", None)
        if guard is not None:
            guard.armed = False
            _tls.guard = None
        n = lib.ac_profiler_num_events()
        if n < 0:
            raise_error()
        e = ffi.new("AcProfileEvent *")
        events = []
        for i in range(n):
            lib.ac_profiler_event(i, e)
            events.append(FunctionEvent(
                ffi.string(e.name).decode("utf-8", "replace"), _KINDS[e.kind],
                ffi.string(e.scope).decode("utf-8", "replace"), ffi.string(e.shapes).decode(),
                e.thread, e.depth, e.start_ns / 1e3, e.duration_ns / 1e3, e.self_ns / 1e3,
                e.bytes, e.self_bytes, e.flops))
        self._events = events

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False

    def events(self) -> List[FunctionEvent]:
        """Every event, in thread order, then start order."""
        if self._events is None:
            raise RuntimeError("profile: no results yet; use it as `with profile() as prof:` first")
        return self._events

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_scope: bool = False) -> EventList:
        """One row per event name (per name and input shapes, or name and scope, when asked)."""
        if group_by_input_shape and not self.record_shapes:
            raise ValueError("key_averages: group_by_input_shape needs profile(record_shapes=True)")
        rows: Dict[Tuple[str, str, str], FunctionEventAvg] = {}
        for e in self.events():
            scope = e.scope if group_by_scope else ""
            shapes = e.input_shapes if group_by_input_shape else ""
            row = rows.get((e.name, scope, shapes))
            if row is None:
                row = rows[(e.name, scope, shapes)] = FunctionEventAvg(e.name, scope, shapes)
            row.add(e)
        return EventList(rows.values())

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as Chrome trace-event JSON (open in Perfetto or chrome://tracing)."""
        events = self.events()
        pid = os.getpid()
        trace = [{"name": "thread_name", "ph": "M", "pid": pid, "tid": t,
                  "args": {"name": "aicraft pool" if t else "aicraft ops"}}
                 for t in sorted({e.thread for e in events} | {0})]
        trace += [{"name": e.name, "cat": e.kind, "ph": "X", "ts": round(e.start_us, 3),
                   "dur": round(e.duration_us, 3), "pid": pid, "tid": e.thread,
                   "args": {"scope": e.scope, "input_shapes": e.input_shapes,
                            "bytes": e.cpu_memory_usage, "flops": e.flops}} for e in events]
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"displayTimeUnit": "ms", "traceEvents": trace}, f)


class record_function(ContextDecorator):
    """A named range (PyTorch's torch.profiler.record_function): an event of its own
    and the scope of the events inside it. Does nothing when the thread is not profiled."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError("record_function: name must be a str, got %s" % type(name).__name__)
        self.name = name
        self._opened: List[bool] = []

    def __enter__(self) -> "record_function":
        opened = lib.ac_profiler_push(self.name.encode("utf-8"))
        if opened < 0:
            raise_error()
        self._opened.append(bool(opened))
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self._opened.pop() and lib.ac_profiler_pop() < 0:
            raise_error()
        return False
