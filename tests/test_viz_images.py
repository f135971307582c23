"""test_viz_images.py - make_grid and save_image, as torchvision's: the layout
checked image by image, and the PNG decoded here with zlib and struct.
"""
import io
import struct
import zlib

import numpy as np
import pytest

import aicraft as ac
from aicraft.viz import make_grid, save_image


def decode_png(data):
    """(H, W, C) uint8 from an 8-bit RGB/RGBA PNG with filter 0 rows; checks every CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        pos += 12 + length
    assert [k for k, _ in chunks][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert depth == 8 and interlace == 0
    channels = {2: 3, 6: 4}[color]
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    rows = np.frombuffer(raw, np.uint8).reshape(height, 1 + width * channels)
    assert not rows[:, 0].any()                       # filter type 0 on every row
    return rows[:, 1:].reshape(height, width, channels)


def test_make_grid_places_each_image_in_its_cell():
    x = np.random.default_rng(0).random((5, 3, 4, 6)).astype(np.float32)
    grid = make_grid(ac.tensor(x), nrow=2, padding=1, pad_value=0.5)
    assert isinstance(grid, ac.Tensor) and grid.shape == (3, 3 * 5 + 1, 2 * 7 + 1)
    g = grid.numpy()
    covered = np.zeros(g.shape[1:], bool)
    for k in range(5):
        top, left = 1 + (k // 2) * 5, 1 + (k % 2) * 7
        np.testing.assert_array_equal(g[:, top:top + 4, left:left + 6], x[k])
        covered[top:top + 4, left:left + 6] = True
    assert np.all(g[:, ~covered] == 0.5)               # padding and the empty sixth cell


def test_make_grid_makes_one_channel_three_and_leaves_one_image_unpadded():
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4) / 12
    single = make_grid(ac.tensor(x)).numpy()           # (C, H, W) is one image
    assert single.shape == (3, 3, 4)
    for c in range(3):
        np.testing.assert_array_equal(single[c], x[0])
    assert make_grid(ac.tensor(x[0])).shape == (3, 3, 4)          # (H, W)
    assert make_grid([ac.tensor(x), ac.tensor(x)], padding=0).shape == (3, 3, 8)


def test_make_grid_normalize_maps_the_range_to_unit_interval():
    x = np.array([[[[-2.0, 0.0], [2.0, 6.0]]]], np.float32)
    np.testing.assert_allclose(make_grid(ac.tensor(x), normalize=True).numpy()[0],
                               [[0.0, 0.25], [0.5, 1.0]])
    np.testing.assert_allclose(make_grid(ac.tensor(x), normalize=True, value_range=(0, 4)).numpy()[0],
                               [[0.0, 0.0], [0.5, 1.0]])


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_save_image_png_decodes_to_the_grid(tmp_path, channels):
    x = np.random.default_rng(channels).random((3, channels, 5, 4)).astype(np.float32)
    x[0, 0, 0, 0], x[0, 0, 0, 1] = -0.5, 1.5            # clamped
    path = tmp_path / "grid.png"
    save_image(ac.tensor(x), path, nrow=2, padding=2, pad_value=1.0)
    grid = make_grid(ac.tensor(x), nrow=2, padding=2, pad_value=1.0).numpy()
    expected = np.clip(np.floor(grid * 255 + 0.5), 0, 255).astype(np.uint8).transpose(1, 2, 0)
    decoded = decode_png(path.read_bytes())
    assert decoded.shape == (2 * 7 + 2, 2 * 6 + 2, 3 if channels == 1 else channels)
    np.testing.assert_array_equal(decoded, expected)
    assert decoded[0, 0].tolist() == [255] * decoded.shape[2]     # pad_value 1.0


def test_save_image_writes_to_a_file_object():
    buf = io.BytesIO()
    save_image(ac.ones(2, 2), buf, normalize=True)
    assert decode_png(buf.getvalue()).shape == (2, 2, 3)


def test_make_grid_and_save_image_reject_bad_input(tmp_path):
    with pytest.raises(ac.ShapeError, match="make_grid"):
        make_grid(ac.ones(2, 2, 2, 2, 2))
    with pytest.raises(TypeError, match="make_grid"):
        make_grid("image")
    with pytest.raises(ValueError, match="nrow"):
        make_grid(ac.ones(2, 3, 2, 2), nrow=0)
    with pytest.raises(ValueError, match="padding"):
        make_grid(ac.ones(2, 3, 2, 2), padding=-1)
    with pytest.raises(ValueError, match="value_range"):
        make_grid(ac.ones(2, 3, 2, 2), normalize=True, value_range=(1, 1))
    with pytest.raises(ValueError, match="scale_each"):
        make_grid(ac.ones(2, 3, 2, 2), scale_each=True)
    with pytest.raises(ac.ShapeError, match="channels"):
        save_image(ac.ones(2, 2, 2, 2), tmp_path / "two.png")
    with pytest.raises(ValueError, match="PNG"):
        save_image(ac.ones(2, 2), tmp_path / "x.jpg", format="jpeg")
