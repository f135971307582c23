"""Pieces of torch's surface real programs reach: nn.init.orthogonal_, a range as an index,
and the layout/device flags (is_xpu, is_sparse, ...) a CPU tensor answers False to."""
import numpy as np
import pytest
import torch

import aicraft as ac


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (6, 2, 2), (4, 4)])
def test_orthogonal_gives_orthonormal_rows_or_columns_times_gain(shape):
    w = ac.nn.Parameter(ac.zeros(*shape))
    assert ac.nn.init.orthogonal_(w, gain=1.5) is w and w.requires_grad
    a = w.detach().numpy().reshape(shape[0], -1).astype(np.float64) / 1.5
    small = min(a.shape)
    gram = a @ a.T if a.shape[0] == small else a.T @ a
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5)


def test_orthogonal_refuses_vectors_as_torch():
    with pytest.raises(ValueError):
        torch.nn.init.orthogonal_(torch.zeros(3))
    with pytest.raises(ValueError, match="2 or more"):
        ac.nn.init.orthogonal_(ac.zeros(3))


def test_a_range_indexes_as_the_list_it_holds():
    x, t = ac.arange(12.).reshape(3, 4), torch.arange(12.).reshape(3, 4)
    assert x[range(3), [0, 1, 2]].tolist() == t[range(3), [0, 1, 2]].tolist()
    assert x[range(1, 3)].tolist() == t[range(1, 3)].tolist()
    x[range(3), [3, 2, 1]] = -1.0
    t[range(3), [3, 2, 1]] = -1.0
    assert x.tolist() == t.tolist()


def test_layout_and_device_flags_are_false_on_cpu_tensors():
    x, t = ac.ones(2), torch.ones(2)
    for name in ("is_xpu", "is_mps", "is_meta", "is_sparse", "is_quantized", "is_mkldnn"):
        assert getattr(x, name) is False and getattr(t, name) is False, name
