"""bench/gemm.py - aicraft's SGEMM against NumPy's (OpenBLAS), measured in one run.

For square sizes and the shapes of an MNIST MLP's matmuls (forward, weight
gradient, input gradient), on 1 and 2 threads, it prints the GFLOP/s of each
library, their ratio, and aicraft's share of the machine's FMA peak, which a
small C loop (built with cc) measures. Calls alternate between the libraries
in batches, so a noisy machine slows both alike; each GFLOP/s cell is the
median call. The ratio is the median over rounds of each round's ratio (the
median call of aicraft's batch against that of NumPy's, run back to back): on
a host whose cores change speed from second to second, pairing batches that
ran moments apart keeps those swings out of the ratio.

    python bench/gemm.py [--rounds 15] [--quick]
    AC_SIMD=avx2 OPENBLAS_CORETYPE=Haswell python bench/gemm.py
    python bench/gemm.py --thread-cliff [--busy-core]

The second line compares the AVX2 paths of both libraries on a host with
AVX-512, as an AVX2-only host would run them; the table names the kernel each
library ran (OpenBLAS's core type, read from the library itself).

Prints a table, then one JSON line. NumPy's thread count is set with
threadpoolctl when it is installed, else by running one subprocess per
thread count with OPENBLAS_NUM_THREADS set. --thread-cliff instead compares
aicraft on 2 threads with aicraft on 1 (paired rounds, as above);
--busy-core keeps one core busy with a spinning process meanwhile, as
another program would.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from aicraft._ffi import ffi, lib  # noqa: E402
from common import host, host_line  # noqa: E402

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # fall back to one subprocess per thread count
    threadpool_limits = None

THREADS = (1, 2)
SQUARE = (64, 128, 256, 512, 1024, 2048)
# (name, trans_a, trans_b, m, n, k): batch 64, 784 inputs, 128 hidden units
MLP = (
    ("mlp fwd   64x784 . 784x128", 0, 0, 64, 128, 784),
    ("mlp dW    784x64T . 64x128", 1, 0, 784, 128, 64),
    ("mlp dX    64x128 . 128x784T", 0, 1, 64, 784, 128),
)
TARGETS = {"square n>=256": 0.95, "mlp": 1.0}
BATCH_SECONDS = 0.03   # time per batch of calls to one library
SETTLE_SECONDS = 0.2   # pause between batches with threads: OpenBLAS's idle threads
                       # spin for a while after a call, and would slow the next batch

PEAK_SOURCE = r"""
/* FMA throughput on vectors of argv[2] floats (16: AVX-512, 8: AVX2): each of argv[1] threads times
   many short bursts of independent FMAs; prints the sum of the threads' burst rates,
   each one's 90th percentile: this host slows its cores now and then, and the peak
   is what a core does while it is not slowed. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define BURSTS 101
#define ITERS 100000L
#define FMA10(f, T) a0 = f(x, y, a0); a1 = f(x, y, a1); a2 = f(x, y, a2); a3 = f(x, y, a3); \
    a4 = f(x, y, a4); a5 = f(x, y, a5); a6 = f(x, y, a6); a7 = f(x, y, a7); a8 = f(x, y, a8); \
    a9 = f(x, y, a9); __asm__ volatile("" : "+" T(a0), "+" T(a1), "+" T(a2), "+" T(a3), \
    "+" T(a4), "+" T(a5), "+" T(a6), "+" T(a7), "+" T(a8), "+" T(a9));
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
__attribute__((target("avx512f"))) static float burst512(void) {
    __m512 x = _mm512_set1_ps(1e-7f), y = _mm512_set1_ps(0.999f), a0 = x, a1 = x, a2 = x,
           a3 = x, a4 = x, a5 = x, a6 = x, a7 = x, a8 = x, a9 = x;
    long i;
    for (i = 0; i < ITERS; i++) { FMA10(_mm512_fmadd_ps, "v") }
    return _mm512_reduce_add_ps(a0) + _mm512_reduce_add_ps(a9);
}
__attribute__((target("avx2,fma"))) static float burst256(void) {
    __m256 x = _mm256_set1_ps(1e-7f), y = _mm256_set1_ps(0.999f), a0 = x, a1 = x, a2 = x,
           a3 = x, a4 = x, a5 = x, a6 = x, a7 = x, a8 = x, a9 = x;
    long i;
    for (i = 0; i < ITERS; i++) { FMA10(_mm256_fmadd_ps, "x") }
    return a0[0] + a9[0];
}
static int width;
static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y);
}
static void *worker(void *out) {
    double rates[BURSTS]; float sink = 0; int b;
    for (b = 0; b < BURSTS; b++) {
        double t = now();
        sink += width == 16 ? burst512() : burst256();
        rates[b] = ITERS * 10.0 * width * 2 / (now() - t) / 1e9;
    }
    qsort(rates, BURSTS, sizeof rates[0], by_value);
    *(double *)out = rates[BURSTS * 9 / 10] + (sink == 1234.5f);
    return NULL;
}
int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1, t;
    pthread_t ids[64]; double rates[64], total = 0;
    width = argc > 2 ? atoi(argv[2]) : 0;
    if (!(width == 16 && __builtin_cpu_supports("avx512f")) &&
        !(width == 8 && __builtin_cpu_supports("fma")))
        return 1;
    if (threads < 1 || threads > 64) return 1;
    for (t = 0; t < threads; t++) pthread_create(&ids[t], NULL, worker, &rates[t]);
    for (t = 0; t < threads; t++) pthread_join(ids[t], NULL);
    for (t = 0; t < threads; t++) total += rates[t];
    printf("%.3f %d\n", total, width);
    return 0;
}
"""


def fma_peak(threads):
    """GFLOP/s of the C FMA loop on `threads` threads (best of 3) on the vectors of the
    SIMD path aicraft runs, or None without cc or that path's FMAs."""
    width = {"avx512": "16", "avx2": "8"}.get(host()["simd"])
    if width is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "peak.c"), os.path.join(tmp, "peak")
        with open(src, "w") as f:
            f.write(PEAK_SOURCE)
        cc = os.environ.get("CC", "cc")
        try:
            subprocess.run([cc, "-O2", "-pthread", src, "-o", exe], check=True,
                           capture_output=True)
            runs = [subprocess.run([exe, str(threads), width], check=True, capture_output=True,
                                   text=True).stdout for _ in range(3)]
        except (OSError, subprocess.CalledProcessError):
            return None
    return max(float(out.split()[0]) for out in runs)


def openblas_core():
    """The core type NumPy's OpenBLAS picked (OPENBLAS_CORETYPE overrides it), read
    from the loaded library, or None when NumPy uses another BLAS."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:   # Linux: the libraries this process loaded
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        blas = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                     "openblas_get_corename64_", "openblas_get_corename"):
            if hasattr(blas, name):
                fn = getattr(blas, name)
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return None


def cases(quick):
    square = SQUARE[:4] if quick else SQUARE
    return [("square %d" % n, 0, 0, n, n, n) for n in square] + list(MLP)


def operands(case):
    """Random float32 A and B for one case, its C, and an ac_sgemm call that fills C."""
    name, ta, tb, m, n, k = case
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    c = np.empty((m, n), np.float32)
    pa, pb, pc = (ffi.from_buffer("float[]", x) for x in (a, b, c))
    lda, ldb, sgemm = a.shape[1], b.shape[1], lib.ac_sgemm

    def call_aicraft():
        sgemm(ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, n)

    return (a.T if ta else a), (b.T if tb else b), c, call_aicraft


def paired_rounds(first, second, rounds, settle):
    """Batches of first() and second() back to back, `rounds` times, which one
    runs first alternating. Returns each one's call times and the median over
    rounds of (second's median call / first's)."""
    clock = time.perf_counter
    first()
    second()
    start = clock()
    second()
    reps = max(1, min(500, int(BATCH_SECONDS / max(clock() - start, 1e-7))))
    times, round_ratios = ([], []), []
    order = [(0, first), (1, second)]
    for _ in range(rounds):
        batch = ([], [])
        order.reverse()
        for which, fn in order:
            if settle:
                time.sleep(SETTLE_SECONDS)
            fn()   # the first call of a batch may wake sleeping threads
            for _ in range(reps):
                start = clock()
                fn()
                batch[which].append(clock() - start)
            times[which].extend(batch[which])
        round_ratios.append(statistics.median(batch[1]) / statistics.median(batch[0]))
    return times, statistics.median(round_ratios)


def measure_case(case, threads, rounds):
    """Median GFLOP/s of aicraft and NumPy for one shape, and aicraft's largest error."""
    name, ta, tb, m, n, k = case
    op_a, op_b, c, call_aicraft = operands(case)
    matmul = np.matmul

    def call_numpy():
        matmul(op_a, op_b)

    (aicraft, numpy), ratio = paired_rounds(call_aicraft, call_numpy, rounds, threads > 1)
    flops = 2.0 * m * n * k
    reference = op_a.astype(np.float64) @ op_b.astype(np.float64)
    scale = np.abs(op_a).astype(np.float64) @ np.abs(op_b).astype(np.float64)
    return {
        "case": name, "threads": threads, "m": m, "n": n, "k": k,
        "trans": "NT"[ta] + "NT"[tb],
        "aicraft_gflops": flops / statistics.median(aicraft) / 1e9,
        "numpy_gflops": flops / statistics.median(numpy) / 1e9,
        "ratio": ratio,
        "max_rel_err": float(np.max(np.abs(c - reference) / scale)),
    }


def measure(threads, rounds, quick):
    lib.ac_set_num_threads(threads)
    if threadpool_limits is None:
        return [measure_case(case, threads, rounds) for case in cases(quick)]
    with threadpool_limits(limits=threads, user_api="blas"):
        return [measure_case(case, threads, rounds) for case in cases(quick)]


def measure_in_subprocess(threads, rounds, quick):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    args = [sys.executable, os.path.abspath(__file__), "--child", str(threads),
            "--rounds", str(rounds)] + (["--quick"] if quick else [])
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def target_for(row):
    if row["case"].startswith("mlp"):
        return TARGETS["mlp"]
    return TARGETS["square n>=256"] if row["m"] >= 256 else None


def report(rows, peaks):
    core = openblas_core()
    print(host_line())
    print("NumPy %s, OpenBLAS core: %s" % (np.__version__, core or "n/a (not OpenBLAS)"))
    print("SGEMM, GFLOP/s (median call); ratio = aicraft / NumPy (OpenBLAS), median of rounds")
    print("FMA peak: " + ", ".join("%d thread%s %s" % (t, "s" if t > 1 else "",
                                   "%.1f" % peaks[t] if peaks[t] else "n/a") for t in THREADS))
    print()
    header = "%-28s %4s %3s %9s %9s %7s %7s %7s %9s" % (
        "case", "trans", "thr", "aicraft", "numpy", "ratio", "target", "% peak", "max err")
    print(header)
    print("-" * len(header))
    met = True
    for row in rows:
        ratio = row["ratio"]
        target = target_for(row)
        peak = peaks[row["threads"]]
        row["peak_fraction"] = row["aicraft_gflops"] / peak if peak else None
        if target is not None and ratio < target:
            met = False
        print("%-28s %5s %3d %9.1f %9.1f %7.2f %7s %7s %9.1e" % (
            row["case"], row["trans"], row["threads"], row["aicraft_gflops"],
            row["numpy_gflops"], ratio, "%.2f" % target if target else "-",
            "%.0f%%" % (100 * row["peak_fraction"]) if peak else "n/a", row["max_rel_err"]))
    print()
    print("targets (ratio >= %.2f for square n >= 256, >= %.1f for the MLP shapes): %s"
          % (TARGETS["square n>=256"], TARGETS["mlp"], "met" if met else "NOT met"))
    print(json.dumps({
        "bench": "gemm", **host(), "machine": platform.machine(), "cpus": os.cpu_count(),
        "numpy": np.__version__, "openblas_core": core, "fma_peak_gflops": {str(t): peaks[t] for t in THREADS},
        "targets_met": met, "results": rows,
    }))


def thread_cliff(rounds, quick, busy_core):
    """aicraft's GFLOP/s on 1 and 2 threads per case, and 2 threads / 1."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy_core else None
    rows = []
    try:
        for case in cases(quick):
            name, m, n, k = case[0], case[3], case[4], case[5]
            call = operands(case)[3]

            def on(threads, call=call):
                def run():
                    lib.ac_set_num_threads(threads)
                    call()
                return run

            (two, one), ratio = paired_rounds(on(2), on(1), rounds, False)
            flops = 2.0 * m * n * k
            rows.append({"case": name, "one_thread_gflops": flops / statistics.median(one) / 1e9,
                         "two_threads_gflops": flops / statistics.median(two) / 1e9,
                         "two_over_one": ratio})
    finally:
        if spinner:
            spinner.kill()
            spinner.wait()
    print(host_line())
    print("aicraft SGEMM on 2 threads against 1, GFLOP/s (median call); ratio = median of rounds")
    if busy_core:
        print("one core kept busy by another process")
    print()
    header = "%-28s %9s %9s %7s" % ("case", "1 thread", "2 threads", "ratio")
    print(header)
    print("-" * len(header))
    for row in rows:
        print("%-28s %9.1f %9.1f %7.2f" % (row["case"], row["one_thread_gflops"],
                                           row["two_threads_gflops"], row["two_over_one"]))
    slower = [row["case"] for row in rows if row["two_over_one"] < 0.9]
    print()
    print("2 threads below 0.9x of 1: %s" % (", ".join(slower) if slower else "none"))
    print(json.dumps({"bench": "gemm_thread_cliff", **host(), "busy_core": busy_core, "results": rows}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="batches per library and case")
    parser.add_argument("--quick", action="store_true", help="square sizes up to 512 only")
    parser.add_argument("--thread-cliff", action="store_true",
                        help="aicraft on 2 threads against 1 instead of against NumPy")
    parser.add_argument("--busy-core", action="store_true",
                        help="with --thread-cliff: keep one core busy meanwhile")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.thread_cliff:
        thread_cliff(args.rounds, args.quick, args.busy_core)
        return
    if args.child:
        print(json.dumps(measure(args.child, args.rounds, args.quick)))
        return
    rows = []
    for threads in THREADS:
        if threadpool_limits is None:
            rows += measure_in_subprocess(threads, args.rounds, args.quick)
        else:
            rows += measure(threads, args.rounds, args.quick)
    report(rows, {t: fma_peak(t) for t in THREADS})


if __name__ == "__main__":
    main()
