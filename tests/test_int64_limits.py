"""Shapes, sizes and indices past int64: a shape whose element count overflows
int64 is refused everywhere (creation, reshape/view, safetensors headers), even
with a dim of 0 (which would flatten (0, 2^32, 2^32) to (0, 0)); ints past int64
raise the exceptions torch raises or the README documents, never OverflowError:
x[2**63] IndexError, x[2**63:] empty as in torch, topk(2**63) ValueError."""
import io
import json
import struct

import numpy as np
import pytest

import aicraft as ac


@pytest.mark.parametrize("shape", [(0, 2 ** 32, 2 ** 32), (0, 2 ** 62, 4), (2 ** 40, 0, 2 ** 40), (3, 0, 2 ** 63 - 1)])
def test_shapes_whose_other_dims_overflow_are_refused(shape):
    with pytest.raises(MemoryError, match="too many elements"):
        ac.zeros(*shape)
    with pytest.raises(MemoryError, match="too many elements"):
        ac.zeros(0).reshape(*shape)
    with pytest.raises(MemoryError, match="too many elements"):
        ac.zeros(0).view(*shape)


def test_flatten_of_a_huge_empty_shape_cannot_happen():
    with pytest.raises(MemoryError):
        ac.zeros(0, 2 ** 32, 2 ** 32).flatten(1)
    assert ac.zeros(0, 2 ** 20, 2 ** 20).flatten(1).shape == (0, 2 ** 40)


@pytest.mark.parametrize("shape", [[0, 2 ** 40, 2 ** 40], [0, 2 ** 62, 4], [2 ** 31, 2 ** 31, 0, 5]])
def test_safetensors_header_shapes_that_overflow_are_format_errors(shape):
    header = json.dumps({"x": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}).encode()
    header += b" " * (-len(header) % 8)
    with pytest.raises(ac.FormatError, match="too many elements"):
        ac.load(io.BytesIO(struct.pack("<Q", len(header)) + header))


def test_indices_past_int64():
    x = ac.arange(5)
    with pytest.raises(IndexError):
        x[2 ** 63]
    with pytest.raises(IndexError):
        x[-(2 ** 63) - 1]
    assert x[2 ** 63:].shape == (0,)
    assert x[:-(2 ** 70)].shape == (0,)
    assert x[-(2 ** 70):2 ** 70].tolist() == [0, 1, 2, 3, 4]
    assert x[::2 ** 63].tolist() == [0]
    with pytest.raises(ValueError):
        x[::-(2 ** 70)]             # a negative step, as torch refuses any


@pytest.mark.parametrize("call", [
    lambda x: x.topk(2 ** 63), lambda x: x.sum(2 ** 63), lambda x: x.reshape(2 ** 63),
    lambda x: ac.zeros(2 ** 64), lambda x: ac.full((2 ** 63,), 1.0), lambda x: x.unsqueeze(-(2 ** 63) - 1),
    lambda x: x.narrow(0, 2 ** 63, 1), lambda x: x.view(2 ** 70),
])
def test_sizes_past_int64_raise_value_error_not_overflow_error(call):
    with pytest.raises(ValueError):
        call(ac.arange(5.0))
