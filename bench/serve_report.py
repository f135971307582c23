"""serve_report.py - bench/serve_load.sh's tables and JSON line, from its records.

    python bench/serve_report.py RECORDS

RECORDS holds one line per fact, as serve_load.sh writes them:
    meta KEY TEXT                      the host, versions, settings
    hostile TEXT                       bench/serve_hostile.py's output
    load SERVICE.KIND.ROUND TICKS WRK  a wrk run: its workers' CPU clock ticks, its report
    rss SERVICE WHEN MB...             each worker's RSS (start, warm, end)
    pss SERVICE WHEN MB...             each worker's PSS, likewise
    soak REQUESTS MB...                the aicraft workers' RSS after so many requests
    profile JSON                       bench/serve_profile.py's JSON line
Medians over rounds for latency and for the ratios of two services in the same
round; throughput is the mean over rounds (all requests over all the time).
"""
import json
import os
import re
import statistics
import sys

SERVICES = ("aicraft", "torch", "onnxruntime")
KINDS = ("json_1", "binary_1", "json_32", "binary_32")
UNITS_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}


def milliseconds(text):
    number, unit = re.fullmatch(r"([0-9.]+)([a-z]+)", text).groups()
    return float(number) * UNITS_MS[unit]


def read_wrk(path):
    """{"rps", "requests", "p50", "p99"} of one wrk --latency report."""
    with open(path) as f:
        text = f.read()
    percentile = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", text, re.M))
    return {"rps": float(re.search(r"^Requests/sec:\s+([0-9.]+)", text, re.M).group(1)),
            "requests": int(re.search(r"^\s*(\d+) requests in", text, re.M).group(1)),
            "p50": milliseconds(percentile["50"]), "p99": milliseconds(percentile["99"])}


def read_records(path):
    meta, hostile, runs, rss, soak, profile = {}, [], {}, {}, [], None
    with open(path) as f:
        for line in f:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "meta":
                key, _, text = rest.partition(" ")
                meta[key] = text
            elif kind == "hostile":
                hostile.append(rest)
            elif kind == "load":
                name, ticks, report = rest.split()
                service, what, round_ = name.split(".")
                if round_.isdigit():
                    runs.setdefault((service, what), []).append(dict(read_wrk(report), ticks=int(ticks)))
            elif kind in ("rss", "pss"):
                service, when, *values = rest.split()
                rss[kind, service, when] = [float(v) for v in values]
            elif kind == "profile":
                profile = json.loads(rest)
            elif kind == "soak":
                total, *values = rest.split()
                soak.append((int(total), [float(v) for v in values]))
    return meta, hostile, runs, rss, soak, profile


def summary(rounds):
    """One service's figures for one kind of load over its rounds."""
    requests = sum(r["requests"] for r in rounds)
    ticks = sum(r["ticks"] for r in rounds)
    return {"rps": round(statistics.fmean(r["rps"] for r in rounds), 1),
            "p50_ms": round(statistics.median(r["p50"] for r in rounds), 2),
            "p99_ms": round(statistics.median(r["p99"] for r in rounds), 2),
            "cpu_ms_per_request": round(ticks * 1000 / os.sysconf("SC_CLK_TCK") / requests, 3)}


def round_ratio(a, b):
    """The median over rounds of a's throughput over b's (the same round: the same load)."""
    return round(statistics.median(x["rps"] / y["rps"] for x, y in zip(a, b)), 2)


def mean(values):
    return round(statistics.fmean(values), 1)


