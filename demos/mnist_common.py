"""mnist_common.py - what the MNIST demos share: the loaders, one epoch of training,
the options, the test accuracy, the per-epoch report and saving the weights."""
import argparse
import os
import time

import aicraft as ac
from aicraft.data import DataLoader, transforms
from aicraft.data.datasets import MNIST

try:
    from tqdm import tqdm
except ImportError:        # the progress bar is optional
    tqdm = None


def argument_parser(doc, epochs, out):
    """The options every MNIST demo takes; a demo adds its own, then calls parse_args."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="threads for large ops")
    parser.add_argument("--data", default="data", help="where MNIST is (or will be) kept")
    parser.add_argument("--device", default="cpu", help='where to train: "cpu" or "cuda"')
    parser.add_argument("--out", default=os.path.join("data", out),
                        help="where to save the trained weights")
    return parser


def parse_args(parser):
    args = parser.parse_args()
    if args.epochs < 1 or args.batch_size < 1:
        parser.error("--epochs and --batch-size must be at least 1")
    return args


def mnist_loaders(data, batch_size, seed, test_batch_size, flatten=False):
    """(train_loader, test_loader) over normalised MNIST, fetched into `data` on first use."""
    steps = [transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]
    if flatten:
        steps.append(transforms.Flatten())
    to_input = transforms.Compose(steps)
    train_set = MNIST(data, train=True, download=True, transform=to_input)
    test_set = MNIST(data, train=False, transform=to_input)
    return (DataLoader(train_set, batch_size=batch_size, shuffle=True, seed=seed),
            DataLoader(test_set, batch_size=test_batch_size))


def progress(loader, epoch):
    """The loader wrapped in a tqdm bar when tqdm is installed, else the loader itself."""
    if tqdm is None:
        return loader
    return tqdm(loader, desc="epoch %d" % epoch, leave=False, mininterval=0.5)


def train_one_epoch(model, batches, loss_fn, optimizer, scheduler=None, losses=None, device="cpu"):
    """Sum of the step losses over `batches`; each step's loss is appended to `losses`
    when given. Each step runs inside `with ac.checkpoint():`, so its memory is handed
    back in one move when it ends (on a GPU too: the batch copied to the device is
    in the step's scope)."""
    epoch_loss = 0.0
    for x, y in batches:
        with ac.checkpoint():
            loss = loss_fn(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            value = loss.item()
        epoch_loss += value
        if losses is not None:
            losses.append(value)
        if scheduler:
            scheduler.step()
    return epoch_loss


@ac.no_grad()
def evaluate(model, loader, device="cpu"):
    """(correct, total) over the loader's batches, in eval mode."""
    model.eval()
    correct = total = 0
    for x, y in loader:
        with ac.checkpoint():
            predicted = model(x.to(device)).cpu().argmax(1).numpy()   # argmax has no CUDA kernel yet
            correct += int((predicted == y.numpy()).sum())
            total += len(predicted)
    model.train()
    return correct, total


def fit(model, train_loader, test_loader, loss_fn, optimizer, epochs, scheduler=None,
        losses=None, show_progress=False, device="cpu"):
    """Train for `epochs` epochs on device (where the model is), printing each one's
    mean loss and test accuracy; returns the last (correct, total)."""
    samples = len(train_loader.dataset)
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        batches = progress(train_loader, epoch) if show_progress else train_loader
        epoch_loss = train_one_epoch(model, batches, loss_fn, optimizer, scheduler, losses, device)
        seconds = time.perf_counter() - start
        correct, total = evaluate(model, test_loader, device)
        print("epoch %d: loss %.4f  test accuracy %.2f%%  (%.1f s, %.0f samples/s)"
              % (epoch, epoch_loss / len(train_loader), 100.0 * correct / total, seconds,
                 samples / seconds))
    print("test accuracy: %.2f%% (%d/%d)" % (100.0 * correct / total, correct, total))
    return correct, total


def save_weights(model, path):
    """Save the weights from the CPU (the model moves there)."""
    model.to("cpu")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ac.save(model.state_dict(), path)
    print("weights saved to %s" % path)
