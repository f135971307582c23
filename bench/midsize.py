"""midsize.py - ResNet-18 (CIFAR size) and a word-level LSTM language model with aicraft
and with PyTorch on the CPU: training step and inference speed, and peak memory.

    python bench/midsize.py                          # threads 1 and 2
    python bench/midsize.py --repeats 3 --threads 1 --models resnet18
    python bench/midsize.py --threads 1 --cpu-time   # on a loaded machine

The models, built the same way in both frameworks from the same weights:
  * resnet18: 3x32x32 input, conv3x3(3,64)-BN-ReLU, four stages of two BasicBlocks
    (64, 128, 256, 512 channels; stride 2 and a 1x1 conv-BN shortcut where a stage
    starts), global average pool, Linear(512, 10); cross entropy, SGD 0.1 with
    momentum 0.9, batch 32. Inference: batch 32 in eval mode under no_grad.
  * lstm_lm: Embedding(10000, 200), a 2-layer LSTM(200) with dropout 0.2 between and
    around it, Linear(200, 10000); bptt 35, batch 20, cross entropy, gradients clipped
    to norm 0.25, SGD 20 (PyTorch's word_language_model example). Inference: the same
    35 x 20 batch in eval mode under no_grad.
Measured, each framework in processes of its own:
  * steps/s per model, mode and thread count: two long-lived worker processes take
    turns (runs interleaved, the order alternating, a pause between turns), median of
    --repeats runs; aicraft runs each step inside `with ac.checkpoint():`. With
    --cpu-time, steps per second of the worker's CPU time (process time) instead of
    wall time: on one thread it is the speed the machine would give with no other
    load, which other processes hardly change; on more threads it counts work, not
    speed;
  * peak RSS of a fresh process per framework and model that imports the framework
    and runs --memory-steps training steps then as many inference steps, on 1 thread.
The data is random (images, labels and word ids from a seeded generator): speed and
memory do not depend on it.

Prints a table, then one JSON line. PyTorch: `pip install torch==2.13.0`.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from common import ROOT, host, host_line, measure_interleaved, peak_rss, spawn, timed_steps, torch_version

FRAMEWORKS = ("aicraft", "torch")
MODELS = ("resnet18", "lstm_lm")
MODES = ("train", "infer")
IMAGE_BATCH, CLASSES = 32, 10
VOCAB, EMBED, HIDDEN, LAYERS, BPTT, LM_BATCH, CLIP = 10000, 200, 200, 2, 35, 20, 0.25
TARGETS = {("resnet18", "train"): 1.2, ("resnet18", "infer"): 1.3, ("lstm_lm", "train"): 1.3,
           ("lstm_lm", "infer"): 1.3}
PAUSE_SECONDS = 0.5   # between turns: longer than OpenMP's spin before its threads sleep


# ---- the models, written once for both frameworks -------------------------------

def resnet18(nn, F):
    """The CIFAR ResNet-18 (BasicBlocks 2-2-2-2) in the framework whose nn and
    functional modules are given."""

    class BasicBlock(nn.Module):
        def __init__(self, inputs, outputs, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(outputs)
            self.conv2 = nn.Conv2d(outputs, outputs, 3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(outputs)
            self.shortcut = nn.Sequential()
            if stride != 1 or inputs != outputs:
                self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False),
                                              nn.BatchNorm2d(outputs))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.shortcut(x))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            stages, inputs = [], 64
            for outputs, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                stages += [BasicBlock(inputs, outputs, stride), BasicBlock(outputs, outputs, 1)]
                inputs = outputs
            self.stages = nn.Sequential(*stages)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.linear = nn.Linear(512, CLASSES)

        def forward(self, x):
            out = self.stages(F.relu(self.bn1(self.conv1(x))))
            return self.linear(self.pool(out).flatten(1))

    return ResNet18()


def lstm_lm(nn):
    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.2)
            self.encoder = nn.Embedding(VOCAB, EMBED)
            self.rnn = nn.LSTM(EMBED, HIDDEN, LAYERS, dropout=0.2)
            self.decoder = nn.Linear(HIDDEN, VOCAB)

        def forward(self, words, hidden):
            output, hidden = self.rnn(self.drop(self.encoder(words)), hidden)
            return self.decoder(self.drop(output)).view(-1, VOCAB), hidden

    return RNNModel()


def make_weights(model):
    """Seeded random weights for every entry of the model's state_dict, as NumPy arrays:
    the same for both frameworks, whose models name and shape their entries alike."""
    import numpy as np
    rng = np.random.default_rng(0)
    weights = {}
    for name, value in model.state_dict().items():
        shape = tuple(value.shape)
        if name.endswith("num_batches_tracked"):
            weights[name] = np.zeros(shape, np.int64)
        elif len(shape) == 1:   # BatchNorm's scale and running variance 1, every shift and mean 0
            ones = name.endswith("weight") or name.endswith("running_var")
            weights[name] = (np.ones if ones else np.zeros)(shape, np.float32)
        else:
            bound = 1 / np.sqrt(int(np.prod(shape[1:])))
            weights[name] = rng.uniform(-bound, bound, shape).astype(np.float32)
    return weights


def make_data(model_name):
    import numpy as np
    rng = np.random.default_rng(1)
    if model_name == "resnet18":
        return (rng.standard_normal((IMAGE_BATCH, 3, 32, 32)).astype(np.float32),
                rng.integers(0, CLASSES, IMAGE_BATCH).astype(np.int64))
    words = rng.integers(0, VOCAB, (BPTT + 1, LM_BATCH)).astype(np.int64)
    return words[:-1], words[1:].reshape(-1)


def make_model(framework, model_name):
    """(train_step(), infer(), set_threads) for one framework and model."""
    inputs, targets = make_data(model_name)
    if framework == "aicraft":
        sys.path.insert(0, ROOT)
        import aicraft as lib
        from aicraft import nn
        import aicraft.nn.functional as F
        as_tensor = lib.from_numpy
        scope = lib.checkpoint
    else:
        import torch
        lib, nn, F = torch, torch.nn, torch.nn.functional
        as_tensor = torch.from_numpy
        scope = None
    model = resnet18(nn, F) if model_name == "resnet18" else lstm_lm(nn)
    weights = make_weights(model)
    model.load_state_dict({k: as_tensor(v) for k, v in weights.items()})
    x, y = as_tensor(inputs), as_tensor(targets)
    loss_fn = nn.CrossEntropyLoss()
    if model_name == "resnet18":
        optimizer = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def forward_loss():
            return loss_fn(model(x), y)

        def predict():
            model(x).argmax(1)
    else:
        optimizer = lib.optim.SGD(model.parameters(), lr=20)
        hidden = (lib.zeros(LAYERS, LM_BATCH, HIDDEN), lib.zeros(LAYERS, LM_BATCH, HIDDEN))

        def forward_loss():
            output, _ = model(x, hidden)
            return loss_fn(output, y)

        def predict():
            model(x, hidden)[0].argmax(1)

    def train_step():
        model.train()
        with scope() if scope else nullcontext():
            loss = forward_loss()
            optimizer.zero_grad()
            loss.backward()
            if model_name == "lstm_lm":
                nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            optimizer.step()

    def infer():
        model.eval()
        with scope() if scope else nullcontext(), lib.no_grad():
            predict()
    return train_step, infer, lib.set_num_threads


def nullcontext():
    import contextlib
    return contextlib.nullcontext()


def throughput_worker(framework, cpu_time):
    """Answer lines "model mode threads seconds" with steps per second of wall time,
    or of this process's CPU time."""
    if framework == "torch":
        import torch
        torch.set_num_interop_threads(1)
    models = {name: make_model(framework, name) for name in MODELS}
    print("ready", flush=True)
    for line in sys.stdin:
        model_name, mode, threads, seconds = line.split()
        train_step, infer, set_threads = models[model_name]
        set_threads(int(threads))
        work = train_step if mode == "train" else infer
        work()   # warm-up, outside the CPU time too
        start = time.process_time()
        steps, elapsed = timed_steps(work, float(seconds), 0, 2)
        print(steps / (time.process_time() - start if cpu_time else elapsed), flush=True)


