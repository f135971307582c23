"""Module.to / cpu / float / share_memory (what aicraft has: the CPU, float32),
apply and the module walks, and nn.utils.rnn.pad_sequence against PyTorch, with
gradients reaching every sequence; bad input."""
import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from aicraft.nn.utils.rnn import pad_sequence

rng = np.random.default_rng(37)


def test_to_accepts_cpu_and_float32_and_returns_self():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    for args in [("cpu",), ("cpu:0",), (ac.device("cpu"),), (ac.float32,), (float,),
                 ("cpu", ac.float32), (ac.randn(2),)]:
        assert m.to(*args) is m
    assert m.to(device="cpu", dtype=ac.float32, non_blocking=True) is m
    assert m.cpu() is m and m.float() is m and m.share_memory() is m


def test_to_refuses_other_devices_and_dtypes():
    m = nn.Linear(2, 3)
    if not ac.cuda.is_available():
        with pytest.raises(ac.DeviceError, match="Module.to: cuda:0 is not available"):
            m.to("cuda")
        with pytest.raises(ac.DeviceError, match="Module.to: cuda:0 is not available"):
            m.to(ac.device("cuda"))
    with pytest.raises(TypeError, match="float32"):
        m.to(ac.int64)
    with pytest.raises(TypeError, match="float32"):
        m.to(np.float64)
    with pytest.raises(TypeError):
        m.to(3)
    with pytest.raises(TypeError):
        m.to(devise="cpu")


def test_apply_and_module_walks():
    m = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.Tanh(), nn.Linear(3, 1)))
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Linear", "Tanh", "Linear", "Sequential", "Sequential"]
    assert [n for n, _ in m.named_children()] == ["0", "1"]
    assert [n for n, _ in m.named_modules()] == ["", "0", "1", "1.0", "1.1"]
    assert len(list(m.modules())) == 5 and len(list(m.children())) == 2


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_matches_torch_and_carries_gradients(batch_first, padding_side):
    torch = pytest.importorskip("torch")
    arrays = [rng.standard_normal((n, 3)).astype(np.float32) for n in (4, 1, 3)]
    seqs = [ac.tensor(a, requires_grad=True) for a in arrays]
    out = pad_sequence(seqs, batch_first=batch_first, padding_value=-1.5, padding_side=padding_side)
    expected = torch.nn.utils.rnn.pad_sequence([torch.tensor(a) for a in arrays],
                                               batch_first=batch_first, padding_value=-1.5,
                                               padding_side=padding_side)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    (out * out).sum().backward()
    for a, s in zip(arrays, seqs):
        np.testing.assert_allclose(s.grad.numpy(), 2 * a)


def test_pad_sequence_bad_inputs():
    with pytest.raises(ValueError, match="empty"):
        pad_sequence([])
    with pytest.raises(TypeError):
        pad_sequence(ac.randn(3, 2))
    with pytest.raises(TypeError):
        pad_sequence([np.zeros(3)])
    with pytest.raises(ac.ShapeError):
        pad_sequence([ac.randn(2, 3), ac.randn(2, 4)])
    with pytest.raises(ac.ShapeError):
        pad_sequence([ac.tensor(1.0)])
    with pytest.raises(TypeError):
        pad_sequence([ac.randn(2)], padding_value="0")
    with pytest.raises(ValueError):
        pad_sequence([ac.randn(2)], padding_side="middle")
    assert pad_sequence([ac.randn(2), ac.randn(1)]).shape == (2, 2)
