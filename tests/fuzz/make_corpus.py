"""Write the seed corpora in tests/fuzz/corpus/: small files of the kinds the
tests write (ac.save of tensors, models and optimizer state; write_idx of
MNIST-shaped images and labels; ac.export of a small CNN and of a function). Run from the repository root after a build:
    PYTHONPATH=. python tests/fuzz/make_corpus.py
"""
import os

import numpy as np

import aicraft as ac
from aicraft.data.datasets import write_idx

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def safetensors_seeds(folder):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    ac.save({}, os.path.join(folder, "empty.safetensors"))
    ac.save({"s": ac.tensor(2.5)}, os.path.join(folder, "scalar.safetensors"))
    ac.save({"w": ac.tensor(rng.standard_normal((3, 4)).astype(np.float32)),
             "ids": ac.tensor(np.arange(-2, 4)), "mask": ac.tensor([True, False, True]),
             "none": ac.zeros(0, 2)}, os.path.join(folder, "dtypes.safetensors"))
    model = ac.nn.Sequential(ac.nn.Linear(3, 2), ac.nn.ReLU(), ac.nn.Linear(2, 1))
    ac.save(model.state_dict(), os.path.join(folder, "model.safetensors"))
    opt = ac.optim.Adam(model.parameters())
    model(ac.randn(2, 3)).sum().backward()
    opt.step()
    ac.save({"model": model.state_dict(), "optimizer": opt.state_dict()},
            os.path.join(folder, "checkpoint.safetensors"))
    ac.save({"\u00e9t\u00e9 \"q\"\\\n": ac.ones(1)}, os.path.join(folder, "escaped_name.safetensors"))


def idx_seeds(folder):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    write_idx(os.path.join(folder, "images.idx"), rng.integers(0, 256, (2, 4, 4), dtype=np.uint8))
    write_idx(os.path.join(folder, "labels.idx"), np.array([7, 2, 1], dtype=np.uint8))
    write_idx(os.path.join(folder, "scalar.idx"), np.array(5, dtype=np.uint8))
    write_idx(os.path.join(folder, "empty.idx"), np.zeros((0, 3), dtype=np.uint8))
    write_idx(os.path.join(folder, "int16.idx"), np.array([1, -2], dtype=np.int16))


def program_seeds(folder):
    os.makedirs(folder, exist_ok=True)
    ac.manual_seed(0)
    cnn = ac.nn.Sequential(ac.nn.Conv2d(1, 2, 3, padding=1), ac.nn.BatchNorm2d(2), ac.nn.ReLU(),
                           ac.nn.MaxPool2d(2), ac.nn.Flatten(), ac.nn.Linear(8, 3), ac.nn.Dropout(0.5))
    ac.export(cnn, ac.randn(2, 1, 4, 4), os.path.join(folder, "cnn.acprog"))
    weight = ac.randn(4, 3)

    def fn(x, target):
        logits = (x @ weight.T).reshape(-1, 4)
        loss = ac.nn.functional.cross_entropy(logits, target)
        return logits.softmax(1).sum(dim=0, keepdim=True).squeeze(0), loss * 2 + 1

    ac.export(fn, (ac.randn(2, 3), ac.tensor([1, 3])), os.path.join(folder, "fn.acprog"))


safetensors_seeds(os.path.join(ROOT, "safetensors"))
safetensors_seeds(os.path.join(ROOT, "state_dict"))
idx_seeds(os.path.join(ROOT, "idx"))
program_seeds(os.path.join(ROOT, "program"))
