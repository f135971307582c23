"""torch.utils.data.dataset's import path: aicraft.data.dataset's objects."""
from aicraft.data.dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split

__all__ = ["Dataset", "TensorDataset", "Subset", "ConcatDataset", "random_split"]
