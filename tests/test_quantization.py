"""ac.quantization.quantize_dynamic and nn.quantized.dynamic Linear / LSTM / GRU:
outputs against a NumPy reference of the same integer arithmetic (exact for Linear;
the recurrent layers up to float32 rounding of the gate math, done in float64 here)
and close to the float32 model; the same bits from every SIMD path (AC_SIMD, in
subprocesses); odd shapes; state_dict / ac.save / ac.load round trips (I8 + F32 in
the file); clean errors for corrupt or mismatched files, training, unsupported
layers and bad input."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from aicraft.nn.quantized import dynamic

rng = np.random.default_rng(15)
F32 = np.float32


# ---- the NumPy reference ---------------------------------------------------------

def np_quantize(x):
    """Per-row symmetric int8 (as float64 values) and float32 scales, as ac.h states it."""
    x = np.asarray(x, F32)
    amax = np.abs(x).max(axis=-1) if x.shape[-1] else np.zeros(x.shape[:-1], F32)
    tiny = amax < F32(2.0 ** -120)
    inv = F32(127) / np.where(tiny, F32(1), amax)
    q = np.clip(np.rint(x * inv[..., None]), -127, 127)
    q[tiny] = 0
    return q.astype(np.float64), np.where(tiny, F32(0), amax / F32(127)).astype(F32)


def np_qlinear(x, qw, sw, bias):
    """The quantized layer on x (m, k): exact integer sums, then float32 steps."""
    qx, sx = np_quantize(x)
    sums = (qx @ qw.T).astype(F32)                 # exact in float64, then rounded once
    y = sums * (sx[:, None] * sw[None, :])
    return y + bias if bias is not None else y


def sigmoid(v):
    return 0.5 * (1.0 + np.tanh(0.5 * v))


def np_qrnn(mode, x, h, c, ih, hh):
    """One quantized layer (T, B, I) forward; ih / hh = (int8 weights, scales, bias)."""
    hidden = ih[0].shape[0] // (4 if mode == "LSTM" else 3)
    xp = np_qlinear(x.reshape(-1, x.shape[-1]), *ih).reshape(x.shape[0], x.shape[1], -1)
    out = []
    for t in range(x.shape[0]):
        hp = np_qlinear(h, *hh).astype(np.float64)
        g = xp[t].astype(np.float64)
        if mode == "LSTM":
            pre = g + hp
            i, f, gg, o = (pre[:, k * hidden:(k + 1) * hidden] for k in range(4))
            c = (sigmoid(f) * c + sigmoid(i) * np.tanh(gg)).astype(F32)
            h = (sigmoid(o) * np.tanh(c.astype(np.float64))).astype(F32)
        else:
            r = sigmoid(g[:, :hidden] + hp[:, :hidden])
            z = sigmoid(g[:, hidden:2 * hidden] + hp[:, hidden:2 * hidden])
            n = np.tanh(g[:, 2 * hidden:] + r * hp[:, 2 * hidden:])
            h = ((1 - z) * n + z * h).astype(F32)
        out.append(h)
    return np.stack(out), h, c


def packed(module, suffix=""):
    """(int8 weights as float64, scales, bias) of a quantized Linear or one RNN projection."""
    if suffix:
        w, s = getattr(module, "weight_" + suffix), getattr(module, "weight_%s_scale" % suffix)
        b = getattr(module, "bias_" + suffix, None)
    else:
        w, s, b = module.weight, module.weight_scale, module.bias
    return w.numpy().astype(np.float64), s.numpy(), None if b is None else b.numpy()


# ---- Linear -----------------------------------------------------------------------

@pytest.mark.parametrize("batch", [1, 3, 64])
@pytest.mark.parametrize("out_f,in_f", [(1, 1), (7, 13), (37, 100), (130, 257), (10, 784)])
def test_linear_matches_integer_reference_exactly(batch, out_f, in_f):
    ac.manual_seed(batch + out_f)
    layer = nn.Linear(in_f, out_f)
    q = dynamic.Linear.from_float(layer)
    w = layer.weight.numpy()
    qw, sw = np_quantize(w)
    np.testing.assert_array_equal(q.weight.numpy(), qw.astype(np.int8))
    np.testing.assert_array_equal(q.weight_scale.numpy(), sw)
    assert q.weight.numpy().min() >= -127
    x = (rng.standard_normal((batch, in_f)) * 3).astype(F32)
    with ac.no_grad():
        y = q(ac.tensor(x)).numpy()
        y_float = layer(ac.tensor(x)).numpy()
    np.testing.assert_array_equal(y, np_qlinear(x, *packed(q)))
    scale = np.abs(y_float).max() + 1e-6
    assert np.abs(y - y_float).max() <= 0.02 * scale


def test_linear_takes_any_leading_dims_and_no_bias():
    layer = nn.Linear(9, 4, bias=False)
    q = ac.quantization.quantize_dynamic(layer)
    assert isinstance(q, dynamic.Linear) and "bias" not in q.state_dict()
    x = rng.standard_normal((2, 3, 9)).astype(F32)
    with ac.no_grad():
        y = q(ac.tensor(x)).numpy()
    assert y.shape == (2, 3, 4)
    np.testing.assert_array_equal(y.reshape(6, 4), np_qlinear(x.reshape(6, 9), *packed(q)))


def test_linear_rows_of_zeros_and_non_finite_values():
    q = dynamic.Linear.from_float(nn.Linear(5, 3))
    x = np.zeros((3, 5), F32)
    x[1, 2] = np.inf
    x[2] = rng.standard_normal(5)
    with ac.no_grad():
        y = q(ac.tensor(x)).numpy()
    np.testing.assert_array_equal(y[0], q.bias.numpy())
    assert np.isnan(y[1]).all() and np.isfinite(y[2]).all()


# ---- LSTM and GRU -----------------------------------------------------------------

@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_recurrent_layers_match_reference_and_float(mode):
    ac.manual_seed(3)
    layer = getattr(nn, mode)(11, 13)
    q = ac.quantization.quantize_dynamic(layer, {getattr(nn, mode)}, dtype=ac.qint8)
    assert isinstance(q, getattr(dynamic, mode))
    x = rng.standard_normal((6, 3, 11)).astype(F32)
    h0 = (rng.standard_normal((1, 3, 13)) * 0.5).astype(F32)
    c0 = (rng.standard_normal((1, 3, 13)) * 0.5).astype(F32)
    state = (ac.tensor(h0), ac.tensor(c0)) if mode == "LSTM" else ac.tensor(h0)
    with ac.no_grad():
        out, hn = q(ac.tensor(x), state)
        out_f, hn_f = layer(ac.tensor(x), state)
    ref, h_ref, c_ref = np_qrnn(mode, x, h0[0], c0[0], packed(q, "ih_l0"), packed(q, "hh_l0"))
    np.testing.assert_allclose(out.numpy(), ref, atol=2e-5)
    if mode == "LSTM":
        np.testing.assert_allclose(hn[0].numpy()[0], h_ref, atol=2e-5)
        np.testing.assert_allclose(hn[1].numpy()[0], c_ref, atol=2e-5)
    else:
        np.testing.assert_allclose(hn.numpy()[0], h_ref, atol=2e-5)
    np.testing.assert_allclose(out.numpy(), out_f.numpy(), atol=0.03)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_recurrent_layers_stacked_bidirectional_batch_first(mode):
    ac.manual_seed(4)
    layer = getattr(nn, mode)(5, 7, num_layers=2, bidirectional=True, batch_first=True)
    q = ac.quantization.quantize_dynamic(layer)
    assert sorted(q.state_dict()) == sorted(
        [k for k in layer.state_dict()] + ["weight_%s_l%d%s_scale" % (p, n, s) for p in ("ih", "hh")
                                           for n in (0, 1) for s in ("", "_reverse")])
    x = ac.tensor(rng.standard_normal((2, 9, 5)).astype(F32))
    with ac.no_grad():
        out, _ = q(x)
        out_f, _ = layer(x)
    assert out.shape == (2, 9, 14)
    np.testing.assert_allclose(out.numpy(), out_f.numpy(), atol=0.03)


# ---- every SIMD path gives the same bits ---------------------------------------------

_SIMD_SCRIPT = r"""
import hashlib, numpy as np, aicraft as ac
from aicraft import nn
from aicraft._ffi import ffi, lib
ac.manual_seed(1)
rng = np.random.default_rng(2)
digest = hashlib.sha256()
with ac.no_grad():
    for out_f, in_f in [(1, 1), (5, 31), (37, 65), (130, 784), (512, 512)]:
        q = ac.quantization.quantize_dynamic(nn.Linear(in_f, out_f))
        for batch in (1, 2, 5, 64):
            digest.update(q(ac.tensor(rng.standard_normal((batch, in_f)).astype("float32"))).numpy().tobytes())
    for mode in ("LSTM", "GRU"):
        q = ac.quantization.quantize_dynamic(getattr(nn, mode)(7, 33, num_layers=2))
        out, _ = q(ac.tensor(rng.standard_normal((4, 3, 7)).astype("float32")))
        digest.update(out.numpy().tobytes())
