"""F.pad, F.interpolate, pixel shuffles, the pools' options, group/instance/RMS/local
response norms, scaled_dot_product_attention, channel and alpha dropouts, bilinear, and
their modules, against torch: values and input gradients on odd shapes; bad inputs."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn as nn
import aicraft.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
rng = np.random.default_rng(11)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def run_both(fa, ft, arrays, *args, atol=1e-5, **kwargs):
    xa = [ac.tensor(a, requires_grad=True) for a in arrays]
    xt = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, out_t = fa(*xa, *args, **kwargs), ft(*xt, *args, **kwargs)
    if isinstance(out, tuple):
        np.testing.assert_array_equal(out[1].numpy(), out_t[1].numpy())
        assert out[1].dtype == ac.int64
        out, out_t = out[0], out_t[0]
    assert out.shape == tuple(out_t.shape)
    g = arr(*out_t.shape)
    out.backward(ac.tensor(g))
    out_t.backward(torch.tensor(g))
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-4, atol=atol)
    for a, t in zip(xa, xt):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=atol)


# ---- pad ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads, shape", [((1, 2), (3, 5)), ((2, 1, 3, 0), (2, 3, 4, 5)),
                                         ((1, 1, 2, 2, 1, 0), (1, 2, 3, 4, 5))])
def test_pad_matches_torch(mode, pads, shape):
    kwargs = {"value": 1.5} if mode == "constant" else {}
    run_both(F.pad, TF.pad, [arr(*shape)], pads, mode, **kwargs)


def test_pad_constant_crops_with_negative_pads_and_keeps_int64():
    out = F.pad(ac.tensor([[1, 2, 3]]), (1, -1), value=7)
    assert out.dtype == ac.int64 and out.tolist() == [[7, 1, 2]]
    run_both(F.pad, TF.pad, [arr(2, 5, 3)], (-1, 2, 0, -2))


@pytest.mark.parametrize("cls, tcls, pad, shape", [
    (nn.ZeroPad2d, torch.nn.ZeroPad2d, (1, 0, 2, 1), (1, 2, 3, 3)),
    (nn.ReflectionPad1d, torch.nn.ReflectionPad1d, 2, (2, 3, 4)),
    (nn.ReflectionPad2d, torch.nn.ReflectionPad2d, (1, 2, 0, 1), (1, 2, 3, 4)),
    (nn.ReplicationPad1d, torch.nn.ReplicationPad1d, (3, 1), (2, 4)),
    (nn.ReplicationPad2d, torch.nn.ReplicationPad2d, 2, (2, 1, 2, 3)),
    (nn.CircularPad2d, torch.nn.CircularPad2d, 1, (1, 1, 3, 3)),
])
def test_padding_modules_match_torch(cls, tcls, pad, shape):
    x = arr(*shape)
    np.testing.assert_array_equal(cls(pad)(ac.tensor(x)).numpy(), tcls(pad)(torch.tensor(x)).numpy())


def test_constant_pad_modules_take_value():
    x = arr(2, 3, 4)
    np.testing.assert_array_equal(nn.ConstantPad1d((1, 2), -3.0)(ac.tensor(x)).numpy(),
                                  torch.nn.ConstantPad1d((1, 2), -3.0)(torch.tensor(x)).numpy())
    np.testing.assert_array_equal(nn.ConstantPad2d(1, 2.5)(ac.tensor(x)).numpy(),
                                  torch.nn.ConstantPad2d(1, 2.5)(torch.tensor(x)).numpy())


def test_pad_bad_inputs():
    x = ac.zeros(1, 2, 3)
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(ValueError, match="less than or equal"):
        F.pad(ac.zeros(3), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="Padding size should be less"):
        F.pad(x, (3, 0), "reflect")
    with pytest.raises(NotImplementedError, match="pads the last"):
        F.pad(ac.zeros(1, 1, 2, 3), (1, 1), "reflect")
    with pytest.raises(NotImplementedError, match="mode"):
        F.pad(x, (1, 1), "mirror")
    with pytest.raises(ValueError, match="wrapping around"):
        F.pad(x, (4, 0), "circular")
    with pytest.raises(TypeError):
        F.pad([1.0], (1, 1))


# ---- interpolate and pixel shuffles --------------------------------------------------

@pytest.mark.parametrize("shape, mode", [((2, 3, 5), "linear"), ((2, 3, 5), "nearest"),
                                         ((2, 3, 4, 5), "bilinear"), ((2, 3, 4, 5), "bicubic"),
                                         ((2, 3, 4, 5), "nearest"), ((2, 3, 4, 5), "nearest-exact"),
                                         ((1, 2, 3, 4, 5), "trilinear"),
                                         ((2, 3, 4, 5), "area")])
@pytest.mark.parametrize("kwargs", [{"size": 7}, {"scale_factor": 2}, {"scale_factor": 1.7},
                                    {"scale_factor": 0.6}, {"size": 3}])
@pytest.mark.parametrize("align_corners", [None, False, True])
def test_interpolate_matches_torch(shape, mode, kwargs, align_corners):
    interpolating = mode in ("linear", "bilinear", "bicubic", "trilinear")
    if align_corners is not None and not interpolating:
        pytest.skip("align_corners is for the interpolating modes")
    run_both(F.interpolate, TF.interpolate, [arr(*shape)], mode=mode, align_corners=align_corners,
             **kwargs)


def test_upsample_modules_match_torch():
    x = arr(2, 3, 4, 5)
    for m, mt in ((nn.Upsample(scale_factor=2, mode="bilinear"),
                   torch.nn.Upsample(scale_factor=2, mode="bilinear")),
                  (nn.UpsamplingNearest2d(size=(5, 7)), torch.nn.UpsamplingNearest2d(size=(5, 7))),
                  (nn.UpsamplingBilinear2d(scale_factor=3), torch.nn.UpsamplingBilinear2d(scale_factor=3))):
        np.testing.assert_allclose(m(ac.tensor(x)).numpy(), mt(torch.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-5)


def test_interpolate_bad_inputs():
    x = ac.zeros(1, 1, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(NotImplementedError, match="needs 3D input"):
        F.interpolate(x, size=3, mode="linear")
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(x, size=3, mode="nearest", align_corners=True)
    with pytest.raises(NotImplementedError, match="antialias"):
        F.interpolate(x, size=3, mode="bilinear", antialias=True)
    with pytest.raises(ValueError, match="same number of spatial"):
        F.interpolate(x, size=(3, 3, 3))


def test_pixel_shuffle_round_trip_and_torch():
    x = arr(2, 8, 3, 5)
    run_both(F.pixel_shuffle, TF.pixel_shuffle, [x], 2)
    run_both(F.pixel_unshuffle, TF.pixel_unshuffle, [arr(1, 3, 3, 6, 9)], 3)
    y = nn.PixelUnshuffle(2)(nn.PixelShuffle(2)(ac.tensor(x)))
    np.testing.assert_array_equal(y.numpy(), x)
    with pytest.raises(ValueError, match="divisible by the square"):
        F.pixel_shuffle(ac.zeros(1, 3, 2, 2), 2)
    with pytest.raises(ValueError, match="divisible by downscale"):
        F.pixel_unshuffle(ac.zeros(1, 1, 3, 4), 2)


# ---- pools ---------------------------------------------------------------------------

POOL_CASES = [(3, 2, 1, 1, True), (2, 2, 0, 1, True), (3, 1, 1, 2, False), (3, 2, 1, 2, True),
              ((2, 3), (1, 2), (1, 1), (2, 1), True), (2, None, 0, 1, False)]


@pytest.mark.parametrize("k, s, p, d, ceil", POOL_CASES)
@pytest.mark.parametrize("indices", [False, True])
def test_max_pools_match_torch(k, s, p, d, ceil, indices):
    run_both(F.max_pool2d, TF.max_pool2d, [arr(2, 3, 7, 9)], k, s, p, d, ceil, indices)
    first = (lambda v: v if isinstance(v, int) or v is None else v[0])
    run_both(F.max_pool1d, TF.max_pool1d, [arr(2, 3, 11)], first(k), first(s), first(p), first(d),
             ceil, indices)


@pytest.mark.parametrize("k, s, p, ceil, include, divisor", [
    (3, 2, 1, True, True, None), (3, 2, 1, True, False, None), (3, 2, 1, False, False, None),
    (2, 1, 1, False, True, 3), ((2, 3), (2, 2), (1, 1), True, False, None), (3, 3, 0, True, True, None)])
def test_avg_pools_match_torch(k, s, p, ceil, include, divisor):
    run_both(F.avg_pool2d, TF.avg_pool2d, [arr(2, 3, 7, 9)], k, s, p, ceil, include, divisor)
    first = (lambda v: v if isinstance(v, int) else v[0])
    run_both(F.avg_pool1d, TF.avg_pool1d, [arr(2, 3, 11)], first(k), first(s), first(p), ceil,
             include)


@pytest.mark.parametrize("size", [1, 3, (4, 5), (None, 2), 7])
def test_adaptive_pools_2d_match_torch(size):
    run_both(F.adaptive_max_pool2d, TF.adaptive_max_pool2d, [arr(2, 3, 7, 9)], size, True)
    run_both(F.adaptive_avg_pool2d, TF.adaptive_avg_pool2d, [arr(2, 3, 7, 9)], size)


@pytest.mark.parametrize("size", [1, 3, 5, 11])
def test_adaptive_pools_1d_match_torch(size):
    run_both(F.adaptive_max_pool1d, TF.adaptive_max_pool1d, [arr(2, 3, 11)], size, True)
    run_both(F.adaptive_avg_pool1d, TF.adaptive_avg_pool1d, [arr(2, 3, 11)], size)


def test_lp_pools_and_unpool_match_torch():
    run_both(F.lp_pool2d, TF.lp_pool2d, [np.abs(arr(2, 3, 7, 9)) + 0.1], 2, 3, 2)
    run_both(F.lp_pool1d, TF.lp_pool1d, [np.abs(arr(2, 3, 11)) + 0.1], 3, 2)
    x = arr(2, 3, 7, 9)
    out, idx = F.max_pool2d(ac.tensor(x), 2, return_indices=True)
    out_t, idx_t = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    run_both(lambda v: F.max_unpool2d(v, idx, 2, output_size=(7, 9)),
             lambda v: TF.max_unpool2d(v, idx_t, 2, output_size=(7, 9)), [out.numpy()])
    with pytest.raises(IndexError, match="invalid max index"):
        F.max_unpool2d(out, idx * 100, 2)


def test_pool_modules_take_torch_options():
    x = ac.tensor(arr(2, 3, 7, 9))
    y, idx = nn.MaxPool2d(3, 2, 1, return_indices=True, ceil_mode=True)(x)
    assert y.shape == (2, 3, 4, 5) and idx.dtype == ac.int64
    assert nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)(x).shape == (2, 3, 4, 5)
    assert nn.AdaptiveMaxPool2d((2, 3))(x).shape == (2, 3, 2, 3)
    assert nn.MaxPool1d(2)(ac.zeros(2, 3, 8)).shape == (2, 3, 4)
    assert nn.AvgPool1d(3, 1, 1)(ac.zeros(3, 8)).shape == (3, 8)
    assert nn.AdaptiveAvgPool1d(2)(ac.zeros(2, 3, 8)).shape == (2, 3, 2)
    assert nn.LPPool2d(2, 2)(ac.ones(1, 1, 4, 4)).shape == (1, 1, 2, 2)
    y, idx = nn.MaxPool2d(2, return_indices=True)(x)
    assert nn.MaxUnpool2d(2)(y, idx, output_size=(7, 9)).shape == (2, 3, 7, 9)


def test_pool_bad_inputs():
    with pytest.raises(ValueError, match="at most half"):
        F.max_pool2d(ac.zeros(1, 1, 8, 8), 3, padding=2, dilation=1)
    with pytest.raises(ValueError, match="must be >= 1"):
        F.max_pool2d(ac.zeros(1, 1, 8, 8), 2, dilation=0)
    with pytest.raises(ac.ShapeError, match="max_pool1d"):
        F.max_pool1d(ac.zeros(8), 2)
    with pytest.raises(ValueError, match="divisor"):
        F.avg_pool2d(ac.zeros(1, 1, 4, 4), 2, divisor_override=0)
    with pytest.raises(ValueError, match="output size"):
        F.adaptive_max_pool2d(ac.zeros(1, 1, 4, 4), 0)


# ---- norms ---------------------------------------------------------------------------

def test_group_and_instance_norm_match_torch():
    x, w, b = arr(2, 6, 5, 3), arr(6), arr(6)
    run_both(lambda *t: F.group_norm(t[0], 3, t[1], t[2]), lambda *t: TF.group_norm(t[0], 3, t[1], t[2]),
             [x, w, b])
    run_both(lambda v: F.group_norm(v, 2), lambda v: TF.group_norm(v, 2), [arr(3, 4, 7)])
    run_both(lambda *t: F.instance_norm(t[0], weight=t[1], bias=t[2]),
             lambda *t: TF.instance_norm(t[0], weight=t[1], bias=t[2]), [x, w, b])


def test_instance_norm_running_stats_match_torch():
    x = arr(3, 4, 5)
    rm, rv = arr(4), np.abs(arr(4)) + 0.5
    a_rm, a_rv, t_rm, t_rv = ac.tensor(rm), ac.tensor(rv), torch.tensor(rm), torch.tensor(rv)
    y = F.instance_norm(ac.tensor(x), a_rm, a_rv, momentum=0.3)
    y_t = TF.instance_norm(torch.tensor(x), t_rm, t_rv, momentum=0.3)
    np.testing.assert_allclose(y.numpy(), y_t.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(a_rm.numpy(), t_rm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a_rv.numpy(), t_rv.numpy(), rtol=1e-5, atol=1e-6)
    m = nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
    mt = torch.nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
    m(ac.tensor(x))
    mt(torch.tensor(x))
    m.eval()
    mt.eval()
    np.testing.assert_allclose(m(ac.tensor(x[0])).numpy(), mt(torch.tensor(x[0])).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_rms_and_local_response_norm_match_torch():
    x = arr(2, 6, 5, 3)
    run_both(lambda v, w: F.rms_norm(v, (5, 3), w), lambda v, w: TF.rms_norm(v, (5, 3), w),
             [x, arr(5, 3)])
    run_both(lambda v: F.rms_norm(v, 3, eps=1e-3), lambda v: TF.rms_norm(v, (3,), eps=1e-3), [x])
    run_both(lambda v: F.local_response_norm(v, 3), lambda v: TF.local_response_norm(v, 3), [x])
    run_both(lambda v: F.local_response_norm(v, 4, 1e-2, 0.5, 2.0),
             lambda v: TF.local_response_norm(v, 4, 1e-2, 0.5, 2.0), [arr(2, 5, 7)])


def test_norm_modules():
    x = ac.tensor(arr(2, 6, 4))
    gn = nn.GroupNorm(3, 6)
    assert gn(x).shape == (2, 6, 4) and gn.weight.shape == (6,)
    assert nn.RMSNorm([4], device="cpu")(x).shape == (2, 6, 4)
    assert nn.RMSNorm(4, elementwise_affine=False).weight is None
    assert nn.LayerNorm(4, elementwise_affine=True, bias=False).bias is None
    assert nn.InstanceNorm2d(6)(ac.tensor(arr(6, 3, 3))).shape == (6, 3, 3)
    assert nn.LocalResponseNorm(2)(x).shape == (2, 6, 4)
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match="divisible by num_groups"):
        F.group_norm(x, 4)
    with pytest.raises(ValueError, match="expected 2D or 3D"):
        nn.InstanceNorm1d(6)(ac.zeros(2, 6, 3, 3))
    with pytest.raises(TypeError, match="float32"):
        nn.GroupNorm(3, 6, dtype=ac.float64)


# ---- attention -------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float", "scale"])
def test_sdpa_matches_torch(kind):
    q, k, v = arr(2, 4, 3, 5), arr(2, 2, 6, 5), arr(2, 2, 6, 7)
    bool_mask = rng.random((3, 6)) > 0.4
    bool_mask[1] = False                       # a row with nothing to attend to: zeros
    float_mask = arr(3, 6)
    float_mask[2] = -np.inf
    extra, extra_t = {}, {}
    if kind == "causal":
        extra = extra_t = {"is_causal": True}
    elif kind == "bool":
        extra, extra_t = {"attn_mask": ac.tensor(bool_mask)}, {"attn_mask": torch.tensor(bool_mask)}
    elif kind == "float":
        extra, extra_t = {"attn_mask": ac.tensor(float_mask)}, {"attn_mask": torch.tensor(float_mask)}
    elif kind == "scale":
        extra = extra_t = {"scale": 0.3, "is_causal": True}
    run_both(lambda *t: F.scaled_dot_product_attention(*t, enable_gqa=True, **extra),
             lambda *t: TF.scaled_dot_product_attention(*t, enable_gqa=True, **extra_t), [q, k, v])


def test_sdpa_dropout_and_bad_inputs():
    q = ac.tensor(arr(2, 3, 4))
    assert F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).shape == (2, 3, 4)
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=ac.zeros(3, 3), is_causal=True)
    with pytest.raises(ValueError, match="do not fit"):
        F.scaled_dot_product_attention(q, ac.zeros(2, 3, 5), q)
    with pytest.raises(TypeError, match="bool or float32"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=ac.zeros(3, 3, dtype=ac.int64))


# ---- dropouts, bilinear, small modules ---------------------------------------------------

def test_channel_dropouts_take_the_ranks_torch_takes():
    ac.manual_seed(0)
    y = F.dropout1d(ac.ones(6, 40), 0.5).numpy()          # unbatched (C, L): whole rows
    assert all(len(set(row)) == 1 for row in y) and set(y.ravel()) <= {0.0, 2.0}
    y = F.dropout3d(ac.ones(5, 2, 2, 3), 0.5).numpy().reshape(5, -1)
    assert all(len(set(row)) == 1 for row in y)
    y = F.dropout2d(ac.ones(3, 4, 10), 0.5).numpy()       # 3-D read as (N, C, L)
    assert all(len(set(row)) == 1 for row in y.reshape(12, 10))
    m = nn.Dropout2d(0.5)
    assert m(ac.ones(4, 6)).shape == (4, 6)                # 2-D, as mnist_rnn passes it
    m.eval()
    assert m(ac.ones(4, 6)).tolist() == [[1.0] * 6] * 4
    with pytest.raises(ac.ShapeError, match="dropout1d"):
        F.dropout1d(ac.ones(3), 0.5)
    with pytest.raises(ValueError, match="probability"):
        nn.Dropout3d(2.0)


def test_alpha_dropouts_keep_mean_and_variance():
    ac.manual_seed(1)
    x = ac.randn(40000)
    assert F.alpha_dropout(x, 0.3) is x                    # training=False by default
    y = F.alpha_dropout(x, 0.3, training=True)
    assert abs(float(y.mean())) < 0.03 and abs(float(y.std()) - 1.0) < 0.03
    assert F.feature_alpha_dropout(ac.randn(2, 3, 4), 0.5, True).shape == (2, 3, 4)
    assert nn.AlphaDropout(0.2).eval()(x) is x


def test_bilinear_matches_torch():
    run_both(F.bilinear, TF.bilinear, [arr(4, 3), arr(4, 5), arr(2, 3, 5), arr(2)])
    run_both(F.bilinear, TF.bilinear, [arr(2, 4, 3), arr(2, 4, 5), arr(6, 3, 5)])
    m = nn.Bilinear(3, 5, 2)
    assert m(ac.randn(4, 3), ac.randn(4, 5)).shape == (4, 2)
    with pytest.raises(ac.ShapeError, match="do not fit"):
        F.bilinear(ac.zeros(4, 2), ac.zeros(4, 5), ac.zeros(2, 3, 5))


def test_unflatten():
    assert nn.Unflatten(1, (2, 3))(ac.zeros(4, 6)).shape == (4, 2, 3)
    assert nn.Unflatten(-1, (3, 2))(ac.zeros(4, 6)).shape == (4, 3, 2)


# ---- unfold, fold, channel_shuffle ------------------------------------------------------

@pytest.mark.parametrize("shape, k, d, p, s", [((2, 3, 7, 8), (2, 3), 1, 1, 1),
                                               ((2, 3, 7, 8), 3, (2, 1), (0, 2), (2, 3)),
                                               ((3, 5, 6), 2, 1, 0, 2)])
def test_unfold_and_fold_match_torch(shape, k, d, p, s):
    run_both(F.unfold, TF.unfold, [arr(*shape)], k, d, p, s)
    columns = TF.unfold(torch.tensor(arr(*shape)), k, d, p, s).numpy()
    run_both(F.fold, TF.fold, [columns], shape[-2:], k, d, p, s)


def test_fold_modules_and_bad_inputs():
    x = ac.tensor(arr(2, 3, 6, 6))
    cols = nn.Unfold(3, padding=1)(x)
    assert cols.shape == (2, 27, 36)
    assert nn.Fold((6, 6), 3, padding=1)(cols).shape == (2, 3, 6, 6)
    with pytest.raises(ac.ShapeError, match="sliding blocks"):
        F.fold(cols, (5, 5), 3, padding=1)
    with pytest.raises(ac.ShapeError, match="divisible by the product"):
        F.fold(ac.zeros(2, 10, 36), (6, 6), 3, padding=1)
    with pytest.raises(ac.ShapeError, match="3D or 4D"):
        F.unfold(ac.zeros(6, 6), 3)


def test_channel_shuffle_matches_torch():
    x = arr(2, 6, 3, 2)
    np.testing.assert_array_equal(F.channel_shuffle(ac.tensor(x), 3).numpy(),
                                  TF.channel_shuffle(torch.tensor(x), 3).numpy())
    assert nn.ChannelShuffle(2)(ac.tensor(x)).shape == (2, 6, 3, 2)
    with pytest.raises(ValueError, match="divisible by groups"):
        F.channel_shuffle(ac.tensor(x), 4)


# ---- embedding_bag -------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("ids, offsets, extra", [
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 4, 4], {}),                       # an empty bag
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 8], {"include_last_offset": True}),
    ([[1, 2, 3, 4], [4, 3, 2, 9], [0, 0, 5, 5]], None, {}),
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 2, 5], {"padding_idx": 4})])
def test_embedding_bag_matches_torch(mode, ids, offsets, extra):
    ids = np.array(ids)
    off = None if offsets is None else np.array(offsets)
    extra_t = dict(extra)
    extra_a = dict(extra)
    if mode == "sum":
        weights = arr(*ids.shape)
        extra_a["per_sample_weights"] = ac.tensor(weights)
        extra_t["per_sample_weights"] = torch.tensor(weights)
    run_both(lambda w: F.embedding_bag(ac.tensor(ids), w, None if off is None else ac.tensor(off),
                                       mode=mode, **extra_a),
             lambda w: TF.embedding_bag(torch.tensor(ids), w,
                                        None if off is None else torch.tensor(off), mode=mode,
                                        **extra_t), [arr(10, 3)])


def test_embedding_bag_module_and_bad_inputs():
    bag = nn.EmbeddingBag(10, 3, mode="sum", padding_idx=0)
    assert bag.weight.numpy()[0].tolist() == [0.0, 0.0, 0.0]
    assert bag(ac.tensor([1, 2, 3, 4]), ac.tensor([0, 2])).shape == (2, 3)
    with pytest.raises(IndexError, match="out of range"):
        bag(ac.tensor([1, 12]), ac.tensor([0]))
    with pytest.raises(ValueError, match="offsets has to be None"):
        bag(ac.tensor([[1, 2]]), ac.tensor([0]))
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        F.embedding_bag(ac.tensor([1, 2]), bag.weight, ac.tensor([0]), mode="max",
                        per_sample_weights=ac.ones(2))
    with pytest.raises(ValueError, match="mode"):
        nn.EmbeddingBag(10, 3, mode="median")


# ---- 3-d convolution and pools ------------------------------------------------------------

@pytest.mark.parametrize("stride, padding, dilation, groups", [(1, 0, 1, 1), (2, 1, 1, 2),
                                                              ((1, 2, 1), (2, 0, 1), (2, 1, 1), 1),
                                                              (1, "same", 1, 1)])
def test_conv3d_matches_torch(stride, padding, dilation, groups):
    x, w, b = arr(2, 4, 5, 6, 4), arr(6, 4 // groups, 3, 2, 3), arr(6)
    run_both(F.conv3d, TF.conv3d, [x, w, b], stride, padding, dilation, groups)


@pytest.mark.parametrize("k, s, p, d, ceil", [(3, 2, 1, 1, True), (2, 1, 0, (1, 2, 1), False),
                                              ((2, 3, 2), (1, 2, 2), (1, 1, 0), 1, True)])
@pytest.mark.parametrize("indices", [False, True])
def test_max_pool3d_matches_torch(k, s, p, d, ceil, indices):
    run_both(F.max_pool3d, TF.max_pool3d, [arr(2, 3, 5, 6, 7)], k, s, p, d, ceil, indices)


@pytest.mark.parametrize("k, s, p, ceil, include, divisor", [(3, 2, 1, True, True, None),
                                                             (3, 2, 1, True, False, None),
                                                             (2, 1, 1, False, True, 5)])
def test_avg_pool3d_matches_torch(k, s, p, ceil, include, divisor):
    run_both(F.avg_pool3d, TF.avg_pool3d, [arr(2, 3, 5, 6, 7)], k, s, p, ceil, include, divisor)


@pytest.mark.parametrize("size", [1, (2, 3, 4), (None, 2, 5)])
@pytest.mark.parametrize("indices", [False, True])
def test_adaptive_3d_pools_match_torch(size, indices):
    run_both(F.adaptive_max_pool3d, TF.adaptive_max_pool3d, [arr(2, 3, 5, 6, 7)], size, indices)
    run_both(F.adaptive_avg_pool3d, TF.adaptive_avg_pool3d, [arr(3, 5, 6, 7)], size)


def test_3d_modules():
    x = ac.tensor(arr(1, 2, 4, 4, 4))
    assert nn.Conv3d(2, 3, 3, padding=1)(x).shape == (1, 3, 4, 4, 4)
    assert nn.MaxPool3d(2)(x).shape == (1, 2, 2, 2, 2)
    assert nn.AvgPool3d(2, ceil_mode=True)(ac.tensor(arr(1, 2, 5, 5, 5))).shape == (1, 2, 3, 3, 3)
    assert nn.AdaptiveMaxPool3d(1)(x).shape == (1, 2, 1, 1, 1)
    assert nn.AdaptiveAvgPool3d((1, 2, 2))(x).shape == (1, 2, 1, 2, 2)
    with pytest.raises(ac.ShapeError, match="conv3d"):
        F.conv3d(ac.zeros(2, 4, 4), ac.zeros(1, 2, 1, 1, 1))
    with pytest.raises(ac.ShapeError, match="channels"):
        F.conv3d(x, ac.zeros(1, 3, 1, 1, 1))


def test_multilabel_margin_loss_matches_torch():
    target = np.array([[3, 0, -1, 1], [0, 1, 2, 3], [2, -1, 0, 0]])
    for reduction in ("mean", "sum", "none"):
        run_both(lambda v: F.multilabel_margin_loss(v, ac.tensor(target), reduction=reduction),
                 lambda v: TF.multilabel_margin_loss(v, torch.tensor(target), reduction=reduction),
                 [arr(3, 4)])
    with pytest.raises(IndexError, match="outside"):
        F.multilabel_margin_loss(ac.zeros(1, 4), ac.tensor([[5, -1, 0, 0]]))


def test_max_unpool_with_overlapping_windows_gives_every_input_the_gradient():
    x = arr(1, 2, 5, 6)
    out, idx = F.max_pool2d(ac.tensor(x), 3, 2, return_indices=True)     # windows overlap
    out_t, idx_t = TF.max_pool2d(torch.tensor(x), 3, 2, return_indices=True)
    run_both(lambda v: F.max_unpool2d(v, idx, 3, 2, output_size=(5, 6)),
             lambda v: TF.max_unpool2d(v, idx_t, 3, 2, output_size=(5, 6)), [out.numpy()])


def test_integer_pools_are_exact_as_torch():
    x = rng.integers(-50, 50, (2, 3, 7, 9))
    x[0, 0, 1, 1] = 2 ** 40 + 1
    got, idx = F.max_pool2d(ac.tensor(x), 3, 2, 1, 1, True, True)
    want, want_idx = TF.max_pool2d(torch.tensor(x), 3, 2, 1, 1, True, True)
    assert got.dtype == ac.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(idx.numpy(), want_idx.numpy())
    for kwargs in ({}, {"padding": 1, "count_include_pad": False}, {"ceil_mode": True},
                   {"divisor_override": 3}):
        np.testing.assert_array_equal(F.avg_pool2d(ac.tensor(x), 3, 2, **kwargs).numpy(),
                                      TF.avg_pool2d(torch.tensor(x), 3, 2, **kwargs).numpy())
    v = rng.integers(-50, 50, (1, 2, 4, 5, 6))
    np.testing.assert_array_equal(F.max_pool3d(ac.tensor(v), 2, 1, 1).numpy(),
                                  TF.max_pool3d(torch.tensor(v), 2, 1, 1).numpy())
    np.testing.assert_array_equal(F.avg_pool3d(ac.tensor(v), 2).numpy(),
                                  TF.avg_pool3d(torch.tensor(v), 2).numpy())


def test_embedding_max_norm_renormalises_rows_as_torch():
    w = arr(6, 4) * 2
    ids = np.array([[0, 2, 2], [5, 1, 0]])
    wa, wt = ac.tensor(w.copy(), requires_grad=True), torch.tensor(w.copy(), requires_grad=True)
    out = F.embedding(ac.tensor(ids), wa, max_norm=1.5)
    out_t = TF.embedding(torch.tensor(ids), wt, max_norm=1.5)
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wa.detach().numpy(), wt.detach().numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    out_t.sum().backward()
    np.testing.assert_allclose(wa.grad.numpy(), wt.grad.numpy())
    m = nn.Embedding(6, 4, max_norm=1.0, padding_idx=1, device="cpu")
    assert m(ac.tensor(ids)).shape == (2, 3, 4) and "max_norm=1.0" in repr(m)
    assert nn.Embedding.from_pretrained(ac.tensor(w), max_norm=1.0).max_norm == 1.0
    integers = F.embedding(ac.tensor(ids), ac.tensor(np.arange(24).reshape(6, 4)))
    assert integers.dtype == ac.int64 and integers.numpy()[0, 1].tolist() == [8, 9, 10, 11]


def test_embedding_scale_grad_by_freq_and_bag_max_norm_match_torch():
    w = arr(7, 3) * 3
    ids = np.array([1, 2, 2, 5, 1, 1, 0, 6])
    run_both(lambda v: F.embedding(ac.tensor(ids), v, scale_grad_by_freq=True, sparse=True),
             lambda v: TF.embedding(torch.tensor(ids), v, scale_grad_by_freq=True), [w])
    for mode in ("sum", "mean", "max"):
        run_both(lambda v: F.embedding_bag(ac.tensor(ids), v, ac.tensor([0, 3, 5]), max_norm=1.0,
                                           mode=mode, padding_idx=1),
                 lambda v: TF.embedding_bag(torch.tensor(ids), v, torch.tensor([0, 3, 5]),
                                            max_norm=1.0, mode=mode, padding_idx=1), [w.copy()])
    with pytest.raises(NotImplementedError, match="scale_grad_by_freq"):
        F.embedding_bag(ac.tensor(ids), ac.tensor(w), ac.tensor([0]), scale_grad_by_freq=True)
    assert nn.Embedding(7, 3, scale_grad_by_freq=True)(ac.tensor(ids)).shape == (8, 3)
