"""quant.py - INT8 inference: aicraft float32, aicraft int8 (ac.quantization.quantize_dynamic),
PyTorch float32 and PyTorch's torch.ao.quantization.quantize_dynamic, on the MNIST MLPs
784-128-10 and 784-512-512-10 and the sequence demo's LSTM (demos/sunspots_lstm.py).

    python bench/quant.py                         # about 3 minutes
    python bench/quant.py --rounds 5 --seconds 0.2 --threads 1 --no-serve

For each model, in one process: weight bytes; MNIST test accuracy (the LSTM: MSE on
the demo's held-out years), and how often the quantized model's argmax agrees with
its float32 model's; latency of one forward pass at batch 1 and 64 (the LSTM: 1 and
64 windows of 24 years), each variant timed for --seconds per round, the variants
interleaved (the order alternating) over --rounds rounds, medians. aicraft runs under
ac.no_grad() inside ac.checkpoint() (as demos/serve.py does), PyTorch under
torch.inference_mode(), both with --threads threads. The models are trained here with
aicraft (MLPs: --epochs of Adam 1e-3, batch 64; the LSTM as the demo trains it), and
PyTorch gets the same weights.

Then, unless --no-serve: the resident memory of a demos/serve.py worker (gunicorn,
1 worker) after 20 predictions of 64 rows, serving a float32 and an int8 file, for
the demo's 784-128-10 MLP and for an MLP 784-2048-2048-10 (random weights) whose
weights outweigh the interpreter.

MNIST is fetched into --data on first use, as the demos do. Prints tables, then one
JSON line. PyTorch: `pip install torch==2.13.0`.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings

import numpy as np

from common import ROOT, host, host_line, torch_version

sys.path.insert(0, ROOT)
import aicraft as ac  # noqa: E402
from aicraft import nn, optim  # noqa: E402
from aicraft._ffi import ffi, lib  # noqa: E402

VARIANTS = ("aicraft float32", "aicraft int8", "torch float32", "torch qint8")
FLOAT_OF = {"aicraft int8": "aicraft float32", "torch qint8": "torch float32"}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.2, help="per variant and round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=2, help="MLP training epochs")
    parser.add_argument("--data", default=os.path.join(ROOT, "data"))
    parser.add_argument("--no-serve", action="store_true", help="skip the service's RSS")
    return parser.parse_args()


# ---- models -------------------------------------------------------------------------

def normalise(images):
    return ((images.reshape(len(images), 784).astype(np.float32) / np.float32(255) - np.float32(0.1307))
            / np.float32(0.3081))


def train_mlp(widths, train_x, train_y, epochs):
    """An aicraft MLP with these widths, trained with Adam on the training set."""
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    for _ in range(epochs):
        order = rng.permutation(len(train_x))
        for start in range(0, len(order), 64):
            rows = order[start:start + 64]
            with ac.checkpoint():
                loss = loss_fn(model(ac.from_numpy(train_x[rows])), ac.from_numpy(train_y[rows]))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    return model


def torch_mlp(torch, widths, state):
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    model.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in state.items()})
    return model.eval()


def train_forecaster(data):
    """The sequence demo's model trained as the demo trains it, and its test windows."""
    from demos.sunspots_lstm import Forecaster, fetch_sunspots, make_windows
    window, test, epochs = 24, 60, 200
    ac.manual_seed(0)
    _, spots = fetch_sunspots(data)
    scale = spots[:-test].max()
    series = spots / scale
    first_test = len(series) - test
    train_x, train_y = make_windows(series, window, np.arange(window, first_test))
    test_x, test_y = make_windows(series, window, np.arange(first_test, len(series)))
    model = Forecaster(32)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()
    xt, yt = ac.tensor(train_x), ac.tensor(train_y)
    for _ in range(epochs):
        with ac.checkpoint():
            loss = loss_fn(model(xt), yt)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model, test_x, test_y, scale


