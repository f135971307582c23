"""aicraft.serve - models served over HTTP under a WSGI server (gunicorn): KServe's Open
Inference Protocol v2 with JSON and binary tensors, online learning, one model shared by
every worker, adaptive batching, flat memory. `python -m aicraft.serve --help` runs it;
docs/serving.md is the guide.

`import aicraft` does not import this package (it sits above the library and needs
orjson; the command needs gunicorn)."""
from aicraft.serve.app import make_app
from aicraft.serve.batching import Batcher, QueueFull
from aicraft.serve.protocol import TensorSpec
from aicraft.serve.servable import ModuleServable, ProgramServable, load_model
from aicraft.serve.shared import SharedModel

__all__ = ["make_app", "ModuleServable", "ProgramServable", "TensorSpec", "load_model",
           "SharedModel", "Batcher", "QueueFull"]
