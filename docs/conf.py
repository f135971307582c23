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


def literal_examples(app, what, name, obj, options, lines):
    """The package's docstrings are plain text that show examples as indented blocks after a
    blank line (quantization.py's); reST reads those as block quotes and warns where one ends
    without a blank line. A bare "::" before such a block makes it a literal block, as meant."""
    out, prev = [], None   # prev: the last non-blank line
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if (line.strip() and prev is not None and i > 0 and not lines[i - 1].strip()
                and indent > len(prev) - len(prev.lstrip())
                and not prev.rstrip().endswith("::")
                and not re.match(r"\s*([-*+]|\d+[.)]|\.\.) ", prev)):
            out.extend(["::", ""])
        out.append(line)
        if line.strip():
            prev = line
    lines[:] = out


def setup(app):
    app.connect("autodoc-process-docstring", literal_examples)
