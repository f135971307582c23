"""serve_hostile.py - valid and hostile requests to aicraft.serve (demos/serve.py, or
`python -m aicraft.serve`), each on its own connection, with the status each must get;
every answer is checked.

    python bench/serve_hostile.py PORT ROUNDS [WORKER_PID ...] [--model NAME]

sends ROUNDS rounds of the mix (ROUND_REQUESTS requests each, on 8 threads) to
127.0.0.1:PORT and prints each worker's RSS before the first round and after
each one. The mix: the service's own /predict and /learn, and KServe's Open Inference
Protocol v2 infer (JSON and binary tensors) on the model NAME (a 784-wide MLP;
default mnist, demos/serve.py's). Exits 1 if any request got another status or no
answer (a dropped connection). bench/serve_load.sh runs it; tests/test_serve.py sends
a short mix.
"""
import argparse
import json
import random
import socket
import struct
import sys
from concurrent.futures import ThreadPoolExecutor

ROUND_REQUESTS = 1300
TIMEOUT_SECONDS = 20


def request(method, path, body=b"", length=None, headers=()):
    """The bytes of one HTTP/1.1 request; `length` overrides the Content-Length."""
    if isinstance(body, str):
        body = body.encode()
    head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" % (method, path)
    head += "".join("%s: %s\r\n" % header for header in headers)
    if method == "POST":
        head += "Content-Length: %d\r\n" % (len(body) if length is None else length)
    return head.encode() + b"\r\n" + body


def oip_binary(rows, size=None, trailing=b""):
    """(body, headers) of an OIP v2 infer request with rows (lists of 784 floats) as a
    binary FP32 tensor whose binary_data_size is size (default: its bytes)."""
    data = struct.pack("<%df" % (784 * len(rows)), *[v for row in rows for v in row])
    header = json.dumps({"inputs": [{"name": "input__0", "datatype": "FP32", "shape": [len(rows), 784],
                                     "parameters": {"binary_data_size": len(data) if size is None else size}}],
                         "parameters": {"binary_data_output": True}}).encode()
    return header + data + trailing, [("Inference-Header-Content-Length", str(len(header)))]


def mix(seed=0, model="mnist"):
    """[(description, request bytes, expected status)]: valid requests and hostile ones."""
    rng = random.Random(seed)
    row = [round(rng.uniform(-0.5, 2.8), 4) for _ in range(784)]
    one = json.dumps({"inputs": [row]})
    batch = json.dumps({"inputs": [row] * 32})
    learn = json.dumps({"inputs": [row] * 8, "labels": list(range(8))})
    infer = "/v2/models/%s/infer" % model
    oip_one = json.dumps({"inputs": [{"name": "input__0", "datatype": "FP32", "shape": [1, 784], "data": row}]})
    binary, headers = oip_binary([row] * 32)
    short, _ = oip_binary([row] * 32, size=32 * 784 * 4 - 4)
    large, _ = oip_binary([row] * 700)
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
        ("OIP: 1 row in JSON", request("POST", infer, oip_one), 200),
        ("OIP: 32 binary rows", request("POST", infer, binary, headers=headers), 200),
        ("OIP: a binary_data_size short of the shape", request("POST", infer, short, headers=headers), 400),
        ("OIP: a header length past the body", request("POST", infer, oip_one,
                                                       headers=[("Inference-Header-Content-Length", "99999")]), 400),
        ("OIP: true in FP32 data", request("POST", infer, oip_one.replace(str(row[0]), "true", 1)), 400),
        ("OIP: random bytes as binary", request("POST", infer, bytes(rng.getrandbits(8) for _ in range(4096)),
                                                headers=[("Inference-Header-Content-Length", "100")]), 400),
        ("OIP: an unknown model", request("POST", "/v2/models/nothing/infer", oip_one), 404),
        ("OIP: a 2 MB binary body", request("POST", infer, large, headers=headers), 413),
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


def run(port, count, seed=0, model="mnist"):
    """Send `count` requests of the mix on 8 threads; [(description, expected, got)]
    for every one that did not get its status."""
    cases = mix(seed, model)

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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int)
    parser.add_argument("rounds", type=int)
    parser.add_argument("pids", type=int, nargs="*", metavar="WORKER_PID", help="workers whose RSS to print")
    parser.add_argument("--model", default="mnist", help="the model's name in /v2/models/{name}")
    args = parser.parse_args()
    cases = mix(model=args.model)
    print("hostile mix: %d kinds of request (%d refused), %d a round; RSS MB/worker at start: %s"
          % (len(cases), sum(1 for *_, status in cases if status >= 400), ROUND_REQUESTS, rss_mb(args.pids)))
    failed, sent = [], 0
    for r in range(1, args.rounds + 1):
        failures = run(args.port, ROUND_REQUESTS, seed=r, model=args.model)
        failed += failures
        sent += ROUND_REQUESTS
        print("  round %d: %d of %d not answered as expected; RSS MB/worker: %s"
              % (r, len(failures), ROUND_REQUESTS, rss_mb(args.pids)))
    for description, expected, got in failed[:20]:
        print("  %s: expected %d, got %s" % (description, expected, got or "no answer"))
    print(json.dumps({"bench": "serve_hostile", "requests": sent, "kinds": len(cases),
                      "not_as_expected": len(failed), "dropped": sum(1 for *_, got in failed if got is None)}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
