"""aicraft - a small, fast machine-learning library: a C99 core (libac) with a
PyTorch-shaped Python API.

    import aicraft as ac
    x = ac.randn(4, 3, requires_grad=True)
    with ac.checkpoint():            # everything made here is freed at the end
        loss = (x @ x.T).relu().sum()
        loss.backward()
    print(x.grad)
"""
from aicraft import data, functional, viz
from aicraft.autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from aicraft.creation import (arange, cat, eye, from_numpy, full, full_like, manual_seed, ones,
                              ones_like, rand, randn, stack, tensor, zeros, zeros_like)
from aicraft.errors import FormatError, GradcheckError, ScopeError, ShapeError
from aicraft.functions import *  # noqa: F401,F403 - ac.exp, ac.sum, ... (see functions.py)
from aicraft.gradcheck import gradcheck
from aicraft.io import load, save
from aicraft.memory import (checkpoint, get_num_threads, memory_stats, set_memory_limit,
                            set_num_threads)
from aicraft.tensor import Tensor, float32
from aicraft import nn, optim, utils

__version__ = "0.1.0"
