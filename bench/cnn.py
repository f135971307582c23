"""cnn.py - the MNIST CNN of demos/mnist_cnn.py with aicraft and with PyTorch on the
CPU: training and inference speed, and peak memory.

    python bench/cnn.py                        # threads 1 and 2
    python bench/cnn.py --repeats 3 --seconds 1 --threads 1

The model: Conv(1,16,3,p=1)-ReLU-MaxPool(2)-Conv(16,32,3,p=1)-ReLU-MaxPool(2)-
Flatten-Linear(1568,128)-ReLU-Dropout(0.25)-Linear(128,10), Adam 1e-3, cross
entropy. Measured, each framework in processes of its own:
  * training samples/s at batch 64 per thread count: two long-lived worker
    processes take turns (runs interleaved, the order alternating, a pause
    between turns so that threads the idle worker left spinning are asleep),
    median of --repeats runs; aicraft runs each step inside
    `with ac.checkpoint():`;
  * inference samples/s at batch 256 in eval mode under no_grad, the same way;
  * peak RSS of a fresh process that imports the framework and trains 200 steps
    at batch 64, and of another that runs 50 inference batches of 256;
  * aicraft only: the peak of libac's bytes_in_use during one training step
    at batch 64, above what was in use before it, with the step at root (as
    a PyTorch script runs it) and inside `with ac.checkpoint():`, each in a
    fresh process.
The data: the first 10,000 MNIST training images when data/MNIST/raw holds them
(demos/mnist_cnn.py downloads them), else 10,000 synthetic uint8 images of 10
noisy prototypes; both frameworks convert each uint8 batch to float the same
way, (x / 255 - 0.1307) / 0.3081.

Prints a table, then one JSON line. PyTorch: `pip install torch==2.13.0`.
"""
import argparse
import json
import os
import subprocess
import sys

from common import (ROOT, SAMPLES, Batches, host, host_line, load_mnist_uint8, measure_interleaved, peak_rss,
                    spawn, step_peak_bytes, step_scope, timed_steps, torch_version)

FRAMEWORKS = ("aicraft", "torch")
SCOPES = ("root", "checkpoint")
TRAIN_BATCH, INFER_BATCH = 64, 256
PAUSE_SECONDS = 0.5   # between turns: longer than OpenMP's and OpenBLAS's spin before sleeping


# ---- the work each worker process does ------------------------------------------

def load_data():
    """(images uint8 (SAMPLES, 1, 28, 28), labels uint8 (SAMPLES,), description)."""
    images, labels, description = load_mnist_uint8()
    return images.reshape(SAMPLES, 1, 28, 28), labels, description


