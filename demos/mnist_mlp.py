"""mnist_mlp.py - a 784-128-10 MLP learns MNIST, written as one would in PyTorch.

    python demos/mnist_mlp.py                 # 5 epochs, Adam 1e-3, batch 64
    python demos/mnist_mlp.py --epochs 1 --out /tmp/mlp.safetensors
    python demos/mnist_mlp.py --device cuda   # on a GPU

Fetches MNIST into --data on first use, prints each epoch's mean training
loss and test accuracy, saves the weights as safetensors (which
demos/c/predict.c reads), and draws the loss curve when matplotlib is
installed. Each training step runs inside `with ac.checkpoint():`, so its
memory is handed back in one move when the step ends.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import aicraft as ac  # noqa: E402
from aicraft import nn, optim  # noqa: E402
from mnist_common import argument_parser, fit, mnist_loaders, parse_args, save_weights  # noqa: E402


def arguments():
    parser = argument_parser(__doc__, epochs=5, out="mnist_mlp.safetensors")
    parser.add_argument("--plot", default=os.path.join("data", "mnist_mlp_loss.png"),
                        help="where to draw the loss curve (needs matplotlib)")
    return parse_args(parser)


def plot_losses(losses, steps_per_epoch, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    window = 50
    smooth = [sum(losses[max(0, i - window + 1):i + 1]) / (i + 1 - max(0, i - window + 1))
              for i in range(len(losses))]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([i / steps_per_epoch for i in range(len(losses))], losses, alpha=0.25, label="step")
    ax.plot([i / steps_per_epoch for i in range(len(losses))], smooth, label="mean of %d steps" % window)
    ax.set_xlabel("epoch")
    ax.set_ylabel("cross-entropy loss")
    ax.set_yscale("log")
    ax.set_title("MNIST MLP 784-128-10, Adam, aicraft")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main():
    args = arguments()
    if args.threads:
        ac.set_num_threads(args.threads)
    ac.manual_seed(args.seed)

    train_loader, test_loader = mnist_loaders(args.data, args.batch_size, args.seed,
                                              test_batch_size=1000, flatten=True)

    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    model.to(args.device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    print(model)

    losses = []
    fit(model, train_loader, test_loader, loss_fn, optimizer, args.epochs, losses=losses,
        show_progress=True, device=args.device)
    save_weights(model, args.out)
    if plot_losses(losses, len(train_loader), args.plot):
        print("loss curve drawn in %s" % args.plot)


if __name__ == "__main__":
    main()
