"""mnist_cnn.py - a small convolutional net learns MNIST, written as one would in PyTorch.

    python demos/mnist_cnn.py                 # 3 epochs, Adam 1e-3, batch 64: >= 99% test accuracy
    python demos/mnist_cnn.py --epochs 1 --threads 2 --schedule cosine

Conv(1,16,3,p=1)-ReLU-MaxPool(2)-Conv(16,32,3,p=1)-ReLU-MaxPool(2)-Flatten-
Linear(1568,128)-ReLU-Dropout(0.25)-Linear(128,10), PyTorch's default init, trained
with Adam at a constant 1e-3 (--schedule cosine: falling to 0 along a cosine) on
cross entropy with label smoothing 0.1. After 3 epochs, seeds 0, 1, 2: 99.13%,
99.13%, 99.09% (about a minute a run on 2 threads). Without smoothing
(--label-smoothing 0) the net ends near 98.9%, a coin toss at 99%: 99.05%,
98.86%, 98.93% here, and 98.77%, 98.87%, 98.98% in PyTorch with the same recipe.
Fetches MNIST into --data on first use, prints each epoch's mean training loss and
test accuracy, saves the weights as safetensors, and exports the model for C programs
(--program; it takes batches of 500 images, as the test loader gives:
build/demos/run_model prints the same accuracy). Each training step runs inside
`with ac.checkpoint():`, so its memory is handed back in one move when it ends.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import aicraft as ac  # noqa: E402
from aicraft import nn, optim  # noqa: E402
from mnist_common import argument_parser, fit, mnist_loaders, parse_args, save_weights  # noqa: E402


def arguments():
    parser = argument_parser(__doc__, epochs=3, out="mnist_cnn.safetensors")
    parser.add_argument("--schedule", choices=("constant", "cosine"), default="constant",
                        help="learning rate: constant, or cosine from --lr down to 0 over the run")
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--program", default=os.path.join("data", "mnist_cnn.acprog"),
                        help="where to export the trained model for C (demos/c/run_model.c)")
    return parse_args(parser)


TEST_BATCH = 500


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10))


def main():
    args = arguments()
    if args.threads:
        ac.set_num_threads(args.threads)
    ac.manual_seed(args.seed)

    train_loader, test_loader = mnist_loaders(args.data, args.batch_size, args.seed,
                                              test_batch_size=TEST_BATCH)

    model = make_model()
    model.to(args.device)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    steps = args.epochs * len(train_loader)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps) \
        if args.schedule == "cosine" else None
    print(model)

    fit(model, train_loader, test_loader, loss_fn, optimizer, args.epochs, scheduler, device=args.device)
    save_weights(model, args.out)
    ac.export(model, ac.zeros(TEST_BATCH, 1, 28, 28), args.program)
    print("program exported to %s" % args.program)


if __name__ == "__main__":
    main()
