"""aicraft.utils.data - torch.utils.data's import paths for aicraft.data, a package
with torch's submodules (dataloader, sampler, dataset, distributed):

    import aicraft as torch
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True)
    from aicraft.utils.data.sampler import Sampler
    from aicraft.utils.data import DataLoader, TensorDataset

Everything here is aicraft.data's own object, not a copy.
"""
from aicraft.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, DistributedSampler,
                          RandomSampler, Sampler, SequentialSampler, Subset, SubsetRandomSampler,
                          TensorDataset, WeightedRandomSampler, default_collate, get_worker_info,
                          random_split)
from aicraft.utils.data import dataloader, dataset, distributed, sampler

__all__ = ["Dataset", "TensorDataset", "Subset", "ConcatDataset", "random_split", "DataLoader",
           "default_collate", "get_worker_info", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DistributedSampler",
           "dataloader", "dataset", "distributed", "sampler"]
