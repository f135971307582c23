"""demos/serve.py and clients whose body it refuses unread: each reads its answer
(413 for a body over 1 MB, 404/405 for a body sent where none is taken) rather than
a reset connection, because the service reads and drops a refused body (up to
16 MB) before answering; and bench/serve_hostile.py's mix over 10 rounds with no
request dropped. The service runs under gunicorn as in tests/test_serve.py."""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("gunicorn")

from test_serve import serve, weights_file  # noqa: E402,F401  (the fixture and its weights)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import serve_hostile  # noqa: E402


def test_every_client_sending_an_oversized_body_reads_its_413(serve):
    server = serve(2)
    body = b"[" + b"0.5," * (1 << 19) + b"0]"          # 2 MB
    raw = serve_hostile.request("POST", "/predict", body)
    with ThreadPoolExecutor(40) as pool:   # all at once: more than the workers' 8 threads
        statuses = list(pool.map(lambda _: serve_hostile.send(server.port, raw), range(200)))
    assert statuses == [413] * 200
    assert "Traceback" not in server.log()


@pytest.mark.parametrize("method, path, expected", [("POST", "/nowhere", 404), ("POST", "/healthz", 405)])
def test_a_large_body_sent_where_none_is_taken_gets_its_4xx(serve, method, path, expected):
    server = serve(1)
    raw = serve_hostile.request(method, path, b"0" * (3 << 20))
    assert [serve_hostile.send(server.port, raw) for _ in range(8)] == [expected] * 8


def test_hostile_mix_over_10_rounds_drops_nothing(serve):
    server = serve(2)
    pids = server.worker_pids()
    kinds = len(serve_hostile.mix())
    failures = []
    for round_ in range(1, 11):
        failures += serve_hostile.run(server.port, 2 * kinds, seed=round_)
    assert failures == []
    assert server.worker_pids() == pids, "a worker died:\n" + server.log()
    assert "Traceback" not in server.log()


def test_a_client_that_declares_a_large_body_and_sends_none_holds_no_thread(serve):
    # 8 such clients (as many as the service's request threads), each still
    # connected: the service still answers the next request.
    import socket
    server = serve(1)
    idle = []
    try:
        for _ in range(8):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
            sock.sendall(serve_hostile.request("POST", "/predict", b"", length=8 << 20))
            assert sock.recv(12).startswith(b"HTTP/1.1 413")
            idle.append(sock)
        assert server.request("GET", "/healthz")[0] == 200
    finally:
        for sock in idle:
            sock.close()
