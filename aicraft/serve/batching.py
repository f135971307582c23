"""batching.py - adaptive batching: concurrent infer requests for one model in one worker
joined into one call.

Batcher.submit(inputs) queues a request and blocks until its rows are computed. No thread
of its own (gunicorn forks after import, and a thread does not survive a fork): the first
request that finds no batch running leads. It waits until max_batch_size rows are queued
or its oldest request has waited max_delay_s, takes the queued requests that fit (their
inputs concatenated along dim 0), runs infer once, hands each request its rows of the
outputs, then passes the lead to the oldest request still queued. One batch runs at a
time, so with max_delay_s=0 a batch is whatever queued while the last one ran: batches
grow with the load, and a lone request runs at once, unbatched.
"""
import threading
import time

from aicraft.serve import wire


class QueueFull(Exception):
    """max_queue requests wait already (the app answers 503)."""


class _Request:
    __slots__ = ("inputs", "rows", "kind", "arrived", "outputs", "error", "done", "wake")

    def __init__(self, inputs):
        if not isinstance(inputs, dict) or not inputs:
            raise TypeError("Batcher.submit: inputs must be a non-empty dict of name -> array")
        inputs = {name: _array(a) for name, a in inputs.items()}
        rows = {a.shape[0] if a.shape else None for a in inputs.values()}
        if len(rows) != 1 or None in rows:
            raise ValueError("Batcher.submit: every input needs the same number of rows (dim 0); got %s"
                             % {name: tuple(a.shape) for name, a in inputs.items()})
        self.inputs, self.rows = inputs, rows.pop()
        # Requests join only with others whose inputs concatenate: same names, types, rows' shape.
        self.kind = tuple(sorted((name, _type(a), tuple(a.shape[1:])) for name, a in inputs.items()))
        self.arrived = time.monotonic()
        self.outputs = self.error = None
        self.done = False
        self.wake = threading.Lock()   # released when the request is done or made the leader
        self.wake.acquire()


class Batcher:
    """Batcher(infer, max_batch_size, max_delay_s=0.0, max_queue=64): joins concurrent
    submits into calls of infer (dict of name -> array, batched along dim 0, to the same)
    of up to max_batch_size rows. A request with more rows runs alone. The arrays are the
    service's wire Arrays (wire.py), or NumPy arrays."""

    def __init__(self, infer, max_batch_size, max_delay_s=0.0, max_queue=64):
        if max_batch_size < 1 or max_delay_s < 0 or max_queue < 1:
            raise ValueError("Batcher: max_batch_size and max_queue must be >= 1 and max_delay_s >= 0 "
                             "(got %r, %r, %r)" % (max_batch_size, max_queue, max_delay_s))
        self.infer, self.max_batch_size = infer, max_batch_size
        self.max_delay_s, self.max_queue = max_delay_s, max_queue
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)   # a leader waiting for rows hears of new requests
        self._queue = []      # requests waiting, oldest first
        self._leading = False  # a request is forming or running a batch

    def submit(self, inputs):
        """inputs' outputs, computed in a batch with whatever else is queued. Raises
        QueueFull when max_queue requests wait, and whatever infer raised for the batch."""
        request = _Request(inputs)
        with self._lock:
            if len(self._queue) >= self.max_queue:
                raise QueueFull("%d requests wait already" % len(self._queue))
            self._queue.append(request)
            lead = not self._leading
            self._leading = True
            self._arrived.notify()
        if not lead:
            request.wake.acquire()
        if not request.done:   # this request leads; its own batch holds it
            self._lead()
        if request.error is not None:
            raise request.error
        return request.outputs

    def _lead(self):
        with self._lock:
            batch = self._take()
        try:
            self._run(batch)
        finally:
            with self._lock:
                if self._queue:
                    self._queue[0].wake.release()   # the next leader
                else:
                    self._leading = False
            for request in batch[1:]:   # batch[0] is this thread's own
                request.wake.release()

    def _take(self):
        """Off the queue: the oldest request and those queued that join it, once the batch
        is full or the oldest has waited max_delay_s. Called with the lock held."""
        first = self._queue[0]
        deadline = first.arrived + self.max_delay_s
        while True:
            batch, rows = [], 0
            for request in self._queue:
                if request.kind == first.kind and (not batch or rows + request.rows <= self.max_batch_size):
                    batch.append(request)
                    rows += request.rows
            left = deadline - time.monotonic()
            if rows >= self.max_batch_size or left <= 0:
                break
            self._arrived.wait(left)
        taken = set(map(id, batch))
        self._queue = [request for request in self._queue if id(request) not in taken]
        return batch

    def _run(self, batch):
        """infer on the batch's rows; each request gets its rows of the outputs, or the error."""
        try:
            if len(batch) == 1:
                outputs = self.infer(batch[0].inputs)
                _check_rows(outputs, batch[0].rows)
                batch[0].outputs = outputs
            else:
                joined = {name: _join([r.inputs[name] for r in batch]) for name in batch[0].inputs}
                outputs = self.infer(joined)
                _check_rows(outputs, sum(r.rows for r in batch))
                start = 0
                for request in batch:
                    end = start + request.rows
                    request.outputs = {name: _rows(a, start, end) for name, a in outputs.items()}
                    start = end
        except BaseException as exc:   # every request of the batch raises it (as concurrent.futures does)
            for request in batch:
                request.error = exc
        finally:
            for request in batch:
                request.done = True


def _check_rows(outputs, rows):
    for name, a in outputs.items():
        shape = tuple(getattr(a, "shape", ()))
        if not shape or shape[0] != rows:
            raise ValueError("Batcher: infer returned output %r of shape %s for a batch of %d rows"
                             % (name, shape, rows))


# A wire Array, or a NumPy array (NumPy imported only for one).

def _array(a):
    if isinstance(a, wire.Array):
        return a
    import numpy as np
    return np.asarray(a)


def _type(a):
    return a.datatype if isinstance(a, wire.Array) else a.dtype.str


def _join(arrays):
    if isinstance(arrays[0], wire.Array):
        return wire.join(arrays)
    import numpy as np
    return np.concatenate(arrays)


def _rows(a, start, end):
    return wire.rows(a, start, end) if isinstance(a, wire.Array) else a[start:end]
