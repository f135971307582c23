"""torch.utils.data.sampler's import path: aicraft.data.sampler's objects."""
from aicraft.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                                  SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]
