"""Scopes ended away from the thread that opened them: a generator suspended
inside `with ac.checkpoint():` and collected on another thread, and a thread that
ends with a scope open. The opener's thread stays usable and leak-free, its
tensors from that scope read as ended (ScopeError), and nothing is printed."""
import gc
import os
import subprocess
import sys
import threading

import pytest

import aicraft as ac

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def in_use():
    return ac.memory_stats()["bytes_in_use"]


def scoped_generator(n):
    with ac.checkpoint():
        for _ in range(n):
            yield ac.ones(4) * 2


def drop_on_another_thread(box):
    def other():
        box.clear()
        gc.collect()
    t = threading.Thread(target=other)
    t.start()
    t.join()


def test_generator_collected_on_another_thread_leaves_the_opener_usable_and_leak_free():
    base = in_use()
    g = scoped_generator(1000)
    kept = [next(g) for _ in range(1000)]
    box = [g]
    del g
    drop_on_another_thread(box)
    for _ in range(3):
        with ac.checkpoint():
            assert (ac.ones(3) * 2).tolist() == [2.0, 2.0, 2.0]
    assert in_use() == base
    with pytest.raises(ac.ScopeError):
        kept[0].tolist()
    x = ac.ones(3)                      # root again
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_orphan_under_a_scope_still_open_ends_when_that_scope_ends():
    base = in_use()
    g = scoped_generator(10)
    first = next(g)
    box = [g]
    del g
    with ac.checkpoint():
        inner = ac.ones(2) + 1
        drop_on_another_thread(box)
        assert inner.tolist() == [2.0, 2.0]   # the inner scope is untouched
        assert first.tolist() == [2.0] * 4    # the orphan waits for the inner one
    with pytest.raises(ac.ScopeError):
        first.tolist()
    assert in_use() == base
    with ac.checkpoint():
        assert ac.ones(1).tolist() == [1.0]


def test_thread_ending_with_a_scope_open_marks_its_tensors_ended():
    base = in_use()
    out = []

    def worker():
        g = scoped_generator(5)
        out.append(next(g))
        out.append(g)            # suspended inside its checkpoint when the thread ends

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    gc.collect()
    with pytest.raises(ac.ScopeError):
        out[0].tolist()
    out.clear()                   # the generator's exit runs here, on this thread
    gc.collect()
    assert in_use() == base
    with ac.checkpoint():
        assert ac.ones(1).tolist() == [1.0]


def test_nothing_is_printed_when_a_scope_is_exited_on_another_thread():
    code = r"""
import gc, threading
import aicraft as ac
def gen():
    with ac.checkpoint():
        while True:
            yield ac.ones(4)
g = gen(); next(g); box = [g]; del g
def other():
    box.clear(); gc.collect()
t = threading.Thread(target=other); t.start(); t.join()
with ac.checkpoint():
    ac.ones(3) * 2
print("ok", ac.memory_stats()["bytes_in_use"])
"""
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok 0"
    assert done.stderr == ""
