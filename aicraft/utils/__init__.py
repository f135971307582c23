"""aicraft.utils - where PyTorch scripts look for `utils.data`."""
from aicraft.utils import data

__all__ = ["data"]
