"""batching.py - adaptive batching (serve-shared's file; this is the contract's
signature only, so that the package imports until it lands)."""


class QueueFull(Exception):
    """max_queue requests wait already (the app answers 503)."""


class Batcher:
    def __init__(self, infer, max_batch_size, max_delay_s=0.0, max_queue=64):
        raise NotImplementedError("Batcher: not in this build yet")

    def submit(self, inputs):
        raise NotImplementedError
