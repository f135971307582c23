"""conv1d, conv_transpose1d/2d, padding='same'/'valid' and padding_mode, and their
modules, against torch (the same weights copied in): values and the gradients of
input, weight and bias, on odd shapes; bad inputs."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn as nn
import aicraft.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
rng = np.random.default_rng(7)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def run_both(fa, ft, arrays, *args, **kwargs):
    """fa on aicraft tensors, ft on torch's; a random output gradient through both."""
    xa = [ac.tensor(a, requires_grad=True) if a is not None else None for a in arrays]
    xt = [torch.tensor(a, requires_grad=True) if a is not None else None for a in arrays]
    out, out_t = fa(*xa, *args, **kwargs), ft(*xt, *args, **kwargs)
    assert out.shape == tuple(out_t.shape)
    g = arr(*out_t.shape)
    out.backward(ac.tensor(g))
    out_t.backward(torch.tensor(g))
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-4, atol=1e-4)
    for a, t in zip(xa, xt):
        if a is not None:
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n, cin, cout, h, w, k, stride, pad, out_pad, groups, dil", [
    (2, 4, 6, 5, 7, (3, 2), (2, 1), (1, 0), (1, 0), 2, (1, 2)),
    (1, 3, 2, 4, 4, 3, 1, 1, 0, 1, 1),       # Winograd's 3x3 shape
    (2, 2, 4, 3, 5, (2, 3), 3, (0, 2), (2, 1), 2, 1),
    (3, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1),
    (2, 6, 3, 4, 3, 4, 2, 1, 0, 3, 1),       # DCGAN's 4x4, stride 2
    (1, 2, 2, 3, 3, 2, 1, 0, 1, 1, 2),       # output_padding < dilation, not < stride
])
def test_conv_transpose2d_matches_torch(n, cin, cout, h, w, k, stride, pad, out_pad, groups, dil):
    kk = (k, k) if isinstance(k, int) else k
    x, wt, b = arr(n, cin, h, w), arr(cin, cout // groups, *kk), arr(cout)
    run_both(F.conv_transpose2d, TF.conv_transpose2d, [x, wt, b], stride, pad, out_pad, groups, dil)


def test_conv_transpose2d_unbatched_and_without_bias():
    run_both(lambda x, w: F.conv_transpose2d(x, w, stride=2),
             lambda x, w: TF.conv_transpose2d(x, w, stride=2), [arr(3, 4, 5), arr(3, 2, 3, 3)])


@pytest.mark.parametrize("stride, pad, out_pad, groups, dil", [(2, 1, 1, 1, 1), (1, 0, 0, 2, 2),
                                                                (3, 2, 2, 1, 1)])
def test_conv_transpose1d_matches_torch(stride, pad, out_pad, groups, dil):
    x, w, b = arr(2, 4, 9), arr(4, 6 // groups, 3), arr(6)
    run_both(F.conv_transpose1d, TF.conv_transpose1d, [x, w, b], stride, pad, out_pad, groups, dil)


@pytest.mark.parametrize("padding", [0, 2, "same", "valid"])
@pytest.mark.parametrize("stride, dil, groups", [(1, 1, 1), (1, 2, 2), (2, 1, 2)])
def test_conv1d_matches_torch(padding, stride, dil, groups):
    if padding == "same" and stride != 1:
        pytest.skip("torch refuses 'same' with stride")
    x, w, b = arr(2, 4, 11), arr(6, 4 // groups, 4), arr(6)
    run_both(F.conv1d, TF.conv1d, [x, w, b], stride, padding, dil, groups)


def test_conv2d_same_with_even_kernel_pads_right():
    run_both(lambda x, w: F.conv2d(x, w, padding="same", dilation=(1, 3)),
             lambda x, w: TF.conv2d(x, w, padding="same", dilation=(1, 3)),
             [arr(2, 3, 6, 7), arr(4, 3, 2, 4)])


def copy_state(module, torch_module):
    module.load_state_dict({k: ac.tensor(v.detach().numpy())
                            for k, v in torch_module.state_dict().items()})


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("padding", [2, "same"])
def test_conv_modules_padding_modes_match_torch(mode, dims, padding):
    cls, tcls = (nn.Conv1d, torch.nn.Conv1d) if dims == 1 else (nn.Conv2d, torch.nn.Conv2d)
    k = 4 if padding == "same" else 3
    m, mt = cls(4, 6, k, padding=padding, padding_mode=mode, groups=2), \
        tcls(4, 6, k, padding=padding, padding_mode=mode, groups=2)
    copy_state(m, mt)
    x = arr(2, 4, 9) if dims == 1 else arr(2, 4, 6, 7)
    xa, xt = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, out_t = m(xa), mt(xt)
    out.sum().backward()
    out_t.sum().backward()
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m.weight.grad.numpy(), mt.weight.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dims", [1, 2])
def test_conv_transpose_modules_match_torch(dims):
    cls, tcls = (nn.ConvTranspose1d, torch.nn.ConvTranspose1d) if dims == 1 else \
        (nn.ConvTranspose2d, torch.nn.ConvTranspose2d)
    m, mt = cls(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), \
        tcls(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    copy_state(m, mt)
    assert m.weight.shape == tuple(mt.weight.shape)
    x = arr(2, 4, 5) if dims == 1 else arr(2, 4, 5, 3)
    xa, xt = ac.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, out_t = m(xa), mt(xt)
    (out * out).sum().backward()
    (out_t * out_t).sum().backward()
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-4, atol=1e-4)
    for a, t in ((xa, xt), (m.weight, mt.weight), (m.bias, mt.bias)):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_conv_transpose2d_output_size_picks_output_padding():
    m, mt = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1), \
        torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    copy_state(m, mt)
    x = arr(1, 3, 4, 4)
    out = m(ac.tensor(x), output_size=[8, 8])
    np.testing.assert_allclose(out.numpy(), mt(torch.tensor(x), output_size=[8, 8]).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="valid sizes range"):
        m(ac.tensor(x), output_size=[12, 12])


def test_constructors_take_torch_signatures():
    m = nn.ConvTranspose2d(4, 2, 3, 2, 1, 1, 1, True, 1, "zeros", "cpu", ac.float32)
    assert m.weight.shape == (4, 2, 3, 3) and m.output_padding == (1, 1)
    assert nn.Conv1d(2, 3, 3, device="cpu", dtype=ac.float32).weight.shape == (3, 2, 3)
    with pytest.raises(TypeError, match="float32"):
        nn.Conv1d(2, 3, 3, dtype=ac.float64)
    with pytest.raises(ValueError, match="zeros"):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    assert "padding_mode=reflect" in repr(nn.Conv2d(1, 1, 3, padding=1, padding_mode="reflect"))


def test_bad_inputs_raise_clearly():
    x, w = ac.tensor(arr(1, 4, 5, 5)), ac.tensor(arr(4, 2, 3, 3))
    with pytest.raises(ac.ShapeError, match="conv_transpose2d: input .* has 3 channels"):
        F.conv_transpose2d(ac.tensor(arr(1, 3, 5, 5)), w)
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ValueError, match="groups"):
        F.conv_transpose2d(x, w, groups=3)
    with pytest.raises(ac.ShapeError, match="output of"):
        F.conv_transpose2d(ac.tensor(arr(1, 4, 1, 1)), w, padding=2)
    with pytest.raises(ValueError, match="bias"):
        F.conv_transpose2d(x, w, ac.zeros(3))
    with pytest.raises(TypeError, match="integer tensor"):
        F.conv_transpose2d(ac.zeros(1, 4, 2, 2, dtype=ac.int64), w)
    with pytest.raises(ac.ShapeError, match="conv1d"):
        F.conv1d(ac.zeros(1, 2, 3, 4), ac.zeros(2, 2, 3))
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv1d(1, 1, 3, padding_mode="mirror")
    y = F.conv_transpose2d(x, w)                # still usable afterwards
    assert y.shape == (1, 2, 7, 7)


def test_integer_convolutions_are_exact_as_torch():
    big = 2 ** 40 + 1                       # float32 would round it
    x = rng.integers(-9, 9, (2, 4, 5, 6))
    x[0, 0, 0, 0] = big
    w = rng.integers(-3, 3, (6, 2, 3, 2))
    b = rng.integers(-5, 5, 6)
    for fa, ft, args in ((F.conv2d, TF.conv2d, (1, 1, 1, 2)),
                         (F.conv2d, TF.conv2d, ((2, 1), (0, 2), (1, 2), 2))):
        got = fa(ac.tensor(x), ac.tensor(w), ac.tensor(b), *args)
        assert got.dtype == ac.int64
        np.testing.assert_array_equal(got.numpy(), ft(torch.tensor(x), torch.tensor(w),
                                                      torch.tensor(b), *args).numpy())
    wt = rng.integers(-3, 3, (4, 3, 3, 2))
    np.testing.assert_array_equal(
        F.conv_transpose2d(ac.tensor(x), ac.tensor(wt), None, 2, 1, 1, 2, (1, 2)).numpy(),
        TF.conv_transpose2d(torch.tensor(x), torch.tensor(wt), None, 2, 1, 1, 2, (1, 2)).numpy())
    x1, w1 = rng.integers(-9, 9, (2, 4, 7)), rng.integers(-3, 3, (3, 4, 2))
    np.testing.assert_array_equal(F.conv1d(ac.tensor(x1), ac.tensor(w1)).numpy(),
                                  TF.conv1d(torch.tensor(x1), torch.tensor(w1)).numpy())


@pytest.mark.parametrize("stride, padding, out_pad, groups, dil", [(1, 0, 0, 1, 1),
                                                                  (2, 1, 1, 2, 1),
                                                                  ((1, 2, 3), (0, 1, 2), (0, 1, 2),
                                                                   1, (2, 1, 1))])
def test_conv_transpose3d_matches_torch(stride, padding, out_pad, groups, dil):
    x, w, b = arr(2, 4, 3, 4, 3), arr(4, 6 // groups, 2, 3, 3), arr(6)
    run_both(F.conv_transpose3d, TF.conv_transpose3d, [x, w, b], stride, padding, out_pad, groups,
             dil)
    m, mt = nn.ConvTranspose3d(4, 6, 3, 2, 1, 1, groups), \
        torch.nn.ConvTranspose3d(4, 6, 3, 2, 1, 1, groups)
    copy_state(m, mt)
    np.testing.assert_allclose(m(ac.tensor(x)).numpy(), mt(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-4)
