"""aicraft.utils.data - torch.utils.data's import path for aicraft.data.

    import aicraft as torch
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True)
    from aicraft.utils.data import DataLoader, TensorDataset

Everything here is aicraft.data's own object, not a copy.
"""
from aicraft.data import (BatchSampler, DataLoader, Dataset, DistributedSampler, RandomSampler,
                          Sampler, SequentialSampler, Subset, SubsetRandomSampler, TensorDataset,
                          default_collate, get_worker_info, random_split)

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "DataLoader", "default_collate",
           "get_worker_info", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "BatchSampler", "DistributedSampler"]
