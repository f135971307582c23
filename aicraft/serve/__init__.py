from aicraft.serve.shared import SharedModel
from aicraft.serve.batching import Batcher, QueueFull
