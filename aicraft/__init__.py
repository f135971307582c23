"""aicraft - a small, fast machine-learning library: a C99 core (libac) with a
PyTorch-shaped Python API.

    import aicraft as ac
    x = ac.randn(4, 3, requires_grad=True)
    with ac.checkpoint():            # everything made here is freed at the end
        loss = (x @ x.T).relu().sum()
        loss.backward()
    print(x.grad)
"""
import importlib as _importlib
import os as _os

# The package's modules import one way, bottom up, by the layers of aicraft/_layers.py
# (tests/test_layers_python.py holds them to it). Tensor is tensor.py's class; the
# modules above it bind their methods into it here, in this order, before anything
# else (functions.py forwards to the bound methods).
from aicraft.tensor import Tensor
from aicraft import (activations as _activations, dlpack as _dlpack, indexing as _indexing,
                     linalg as _linalg, pointwise as _pointwise, products as _products,
                     reductions as _reductions, shapes as _shapes)
_indexing.bind(Tensor)
_pointwise.bind(Tensor)
_activations.bind(Tensor)
_shapes.bind(Tensor)
_reductions.bind(Tensor)
_products.bind(Tensor)
_linalg.bind(Tensor)
_dlpack.bind(Tensor)

from aicraft import functional  # noqa: E402 - the imports below need Tensor's methods bound
from aicraft.compile import compile, export, load_program
from aicraft.autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from aicraft.creation import (arange, as_tensor, cat, empty, empty_like, eye, from_numpy, full,
                              full_like, manual_seed, ones, ones_like, rand, rand_like, randint,
                              randn, randn_like, stack, tensor, zeros, zeros_like)
from aicraft.dtypes import (bool, device, double, dtype, float, float16, float32, float64,
                            get_default_dtype, half, int, int8, int32, int64, long, qint8,
                            set_default_dtype, uint8)
from aicraft.dlpack import from_dlpack
from aicraft.errors import DeviceError, FormatError, GradcheckError, ScopeError, ShapeError
from aicraft.functions import *  # noqa: F401,F403 - ac.exp, ac.sum, ... (see functions.py)
from aicraft.gradcheck import gradcheck
from aicraft.io import load, save
from aicraft.memory import (checkpoint, get_num_threads, memory_stats, set_memory_limit,
                            set_num_threads)
from aicraft import accelerator, backends, cuda, nn, optim, profiler, quantization
from aicraft import special  # torch.special's names (pointwise.py, special.py)

# Reductions, order statistics, products and norms (reductions.py, products.py, linalg.py).
from aicraft import linalg
from aicraft.reductions import FUNCTIONS as _REDUCTIONS
from aicraft.products import FUNCTIONS as _PRODUCTS
globals().update(_REDUCTIONS)
globals().update(_PRODUCTS)
from aicraft.linalg import cdist, dist, torch_norm as norm  # noqa: E402
from aicraft.linalg import det, inv as inverse, logdet, slogdet, torch_cholesky as cholesky  # noqa: E402
from aicraft.linalg import cholesky_inverse, cholesky_solve, matrix_exp, triangular_solve  # noqa: E402

# What training scripts reach beyond operators (amp, creation.py's random functions).
from aicraft import amp
from aicraft.dtypes import bfloat16, cdouble, cfloat, complex64, complex128, finfo, iinfo
from aicraft.creation import Generator, bernoulli, multinomial, normal, randint_like, randperm
from aicraft import creation as _creation
_creation.bind(Tensor)
from aicraft.creation import BoolTensor, ByteTensor, FloatTensor, LongTensor
from aicraft.autograd import inference_mode, is_inference_mode_enabled
from aicraft import _shared
_shared.bind(Tensor, nn.Module)

__version__ = "0.1.0"   # the one place: setup.py and the Makefile read it here

# The public names, for `from aicraft import *` and for type checkers (which do not
# count a plain import as a re-export); the functions of functions.py come on top.
__all__ = [
    "Tensor", "tensor", "as_tensor", "from_numpy", "from_dlpack", "zeros", "ones", "full", "empty",
    "rand", "randn", "randint", "arange", "eye", "zeros_like", "ones_like", "full_like",
    "empty_like", "rand_like", "randn_like", "cat", "stack", "manual_seed",
    "dtype", "device", "float32", "float", "float64", "double", "float16", "half", "int64", "long",
    "int", "int32", "uint8", "int8", "qint8", "bool", "get_default_dtype", "set_default_dtype",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    "export", "load_program",
    "checkpoint", "memory_stats", "set_memory_limit", "set_num_threads", "get_num_threads",
    "ShapeError", "ScopeError", "FormatError", "DeviceError", "GradcheckError",
    "gradcheck", "save", "load", "get_include", "get_lib", "__version__",
    "data", "functional", "viz", "accelerator", "backends", "cuda", "distributed", "nn", "optim",
    "profiler", "quantization", "utils", "special",
    "amp", "BoolTensor", "ByteTensor", "FloatTensor", "LongTensor", "inference_mode",
    "is_inference_mode_enabled", "Generator", "bernoulli", "multinomial", "normal", "randint_like", "randperm", "bfloat16", "complex64", "complex128", "cfloat", "cdouble", "finfo", "iinfo",
]
__all__ += sorted(_REDUCTIONS) + sorted(_PRODUCTS) + ["linalg", "cdist", "dist", "norm", "det", "inverse", "cholesky",
                                                            "cholesky_inverse", "cholesky_solve",
                                                            "matrix_exp", "triangular_solve",
                                                            "logdet", "slogdet"]


# Imported on first use: they need NumPy, and a service that only runs a model does not;
# distributed is for training on several ranks.
_ON_FIRST_USE = ("data", "distributed", "utils", "viz", "serialization", "multiprocessing")


def __getattr__(name: str) -> object:
    if name in _ON_FIRST_USE:
        return _importlib.import_module("aicraft." + name)
    raise AttributeError("module 'aicraft' has no attribute %r" % name)


def __dir__() -> list:
    return sorted(set(globals()) | set(_ON_FIRST_USE))


def get_include() -> str:
    """The folder holding ac.h, libac's C header: cc -I$(python -c 'import aicraft;
    print(aicraft.get_include())')."""
    return _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "include")


def get_lib() -> str:
    """The folder holding libac.a, the C library the extension is built from: link a C
    program with get_lib()/libac.a -lm -lpthread (a build with CUDA carries CUDA's static
    runtime inside libac.a)."""
    return _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "lib")
