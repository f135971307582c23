"""compile_steps.py - the training steps that tests/test_compile.py,
tests/test_compile_mlir.py and bench/compile.py compile, written once: a step
(zero_grad, loss, backward, update) over any model and loss, and FDUAI's
linear regression. The same code builds aicraft's steps and PyTorch's, whose
APIs agree. Not a test module itself."""
import numpy as np


def training_step(model, opt, loss_fn):
    """step(x, y): opt.zero_grad(), loss = loss_fn(model(x), y), loss.backward(),
    opt.step(); returns the loss."""
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def regression_data(rows=256):
    """FDUAI's data as float32 arrays: x in [0, 1) of shape (rows, 1), y = 2x + 1 + noise."""
    rng = np.random.default_rng(0)
    x = rng.random((rows, 1), dtype=np.float32)
    return x, (2 * x + 1 + 0.01 * rng.standard_normal((rows, 1))).astype(np.float32)


def regression_step(lib):
    """FDUAI's step for lib (aicraft or torch): scalars w and b from zero, x * w + b,
    MSE, SGD with lr 0.1. Returns (step, w, b)."""
    w, b = lib.zeros(1, requires_grad=True), lib.zeros(1, requires_grad=True)
    opt = lib.optim.SGD([w, b], lr=0.1)
    return training_step(lambda x: x * w + b, opt, lib.nn.functional.mse_loss), w, b
