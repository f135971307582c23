"""cuda.py - training on the GPU: aicraft against PyTorch eager (and
torch.compile(mode="reduce-overhead") where it works), steps/s and device memory.

    python bench/cuda.py                     # MLP at batch 64 and 1024, CNN at 64 and 512
    python bench/cuda.py --seconds 2 --repeats 5

Models: the MNIST MLP (784-128-10, ReLU, Adam 1e-3, cross entropy) and the demo CNN
(demos/mnist_cnn.py: two conv-ReLU-maxpool blocks, 128 hidden, dropout 0.25). Each
step converts a uint8 batch to float on the host, moves it to the device, normalises
it there, and runs forward, backward and Adam; aicraft's step runs inside `with ac.checkpoint():`.
Runs alternate between the frameworks, --repeats times each, for --seconds each
after a warm-up; the GPU is synchronised before the clock stops, and the median is
reported. Each case runs in a process of its own. Device memory: the peak allocated
by the framework in that process (aicraft: libac's device_peak_bytes; PyTorch:
torch.cuda.max_memory_allocated), above what was in use before the model was made.

Without a GPU it says so and exits with status 1. Prints a table, then one JSON line.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, Batches, load_mnist_uint8, torch_version  # noqa: E402

sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "demos"))

CASES = [("mlp", 64), ("mlp", 1024), ("cnn", 64), ("cnn", 512)]


def aicraft_trainer(model_name, batch):
    """step(images_u8, labels_u8) training the model on cuda:0, and its peak device bytes."""
    import aicraft as ac
    from aicraft import nn, optim
    ac.manual_seed(0)
    base = ac.memory_stats()["device_bytes_in_use"]
    if model_name == "mlp":
        model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        from mnist_cnn import make_model
        model = make_model()
    model.to("cuda")
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    shape = (batch, 784) if model_name == "mlp" else (batch, 1, 28, 28)

    def step(images, labels):
        with ac.checkpoint():
            x = ac.from_numpy(images).float().to("cuda").reshape(shape)   # dtypes convert on the CPU
            x = (x * (1 / 255) - 0.1307) * (1 / 0.3081)
            loss = loss_fn(model(x), ac.from_numpy(labels).long().to("cuda"))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    return step, ac.cuda.synchronize, lambda: ac.memory_stats()["device_peak_bytes"] - base


def torch_trainer(model_name, batch, compiled):
    import torch
    from torch import nn
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    if model_name == "mlp":
        model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
    model.to("cuda")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    shape = (batch, 784) if model_name == "mlp" else (batch, 1, 28, 28)

    def train(x, y):
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    work = torch.compile(train, mode="reduce-overhead") if compiled else train

    def step(images, labels):
        x = torch.from_numpy(images).float().to("cuda").reshape(shape)   # as aicraft's step does
        x = (x * (1 / 255) - 0.1307) * (1 / 0.3081)
        work(x, torch.from_numpy(labels).long().to("cuda"))

    return step, torch.cuda.synchronize, lambda: torch.cuda.max_memory_allocated() - base


def timed(step, sync, batches, seconds, warmup):
    """Steps per second: warmup steps, then steps for at least `seconds`, the GPU
    synchronised before each clock reading."""
    for _ in range(warmup):
        step(*batches.next())
    sync()
    steps, start = 0, time.perf_counter()
    while True:
        step(*batches.next())
        steps += 1
        if steps % 10 == 0:
            sync()
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return steps / elapsed


def run_case(model_name, batch, frameworks, args):
    """The rows of one model and batch, frameworks interleaved --repeats times."""
    images, labels, _ = load_mnist_uint8()
    trainers, speeds, errors, rows = {}, {f: [] for f in frameworks}, {}, []
    for f in frameworks:
        try:
            trainers[f] = aicraft_trainer(model_name, batch) if f == "aicraft" else \
                torch_trainer(model_name, batch, f == "torch.compile")
            trainers[f][0](*Batches(images, labels, batch).next())   # fails here if an op cannot run
        except Exception as exc:   # a missing CUDA kernel, or torch.compile not working here
            errors[f] = "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0][:100])
            trainers.pop(f, None)
    for _ in range(args.repeats):   # interleaved, so drift in clocks hits every framework alike
        for f, (step, sync, _) in trainers.items():
            speeds[f].append(timed(step, sync, Batches(images, labels, batch), args.seconds, args.warmup))
    for f in frameworks:
        row = {"model": model_name, "batch": batch, "framework": f}
        if f in trainers:
            row["steps_per_s"] = statistics.median(speeds[f])
            row["peak_device_bytes"] = trainers[f][2]()
        else:
            row["error"] = errors[f]
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--case", nargs=2, metavar=("MODEL", "BATCH"),
                        help="run one case in this process and print its rows as JSON (used by the driver)")
    args = parser.parse_args()

    import aicraft as ac
    if not ac.cuda.is_available():
        from aicraft._ffi import ffi, lib
        lib.ac_cuda_device_count()
        sys.exit("bench/cuda.py: no CUDA device to run on (%s)" % ffi.string(lib.ac_last_error()).decode())
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    frameworks = ["aicraft"] + (["torch", "torch.compile"] if has_torch else [])
    if args.case:
        print(json.dumps(run_case(args.case[0], int(args.case[1]), frameworks, args)))
        return
    rows = []
    for model_name, batch in CASES:   # a process each: peak device memory is per case
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", model_name, str(batch),
                              "--seconds", str(args.seconds), "--repeats", str(args.repeats),
                              "--warmup", str(args.warmup)], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit("bench/cuda.py: the %s case at batch %d failed:\n%s" % (model_name, batch, out.stderr[-2000:]))
        rows.extend(json.loads(out.stdout.strip().splitlines()[-1]))

    device = torch.cuda.get_device_name(0) if has_torch else "cuda:0"
    print("GPU: %s; data: %s; torch %s" % (device, load_mnist_uint8()[2], torch_version()))
    print("%-5s %6s  %-14s %12s %10s %14s" % ("model", "batch", "framework", "steps/s", "vs torch", "peak dev MB"))
    eager = {(r["model"], r["batch"]): r.get("steps_per_s") for r in rows if r["framework"] == "torch"}
    for r in rows:
        if "error" in r:
            print("%-5s %6d  %-14s  %s" % (r["model"], r["batch"], r["framework"], r["error"]))
            continue
        base = eager.get((r["model"], r["batch"]))
        ratio = "%.2fx" % (r["steps_per_s"] / base) if base else "-"
        print("%-5s %6d  %-14s %12.1f %10s %14.1f" % (r["model"], r["batch"], r["framework"], r["steps_per_s"],
                                                    ratio, r["peak_device_bytes"] / 2 ** 20))
    print(json.dumps({"bench": "cuda", "gpu": device, "rows": rows}))


if __name__ == "__main__":
    main()
