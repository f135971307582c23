"""gunicorn settings for demos/serve.py: `gunicorn -c demos/gunicorn_conf.py ...` (make serve).

Each worker warms its request threads before it takes connections (Service.warm_up)."""
from aicraft.serve.__main__ import post_worker_init  # noqa: F401  (gunicorn reads it from here)
