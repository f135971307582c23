"""Polynomial regression fitted with L-BFGS, written as a PyTorch script: only the
imports say aicraft.

y = w . (x, x^2, x^3, x^4) + b with a random target w, b; a Linear(4, 1) fits it from
noise-free samples. Exits non-zero unless the final loss is below --max-loss.

    python regression_lbfgs.py --steps 10
"""
import argparse
import sys

import aicraft as torch
import aicraft.nn as nn
import aicraft.nn.functional as F
import aicraft.optim as optim

POLY_DEGREE = 4


def make_features(x):
    """Columns [x, x^2, x^3, x^4] for a (n, 1) column x."""
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def poly_desc(W, b):
    result = "y = "
    for i, w in enumerate(W):
        result += "{:+.2f} x^{} ".format(w, i + 1)
    return result + "{:+.2f}".format(b[0])


def main():
    parser = argparse.ArgumentParser(description="Polynomial regression with L-BFGS")
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20, help="optimizer.step(closure) calls")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-loss", type=float, default=1e-3)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    W_target = torch.randn(POLY_DEGREE, 1) * 5
    b_target = torch.randn(1) * 5
    x = torch.rand(args.samples, 1) * 2 - 1
    features = make_features(x)
    y = features @ W_target + b_target

    fc = nn.Linear(POLY_DEGREE, 1)
    optimizer = optim.LBFGS(fc.parameters(), lr=1, max_iter=20, history_size=10)

    def closure():
        optimizer.zero_grad()
        loss = F.mse_loss(fc(features), y)
        loss.backward()
        return loss

    for step in range(1, args.steps + 1):
        loss = optimizer.step(closure)
        print("step {:2d}: loss {:.3e}".format(step, loss.item()))

    loss = F.mse_loss(fc(features), y).item()
    print("==> Learned function:\t" + poly_desc(fc.weight.view(-1).tolist(), fc.bias.tolist()))
    print("==> Actual function:\t" + poly_desc(W_target.view(-1).tolist(), b_target.tolist()))
    if loss > args.max_loss:
        sys.exit("loss %.3e is above %.1e" % (loss, args.max_loss))


if __name__ == "__main__":
    main()
