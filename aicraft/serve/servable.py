"""servable.py - what make_app serves: an aicraft nn.Module (ModuleServable, which can
also learn, one optimizer step a request) or an exported program (ProgramServable), each
with the names, datatypes and shapes of its inputs and outputs; and load_model, which
makes one of them from a file for `python -m aicraft.serve`.

A servable is any object with name, version, platform, inputs, outputs and infer
(learn optional); see docs/serving.md. NumPy arrays in and out, or aicraft tensors for
one whose takes_tensors is true (these two: no NumPy in the worker). The protocol lives
in protocol.py, the routes in app.py.
"""
import contextlib
import os
import threading


import aicraft as ac
from aicraft import nn
from aicraft.serve.protocol import TensorSpec
from aicraft.serve.wire import DATATYPE_OF_CODE, TENSOR_DTYPES


def _tensor(value):
    """An input as a tensor: a tensor as it is, a NumPy array copied."""
    return value if isinstance(value, ac.Tensor) else ac.from_numpy(value)


class ModuleServable:
    """module served as name: infer runs it under ac.no_grad() on the inputs in the
    order of `inputs` and names its results (a tensor, or a tuple in the order of
    `outputs`). With a loss_fn and an optimizer, learn takes one optimizer step.

    Without `shared`, one lock serialises the module's use in this process: a step
    never interleaves with another, and a prediction sees the weights before a step
    or after it, never halfway. With a SharedModel (serve/shared.py) its read() and
    update() do that across every worker process.

    infer and learn take aicraft tensors (NumPy arrays are copied into tensors); infer
    gives tensors. Its specs' datatypes are those aicraft tensors hold.

    compile: infer runs the module through ac.compile, one C call a forward once a
    batch size has been seen (up to 8 sizes; others run eagerly). Only for a module
    whose forward takes the same path whatever the values (ac.compile records the
    path of its first call, as torch.jit.trace does): load_model's MLPs. A module
    it cannot record runs eagerly, with compile's warning."""

    platform = "aicraft"
    takes_tensors = True

    def __init__(self, module, name, inputs, outputs, loss_fn=None, optimizer=None, shared=None, version="1",
                 compile=False):
        if (loss_fn is None) != (optimizer is None):
            raise ValueError("ModuleServable %r: learning needs both a loss_fn and an optimizer" % name)
        self.module, self.name, self.version = module, name, version
        self.inputs, self.outputs = list(inputs), list(outputs)
        for spec in self.inputs + self.outputs:
            if spec.datatype not in TENSOR_DTYPES:
                raise ValueError("ModuleServable %r: %r is %s; an aicraft module takes and gives %s"
                                 % (name, spec.name, spec.datatype, ", ".join(TENSOR_DTYPES)))
        self.loss_fn, self.optimizer, self.shared = loss_fn, optimizer, shared
        self.weight_bytes = ac.quantization.weight_bytes(module)
        self._lock = threading.Lock()
        self._run = ac.compile(module) if compile else module
        # A compiled forward runs one call at a time; without `shared`, _lock sees to that.
        self._replaying = threading.Lock() if compile and shared is not None else contextlib.nullcontext()
        if optimizer is None:
            self.learn = None       # the app answers /learn with 409

    def _reading(self):
        return self.shared.read() if self.shared is not None else self._lock

    def _updating(self):
        return self.shared.update() if self.shared is not None else self._lock

    def _forward(self, run, inputs):
        return run(*[_tensor(inputs[spec.name]) for spec in self.inputs])

    def infer(self, inputs):
        with ac.no_grad(), self._reading(), self._replaying:
            results = self._forward(self._run, inputs)
            results = results if isinstance(results, (tuple, list)) else (results,)
            if len(results) != len(self.outputs):
                raise ValueError("%s: the module returned %d outputs; the servable names %d"
                                 % (self.name, len(results), len(self.outputs)))
            return dict(zip([spec.name for spec in self.outputs], results))

    def learn(self, inputs, targets, step=True):
        """One optimizer step on inputs and targets; the loss before the step.
        step=False stops before the weights change (make_app's warm_up)."""
        with self._updating():
            loss = self.loss_fn(self._forward(self.module, inputs), _tensor(targets))
            # Zeroed, not dropped: the gradients stay allocated once, rather than
            # made anew by whichever request thread runs the next step.
            self.optimizer.zero_grad(set_to_none=False)
            loss.backward()
            if step:
                self.optimizer.step()
            return loss.item()


