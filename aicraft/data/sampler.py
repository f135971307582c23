"""sampler.py - the order samples are drawn in, as torch.utils.data's samplers.

A sampler yields dataset indices (ints); BatchSampler groups them into lists.
The built-in samplers also answer `epoch_indices()`: the whole epoch as one
NumPy int64 array, so the DataLoader slices batches without a Python loop
per sample.

Randomness: a sampler given a numpy.random.Generator draws from it; without
one, each epoch draws a fresh seed from aicraft's own generator, so
`ac.manual_seed(s)` makes every shuffle reproducible, as torch.manual_seed
does for PyTorch's samplers.
"""
import numbers

import numpy as np

from aicraft.creation import rand

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler",
           "DistributedSampler", "library_rng", "check_generator"]


def library_rng():
    """A numpy Generator seeded from aicraft's generator (the state ac.manual_seed sets)."""
    bits = rand(4).numpy().view(np.uint32)   # 4 draws of float32 bits: 128 bits of seed material
    return np.random.default_rng(bits)


def check_generator(generator, what):
    if generator is not None and not isinstance(generator, np.random.Generator):
        raise TypeError("%s: generator must be a numpy.random.Generator, not %s" % (what, type(generator).__name__))
    return generator


def _positive_int(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError("%s must be a positive int, got %r" % (what, value))
    return int(value)


class Sampler:
    """Base class: subclasses define `__iter__` (indices) and usually `__len__`."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError("%s must define __iter__" % type(self).__name__)

    def epoch_indices(self):
        """This epoch's indices as a NumPy int64 array."""
        return np.fromiter(iter(self), dtype=np.int64)


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def epoch_indices(self):
        return np.arange(len(self.data_source), dtype=np.int64)

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random order of the dataset's indices, new every epoch.

    replacement=False: permutations (more than one, concatenated, when
    num_samples exceeds the dataset); True: num_samples independent draws.
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError("RandomSampler: replacement must be a bool, got %r" % (replacement,))
        if num_samples is not None:
            _positive_int(num_samples, "RandomSampler: num_samples")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = check_generator(generator, "RandomSampler")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else int(self._num_samples)

    def epoch_indices(self):
        n, count = len(self.data_source), self.num_samples
        rng = self.generator if self.generator is not None else library_rng()
        if self.replacement:
            if n == 0:
                raise ValueError("RandomSampler: cannot draw %d samples from an empty dataset" % count)
            return rng.integers(0, n, size=count, dtype=np.int64)
        if n == 0:
            return np.empty(0, np.int64)
        rounds = -(-count // n)
        return np.concatenate([rng.permutation(n) for _ in range(rounds)])[:count].astype(np.int64)

    def __iter__(self):
        return iter(self.epoch_indices().tolist())

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order every epoch."""

    def __init__(self, indices, generator=None):
        self.indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        self.generator = check_generator(generator, "SubsetRandomSampler")

    def epoch_indices(self):
        rng = self.generator if self.generator is not None else library_rng()
        return self.indices[rng.permutation(len(self.indices))]

    def __iter__(self):
        return iter(self.epoch_indices().tolist())

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Lists of batch_size indices from sampler; the last one shorter unless drop_last."""

    def __init__(self, sampler, batch_size, drop_last):
        self.batch_size = _positive_int(batch_size, "BatchSampler: batch_size")
        if not isinstance(drop_last, bool):
            raise TypeError("BatchSampler: drop_last must be a bool, got %r" % (drop_last,))
        self.sampler = sampler
        self.drop_last = drop_last

    def epoch_batches(self):
        """This epoch's batches as NumPy int64 arrays (slices of one epoch array)."""
        get = getattr(self.sampler, "epoch_indices", None)
        order = get() if get is not None else np.fromiter(iter(self.sampler), dtype=np.int64)
        stop = len(order) - len(order) % self.batch_size if self.drop_last else len(order)
        return [order[start:start + self.batch_size] for start in range(0, stop, self.batch_size)]

    def __iter__(self):
        return (batch.tolist() for batch in self.epoch_batches())

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)


class DistributedSampler(Sampler):
    """The share of a dataset one rank reads, as torch.utils.data.DistributedSampler.

    Each epoch's order (a permutation drawn from seed + epoch, the same on every
    rank, or the dataset's order without shuffle) is padded with its own first
    indices up to a multiple of num_replicas, or cut down to one with drop_last;
    rank takes every num_replicas-th index from position rank. So the ranks
    together read each sample once per epoch (the padding aside), and each
    the same number of them. num_replicas and rank default to
    aicraft.distributed's world size and rank. Call set_epoch(epoch) before each
    epoch, or every epoch repeats the first's order.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        from aicraft import distributed
        if num_replicas is None:
            num_replicas = distributed.get_world_size()
        if rank is None:
            rank = distributed.get_rank()
        num_replicas = _positive_int(num_replicas, "DistributedSampler: num_replicas")
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or not 0 <= rank < num_replicas:
            raise ValueError("DistributedSampler: rank must be an int in [0, %d], got %r"
                             % (num_replicas - 1, rank))
        for name, value in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(value, bool):
                raise TypeError("DistributedSampler: %s must be a bool, got %r" % (name, value))
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError("DistributedSampler: seed must be an int, got %r" % (seed,))
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = int(rank)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = -(-n // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        """The epoch the next iteration shuffles for."""
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
            raise TypeError("DistributedSampler: epoch must be an int, got %r" % (epoch,))
        self.epoch = int(epoch)

    def epoch_indices(self):
        n = len(self.dataset)
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(n)
        else:
            order = np.arange(n, dtype=np.int64)
        if self.total_size > n:     # pad with the order's own first indices (repeated if need be)
            order = np.resize(order, self.total_size)
        return order[self.rank:self.total_size:self.num_replicas].astype(np.int64)

    def __iter__(self):
        return iter(self.epoch_indices().tolist())

    def __len__(self):
        return self.num_samples
