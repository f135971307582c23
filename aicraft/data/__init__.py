"""aicraft.data - datasets and batching, as torch.utils.data and torchvision's
datasets and transforms:

    from aicraft.data import DataLoader, transforms
    from aicraft.data.datasets import MNIST
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,)),
                             transforms.Flatten()])
    train = MNIST("data", train=True, download=True, transform=tf)
    for x, y in DataLoader(train, batch_size=64, shuffle=True, seed=0):
        ...   # x: Tensor (64, 784); y: Tensor (64,) of class indices as floats

Images stay uint8 until a batch is made; each batch is one C call per field.
"""
from aicraft.data import datasets, transforms
from aicraft.data.dataloader import DataLoader, default_collate
from aicraft.data.dataset import Dataset, Subset, TensorDataset, random_split
from aicraft.data.datasets import MNIST, FashionMNIST

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "DataLoader", "default_collate",
           "MNIST", "FashionMNIST", "datasets", "transforms"]
