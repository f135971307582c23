"""dataloader.py - DataLoader and the collate functions that turn samples into batches.

A batch is made by one fetch and one C call per field: an array-backed
dataset hands over the whole batch through `__getitems__(indices)` (indices
a NumPy int64 array; it returns NumPy arrays with the batch along dim 0),
and each field becomes an aicraft Tensor with `ac.from_numpy`. Other
datasets are read sample by sample and stacked with NumPy first.

Tensors are float32 only, so integer data (class labels) arrive as float32
tensors of the same values, which is what cross_entropy takes.
"""
import numbers

import numpy as np

from aicraft.creation import from_numpy, stack
from aicraft.tensor import Tensor

__all__ = ["DataLoader", "default_collate", "stack_samples", "to_tensors", "make_rng"]


def make_rng(generator, seed, what):
    """The numpy Generator to draw from: generator, or a new one from seed (fresh entropy if both are None)."""
    if generator is not None and seed is not None:
        raise ValueError("%s: pass a generator or a seed, not both" % what)
    if generator is None:
        return np.random.default_rng(seed)
    if not isinstance(generator, np.random.Generator):
        raise TypeError("%s: generator must be a numpy.random.Generator, not %s" % (what, type(generator).__name__))
    return generator


def stack_samples(samples):
    """Samples (tuples, dicts, arrays, numbers or Tensors) stacked field by field along a new dim 0.

    Arrays and numbers become one NumPy array per field, Tensors one Tensor
    (ac.stack); anything else (strings, say) a list.
    """
    first = samples[0]
    if isinstance(first, (str, bytes)):
        return list(samples)
    if isinstance(first, tuple):
        return tuple(stack_samples(field) for field in zip(*samples))
    if isinstance(first, list):
        return [stack_samples(field) for field in zip(*samples)]
    if isinstance(first, dict):
        return {key: stack_samples([s[key] for s in samples]) for key in first}
    if isinstance(first, Tensor):
        return stack(list(samples))
    if isinstance(first, (np.ndarray, np.generic, numbers.Number)):
        return np.stack(samples)
    return list(samples)


def to_tensors(batch):
    """Every numeric NumPy array in batch (nested in tuples, lists, dicts) as an aicraft Tensor."""
    if isinstance(batch, np.ndarray) and batch.dtype.kind in "biuf":
        return from_numpy(batch)
    if isinstance(batch, tuple):
        return tuple(to_tensors(x) for x in batch)
    if isinstance(batch, list):
        return [to_tensors(x) for x in batch]
    if isinstance(batch, dict):
        return {key: to_tensors(x) for key, x in batch.items()}
    return batch


def default_collate(samples):
    """A list of samples as one batch: a Tensor per numeric field, float32."""
    return to_tensors(stack_samples(samples))


class DataLoader:
    """Batches of a dataset, each sample once per epoch.

    shuffle: a new random order every epoch, drawn from generator (a
    numpy.random.Generator the loader keeps using) or from a Generator made
    from seed; the same seed gives the same sequence of epochs.
    drop_last: leave out the last batch when it would be short.
    collate_fn: called with the list of samples of a batch (PyTorch's
    meaning); without it, array-backed datasets skip the per-sample path.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, collate_fn=None,
                 generator=None, seed=None):
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise ValueError("DataLoader: batch_size must be a positive int, got %r" % (batch_size,))
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError("DataLoader: collate_fn must be callable")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.collate_fn = collate_fn
        self.generator = make_rng(generator, seed, "DataLoader")

    def __len__(self):
        n = len(self.dataset)
        if self.drop_last:
            return n // self.batch_size
        return -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        order = self.generator.permutation(n) if self.shuffle else np.arange(n)
        stop = n - n % self.batch_size if self.drop_last else n
        for start in range(0, stop, self.batch_size):
            yield self._fetch(order[start:start + self.batch_size])

    def _fetch(self, indices):
        if self.collate_fn is not None:
            return self.collate_fn([self.dataset[int(i)] for i in indices])
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return to_tensors(getitems(indices))
        return to_tensors(stack_samples([self.dataset[int(i)] for i in indices]))
