"""shared.py - one model for all worker processes (gunicorn --preload -w N).

SharedModel, made before the fork, moves a module's parameters and buffers and its
optimizer's whole state into shared memory (Tensor.share_memory_: POSIX shared memory
mapped MAP_SHARED, so forked workers keep one copy). A learning step in any worker then
updates the one model, and every worker's next prediction sees it. Gradients stay per
process: a worker computes its own, then applies the update to the shared weights.

update() and read() bracket a step and a prediction. They take a readers-writer lock
across processes and threads (predictions share it: under one exclusive lock N workers
would predict one at a time, for a read() that costs about what an exclusive lock does,
6 us; bench/serve_batching.py), made of POSIX record locks (fcntl.lockf) on a temporary
file: the kernel drops a process's record locks when it dies, so a worker killed in the
middle of a step does not wedge the others (the step it was taking is left half done).
The file is unlinked from the start (tempfile.TemporaryFile): forked workers inherit its
descriptor, and nothing is left on disk to remove. Forked workers only: a spawned process
would not inherit the descriptor or the step counts.

What is not shared: an optimizer's options (lr, betas) and a learning-rate scheduler stay
per process (set them before the fork); load_state_dict after SharedModel replaces the
state this process shares, which update() refuses.
"""
import fcntl
import mmap
import os
import tempfile
import threading
import weakref
from contextlib import contextmanager


from aicraft import optim
from aicraft._shared import share_memory_, share_module_memory
from aicraft.optim.optimizer import root_zeros_like

# Byte ranges of the lock file: a writer holds TURNSTILE while it waits for DATA, so
# readers that come after it wait too (otherwise a stream of predictions in other
# workers could keep a learning step out forever).
TURNSTILE, DATA = 0, 1


class _ReadWriteLock:
    """Many readers or one writer, across every process forked after it was made and
    the threads in each.

    Record locks belong to a process, not a thread: two threads of one process both get
    an exclusive lock, and a second lockf on a range the process holds converts it. So
    in each process one thread at a time takes locks (`gate`), the first reader takes the
    shared DATA lock for all of its process's readers and the last one drops it, and a
    writer keeps the gate for its whole step. The kernel also sees waits per process: a
    process that waited for TURNSTILE while one of its threads held DATA, against a writer
    holding TURNSTILE and waiting for DATA, would get EDEADLK. So no process blocks on a
    lock while it holds one, but for TURNSTILE while it waits for DATA: a reader joining
    the others of its process only tries TURNSTILE (a writer waits: it lets them drain
    first), and a writer lets its own process's readers drain before it queues.
    """

    def __init__(self):
        self._file = tempfile.TemporaryFile(prefix="aicraft-serve-lock-")
        self._fd = self._file.fileno()
        self._reset()
        here = weakref.ref(self)
        # A thread of the parent may hold the thread locks at the fork; the child has
        # none of its threads, and none of its record locks (POSIX locks aren't inherited).
        os.register_at_fork(after_in_child=lambda: here() is not None and here()._reset())

    def _reset(self):
        self._gate = threading.Lock()
        self._readers_changed = threading.Condition()
        self._readers = 0

    def _lockf(self, how, start):
        fcntl.lockf(self._fd, how, 1, start)

    def _no_writer_waits(self):
        try:
            self._lockf(fcntl.LOCK_EX | fcntl.LOCK_NB, TURNSTILE)
        except OSError:
            return False
        self._lockf(fcntl.LOCK_UN, TURNSTILE)
        return True

    def _drain(self):
        """Wait until no thread of this process reads (the caller holds the gate)."""
        with self._readers_changed:
            while self._readers:
                self._readers_changed.wait()

    def _queue_for(self, how):
        """Take DATA behind any writer already queued; the process holds no lock of the file."""
        self._lockf(fcntl.LOCK_EX, TURNSTILE)
        try:
            self._lockf(how, DATA)
        finally:
            self._lockf(fcntl.LOCK_UN, TURNSTILE)

    @contextmanager
    def read(self):
        with self._gate:
            with self._readers_changed:
                joined = self._readers > 0 and self._no_writer_waits()
                if joined:
                    self._readers += 1
            if not joined:
                self._drain()
                self._queue_for(fcntl.LOCK_SH)
                with self._readers_changed:
                    self._readers += 1
        try:
            yield
        finally:
            with self._readers_changed:
                self._readers -= 1
                if self._readers == 0:
                    self._lockf(fcntl.LOCK_UN, DATA)
                    self._readers_changed.notify_all()

    @contextmanager
    def write(self):
        with self._gate:
            self._drain()
            self._queue_for(fcntl.LOCK_EX)
            try:
                yield
            finally:
                self._lockf(fcntl.LOCK_UN, DATA)