def linear_specs(module):
    """([input spec], [output spec]) of a module whose first layer with in_features and
    last with out_features are its ends (an MLP): FP32 rows, (-1, width)."""
    layers = [m for m in module.modules() if hasattr(m, "in_features") and hasattr(m, "out_features")]
    if not layers:
        raise TypeError("make_app: %s has no Linear layer to read its input and output widths from; "
                        "wrap it in a ModuleServable with inputs and outputs" % type(module).__name__)
    return ([TensorSpec("input__0", "FP32", (-1, layers[0].in_features))],
            [TensorSpec("output__0", "FP32", (-1, layers[-1].out_features))])


class ProgramServable:
    """A program file (ac.export) served as name: it takes inputs of the shapes it was
    exported for (the batch size included) and gives its outputs. Predictions only.
    Tensors in and out, as ModuleServable."""

    platform = "aicraft"
    takes_tensors = True
    learn = None

    def __init__(self, path, name, version="1"):
        from aicraft._ffi import ffi, lib
        self.program, self.name, self.version = ac.load_program(path), name, version
        shape = ffi.new("int64_t[]", 8)
        dtype = ffi.new("int *")

        def specs(info, count, prefix):
            result = []
            for i in range(count):
                ndim = info(self.program._program, i, dtype, shape)
                result.append(TensorSpec("%s__%d" % (prefix, i), DATATYPE_OF_CODE[dtype[0]],
                                         tuple(shape[d] for d in range(ndim))))
            return result
        self.inputs = specs(lib.ac_program_input_info, self.program.n_inputs, "input")
        self.outputs = specs(lib.ac_program_output_info, self.program.n_outputs, "output")
        self._lock = threading.Lock()    # a program runs one call at a time

    def infer(self, inputs):
        with self._lock:
            results = self.program(*[_tensor(inputs[spec.name]) for spec in self.inputs])
            results = results if isinstance(results, tuple) else (results,)
            return dict(zip([spec.name for spec in self.outputs], results))


def load_mlp(path, quantize=False):
    """The nn.Sequential MLP (Linear, ReLU, ..., Linear) whose weights are the safetensors
    file at path, as demos/mnist_mlp.py writes it: widths read from the file; int8 layers
    when the file holds quantized weights, or when quantize."""
    state = ac.load(path)
    shapes = [state["%d.weight" % i].shape for i in range(0, len(state), 2) if "%d.weight" % i in state]
    if not shapes:
        raise ValueError("%s holds no Sequential MLP weights (0.weight, 0.bias, 2.weight, ...)" % path)
    quantized_file = any(name.endswith("weight_scale") for name in state)
    linear = nn.quantized.dynamic.Linear if quantized_file else nn.Linear   # no float copy of int8
    layers = []
    for out_features, in_features in shapes:
        layers += [linear(in_features, out_features), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    model.load_state_dict(state)
    if quantize and not quantized_file:
        ac.quantization.quantize_dynamic(model, inplace=True)
    return model


def is_quantized(module):
    return any(isinstance(m, nn.quantized.dynamic.Linear) for m in module.modules())


def load_model(path, name=None, lr=None, quantize=False, share=False, hogwild=False):
    """A servable for the file at path: a safetensors MLP (load_mlp), which learns with
    SGD at lr when lr is given (and its weights are float), or a program file (ac.export).
    share: its weights and optimizer state in shared memory for every worker forked
    after (a SharedModel; hogwild: steps without the lock)."""
    name = name or os.path.splitext(os.path.basename(path))[0]
    if not path.endswith(".safetensors"):
        if lr is not None or share or quantize:
            raise ValueError("%s: a program file only predicts; learning, sharing and int8 take a "
                             "safetensors MLP" % path)
        return ProgramServable(path, name)
    module = load_mlp(path, quantize)
    inputs, outputs = linear_specs(module)
    learns = lr is not None and not is_quantized(module)
    if not learns and not share:     # weights that never change: pack them once
        nn.packed.pack_linear(module, inplace=True)
    loss_fn = nn.CrossEntropyLoss() if learns else None
    optimizer = ac.optim.SGD(module.parameters(), lr=lr) if learns else None
    shared = None
    if share:
        from aicraft.serve.shared import SharedModel
        shared = SharedModel(module, optimizer, hogwild=hogwild)
    return ModuleServable(module, name, inputs, outputs, loss_fn, optimizer, shared,
                          compile=not is_quantized(module))   # int8 layers are not recorded

