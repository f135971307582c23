"""transforms.py - Compose, ToTensor, Normalize, Flatten, Lambda: torchvision's
image transforms.

Each transform applies to one sample (`t(image)`, as torchvision: ToTensor
gives an aicraft Tensor, and the transforms after it take and give Tensors)
or to a whole batch at once (`t.batch(images)`, one vectorised NumPy
expression for the batch, NumPy in and out). Datasets keep their images as
uint8; the DataLoader transforms each batch with `apply_batch`, then turns it
into one aicraft Tensor, so no Tensor is made per sample.

A plain callable (a lambda, a function) works too, one sample at a time:
`apply_batch` and `Compose.batch` run it on each sample and stack the results.
"""
import numpy as np

from aicraft.creation import from_numpy
from aicraft.tensor import Tensor

__all__ = ["Transform", "Compose", "ToTensor", "Normalize", "Flatten", "Lambda", "apply_batch", "CenterCrop",
           "Resize"]


def _like(sample, out):
    """out as a Tensor when sample was one (the per-sample path after ToTensor), else as NumPy."""
    return from_numpy(out) if isinstance(sample, Tensor) else out


def _as_array(x):
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


def apply_batch(transform, batch, as_tensors=False):
    """Apply transform to every sample of batch (leading dim), vectorised when it can be.
    as_tensors: a per-sample callable gets each sample as a Tensor (what it would get
    one sample at a time after ToTensor, as in torchvision)."""
    if transform is None:
        return batch
    if isinstance(transform, Lambda):
        transform = transform.lambd
    elif isinstance(transform, Transform):
        return transform.batch(batch)
    if as_tensors:
        return np.stack([_as_array(transform(from_numpy(np.ascontiguousarray(sample)))) for sample in batch])
    return np.stack([_as_array(transform(sample)) for sample in batch])


class Transform:
    """Base class: `__call__` takes one sample; `batch` takes samples stacked along dim 0.

    The default `batch` transforms one sample at a time; subclasses override it
    with a vectorised version.
    """

    def __call__(self, sample):
        raise NotImplementedError

    def batch(self, samples):
        return np.stack([np.asarray(self(sample)) for sample in samples])

    def __repr__(self):
        return type(self).__name__ + "()"


