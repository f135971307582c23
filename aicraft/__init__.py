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
from aicraft.creation import (arange, as_tensor, cat, empty, empty_like, eye, from_numpy, full,
                              full_like, manual_seed, ones, ones_like, rand, rand_like, randint,
                              randn, randn_like, stack, tensor, zeros, zeros_like)
from aicraft.dtypes import (bool, device, double, dtype, float, float16, float32, float64,
                            get_default_dtype, half, int, int32, int64, long, set_default_dtype,
                            uint8)
from aicraft.dlpack import from_dlpack
from aicraft.errors import DeviceError, FormatError, GradcheckError, ScopeError, ShapeError
from aicraft.functions import *  # noqa: F401,F403 - ac.exp, ac.sum, ... (see functions.py)
from aicraft.gradcheck import gradcheck
from aicraft.io import load, save
from aicraft.memory import (checkpoint, get_num_threads, memory_stats, set_memory_limit,
                            set_num_threads)
from aicraft.tensor import Tensor
from aicraft import accelerator, backends, cuda, nn, optim, utils

__version__ = "0.1.0"
