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
from aicraft.nn import functional, init, utils
from aicraft.nn.conv import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, Dropout,
                             MaxPool2d)
from aicraft.nn.layers import (GELU, Flatten, Identity, Linear, LogSoftmax, ModuleList, ReLU,
                               Sequential, Sigmoid, Softmax, Tanh)
from aicraft.nn.loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, MSELoss, NLLLoss
from aicraft.nn.module import Module, Parameter
from aicraft.nn.rnn import GRU, LSTM, Embedding, GRUCell, LSTMCell

__all__ = ["Module", "Parameter", "Sequential", "ModuleList", "Linear", "ReLU", "Sigmoid", "Tanh",
           "GELU", "Softmax", "LogSoftmax", "Flatten", "Identity", "MSELoss", "CrossEntropyLoss",
           "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "Conv2d", "MaxPool2d", "AvgPool2d",
           "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "Dropout", "Embedding", "LSTM", "GRU",
           "LSTMCell", "GRUCell", "functional", "init", "utils"]
