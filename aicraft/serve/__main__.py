"""python -m aicraft.serve MODEL_FILE [options]: serve a model file under gunicorn.

MODEL_FILE is a safetensors file of a Sequential MLP (Linear, ReLU, ..., Linear;
demos/mnist_mlp.py writes one) or a program file (ac.export). The model loads once in
gunicorn's master, before the workers fork (--preload); each worker warms its request
threads before it takes connections. `--help` lists the options.
"""
import argparse
import math
import os
import sys

from gunicorn.app.base import BaseApplication

import aicraft as ac
from aicraft.serve.app import MAX_BODY_BYTES, make_app
from aicraft.serve.gunicorn_conf import post_worker_init
from aicraft.serve.servable import load_model

SIZE_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _bytes(text):
    """'512M' -> 536870912; a plain number is bytes. ValueError for anything else."""
    text = text.strip().upper().removesuffix("B")
    scale = SIZE_SUFFIXES.get(text[-1:], 1)
    value = float(text[:-1] if scale > 1 else text) * scale
    if not math.isfinite(value):      # int() would raise OverflowError, which argparse lets through
        raise ValueError(text)
    return int(value)


def _number(convert, what, least):
    """An argparse type: the text read by convert (which raises ValueError for text
    that is not `what`), refused below least."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not %s" % (text, what)) from None
        if not value >= least:
            raise argparse.ArgumentTypeError("%r is not >= %s" % (text, least))
        return value
    return parse


byte_size = _number(_bytes, "a size such as 512M", 1)
positive = _number(int, "a whole number", 1)
seconds = _number(float, "a number of seconds", 0)


def parser():
    p = argparse.ArgumentParser(prog="python -m aicraft.serve",
                                description="Serve a model file under gunicorn over KServe's Open "
                                "Inference Protocol v2 (docs/serving.md).")
    p.add_argument("model", help="a safetensors MLP or an ac.export program file")
    p.add_argument("--name", help="the model's name in /v2/models/{name} (default: the file's stem)")
    p.add_argument("--bind", "-b", default="127.0.0.1:8000", help="address to listen on (%(default)s)")
    p.add_argument("--workers", "-w", type=positive, default=2, help="worker processes (%(default)s)")
    p.add_argument("--threads", type=positive, default=4, help="request threads a worker (%(default)s)")
    p.add_argument("--max-batch-size", type=positive, default=1,
                   help="join concurrent infer requests of a worker into batches of up to this many rows (%(default)s)")
    p.add_argument("--max-queue-delay", type=seconds, default=0.0,
                   help="seconds a batch waits for more requests (%(default)s)")
    p.add_argument("--memory-limit", type=byte_size,
                   help="bytes libac may hold in each worker (512M); a request past it gets 503")
    p.add_argument("--max-body", type=byte_size, default=MAX_BODY_BYTES, help="largest request body (%(default)s bytes)")
    p.add_argument("--learn", type=float, metavar="LR",
                   help="take POST /learn: one SGD step at this learning rate a request")
    p.add_argument("--shared", action="store_true",
                   help="one model in shared memory for all workers: a step in any worker is seen by all")
    p.add_argument("--hogwild", action="store_true", help="with --shared: steps without the lock")
    p.add_argument("--quantize", action="store_true", help="serve int8 weights (predictions only)")
    p.add_argument("--timeout", type=positive, default=30, help="gunicorn's worker timeout (%(default)s s)")
    return p


class Gunicorn(BaseApplication):
    """gunicorn running one WSGI application made before it starts (so: preloaded)."""

    def __init__(self, application, options):
        self.application, self.options = application, options
        super().__init__()

    def load_config(self):
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        return self.application


def main(argv=None):
    args = parser().parse_args(argv)
    if args.hogwild and not args.shared:
        parser().error("--hogwild takes --shared")
    if args.quantize and args.learn is not None:
        parser().error("--quantize serves int8 weights, which do not learn; drop --learn")
    if not os.path.isfile(args.model):
        parser().error("%s: no such file" % args.model)
    try:
        servable = load_model(args.model, args.name, lr=args.learn, quantize=args.quantize,
                              share=args.shared, hogwild=args.hogwild)
        app = make_app(servable, max_batch_size=args.max_batch_size, max_queue_delay_s=args.max_queue_delay,
                       memory_limit=args.memory_limit, max_body_bytes=args.max_body)
        with ac.checkpoint():   # one call before the fork: a bad file fails here, once
            app.warm_up()
    except (OSError, ValueError, TypeError) as exc:
        print("aicraft.serve: cannot serve %s: %s" % (args.model, exc), file=sys.stderr)
        return 3
    Gunicorn(app, {"bind": args.bind, "workers": args.workers, "threads": args.threads,
                   "worker_class": "gthread" if args.threads > 1 else "sync", "preload_app": True,
                   "timeout": args.timeout, "post_worker_init": post_worker_init,
                   "control_socket_disable": True}).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
