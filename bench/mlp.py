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
  * import time (median over fresh processes);
  * aicraft only: the peak of libac's bytes_in_use during one training step
    at batch 128, above what was in use before it, with the step at root (as
    a PyTorch script runs it) and inside `with ac.checkpoint():`, each in a
    fresh process.
The data: the first 10,000 MNIST training images when data/MNIST/raw holds
them (demos/mnist_mlp.py downloads them), else 10,000 synthetic uint8 images
of 10 noisy prototypes. Both frameworks read the same uint8 arrays and
convert each batch to float the same way, (x / 255 - 0.1307) / 0.3081.

Prints a table, then one JSON line. PyTorch: `pip install torch==2.13.0`.
"""
import argparse
import json
import statistics
import subprocess
import sys

from common import (ROOT, Batches, current_rss, host, host_line, load_mnist_uint8, measure_interleaved,
                    peak_rss, spawn, step_peak_bytes, step_scope, timed_steps, torch_version)

FRAMEWORKS = ("aicraft", "torch")
SCOPES = ("root", "checkpoint")


# ---- the work each worker process does ------------------------------------------

def make_trainer(framework, threads, scoped=True):
    """A function step(images_u8, labels_u8) doing one training step (aicraft's in
    ac.checkpoint() when scoped, else at root), and set_threads(n)."""
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
            with step_scope(ac, scoped):
                x = (ac.from_numpy(images).float() * (1 / 255) - 0.1307) * (1 / 0.3081)
                loss = loss_fn(model(x), ac.from_numpy(labels).long())
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


def throughput_worker(framework):
    """Answer lines "batch threads seconds" with the samples/s of a run that long."""
    images, labels, _ = load_mnist_uint8()
    step, set_threads = make_trainer(framework, 1)
    print("ready", flush=True)
    for line in sys.stdin:
        batch, threads, seconds = line.split()
        batch, threads, seconds = int(batch), int(threads), float(seconds)
        set_threads(threads)
        batches = Batches(images, labels, batch)
        steps, elapsed = timed_steps(lambda: step(*batches.next()), seconds, 20, 20)
        print(steps * batch / elapsed, flush=True)


def memory_worker(framework, steps, more_steps):
    """Import, train `steps` steps at batch 64, note peak and current RSS, train on
    to `more_steps`, note RSS again; print them as JSON."""
    images, labels, _ = load_mnist_uint8()
    step, _ = make_trainer(framework, 1)
    batches = Batches(images, labels, 64)
    for _ in range(steps):
        step(*batches.next())
    peak = peak_rss()
    rss_at_steps = current_rss()
    for _ in range(more_steps - steps):
        step(*batches.next())
    print(json.dumps({"peak_rss": peak, "rss_first": rss_at_steps, "rss_last": current_rss()}))


def step_peak_worker(scope):
    """Print the peak bytes of one aicraft training step at batch 128, at root or in a checkpoint."""
    images, labels, _ = load_mnist_uint8()
    step, _ = make_trainer("aicraft", 1, scoped=scope == "checkpoint")
    import aicraft as ac
    print(step_peak_bytes(ac, lambda: step(images[:8], labels[:8]), lambda: step(images[:128], labels[:128])))


# ---- the driver ---------------------------------------------------------------------

def import_seconds(framework):
    code = ("import sys, time; sys.path.insert(0, %r); t = time.perf_counter(); import %s; "
            "print(time.perf_counter() - t)" % (ROOT, framework))
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout)


def measure_throughput(frameworks, configs, repeats, seconds):
    commands = {fw: spawn(__file__, "--throughput-worker", fw) for fw in frameworks}
    return measure_interleaved(commands, configs, repeats, seconds)


def measure_memory(framework, steps, more_steps):
    out = subprocess.run(spawn(__file__, "--memory-worker", framework, steps, more_steps), check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure_step_peak(scope):
    out = subprocess.run(spawn(__file__, "--step-peak-worker", scope), check=True,
                         capture_output=True, text=True).stdout
    peak = out.strip().splitlines()[-1]
    return None if peak == "None" else int(peak)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts, comma separated")
    parser.add_argument("--batches", default="32,128", help="batch sizes, comma separated")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per measurement")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one timed run")
    parser.add_argument("--memory-steps", type=int, nargs=2, default=(500, 5000), metavar=("FIRST", "LAST"))
    parser.add_argument("--throughput-worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--memory-worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--step-peak-worker", choices=SCOPES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.throughput_worker:
        return throughput_worker(args.throughput_worker)
    if args.memory_worker:
        fw, steps, more = args.memory_worker
        return memory_worker(fw, int(steps), int(more))
    if args.step_peak_worker:
        return step_peak_worker(args.step_peak_worker)

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
    step_peak = {scope: measure_step_peak(scope) for scope in SCOPES}

    _, _, data = load_mnist_uint8()
    print(host_line())
    print("MLP 784-128-10, Adam 1e-3, cross entropy; aicraft vs PyTorch %s on the CPU" % (version or "-"))
    print("data: %s; %d interleaved runs of %gs, medians\n" % (data, args.repeats, args.seconds))
    row = "%-40s %12s %12s %8s   %s"
    print(row % ("", "aicraft", "PyTorch", "ratio", "target"))

    def add_row(label, ours, theirs, fmt, ratio_fmt, target):
        other = fmt % theirs if theirs is not None else "-"
        ratio = ratio_fmt % (ours / theirs) if theirs and ratio_fmt else ""
        print(row % (label, fmt % ours, other, ratio, target))

    targets = {32: "ratio >= 1.5", 128: "ratio >= 1.2"}
    result = {"bench": "mlp", **host(), "data": data, "torch": version, "repeats": args.repeats,
              "train_samples_per_s": {}, "peak_rss_mb": {}, "rss_growth_mb": {}, "import_ms": {},
              "step_peak_mb": {}}
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
    print("peak bytes_in_use of one training step (MB), batch 128:")
    for scope in SCOPES:
        value = step_peak[scope]
        print(row % ("  at root" if scope == "root" else "  in ac.checkpoint()",
                     "%.2f" % (value / mb) if value is not None else "-", "-", "", ""))
        result["step_peak_mb"][scope] = value and round(value / mb, 3)
    for fw in frameworks:
        result["peak_rss_mb"][fw] = round(peak[fw], 1)
        result["rss_growth_mb"][fw] = round(growth[fw], 3)
        result["import_ms"][fw] = round(1000 * import_time[fw], 1)
    print()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
