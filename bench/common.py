"""common.py - what the benchmarks share: the host line every bench prints (CPU
model and SIMD path), the calls that make a timed batch, and for the training
benchmarks the MNIST images as uint8, batches over them, timed runs, RSS and
libac's peak bytes inside a worker process, and the driver that interleaves runs
of long-lived worker processes and takes medians."""
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MNIST_RAW = os.path.join(ROOT, "data", "MNIST", "raw")
SAMPLES = 10000


def host():
    """{"cpu": the CPU's model name, "simd": the instruction set libac's kernels run
    here}, so that numbers from different hosts are never compared by mistake."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().splitlines()
    except OSError:
        info = []
    fields = {}
    for line in info:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields:   # a VM may name only the brand: family and model tell Zen 3 from Zen 4
        model += " (family %s, model %s)" % (fields["cpu family"], fields.get("model", "?"))
    flags = set(fields.get("flags", "").split())
    # libac's rule (libac/src/kernels/cpu.c): AC_SIMD's set when the CPU can run it, else the best.
    can_run = {"avx512": "avx512f" in flags, "avx2": {"avx2", "fma"} <= flags, "generic": True}
    forced = os.environ.get("AC_SIMD")
    simd = forced if can_run.get(forced) else next(s for s in ("avx512", "avx2", "generic") if can_run[s])
    return {"cpu": model, "simd": simd}


def host_line():
    h = host()
    forced = " (AC_SIMD=%s)" % os.environ["AC_SIMD"] if os.environ.get("AC_SIMD") else ""
    return "CPU: %s; SIMD path: %s%s" % (h["cpu"], h["simd"], forced)


def load_mnist_uint8():
    """(images uint8 (SAMPLES, 784), labels uint8 (SAMPLES,), description): the first
    SAMPLES MNIST training images when data/MNIST/raw holds them, else synthetic
    noisy images of 10 prototypes."""
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
    images = np.empty((SAMPLES, 784), np.uint8)
    for start in range(0, SAMPLES, 500):   # in slices: the float64 noise would dwarf the peak RSS measured
        rows = labels[start:start + 500]
        noisy = prototypes[rows] + rng.normal(0, 48, (len(rows), 784))
        images[start:start + 500] = np.clip(noisy, 0, 255)
    return images, labels, "synthetic (%d noisy uint8 images of 10 prototypes)" % SAMPLES


class Batches:
    """Consecutive batches of the data, wrapping around."""

    def __init__(self, images, labels, batch):
        self.images, self.labels, self.batch, self.start = images, labels, batch, 0

    def next(self):
        if self.start + self.batch > len(self.images):
            self.start = 0
        s, self.start = self.start, self.start + self.batch
        return self.images[s:s + self.batch], self.labels[s:s + self.batch]


def calls_for(fn, seconds, most=1 << 16):
    """How many calls of fn make a timed batch: the least power of two that takes
    `seconds` (at most `most`)."""
    n = 1
    while timeit.timeit(fn, number=n) < seconds and n < most:
        n *= 2
    return n


def timed_steps(work, seconds, warmup, min_steps):
    """(steps, elapsed): `warmup` untimed calls of work(), then calls until at least
    `seconds` and `min_steps` calls have passed."""
    for _ in range(warmup):
        work()
    steps, start = 0, time.perf_counter()
    while True:
        work()
        steps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and steps >= min_steps:
            return steps, elapsed


def peak_rss():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def step_peak_bytes(ac, warm_up, step):
    """The peak of libac's bytes_in_use during step(), above the bytes in use
    before it. peak_bytes only grows, so it is compared around the step rather
    than reset: warm_up() (a step at a smaller batch, after which grads and
    optimizer state exist) must stay below the step's peak; None if it did not."""
    warm_up()
    before = ac.memory_stats()
    step()
    peak = ac.memory_stats()["peak_bytes"]
    return peak - before["bytes_in_use"] if peak > before["peak_bytes"] else None


def step_scope(ac, scoped):
    """The context a training step runs in: ac.checkpoint(), or none (at root)."""
    return ac.checkpoint() if scoped else contextlib.nullcontext()


def torch_version():
    try:
        import importlib.metadata
        return importlib.metadata.version("torch")
    except Exception:
        return None


def measure_interleaved(commands, configs, repeats, seconds, pause=0.0, env=None):
    """Median of `repeats` answers per (framework,) + config. commands maps each
    framework to the command line of a worker that prints "ready", then answers each
    line "config... seconds" with one number; the workers take turns, the order
    alternating between repeats, `pause` seconds before each turn."""
    frameworks = list(commands)
    workers = {}
    for fw in frameworks:
        workers[fw] = subprocess.Popen(commands[fw], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True, env=env)
        if workers[fw].stdout.readline().strip() != "ready":
            raise RuntimeError("the %s worker did not start" % fw)
    runs = {(fw,) + tuple(config): [] for fw in frameworks for config in configs}
    for rep in range(repeats):
        for config in configs:
            for fw in (frameworks if rep % 2 == 0 else frameworks[::-1]):
                if pause:
                    time.sleep(pause)
                request = " ".join(str(part) for part in config) + " %g\n" % seconds
                workers[fw].stdin.write(request)
                workers[fw].stdin.flush()
                runs[(fw,) + tuple(config)].append(float(workers[fw].stdout.readline()))
    for worker in workers.values():
        worker.stdin.close()
        worker.wait()
    return {key: statistics.median(values) for key, values in runs.items()}


def spawn(script, *args):
    """The command line running `script` again with `args`, in this Python."""
    return [sys.executable, os.path.abspath(script)] + [str(a) for a in args]
