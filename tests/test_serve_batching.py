"""aicraft.serve.Batcher: concurrent submits joined into one infer call; results equal
unbatched ones; a bounded queue; max_delay_s; errors reach the whole batch."""
import threading
import time

import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from aicraft.serve.batching import Batcher, QueueFull


def _mlp_infer(packed=False):
    ac.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 10))
    if packed:
        model = nn.packed.pack_linear(model)
    calls = []

    def infer(inputs):
        calls.append(len(inputs["x"]))
        with ac.no_grad():
            return {"y": model(ac.from_numpy(inputs["x"])).numpy(), "x_back": inputs["x"] * 1}
    return infer, calls


def _run_threads(count, target):
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)


class Gate:
    """An infer that blocks until the test opens it, so the queue fills meanwhile."""

    def __init__(self):
        self.opened, self.entered, self.calls = threading.Event(), threading.Event(), []

    def __call__(self, inputs):
        self.calls.append({k: v.copy() for k, v in inputs.items()})
        self.entered.set()
        assert self.opened.wait(30)
        return {"y": inputs["x"] + 1}


def _queue_behind_gate(batcher, gate, client, count):
    """count threads running client(i): the first one's batch held in gate's infer, then
    each of the others started once the one before it is queued. Returns them."""
    threads = [threading.Thread(target=client, args=(i,)) for i in range(count)]
    threads[0].start()
    assert gate.entered.wait(30)
    for i, t in enumerate(threads[1:], 1):
        t.start()
        while len(batcher._queue) < i:
            time.sleep(0.001)
    return threads


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "float"])
def test_batched_results_equal_each_request_run_alone(packed):
    infer, calls = _mlp_infer(packed)
    batcher = Batcher(infer, max_batch_size=32, max_delay_s=0.002)
    rng = np.random.default_rng(0)
    requests = [rng.standard_normal((int(rng.integers(1, 6)), 24)).astype(np.float32) for _ in range(200)]
    results = [None] * len(requests)

    def client(i):
        for j in range(i, len(requests), 16):
            results[j] = batcher.submit({"x": requests[j]})

    _run_threads(16, client)
    assert max(calls) > max(len(r) for r in requests)    # some requests did run together
    assert sum(calls) == sum(len(r) for r in requests) and max(calls) <= 32
    calls.clear()
    for x, got in zip(requests, results):
        alone = infer({"x": x})
        assert np.array_equal(got["x_back"], x)               # the rows went back to their request
        assert got["y"].dtype == alone["y"].dtype
        if packed:     # packed layers sum every batch size in the same order
            assert np.array_equal(got["y"], alone["y"])
        else:          # nn.Linear sums M <= 4 rows in another order than its blocked GEMM
            np.testing.assert_allclose(got["y"], alone["y"], rtol=1e-5, atol=1e-6)


def test_a_request_runs_at_once_when_nothing_else_waits():
    seen = []
    batcher = Batcher(lambda inputs: seen.append(inputs) or {"y": inputs["x"]}, max_batch_size=8)
    x = np.arange(6.0).reshape(3, 2)
    assert batcher.submit({"x": x})["y"] is x    # no concatenation, no copy
    assert len(seen) == 1 and seen[0]["x"] is x


def test_queued_requests_join_up_to_max_batch_size_and_only_with_their_kind():
    gate = Gate()
    batcher = Batcher(gate, max_batch_size=4)
    results = {}
    inputs = {0: np.zeros((1, 2)), 1: np.ones((2, 2)), 2: np.full((1, 3), 2.0), 3: np.full((1, 2), 3.0),
              4: np.full((2, 2), 4.0), 5: np.full((1, 2), 5.0)}

    def client(i):
        results[i] = batcher.submit({"x": inputs[i]})

    first = threading.Thread(target=client, args=(0,))
    first.start()
    assert gate.entered.wait(30)     # request 0 runs alone; the others queue behind it
    others = []
    for i in range(1, 6):
        others.append(threading.Thread(target=client, args=(i,)))
        others[-1].start()
        while len(batcher._queue) < i:
            time.sleep(0.001)
    gate.opened.set()
    for t in [first] + others:
        t.join(30)
    # 1 (2 rows) + 3 (1 row) fill 3 of 4 rows, 4 (2 rows) does not fit, 5 (1 row) does;
    # 2 has another row width: it runs alone, then 4.
    assert [c["x"].shape for c in gate.calls] == [(1, 2), (4, 2), (1, 3), (2, 2)]
    for i, x in inputs.items():
        assert np.array_equal(results[i]["y"], x + 1)


