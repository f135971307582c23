"""DLPack keeps every dtype exact: uint8 leaves as uint8 (kDLUInt, 8 bits), never
as bool, and comes back in as uint8; bool leaves as bool; a bool tensor from
another library whose bytes are not all 0 or 1 is refused (ValueError), as the
safetensors and program readers refuse such bytes."""
import numpy as np
import pytest
import torch

import aicraft as ac


def test_uint8_leaves_as_uint8():
    t = ac.tensor(np.array([0, 5, 200], dtype=np.uint8))
    n = np.from_dlpack(t)
    assert n.dtype == np.uint8 and n.tolist() == [0, 5, 200]
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.uint8 and tt.tolist() == [0, 5, 200]


def test_uint8_comes_in_as_uint8_sharing_memory():
    n = np.array([0, 5, 200, 255], dtype=np.uint8)
    t = ac.from_dlpack(n)
    assert t.dtype == ac.uint8 and t.tolist() == [0, 5, 200, 255]
    n[1] = 7
    assert t.tolist()[1] == 7
    tt = torch.tensor([1, 2, 250], dtype=torch.uint8)
    assert ac.from_dlpack(tt).tolist() == [1, 2, 250]


def test_bool_round_trips_as_bool():
    t = ac.tensor([True, False, True])
    assert np.from_dlpack(t).dtype == np.bool_
    assert torch.from_dlpack(t).dtype == torch.bool
    back = ac.from_dlpack(np.array([True, False]))
    assert back.dtype == ac.bool and back.tolist() == [True, False]


@pytest.mark.parametrize("make", [
    lambda: np.array([0, 1, 2, 255], dtype=np.uint8).view(np.bool_),
    lambda: torch.tensor([1, 0, 3], dtype=torch.uint8).view(torch.bool),
])
def test_bool_bytes_other_than_0_or_1_are_refused(make):
    with pytest.raises(ValueError, match="bool element"):
        ac.from_dlpack(make())
