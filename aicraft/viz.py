"""viz.py - the autograd graph behind a tensor, as text or Graphviz DOT; and
torchvision's make_grid and save_image (PNG written with zlib and struct).
"""
import math
import numbers
import os
import struct
import sys
import zlib

import numpy as np

from aicraft._ffi import ffi, lib
from aicraft.creation import from_numpy
from aicraft.errors import ShapeError, raise_error
from aicraft.tensor import Tensor


def _render(c_fn, t):
    if not isinstance(t, Tensor):
        raise TypeError("expected a Tensor, got %s" % type(t).__name__)
    length = c_fn(t._ptr, ffi.NULL, 0)
    if length < 0:
        raise_error(t)
    buf = ffi.new("char[]", length + 1)
    if c_fn(t._ptr, buf, length + 1) < 0:
        raise_error(t)
    return ffi.string(buf, length).decode("utf-8", "replace")


def to_dot(t):
    """The graph behind t in Graphviz DOT (render with `dot -Tpng`)."""
    return _render(lib.ac_graph_dot, t)


def to_text(t):
    """The graph behind t, one op per line."""
    return _render(lib.ac_graph_text, t)


def print_graph(t, file=None):
    """Print to_text(t) to file (default sys.stdout)."""
    print(to_text(t), end="", file=sys.stdout if file is None else file)


# ---- image grids --------------------------------------------------------------

def _images(tensor):
    """tensor as a float32 NumPy batch (B, C, H, W), one-channel images made three, as torchvision."""
    if isinstance(tensor, (list, tuple)):
        tensor = np.stack([np.asarray(t, dtype=np.float32) for t in tensor])
    elif not isinstance(tensor, (Tensor, np.ndarray)):
        raise TypeError("make_grid: expected a Tensor or a list of Tensors, got %s" % type(tensor).__name__)
    x = np.array(tensor, dtype=np.float32)        # a copy: normalize writes into it
    if x.ndim == 2:
        x = x[None]
    if x.ndim == 3:
        x = x[None]
    if x.ndim != 4:
        raise ShapeError("make_grid: expected (B, C, H, W), (C, H, W) or (H, W), got shape %s" % (x.shape,))
    if x.shape[1] == 1:
        x = np.repeat(x, 3, axis=1)
    return x


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _grid_args(nrow, padding, value_range, pad_value):
    if not _is_int(nrow) or nrow < 1:
        raise ValueError("make_grid: nrow must be a positive int, got %r" % (nrow,))
    if not _is_int(padding) or padding < 0:
        raise ValueError("make_grid: padding must be a non-negative int, got %r" % (padding,))
    if value_range is not None and (len(value_range) != 2 or not value_range[0] < value_range[1]):
        raise ValueError("make_grid: value_range must be (low, high) with low < high, got %r" % (value_range,))
    if not isinstance(pad_value, numbers.Real):
        raise TypeError("make_grid: pad_value must be a number, got %s" % type(pad_value).__name__)


def _grid(tensor, nrow, padding, normalize, value_range, pad_value):
    """The grid as a float32 NumPy (C, H', W')."""
    _grid_args(nrow, padding, value_range, pad_value)
    x = _images(tensor)
    if normalize:
        low, high = value_range if value_range is not None else (float(x.min()), float(x.max()))
        np.clip(x, low, high, out=x)
        x -= np.float32(low)
        x /= np.float32(max(high - low, 1e-5))
    count, channels, height, width = x.shape
    if count == 1:
        return x[0]
    cols = min(nrow, count)
    rows = math.ceil(count / cols)
    cell_h, cell_w = height + padding, width + padding
    grid = np.full((channels, rows * cell_h + padding, cols * cell_w + padding), pad_value, np.float32)
    for k in range(count):                         # a copy per image, not per pixel
        top, left = (k // cols) * cell_h + padding, (k % cols) * cell_w + padding
        grid[:, top:top + height, left:left + width] = x[k]
    return grid


def make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0):
    """Images (B, C, H, W) laid out nrow to a row with padding between them, as torchvision's make_grid.

    One-channel images become three; normalize maps value_range (default:
    the batch's min and max) to [0, 1]; a single image comes back unpadded.
    scale_each=True (a range per image) is not supported.
    """
    if scale_each:
        raise ValueError("make_grid: scale_each=True is not supported; normalize with one value_range")
    return from_numpy(_grid(tensor, nrow, padding, normalize, value_range, pad_value))


def _png(pixels):
    """uint8 (H, W, 3 or 4) as PNG bytes: 8-bit RGB or RGBA, no filtering."""
    height, width, channels = pixels.shape
    rows = np.concatenate([np.zeros((height, 1), np.uint8), pixels.reshape(height, width * channels)], axis=1)

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    color_type = {3: 2, 4: 6}[channels]
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
            + chunk(b"IEND", b""))


def save_image(tensor, fp, nrow=8, padding=2, normalize=False, value_range=None, pad_value=0.0, *, format=None):
    """make_grid(tensor, ...) written as a PNG to fp (a path or a binary file object), as torchvision's.

    Values in [0, 1] become bytes as torchvision rounds them: clamp(x * 255 + 0.5, 0, 255).
    Only PNG is written; the grid must have 1, 3 or 4 channels.
    """
    if format is not None and str(format).lower() != "png":
        raise ValueError("save_image: only PNG is written, not %r" % (format,))
    grid = _grid(tensor, nrow, padding, normalize, value_range, pad_value)
    if grid.shape[0] not in (3, 4):
        raise ShapeError("save_image: a PNG needs 1, 3 or 4 channels, the grid has %d" % grid.shape[0])
    pixels = np.clip(grid * 255 + 0.5, 0, 255).astype(np.uint8).transpose(1, 2, 0)
    data = _png(np.ascontiguousarray(pixels))
    if hasattr(fp, "write"):
        fp.write(data)
        return
    with open(os.fspath(fp), "wb") as f:
        f.write(data)
