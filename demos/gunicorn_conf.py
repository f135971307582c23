"""gunicorn settings for demos/serve.py: `gunicorn -c demos/gunicorn_conf.py ...` (make serve):
aicraft.serve's (a bounded allocator, and each worker's request threads warmed before
it takes connections)."""
from aicraft.serve.gunicorn_conf import post_worker_init  # noqa: F401  (gunicorn reads it from here)
