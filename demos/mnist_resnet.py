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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import aicraft as ac  # noqa: E402
from aicraft import nn, optim  # noqa: E402
from mnist_common import argument_parser, fit, mnist_loaders, parse_args, save_weights  # noqa: E402


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


def arguments():
    parser = argument_parser(__doc__, epochs=4, out="mnist_resnet.safetensors")
    parser.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                        help="learning rate: cosine from --lr down to 0 over the run, or constant")
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    return parse_args(parser)


def main():
    args = arguments()
    if args.threads:
        ac.set_num_threads(args.threads)
    ac.manual_seed(args.seed)

    train_loader, test_loader = mnist_loaders(args.data, args.batch_size, args.seed,
                                              test_batch_size=500)

    model = make_model()
    loss_fn = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    steps = args.epochs * len(train_loader)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps) \
        if args.schedule == "cosine" else None
    print(model)
    print("%d parameters" % sum(p.numel() for p in model.parameters()))

    fit(model, train_loader, test_loader, loss_fn, optimizer, args.epochs, scheduler)
    save_weights(model, args.out)


if __name__ == "__main__":
    main()
