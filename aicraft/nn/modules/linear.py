"""torch.nn.modules.linear's import path: its names resolve to aicraft.nn's objects;
NonDynamicallyQuantizableLinear (what torch's MultiheadAttention.out_proj is) is Linear."""
from aicraft.nn.layers import Identity, Linear

NonDynamicallyQuantizableLinear = Linear

__all__ = ["Linear", "Identity", "NonDynamicallyQuantizableLinear"]


def __getattr__(name):
    from aicraft import nn
    return getattr(nn, name)