print(ffi.string(lib.ac_qlinear_kernels()).decode(), digest.hexdigest())
"""


def test_every_simd_path_gives_the_same_bits():
    results = {}
    for simd in ("generic", "avx2", "avx512"):
        env = dict(os.environ, AC_SIMD=simd)
        run = subprocess.run([sys.executable, "-c", _SIMD_SCRIPT], env=env, capture_output=True,
                             text=True, check=True)
        kernels, digest = run.stdout.split()
        results[kernels] = digest
    assert "generic" in results
    assert len(set(results.values())) == 1, results


# ---- state_dict, files ----------------------------------------------------------------

def _mlp():
    return nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 3))


def test_save_load_round_trip(tmp_path):
    ac.manual_seed(8)
    q = ac.quantization.quantize_dynamic(_mlp())
    path = str(tmp_path / "q.safetensors")
    ac.save(q.state_dict(), path)
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    assert header["0.weight"]["dtype"] == "I8" and header["0.weight_scale"]["dtype"] == "F32"
    assert header["0.bias"]["dtype"] == "F32"
    loaded = ac.load(path)
    assert loaded["0.weight"].dtype == ac.int8
    fresh = ac.quantization.quantize_dynamic(_mlp(), inplace=True)
    fresh.load_state_dict(loaded)
    x = ac.randn(4, 20)
    with ac.no_grad():
        np.testing.assert_array_equal(fresh(x).numpy(), q(x).numpy())


def test_load_state_dict_writes_into_the_packed_layer():
    q = dynamic.Linear.from_float(nn.Linear(6, 2))
    sd = q.state_dict()
    q.load_state_dict({"weight": sd["weight"], "weight_scale": ac.tensor(np.full(2, 2.0, F32)),
                       "bias": ac.zeros(2)})
    np.testing.assert_array_equal(sd["weight_scale"].numpy(), [2.0, 2.0])   # shares the block
    x = rng.standard_normal((3, 6)).astype(F32)
    with ac.no_grad():
        np.testing.assert_array_equal(q(ac.tensor(x)).numpy(), np_qlinear(x, *packed(q)))


def test_deepcopy_gives_layers_of_their_own():
    import copy
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    q = ac.quantization.quantize_dynamic(model)
    q2 = ac.quantization.quantize_dynamic(q, {nn.Linear})     # copies, finds nothing to quantize
    lstm = copy.deepcopy(ac.quantization.quantize_dynamic(nn.GRU(3, 4, num_layers=2)))
    x = ac.randn(3, 5)
    with ac.no_grad():
        np.testing.assert_array_equal(q2(x).numpy(), q(x).numpy())
        assert lstm(ac.randn(2, 1, 3))[0].shape == (2, 1, 4)
    q2.load_state_dict({k: (v if v.dtype == ac.int8 else v * 0) for k, v in q2.state_dict().items()})
    with ac.no_grad():
        assert not np.array_equal(q2(x).numpy(), q(x).numpy())


def test_corrupt_or_mismatched_files_fail_cleanly(tmp_path):
    q = ac.quantization.quantize_dynamic(_mlp())
    path = str(tmp_path / "q.safetensors")
    ac.save(q.state_dict(), path)
    data = open(path, "rb").read()
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(data[:-5])
    with pytest.raises(ac.FormatError):
        ac.load(str(truncated))
    bad_dtype = tmp_path / "bad.safetensors"
    bad_dtype.write_bytes(data.replace(b'"I8"', b'"I9"', 1))
    with pytest.raises(ac.FormatError, match="I9"):
        ac.load(str(bad_dtype))
    # a float model's weights into a quantized one: missing scales, floats for int8
    with pytest.raises(RuntimeError, match="weight_scale"):
        q.load_state_dict(_mlp().state_dict())
    with pytest.raises(RuntimeError, match="dtype mismatch for 0.weight"):
        q.load_state_dict(_mlp().state_dict(), strict=False)
    # another shape
    other = ac.quantization.quantize_dynamic(nn.Sequential(nn.Linear(21, 16), nn.ReLU(), nn.Linear(16, 3)))
    with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
        q.load_state_dict(other.state_dict())
    # a quantized file into the float model
    with pytest.raises(RuntimeError, match="Unexpected key"):
        _mlp().load_state_dict(ac.load(path))
    with ac.no_grad():
        assert q(ac.randn(1, 20)).shape == (1, 3)     # still usable


# ---- what quantized models refuse --------------------------------------------------------

def test_training_a_quantized_model_is_an_error():
    q = ac.quantization.quantize_dynamic(_mlp())
    x = ac.randn(2, 20)
    with pytest.raises(RuntimeError, match="no_grad"):
        q(x)
    assert list(q.parameters()) == []
    lstm = ac.quantization.quantize_dynamic(nn.LSTM(3, 4))
    with pytest.raises(RuntimeError, match="no_grad"):
        lstm(ac.randn(2, 1, 3))


def test_unsupported_layers_and_arguments():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 2))
    with pytest.raises(ValueError, match="Conv2d"):
        ac.quantization.quantize_dynamic(model, {nn.Conv2d})
    with pytest.raises(ValueError, match="cannot quantize '0', a Conv2d"):
        ac.quantization.quantize_dynamic(model, {"0"})
    with pytest.raises(ValueError, match="qint8"):
        ac.quantization.quantize_dynamic(model, dtype=ac.float32)
    with pytest.raises(TypeError, match="nn.Module"):
        ac.quantization.quantize_dynamic("model")
    with pytest.raises(TypeError, match="qconfig_spec"):
        ac.quantization.quantize_dynamic(model, {3})
    q = ac.quantization.quantize_dynamic(model, {"2"})
    assert isinstance(q[2], dynamic.Linear) and isinstance(model[2], nn.Linear)   # a copy
    with pytest.raises(TypeError, match="nn.Linear"):
        dynamic.Linear.from_float(nn.LSTM(2, 3))
    with pytest.raises(TypeError):
        ac.zeros(2, dtype=ac.qint8)


def test_bad_input_to_quantized_layers():
    q = dynamic.Linear(6, 3)
    with ac.no_grad():
        with pytest.raises(ac.ShapeError, match=r"qlinear_forward: x \(2, 5\) must be \(\.\.\., 6\)"):
            q(ac.randn(2, 5))
        with pytest.raises(TypeError, match="Tensor"):
            q(np.zeros((2, 6), F32))
        with pytest.raises(TypeError, match="int64"):
            q(ac.zeros(2, 6, dtype=ac.int64))
        lstm = dynamic.LSTM(4, 5)
        with pytest.raises(ac.ShapeError):
            lstm(ac.randn(3, 2, 7))
        assert q(ac.randn(2, 6)).shape == (2, 3)


def test_quantized_weights_take_a_quarter_of_the_bytes():
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    q = ac.quantization.quantize_dynamic(model)
    assert ac.quantization.weight_bytes(q) <= 0.27 * ac.quantization.weight_bytes(model)


# ---- C: demos/c/predict.c reads a quantized file ----------------------------------------

def test_c_predict_reads_a_quantized_file(tmp_path):
    """predict's count of right answers on a quantized MLP is the Python model's, exactly."""
    import shutil
    from aicraft.data.datasets import write_idx
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if shutil.which("make") is None or shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("needs a C compiler and make")
    subprocess.run(["make", "-s", "build/demos/predict"], cwd=root, check=True, capture_output=True)
    images = rng.integers(0, 256, (300, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 300, dtype=np.uint8)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", images)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels)
    ac.manual_seed(11)
    model = ac.quantization.quantize_dynamic(
        nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)), inplace=True)
    ac.save(model.state_dict(), str(tmp_path / "q.safetensors"))
    x = (images.reshape(300, 784).astype(F32) / F32(255) - F32(0.1307)) / F32(0.3081)
    with ac.no_grad():
        correct = int((model(ac.tensor(x)).numpy().argmax(1) == labels).sum())
    run = subprocess.run([os.path.join(root, "build", "demos", "predict"), str(tmp_path / "q.safetensors"),
                          str(tmp_path)], capture_output=True, text=True, check=True)
    assert "(int8)" in run.stdout and "(%d/300)" % correct in run.stdout, run.stdout
    scales = ac.load(str(tmp_path / "q.safetensors"))
    del scales["2.weight_scale"]
    ac.save(scales, str(tmp_path / "broken.safetensors"))
    run = subprocess.run([os.path.join(root, "build", "demos", "predict"),
                          str(tmp_path / "broken.safetensors"), str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 1 and "2.weight_scale" in run.stderr
