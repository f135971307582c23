"""torch.utils.data.distributed's import path: aicraft.data.sampler's DistributedSampler."""
from aicraft.data.sampler import DistributedSampler

__all__ = ["DistributedSampler"]
