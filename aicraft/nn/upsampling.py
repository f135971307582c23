"""upsampling.py - F.interpolate (nearest, nearest-exact, linear, bilinear, bicubic,
trilinear, area), F.upsample*, F.pixel_shuffle/pixel_unshuffle, and the modules
Upsample, UpsamplingNearest2d, UpsamplingBilinear2d, PixelShuffle, PixelUnshuffle.

Interpolation is separable: each spatial dim in turn is one call of libac's
resample op (ops/resample.c), whose taps (source indices and weights, a few per
output position) are computed here with torch's coordinate rules, in float32 as
torch computes them. 'area' is adaptive average pooling. Pixel shuffles are a
reshape, a permute and a reshape.
"""
import math

from aicraft._args import _as_int
from aicraft.nn.module import Module
from aicraft.nn.padding import _resample
from aicraft.tensor import Tensor

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle",
           "pixel_unshuffle", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
           "PixelShuffle", "PixelUnshuffle"]

_MODE_RANKS = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}


def _output_sizes(fn, input, size, scale_factor, spatial):
    """The output size of each spatial dim, and the scale each dim's coordinates use
    (None: in/out)."""
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    in_sizes = input.shape[2:]
    if size is not None:
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * spatial
        if len(sizes) != spatial:
            raise ValueError("Input and output must have the same number of spatial dimensions, "
                             "but got input with spatial dimensions of %s and output size of %s. "
                             "Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             "output size in (o1, o2, ...,oK) format." % (list(in_sizes), sizes))
        sizes = [_as_int(s, fn + ": size") for s in sizes]
        return sizes, [None] * spatial
    factors = list(scale_factor) if isinstance(scale_factor, (tuple, list)) \
        else [scale_factor] * spatial
    if len(factors) != spatial:
        raise ValueError("Input and scale_factor must have the same number of spatial dimensions, "
                         "but got input with spatial dimensions of %s and scale_factor of %s. "
                         % (list(in_sizes), factors))
    factors = [float(f) for f in factors]
    if any(not f > 0 or math.isinf(f) for f in factors):
        raise ValueError("%s: scale_factor must be positive and finite, got %s" % (fn, factors))
    sizes = [int(math.floor(n * f)) for n, f in zip(in_sizes, factors)]
    return sizes, factors


def _nearest_taps(n, out, scale, exact):
    """torch's nearest index: floor(j * s) (or floor((j + 0.5) * s)), s = 1/scale_factor
    or n/out in float32, capped at n - 1."""
    import numpy as np
    s = np.float32(1.0 / scale) if scale is not None else np.float32(n) / np.float32(out)
    j = np.arange(out, dtype=np.float32)
    if exact:
        j = j + np.float32(0.5)
    src = np.floor(j * s).astype(np.int64)
    return np.minimum(src, n - 1)


def _source_coords(n, out, scale, align_corners, cubic):
    """The real source coordinate of each output position, float32, as torch's
    area_pixel_compute_source_index."""
    import numpy as np
    j = np.arange(out, dtype=np.float32)
    if align_corners:
        s = np.float32(n - 1) / np.float32(out - 1) if out > 1 else np.float32(0.0)
        return j * s
    s = np.float32(1.0 / scale) if scale is not None else np.float32(n) / np.float32(out)
    real = s * (j + np.float32(0.5)) - np.float32(0.5)
    return real if cubic else np.maximum(real, np.float32(0.0))


def _linear_taps(n, out, scale, align_corners):
    import numpy as np
    real = _source_coords(n, out, scale, align_corners, False)
    i0 = np.minimum(real.astype(np.int64), n - 1)
    lam = np.clip(real - i0.astype(np.float32), np.float32(0), np.float32(1))
    i1 = np.minimum(i0 + 1, n - 1)
    return np.stack([i0, i1], 1), np.stack([np.float32(1) - lam, lam], 1)


def _cubic_taps(n, out, scale, align_corners):
    import numpy as np
    a = np.float32(-0.75)
    real = _source_coords(n, out, scale, align_corners, True)
    i = np.floor(real)
    t = real - i
    i = i.astype(np.int64)

    def near(x):       # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):        # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weights = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], 1).astype(np.float32)
    index = np.clip(np.stack([i - 1, i, i + 1, i + 2], 1), 0, n - 1)
    return index, weights


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize input (N, C, d1, ..., dK), K = 1, 2, 3, to size or by scale_factor, as
    torch's F.interpolate."""
    import numpy as np
    fn = "interpolate"
    if not isinstance(input, Tensor):
        raise TypeError("interpolate(): argument 'input' must be Tensor, not %s"
                        % type(input).__name__)
    modes = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
    if mode not in modes:
        raise NotImplementedError("interpolate(): mode %r is not supported by aicraft (%s are)"
                                  % (mode, ", ".join(modes)))
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias:
        raise NotImplementedError("interpolate(): antialias=True is not supported by aicraft")
    if input.ndim not in (3, 4, 5):
        raise NotImplementedError("Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                                  "%dD) for the modes: nearest | linear | bilinear | bicubic | "
                                  "trilinear | area | nearest-exact (got %s)" % (input.ndim, mode))
    if mode in _MODE_RANKS and input.ndim != _MODE_RANKS[mode]:
        raise NotImplementedError("Got %dD input, but %s mode needs %dD input"
                                  % (input.ndim, mode, _MODE_RANKS[mode]))
    spatial = input.ndim - 2
    sizes, scales = _output_sizes(fn, input, size, scale_factor, spatial)
    if recompute_scale_factor:
        scales = [None] * spatial
    if any(s <= 0 for s in sizes):
        raise ValueError("Input and output sizes should be greater than 0, but got input %s and "
                         "output %s" % (list(input.shape[2:]), sizes))
    if mode == "area":
        from aicraft.nn import pooling
        return pooling._adaptive_avg(input, sizes, "interpolate")
    if input.dtype != "float32" and mode not in ("nearest", "nearest-exact"):
        raise TypeError("interpolate(): mode %r needs a float32 input, got %s" % (mode, input.dtype))
    out = input
    for d in range(spatial):
        dim, n, o = 2 + d, input.shape[2 + d], sizes[d]
        if n == 0:
            raise ValueError("interpolate(): input %s has an empty spatial dim"
                             % (tuple(input.shape),))
        if n == o:       # torch copies a dim whose size does not change, whatever the scale
            continue
        if mode == "nearest" and o == 2 * n:
            out = _resample(out, dim, np.arange(o, dtype=np.int64) // 2)
        elif mode in ("nearest", "nearest-exact"):
            out = _resample(out, dim, _nearest_taps(n, o, scales[d], mode == "nearest-exact"))
        elif mode == "bicubic":
            out = _resample(out, dim, *_cubic_taps(n, o, scales[d], bool(align_corners)))
        else:
            out = _resample(out, dim, *_linear_taps(n, o, scales[d], bool(align_corners)))
    return input.clone() if out is input else out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """The deprecated name of interpolate."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _shuffle_check(input, fn):
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' must be Tensor, not %s" % (fn, type(input).__name__))
    if input.ndim < 3:
        raise ValueError("%s expects input to have at least 3 dimensions, but got input with %d "
                         "dimension(s)" % (fn, input.ndim))


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r), as torch's F.pixel_shuffle."""
    _shuffle_check(input, "pixel_shuffle")
    r = _as_int(upscale_factor, "pixel_shuffle: upscale_factor")
    if r <= 0:
        raise ValueError("pixel_shuffle expects a positive upscale_factor, but got %d" % r)
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise ValueError("pixel_shuffle expects its input's 'channel' dimension to be divisible "
                         "by the square of upscale_factor, but input.size(-3)=%d is not "
                         "divisible by %d" % (c, r * r))
    k = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W), as torch's F.pixel_unshuffle."""
    _shuffle_check(input, "pixel_unshuffle")
    r = _as_int(downscale_factor, "pixel_unshuffle: downscale_factor")
    if r <= 0:
        raise ValueError("pixel_unshuffle expects a positive downscale_factor, but got %d" % r)
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise ValueError("pixel_unshuffle expects height (%d) and width (%d) to be divisible by "
                         "downscale_factor (%d)" % (h, w, r))
    k = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)


# ---- modules -----------------------------------------------------------------

class Upsample(Module):
    """Resize by size or scale_factor, as torch.nn.Upsample (F.interpolate's modes)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) \
            else (tuple(float(f) for f in scale_factor) if scale_factor else None)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = "scale_factor=%r" % (self.scale_factor,)
        else:
            info = "size=%r" % (self.size,)
        return info + ", mode=%r" % self.mode


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of (N, C, H, W), as torch.nn.UpsamplingNearest2d."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling with align_corners=True, as torch.nn.UpsamplingBilinear2d."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """(*, C r^2, H, W) -> (*, C, H r, W r), as torch.nn.PixelShuffle."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = _as_int(upscale_factor, "PixelShuffle: upscale_factor")

    def forward(self, input):
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return "upscale_factor=%d" % self.upscale_factor


class PixelUnshuffle(Module):
    """(*, C, H r, W r) -> (*, C r^2, H, W), as torch.nn.PixelUnshuffle."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = _as_int(downscale_factor, "PixelUnshuffle: downscale_factor")

    def forward(self, input):
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return "downscale_factor=%d" % self.downscale_factor