def memory_worker(framework, model_name, steps):
    """Import, build one model, train then infer `steps` steps on one thread; print the peak RSS."""
    train_step, infer, set_threads = make_model(framework, model_name)
    set_threads(1)
    for _ in range(steps):
        train_step()
    for _ in range(steps):
        infer()
    print(json.dumps({"peak_rss": peak_rss()}))


# ---- the driver ---------------------------------------------------------------------

def worker_env():
    """NumPy's own BLAS threads take no part in the work measured here: keep them off the cores."""
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def measure_memory(framework, model_name, steps):
    out = subprocess.run(spawn(__file__, "--memory-worker", framework, model_name, steps), check=True,
                         capture_output=True, text=True, env=worker_env()).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_rss"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts, comma separated")
    parser.add_argument("--models", default=",".join(MODELS), help="models, comma separated")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per measurement")
    parser.add_argument("--seconds", type=float, default=2.0, help="least length of one timed run")
    parser.add_argument("--memory-steps", type=int, default=3, help="steps of each mode per RSS process")
    parser.add_argument("--cpu-time", action="store_true", help="steps per CPU second, not per second")
    parser.add_argument("--throughput-worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--memory-worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.throughput_worker:
        return throughput_worker(args.throughput_worker, args.cpu_time)
    if args.memory_worker:
        fw, model_name, steps = args.memory_worker
        return memory_worker(fw, model_name, int(steps))

    version = torch_version()
    if not version:
        sys.exit("bench/midsize.py builds both models from PyTorch's: pip install torch==2.13.0")
    load = os.getloadavg()
    threads = [int(t) for t in args.threads.split(",")]
    models = args.models.split(",")
    configs = [(m, mode, t) for m in models for mode in MODES for t in threads]
    commands = {fw: spawn(__file__, "--throughput-worker", fw, *["--cpu-time"] * args.cpu_time)
                for fw in FRAMEWORKS}
    speed = measure_interleaved(commands, configs, args.repeats, args.seconds, pause=PAUSE_SECONDS,
                                env=worker_env())
    peak = {(fw, m): measure_memory(fw, m, args.memory_steps) / (1 << 20) for fw in FRAMEWORKS
            for m in models}

    print(host_line())
    print("ResNet-18 (CIFAR, batch %d) and LSTM LM (vocab %d, 2x%d, bptt %d, batch %d); "
          "aicraft vs PyTorch %s" % (IMAGE_BATCH, VOCAB, HIDDEN, BPTT, LM_BATCH, version))
    print("%d interleaved runs of >= %gs, medians of steps per %s; load average before: %s\n"
          % (args.repeats, args.seconds, "CPU second" if args.cpu_time else "second",
             " ".join("%.2f" % v for v in load)))
    row = "%-34s %10s %10s %8s   %s"
    print(row % ("", "aicraft", "PyTorch", "ratio", "target"))
    results = []
    for model_name, mode, t in configs:
        ours, theirs = speed[("aicraft", model_name, mode, t)], speed[("torch", model_name, mode, t)]
        target = TARGETS[(model_name, mode)]
        label = "%s %s, %d thread%s" % (model_name, mode, t, "s" * (t > 1))
        print(row % (label, "%.2f" % ours, "%.2f" % theirs, "%.2fx" % (ours / theirs),
                     ">= %.1fx" % target))
        results.append({"model": model_name, "mode": mode, "threads": t,
                        "aicraft_steps_s": round(ours, 3), "torch_steps_s": round(theirs, 3),
                        "ratio": round(ours / theirs, 3), "meets_target": ours / theirs >= target})
    for model_name in models:
        ours, theirs = peak[("aicraft", model_name)], peak[("torch", model_name)]
        print(row % ("%s peak RSS (MB)" % model_name, "%.0f" % ours, "%.0f" % theirs,
                     "%.2f" % (ours / theirs), "< 1"))
    print()
    print(json.dumps({"bench": "midsize", **host(), "torch": version, "repeats": args.repeats,
                      "seconds": args.seconds, "cpu_time": args.cpu_time, "results": results,
                      "peak_rss_mb": {m: {fw: round(peak[(fw, m)], 1) for fw in FRAMEWORKS}
                                      for m in models}}))


if __name__ == "__main__":
    main()
