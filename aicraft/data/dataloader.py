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
from typing import Any, Callable, Iterator, Optional

import numpy as np

from aicraft.creation import from_numpy, stack
from aicraft.data.sampler import BatchSampler, RandomSampler, SequentialSampler, check_generator
from aicraft.tensor import Tensor

__all__ = ["DataLoader", "default_collate", "get_worker_info", "stack_samples", "to_tensors", "make_rng"]


def make_rng(generator, seed, what):
    """The numpy Generator to draw from: generator, or a new one from seed; None when both are None."""
    if generator is not None and seed is not None:
        raise ValueError("%s: pass a generator or a seed, not both" % what)
    if seed is not None:
        return np.random.default_rng(seed)
    return check_generator(generator, what)


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


def get_worker_info():
    """None: batches are always loaded in the main process (see DataLoader)."""
    return None


def _count(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError("DataLoader: %s must be a non-negative int, got %r" % (what, value))
    return int(value)


class DataLoader:
    """Batches of a dataset, as torch.utils.data.DataLoader.

    Order: sampler (indices), or shuffle=True for a RandomSampler, or the
    dataset's order; batch_sampler (lists of indices) replaces batch_size,
    shuffle, sampler and drop_last. A shuffle draws from generator (a
    numpy.random.Generator the loader keeps using), from a Generator made
    once from seed (the same seed, the same sequence of epochs), or else
    from aicraft's generator at the start of each epoch, so ac.manual_seed
    makes runs repeat.
    drop_last: leave out the last batch when it would be short.
    collate_fn: called with the list of samples of a batch (PyTorch's
    meaning); without it, array-backed datasets skip the per-sample path.

    Workers: batches are loaded in the main process, always. num_workers,
    prefetch_factor, persistent_workers, worker_init_fn and pin_memory are
    checked as PyTorch checks them and then change nothing: the batches are
    the ones num_workers=0 gives, and worker_init_fn is never called (there
    are no workers; get_worker_info() returns None). Batching is one C call
    per field, so a worker pool would mostly add copies between processes.
    """

    def __init__(self, dataset: Any, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Optional[Callable[..., Any]] = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Any = None,
                 prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 generator: Any = None, seed: Optional[int] = None) -> None:
        num_workers = _count(num_workers, "num_workers")
        _count(timeout, "timeout")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor needs num_workers > 0")
        if prefetch_factor is not None:
            _count(prefetch_factor, "prefetch_factor")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers needs num_workers > 0")
        for name, fn in (("collate_fn", collate_fn), ("worker_init_fn", worker_init_fn)):
            if fn is not None and not callable(fn):
                raise TypeError("DataLoader: %s must be callable" % name)
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler and shuffle=True are mutually exclusive")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler is mutually exclusive with batch_size, "
                                 "shuffle, sampler and drop_last")
        elif isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise ValueError("DataLoader: batch_size must be a positive int, got %r" % (batch_size,))
        rng = make_rng(generator, seed, "DataLoader")
        if batch_sampler is None:
            if sampler is None:
                sampler = RandomSampler(dataset, generator=rng) if shuffle else SequentialSampler(dataset)
            batch_sampler = BatchSampler(sampler, int(batch_size), bool(drop_last))
            self.batch_size = int(batch_size)
        else:
            self.batch_size = None   # as PyTorch: the batch sampler decides
        self.dataset = dataset
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.collate_fn = collate_fn
        self.generator = rng
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = bool(persistent_workers)
        self.pin_memory = bool(pin_memory)
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        get = getattr(self.batch_sampler, "epoch_batches", None)
        batches = get() if get is not None else self.batch_sampler
        for indices in batches:
            yield self._fetch(np.asarray(indices, dtype=np.int64))

    def _fetch(self, indices):
        if self.collate_fn is not None:
            return self.collate_fn([self.dataset[int(i)] for i in indices])
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return to_tensors(getitems(indices))
        return to_tensors(stack_samples([self.dataset[int(i)] for i in indices]))