def _first_state(optimizer, group, param):
    """The state param's first step starts from, made now (each optimizer makes it on that
    step, as PyTorch's do). SGD's momentum buffer is special: a first step overwrites it
    with the gradient rather than reading it (see SharedModel._pull)."""
    kind = type(optimizer)
    if kind is optim.SGD:
        return {"momentum_buffer": root_zeros_like(param)} if group["momentum"] else {}
    if kind in (optim.Adam, optim.AdamW):
        return {"step": 0, "exp_avg": root_zeros_like(param), "exp_avg_sq": root_zeros_like(param)}
    if kind is optim.Adadelta:
        return {"step": 0, "square_avg": root_zeros_like(param), "acc_delta": root_zeros_like(param)}
    if kind is optim.RMSprop:
        state = {"step": 0, "square_avg": root_zeros_like(param)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = root_zeros_like(param)
        if group["centered"]:
            state["grad_avg"] = root_zeros_like(param)
        return state
    if kind is optim.Adagrad:
        return {}   # made by its constructor
    raise TypeError("SharedModel: cannot share the state of a %s optimizer (SGD, Adam, AdamW, Adadelta, "
                    "RMSprop and Adagrad can be shared)" % kind.__name__)


class SharedModel:
    """SharedModel(module, optimizer=None, hogwild=False): module's parameters and buffers
    and optimizer's state in shared memory, for every process forked after this call.

        shared = SharedModel(model, opt)       # before the fork: at import under --preload
        with shared.update():                  # a learning step, alone across all workers
            opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
        with shared.read():                    # a prediction: never sees a step halfway
            y = model(x)

    hogwild=True: steps and predictions take no lock across processes (Hogwild); steps in
    one process still take turns, since its threads share the parameters' gradients.
    """

    def __init__(self, module, optimizer=None, hogwild=False):
        self.module, self.optimizer, self.hogwild = module, optimizer, bool(hogwild)
        share_module_memory(module)
        self._params = []   # (param, its state dict, SGD's shared momentum buffer or None)
        counts = []         # the state's "step"; for SGD, 1 once its buffer is written
        if optimizer is not None:
            _refuse_compiled(optimizer)
            for group in optimizer.param_groups:
                for param in group["params"]:
                    counts.append(self._share_state(optimizer, group, param))
        # Python ints would be per process: the counts live in an anonymous MAP_SHARED mapping.
        self._counts_map = mmap.mmap(-1, 8 * max(len(counts), 1))
        self._counts = memoryview(self._counts_map).cast("q")
        for i, count in enumerate(counts):
            self._counts[i] = count
        self._thread_lock = threading.Lock() if self.hogwild else None
        self._lock = None if self.hogwild else _ReadWriteLock()

    def _share_state(self, optimizer, group, param):
        """Move param and its state (made now if the optimizer has not stepped it) into
        shared memory; returns its step count."""
        share_memory_(param)
        entries = optimizer.state[param]
        written = "momentum_buffer" in entries
        if not entries:
            entries.update(_first_state(optimizer, group, param))
        for value in entries.values():
            if hasattr(value, "share_memory_"):
                value.share_memory_()
        buffer = entries.get("momentum_buffer") if type(optimizer) is optim.SGD else None
        self._params.append((param, entries, buffer))
        return entries["step"] if "step" in entries else int(written)

    @contextmanager
    def update(self):
        """One learning step: exclusive across processes and threads."""
        with self._lock.write() if self._lock is not None else self._thread_lock:
            self._pull()
            try:
                yield
            finally:
                self._push()

    def read(self):
        """One prediction: while it runs no step changes the weights (nothing with hogwild)."""
        return self._lock.read() if self._lock is not None else _NO_LOCK

    def _pull(self):
        """This process's optimizer state takes the shared step counts."""
        state = self.optimizer.state if self.optimizer is not None else None
        for i, (param, entries, buffer) in enumerate(self._params):
            if state.get(param) is not entries:
                raise RuntimeError("SharedModel: the optimizer's state was replaced (load_state_dict?) after "
                                   "it was shared; load it before making the SharedModel")
            if "step" in entries:
                entries["step"] = int(self._counts[i])
            elif buffer is not None:
                # Before SGD's first step the buffer is absent, so that step writes the
                # gradient into a new one (which _push copies into the shared one).
                if self._counts[i]:
                    entries["momentum_buffer"] = buffer
                else:
                    entries.pop("momentum_buffer", None)

    def _push(self):
        """The shared step counts take this process's, after a step."""
        if self.optimizer is not None:
            _refuse_compiled(self.optimizer)
        for i, (param, entries, buffer) in enumerate(self._params):
            if "step" in entries:
                self._counts[i] = entries["step"]
            elif buffer is not None:
                written = entries.get("momentum_buffer")
                if written is not None and written is not buffer:
                    buffer.copy_(written)
                    entries["momentum_buffer"] = buffer
                    self._counts[i] = 1


class _NoLock:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NO_LOCK = _NoLock()


def _refuse_compiled(optimizer):
    """A compiled step (ac.compile) keeps the state tensors and step counts it recorded,
    not the ones update() hands this process: refuse it rather than diverge."""
    # A recording binds each group's lr to a C cell (_trace.ParamGroup.cell).
    if any(hasattr(group, "_cells") for group in optimizer.param_groups):
        raise RuntimeError("SharedModel: an optimizer stepped by a compiled function (ac.compile) cannot be "
                           "shared; step it uncompiled")