def torch_forecaster(torch, state):
    class Forecaster(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(1, 32, batch_first=True)
            self.head = torch.nn.Linear(32, 1)

        def forward(self, x):
            _, (h_n, _) = self.lstm(x)
            return self.head(h_n[-1])

    model = Forecaster()
    model.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in state.items()})
    return model.eval()


# ---- what is measured ------------------------------------------------------------------

def aicraft_run(model):
    def run(x):
        with ac.no_grad(), ac.checkpoint():
            return model(x).numpy()
    return run


def torch_run(torch, model):
    def run(x):
        with torch.inference_mode():
            return model(x).numpy()
    return run


def torch_weight_bytes(torch, model):
    """Parameters, and for quantized layers their int8 weights (+ scale and zero point) and biases."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for module in model.modules():
        packed = []
        if isinstance(module, torch.ao.nn.quantized.dynamic.Linear):
            packed = [module.weight(), module.bias()]
        elif isinstance(module, torch.ao.nn.quantized.dynamic.LSTM):
            wb = module._weight_bias()
            packed = list(wb["weight"].values()) + list(wb["bias"].values())
        for t in packed:
            if t is not None:
                total += t.numel() * t.element_size() + (8 if t.is_quantized else 0)
    return total


def latencies(runs, inputs, rounds, seconds):
    """Median seconds per call of each runs[name](inputs[name][batch]), interleaved."""
    names = list(runs)
    times = {(name, batch): [] for name in names for batch in inputs[names[0]]}
    for name in names:                      # warm up: first calls allocate, caches fill
        for batch, x in inputs[name].items():
            for _ in range(5):
                runs[name](x)
    for r in range(rounds):
        for batch in inputs[names[0]]:
            for name in (names if r % 2 == 0 else names[::-1]):
                run, x, calls = runs[name], inputs[name][batch], 0
                start = time.perf_counter()
                while True:
                    run(x)
                    calls += 1
                    elapsed = time.perf_counter() - start
                    if elapsed >= seconds and calls >= 3:
                        break
                times[name, batch].append(elapsed / calls)
    return {key: statistics.median(values) for key, values in times.items()}


def bench_model(label, variants, bytes_, inputs, metric, args):
    """Measure one model; print its table; return its numbers."""
    lat = latencies(variants, inputs, args.rounds, args.seconds)
    print("\n%s" % label)
    print("  %-16s %12s %9s %14s %14s" % ("", "weight bytes", "ratio", "latency b=1", "latency b=64"))
    result = {}
    for name in variants:
        b1, b64 = lat[name, 1], lat[name, 64]
        print("  %-16s %12d %8.3fx %11.1f us %11.1f us" % (name, bytes_[name], bytes_[name] / bytes_[VARIANTS[0]],
                                                             b1 * 1e6, b64 * 1e6))
        result[name] = {"weight_bytes": bytes_[name], "latency_b1_us": b1 * 1e6, "latency_b64_us": b64 * 1e6}
    for line in metric(result):
        print("  " + line)
    q, f = result["aicraft int8"], result["aicraft float32"]
    print("  aicraft int8 / float32: weight bytes %.3fx, batch 1 %.2fx, batch 64 %.2fx"
          % (q["weight_bytes"] / f["weight_bytes"], q["latency_b1_us"] / f["latency_b1_us"],
             q["latency_b64_us"] / f["latency_b64_us"]))
    if "torch qint8" in result:
        t = result["torch qint8"]
        print("  aicraft int8 / torch qint8: batch 1 %.2fx, batch 64 %.2fx"
              % (q["latency_b1_us"] / t["latency_b1_us"], q["latency_b64_us"] / t["latency_b64_us"]))
    return result


def mnist_models(torch, args):
    from aicraft.data.datasets import MNIST
    train, test = MNIST(args.data, train=True, download=True), MNIST(args.data, train=False)
    train_x, train_y = normalise(train.images), train.labels.astype(np.int64)
    test_x, test_y = normalise(test.images), test.labels.astype(np.int64)
    results = {}
    for widths in ((784, 128, 10), (784, 512, 512, 10)):
        ac.manual_seed(0)
        model = train_mlp(widths, train_x, train_y, args.epochs)
        qmodel = ac.quantization.quantize_dynamic(model, {nn.Linear}, dtype=ac.qint8)
        variants = {VARIANTS[0]: aicraft_run(model), VARIANTS[1]: aicraft_run(qmodel)}
        bytes_ = {VARIANTS[0]: ac.quantization.weight_bytes(model),
                  VARIANTS[1]: ac.quantization.weight_bytes(qmodel)}
        inputs = {name: {1: ac.tensor(test_x[:1]), 64: ac.tensor(test_x[:64])} for name in variants}
        if torch is not None:
            tmodel = torch_mlp(torch, widths, model.state_dict())
            tq = torch.ao.quantization.quantize_dynamic(tmodel, {torch.nn.Linear}, dtype=torch.qint8)
            variants[VARIANTS[2]], variants[VARIANTS[3]] = torch_run(torch, tmodel), torch_run(torch, tq)
            bytes_[VARIANTS[2]], bytes_[VARIANTS[3]] = torch_weight_bytes(torch, tmodel), torch_weight_bytes(torch, tq)
            for name in VARIANTS[2:]:
                inputs[name] = {1: torch.from_numpy(test_x[:1]), 64: torch.from_numpy(test_x[:64])}
        test_inputs = {name: ac.tensor(test_x) if name.startswith("aicraft") else torch.from_numpy(test_x)
                       for name in variants}
        predicted = {name: run(test_inputs[name]).argmax(1) for name, run in variants.items()}

        def metric(result, predicted=predicted):
            lines = []
            for name in variants:
                accuracy = float((predicted[name] == test_y).mean()) * 100
                result[name]["accuracy"] = accuracy
                float_name = FLOAT_OF.get(name, name)
                agree = float((predicted[name] == predicted[float_name]).mean()) * 100
                result[name]["argmax_agreement"] = agree
                lines.append("%-16s MNIST test accuracy %.2f%%, argmax agreement with float32 %.2f%%"
                             % (name, accuracy, agree))
            return lines

        label = "MLP %s (trained %d epochs)" % ("-".join(map(str, widths)), args.epochs)
        results["mlp_" + "_".join(map(str, widths))] = bench_model(label, variants, bytes_, inputs,
                                                                   metric, args)
    return results


def lstm_model(torch, args):
    model, test_x, test_y, scale = train_forecaster(args.data)
    qmodel = ac.quantization.quantize_dynamic(model, {nn.LSTM, nn.Linear}, dtype=ac.qint8)
    variants = {VARIANTS[0]: aicraft_run(model), VARIANTS[1]: aicraft_run(qmodel)}
    bytes_ = {VARIANTS[0]: ac.quantization.weight_bytes(model), VARIANTS[1]: ac.quantization.weight_bytes(qmodel)}
    batch64 = np.concatenate([test_x, test_x[:4]])
    inputs = {name: {1: ac.tensor(test_x[:1]), 64: ac.tensor(batch64)} for name in variants}
    if torch is not None:
        tmodel = torch_forecaster(torch, model.state_dict())
        tq = torch.ao.quantization.quantize_dynamic(tmodel, {torch.nn.LSTM, torch.nn.Linear}, dtype=torch.qint8)
        variants[VARIANTS[2]], variants[VARIANTS[3]] = torch_run(torch, tmodel), torch_run(torch, tq)
        bytes_[VARIANTS[2]], bytes_[VARIANTS[3]] = torch_weight_bytes(torch, tmodel), torch_weight_bytes(torch, tq)
        for name in VARIANTS[2:]:
            inputs[name] = {1: torch.from_numpy(test_x[:1]), 64: torch.from_numpy(batch64)}

    def metric(result):
        lines = []
        for name, run in variants.items():
            x = ac.tensor(test_x) if name.startswith("aicraft") else torch.from_numpy(test_x)
            mse = float(np.mean((run(x) - test_y) ** 2)) * scale ** 2
            result[name]["validation_mse"] = mse
            lines.append("%-16s validation MSE (held-out %d years) %.1f" % (name, len(test_x), mse))
        return lines

    return {"lstm_sunspots": bench_model("sequence demo LSTM(1, 32) + Linear(32, 1), windows of 24",
                                         variants, bytes_, inputs, metric, args)}


# ---- the service's resident memory ------------------------------------------------------

def worker_rss(weights, quantize):
    """(process_resident_memory_bytes, aicraft_weight_bytes) of a 1-worker demos/serve.py
    after 20 predictions of 64 rows."""
    port = 18000 + os.getpid() % 1000
    env = dict(os.environ, AICRAFT_WEIGHTS=weights, AC_NUM_THREADS="1",
               AICRAFT_QUANTIZE="1" if quantize else "0")
    env.pop("SERVE_BACKEND", None)
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "--no-control-socket", "--preload", "-w", "1",
                               "--threads", "4", "-b", "127.0.0.1:%d" % port, "demos.serve:app"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        body = json.dumps({"inputs": np.random.default_rng(0).random((64, 784)).round(3).tolist()}).encode()
        for _ in range(20):
            urllib.request.urlopen(urllib.request.Request(base + "/predict", body), timeout=30).read()
        text = urllib.request.urlopen(base + "/metrics", timeout=30).read().decode()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return int(values["process_resident_memory_bytes"]), int(values["aicraft_weight_bytes"])


def service_rss():
    try:
        import gunicorn  # noqa: F401
    except ImportError:
        print("\n(demos/serve.py's RSS skipped: gunicorn is not installed)")
        return {}
    results = {}
    print("\ndemos/serve.py worker RSS (gunicorn --preload -w 1, after 20 predictions of 64 rows)")
    with tempfile.TemporaryDirectory() as folder:
        for widths in ((784, 128, 10), (784, 2048, 2048, 10)):
            ac.manual_seed(0)
            layers = []
            for a, b in zip(widths, widths[1:]):
                layers += [nn.Linear(a, b), nn.ReLU()]
            model = nn.Sequential(*layers[:-1])
            float_path, int8_path = os.path.join(folder, "f32.safetensors"), os.path.join(folder, "i8.safetensors")
            ac.save(model.state_dict(), float_path)
            ac.save(ac.quantization.quantize_dynamic(model).state_dict(), int8_path)
            del model
            (f_rss, f_bytes), (q_rss, q_bytes) = worker_rss(float_path, False), worker_rss(int8_path, True)
            name = "-".join(map(str, widths))
            print("  MLP %-18s float32 %6.1f MB (weights %5.1f MB), int8 %6.1f MB (weights %5.1f MB): %.2fx"
                  % (name, f_rss / 1e6, f_bytes / 1e6, q_rss / 1e6, q_bytes / 1e6, q_rss / f_rss))
            results["serve_rss_mlp_" + name.replace("-", "_")] = {
                "float32_rss": f_rss, "int8_rss": q_rss, "ratio": q_rss / f_rss}
    return results


def main():
    args = parse_args()
    print(host_line())
    print("int8 kernels: %s; threads: %d" % (ffi.string(lib.ac_qlinear_kernels()).decode(), args.threads))
    ac.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=UserWarning)
        print("PyTorch %s" % torch_version())
    except ImportError:
        torch = None
        print("(PyTorch is not installed: its columns are left out)")
    results = {"host": host(), "int8_kernels": ffi.string(lib.ac_qlinear_kernels()).decode(),
               "threads": args.threads}
    results.update(mnist_models(torch, args))
    results.update(lstm_model(torch, args))
    if not args.no_serve:
        results.update(service_rss())
    print(json.dumps(results))


if __name__ == "__main__":
    main()
