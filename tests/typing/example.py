"""example.py - a small typed script over aicraft's public API: tensors, nn, optim,
data and DLPack. tests/test_typing.py runs `mypy --strict` on it (and runs it)."""
from typing import Any, List, Tuple

import numpy as np
import numpy.typing as npt

import aicraft as ac
from aicraft import nn
from aicraft.data import DataLoader, TensorDataset
from aicraft import functional as F


class TwoLayer(nn.Module):
    def __init__(self, n_in: int, n_hidden: int, n_out: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(n_in, n_hidden)
        self.out = nn.Linear(n_hidden, n_out)

    def forward(self, x: ac.Tensor) -> ac.Tensor:
        h: ac.Tensor = F.relu(self.hidden(x))
        y: ac.Tensor = self.out(h)
        return y


def make_data(n: int) -> Tuple[ac.Tensor, ac.Tensor]:
    ac.manual_seed(0)
    x = ac.randn(n, 4)
    labels = (x.sum(dim=1) > 0).long()
    return x, labels


def train(epochs: int) -> List[float]:
    x, labels = make_data(64)
    loader = DataLoader(TensorDataset(x, labels), batch_size=16, shuffle=True)
    model = TwoLayer(4, 16, 2)
    opt = ac.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    losses: List[float] = []
    for _ in range(epochs):
        for xb, yb in loader:
            with ac.checkpoint():
                opt.zero_grad()
                loss = loss_fn(model(xb), yb)
                loss.backward()
                opt.step()
                losses.append(loss.item())
    return losses


def share_with_numpy() -> float:
    t = ac.zeros(2, 3)
    view: npt.NDArray[Any] = np.from_dlpack(t)
    view[0, 1] = 2.5
    back = ac.from_dlpack(np.ones((2, 3), dtype=np.float32))
    with ac.no_grad():
        total = (t + back * 2.0).mean()
    return total.item()


def main() -> None:
    seq = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
    out = seq(ac.ones(1, 3))
    shape: Tuple[int, ...] = out.shape
    assert shape == (1, 3)
    losses = train(3)
    assert losses[-1] < losses[0]
    print("loss %.4f -> %.4f, shared mean %.4f" % (losses[0], losses[-1], share_with_numpy()))


if __name__ == "__main__":
    main()
