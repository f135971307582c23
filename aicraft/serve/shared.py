"""shared.py - one model for all gunicorn workers (serve-shared's file; this is the
contract's signature only, so that the package imports until it lands)."""


class SharedModel:
    def __init__(self, module, optimizer=None, hogwild=False):
        raise NotImplementedError("SharedModel: not in this build yet")

    def update(self):
        raise NotImplementedError

    def read(self):
        raise NotImplementedError
