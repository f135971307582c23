"""sampler.py - the order samples are drawn in, as torch.utils.data's samplers.

A sampler yields dataset indices (ints); BatchSampler groups them into lists.
The built-in samplers also answer `epoch_indices()`: the whole epoch as one
NumPy int64 array, so the DataLoader slices batches without a Python loop
per sample.

Randomness: a sampler given a numpy.random.Generator draws from it; given an
aicraft.Generator, each epoch draws a fresh seed from that; without either,
each epoch draws a fresh seed from aicraft's own generator, so
`ac.manual_seed(s)` makes every shuffle reproducible, as torch.manual_seed
does for PyTorch's samplers.

Samplers draw lazily: `index_chunks()` yields an epoch's indices a NumPy chunk
at a time (RandomSampler with replacement 32,768 draws at a time, without it
one permutation at a time), so RandomSampler(ds, replacement=True,
num_samples=10**10) allocates nothing up front; BatchSampler cuts batches
from the chunks as they come. `epoch_indices()` still gives a whole epoch.
"""
import itertools
import numbers

import numpy as np

from aicraft.creation import rand

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler",
           "WeightedRandomSampler", "DistributedSampler", "library_rng", "check_generator", "numpy_rng"]

_CHUNK = 32768


def library_rng(generator=None):
    """A numpy Generator seeded from aicraft's generator (the state ac.manual_seed sets),
    or from generator (an aicraft.Generator) when given."""
    bits = rand(4, generator=generator).numpy().view(np.uint32)   # 128 bits of seed material
    return np.random.default_rng(bits)


def check_generator(generator, what):
    from aicraft.creation import Generator
    if generator is not None and not isinstance(generator, (np.random.Generator, Generator)):
        raise TypeError("%s: generator must be an aicraft.Generator or a numpy.random.Generator, not %s"
                        % (what, type(generator).__name__))
    return generator


def numpy_rng(generator):
    """The numpy Generator to draw an epoch from: generator itself when it is one,
    else one seeded from the aicraft generator (given, or the thread's)."""
    if isinstance(generator, np.random.Generator):
        return generator
    return library_rng(generator)


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

    def index_chunks(self):
        """This epoch's indices as NumPy int64 arrays, a chunk at a time."""
        yield self.epoch_indices()


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

    def index_chunks(self):
        n, count = len(self.data_source), self.num_samples
        rng = numpy_rng(self.generator)
        if self.replacement:
            if n == 0:
                raise ValueError("RandomSampler: cannot draw %d samples from an empty dataset" % count)
            for start in range(0, count, _CHUNK):
                yield rng.integers(0, n, size=min(_CHUNK, count - start), dtype=np.int64)
            return
        left = count if n else 0
        while left > 0:
            order = rng.permutation(n).astype(np.int64)
            yield order[:left]
            left -= len(order[:left])

    def epoch_indices(self):
        chunks = list(self.index_chunks())
        return np.concatenate(chunks) if chunks else np.empty(0, np.int64)

    def __iter__(self):
        for chunk in self.index_chunks():
            yield from chunk.tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order every epoch."""

    def __init__(self, indices, generator=None):
        self.indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        self.generator = check_generator(generator, "SubsetRandomSampler")

    def epoch_indices(self):
        return self.indices[numpy_rng(self.generator).permutation(len(self.indices))]

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

    def _chunks(self):
        get = getattr(self.sampler, "index_chunks", None)
        if get is not None:
            return get()
        return self._python_chunks()

    def _python_chunks(self):
        """A sampler of our own making's indices, _CHUNK at a time, without holding the epoch."""
        it = iter(self.sampler)
        while True:
            chunk = np.fromiter(itertools.islice(it, _CHUNK), dtype=np.int64)
            if not len(chunk):
                return
            yield chunk

    def epoch_batches(self):
        """This epoch's batches as NumPy int64 arrays, cut lazily from the sampler's chunks."""
        size, pending = self.batch_size, np.empty(0, np.int64)
        for chunk in self._chunks():
            if len(pending):
                chunk = np.concatenate([pending, chunk])
            stop = len(chunk) - len(chunk) % size
            for start in range(0, stop, size):
                yield chunk[start:start + size]
            pending = chunk[stop:]
        if len(pending) and not self.drop_last:
            yield pending

    def __iter__(self):
        return (batch.tolist() for batch in self.epoch_batches())

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probability proportional to weights (with
    replacement by default), as torch.utils.data.WeightedRandomSampler; drawn lazily."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        num_samples = _positive_int(num_samples, "WeightedRandomSampler: num_samples")
        if not isinstance(replacement, bool):
            raise ValueError("WeightedRandomSampler: replacement should be a boolean value, but got "
                             "replacement=%r" % (replacement,))
        w = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError("WeightedRandomSampler: weights should be a 1-d sequence, got shape %s" % (w.shape,))
        if not len(w) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise ValueError("WeightedRandomSampler: weights must be finite, non-negative and not all zero")
        if not replacement and num_samples > np.count_nonzero(w):
            raise ValueError("WeightedRandomSampler: cannot draw %d samples without replacement from %d "
                             "non-zero weights" % (num_samples, np.count_nonzero(w)))
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = check_generator(generator, "WeightedRandomSampler")

    def index_chunks(self):
        rng = numpy_rng(self.generator)
        p = self.weights / self.weights.sum()
        if not self.replacement:
            yield rng.choice(len(p), size=self.num_samples, replace=False, p=p).astype(np.int64)
            return
        for start in range(0, self.num_samples, _CHUNK):
            yield rng.choice(len(p), size=min(_CHUNK, self.num_samples - start), p=p).astype(np.int64)

    def epoch_indices(self):
        return np.concatenate(list(self.index_chunks()))

    def __iter__(self):
        for chunk in self.index_chunks():
            yield from chunk.tolist()

    def __len__(self):
        return self.num_samples


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
