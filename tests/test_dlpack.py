"""DLPack: zero-copy exchange with NumPy and PyTorch in both directions, for float32,
int64 and bool, proved by writing through one side and reading through the other;
the capsule keeps its tensor alive and an import keeps its producer alive; scoped
tensors are refused (ScopeError says to keep() them); bad inputs raise clearly."""
import gc
import sys

import numpy as np
import pytest

import aicraft as ac

DTYPES = [(np.float32, [1.5, -2.0, 3.25, 0.0]), (np.int64, [7, -3, 1 << 40, 0]),
          (np.bool_, [True, False, True, False])]


def live_tensors():
    gc.collect()
    return ac.memory_stats()["live_tensors"]


@pytest.mark.parametrize("np_dtype,values", DTYPES)
def test_numpy_views_an_aicraft_tensor_and_writes_through(np_dtype, values):
    t = ac.tensor(np.array(values, np_dtype).reshape(2, 2))
    n = np.from_dlpack(t)
    assert n.dtype == np_dtype and n.shape == (2, 2) and n.flags.writeable
    assert n.tolist() == t.tolist()
    n[1, 1] = values[0]                      # written through NumPy, read through aicraft
    assert t.tolist()[1][1] == values[0]
    t[0, 0] = values[1]                      # and the other way
    assert n[0, 0] == values[1]


@pytest.mark.parametrize("np_dtype,values", DTYPES)
def test_aicraft_views_a_numpy_array_and_writes_through(np_dtype, values):
    a = np.array(values, np_dtype)
    t = ac.from_dlpack(a)
    assert t.dtype == np_dtype and t.shape == (4,)
    a[2] = values[0]
    assert t.tolist()[2] == values[0]
    t[3] = values[1]
    assert a[3] == values[1]


def test_ops_compute_on_imported_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ac.from_dlpack(a)
    np.testing.assert_allclose((t * 2).sum(dim=1).numpy(), (a * 2).sum(axis=1))
    t.mul_(0.5)
    np.testing.assert_allclose(a, np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5)


def test_capsule_keeps_the_tensor_alive_until_the_consumer_lets_go():
    before = live_tensors()
    t = ac.arange(5.0)
    n = np.from_dlpack(t)
    del t
    assert live_tensors() == before + 1      # the export holds it
    assert n.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    del n
    assert live_tensors() == before


def test_an_untaken_capsule_gives_its_tensor_back():
    before = live_tensors()
    t = ac.ones(3)
    capsule = t.__dlpack__()
    del t
    assert live_tensors() == before + 1
    del capsule
    assert live_tensors() == before


def test_import_keeps_the_producer_alive():
    a = np.arange(4, dtype=np.int64)
    refs = sys.getrefcount(a)
    t = ac.from_dlpack(a)
    assert sys.getrefcount(a) > refs
    del a
    gc.collect()
    assert t.tolist() == [0, 1, 2, 3]        # the array's memory is still there
    view = t.reshape(2, 2)                   # a view holds it too
    del t
    gc.collect()
    assert view.tolist() == [[0, 1], [2, 3]]


def test_aicraft_to_aicraft_shares_memory():
    t = ac.zeros(3)
    u = ac.from_dlpack(t)
    u[1] = 4.0
    assert t.tolist() == [0.0, 4.0, 0.0]


def test_scoped_tensor_is_refused_until_kept():
    with ac.checkpoint():
        s = ac.ones(3) * 2
        with pytest.raises(ac.ScopeError, match=r"keep\(\)"):
            np.from_dlpack(s)
        kept = s.keep()
        n = np.from_dlpack(kept)
        copied = np.from_dlpack(s, copy=True)
    assert n.tolist() == [2.0, 2.0, 2.0] and copied.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(ac.ScopeError):
        s.__dlpack__()


def test_import_inside_a_scope_is_a_root_tensor():
    a = np.ones(4, np.float32)
    with ac.checkpoint():
        t = ac.from_dlpack(a)
        (t * 3).sum()
    assert t.tolist() == [1.0] * 4           # outlives the scope, as root tensors do


def test_export_refuses_bad_requests():
    t = ac.ones(2)
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(RuntimeError, match="requires grad"):
        ac.ones(2, requires_grad=True).__dlpack__()
    np.from_dlpack(ac.ones(2, requires_grad=True).detach())
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="device"):
        t.__dlpack__(dl_device=(2, 0))


def test_import_refuses_what_it_cannot_share():
    with pytest.raises(TypeError, match="float64"):
        ac.from_dlpack(np.ones(3))
    with pytest.raises(TypeError, match="int32"):
        ac.from_dlpack(np.ones(3, np.int32))
    with pytest.raises(ValueError, match="contiguous"):
        ac.from_dlpack(np.ones((3, 2), np.float32).T)
    read_only = np.ones(3, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ac.from_dlpack(read_only)
    with pytest.raises(TypeError, match="list"):
        ac.from_dlpack([1.0, 2.0])
    capsule = ac.ones(2).__dlpack__()
    ac.from_dlpack(capsule)
    with pytest.raises(TypeError, match="unused"):
        ac.from_dlpack(capsule)              # a capsule is taken once


def test_torch_round_trips_share_memory():
    torch = pytest.importorskip("torch")
    for dtype in (torch.float32, torch.int64, torch.bool):
        src = torch.tensor([1, 0, 1, 1], dtype=dtype)
        t = ac.from_dlpack(src)
        assert t.tolist() == src.tolist()
        src[1] = 1
        assert t.tolist()[1] == src.tolist()[1]
        back = torch.from_dlpack(t)
        assert back.data_ptr() == src.data_ptr() and back.dtype == dtype
    t = ac.arange(4.0)
    v = torch.from_dlpack(t)
    v.mul_(10)
    assert t.tolist() == [0.0, 10.0, 20.0, 30.0]
    with pytest.raises(TypeError, match="float64"):
        ac.from_dlpack(torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="contiguous"):
        ac.from_dlpack(torch.ones(2, 3).t())
