"""aicraft.nn.modules - torch.nn.modules' import paths (torch.nn.modules.linear.Linear, ...),
as scripts name classes for torch.load's safe_globals. Each submodule gives aicraft.nn's
object of that name; nothing here is a copy."""
import importlib

_SUBMODULES = ("activation", "batchnorm", "container", "conv", "dropout", "flatten", "linear", "loss",
               "module", "normalization", "padding", "pixelshuffle", "pooling", "rnn", "sparse",
               "transformer", "upsampling", "distance", "instancenorm", "fold", "channelshuffle")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module("aicraft.nn.modules." + name)
    from aicraft import nn
    return getattr(nn, name)
