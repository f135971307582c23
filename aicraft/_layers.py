"""_layers.py - the layers of the Python package, bottom up (DESIGN.md §3.4b): a module
imports modules of its own layer or of the layers beneath it, never one above, and no
imports go round in a cycle. tests/test_layers_python.py reads this table and holds
every import statement in the package to it (at module level or inside a function,
under `if TYPE_CHECKING:` too: a lazy import is still a dependency).

Where a lower module must reach something above it, the upper one registers it:
tensor.py sets _wrapping.Tensor, creation.py sets _wrapping.array_to_tensor, and
aicraft/__init__.py calls each ops module's bind(Tensor), which attaches that
module's methods to the class.

The package itself (`import aicraft`, or `from aicraft import x` where x is not a
submodule: aicraft/__init__.py) is a layer of its own, near the top: the modules it
imports cannot import it back, and import the submodule that defines the name instead.
Only the layer above it may: the services, which use aicraft as a program would and
which no module of the package imports (`python -m aicraft.serve`).

Names are relative to the package ("nn.conv" is aicraft/nn/conv.py, "nn" its
__init__.py); "aicraft" is the package's own __init__.py; "serve.*" is the package
serve/ with every module in it. A new module goes into the lowest layer its imports
allow.
"""

LAYERS = (
    ("core", "C bindings, errors, dtypes, scopes, grad mode, devices, the profiler: no Tensor",
     "_layers _libac _ffi errors _args _scope _grad dtypes memory profiler _trace cuda accelerator "
     "backends backends.cpu backends.cuda backends.cudnn backends.mps"),
    ("tensor", "the Tensor class and how it wraps libac's AcTensor",
     "_wrapping tensor _shared"),
    ("creation", "making tensors, custom autograd Functions, DLPack",
     "creation autograd dlpack"),
    ("ops", "Tensor's methods (each module binds its own) and the module functions",
     "indexing pointwise activations shapes reductions products linalg functions functional "
     "special gradcheck"),
    ("nn", "layers, losses, optimizers and what training uses",
     "nn nn._checks nn._integer nn.activation nn.attention nn.container nn.conv nn.convnd "
     "nn.dropouts nn.fold nn.functional nn.init nn.layers nn.loss nn.losses nn.module nn.norm "
     "nn.packed nn.padding nn.parallel nn.pooling nn.rnn nn.sparse nn.transformer nn.upsampling "
     "nn.volumetric nn.utils nn.utils.rnn nn.quantized nn.quantized.dynamic nn.modules.* "
     "optim optim.optimizer optim.sgd optim.adam optim.adaptive optim.lbfgs optim.lr_scheduler "
     "amp io quantization distributed distributed.run"),
    ("apps", "data, compile and the other tools over a model",
     "data data.dataset data.dataloader data.datasets data.sampler data.transforms utils.* "
     "compile _mlir _mlir_ops _mlir_text viz serialization multiprocessing"),
    ("package", "aicraft/__init__.py: imports the layers in order, binds Tensor's methods",
     "aicraft"),
    ("services", "programs over the whole package (`import aicraft as ac`), which nothing imports",
     "serve.*"),
)
