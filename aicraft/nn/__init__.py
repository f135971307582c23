"""aicraft.nn - modules, layers, losses, initialisers and gradient clipping, with
PyTorch's names and behaviour.

    import aicraft as ac
    from aicraft import nn

    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    loss_fn = nn.CrossEntropyLoss()
    with ac.checkpoint():                # the step's tensors are freed at the end
        loss = loss_fn(model(x), y)
        loss.backward()                  # parameters' .grad live at root
"""
import importlib

from aicraft.nn import functional, init, utils
from aicraft.nn.conv import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, Dropout,
                             Dropout2d, MaxPool2d)
from aicraft.nn.layers import (GELU, Flatten, Identity, Linear, LogSoftmax, ModuleList, ReLU,
                               Sequential, Sigmoid, Softmax, Tanh)
from aicraft.nn.loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss,
                             SmoothL1Loss)
from aicraft.nn.module import Module, Parameter
from aicraft.nn.norm import LayerNorm
from aicraft.nn.rnn import GRU, LSTM, RNN, Embedding, GRUCell, LSTMCell, RNNCell
from aicraft.nn.transformer import (MultiheadAttention, Transformer, TransformerDecoder,
                                    TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
# scripts helper: containers and the rest of the Transformer
from aicraft.nn.container import ModuleDict, ParameterDict, ParameterList

__all__ = ["Module", "Parameter", "Sequential", "ModuleList", "Linear", "ReLU", "Sigmoid", "Tanh",
           "GELU", "Softmax", "LogSoftmax", "Flatten", "Identity", "MSELoss", "L1Loss",
           "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "Conv2d",
           "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm",
           "Dropout", "Dropout2d", "Embedding", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
           "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "functional",
           "init", "parallel", "utils",
           "ModuleDict", "ParameterDict", "ParameterList", "Transformer", "TransformerDecoder",
           "TransformerDecoderLayer"]


def __getattr__(name: str) -> object:
    if name == "parallel":   # on first use: DistributedDataParallel is for training on several ranks
        return importlib.import_module("aicraft.nn.parallel")
    if name == "modules":    # torch.nn.modules' import paths (scripts helper)
        return importlib.import_module("aicraft.nn.modules")
    raise AttributeError("module 'aicraft.nn' has no attribute %r" % name)
