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
from aicraft.nn.transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer
# ---- activations (activation.py): SiLU, LeakyReLU, GELU(approximate=), PReLU, ... ----
from aicraft.nn.activation import (CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid,  # noqa: F811
                                   Hardswish, Hardtanh, LeakyReLU, LogSigmoid, Mish, PReLU, ReLU6,
                                   RReLU, SiLU, Softmin, Softplus, Softshrink, Softsign, Tanhshrink,
                                   Threshold)

__all__ = ["Module", "Parameter", "Sequential", "ModuleList", "Linear", "ReLU", "Sigmoid", "Tanh",
           "GELU", "Softmax", "LogSoftmax", "Flatten", "Identity", "MSELoss", "L1Loss",
           "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "Conv2d",
           "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm",
           "Dropout", "Dropout2d", "Embedding", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
           "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "functional",
           "init", "parallel", "utils",
           # activation.py
           "SiLU", "LeakyReLU", "Softplus", "ELU", "CELU", "SELU", "Hardtanh", "ReLU6", "Mish",
           "Hardswish", "Hardsigmoid", "Hardshrink", "Softshrink", "Tanhshrink", "Softsign",
           "LogSigmoid", "GLU", "PReLU", "RReLU", "Threshold", "Softmin"]


def __getattr__(name: str) -> object:
    if name == "parallel":   # on first use: DistributedDataParallel is for training on several ranks
        return importlib.import_module("aicraft.nn.parallel")
    raise AttributeError("module 'aicraft.nn' has no attribute %r" % name)
