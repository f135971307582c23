"""serve_torch.py - the MNIST MLP of demos/serve.py on PyTorch, as an aicraft.serve
servable, for bench/serve_load.sh's comparison.

    SERVE_BACKEND=torch AICRAFT_WEIGHTS=... gunicorn -c demos/gunicorn_conf.py --preload ... demos.serve:app

Both services run the same WSGI code and the same checks; only these model calls
differ. The weights come from the same safetensors file, and PyTorch gets as many
threads as aicraft would (AC_NUM_THREADS).
"""
import threading

import torch
from torch import nn

import aicraft as ac
from aicraft.serve import TensorSpec


class TorchMLP:
    """The 784-128-10 MLP on PyTorch: logits for rows, and one SGD step."""

    name, version, platform = "mnist", "1", "pytorch"
    inputs = [TensorSpec("input__0", "FP32", (-1, 784))]
    outputs = [TensorSpec("output__0", "FP32", (-1, 10))]

    def __init__(self, path, lr):
        torch.set_num_threads(ac.get_num_threads())
        self.model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        self.model.load_state_dict({name: torch.from_numpy(t.numpy()) for name, t in ac.load(path).items()})
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.lock = threading.Lock()    # a prediction never sees a step halfway

    def infer(self, inputs):
        with self.lock, torch.inference_mode():
            return {"output__0": self.model(torch.from_numpy(inputs["input__0"])).numpy()}

    def learn(self, inputs, targets):
        with self.lock:
            loss = self.loss_fn(self.model(torch.from_numpy(inputs["input__0"])), torch.from_numpy(targets))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            return loss.item()
