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

__all__ = ["Transform", "Compose", "ToTensor", "Normalize", "Flatten", "Lambda", "apply_batch"]


def _like(sample, out):
    """out as a Tensor when sample was one (the per-sample path after ToTensor), else as NumPy."""
    return from_numpy(out) if isinstance(sample, Tensor) else out


def apply_batch(transform, batch):
    """Apply transform to every sample of batch (leading dim), vectorised when it can be."""
    if transform is None:
        return batch
    if isinstance(transform, Transform):
        return transform.batch(batch)
    return np.stack([np.asarray(transform(sample)) for sample in batch])


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
        for t in self.transforms:
            samples = apply_batch(t, samples)
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
