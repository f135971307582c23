"""A sequence classifier with nn.RNN or nn.LSTM, written as a PyTorch script: only the
imports say aicraft.

No download: each sequence of tokens belongs to one of four classes, and about half
of its tokens come from that class's own four-token band of the vocabulary, the rest
uniformly from all of it. Exits non-zero when the test accuracy stays below
--min-accuracy (chance is 25%).

    python rnn_classifier.py --model LSTM --epochs 3
"""
import argparse
import sys

import aicraft as torch
import aicraft.nn as nn
import aicraft.optim as optim
from aicraft.utils.data import DataLoader, TensorDataset

N_CLASSES = 4
VOCAB = 4 * N_CLASSES


def synthetic_sequences(n, seq_len):
    """n int64 token sequences (n, seq_len) and their int64 class labels (n,)."""
    labels = torch.randint(0, N_CLASSES, (n,))
    noise = torch.randint(0, VOCAB, (n, seq_len))
    in_band = labels.view(-1, 1) * 4 + torch.randint(0, 4, (n, seq_len))
    tokens = torch.where(torch.rand(n, seq_len) < 0.5, in_band, noise)
    return tokens, labels


class SequenceClassifier(nn.Module):
    def __init__(self, rnn_type, ntoken, nembed, nhid, nclass):
        super().__init__()
        self.embed = nn.Embedding(ntoken, nembed)
        self.rnn = getattr(nn, rnn_type)(nembed, nhid, batch_first=True)
        self.fc = nn.Linear(nhid, nclass)

    def forward(self, tokens):
        output, _ = self.rnn(self.embed(tokens))
        return self.fc(output[:, -1])       # the last step has read the whole sequence


def main():
    parser = argparse.ArgumentParser(description="RNN/LSTM sequence classifier on synthetic data")
    parser.add_argument("--model", type=str, default="LSTM", choices=["RNN", "LSTM", "GRU"])
    parser.add_argument("--seq-len", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--train-size", type=int, default=1024)
    parser.add_argument("--test-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-accuracy", type=float, default=60.0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    train_loader = DataLoader(TensorDataset(*synthetic_sequences(args.train_size, args.seq_len)),
                              batch_size=args.batch_size, shuffle=True)
    test_tokens, test_labels = synthetic_sequences(args.test_size, args.seq_len)

    model = SequenceClassifier(args.model, VOCAB, 16, args.hidden, N_CLASSES)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(1, args.epochs + 1):
        model.train()
        total_loss = 0.0
        for tokens, labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(tokens), labels)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(labels)

        model.eval()
        with torch.no_grad():
            pred = model(test_tokens).argmax(dim=1)
            accuracy = 100.0 * (pred == test_labels).sum().item() / len(test_labels)
        print("epoch {:2d} | train loss {:.4f} | test accuracy {:.1f}%".format(
            epoch, total_loss / len(train_loader.dataset), accuracy))

    if accuracy < args.min_accuracy:
        sys.exit("accuracy %.1f%% is below %.1f%%" % (accuracy, args.min_accuracy))


if __name__ == "__main__":
    main()
