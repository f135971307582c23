"""backends - ac.backends.mps and ac.backends.cudnn as PyTorch scripts probe them:
neither exists in aicraft, so they report unavailable."""
from types import SimpleNamespace

mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cudnn = SimpleNamespace(is_available=lambda: False, enabled=False, deterministic=False,
                        benchmark=False)
