"""conv2d (aicraft.nn.functional.conv2d over C's ac_conv2d) and nn.Conv2d:
forward against a float64 NumPy convolution written here, gradients against
central differences of it over combinations of stride, padding, dilation,
groups and odd sizes, results independent of the thread count, shape errors,
and the module's parameters, initialisation and state_dict."""
import math

import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn
from conftest import check_gradients, numeric_grad
from thread_counts import assert_same_for_thread_counts

rng = np.random.default_rng(5)


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def np_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """float64 cross-correlation, PyTorch's conv2d, one kernel tap at a time."""
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, f, oh, ow))
    fg = f // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * fg:(g + 1) * fg]
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
                cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
                patch = xs[:, :, rows, cols]
                out[:, g * fg:(g + 1) * fg] += np.einsum("nchw,fc->nfhw", patch, ws[:, :, i, j])
    if b is not None:
        out += np.asarray(b, np.float64)[None, :, None, None]
    return out[0] if unbatched else out


# (x shape, weight shape, stride, padding, dilation, groups)
CASES = [
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, 1, 1, 1),              # "same" 3x3
    ((1, 2, 8, 9), (3, 2, 3, 2), (2, 1), (1, 0), (1, 2), 1),  # mixed stride/pad/dilation
    ((2, 4, 9, 7), (6, 2, 3, 3), 2, 1, 1, 2),              # groups
    ((1, 6, 5, 5), (6, 1, 3, 3), 1, 1, 1, 6),              # depthwise
    ((2, 6, 5, 4), (9, 2, 1, 1), 1, 0, 1, 3),              # 1x1, read in place, groups
    ((1, 3, 6, 7), (2, 3, 1, 1), 2, 0, 1, 1),              # 1x1 strided
    ((1, 2, 11, 10), (3, 2, 5, 3), 3, 2, 2, 1),            # odd sizes, large stride
    ((2, 1, 5, 5), (4, 1, 5, 5), 1, 0, 1, 1),              # kernel covers the input
    ((1, 1, 3, 4), (2, 1, 3, 3), 1, 2, 1, 1),              # padding larger than the output needs
    ((2, 5, 6), (4, 2, 2, 3), 1, (0, 1), 1, 1),            # unbatched (C, H, W)
]


def conv_fn(stride, padding, dilation, groups):
    return lambda x, w, b=None: F.conv2d(x, w, b, stride, padding, dilation, groups)


def np_fn(stride, padding, dilation, groups):
    return lambda x, w, b=None: np_conv2d(x, w, b, stride, padding, dilation, groups)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation, groups", CASES)
