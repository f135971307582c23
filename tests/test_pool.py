"""max_pool2d, avg_pool2d and adaptive_avg_pool2d (C's pool.c) and their modules:
forward against float64 NumPy pooling written here, gradients against central
differences of it, ties (the gradient goes to the first maximum), padding,
overlapping windows, and errors."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn
from conftest import check_gradients
from thread_counts import assert_same_for_thread_counts

rng = np.random.default_rng(9)


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def windows(x, kernel, stride, padding, fill):
    """(N, C, oH, oW, kH*kW) windows of x padded with fill."""
    (kh, kw), (sh, sw), (ph, pw) = pair(kernel), pair(stride), pair(padding)
    x = np.asarray(x, np.float64)
    xp = np.pad(x, ((0, 0),) * (x.ndim - 2) + ((ph, ph), (pw, pw)), constant_values=fill)
    oh = (x.shape[-2] + 2 * ph - kh) // sh + 1
    ow = (x.shape[-1] + 2 * pw - kw) // sw + 1
    taps = [xp[..., i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    return np.stack(taps, axis=-1)


def np_max_pool(x, kernel, stride=None, padding=0):
    return windows(x, kernel, stride or kernel, padding, -np.inf).max(axis=-1)


def np_avg_pool(x, kernel, stride=None, padding=0):
    return windows(x, kernel, stride or kernel, padding, 0.0).mean(axis=-1)


def np_adaptive_avg_pool(x, out_h, out_w):
    x = np.asarray(x, np.float64)
    h, w = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (out_h, out_w))
    for i in range(out_h):
        h0, h1 = (i * h) // out_h, -((-(i + 1) * h) // out_h)
        for j in range(out_w):
            w0, w1 = (j * w) // out_w, -((-(j + 1) * w) // out_w)
            out[..., i, j] = x[..., h0:h1, w0:w1].mean(axis=(-2, -1))
    return out


POOL_CASES = [
    # (x shape, kernel, stride, padding)
    ((2, 3, 8, 8), 2, None, 0),
    ((1, 2, 7, 9), 3, 2, 1),            # overlapping windows with padding
    ((2, 1, 5, 6), (2, 3), (1, 2), (1, 1)),
    ((3, 7, 5), 2, 1, 0),               # unbatched (C, H, W)
    ((1, 1, 4, 4), 4, None, 2),         # windows mostly padding
]


@pytest.mark.parametrize("x_shape, kernel, stride, padding", POOL_CASES)
def test_max_pool_forward_and_gradients(x_shape, kernel, stride, padding):
    x = rng.standard_normal(x_shape)   # distinct values: the max is unique
    y = F.max_pool2d(ac.tensor(x), kernel, stride, padding)
    np.testing.assert_allclose(y.numpy(), np_max_pool(x, kernel, stride, padding), rtol=1e-6)
    check_gradients(lambda t: F.max_pool2d(t, kernel, stride, padding),
                    lambda a: np_max_pool(a, kernel, stride, padding), [x], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_shape, kernel, stride, padding", POOL_CASES)
def test_avg_pool_forward_and_gradients(x_shape, kernel, stride, padding):
    x = rng.standard_normal(x_shape)
    y = F.avg_pool2d(ac.tensor(x), kernel, stride, padding)
    np.testing.assert_allclose(y.numpy(), np_avg_pool(x, kernel, stride, padding),
                               rtol=1e-5, atol=1e-6)
    check_gradients(lambda t: F.avg_pool2d(t, kernel, stride, padding),
                    lambda a: np_avg_pool(a, kernel, stride, padding), [x], rtol=1e-4, atol=1e-4)


def test_max_pool_ties_send_the_gradient_to_the_first_maximum():
    x = np.array([[[[1, 3, 3, 0],
                    [3, 2, 0, 3],
                    [5, 5, 7, 7],
                    [5, 5, 7, 7]]]], np.float32)
    t = ac.tensor(x, requires_grad=True)
    y = F.max_pool2d(t, 2)
    assert y.numpy().tolist() == [[[[3, 3], [5, 7]]]]
    y.backward(ac.tensor(np.array([[[[1, 2], [3, 4]]]], np.float32)))
    expected = np.array([[[[0, 1, 2, 0],
                           [0, 0, 0, 0],
                           [3, 0, 4, 0],
                           [0, 0, 0, 0]]]], np.float32)
    assert np.array_equal(t.grad.numpy(), expected)


def test_max_pool_overlapping_windows_accumulate():
    """One element that is the max of several windows gets all their gradients."""
    x = np.zeros((1, 1, 5, 5), np.float32)
    x[0, 0, 2, 2] = 1.0
    t = ac.tensor(x, requires_grad=True)
    F.max_pool2d(t, 3, 1).sum().backward()
    grad = t.grad.numpy()
    assert grad[0, 0, 2, 2] == 9.0
    assert grad.sum() == 9.0


@pytest.mark.parametrize("kernel, stride", [(2, 2), (3, 1)])
def test_max_pool_propagates_nan(kernel, stride):
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    t = ac.tensor(x, requires_grad=True)
    y = F.max_pool2d(t, kernel, stride)
    expected = np_max_pool(x, kernel, stride)   # NumPy's max propagates NaN too
    np.testing.assert_array_equal(np.isnan(y.numpy()), np.isnan(expected))
    np.testing.assert_allclose(y.numpy()[0, 0], expected[0, 0], rtol=1e-6)
    y.sum().backward()
    assert t.grad.numpy()[0, 1, 2, 3] == np.isnan(expected).sum()


def test_max_pool_padding_never_wins():
    x = -np.ones((1, 1, 2, 2), np.float32) * 5
    y = F.max_pool2d(ac.tensor(x), 2, 1, 1)
    assert np.all(y.numpy() == -5.0)


def test_avg_pool_counts_padding_as_zeros():
    x = np.ones((1, 1, 2, 2), np.float32)
    y = F.avg_pool2d(ac.tensor(x), 3, 1, 1)
    assert np.allclose(y.numpy(), 4.0 / 9.0)


@pytest.mark.parametrize("x_shape, out", [
    ((2, 3, 7, 5), (1, 1)), ((1, 2, 7, 5), (3, 2)), ((1, 1, 4, 4), (4, 4)), ((2, 1, 3, 5), (5, 7)),
    ((3, 6, 6), (2, 3)),
])
def test_adaptive_avg_pool_forward_and_gradients(x_shape, out):
    x = rng.standard_normal(x_shape)
    y = F.adaptive_avg_pool2d(ac.tensor(x), out)
    np.testing.assert_allclose(y.numpy(), np_adaptive_avg_pool(x, *out), rtol=1e-5, atol=1e-6)
    check_gradients(lambda t: F.adaptive_avg_pool2d(t, out),
                    lambda a: np_adaptive_avg_pool(a, *out), [x], rtol=1e-4, atol=1e-4)


def test_adaptive_avg_pool_none_keeps_a_size():
    x = ac.tensor(rng.standard_normal((1, 2, 6, 4)))
    assert F.adaptive_avg_pool2d(x, (3, None)).shape == (1, 2, 3, 4)
    assert F.adaptive_avg_pool2d(x, 1).shape == (1, 2, 1, 1)


def test_pooling_is_the_same_on_any_thread_count():
    x = rng.standard_normal((16, 8, 30, 30)).astype(np.float32)
    g = rng.standard_normal((16, 8, 15, 15)).astype(np.float32)

    def run():
        t = ac.tensor(x, requires_grad=True)
        y = F.max_pool2d(t, 2) + F.avg_pool2d(t, 3, 2, 1)
        y.backward(ac.tensor(g))
        return [y.numpy(), t.grad.numpy()]
    assert_same_for_thread_counts(run, (1, 2))


# ---- errors ------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [F.max_pool2d, F.avg_pool2d])
def test_pool_errors(fn):
    name = fn.__name__
    with pytest.raises(ac.ShapeError, match=r"%s: input \(4, 4\) must be \(N, C, H, W\)" % name):
        fn(ac.zeros(4, 4), 2)
    with pytest.raises(ac.ShapeError, match="%s: kernel .* larger than the padded input" % name):
        fn(ac.zeros(1, 1, 3, 3), 5, 1, 0)
    with pytest.raises(ValueError, match="%s: padding .* at most half the kernel" % name):
        fn(ac.zeros(1, 1, 8, 8), 2, 2, 2)
    with pytest.raises(ValueError, match="%s: kernel .* must be >= 1" % name):
        fn(ac.zeros(1, 1, 8, 8), 0)
    with pytest.raises(ac.ShapeError, match="empty plane"):
        fn(ac.zeros(1, 1, 0, 4), 1)
    assert fn(ac.ones(1, 1, 2, 2), 2).numpy().reshape(-1).tolist() == [1.0]


def test_adaptive_pool_errors():
    with pytest.raises(ValueError, match="adaptive_avg_pool2d: output size"):
        F.adaptive_avg_pool2d(ac.zeros(1, 1, 4, 4), (0, 1))
    with pytest.raises(ac.ShapeError, match="adaptive_avg_pool2d: input"):
        F.adaptive_avg_pool2d(ac.zeros(4), 1)


def test_options_once_unsupported_now_work():
    assert F.max_pool2d(ac.zeros(1, 1, 5, 5), 2, ceil_mode=True).shape == (1, 1, 3, 3)
    assert nn.AvgPool2d(2, count_include_pad=False)(ac.zeros(1, 1, 4, 4)).shape == (1, 1, 2, 2)


# ---- modules -----------------------------------------------------------------------

def test_modules():
    x = ac.tensor(rng.standard_normal((2, 3, 8, 6)))
    assert nn.MaxPool2d(2)(x).shape == (2, 3, 4, 3)
    assert nn.MaxPool2d(3, stride=2, padding=1)(x).shape == (2, 3, 4, 3)
    assert nn.AvgPool2d((2, 3))(x).shape == (2, 3, 4, 2)
    assert nn.AdaptiveAvgPool2d(1)(x).shape == (2, 3, 1, 1)
    np.testing.assert_allclose(nn.AdaptiveAvgPool2d((1, 1))(x).numpy()[..., 0, 0],
                               x.numpy().mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)
    assert repr(nn.MaxPool2d(2)) == \
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.AvgPool2d(2)) == "AvgPool2d(kernel_size=2, stride=2, padding=0)"
    assert repr(nn.AdaptiveAvgPool2d((1, 1))) == "AdaptiveAvgPool2d(output_size=(1, 1))"
    assert list(nn.MaxPool2d(2).state_dict()) == []
