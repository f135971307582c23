"""gunicorn settings for demos/serve.py: `gunicorn -c demos/gunicorn_conf.py ...` (make serve).

Each worker warms its request threads before it takes connections (serve.warm_up)."""


def post_worker_init(worker):
    from demos import serve
    serve.warm_up(worker.tpool, worker.cfg.threads)
