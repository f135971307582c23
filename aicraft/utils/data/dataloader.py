"""torch.utils.data.dataloader's import path: aicraft.data.dataloader's objects."""
from aicraft.data.dataloader import DataLoader, default_collate, get_worker_info

__all__ = ["DataLoader", "default_collate", "get_worker_info"]
