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

from aicraft.nn import functional, init, packed, utils
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
# ---- activations (activation.py): SiLU, LeakyReLU, GELU(approximate=), PReLU, ... ----
from aicraft.nn.activation import (CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid,  # noqa: F811
                                   Hardswish, Hardtanh, LeakyReLU, LogSigmoid, Mish, PReLU, ReLU6,
                                   RReLU, SiLU, Softmin, Softplus, Softshrink, Softsign, Tanhshrink,
                                   Threshold)
# ---- containers (container.py) ----
from aicraft.nn.container import ModuleDict, ParameterDict, ParameterList

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

# ---- nnops: convolutions, pads, pools, resizing, norms, losses (one block) ----
from aicraft.nn.conv import BatchNorm3d  # noqa: E402
from aicraft.nn.convnd import Conv1d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: E402
from aicraft.nn.dropouts import (AlphaDropout, Bilinear, Dropout1d, Dropout2d,  # noqa: E402,F811
                                 Dropout3d, FeatureAlphaDropout, Unflatten)
from aicraft.nn.fold import ChannelShuffle, Fold, Unfold  # noqa: E402
from aicraft.nn.loss import (CosineEmbeddingLoss, GaussianNLLLoss,  # noqa: E402
                             HingeEmbeddingLoss, HuberLoss, KLDivLoss, MarginRankingLoss,
                             MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss,
                             PoissonNLLLoss, SoftMarginLoss, TripletMarginLoss,
                             TripletMarginWithDistanceLoss)
from aicraft.nn.norm import (GroupNorm, InstanceNorm1d, InstanceNorm2d,  # noqa: E402
                             LocalResponseNorm, RMSNorm)
from aicraft.nn.padding import (CircularPad1d, CircularPad2d, CircularPad3d,  # noqa: E402
                                ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
                                ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                                ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
                                ZeroPad3d)
from aicraft.nn.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool3d,  # noqa: E402
                                AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, LPPool1d,
                                LPPool2d, MaxPool1d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from aicraft.nn.sparse import Embedding, EmbeddingBag  # noqa: E402,F811
from aicraft.nn.upsampling import (PixelShuffle, PixelUnshuffle, Upsample,  # noqa: E402
                                   UpsamplingBilinear2d, UpsamplingNearest2d)
from aicraft.nn.volumetric import AdaptiveMaxPool3d, AvgPool3d, Conv3d, MaxPool3d  # noqa: E402

__all__ += ["BatchNorm3d", "Conv1d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
            "AlphaDropout",
            "Bilinear", "Dropout1d", "Dropout3d", "FeatureAlphaDropout", "Unflatten",
            "ChannelShuffle", "Fold", "Unfold", "CosineEmbeddingLoss", "GaussianNLLLoss",
            "HingeEmbeddingLoss", "HuberLoss", "KLDivLoss", "MarginRankingLoss",
            "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss",
            "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
            "TripletMarginWithDistanceLoss", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
            "LocalResponseNorm", "RMSNorm", "CircularPad1d", "CircularPad2d", "CircularPad3d",
            "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
            "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
            "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "AdaptiveAvgPool1d",
            "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d",
            "LPPool1d", "LPPool2d", "MaxPool1d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
            "EmbeddingBag", "PixelShuffle", "PixelUnshuffle", "Upsample", "UpsamplingBilinear2d",
            "UpsamplingNearest2d", "AdaptiveMaxPool3d", "AvgPool3d", "Conv3d", "MaxPool3d"]
# ---- end nnops ----
__all__ += ["ModuleDict", "ParameterDict", "ParameterList", "Transformer", "TransformerDecoder",
            "TransformerDecoderLayer"]


def __getattr__(name: str) -> object:
    if name == "parallel":   # on first use: DistributedDataParallel is for training on several ranks
        return importlib.import_module("aicraft.nn.parallel")
    if name == "modules":    # torch.nn.modules' import paths (scripts helper)
        return importlib.import_module("aicraft.nn.modules")
    raise AttributeError("module 'aicraft.nn' has no attribute %r" % name)
