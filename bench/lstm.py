"""lstm.py - training an LSTM layer with aicraft and with PyTorch on the CPU.

    python bench/lstm.py                     # threads 1 and 2
    python bench/lstm.py --repeats 3 --seconds 0.5 --threads 1

One training step: forward through nn.LSTM(32, 128) over a sequence of 50 steps
at batch 32 (time-major), a loss, backward through time, an Adam step. Two
losses: "last state" puts a Linear(128, 1) head on h_n (sequence regression,
gradient enters at the last step only); "every step" is the MSE of the whole
output sequence against a target (sequence labelling). Both frameworks start
from the same weights and data.

Each framework runs in a long-lived worker process of its own; runs take
turns (the order alternating) so a noisy machine slows both alike, and each
cell is the median of --repeats runs of --seconds each.

Prints a table, then one JSON line. PyTorch: `pip install torch==2.13.0`.
"""
import argparse
import json
import sys

from common import ROOT, host, host_line, measure_interleaved, spawn, timed_steps, torch_version

FRAMEWORKS = ("aicraft", "torch")
LOSSES = ("last state", "every step")
INPUT, HIDDEN, STEPS, BATCH = 32, 128, 50, 32
TARGET_RATIO = 1.2


# ---- the work each worker process does ------------------------------------------

def make_data():
    """Weights (PyTorch names) and data, the same for both frameworks."""
    import numpy as np
    rng = np.random.default_rng(0)
    bound = 1 / np.sqrt(HIDDEN)
    weights = {
        "weight_ih_l0": rng.uniform(-bound, bound, (4 * HIDDEN, INPUT)),
        "weight_hh_l0": rng.uniform(-bound, bound, (4 * HIDDEN, HIDDEN)),
        "bias_ih_l0": rng.uniform(-bound, bound, 4 * HIDDEN),
        "bias_hh_l0": rng.uniform(-bound, bound, 4 * HIDDEN),
    }
    head = {"weight": rng.uniform(-bound, bound, (1, HIDDEN)), "bias": rng.uniform(-bound, bound, 1)}
    data = {
        "x": rng.standard_normal((STEPS, BATCH, INPUT)),
        "y_last": rng.standard_normal((BATCH, 1)),
        "y_every": rng.standard_normal((STEPS, BATCH, HIDDEN)),
    }
    as32 = lambda d: {k: v.astype(np.float32) for k, v in d.items()}  # noqa: E731
    return as32(weights), as32(head), as32(data)


def make_trainer(framework, loss):
    """(step, set_threads): step() does one training step."""
    weights, head_weights, data = make_data()
    if framework == "aicraft":
        sys.path.insert(0, ROOT)
        import aicraft as ac
        from aicraft import nn, optim
        lstm, head = nn.LSTM(INPUT, HIDDEN), nn.Linear(HIDDEN, 1)
        lstm.load_state_dict({k: ac.tensor(v) for k, v in weights.items()})
        head.load_state_dict({k: ac.tensor(v) for k, v in head_weights.items()})
        params = list(lstm.parameters()) + list(head.parameters())
        optimizer = optim.Adam(params, lr=1e-3)
        mse = nn.MSELoss()
        x, y_last, y_every = (ac.tensor(data[k]) for k in ("x", "y_last", "y_every"))

        def step():
            with ac.checkpoint():
                out, (h_n, _) = lstm(x)
                value = mse(head(h_n[0]), y_last) if loss == "last state" else mse(out, y_every)
                optimizer.zero_grad()
                value.backward()
                optimizer.step()
        return step, ac.set_num_threads

    import torch
    lstm, head = torch.nn.LSTM(INPUT, HIDDEN), torch.nn.Linear(HIDDEN, 1)
    lstm.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    head.load_state_dict({k: torch.from_numpy(v) for k, v in head_weights.items()})
    optimizer = torch.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=1e-3)
    mse = torch.nn.MSELoss()
    x, y_last, y_every = (torch.from_numpy(data[k]) for k in ("x", "y_last", "y_every"))

    def step():
        out, (h_n, _) = lstm(x)
        value = mse(head(h_n[0]), y_last) if loss == "last state" else mse(out, y_every)
        optimizer.zero_grad()
        value.backward()
        optimizer.step()
    return step, torch.set_num_threads


def worker(framework):
    """Answer lines "loss threads seconds" with the steps/s of a run that long."""
    if framework == "torch":
        import torch
        torch.set_num_interop_threads(1)
    trainers = {loss: make_trainer(framework, loss) for loss in LOSSES}
    print("ready", flush=True)
    for line in sys.stdin:
        loss_index, threads, seconds = line.split()
        step, set_threads = trainers[LOSSES[int(loss_index)]]
        set_threads(int(threads))
        steps, elapsed = timed_steps(step, float(seconds), 5, 10)
        print(steps / elapsed, flush=True)


# ---- the driver ---------------------------------------------------------------------

def measure(frameworks, configs, repeats, seconds):
    commands = {fw: spawn(__file__, "--worker", fw) for fw in frameworks}
    return measure_interleaved(commands, configs, repeats, seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts, comma separated")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved runs per cell")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one timed run")
    parser.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)

    version = torch_version()
    frameworks = FRAMEWORKS if version else ("aicraft",)
    if not version:
        print("PyTorch is not installed (pip install torch==2.13.0): aicraft's numbers only\n")
    configs = [(i, int(t)) for t in args.threads.split(",") for i in range(len(LOSSES))]
    speed = measure(frameworks, configs, args.repeats, args.seconds)

    print(host_line())
    print("LSTM(%d, %d), sequence %d, batch %d: forward + backward + Adam, aicraft vs PyTorch %s"
          % (INPUT, HIDDEN, STEPS, BATCH, version or "-"))
    print("%d interleaved runs of %gs each, medians of training steps/s\n" % (args.repeats, args.seconds))
    row = "%-30s %10s %10s %8s   %s"
    print(row % ("", "aicraft", "PyTorch", "ratio", "target"))
    results = []
    for loss_index, threads in configs:
        ours, theirs = speed[("aicraft", loss_index, threads)], speed.get(("torch", loss_index, threads))
        ratio = ours / theirs if theirs else None
        label = "%s, %d thread%s" % (LOSSES[loss_index], threads, "s" * (threads > 1))
        print(row % (label, "%.1f" % ours, "%.1f" % theirs if theirs else "-",
                     "%.2fx" % ratio if ratio else "-", ">= %.1fx" % TARGET_RATIO))
        results.append({"loss": LOSSES[loss_index], "threads": threads, "aicraft_steps_s": round(ours, 2),
                        "torch_steps_s": theirs and round(theirs, 2),
                        "ratio": ratio and round(ratio, 3),
                        "meets_target": None if ratio is None else ratio >= TARGET_RATIO})
    print(json.dumps({"bench": "lstm", **host(), "input": INPUT, "hidden": HIDDEN, "steps": STEPS,
                      "batch": BATCH, "torch": version, "repeats": args.repeats,
                      "seconds": args.seconds, "results": results}))


if __name__ == "__main__":
    main()
