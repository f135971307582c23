"""mlp.py - training the MNIST MLP (784-128-10, ReLU, Adam 1e-3, cross entropy)
with aicraft and with PyTorch on the CPU: speed, memory and import time.

    python bench/mlp.py                      # threads 1 and 2, batches 32 and 128
    python bench/mlp.py --repeats 3 --seconds 0.5 --threads 1

Measured, each framework in processes of its own:
  * training samples/s per batch size and thread count: two long-lived worker
    processes take turns (runs interleaved, the order alternating), median of
    --repeats runs;
  * peak RSS of a fresh process that imports the framework and trains 500
    steps at batch 64 from uint8 data, and how much its RSS grows between
    step 500 and step 5,000;
  * import time (median over fresh processes).
The data: the first 10,000 MNIST training images when data/MNIST/raw holds
them (demos/mnist_mlp.py downloads them), else 10,000 synthetic uint8 images
of 10 noisy prototypes. Both frameworks read the same uint8 arrays and
convert each batch to float the same way, (x / 255 - 0.1307) / 0.3081.

Prints a table, then one JSON line. PyTorch: `pip install torch==2.13.0`.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MNIST_RAW = os.path.join(ROOT, "data", "MNIST", "raw")
SAMPLES = 10000
FRAMEWORKS = ("aicraft", "torch")


# ---- the work each worker process does ------------------------------------------

def load_data():
    """(images uint8 (SAMPLES, 784), labels uint8 (SAMPLES,), description)."""
    import numpy as np
    images_path = os.path.join(MNIST_RAW, "train-images-idx3-ubyte")
    labels_path = os.path.join(MNIST_RAW, "train-labels-idx1-ubyte")
    if os.path.exists(images_path) and os.path.exists(labels_path):
        images = np.fromfile(images_path, np.uint8, count=SAMPLES * 784, offset=16)
        labels = np.fromfile(labels_path, np.uint8, count=SAMPLES, offset=8)
        return images.reshape(SAMPLES, 784), labels, "MNIST (first %d training images)" % SAMPLES
    rng = np.random.default_rng(0)
    prototypes = rng.integers(0, 256, (10, 784))
    labels = rng.integers(0, 10, SAMPLES).astype(np.uint8)
    noisy = prototypes[labels] + rng.normal(0, 48, (SAMPLES, 784))
    images = np.clip(noisy, 0, 255).astype(np.uint8)
    return images, labels, "synthetic (%d noisy uint8 images of 10 prototypes)" % SAMPLES


def make_trainer(framework, threads):
    """A function step(images_u8, labels_u8) doing one training step, and set_threads(n)."""
    if framework == "aicraft":
        sys.path.insert(0, ROOT)
        import aicraft as ac
        from aicraft import nn, optim
        ac.set_num_threads(threads)
        ac.manual_seed(0)
        model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        optimizer = optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()

        def step(images, labels):
            with ac.checkpoint():
                x = (ac.from_numpy(images) * (1 / 255) - 0.1307) * (1 / 0.3081)
                loss = loss_fn(model(x), ac.from_numpy(labels))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        return step, ac.set_num_threads

    import torch
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(images, labels):
        x = torch.from_numpy(images).float().mul_(1 / 255).sub_(0.1307).mul_(1 / 0.3081)
        loss = loss_fn(model(x), torch.from_numpy(labels).long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step, torch.set_num_threads


class Batches:
    """Consecutive batches of the data, wrapping around."""

    def __init__(self, images, labels, batch):
        self.images, self.labels, self.batch, self.start = images, labels, batch, 0

    def next(self):
        if self.start + self.batch > len(self.images):
            self.start = 0
        s, self.start = self.start, self.start + self.batch
        return self.images[s:s + self.batch], self.labels[s:s + self.batch]


def throughput_worker(framework):
    """Answer lines "batch threads seconds" with the samples/s of a run that long."""
    images, labels, _ = load_data()
    step, set_threads = make_trainer(framework, 1)
    print("ready", flush=True)
    for line in sys.stdin:
        batch, threads, seconds = line.split()
        batch, threads, seconds = int(batch), int(threads), float(seconds)
        set_threads(threads)
        batches = Batches(images, labels, batch)
        for _ in range(20):
            step(*batches.next())
        steps, start = 0, time.perf_counter()
        while True:
            step(*batches.next())
            steps += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds and steps >= 20:
                break
        print(steps * batch / elapsed, flush=True)


def current_rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_worker(framework, steps, more_steps):
    """Import, train `steps` steps at batch 64, note peak and current RSS, train on
    to `more_steps`, note RSS again; print them as JSON."""
    import resource
    images, labels, _ = load_data()
    step, _ = make_trainer(framework, 1)
    batches = Batches(images, labels, 64)
    for _ in range(steps):
        step(*batches.next())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    rss_at_steps = current_rss()
    for _ in range(more_steps - steps):
        step(*batches.next())
    print(json.dumps({"peak_rss": peak, "rss_first": rss_at_steps, "rss_last": current_rss()}))


# ---- the driver ---------------------------------------------------------------------

def spawn(*args):
    return [sys.executable, os.path.abspath(__file__)] + [str(a) for a in args]


def import_seconds(framework):
    code = ("import sys, time; sys.path.insert(0, %r); t = time.perf_counter(); import %s; "
            "print(time.perf_counter() - t)" % (ROOT, framework))
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout)


def measure_throughput(frameworks, configs, repeats, seconds):
    workers = {}
    for fw in frameworks:
        workers[fw] = subprocess.Popen(spawn("--throughput-worker", fw), stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
        if workers[fw].stdout.readline().strip() != "ready":
            raise RuntimeError("the %s worker did not start" % fw)
    runs = {(fw, batch, threads): [] for fw in frameworks for batch, threads in configs}
    for rep in range(repeats):
        for batch, threads in configs:
            order = frameworks if rep % 2 == 0 else frameworks[::-1]
            for fw in order:
                workers[fw].stdin.write("%d %d %g\n" % (batch, threads, seconds))
                workers[fw].stdin.flush()
                runs[(fw, batch, threads)].append(float(workers[fw].stdout.readline()))
    for worker in workers.values():
        worker.stdin.close()
        worker.wait()
    return {key: statistics.median(values) for key, values in runs.items()}


def measure_memory(framework, steps, more_steps):
    out = subprocess.run(spawn("--memory-worker", framework, steps, more_steps), check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def torch_version():
    try:
        import importlib.metadata
        return importlib.metadata.version("torch")
    except Exception:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts, comma separated")
    parser.add_argument("--batches", default="32,128", help="batch sizes, comma separated")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per measurement")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one timed run")
    parser.add_argument("--memory-steps", type=int, nargs=2, default=(500, 5000), metavar=("FIRST", "LAST"))
    parser.add_argument("--throughput-worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--memory-worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.throughput_worker:
        return throughput_worker(args.throughput_worker)
    if args.memory_worker:
        fw, steps, more = args.memory_worker
        return memory_worker(fw, int(steps), int(more))

    version = torch_version()
    frameworks = FRAMEWORKS if version else ("aicraft",)
    if not version:
        print("PyTorch is not installed (pip install torch==2.13.0): aicraft's numbers only\n")
    configs = [(int(b), int(t)) for t in args.threads.split(",") for b in args.batches.split(",")]
    speed = measure_throughput(frameworks, configs, args.repeats, args.seconds)
    first, last = args.memory_steps
    memory = {fw: measure_memory(fw, first, last) for fw in frameworks}
    imports = {fw: [] for fw in frameworks}
    for rep in range(max(args.repeats, 3)):
        for fw in (frameworks if rep % 2 == 0 else frameworks[::-1]):
            imports[fw].append(import_seconds(fw))
    import_time = {fw: statistics.median(v) for fw, v in imports.items()}

    _, _, data = load_data()
    print("MLP 784-128-10, Adam 1e-3, cross entropy; aicraft vs PyTorch %s on the CPU" % (version or "-"))
    print("data: %s; %d interleaved runs of %gs, medians\n" % (data, args.repeats, args.seconds))
    row = "%-40s %12s %12s %8s   %s"
    print(row % ("", "aicraft", "PyTorch", "ratio", "target"))

    def add_row(label, ours, theirs, fmt, ratio_fmt, target):
        other = fmt % theirs if theirs is not None else "-"
        ratio = ratio_fmt % (ours / theirs) if theirs and ratio_fmt else ""
        print(row % (label, fmt % ours, other, ratio, target))

    targets = {32: "ratio >= 1.5", 128: "ratio >= 1.2"}
    result = {"bench": "mlp", "data": data, "torch": version, "repeats": args.repeats,
              "train_samples_per_s": {}, "peak_rss_mb": {}, "rss_growth_mb": {}, "import_ms": {}}
    for batch, threads in configs:
        ours, theirs = speed[("aicraft", batch, threads)], speed.get(("torch", batch, threads))
        add_row("train samples/s, batch %d, %d thread%s" % (batch, threads, "s" * (threads > 1)),
                ours, theirs, "%.0f", "%.2fx", targets.get(batch, ""))
        result["train_samples_per_s"]["batch%d_threads%d" % (batch, threads)] = {
            "aicraft": round(ours), "torch": theirs and round(theirs),
            "ratio": theirs and round(ours / theirs, 3)}
    mb = 1 << 20
    peak = {fw: memory[fw]["peak_rss"] / mb for fw in frameworks}
    growth = {fw: (memory[fw]["rss_last"] - memory[fw]["rss_first"]) / mb for fw in frameworks}
    add_row("peak RSS (MB), %d steps at batch 64" % first, peak["aicraft"], peak.get("torch"),
            "%.1f", "%.3f", "ratio <= 0.25")
    add_row("RSS growth (MB), step %d -> %d" % (first, last), growth["aicraft"], growth.get("torch"),
            "%.2f", None, "aicraft < 1 MB")
    add_row("import time (ms)", 1000 * import_time["aicraft"],
            1000 * import_time["torch"] if "torch" in import_time else None, "%.0f", "%.3f", "")
    for fw in frameworks:
        result["peak_rss_mb"][fw] = round(peak[fw], 1)
        result["rss_growth_mb"][fw] = round(growth[fw], 3)
        result["import_ms"][fw] = round(1000 * import_time[fw], 1)
    print()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
