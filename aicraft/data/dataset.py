"""dataset.py - Dataset, TensorDataset, Subset and random_split, as in torch.utils.data.

Array-backed datasets also answer `__getitems__(indices)`: the whole batch as
NumPy arrays (a tuple with one array per field), made by one fancy-index per
field. The DataLoader prefers it to fetching samples one by one.
"""
import math
import numbers

import numpy as np

from aicraft.data.dataloader import make_rng, stack_samples
from aicraft.data.sampler import numpy_rng
from aicraft.tensor import Tensor

__all__ = ["Dataset", "TensorDataset", "Subset", "ConcatDataset", "random_split"]


class Dataset:
    """A sized collection of samples: subclasses define `__getitem__(index)` and `__len__`."""

    def __getitem__(self, index):
        raise NotImplementedError("%s must define __getitem__" % type(self).__name__)

    def __len__(self):
        raise NotImplementedError("%s must define __len__" % type(self).__name__)

    def __add__(self, other):
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Samples are rows of the given arrays: `ds[i] == (a[i], b[i], ...)`.

    Takes NumPy arrays (kept as they are, uint8 stays uint8) or aicraft Tensors
    (copied to float32 arrays once); all must have the same first dimension.
    `tensors` holds the arrays.
    """

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset: needs at least one array")
        arrays = []
        for i, t in enumerate(tensors):
            if isinstance(t, Tensor):
                t = t.numpy()
            elif not isinstance(t, np.ndarray):
                raise TypeError("TensorDataset: argument %d must be a Tensor or numpy.ndarray, not %s"
                                % (i, type(t).__name__))
            if t.ndim == 0:
                raise ValueError("TensorDataset: argument %d is 0-d; samples are taken along dim 0" % i)
            arrays.append(t)
        sizes = [len(a) for a in arrays]
        if len(set(sizes)) > 1:
            raise ValueError("TensorDataset: first dimensions differ: %s" % sizes)
        self.tensors = tuple(arrays)

    def __getitem__(self, index):
        return tuple(a[index] for a in self.tensors)

    def __getitems__(self, indices):
        return tuple(a[indices] for a in self.tensors)

    def __len__(self):
        return len(self.tensors[0])


class Subset(Dataset):
    """The samples of dataset at the given indices, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64).reshape(-1)

    def __getitem__(self, index):
        return self.dataset[int(self.indices[index])]

    def __getitems__(self, indices):
        picked = self.indices[indices]
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return getitems(picked)
        return stack_samples([self.dataset[int(i)] for i in picked])

    def __len__(self):
        return len(self.indices)


def _split_lengths(n, lengths):
    """Integer lengths summing to n, from ints or from fractions (PyTorch's rule)."""
    lengths = list(lengths)
    if not lengths:
        raise ValueError("random_split: lengths is empty")
    if not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in lengths):
        raise TypeError("random_split: lengths must be numbers, got %r" % (lengths,))
    total = sum(lengths)
    if math.isclose(total, 1) and total <= 1:
        if any(not 0 <= x <= 1 for x in lengths):
            raise ValueError("random_split: fractions must lie in [0, 1], got %r" % (lengths,))
        sizes = [int(math.floor(n * x)) for x in lengths]
        for i in range(n - sum(sizes)):   # the remainder goes round-robin from the first split
            sizes[i % len(sizes)] += 1
        return sizes
    if not all(isinstance(x, numbers.Integral) and x >= 0 for x in lengths):
        raise ValueError("random_split: lengths must be non-negative ints or fractions summing to 1, got %r"
                         % (lengths,))
    if total != n:
        raise ValueError("random_split: lengths sum to %d, but the dataset has %d samples" % (total, n))
    return [int(x) for x in lengths]


def random_split(dataset, lengths, generator=None, seed=None):
    """Split dataset into non-overlapping random Subsets of the given lengths.

    lengths: ints summing to len(dataset), or fractions summing to 1.
    Drawn from generator (an aicraft.Generator or a numpy.random.Generator), from
    seed, or else from aicraft's generator (ac.manual_seed makes it repeat).
    """
    n = len(dataset)
    sizes = _split_lengths(n, lengths)
    rng = make_rng(generator, seed, "random_split")
    order = numpy_rng(rng).permutation(n)
    offsets = np.cumsum([0] + sizes)
    return [Subset(dataset, order[offsets[i]:offsets[i + 1]]) for i in range(len(sizes))]


class ConcatDataset(Dataset):
    """Datasets one after the other, as torch.utils.data.ConcatDataset (dataset_a + dataset_b)."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        import bisect
        n = len(self)
        if not -n <= index < n:
            raise IndexError("ConcatDataset: index %d is out of range for %d samples" % (index, n))
        index %= n
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]

