"""demos/linear_regression.py - fit y = 2x + 1 + noise with a hand-written training loop.

The PyTorch way, with aicraft: parameters are leaf tensors that require grad,
loss.backward() fills their .grad, and the SGD update runs under no_grad. Each
step runs inside ac.checkpoint(), so its tensors are freed when it ends and
memory stays flat however long training runs.

    python demos/linear_regression.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import aicraft as ac  # noqa: E402


def main():
    ac.manual_seed(0)
    x = ac.randn(256, 1)
    y = 2.0 * x + 1.0 + 0.1 * ac.randn(256, 1)

    w = ac.zeros(1, 1, requires_grad=True)
    b = ac.zeros(1, requires_grad=True)
    lr = 0.1
    start = ac.memory_stats()["bytes_in_use"]

    for step in range(200):
        with ac.checkpoint():
            prediction = x @ w + b
            loss = ((prediction - y) ** 2).mean()
            loss.backward()
            with ac.no_grad():
                w -= lr * w.grad
                b -= lr * b.grad
            w.grad = None
            b.grad = None
            if step % 50 == 0 or step == 199:
                print("step %3d  loss %.5f" % (step, loss.item()))

    print("w = %.4f (true 2.0)" % w.item())
    print("b = %.4f (true 1.0)" % b.item())
    print("bytes in use: %d at start, %d at the end" % (start, ac.memory_stats()["bytes_in_use"]))


if __name__ == "__main__":
    main()