def test_a_full_queue_raises_queue_full_and_the_batcher_goes_on():
    gate = Gate()
    batcher = Batcher(gate, max_batch_size=2, max_queue=3)
    results = []

    def client(i):
        results.append(batcher.submit({"x": np.full((1, 1), float(i))})["y"][0, 0])

    threads = _queue_behind_gate(batcher, gate, client, 4)
    with pytest.raises(QueueFull):
        batcher.submit({"x": np.zeros((1, 1))})
    gate.opened.set()
    for t in threads:
        t.join(30)
    assert sorted(results) == [1.0, 2.0, 3.0, 4.0]
    assert batcher.submit({"x": np.zeros((1, 1))})["y"][0, 0] == 1.0


def test_the_leader_waits_max_delay_for_more_rows_and_no_longer():
    calls = []

    def infer(inputs):
        calls.append(len(inputs["x"]))
        return {"y": inputs["x"]}

    start = time.monotonic()
    Batcher(infer, max_batch_size=3, max_delay_s=0.3).submit({"x": np.zeros((1, 1))})
    assert time.monotonic() - start >= 0.3          # alone: it waited the whole delay for company
    batcher = Batcher(infer, max_batch_size=3, max_delay_s=30.0)
    _run_threads(3, lambda i: batcher.submit({"x": np.zeros((1, 1))}))
    assert calls == [1, 3]                           # the three joined; the full batch ran at once
    start = time.monotonic()
    batcher.submit({"x": np.zeros((3, 1))})          # full already: no wait
    assert time.monotonic() - start < 20 and calls == [1, 3, 3]


def test_an_error_in_infer_reaches_every_request_of_its_batch_and_the_batcher_goes_on():
    gate = Gate()
    failing = [True]

    def infer(inputs):
        gate(inputs)
        if failing[0]:
            raise RuntimeError("boom on %d rows" % len(inputs["x"]))
        return {"y": inputs["x"] * 2}

    batcher = Batcher(infer, max_batch_size=8)
    errors = []

    def client(i):
        try:
            batcher.submit({"x": np.zeros((1, 1))})
        except RuntimeError as exc:
            errors.append(str(exc))

    threads = _queue_behind_gate(batcher, gate, client, 5)
    gate.opened.set()
    for t in threads:
        t.join(30)
    assert sorted(errors) == ["boom on 1 rows"] + ["boom on 4 rows"] * 4
    failing[0] = False
    assert batcher.submit({"x": np.ones((2, 1))})["y"].tolist() == [[2.0], [2.0]]


def test_infer_returning_the_wrong_rows_is_an_error_not_a_wrong_split():
    batcher = Batcher(lambda inputs: {"y": np.zeros((1, 1))}, max_batch_size=8)
    with pytest.raises(ValueError, match="batch of 3 rows"):
        batcher.submit({"x": np.zeros((3, 1))})


def test_bad_arguments():
    with pytest.raises(ValueError):
        Batcher(lambda inputs: inputs, max_batch_size=0)
    with pytest.raises(ValueError):
        Batcher(lambda inputs: inputs, max_batch_size=4, max_delay_s=-1)
    batcher = Batcher(lambda inputs: inputs, max_batch_size=4)
    with pytest.raises(ValueError, match="same number of rows"):
        batcher.submit({"a": np.zeros((2, 1)), "b": np.zeros((3, 1))})
    with pytest.raises(ValueError, match="same number of rows"):
        batcher.submit({"a": np.float32(1.0)})
    with pytest.raises(TypeError):
        batcher.submit([np.zeros((1, 1))])
