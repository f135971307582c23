"""body.py - a request's body read within bounds, and a refused body drained.

A body over the service's limit is refused from its Content-Length, unread (413).
The body of any refusal is then read and dropped, up to MAX_DRAIN_BYTES, after the
answer has gone out: a client that is still sending when the answer goes out then
reads its answer, instead of a reset (a socket closed over unread bytes sends one).
Past that bound the connection may still be reset; the bound keeps a refused
client's cost small (bench/serve_hostile.py sends such clients).
"""
import time

from aicraft.serve.protocol import ProtocolError

MAX_DRAIN_BYTES = 16 << 20
DRAIN_SECONDS = 2.0
DRAIN_CHUNK = 64 << 10


def read_body(environ, max_bytes):
    """The request's body, of at most max_bytes; ProtocolError (411, 413, 400) otherwise."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        raise ProtocolError(411, "the request needs a Content-Length") from None
    if length > max_bytes:
        raise ProtocolError(413, "the body is %d bytes; at most %d are taken" % (length, max_bytes))
    if length <= 0:
        raise ProtocolError(400, "the body is empty")
    body = environ["wsgi.input"].read(length)
    if len(body) != length:
        raise ProtocolError(400, "the body ended after %d of %d bytes" % (len(body), length))
    return body


def drain(environ):
    """Read and drop what is left of the request's body, up to MAX_DRAIN_BYTES and for
    at most DRAIN_SECONDS (each read waits DRAIN_SECONDS at most: a client that
    declares a body and never sends it holds no thread)."""
    try:
        left = min(int(environ.get("CONTENT_LENGTH") or 0), MAX_DRAIN_BYTES)
    except ValueError:
        return
    stream, sock = environ["wsgi.input"], environ.get("gunicorn.socket")
    deadline = time.monotonic() + DRAIN_SECONDS
    previous = sock.gettimeout() if sock is not None else None
    try:
        if sock is not None:
            sock.settimeout(DRAIN_SECONDS)
        while left > 0 and time.monotonic() < deadline:
            chunk = stream.read(min(left, DRAIN_CHUNK))
            if not chunk:
                break
            left -= len(chunk)
    except (OSError, ValueError):   # the client went away, or is too slow: nothing more to do
        pass
    finally:
        if sock is not None:
            try:
                sock.settimeout(previous)
            except OSError:
                pass


class DrainAfter:
    """A refusal's body, then drain(): the server sends the answer first (so a client
    that never sends its body still gets it at once) and calls close() after, which
    reads what is left of the refused body."""

    def __init__(self, body, environ):
        self.body, self.environ = body, environ

    def __iter__(self):
        yield self.body

    def close(self):
        drain(self.environ)
