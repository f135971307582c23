"""serve_requests.py - the requests bench/serve_load.sh sends, and a check that the
services answer them alike.

    python bench/serve_requests.py write DIR
    python bench/serve_requests.py check PORT [PORT ...]

`write` puts one whole HTTP request a file in DIR, for bench/serve_mix.lua to send
as it is: an Open Inference Protocol v2 infer of 1 or 32 rows of the MNIST MLP,
    json_1.http, json_32.http       JSON tensors in, JSON out
    binary_1.http, binary_32.http   binary tensors in and out, as tritonclient.http
                                    sends them with binary_data=True
The rows are MNIST test images when data/MNIST/raw has them, else random pixels,
normalised as in training; the JSON bodies write them with 4 decimals, as a client
that formats its own numbers would (shorter than the 17 digits of a float32
printed in full, so the cheaper JSON for a server to read).

`check` sends each request once to each service on 127.0.0.1:PORT and exits 1
unless every answer is 200 with probabilities of the right shape, and every
service's equal to the first's within 1e-5.
"""
import http.client
import os
import sys

import numpy as np
import orjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = "/v2/models/mnist_mlp/infer"
NAMES = ("json_1", "binary_1", "json_32", "binary_32")
TOLERANCE = 1e-5


def rows():
    """(32, 784) float64: normalised MNIST test images (or random pixels), 4 decimals."""
    images = os.path.join(ROOT, "data", "MNIST", "raw", "t10k-images-idx3-ubyte")
    if os.path.exists(images):
        pixels = np.fromfile(images, np.uint8, count=32 * 784, offset=16).reshape(32, 784) / 255.0
    else:
        pixels = np.random.default_rng(0).random((32, 784))
    return np.round((pixels - 0.1307) / 0.3081, 4)


def json_body(x):
    return orjson.dumps({"inputs": [{"name": "input__0", "shape": list(x.shape), "datatype": "FP32",
                                     "data": x.ravel().tolist()}]}), {"Content-Type": "application/json"}


def binary_body(x):
    """The body and headers tritonclient.http sends for x with binary input and output."""
    import tritonclient.http as triton
    tensor = triton.InferInput("input__0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x.astype(np.float32), binary_data=True)
    body, header_length = triton.InferenceServerClient.generate_request_body(
        [tensor], [triton.InferRequestedOutput("output__0", binary_data=True)])
    return body, {"Content-Type": "application/octet-stream",
                  "Inference-Header-Content-Length": str(header_length)}


def requests():
    """{name: (body, headers)} for NAMES."""
    x = rows()
    return {"json_1": json_body(x[:1]), "binary_1": binary_body(x[:1]),
            "json_32": json_body(x), "binary_32": binary_body(x)}


def write(directory):
    for name, (body, headers) in requests().items():
        head = "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % PATH
        head += "".join("%s: %s\r\n" % item for item in headers.items())
        head += "Content-Length: %d\r\n\r\n" % len(body)
        with open(os.path.join(directory, name + ".http"), "wb") as f:
            f.write(head.encode() + body)


def probabilities(port, body, headers):
    """The output__0 of the service's answer, as float32 (n, 10)."""
    import tritonclient.http as triton
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("POST", PATH, body, headers)
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    if answer.status != 200:
        raise SystemExit("serve_requests: port %d answered %d: %s" % (port, answer.status, data[:300]))
    length = answer.getheader("Inference-Header-Content-Length")
    result = triton.InferResult.from_response_body(data, header_length=int(length) if length else None)
    return result.as_numpy("output__0")


def check(ports):
    for name, (body, headers) in requests().items():
        first = None
        for port in ports:
            out = probabilities(port, body, headers)
            rows_sent = 1 if name.endswith("_1") else 32
            if out is None or out.shape != (rows_sent, 10) or not np.allclose(out.sum(1), 1, atol=1e-5):
                raise SystemExit("serve_requests: %s: port %d answered %r, not (%d, 10) probabilities"
                                 % (name, port, out, rows_sent))
            first = out if first is None else first
            error = float(np.abs(out - first).max())
            if error > TOLERANCE:
                raise SystemExit("serve_requests: %s: port %d differs from port %d by %.3g"
                                 % (name, port, ports[0], error))
    print("serve_requests: the %d services give the same probabilities (within %g) for %s"
          % (len(ports), TOLERANCE, ", ".join(NAMES)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "check":
        check([int(port) for port in sys.argv[2:]])
    else:
        raise SystemExit(__doc__)
