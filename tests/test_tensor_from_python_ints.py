"""ac.tensor of Python ints as torch.tensor: past int64 a ValueError, out of the asked
integer dtype's range a RuntimeError (uint8 takes -255..255, negatives wrapping, as
torch's); never a silent wrap past that (NumPy would give uint64 or objects, and a cast
would wrap)."""
import numpy as np
import pytest
import torch

import aicraft as ac


@pytest.mark.parametrize("data", [[2 ** 63], [-2 ** 63 - 1], 2 ** 63, [[1, 2 ** 64 + 5]]])
def test_ints_past_int64_raise_value_error_as_torch(data):
    with pytest.raises(ValueError):
        torch.tensor(data)
    with pytest.raises(ValueError, match="int64"):
        ac.tensor(data)


@pytest.mark.parametrize("data", [[300], [-256], [0, 256]])
def test_python_ints_out_of_uint8_raise_as_torch(data):
    with pytest.raises(RuntimeError):
        torch.tensor(data, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="overflow"):
        ac.tensor(data, dtype=ac.uint8)


def test_ints_in_range_and_arrays_convert_as_torch():
    for data, dt in (([2 ** 63 - 1, -2 ** 63], None), ([0, 255, -1, -255], ac.uint8), ([True, 3], None)):
        expected = torch.tensor(data, dtype=None if dt is None else torch.uint8)
        assert ac.tensor(data, dtype=dt).tolist() == expected.tolist()
    # a NumPy array is cast, as torch casts it (and as Tensor.to does): it wraps
    assert ac.tensor(np.array([300]), dtype=ac.uint8).tolist() == [44]
