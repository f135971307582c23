"""A word-level language model, LSTM or Transformer, written as a PyTorch script: only
the imports say aicraft.

No download: the corpus is sentences from a small grammar ("the old cat sees a red
ball ."), so a model that learns it reaches a perplexity far below the vocabulary's
size. Exits non-zero when the validation perplexity stays above
--max-ppl-fraction times the vocabulary size (a uniform guess).

    python word_language_model.py --model LSTM --epochs 2
    python word_language_model.py --model Transformer --epochs 2
"""
import argparse
import math
import random
import sys

import aicraft as torch
import aicraft.nn as nn
import aicraft.optim as optim

SUBJECTS = ["the cat", "the dog", "a bird", "my friend", "the teacher", "a child"]
ADJECTIVES = ["old", "young", "small", "happy"]
VERBS = ["sees", "likes", "finds", "wants"]
OBJECTS = ["a red ball", "the green box", "some blue water", "a big tree", "the new book"]


def grammar_sentences(n, rng):
    """n sentences: subject, an optional adjective after its article, verb, object."""
    lines = []
    for _ in range(n):
        article, noun = rng.choice(SUBJECTS).split()
        subject = [article, rng.choice(ADJECTIVES), noun] if rng.random() < 0.5 else [article, noun]
        lines.append(subject + [rng.choice(VERBS)] + rng.choice(OBJECTS).split() + ["."])
    return lines


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    def __init__(self, sentences, seed):
        rng = random.Random(seed)
        self.dictionary = Dictionary()
        self.train = self.tokenize(grammar_sentences(sentences, rng))
        self.valid = self.tokenize(grammar_sentences(sentences // 4, rng))

    def tokenize(self, lines):
        """All lines as one int64 tensor of word ids, an <eos> after each line."""
        ids = [self.dictionary.add_word(word) for line in lines for word in line + ["<eos>"]]
        return torch.tensor(ids, dtype=torch.int64)


class RNNModel(nn.Module):
    """Embedding, a recurrent stack, and a linear decoder to word scores."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        if self.rnn_type == "LSTM":
            return (torch.zeros(self.nlayers, bsz, self.nhid), torch.zeros(self.nlayers, bsz, self.nhid))
        return torch.zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    """Adds the sine/cosine position signal of "Attention Is All You Need" to (S, N, E) input."""

    def __init__(self, d_model, dropout=0.1, max_len=512):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(1))

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0)])


def generate_square_subsequent_mask(sz):
    """(sz, sz) float mask: -inf above the diagonal, so position i attends to 0..i only."""
    steps = torch.arange(sz)
    return torch.zeros(sz, sz).masked_fill(steps.view(1, -1) > steps.view(-1, 1), float("-inf"))


class TransformerModel(nn.Module):
    """Embedding, positional encoding, a causal TransformerEncoder, a linear decoder."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        encoder_layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layer, nlayers)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.decoder = nn.Linear(ninp, ntoken)
        self.ninp = ninp

    def forward(self, src):
        mask = generate_square_subsequent_mask(src.size(0))
        src = self.pos_encoder(self.encoder(src) * math.sqrt(self.ninp))
        output = self.transformer_encoder(src, mask)
        return self.decoder(output).view(-1, self.decoder.out_features)


def batchify(data, bsz, device):
    """The id stream as bsz columns: (len // bsz, bsz), each column a contiguous stretch."""
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


def repackage_hidden(h):
    """The hidden state cut from its history, so backward stops at the batch boundary."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def evaluate(model, data_source, args, criterion):
    model.eval()
    total_loss = 0.0
    if args.model != "Transformer":
        hidden = model.init_hidden(args.eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i, args.bptt)
            if args.model == "Transformer":
                output = model(data)
            else:
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train(model, train_data, args, criterion, optimizer, epoch):
    model.train()
    total_loss = 0.0
    if args.model != "Transformer":
        hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i, args.bptt)
        optimizer.zero_grad()
        if args.model == "Transformer":
            output = model(data)
        else:
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            print("| epoch {:3d} | {:5d}/{:5d} batches | loss {:5.2f} | ppl {:8.2f}".format(
                epoch, batch, len(train_data) // args.bptt, cur_loss, math.exp(cur_loss)))
            total_loss = 0.0


def main():
    parser = argparse.ArgumentParser(description="Word-level language model on a synthetic grammar")
    parser.add_argument("--model", type=str, default="LSTM", choices=["RNN_TANH", "LSTM", "GRU", "Transformer"])
    parser.add_argument("--emsize", type=int, default=32)
    parser.add_argument("--nhid", type=int, default=64)
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--nhead", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--sentences", type=int, default=800)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--eval-batch-size", type=int, default=8)
    parser.add_argument("--bptt", type=int, default=20)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--log-interval", type=int, default=20)
    parser.add_argument("--save", type=str, default="", help="path to save the final model")
    parser.add_argument("--max-ppl-fraction", type=float, default=0.25)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device("cpu")
    corpus = Corpus(args.sentences, args.seed)
    train_data = batchify(corpus.train, args.batch_size, device)
    val_data = batchify(corpus.valid, args.eval_batch_size, device)

    ntokens = len(corpus.dictionary)
    if args.model == "Transformer":
        model = TransformerModel(ntokens, args.emsize, args.nhead, args.nhid, args.nlayers, args.dropout)
    else:
        rnn_type = "RNN" if args.model == "RNN_TANH" else args.model
        model = RNNModel(rnn_type, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout)
    model = model.to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(1, args.epochs + 1):
        train(model, train_data, args, criterion, optimizer, epoch)
        val_loss = evaluate(model, val_data, args, criterion)
        print("-" * 70)
        print("| end of epoch {:3d} | valid loss {:5.2f} | valid ppl {:8.2f}".format(
            epoch, val_loss, math.exp(val_loss)))
        print("-" * 70)

    if args.save:
        with open(args.save, "wb") as f:
            torch.save(model.state_dict(), f)

    bound = args.max_ppl_fraction * ntokens
    if math.exp(val_loss) > bound:
        sys.exit("valid ppl %.2f is above %.2f (%d words)" % (math.exp(val_loss), bound, ntokens))


if __name__ == "__main__":
    main()
