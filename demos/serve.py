"""serve.py - the MNIST MLP served by aicraft.serve under gunicorn: KServe's Open
Inference Protocol v2 (JSON and binary tensors) and the service's own JSON endpoints,
predictions and online learning in flat memory.

    AICRAFT_WEIGHTS=data/mnist_mlp.safetensors AC_NUM_THREADS=1 \\
        gunicorn -c demos/gunicorn_conf.py --preload -w 2 --threads 4 -b 127.0.0.1:8000 demos.serve:app

    POST /v2/models/mnist/infer   OIP v2: input__0 FP32 (-1, 784) -> output__0 FP32 (-1, 10) logits
    POST /predict  {"inputs": [[784 floats], ...]}        -> {"classes": [...], "probs": [[10 floats], ...]}
    POST /learn    {"inputs": [[784 floats], ...], "labels": [int, ...]}    -> {"loss": float}
    GET  /healthz, /metrics, /v2/health/ready, /v2/models/mnist

Inputs are MNIST pixels normalised as demos/mnist_mlp.py trains on them
((x - 0.1307) / 0.3081), one row of 784 per image. /learn takes one SGD step
(learning rate AICRAFT_LR, default 0.01). AICRAFT_QUANTIZE=1 serves int8 weights
(predictions only: /learn answers 409). SERVE_BACKEND=torch serves the same weights
through PyTorch with the same WSGI code (demos/serve_torch.py). The weights load at
import: under gunicorn --preload once, before the workers fork; each worker then holds
its own copy (`python -m aicraft.serve --shared` serves one copy to all).
"""
import os
import sys

from aicraft.serve import load_model, make_app


def fail(message):
    """Say why the service cannot start, and exit. 3 is gunicorn's "worker failed to
    boot": without --preload it stops gunicorn instead of a loop of restarts."""
    print("serve: " + message, file=sys.stderr)
    sys.exit(3)


def load():
    path = os.environ.get("AICRAFT_WEIGHTS", "")
    if not os.path.isfile(path):
        fail("AICRAFT_WEIGHTS=%s: no such file (python demos/mnist_mlp.py writes one)" % path)
    try:
        lr = float(os.environ.get("AICRAFT_LR", "0.01"))
    except ValueError:
        fail("AICRAFT_LR=%s is not a number" % os.environ["AICRAFT_LR"])
    backend = os.environ.get("SERVE_BACKEND", "aicraft")
    try:
        if backend == "torch":
            from demos.serve_torch import TorchMLP
            return TorchMLP(path, lr)
        if backend != "aicraft":
            fail("SERVE_BACKEND=%s; use aicraft or torch" % backend)
        return load_model(path, "mnist", lr=lr, quantize=os.environ.get("AICRAFT_QUANTIZE", "0") == "1")
    except (OSError, ValueError) as exc:
        fail("cannot serve %s: %s" % (path, exc))


app = make_app(load())
app.warm_up()   # once before the fork: the workers inherit a library whose thread pool has run
