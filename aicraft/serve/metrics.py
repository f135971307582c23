"""metrics.py - one worker's Prometheus page: requests by route and status, a latency
histogram, libac's memory counters, the models' weight bytes and the process's
resident memory."""
import bisect
import os
import threading

import aicraft as ac

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
MEMORY_GAUGES = (
    ("aicraft_bytes_in_use", "bytes_in_use", "Bytes libac has allocated and not freed."),
    ("aicraft_peak_bytes", "peak_bytes", "Most bytes libac has had in use at once."),
    ("aicraft_live_tensors", "live_tensors", "Tensors libac holds."),
    ("aicraft_live_nodes", "live_nodes", "Autograd graph nodes libac holds."),
    ("aicraft_arena_reserved_bytes", "arena_reserved", "Bytes reserved by libac's scope arenas."),
)


class Metrics:
    """Request counts by route and status, and a latency histogram, for one worker.
    weight_bytes: model name -> the bytes its weights take (int8 when quantized)."""

    def __init__(self, weight_bytes):
        self.weight_bytes = weight_bytes
        self.lock = threading.Lock()
        self.requests = {}
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self.seconds = 0.0

    def observe(self, route, status, seconds):
        with self.lock:
            self.requests[route, status] = self.requests.get((route, status), 0) + 1
            self.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
            self.seconds += seconds

    def render(self):
        with self.lock:
            requests, buckets, seconds = sorted(self.requests.items()), list(self.buckets), self.seconds
        lines = ["# HELP serve_requests_total Requests answered, by path and status.",
                 "# TYPE serve_requests_total counter"]
        lines += ['serve_requests_total{path="%s",status="%d"} %d' % (route, status, n)
                  for (route, status), n in requests]
        lines += ["# HELP serve_request_seconds Time from a request's arrival in the app to its answer.",
                  "# TYPE serve_request_seconds histogram"]
        total = 0
        for bound, n in zip(LATENCY_BUCKETS + ("+Inf",), buckets):
            total += n
            lines.append('serve_request_seconds_bucket{le="%s"} %d' % (bound, total))
        lines += ["serve_request_seconds_sum %.6f" % seconds, "serve_request_seconds_count %d" % total]
        stats = ac.memory_stats()
        for name, key, help_text in MEMORY_GAUGES:
            lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name, "%s %d" % (name, stats[key])]
        if self.weight_bytes:
            lines += ["# HELP aicraft_weight_bytes Bytes a model's weights take (int8 when quantized).",
                      "# TYPE aicraft_weight_bytes gauge"]
            lines += ['aicraft_weight_bytes{model="%s"} %d' % (name, n) for name, n in self.weight_bytes.items()]
        resident = resident_bytes()
        if resident is not None:
            lines += ["# HELP process_resident_memory_bytes Resident memory size in bytes.",
                      "# TYPE process_resident_memory_bytes gauge",
                      "process_resident_memory_bytes %d" % resident]
        return "\n".join(lines) + "\n"


def resident_bytes():
    """This process's resident memory, where /proc tells it (Linux); else None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None
