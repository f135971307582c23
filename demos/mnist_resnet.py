"""mnist_resnet.py - a small residual net learns MNIST: conv-BN-ReLU blocks with identity
shortcuts and global average pooling, written as one would in PyTorch.

    python demos/mnist_resnet.py              # 4 epochs, Adam 1e-3, batch 64: > 99% test accuracy
    python demos/mnist_resnet.py --epochs 1 --threads 2

stem:   Conv(1,16,3,p=1)-BN-ReLU-MaxPool(2)                     28x28 -> 14x14
stage1: ResidualBlock(16)                                        14x14
down:   Conv(16,32,3,stride=2,p=1)-BN-ReLU                       14x14 -> 7x7
stage2: ResidualBlock(32)                                        7x7
head:   AdaptiveAvgPool(1)-Flatten-Linear(32,10)
A ResidualBlock is relu(x + BN(conv(relu(BN(conv(x)))))). Adam from 1e-3, the rate
falling to 0 along a cosine over the run (--schedule), cross entropy with label
smoothing 0.1, as in mnist_cnn.py. BatchNorm uses batch
statistics in training and its running statistics for the test set; both live in
the model's state_dict (running_mean, running_var, num_batches_tracked).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import aicraft as ac  # noqa: E402
from aicraft import nn, optim  # noqa: E402
from aicraft.data import DataLoader, transforms  # noqa: E402
from aicraft.data.datasets import MNIST  # noqa: E402


def conv_bn(in_channels, out_channels, stride=1):
    """3x3 convolution (no bias: BatchNorm's shift replaces it) and BatchNorm."""
    return [nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(out_channels)]


class ResidualBlock(nn.Module):
    """relu(x + BN(conv(relu(BN(conv(x)))))): the identity shortcut keeps the shape."""

    def __init__(self, channels):
        super().__init__()
        self.body = nn.Sequential(*conv_bn(channels, channels), nn.ReLU(),
                                  *conv_bn(channels, channels))
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(x + self.body(x))


def make_model():
    return nn.Sequential(
        *conv_bn(1, 16), nn.ReLU(), nn.MaxPool2d(2),
        ResidualBlock(16),
        *conv_bn(16, 32, stride=2), nn.ReLU(),
        ResidualBlock(32),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                        help="learning rate: cosine from --lr down to 0 over the run, or constant")
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="threads for large ops")
    parser.add_argument("--data", default="data", help="where MNIST is (or will be) kept")
    parser.add_argument("--out", default=os.path.join("data", "mnist_resnet.safetensors"),
                        help="where to save the trained weights and running statistics")
    args = parser.parse_args()
    if args.epochs < 1 or args.batch_size < 1:
        parser.error("--epochs and --batch-size must be at least 1")
    return args


@ac.no_grad()
def evaluate(model, loader):
    """(correct, total) over the loader's batches, in eval mode (running statistics)."""
    model.eval()
    correct = total = 0
    for x, y in loader:
        with ac.checkpoint():
            predicted = model(x).argmax(1).numpy()
            correct += int((predicted == y.numpy()).sum())
            total += len(predicted)
    model.train()
    return correct, total


def main():
    args = parse_args()
    if args.threads:
        ac.set_num_threads(args.threads)
    ac.manual_seed(args.seed)

    to_input = transforms.Compose([transforms.ToTensor(),
                                   transforms.Normalize((0.1307,), (0.3081,))])
    train_set = MNIST(args.data, train=True, download=True, transform=to_input)
    test_set = MNIST(args.data, train=False, transform=to_input)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, seed=args.seed)
    test_loader = DataLoader(test_set, batch_size=500)

    model = make_model()
    loss_fn = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    steps = args.epochs * len(train_loader)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps) \
        if args.schedule == "cosine" else None
    print(model)
    print("%d parameters" % sum(p.numel() for p in model.parameters()))

    for epoch in range(1, args.epochs + 1):
        start, epoch_loss = time.perf_counter(), 0.0
        for x, y in train_loader:
            with ac.checkpoint():
                loss = loss_fn(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                epoch_loss += loss.item()
            if scheduler:
                scheduler.step()
        seconds = time.perf_counter() - start
        correct, total = evaluate(model, test_loader)
        print("epoch %d: loss %.4f  test accuracy %.2f%%  (%.1f s, %.0f samples/s)"
              % (epoch, epoch_loss / len(train_loader), 100.0 * correct / total, seconds,
                 len(train_set) / seconds))

    print("test accuracy: %.2f%% (%d/%d)" % (100.0 * correct / total, correct, total))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    ac.save(model.state_dict(), args.out)
    print("weights saved to %s" % args.out)


if __name__ == "__main__":
    main()
