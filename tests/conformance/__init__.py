"""tests/conformance as a package, so its conftest.py does not shadow tests/conftest.py for `from conftest import ...`."""
