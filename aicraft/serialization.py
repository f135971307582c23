"""aicraft.serialization - torch.serialization's names for ac.save/ac.load and the
allowlist of classes load rebuilds (see aicraft.io)."""
from aicraft.io import add_safe_globals, clear_safe_globals, get_safe_globals, load, safe_globals, save

__all__ = ["save", "load", "safe_globals", "add_safe_globals", "get_safe_globals", "clear_safe_globals"]
