"""aicraft.data - datasets and batching, as torch.utils.data and torchvision's
datasets and transforms; also importable as aicraft.utils.data (one
implementation, two paths):

    from aicraft.data import DataLoader, transforms
    from aicraft.data.datasets import MNIST
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,)),
                             transforms.Flatten()])
    train = MNIST("data", train=True, download=True, transform=tf)
    ac.manual_seed(0)
    for x, y in DataLoader(train, batch_size=64, shuffle=True):
        ...   # x: Tensor (64, 784); y: Tensor (64,) of class indices

Images stay uint8 until a batch is made; each batch is one C call per field.
"""
from aicraft.data import datasets, transforms
from aicraft.data.dataloader import DataLoader, default_collate, get_worker_info
from aicraft.data.dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split
from aicraft.data.datasets import MNIST, FakeData, FashionMNIST
from aicraft.data.sampler import (BatchSampler, DistributedSampler, RandomSampler, Sampler,
                                  SequentialSampler, SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "DataLoader", "default_collate",
           "get_worker_info", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "BatchSampler", "DistributedSampler", "MNIST", "FashionMNIST", "datasets", "transforms",
           "ConcatDataset", "WeightedRandomSampler", "FakeData"]
