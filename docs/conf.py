"""Sphinx configuration of aicraft's API reference (`make docs`).

Sphinx's autodoc imports the package, so it documents what exists at run time:
the Tensor methods and ac.* functions built in loops (functions.py, the method
builders of _wrapping.py) are there with their docstrings, which static readers miss.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

with open(os.path.join(ROOT, "aicraft", "__init__.py"), encoding="utf-8") as f:
    release = re.search(r'^__version__ = "([^"]+)"', f.read(), re.MULTILINE).group(1)

project = "aicraft"
version = release
extensions = ["sphinx.ext.autodoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
myst_heading_anchors = 3
html_theme = "alabaster"
exclude_patterns = ["_build"]
