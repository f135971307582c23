"""torch.nn.modules.dropout's import path: its names resolve to aicraft.nn's objects."""


def __getattr__(name):
    from aicraft import nn
    return getattr(nn, name)