class Compose(Transform):
    """Apply transforms in order."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, sample):
        for t in self.transforms:
            sample = t(sample)
        return sample

    def batch(self, samples):
        tensors = False   # after ToTensor, per-sample callables see Tensors, as one sample at a time
        for t in self.transforms:
            samples = apply_batch(t, samples, tensors)
            tensors = tensors or isinstance(t, ToTensor)
        return samples

    def __repr__(self):
        return "Compose(%s)" % ", ".join(repr(t) for t in self.transforms)


def _to_float(x):
    """uint8 pixels scaled to [0, 1] (as torchvision: float32 divided by 255); other data as float32."""
    x = np.asarray(x)
    if x.dtype == np.uint8:
        out = x.astype(np.float32)
        np.divide(out, np.float32(255), out=out)
        return out
    return x.astype(np.float32, copy=False)


class ToTensor(Transform):
    """An image, (H, W) or (H, W, C), as a float32 Tensor (C, H, W); uint8 pixels scaled to [0, 1].

    `batch` takes (B, H, W) or (B, H, W, C) and gives a NumPy (B, C, H, W).
    """

    def __call__(self, image):
        x = _to_float(image)
        if x.ndim == 2:
            return from_numpy(x[None])
        if x.ndim == 3:
            return from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))
        raise ValueError("ToTensor: expected an image of shape (H, W) or (H, W, C), got %s" % (x.shape,))

    def batch(self, images):
        x = _to_float(images)
        if x.ndim == 3:
            return x[:, None]
        if x.ndim == 4:
            return np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        raise ValueError("ToTensor: expected a batch of shape (B, H, W) or (B, H, W, C), got %s" % (x.shape,))


class Normalize(Transform):
    """(x - mean) / std per channel, channels at dim -3 as in (C, H, W) and (B, C, H, W).

    One mean and std (or a single-element sequence) applies to every value,
    whatever the shape, so it also works after Flatten.
    """

    def __init__(self, mean, std):
        mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        std = np.asarray(std, dtype=np.float32).reshape(-1)
        if mean.size == 0 or std.size == 0:
            raise ValueError("Normalize: mean and std must not be empty")
        if np.any(std == 0):
            raise ValueError("Normalize: std must not contain zeros, got %s" % std.tolist())
        channels = max(mean.size, std.size)
        if mean.size not in (1, channels) or std.size not in (1, channels):
            raise ValueError("Normalize: mean has %d values and std %d; they must match" % (mean.size, std.size))
        shape = () if channels == 1 else (channels, 1, 1)
        self.mean = np.broadcast_to(mean, (channels,)).reshape(shape)
        self.std = np.broadcast_to(std, (channels,)).reshape(shape)

    def __call__(self, sample):
        x = np.asarray(sample, dtype=np.float32)
        if self.mean.ndim and (x.ndim < 3 or x.shape[-3] != self.mean.shape[0]):
            raise ValueError("Normalize: %d channels in mean/std, but the input has shape %s (channels at dim -3)"
                             % (self.mean.shape[0], x.shape))
        out = x - self.mean
        out /= self.std
        return _like(sample, out)

    batch = __call__   # channels sit at dim -3 in a batch too

    def __repr__(self):
        return "Normalize(mean=%s, std=%s)" % (self.mean.reshape(-1).tolist(), self.std.reshape(-1).tolist())


class Flatten(Transform):
    """A sample as one dimension; a batch as (B, everything else)."""

    def __call__(self, x):
        return x.reshape(-1) if isinstance(x, Tensor) else np.asarray(x).reshape(-1)

    def batch(self, x):
        x = np.asarray(x)
        return x.reshape(len(x), -1)


class Lambda(Transform):
    """fn as a transform, one sample at a time (a batch: fn on each sample, stacked)."""

    def __init__(self, lambd):
        if not callable(lambd):
            raise TypeError("Lambda: expected a callable, got %s" % type(lambd).__name__)
        self.lambd = lambd

    def __call__(self, sample):
        return self.lambd(sample)

    def __repr__(self):
        return "Lambda()"


# ---- scripts helper: CenterCrop and Resize ----------------------------------------

def _image_layout(x, batch):
    """(array, height axis, is_tensor): a Tensor is channels-first (..., H, W); a NumPy
    array or a PIL image is channels-last (H, W) or (H, W, C), with a leading batch dim
    in batch()."""
    if isinstance(x, Tensor):
        if x.ndim < 2:
            raise ValueError("expected a Tensor image (..., H, W), got shape %s" % (tuple(x.shape),))
        return x.numpy(), x.ndim - 2, True
    a = np.asarray(x)
    first = 1 if batch else 0
    if a.ndim not in (first + 2, first + 3):
        raise ValueError("expected an image (H, W) or (H, W, C)%s, got shape %s"
                         % (" with a batch dim first" if batch else "", a.shape))
    return a, first, False


def _size_pair(size, what):
    if isinstance(size, int) and not isinstance(size, bool):
        return (size, size)
    size = tuple(size)
    if len(size) == 1:
        return (int(size[0]), int(size[0]))
    if len(size) != 2:
        raise ValueError("%s: size must be an int or (h, w), got %r" % (what, size))
    return int(size[0]), int(size[1])


class CenterCrop(Transform):
    """The central (h, w) of an image (size an int for a square), as torchvision's: an
    image smaller than that is padded with zeros first. Takes a Tensor (..., H, W), a
    NumPy array (H, W) or (H, W, C), or a PIL image (given back as a NumPy array)."""

    def __init__(self, size):
        self.size = _size_pair(size, "CenterCrop")

    def _crop(self, x, batch):
        a, hax, tensor_in = _image_layout(x, batch)
        th, tw = self.size
        h, w = a.shape[hax], a.shape[hax + 1]
        if th > h or tw > w:   # pad as torchvision does: the image centred in zeros
            pads = [(0, 0)] * a.ndim
            ph, pw = max(th - h, 0), max(tw - w, 0)
            pads[hax] = (ph // 2, (ph + 1) // 2)
            pads[hax + 1] = (pw // 2, (pw + 1) // 2)
            a = np.pad(a, pads)
            h, w = a.shape[hax], a.shape[hax + 1]
        top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        index = [slice(None)] * a.ndim
        index[hax], index[hax + 1] = slice(top, top + th), slice(left, left + tw)
        out = np.ascontiguousarray(a[tuple(index)])
        return from_numpy(out) if tensor_in else out

    def __call__(self, image):
        return self._crop(image, False)

    def batch(self, images):
        return self._crop(images, True)

    def __repr__(self):
        return "CenterCrop(size=%s)" % (self.size,)


def _resize_weights(n_in, n_out):
    """(n_out, n_in) weights of antialiased bilinear resampling (a triangle filter
    widened by the downscale factor), as PIL's and torchvision's antialias=True."""
    scale = n_in / n_out
    support = max(scale, 1.0)
    centers = (np.arange(n_out, dtype=np.float64) + 0.5) * scale
    lo = np.maximum(np.floor(centers - support + 0.5), 0).astype(np.int64)
    hi = np.minimum(np.floor(centers + support + 0.5), n_in).astype(np.int64)
    j = np.arange(n_in, dtype=np.float64)[None, :]
    x = (j - centers[:, None] + 0.5) / support
    weights = np.clip(1.0 - np.abs(x), 0.0, None)
    inside = (j >= lo[:, None]) & (j < hi[:, None])
    weights = np.where(inside, weights, 0.0)
    return weights / weights.sum(axis=1, keepdims=True)


class Resize(Transform):
    """Bilinear resize, as torchvision's Resize with antialias (PIL's filter): size an
    int resizes the shorter side to it keeping the aspect ratio (the longer side
    int(size * long / short), at most max_size), (h, w) to exactly that. Takes a
    Tensor (..., H, W), a NumPy array (H, W) or (H, W, C), or a PIL image (given back
    as a NumPy array); uint8 images stay uint8 (rounded, clamped to 0-255), others
    come back float32. Only bilinear interpolation is built (others raise
    NotImplementedError)."""

    def __init__(self, size, interpolation="bilinear", max_size=None, antialias=True):
        mode = getattr(interpolation, "value", interpolation)
        if mode not in ("bilinear", 2):   # 2: PIL's BILINEAR
            raise NotImplementedError("Resize: only bilinear interpolation is supported by aicraft, not %r"
                                      % (interpolation,))
        if antialias is False:
            raise NotImplementedError("Resize: antialias=False is not supported by aicraft")
        if isinstance(size, (list, tuple)) and len(size) not in (1, 2):
            raise ValueError("Resize: size must be an int or (h, w), got %r" % (size,))
        self.size, self.max_size = size, max_size

    def _target(self, h, w):
        size = self.size
        if isinstance(size, (list, tuple)) and len(size) == 2:
            return int(size[0]), int(size[1])
        side = int(size[0]) if isinstance(size, (list, tuple)) else int(size)
        short, long = (h, w) if h <= w else (w, h)
        new_short, new_long = side, int(side * long / short)
        if self.max_size is not None and new_long > self.max_size:
            new_short, new_long = int(self.max_size * new_short / new_long), self.max_size
        return (new_short, new_long) if h <= w else (new_long, new_short)

    def _resize(self, x, batch):
        a, hax, tensor_in = _image_layout(x, batch)
        h, w = a.shape[hax], a.shape[hax + 1]
        th, tw = self._target(h, w)
        out = a.astype(np.float64)
        if (th, tw) != (h, w):
            wh, ww = _resize_weights(h, th), _resize_weights(w, tw)
            out = np.moveaxis(np.tensordot(wh, out, axes=([1], [hax])), 0, hax)
            out = np.moveaxis(np.tensordot(ww, out, axes=([1], [hax + 1])), 0, hax + 1)
        if a.dtype == np.uint8:
            out = np.clip(np.rint(out), 0, 255).astype(np.uint8)
        else:
            out = out.astype(np.float32)
        out = np.ascontiguousarray(out)
        return from_numpy(out) if tensor_in else out

    def __call__(self, image):
        return self._resize(image, False)

    def batch(self, images):
        return self._resize(images, True)

    def __repr__(self):
        return "Resize(size=%s, interpolation=bilinear, max_size=%s, antialias=True)" % (self.size, self.max_size)
