"""aicraft.serve.SharedModel: one model, learning in any of several forked workers, seen
by all; a lock across processes that a killed worker does not wedge; weights in memory
once; Hogwild without the lock."""
import multiprocessing
import os
import signal
import threading
import time

import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from aicraft.serve.shared import SharedModel

fork = multiprocessing.get_context("fork")
WORKERS = 4
X_PREDICT = np.random.default_rng(99).standard_normal((7, 6)).astype(np.float32)


def _mlp():
    ac.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _batch(step):
    rng = np.random.default_rng(step)
    return ac.from_numpy(rng.standard_normal((5, 6)).astype(np.float32)), \
        ac.from_numpy(rng.standard_normal((5, 3)).astype(np.float32))


def _learn(model, optimizer, step):
    x, y = _batch(step)
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    return loss.item()


def _predict(model):
    with ac.no_grad():
        return model(ac.from_numpy(X_PREDICT)).numpy().tobytes()


def _serve(conn, shared):
    """A worker: runs what the test sends, one command at a time, and answers."""
    model, optimizer = shared.module, shared.optimizer
    while True:
        command, arg = conn.recv()
        if command == "learn":
            with shared.update():
                conn.send(_learn(model, optimizer, arg))
        elif command == "predict":
            with shared.read():
                conn.send(_predict(model))
        elif command in ("hold update", "hold read"):
            with shared.update() if command == "hold update" else shared.read():
                conn.send("holding")
                conn.recv()
            conn.send("released")
        elif command == "exit":
            conn.send("bye")
            return


class Workers:
    """WORKERS forked processes serving `shared`, each behind a pipe."""

    def __init__(self, shared, count=WORKERS):
        self.pipes, self.procs = [], []
        for _ in range(count):
            parent, child = fork.Pipe()
            proc = fork.Process(target=_serve, args=(child, shared), daemon=True)
            proc.start()
            self.pipes.append(parent)
            self.procs.append(proc)

    def ask(self, worker, command, arg=None, timeout=60):
        self.pipes[worker].send((command, arg))
        return self.answer(worker, timeout)

    def answer(self, worker, timeout=60):
        assert self.pipes[worker].poll(timeout), "worker %d did not answer in %d s" % (worker, timeout)
        return self.pipes[worker].recv()

    def close(self):
        for pipe, proc in zip(self.pipes, self.procs):
            if proc.is_alive():
                pipe.send(("exit", None))
            proc.join(10)
            if proc.is_alive():
                proc.kill()


OPTIMIZERS = {
    "sgd_momentum": lambda p: ac.optim.SGD(p, lr=0.05, momentum=0.9),
    "sgd_dampened_decay": lambda p: ac.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.3,
                                                          weight_decay=0.01),
    "adam": lambda p: ac.optim.Adam(p, lr=0.01),
    "adamw": lambda p: ac.optim.AdamW(p, lr=0.01),
    "rmsprop_centered_momentum": lambda p: ac.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
    "adagrad": lambda p: ac.optim.Adagrad(p, lr=0.05, lr_decay=0.01),
    "adadelta": lambda p: ac.optim.Adadelta(p),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_steps_spread_over_workers_equal_one_process_taking_them_in_order(name):
    make_optimizer = OPTIMIZERS[name]
    reference = _mlp()
    reference_optimizer = make_optimizer(reference.parameters())
    model = _mlp()
    shared = SharedModel(model, make_optimizer(model.parameters()))
    order = np.random.default_rng(1).integers(0, WORKERS, 16)   # which worker takes step i
    workers = Workers(shared)
    try:
        losses = [workers.ask(int(w), "learn", step) for step, w in enumerate(order)]
        expected = [_learn(reference, reference_optimizer, step) for step in range(len(order))]
        assert losses == expected
        predictions = [workers.ask(w, "predict") for w in range(WORKERS)]
    finally:
        workers.close()
    assert set(order.tolist()) == set(range(WORKERS))
    assert predictions == [_predict(reference)] * WORKERS     # bit-identical
    assert _predict(model) == _predict(reference)              # the parent shares them too
    assert _predict(reference) != _predict(_mlp())             # the steps did change the weights


