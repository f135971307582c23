"""serve_torch.py - the MNIST MLP of demos/serve.py on PyTorch, for bench/serve_load.sh.

    SERVE_BACKEND=torch AICRAFT_WEIGHTS=... gunicorn -c demos/gunicorn_conf.py --preload ... demos.serve:app

demos/serve.py picks this class when SERVE_BACKEND=torch, so both services
run the same WSGI code, the same checks and the same lock; only these model
calls differ. The weights come from the same safetensors file, and PyTorch
gets as many threads as aicraft would (AC_NUM_THREADS).
"""
import torch
from torch import nn

import aicraft as ac


class TorchMLP:
    """The 784-128-10 MLP on PyTorch: probabilities for rows, and one SGD step."""

    def __init__(self, path, lr):
        torch.set_num_threads(ac.get_num_threads())
        self.model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        weights = {name: torch.from_numpy(t.numpy()) for name, t in ac.load(path).items()}
        self.model.load_state_dict(weights)
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)

    def predict(self, x):
        """(n, 10) float32 probabilities for x, a (n, 784) float32 array."""
        with torch.inference_mode():
            return torch.softmax(self.model(torch.from_numpy(x)), 1).numpy()

    def learn(self, x, labels, update=True):
        """One SGD step on rows x with int64 labels; the loss before the step.
        update=False stops before the weights change (warm_up)."""
        loss = self.loss_fn(self.model(torch.from_numpy(x)), torch.from_numpy(labels))
        self.optimizer.zero_grad()
        loss.backward()
        if update:
            self.optimizer.step()
        return loss.item()
