"""Tensors in shared memory and a real Hogwild run: two processes train one model."""
import os
import pickle

import numpy as np
import pytest

import aicraft as ac
import aicraft.multiprocessing as mp
from aicraft import nn

TRUE_W = [[1.0], [-2.0], [3.0], [0.5]]


def _train(rank, model, steps):
    ac.manual_seed(rank)
    opt = ac.optim.SGD(model.parameters(), lr=0.05)
    x = ac.randn(256, 4)
    y = x @ ac.tensor(TRUE_W)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()


def _shm_names():
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("aicraft-%d-" % os.getpid())}
    except FileNotFoundError:
        return set()


def test_share_memory_keeps_values_identity_and_grad_flag():
    m = nn.Linear(3, 2)
    before = [p.numpy().copy() for p in m.parameters()]
    w = m.weight
    assert not w.is_shared()
    assert m.share_memory() is m and m.weight is w
    assert all(p.is_shared() and p.requires_grad for p in m.parameters())
    assert all(np.array_equal(a, p.numpy()) for a, p in zip(before, m.parameters()))
    m(ac.ones(1, 3)).sum().backward()
    assert m.weight.grad is not None and not m.weight.grad.is_shared()


def test_pickled_shared_tensor_maps_the_same_memory():
    t = ac.zeros(4).share_memory_()
    back = pickle.loads(pickle.dumps(t))
    assert back.is_shared()
    back.fill_(2.5)
    assert t.tolist() == [2.5] * 4
    p = nn.Parameter(ac.ones(2)).share_memory_()
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, nn.Parameter) and q.requires_grad and q.is_shared()
    assert not pickle.loads(pickle.dumps(ac.ones(2))).is_shared()   # by value


def test_memory_is_released_with_the_last_reference():
    before = _shm_names()
    t = ac.ones(1000).share_memory_()
    assert len(_shm_names() - before) == 1
    del t
    import gc
    gc.collect()
    assert _shm_names() == before


def test_scoped_and_non_leaf_tensors_are_refused():
    x = ac.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError):
        (x * 2).share_memory_()
    with ac.checkpoint():
        with pytest.raises(RuntimeError):
            ac.ones(2).share_memory_()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_hogwild_two_processes_update_one_model(method):
    ac.manual_seed(0)
    model = nn.Linear(4, 1)
    with ac.no_grad():
        model.weight.fill_(0.0)
        model.bias.fill_(0.0)
    model.share_memory()
    ctx = mp.get_context(method)
    procs = [ctx.Process(target=_train, args=(rank, model, 60)) for rank in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
    assert [p.exitcode for p in procs] == [0, 0]
    # the parent's model learnt what the children trained (alone it would still be zero)
    np.testing.assert_allclose(model.weight.numpy(), np.array(TRUE_W).T, atol=0.05)


def test_multiprocessing_surface():
    for name in ("Process", "Pool", "Queue", "set_start_method", "get_context", "get_start_method",
                 "spawn", "cpu_count"):
        assert hasattr(mp, name)
    assert mp.get_sharing_strategy() == "file_system" and mp.get_all_sharing_strategies() == {"file_system"}
    with pytest.raises(NotImplementedError):
        mp.set_sharing_strategy("file_descriptor")