def test_a_worker_killed_holding_the_lock_does_not_wedge_the_others():
    model = _mlp()
    shared = SharedModel(model, ac.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    workers = Workers(shared, 3)
    try:
        for command in ("hold update", "hold read"):
            assert workers.ask(0, command) == "holding"
            workers.pipes[1].send(("learn", 0))
            if command == "hold update":
                workers.pipes[2].send(("predict", None))
                assert not workers.pipes[1].poll(0.5) and not workers.pipes[2].poll(0.1)   # they wait
            else:
                assert not workers.pipes[1].poll(0.5)   # a step waits for the prediction
            os.kill(workers.procs[0].pid, signal.SIGKILL)
            workers.procs[0].join(10)
            assert isinstance(workers.answer(1, 30), float)
            if command == "hold update":
                assert isinstance(workers.answer(2, 30), bytes)
            workers.pipes[0].close()
            workers.pipes[0], child = fork.Pipe()
            workers.procs[0] = fork.Process(target=_serve, args=(child, shared), daemon=True)
            workers.procs[0].start()
        assert workers.ask(0, "predict") == workers.ask(2, "predict")
    finally:
        workers.close()


def test_a_prediction_waits_for_a_step_and_a_step_for_predictions():
    model = _mlp()
    shared = SharedModel(model, ac.optim.Adam(model.parameters()))
    workers = Workers(shared, 3)
    try:
        assert workers.ask(0, "hold read") == "holding"
        assert workers.ask(1, "predict") is not None           # readers share the lock
        workers.pipes[2].send(("learn", 0))
        assert not workers.pipes[2].poll(0.5)
        workers.pipes[1].send(("predict", None))               # a reader after a waiting writer waits too
        assert not workers.pipes[1].poll(0.3)
        workers.pipes[0].send(None)
        assert workers.answer(0) == "released"
        assert isinstance(workers.answer(2), float)
        assert workers.answer(1) is not None
    finally:
        workers.close()


def test_update_is_exclusive_across_threads_and_read_waits_for_it():
    model = _mlp()
    shared = SharedModel(model, ac.optim.SGD(model.parameters(), lr=0.01))
    inside = []
    overlaps = []

    def step():
        for _ in range(30):
            with shared.update():
                inside.append("w")
                if len(inside) > 1:
                    overlaps.append(list(inside))
                time.sleep(0.0005)
                inside.remove("w")

    def read():
        for _ in range(60):
            with shared.read():
                inside.append("r")
                if "w" in inside:
                    overlaps.append(list(inside))
                time.sleep(0.0002)
                inside.remove("r")

    threads = [threading.Thread(target=f) for f in (step, step, read, read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []


def _rollup(pid):
    """/proc/PID/smaps_rollup's byte counts."""
    counts = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                counts[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return counts


def _learn_then_report(conn, model, optimizer, shared):
    x, y = ac.randn(4, model.in_features), ac.randn(4, model.out_features)
    with shared.update() if shared is not None else threading.Lock():
        optimizer.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        optimizer.step()
    conn.send("stepped")
    conn.recv()


def _workers_memory(share):
    """Four forked workers that each took an Adam step on a 32 MB Linear: their
    smaps_rollup, and the bytes of the weights and optimizer state."""
    model = nn.Linear(2048, 4096)
    optimizer = ac.optim.Adam(model.parameters(), lr=1e-3)
    shared = SharedModel(model, optimizer) if share else None
    pipes, procs = [], []
    for _ in range(WORKERS):
        parent, child = fork.Pipe()
        proc = fork.Process(target=_learn_then_report, args=(child, model, optimizer, shared), daemon=True)
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    try:
        assert [pipe.recv() for pipe in pipes] == ["stepped"] * WORKERS
        rollups = [_rollup(proc.pid) for proc in procs]
    finally:
        for pipe, proc in zip(pipes, procs):
            pipe.send("done")
            proc.join(10)
    weights = sum(p.numel() * 4 for p in model.parameters())
    return rollups, weights


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux's smaps_rollup")
def test_the_weights_and_optimizer_state_count_once_not_once_per_worker():
    shared, weights = _workers_memory(share=True)
    plain, _ = _workers_memory(share=False)
    state = 3 * weights     # the weights and Adam's two moments

    def private(r):
        return r["Private_Clean"] + r["Private_Dirty"]

    for name, rollups in (("shared", shared), ("plain", plain)):
        print("%s: workers' Rss sum %.0f MB, Pss sum %.0f MB, private %s MB (weights + Adam state %.0f MB)"
              % (name, sum(r["Rss"] for r in rollups) / 2**20, sum(r["Pss"] for r in rollups) / 2**20,
                 [round(private(r) / 2**20) for r in rollups], state / 2**20))
    # Each plain worker wrote its own copy of the weights and made its own moments; a
    # shared one wrote the one copy (its private bytes are its gradients and runtime).
    assert all(private(r) > state for r in plain)
    assert all(private(s) < private(p) - 0.9 * state for s, p in zip(shared, plain))
    assert all(r["Shared_Dirty"] > state for r in shared)
    assert sum(r["Pss"] for r in shared) < sum(r["Pss"] for r in plain) - 0.9 * (WORKERS - 1) * state


def _hogwild_learn(conn, shared, steps):
    model, optimizer = shared.module, shared.optimizer
    for step in range(steps):
        with shared.update():
            _learn(model, optimizer, 1000 + step % 7)
    conn.send("done")


def test_hogwild_steps_take_no_lock_across_processes_and_still_learn():
    model = _mlp()
    shared = SharedModel(model, ac.optim.SGD(model.parameters(), lr=0.05, momentum=0.5), hogwild=True)
    assert shared._lock is None

    def loss():
        with ac.no_grad():
            return sum(((model(x) - y) ** 2).mean().item() for x, y in map(_batch, range(1000, 1007)))

    before = loss()
    pipes, procs = [], []
    for _ in range(WORKERS):
        parent, child = fork.Pipe()
        proc = fork.Process(target=_hogwild_learn, args=(child, shared, 60), daemon=True)
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    for pipe, proc in zip(pipes, procs):
        assert pipe.poll(120) and pipe.recv() == "done"
        proc.join(10)
    assert loss() < 0.7 * before


def test_bad_uses_are_refused():
    model = _mlp()
    with pytest.raises(TypeError, match="LBFGS"):
        SharedModel(model, ac.optim.LBFGS(model.parameters()))
    optimizer = ac.optim.Adam(model.parameters())
    shared = SharedModel(model, optimizer)
    optimizer.load_state_dict(optimizer.state_dict())
    with pytest.raises(RuntimeError, match="load_state_dict"):
        with shared.update():
            pass


def test_a_compiled_optimizer_step_is_refused():
    model = _mlp()
    optimizer = ac.optim.Adam(model.parameters())
    x, y = _batch(0)

    def step(x, y):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        return loss

    compiled = ac.compile(step)
    shared = SharedModel(model, optimizer)
    with pytest.raises(RuntimeError, match="compiled"):
        with shared.update():
            compiled(x, y)
            compiled(x, y)
    with pytest.raises(RuntimeError, match="compiled"):
        SharedModel(model, optimizer)


def test_state_made_before_sharing_is_kept():
    model, reference = _mlp(), _mlp()
    optimizer = ac.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, dampening=0.3)
    reference_optimizer = ac.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9, dampening=0.3)
    _learn(model, optimizer, 0)
    _learn(reference, reference_optimizer, 0)
    shared = SharedModel(model, optimizer)
    for step in (1, 2):
        with shared.update():
            _learn(model, optimizer, step)
        _learn(reference, reference_optimizer, step)
    assert _predict(model) == _predict(reference)


# ---- under gunicorn --preload -w 4 ------------------------------------------------

GUNICORN_APP = '''
import mmap, os, time
import numpy as np
import aicraft as ac
from aicraft.serve.shared import SharedModel
from test_serve_shared import OPTIMIZERS, _learn, _mlp, _predict

model = _mlp()
optimizer = OPTIMIZERS["adam"](model.parameters())
shared = SharedModel(model, optimizer)            # at import, in the master: before the fork
steps_done = np.frombuffer(mmap.mmap(-1, 8), dtype=np.int64)


def app(environ, start_response):
    step = int(environ["QUERY_STRING"] or 0)
    status, body = "200 OK", b""
    if environ["PATH_INFO"] == "/learn":
        with shared.update():
            if steps_done[0] == step:             # steps in the test's order, whichever worker
                body = repr(_learn(model, optimizer, step)).encode()
                steps_done[0] += 1
            else:
                status = "409 Conflict"
        time.sleep(0.01)                          # so that concurrent requests reach every worker
    else:
        with shared.read():
            body = _predict(model)
        time.sleep(0.02)                          # so that concurrent requests reach every worker
    start_response(status, [("X-Pid", str(os.getpid())), ("Content-Length", str(len(body)))])
    return [body]
'''


def test_learning_requests_spread_over_gunicorn_workers_reach_every_worker(tmp_path):
    pytest.importorskip("gunicorn")
    import http.client
    import socket
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    (tmp_path / "shared_app.py").write_text(GUNICORN_APP)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, AC_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path), tests, os.path.dirname(tests)]))
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "gunicorn", "--preload", "-w", str(WORKERS),
                                   "--no-control-socket", "-b", "127.0.0.1:%d" % port, "shared_app:app"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def get(path):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, int(response.getheader("X-Pid")), response.read()
        finally:
            conn.close()

    def learn(step):
        for _ in range(3000):
            status, pid, body = get("/learn?%d" % step)
            if status == 200:
                return pid, float(body)
            time.sleep(0.002)
        raise AssertionError("step %d was never taken" % step)

    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()
            try:
                get("/predict")
                break
            except OSError:
                time.sleep(0.1)

        def predictions():
            """{worker pid: the predictions it sent}, once every worker has answered."""
            seen = {}
            with ThreadPoolExecutor(8) as pool:
                for _ in range(100):
                    for status, pid, body in pool.map(lambda _: get("/predict"), range(8)):
                        assert status == 200
                        seen.setdefault(pid, set()).add(body)
                    if len(seen) == WORKERS:
                        break
            return seen

        assert len(predictions()) == WORKERS         # every worker is up
        steps = 16
        with ThreadPoolExecutor(steps) as pool:      # all at once, so that they land on several workers
            learned = list(pool.map(learn, range(steps)))
        seen = predictions()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    reference = _mlp()
    reference_optimizer = OPTIMIZERS["adam"](reference.parameters())
    assert [loss for _, loss in learned] == [_learn(reference, reference_optimizer, s) for s in range(steps)]
    print("learning steps by worker:", [pid for pid, _ in learned])
    assert len({pid for pid, _ in learned}) >= 2, "the learning steps all landed on one worker"
    assert len(seen) == WORKERS
    assert all(bodies == {_predict(reference)} for bodies in seen.values())


def _busy(conn, shared, role, seconds):
    """Four threads of one worker that predict or step (role "mixed": two of each) back to
    back; sends the errors seen."""
    errors = []

    def loop(i):
        lock = shared.read if role == "read" or (role == "mixed" and i % 2) else shared.update
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                with lock():
                    time.sleep(0.0002)
            except Exception as exc:
                errors.append(repr(exc))

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    conn.send(errors)


def test_threaded_workers_reading_and_stepping_at_once_never_fail():
    # Record locks are per process: a thread that waited for the turnstile while another
    # thread of its process held the shared lock would look like a deadlock to the kernel
    # (EDEADLK) when a writer in another process waits for that lock.
    model = _mlp()
    shared = SharedModel(model)
    pipes, procs = [], []
    for role in ("read", "read", "mixed", "update"):
        parent, child = fork.Pipe()
        proc = fork.Process(target=_busy, args=(child, shared, role, 1.5), daemon=True)
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    errors = [pipe.recv() for pipe in pipes if pipe.poll(60)]
    for proc in procs:
        proc.join(10)
    assert errors == [[]] * 4
