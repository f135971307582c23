"""gunicorn settings for a service made with make_app:

    gunicorn -c python:aicraft.serve.gunicorn_conf --preload -w 2 --threads 4 service:app

bounds glibc's allocator before the workers fork (app.bound_malloc), and warms each
worker's request threads before it takes connections (Service.warm_up), so that bad
traffic later finds nothing new to grow. `python -m aicraft.serve` does the same."""
from aicraft.serve.app import bound_malloc

bound_malloc()


def post_worker_init(worker):
    pool = getattr(worker, "tpool", None)      # the gthread worker's; the sync worker has none
    worker.wsgi.warm_up(pool, worker.cfg.threads if pool is not None else 1)