def make_model(framework, scoped=True):
    """(train_step(images, labels), infer(images), set_threads) for one framework;
    aicraft's train_step runs in ac.checkpoint() when scoped, else at root."""
    if framework == "aicraft":
        sys.path.insert(0, ROOT)
        import aicraft as ac
        from aicraft import nn, optim
        ac.manual_seed(0)
        model = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(1568, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
        optimizer = optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()

        def to_input(images):
            return (ac.from_numpy(images).float() * (1 / 255) - 0.1307) * (1 / 0.3081)

        def train_step(images, labels):
            model.train()
            with step_scope(ac, scoped):
                loss = loss_fn(model(to_input(images)), ac.from_numpy(labels).long())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        def infer(images):
            model.eval()
            with ac.checkpoint(), ac.no_grad():
                model(to_input(images)).argmax(1).numpy()
        return train_step, infer, ac.set_num_threads

    import torch
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    tnn = torch.nn
    model = tnn.Sequential(
        tnn.Conv2d(1, 16, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Conv2d(16, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
        tnn.Linear(1568, 128), tnn.ReLU(), tnn.Dropout(0.25), tnn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = tnn.CrossEntropyLoss()

    def to_input(images):
        return torch.from_numpy(images).float().mul_(1 / 255).sub_(0.1307).mul_(1 / 0.3081)

    def train_step(images, labels):
        model.train()
        loss = loss_fn(model(to_input(images)), torch.from_numpy(labels).long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def infer(images):
        model.eval()
        with torch.no_grad():
            model(to_input(images)).argmax(1).numpy()
    return train_step, infer, torch.set_num_threads


def throughput_worker(framework):
    """Answer lines "mode threads seconds" (mode train or infer) with samples/s."""
    images, labels, _ = load_data()
    train_step, infer, set_threads = make_model(framework)
    print("ready", flush=True)
    for line in sys.stdin:
        mode, threads, seconds = line.split()
        threads, seconds = int(threads), float(seconds)
        set_threads(threads)
        if mode == "train":
            batches, work = Batches(images, labels, TRAIN_BATCH), train_step
        else:
            batches, work = Batches(images, labels, INFER_BATCH), lambda x, y: infer(x)
        steps, elapsed = timed_steps(lambda: work(*batches.next()), seconds, 5, 5)
        print(steps * batches.batch / elapsed, flush=True)


def memory_worker(framework, mode, steps):
    """Import, then train or infer `steps` steps on one thread; print the peak RSS as JSON."""
    images, labels, _ = load_data()
    train_step, infer, set_threads = make_model(framework)
    set_threads(1)
    if mode == "train":
        batches, work = Batches(images, labels, TRAIN_BATCH), train_step
    else:
        batches, work = Batches(images, labels, INFER_BATCH), lambda x, y: infer(x)
    for _ in range(steps):
        work(*batches.next())
    print(json.dumps({"peak_rss": peak_rss()}))


def step_peak_worker(scope):
    """Print the peak bytes of one aicraft training step, at root or in a checkpoint."""
    images, labels, _ = load_data()
    train_step, _, set_threads = make_model("aicraft", scoped=scope == "checkpoint")
    set_threads(1)
    import aicraft as ac
    print(step_peak_bytes(ac, lambda: train_step(images[:8], labels[:8]),
                          lambda: train_step(images[:TRAIN_BATCH], labels[:TRAIN_BATCH])))


# ---- the driver ---------------------------------------------------------------------

def worker_env():
    """NumPy's own BLAS threads take no part in the work measured here: keep them off the cores."""
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def measure_throughput(frameworks, configs, repeats, seconds):
    commands = {fw: spawn(__file__, "--throughput-worker", fw) for fw in frameworks}
    return measure_interleaved(commands, configs, repeats, seconds, pause=PAUSE_SECONDS,
                               env=worker_env())


def measure_memory(framework, mode, steps):
    out = subprocess.run(spawn(__file__, "--memory-worker", framework, mode, steps), check=True,
                         capture_output=True, text=True, env=worker_env()).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_rss"]


def measure_step_peak(scope):
    out = subprocess.run(spawn(__file__, "--step-peak-worker", scope), check=True,
                         capture_output=True, text=True, env=worker_env()).stdout
    peak = out.strip().splitlines()[-1]
    return None if peak == "None" else int(peak)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts, comma separated")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per measurement")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one timed run")
    parser.add_argument("--memory-steps", type=int, nargs=2, default=(200, 50),
                        metavar=("TRAIN", "INFER"))
    parser.add_argument("--throughput-worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--memory-worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--step-peak-worker", choices=SCOPES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.throughput_worker:
        return throughput_worker(args.throughput_worker)
    if args.memory_worker:
        fw, mode, steps = args.memory_worker
        return memory_worker(fw, mode, int(steps))
    if args.step_peak_worker:
        return step_peak_worker(args.step_peak_worker)

    version = torch_version()
    frameworks = FRAMEWORKS if version else ("aicraft",)
    if not version:
        print("PyTorch is not installed (pip install torch==2.13.0): aicraft's numbers only\n")
    threads = [int(t) for t in args.threads.split(",")]
    configs = [(mode, t) for mode in ("train", "infer") for t in threads]
    speed = measure_throughput(frameworks, configs, args.repeats, args.seconds)
    peak = {(fw, mode): measure_memory(fw, mode, steps) / (1 << 20) for fw in frameworks
            for mode, steps in zip(("train", "infer"), args.memory_steps)}
    step_peak = {scope: measure_step_peak(scope) for scope in SCOPES}

    _, _, data = load_data()
    print(host_line())
    print("MNIST CNN (2 conv, 2 linear), Adam 1e-3; aicraft vs PyTorch %s on the CPU"
          % (version or "-"))
    print("data: %s; %d interleaved runs of %gs, medians\n" % (data, args.repeats, args.seconds))
    row = "%-44s %10s %10s %8s   %s"
    print(row % ("", "aicraft", "PyTorch", "ratio", "target"))
    result = {"bench": "cnn", **host(), "data": data, "torch": version, "repeats": args.repeats,
              "train_samples_per_s": {}, "infer_samples_per_s": {}, "peak_rss_mb": {},
              "step_peak_mb": {}}
    for mode, t in configs:
        ours, theirs = speed[("aicraft", mode, t)], speed.get(("torch", mode, t))
        if mode == "train":
            label, key = "train samples/s, batch %d, %d thread%s", "train_samples_per_s"
            label %= (TRAIN_BATCH, t, "s" * (t > 1))
        else:
            label, key = "inference samples/s, batch %d, %d thread%s", "infer_samples_per_s"
            label %= (INFER_BATCH, t, "s" * (t > 1))
        print(row % (label, "%.0f" % ours, "%.0f" % theirs if theirs else "-",
                     "%.2fx" % (ours / theirs) if theirs else "", "ratio >= 1.0"))
        result[key]["threads%d" % t] = {"aicraft": round(ours), "torch": theirs and round(theirs),
                                        "ratio": theirs and round(ours / theirs, 3)}
    train_steps, infer_steps = args.memory_steps
    for mode, label in (("train", "peak RSS (MB), %d training steps" % train_steps),
                        ("infer", "peak RSS (MB), %d inference batches" % infer_steps)):
        ours, theirs = peak[("aicraft", mode)], peak.get(("torch", mode))
        print(row % (label, "%.1f" % ours, "%.1f" % theirs if theirs else "-",
                     "%.3f" % (ours / theirs) if theirs else "", "ratio <= 0.25"))
        result["peak_rss_mb"][mode] = {fw: round(peak[(fw, mode)], 1) for fw in frameworks}
    print("peak bytes_in_use of one training step (MB), batch %d:" % TRAIN_BATCH)
    for scope in SCOPES:
        value = step_peak[scope]
        print(row % ("  at root" if scope == "root" else "  in ac.checkpoint()",
                     "%.2f" % (value / (1 << 20)) if value is not None else "-", "-", "", ""))
        result["step_peak_mb"][scope] = value and round(value / (1 << 20), 3)
    print()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