def main(path):
    meta, hostile, runs, rss, soak, profile = read_records(path)
    results = {s: {k: summary(runs[s, k]) for k in KINDS} for s in SERVICES}
    vs = {"%s_vs_%s" % ("aicraft", peer): {k: round_ratio(runs["aicraft", k], runs[peer, k]) for k in KINDS}
          for peer in ("torch", "onnxruntime")}
    binary_vs_json = {s: {rows: round_ratio(runs[s, "binary_" + rows], runs[s, "json_" + rows])
                          for rows in ("1", "32")} for s in SERVICES}
    memory = {kind: {s: {when: rss[kind, s, when] for when in ("start", "warm", "end")} for s in SERVICES}
              for kind in ("rss", "pss")}
    end = {s: mean(rss["rss", s, "end"]) for s in SERVICES}

    print("%-12s %-10s %9s %8s %8s %11s %9s %9s" % ("service", "request", "req/s", "p50 ms", "p99 ms",
                                                  "CPU ms/req", "app us", "model us"))
    for k in KINDS:
        for s in SERVICES:
            r, p = results[s][k], profile["cpu_us"][s][k]
            print("%-12s %-10s %9.1f %8.2f %8.2f %11.3f %9.1f %9.1f" % (
                s, k, r["rps"], r["p50_ms"], r["p99_ms"], r["cpu_ms_per_request"], p["app_us"], p["model_us"]))
    print("(CPU ms/req: the workers' CPU time over the requests they answered; app us and model us: one\n"
          " request through make_app in process, no server, and the servable's infer alone: bench/serve_profile.py)")
    for kind in ("rss", "pss"):
        print("\n%-12s  %-22s %-22s %s" % ("%s MB/worker" % kind.upper(), "start", "after warm-up",
                                             "end of the rounds"))
        for s in SERVICES:
            print(("%-12s  %-22s %-22s %s" % (s, *(" ".join("%.1f" % v for v in memory[kind][s][w])
                                                    for w in ("start", "warm", "end")))))
    print("fresh process, MB: Python, orjson, gunicorn %.1f; with aicraft.serve %.1f; then with each "
          "runtime and its model: %s" % (profile["base_rss_mb"], profile["floor_rss_mb"], ", ".join(
              "%s %.1f" % (s, profile["rss_mb"][s]) for s in SERVICES)))
    print("\nthroughput, median of the per-round ratios:")
    cpu = {"%s_vs_%s" % ("aicraft", peer): {k: round(results[peer][k]["cpu_ms_per_request"]
                                                     / results["aicraft"][k]["cpu_ms_per_request"], 2)
                                            for k in KINDS} for peer in ("torch", "onnxruntime")}
    for k in KINDS:
        print("  %-10s aicraft/PyTorch x%.2f   aicraft/ONNX Runtime x%.2f   (by CPU per request: x%.2f, x%.2f)"
              % (k, vs["aicraft_vs_torch"][k], vs["aicraft_vs_onnxruntime"][k],
                 cpu["aicraft_vs_torch"][k], cpu["aicraft_vs_onnxruntime"][k]))
    for s in SERVICES:
        print("  %-12s binary/JSON: x%.2f at 1 row, x%.2f at 32 rows"
              % (s, binary_vs_json[s]["1"], binary_vs_json[s]["32"]))

    targets = [
        ("RSS per worker at most 1/5 of PyTorch's", end["aicraft"] * 5 <= end["torch"],
         "1/%.1f" % (end["torch"] / end["aicraft"])),
        ("RSS per worker below ONNX Runtime's", end["aicraft"] < end["onnxruntime"],
         "%.1f vs %.1f MB" % (end["aicraft"], end["onnxruntime"])),
        ("binary at least 2x JSON's throughput at 32 rows", binary_vs_json["aicraft"]["32"] >= 2,
         "x%.2f" % binary_vs_json["aicraft"]["32"]),
        ("throughput at least ONNX Runtime's with binary bodies",
         min(vs["aicraft_vs_onnxruntime"]["binary_1"], vs["aicraft_vs_onnxruntime"]["binary_32"]) >= 1,
         "x%.2f at 1 row, x%.2f at 32" % (vs["aicraft_vs_onnxruntime"]["binary_1"],
                                          vs["aicraft_vs_onnxruntime"]["binary_32"])),
    ]
    print("\ntargets (aicraft):")
    for what, met, figure in targets:
        print("  %-56s %-26s %s" % (what, figure, "met" if met else "MISSED"))

    batching = {}
    for s, label in (("aicraft", "off"), ("batched", "on (32 rows, no delay)")):
        many, one = summary(runs[s, "binary_1_x32"]), summary(runs[s, "binary_1_x1"])
        batching["on" if s == "batched" else "off"] = {
            "rps_32_clients": many["rps"], "cpu_ms_per_request_32_clients": many["cpu_ms_per_request"],
            "p50_ms_1_client": one["p50_ms"], "p99_ms_1_client": one["p99_ms"]}
        print("%s batching %-24s 32 clients of 1 row: %8.1f req/s (%.3f CPU ms/req); 1 client: p50 %.2f ms, p99 %.2f ms"
              % ("\n" if s == "aicraft" else "", label, many["rps"], many["cpu_ms_per_request"],
                 one["p50_ms"], one["p99_ms"]))
    batching["on_vs_off_32_clients"] = round_ratio(runs["batched", "binary_1_x32"], runs["aicraft", "binary_1_x32"])
    print("  batching on/off at 32 clients: x%.2f (median of the per-round ratios)" % batching["on_vs_off_32_clients"])

    warm = rss["rss", "aicraft", "warm"]
    total, last = soak[-1]
    growth = [round(b - a, 2) for a, b in zip(warm, last)]
    print("\naicraft soak, RSS MB/worker after so many requests since the warm-up: "
          + "; ".join("%d: %s" % (n, " ".join("%.1f" % v for v in values)) for n, values in soak))
    print("  growth since the warm-up: %s MB" % " ".join("%.2f" % g for g in growth))
    print("load average: %s at the start, %s at the end" % (meta["load_start"], meta["load_end"]))

    print(json.dumps({"bench": "serve_load", "host": meta["cpu"], "versions": meta["versions"],
                      "cores": int(meta["cores"]), "weights": meta["weights"], "settings": meta["settings"],
                      "results": results, "rss_mb": memory["rss"], "pss_mb": memory["pss"], "throughput_ratios": vs,
                      "cpu_per_request_ratios": cpu,
                      "binary_vs_json": binary_vs_json,
                      "targets": {what: met for what, met, _ in targets}, "batching": batching,
                      "soak_requests": total, "soak_rss_growth_mb": growth,
                      "profile": profile, "hostile": [line for line in hostile if "round" in line]}))


if __name__ == "__main__":
    main(sys.argv[1])
