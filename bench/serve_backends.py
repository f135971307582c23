"""serve_backends.py - the MNIST MLP (784-128-10, softmax out) as a Servable on
three runtimes, for bench/serve_load.sh: aicraft, PyTorch and ONNX Runtime, with the
same weights, served by the same WSGI code (aicraft.serve.make_app).

    SERVE_BACKEND=onnxruntime AICRAFT_WEIGHTS=mlp.safetensors AC_NUM_THREADS=1 gunicorn \\
        -c python:aicraft.serve.gunicorn_conf --preload -w 2 --threads 4 'bench.serve_backends:app_from_env()'

SERVE_BACKEND is aicraft, torch or onnxruntime; SERVE_MAX_BATCH_SIZE (default 1:
no batching) and SERVE_MAX_QUEUE_DELAY_S go to make_app. Each runtime computes on
one thread (AC_NUM_THREADS for aicraft; torch.set_num_threads and ONNX Runtime's
intra- and inter-op pools for the others), and each worker imports only its own
runtime: a PyTorch worker's RSS holds torch, not onnxruntime. All three hold
aicraft too, as the WSGI code is aicraft's; the PyTorch and ONNX Runtime ones hold NumPy,
which their servables take, and the aicraft one does not.

The ONNX model is built with onnx.helper (Gemm, Relu, Gemm, Softmax), the graph
torch.onnx would export for this MLP, so no exporter is needed.
"""
import os
import warnings

import aicraft as ac
from aicraft.serve import TensorSpec

MODEL = "mnist_mlp"
INPUTS = [TensorSpec("input__0", "FP32", (-1, 784))]
OUTPUTS = [TensorSpec("output__0", "FP32", (-1, 10))]
BACKENDS = ("aicraft", "torch", "onnxruntime")


def load_weights(path):
    """{"0.weight", "0.bias", "2.weight", "2.bias"} as float32 tensors: the weights file
    demos/mnist_mlp.py writes (nn.Sequential's names)."""
    return ac.load(path)


def random_weights(seed=0):
    """Weights of a freshly initialised MLP (speed and memory do not depend on the values)."""
    from aicraft import nn
    ac.manual_seed(seed)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    return {name: t.detach().clone() for name, t in model.state_dict().items()}


def aicraft_servable(weights):
    """The MLP as an aicraft nn.Module wrapped in aicraft.serve.ModuleServable, its Linear
    layers packed once (nn.packed), as `python -m aicraft.serve` serves a model that does
    not learn: the counterpart of ONNX Runtime's session, which packs its Gemm weights
    when it loads the model."""
    from aicraft import nn
    from aicraft.serve import ModuleServable
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10), nn.Softmax(1))
    model.load_state_dict(weights)
    return ModuleServable(nn.packed.pack_linear(model, inplace=True), MODEL, INPUTS, OUTPUTS, compile=True)


class TorchServable:
    """The MLP on PyTorch, on one thread, under torch.inference_mode()."""
    name, version, platform = MODEL, "1", "pytorch"
    inputs, outputs = INPUTS, OUTPUTS

    def __init__(self, weights):
        import torch
        from torch import nn
        torch.set_num_threads(1)
        # A binary request's rows are a read-only view of its body; the model only reads them.
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        self.torch = torch
        self.model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10), nn.Softmax(1))
        self.model.load_state_dict({name: torch.from_numpy(w.numpy()) for name, w in weights.items()})
        self.model.eval()

    def infer(self, inputs):
        with self.torch.inference_mode():
            return {"output__0": self.model(self.torch.from_numpy(inputs["input__0"])).numpy()}


def onnx_model(weights):
    """The MLP as an ONNX ModelProto: Gemm(transB) -> Relu -> Gemm(transB) -> Softmax,
    with a dynamic batch dimension and the weights as initializers."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Gemm", ["input__0", "0.weight", "0.bias"], ["hidden"], transB=1),
             helper.make_node("Relu", ["hidden"], ["relu"]),
             helper.make_node("Gemm", ["relu", "2.weight", "2.bias"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["output__0"], axis=1)]
    graph = helper.make_graph(
        nodes, MODEL,
        [helper.make_tensor_value_info("input__0", TensorProto.FLOAT, ["batch", 784])],
        [helper.make_tensor_value_info("output__0", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(w.numpy(), name) for name, w in weights.items()])
    # opset 13 and IR 8: what ONNX Runtimes of the last years all load
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    return model


class OnnxRuntimeServable:
    """The MLP's ONNX graph in an ONNX Runtime session on one thread (no pools: nothing
    runs before the fork that a forked worker would miss)."""
    name, version, platform = MODEL, "1", "onnxruntime"
    inputs, outputs = INPUTS, OUTPUTS

    def __init__(self, weights):
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(onnx_model(weights).SerializeToString(), options,
                                            providers=["CPUExecutionProvider"])

    def infer(self, inputs):
        (out,) = self.session.run(["output__0"], {"input__0": inputs["input__0"]})
        return {"output__0": out}


def servable(backend, weights):
    """The MLP's Servable on `backend` (one of BACKENDS)."""
    if backend == "aicraft":
        return aicraft_servable(weights)
    if backend == "torch":
        return TorchServable(weights)
    if backend == "onnxruntime":
        return OnnxRuntimeServable(weights)
    raise ValueError("serve_backends: backend %r; use one of %s" % (backend, ", ".join(BACKENDS)))


def app_from_env():
    """The WSGI app for gunicorn, made as `python -m aicraft.serve` makes its own:
    SERVE_BACKEND's Servable of AICRAFT_WEIGHTS under make_app (SERVE_MAX_BATCH_SIZE,
    SERVE_MAX_QUEUE_DELAY_S), and one warm-up call before the fork. With
    `-c python:aicraft.serve.gunicorn_conf`, glibc's allocator is bounded and each worker
    warms its threads, as the command's are."""
    from aicraft.serve import make_app
    model = servable(os.environ.get("SERVE_BACKEND", "aicraft"), load_weights(os.environ["AICRAFT_WEIGHTS"]))
    app = make_app(model, max_batch_size=int(os.environ.get("SERVE_MAX_BATCH_SIZE", "1")),
                   max_queue_delay_s=float(os.environ.get("SERVE_MAX_QUEUE_DELAY_S", "0")))
    with ac.checkpoint():
        app.warm_up()
    return app