def test_forward_matches_numpy(x_shape, w_shape, stride, padding, dilation, groups):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    y = F.conv2d(ac.tensor(x), ac.tensor(w), ac.tensor(b), stride, padding, dilation, groups)
    expected = np_conv2d(x, w, b, stride, padding, dilation, groups)
    assert y.shape == expected.shape
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation, groups", CASES)
def test_gradients_with_bias(x_shape, w_shape, stride, padding, dilation, groups):
    arrays = [rng.standard_normal(x_shape), rng.standard_normal(w_shape),
              rng.standard_normal(w_shape[0])]
    check_gradients(conv_fn(stride, padding, dilation, groups),
                    np_fn(stride, padding, dilation, groups), arrays, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation, groups", CASES[:4])
def test_gradients_without_bias(x_shape, w_shape, stride, padding, dilation, groups):
    arrays = [rng.standard_normal(x_shape), rng.standard_normal(w_shape)]
    check_gradients(lambda x, w: F.conv2d(x, w, None, stride, padding, dilation, groups),
                    lambda x, w: np_conv2d(x, w, None, stride, padding, dilation, groups),
                    arrays, rtol=1e-3, atol=1e-4)


def test_weight_gradient_alone():
    """Input without grad (a first layer): only weight and bias get gradients."""
    x = rng.standard_normal((3, 1, 9, 8)).astype(np.float32)
    w = ac.tensor(rng.standard_normal((5, 1, 3, 3)), requires_grad=True)
    b = ac.tensor(rng.standard_normal(5), requires_grad=True)
    xt = ac.tensor(x)
    y = F.conv2d(xt, w, b, padding=1)
    g = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(ac.tensor(g))
    assert xt.grad is None
    numeric = numeric_grad(lambda w64, b64: float(np.sum(np_conv2d(x, w64, b64, padding=1) * g)),
                           [w.numpy(), b.numpy()])
    np.testing.assert_allclose(w.grad.numpy(), numeric[0], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(b.grad.numpy(), numeric[1], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("trained", ["bias", "weight", "input"])
def test_one_input_trained_alone(trained):
    """Each of input, weight and bias gets its gradient when it is the only one asked for."""
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    names = ["input", "weight", "bias"]
    tensors = [ac.tensor(a, requires_grad=(name == trained)) for a, name in zip((x, w, b), names)]
    y = F.conv2d(*tensors, stride=(1, 2), padding=1)
    g = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(ac.tensor(g))
    i = names.index(trained)
    arrays = [x, w, b]

    def loss(a):
        args = arrays[:i] + [a] + arrays[i + 1:]
        return float(np.sum(np_conv2d(*args, stride=(1, 2), padding=1) * g))

    numeric = numeric_grad(loss, [arrays[i]])[0]
    np.testing.assert_allclose(tensors[i].grad.numpy(), numeric, rtol=1e-3, atol=1e-3)
    assert all(t.grad is None for j, t in enumerate(tensors) if j != i)


def sampled_gradient_check(x, w, b, kwargs, samples=12):
    """Gradients of sum(conv * g) at a few random entries, by central differences."""
    xt, wt, bt = (ac.tensor(a, requires_grad=True) for a in (x, w, b))
    y = F.conv2d(xt, wt, bt, **kwargs)
    g = rng.standard_normal(y.shape).astype(np.float32)
    np.testing.assert_allclose(y.numpy(), np_conv2d(x, w, b, **kwargs), rtol=1e-4, atol=1e-4)
    y.backward(ac.tensor(g))
    arrays = [np.asarray(a, np.float64) for a in (x, w, b)]

    def loss():
        return float(np.sum(np_conv2d(*arrays, **kwargs) * g))

    for array, tensor in zip(arrays, (xt, wt, bt)):
        grad = tensor.grad.numpy()
        for index in zip(*(rng.integers(0, s, samples) for s in array.shape)):
            old = array[index]
            array[index] = old + 1e-3
            up = loss()
            array[index] = old - 1e-3
            down = loss()
            array[index] = old
            assert grad[index] == pytest.approx((up - down) / 2e-3, rel=1e-3, abs=1e-3)


def test_large_input_is_cut_into_bands():
    """An input whose unfolded matrix exceeds one block: output rows go in bands
    (padding 2 rows high keeps it off the Winograd path)."""
    x = rng.standard_normal((2, 16, 40, 200)).astype(np.float32)
    w = (rng.standard_normal((8, 16, 3, 3)) * 0.1).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    sampled_gradient_check(x, w, b, dict(padding=(2, 1)))


def test_large_strided_input_is_cut_into_bands():
    x = rng.standard_normal((1, 12, 50, 160)).astype(np.float32)
    w = (rng.standard_normal((6, 4, 5, 4)) * 0.1).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    sampled_gradient_check(x, w, b, dict(stride=(2, 3), padding=(2, 1), dilation=(1, 2), groups=3))


@pytest.mark.parametrize("x_shape, w_shape, kwargs", [
    ((3, 5, 11, 9), (7, 5, 3, 3), dict(stride=2, padding=1)),             # ResNet's downsampling, odd sides
    ((1, 17, 8, 8), (33, 17, 3, 3), dict(stride=2, padding=1)),           # batch 1, even map
    ((3, 3, 13, 10), (4, 3, 5, 3), dict(stride=(3, 2), padding=(2, 0))),  # mixed strides and pads
    ((2, 4, 12, 11), (6, 2, 2, 3), dict(stride=2, padding=(0, 1), dilation=(2, 1), groups=2)),
    ((2, 3, 9, 8), (5, 3, 3, 3), dict(stride=1, padding=0)),              # narrower output, stride 1
    ((3, 4, 10, 9), (6, 4, 2, 2), dict(stride=3)),                        # kernel narrower than the stride
])
def test_strided_input_through_padded_column_phases(x_shape, w_shape, kwargs):
    """A stride (or an output narrower than its input) unfolds from the input rows
    zero-padded and split into the stride's column phases; a kernel narrower than its
    stride reads the input directly. Values and sampled gradients against the float64
    sum."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) * 0.3).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    sampled_gradient_check(x, w, b, kwargs)


def test_padding_same_and_valid():
    x = ac.tensor(rng.standard_normal((1, 2, 6, 5)))
    w = ac.tensor(rng.standard_normal((3, 2, 3, 5)))
    assert F.conv2d(x, w, padding="same").shape == (1, 3, 6, 5)
    assert F.conv2d(x, w, padding="valid").shape == (1, 3, 4, 1)
    np.testing.assert_allclose(F.conv2d(x, w, padding="same").numpy(),
                               np_conv2d(x.numpy(), w.numpy(), padding=(1, 2)),
                               rtol=1e-5, atol=1e-5)


# (x shape, w shape, conv2d keywords): the im2col path a band or an image at a
# time, images side by side in blocks (few pixels each), Winograd, and Winograd
# on images of few pixels with many channels, whose transforms the threads split
# (also with odd sides, and channels and filters that leave a part of the
# transforms' chunks of 32), Winograd along the tile rows of a wide map (odd
# sides, a row past a chunk of 32 tiles), and im2col and 1x1 convolutions whose
# dW (with db) has more elements than one task of the threads' sum over chunks.
THREAD_CASES = [
    ((2, 8, 40, 40), (16, 8, 3, 3), dict(padding=1)),
    ((17, 8, 12, 12), (16, 8, 3, 3), dict(padding=1)),
    ((40, 6, 9, 7), (12, 3, 3, 3), dict(stride=2, padding=1, groups=2)),
    ((33, 32, 6, 30), (40, 32, 3, 3), dict(padding=1)),
    ((8, 136, 4, 4), (140, 136, 3, 3), dict(padding=1)),
    ((9, 165, 5, 7), (75, 165, 3, 3), dict(padding=1)),
    ((5, 34, 7, 65), (33, 34, 3, 3), dict(padding=1)),
    ((17, 64, 9, 9), (48, 64, 3, 3), dict(stride=2, padding=1)),
    ((17, 40, 5, 5), (501, 40, 1, 1), dict()),
]


@pytest.mark.parametrize("batch", [1, 3, 17, 40])
@pytest.mark.parametrize("x_shape, w_shape, kwargs", THREAD_CASES)
def test_results_do_not_depend_on_thread_count(batch, x_shape, w_shape, kwargs):
    x = rng.standard_normal((batch,) + x_shape[1:]).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)

    def run():
        xt, wt, bt = (ac.tensor(a, requires_grad=True) for a in (x, w, b))
        y = F.conv2d(xt, wt, bt, **kwargs)
        g = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
        y.backward(ac.tensor(g))
        return [y.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()]
    assert_same_for_thread_counts(run)


@pytest.mark.parametrize("x_shape, w_shape, kwargs", [
    ((33, 5, 6, 5), (7, 5, 3, 3), dict(padding=1)),                       # 30 pixels an image
    ((19, 6, 9, 8), (4, 3, 3, 2), dict(stride=2, padding=(1, 0), groups=2)),
    ((21, 5, 7, 7), (6, 5, 1, 1), dict(stride=2)),                        # strided 1x1 shortcut
    ((9, 4, 3, 3), (5, 4, 3, 3), dict(padding=1, dilation=2)),
])
def test_small_images_are_taken_in_blocks(x_shape, w_shape, kwargs):
    """Images of few pixels go side by side into one product; the batches' sizes
    leave a short last block."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) * 0.3).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    sampled_gradient_check(x, w, b, kwargs)


@pytest.mark.parametrize("x_shape, w_shape", [
    ((3, 32, 7, 33), (32, 32, 3, 3)),      # odd sides: clipped edge tiles
    ((1, 260, 3, 2), (260, 260, 3, 3)),    # the last tile row's lower half in the padding
    ((1, 200, 2, 3), (233, 200, 3, 3)),
    ((2, 45, 6, 17), (37, 45, 3, 3)),      # channels and filters past a chunk of 32
    ((40, 5, 15), (40, 40, 3, 3)),         # unbatched
    ((2, 33, 5, 31), (34, 33, 3, 3)),      # wide maps: along the tile rows, odd sides
    ((1, 32, 4, 67), (35, 32, 3, 3)),      # a tile row past a chunk of 32 tiles
])
def test_winograd_3x3_matches_the_direct_sum(x_shape, w_shape):
    """3x3, stride 1, padding 1 with at least 32 channels and filters on a map of
    at least 2x2 runs Winograd's F(2x2, 3x3) forward, for dx and for dW: values
    and gradients against the float64 direct sum."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) * 0.4 / math.sqrt(w_shape[1])).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    sampled_gradient_check(x, w, b, dict(padding=1))


@pytest.mark.parametrize("x_shape, w_shape", [
    ((5, 32, 9, 20), (48, 32, 3, 3)),
    ((67, 160, 4, 4), (160, 160, 3, 3)),   # many images a block, a short last block
    ((3, 64, 32, 32), (64, 64, 3, 3)),     # ResNet-18's first stage, along the tile rows
])
def test_winograd_without_bias_matches_pytorch(x_shape, w_shape):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) * 0.4 / math.sqrt(w_shape[1])).astype(np.float32)
    xt, wt = ac.tensor(x, requires_grad=True), ac.tensor(w, requires_grad=True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y, ty = F.conv2d(xt, wt, padding=1), torch.nn.functional.conv2d(tx, tw, padding=1)
    g = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(ac.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(xt.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(wt.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_winograd_with_kernels_past_16_mb_matches_pytorch_for_any_thread_count():
    """Transformed kernels of 16 MB and more (512 channels x 528 filters here, and the
    adjoint's 528 x 512 for dx) are written by streaming stores where AVX-512 runs, a
    last chunk of 16 filters through the caches: values and gradients against PyTorch,
    the same bits for 1, 2 and 3 threads."""
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 512, 3, 5)).astype(np.float32)
    w = (rng.standard_normal((528, 512, 3, 3)) * 0.02).astype(np.float32)
    g = rng.standard_normal((2, 528, 3, 5)).astype(np.float32)

    def run():
        xt, wt = ac.tensor(x, requires_grad=True), ac.tensor(w, requires_grad=True)
        y = F.conv2d(xt, wt, padding=1)
        y.backward(ac.tensor(g))
        return [y.numpy(), xt.grad.numpy(), wt.grad.numpy()]
    y, dx, dw = assert_same_for_thread_counts(run)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_empty_batch():
    x = ac.tensor(np.zeros((0, 2, 5, 5), np.float32), requires_grad=True)
    w = ac.tensor(rng.standard_normal((3, 2, 3, 3)), requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    assert y.shape == (0, 3, 5, 5)
    y.sum().backward()
    assert np.array_equal(w.grad.numpy(), np.zeros((3, 2, 3, 3), np.float32))


# ---- errors ----------------------------------------------------------------------

def test_channel_mismatch_is_a_shape_error():
    x, w = ac.zeros(1, 3, 5, 5), ac.zeros(2, 4, 3, 3)
    with pytest.raises(ac.ShapeError, match="conv2d: input has 3 channels, weight expects 4"):
        F.conv2d(x, w)


def test_channels_not_divisible_by_groups():
    with pytest.raises(ac.ShapeError,
                       match="conv2d: input .* has 6 channels, not divisible by groups 4"):
        F.conv2d(ac.zeros(1, 6, 5, 5), ac.zeros(4, 2, 3, 3), groups=4)
    with pytest.raises(ac.ShapeError,
                       match="conv2d: weight .* has 3 filters, not divisible by groups 2"):
        F.conv2d(ac.zeros(1, 4, 5, 5), ac.zeros(3, 2, 3, 3), groups=2)


def test_kernel_larger_than_padded_input():
    with pytest.raises(ac.ShapeError,
                       match=r"conv2d: kernel 5x5 .* larger than the padded input 4x4"):
        F.conv2d(ac.zeros(1, 1, 4, 4), ac.zeros(1, 1, 5, 5))
    with pytest.raises(ac.ShapeError, match="larger than the padded input"):
        F.conv2d(ac.zeros(1, 1, 5, 5), ac.zeros(1, 1, 3, 3), dilation=3)
    assert F.conv2d(ac.zeros(1, 1, 4, 4), ac.zeros(1, 1, 5, 5), padding=1).shape == (1, 1, 2, 2)


def test_bad_ranks_and_bias():
    with pytest.raises(ac.ShapeError, match=r"conv2d: input \(5, 5\) must be \(N, C, H, W\)"):
        F.conv2d(ac.zeros(5, 5), ac.zeros(1, 1, 3, 3))
    with pytest.raises(ac.ShapeError, match="conv2d: weight .* must be"):
        F.conv2d(ac.zeros(1, 1, 5, 5), ac.zeros(1, 9))
    with pytest.raises(ac.ShapeError, match=r"conv2d: bias \(3,\) does not fit weight"):
        F.conv2d(ac.zeros(1, 1, 5, 5), ac.zeros(2, 1, 3, 3), ac.zeros(3))


@pytest.mark.parametrize("kwargs, message", [
    (dict(stride=0), "stride"), (dict(dilation=0), "dilation"), (dict(padding=-1), "padding"),
    (dict(groups=0), "groups"),
])
def test_bad_arguments_are_value_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        F.conv2d(ac.zeros(1, 2, 5, 5), ac.zeros(2, 2, 3, 3), **kwargs)


def test_library_usable_after_error():
    with pytest.raises(ac.ShapeError):
        F.conv2d(ac.zeros(1, 3, 5, 5), ac.zeros(2, 4, 3, 3))
    y = F.conv2d(ac.ones(1, 1, 3, 3), ac.ones(1, 1, 3, 3))
    assert y.numpy().reshape(-1).tolist() == [9.0]


# ---- nn.Conv2d ---------------------------------------------------------------------

def test_module_parameters_and_state_dict():
    conv = nn.Conv2d(4, 6, (3, 5), stride=2, padding=(1, 2), groups=2)
    assert conv.weight.shape == (6, 2, 3, 5)
    assert conv.bias.shape == (6,)
    assert list(conv.state_dict().keys()) == ["weight", "bias"]
    bound = 1 / math.sqrt(2 * 3 * 5)
    assert np.abs(conv.weight.numpy()).max() <= bound + 1e-6
    assert np.abs(conv.bias.numpy()).max() <= bound + 1e-6
    assert repr(conv) == "Conv2d(4, 6, kernel_size=(3, 5), stride=(2, 2), padding=(1, 2), groups=2)"
    no_bias = nn.Conv2d(1, 2, 3, bias=False)
    assert no_bias.bias is None and list(no_bias.state_dict()) == ["weight"]


def test_module_with_an_empty_kernel_is_made_as_pytorch_makes_it():
    conv = nn.Conv2d(2, 3, 0)   # found by atheris: 1 / sqrt(fan_in) with fan_in 0
    assert conv.weight.shape == (3, 2, 0, 0)
    np.testing.assert_array_equal(conv.bias.numpy(), np.zeros(3, np.float32))


def test_module_forward_matches_functional():
    conv = nn.Conv2d(2, 3, 3, padding=1, dilation=1)
    x = ac.tensor(rng.standard_normal((2, 2, 6, 6)))
    expected = np_conv2d(x.numpy(), conv.weight.numpy(), conv.bias.numpy(), padding=1)
    np.testing.assert_allclose(conv(x).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_module_trains_inside_checkpoint():
    conv = nn.Conv2d(1, 2, 3)
    x = ac.tensor(rng.standard_normal((2, 1, 5, 5)))
    before = ac.memory_stats()["bytes_in_use"]
    for _ in range(3):
        with ac.checkpoint():
            conv.zero_grad()
            conv(x).sum().backward()
    assert conv.weight.grad is not None and conv.weight.grad.shape == (2, 1, 3, 3)
    conv.zero_grad()
    assert ac.memory_stats()["bytes_in_use"] <= before


def test_module_rejects_bad_configuration():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(TypeError, match="input must be a Tensor"):
        nn.Conv2d(1, 1, 3)(np.zeros((1, 1, 5, 5)))
