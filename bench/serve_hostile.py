"""serve_hostile.py - valid and hostile requests to demos/serve.py, each on its own
connection, with the status each must get; every answer is checked.

    python bench/serve_hostile.py PORT ROUNDS [WORKER_PID ...]

sends ROUNDS rounds of the mix (ROUND_REQUESTS requests each, on 8 threads) to
127.0.0.1:PORT and prints each worker's RSS before the first round and after
each one. Exits 1 if any request got another status or no answer (a dropped
connection). bench/serve_load.sh runs it; tests/test_serve.py sends a short mix.
"""
import json
import random
import socket
import sys
from concurrent.futures import ThreadPoolExecutor

ROUND_REQUESTS = 1300
TIMEOUT_SECONDS = 20


def request(method, path, body=b"", length=None):
    """The bytes of one HTTP/1.1 request; `length` overrides the Content-Length."""
    if isinstance(body, str):
        body = body.encode()
    head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" % (method, path)
    if method == "POST":
        head += "Content-Length: %d\r\n" % (len(body) if length is None else length)
    return head.encode() + b"\r\n" + body


def mix(seed=0):
    """[(description, request bytes, expected status)]: valid requests and hostile ones."""
    rng = random.Random(seed)
    row = [round(rng.uniform(-0.5, 2.8), 4) for _ in range(784)]
    one = json.dumps({"inputs": [row]})
    batch = json.dumps({"inputs": [row] * 32})
    learn = json.dumps({"inputs": [row] * 8, "labels": list(range(8))})
    return [
        ("1 row", request("POST", "/predict", one), 200),
        ("32 rows", request("POST", "/predict", batch), 200),
        ("a step", request("POST", "/learn", learn), 200),
        ("1 row again", request("POST", "/predict", one), 200),
        ("a truncated body", request("POST", "/predict", one[:len(one) // 2], length=len(one)), 400),
        ("not JSON", request("POST", "/predict", "inputs=0.5,0.5"), 400),
        ("a short row", request("POST", "/predict", json.dumps({"inputs": [row[:-1]]})), 400),
        ("NaN", request("POST", "/predict", one.replace(str(row[0]), "NaN", 1)), 400),
        ("1e999", request("POST", "/predict", one.replace(str(row[0]), "1e999", 1)), 400),
        ("257 rows", request("POST", "/predict", json.dumps({"inputs": [[0] * 784] * 257})), 400),
        ("a 2 MB body", request("POST", "/predict", b"[" + b"0.5," * (1 << 19) + b"0]"), 413),
        ("random bytes", request("POST", "/predict", bytes(rng.getrandbits(8) for _ in range(4096))), 400),
        ("a random request line", bytes(rng.randrange(33, 127) for _ in range(200)) + b"\r\n\r\n", 400),
    ]


def send(port, raw):
    """The status of the answer to `raw` sent on a new connection; None if the
    connection ended without one. The whole request is sent, then the write
    side is shut: a truncated body ends there."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_SECONDS) as sock:
        try:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass        # the server may answer and close before it has read it all
        answer = b""
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except OSError:
            pass
    try:
        return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.") else None
    except (IndexError, ValueError):
        return None


def run(port, count, seed=0):
    """Send `count` requests of the mix on 8 threads; [(description, expected, got)]
    for every one that did not get its status."""
    cases = mix(seed)

    def one(i):
        description, raw, expected = cases[i % len(cases)]
        return description, expected, send(port, raw)

    with ThreadPoolExecutor(8) as pool:
        return [r for r in pool.map(one, range(count)) if r[1] != r[2]]


def rss_mb(pids):
    values = []
    for pid in pids:
        with open("/proc/%d/status" % pid) as f:
            values.append(next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024)
    return " ".join("%.1f" % v for v in values)


def main():
    port, rounds, pids = int(sys.argv[1]), int(sys.argv[2]), [int(p) for p in sys.argv[3:]]
    print("hostile mix: %d kinds of request, %d a round; RSS MB/worker at start: %s"
          % (len(mix()), ROUND_REQUESTS, rss_mb(pids)))
    failed = []
    for r in range(1, rounds + 1):
        failures = run(port, ROUND_REQUESTS, seed=r)
        failed += failures
        print("  round %d: %d of %d not answered as expected; RSS MB/worker: %s"
              % (r, len(failures), ROUND_REQUESTS, rss_mb(pids)))
    for description, expected, got in failed[:20]:
        print("  %s: expected %d, got %s" % (description, expected, got or "no answer"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
