"""Packed Linear layers (aicraft.nn.packed, ac_packed_linear_*): each row's output the
same bits in a batch of any size, on every SIMD path; nn.Linear's bits from five rows on
and its values to rounding below; close to a float64 NumPy reference; a copy that later
changes to the float layer do not reach; refused where it cannot do what nn.Linear does
(grad, bad inputs); its block counted and freed. LinearReLU: the bits of the packed
Linear followed by ac.relu on every SIMD path, and pack_linear fusing an nn.Linear
directly followed by an nn.ReLU in an nn.Sequential, and nothing else."""
import copy
import gc
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from aicraft._ffi import ffi, lib
from aicraft.errors import ShapeError

SHAPES = [(784, 128), (128, 10), (7, 33), (1, 1), (0, 5), (5, 0), (1000, 130), (64, 200)]
ROWS = [0, 1, 2, 3, 4, 5, 12, 13, 32, 100]


@pytest.mark.parametrize("in_f,out_f", SHAPES)
def test_packed_gives_nn_linear_results_and_each_row_the_same_bits_in_any_batch(in_f, out_f):
    ac.manual_seed(in_f * 1000 + out_f)
    for bias in (True, False):
        layer = nn.Linear(in_f, out_f, bias=bias)
        packed = nn.packed.Linear.from_float(layer)
        x = ac.randn(max(ROWS), in_f)
        with ac.no_grad():
            whole = packed(x).numpy()
            for rows in ROWS:
                part = x[:rows]
                want, got = layer(part).numpy(), packed(part).numpy()
                assert got.shape == (rows, out_f)
                assert np.array_equal(got, whole[:rows]), (rows, bias)
                if rows > 4:    # the same kernels as nn.Linear's
                    assert np.array_equal(got, want), (rows, bias)
                else:           # nn.Linear sums a few rows in another order
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_packed_is_close_to_a_float64_reference():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((130, 300)).astype(np.float32)
    b = rng.standard_normal(130).astype(np.float32)
    x = rng.standard_normal((2, 17, 300)).astype(np.float32)
    packed = nn.packed.Linear(ac.from_numpy(w), ac.from_numpy(b))
    with ac.no_grad():
        got = packed(ac.from_numpy(x)).numpy()
    want = x.astype(np.float64) @ w.T.astype(np.float64) + b
    assert got.shape == (2, 17, 130)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kind", [nn.packed.Linear, nn.packed.LinearReLU])
@pytest.mark.parametrize("rows", [3, 300])     # 3 rows of 2048 x 1024: the few-rows path, split
def test_the_same_bits_on_one_and_two_threads(rows, kind):
    ac.manual_seed(3)
    packed = kind.from_float(nn.Linear(1024, 2048))
    x = ac.randn(rows, 1024)
    before = ac.get_num_threads()
    try:
        with ac.no_grad():
            ac.set_num_threads(1)
            one = packed(x).numpy()
            ac.set_num_threads(2)
            two = packed(x).numpy()
            assert np.array_equal(packed(x[:1]).numpy(), one[:1])
    finally:
        ac.set_num_threads(before)
    assert np.array_equal(one, two)


_SIMD_SCRIPT = r"""
import numpy as np, aicraft as ac
from aicraft import nn
ac.manual_seed(1)
with ac.no_grad():
    for in_f, out_f in [(784, 128), (31, 5), (65, 37), (512, 130)]:
        layer = nn.Linear(in_f, out_f)
        packed = nn.packed.Linear.from_float(layer)
        x = ac.randn(64, in_f)
        whole = packed(x).numpy()
        assert np.array_equal(layer(x).numpy(), whole), (in_f, out_f)
        for rows in (1, 3, 4, 5, 13):
            assert np.array_equal(packed(x[:rows]).numpy(), whole[:rows]), (in_f, out_f, rows)
    # LinearReLU: the packed Linear then ac.relu, bit for bit (NaN too), 1 to 40 rows,
    # over one depth slice and several (1500)
    for in_f, out_f in [(784, 128), (128, 10), (31, 5), (65, 37), (1500, 130)]:
        for bias in (True, False):
            layer = nn.Linear(in_f, out_f, bias=bias)
            plain, fused = nn.packed.Linear.from_float(layer), nn.packed.LinearReLU.from_float(layer)
            x = ac.randn(40, in_f)
            x[2, 0] = float("nan")
            for rows in range(1, 41):
                want = ac.relu(plain(x[:rows])).numpy()
                got = fused(x[:rows]).numpy()
                assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (in_f, out_f, bias, rows)
            assert (plain(x).numpy() < 0).any() and np.isnan(got[2]).all()
print("same")
"""


@pytest.mark.parametrize("simd", ["generic", "avx2", "avx512"])
def test_every_simd_path_gives_each_row_the_same_bits(simd):
    run = subprocess.run([sys.executable, "-c", _SIMD_SCRIPT], env=dict(os.environ, AC_SIMD=simd),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["same"]


def test_pack_linear_replaces_every_linear_and_leaves_the_model_as_it_was():
    ac.manual_seed(4)
    model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Sequential(nn.Linear(30, 5, bias=False)))
    packed = nn.packed.pack_linear(model)
    assert type(packed[0]) is nn.packed.LinearReLU and type(packed[1]) is nn.Identity
    assert type(packed[2][0]) is nn.packed.Linear
    assert type(model[0]) is nn.Linear and type(model[1]) is nn.ReLU and type(model[2][0]) is nn.Linear
    assert list(packed.parameters()) == [] and packed.state_dict() == {}
    x = ac.randn(4, 3, 20)     # 12 rows: nn.Linear's kernels, the same bits
    with ac.no_grad():
        want = model(x).numpy()
        assert np.array_equal(packed(x).numpy(), want)
        # a copy: changing the float model afterwards does not reach the packed one
        model[0].weight.add_(1.0)
        assert not np.array_equal(model(x).numpy(), want)
        assert np.array_equal(packed(x).numpy(), want)
    assert isinstance(nn.packed.pack_linear(nn.Linear(3, 2)), nn.packed.Linear)
    in_place = nn.Sequential(nn.Linear(3, 2))
    assert nn.packed.pack_linear(in_place, inplace=True) is in_place
    assert isinstance(in_place[0], nn.packed.Linear)


def test_linear_relu_gives_packed_linear_then_relu_bits_and_is_close_to_a_float64_reference():
    ac.manual_seed(6)
    for in_f, out_f in SHAPES:
        for bias in (True, False):
            layer = nn.Linear(in_f, out_f, bias=bias)
            plain, fused = nn.packed.Linear.from_float(layer), nn.packed.LinearReLU.from_float(layer)
            assert isinstance(fused, nn.packed.Linear) and fused.nbytes() == plain.nbytes()
            x = ac.randn(40, in_f)
            with ac.no_grad():
                for rows in ROWS[:-1] + [40]:
                    want = ac.relu(plain(x[:rows])).numpy()
                    got = fused(x[:rows]).numpy()
                    assert got.shape == (rows, out_f)
                    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (in_f, out_f, bias, rows)
            w, b = layer.weight.detach().numpy().astype(np.float64), 0.0
            if bias:
                b = layer.bias.detach().numpy().astype(np.float64)
            reference = np.maximum(x.numpy().astype(np.float64) @ w.T + b, 0.0)
            np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-4)
            if in_f == 0 and bias:       # no inputs: relu(b) in every row
                assert np.array_equal(got, np.broadcast_to(np.maximum(b, 0), got.shape).astype(np.float32))


def test_pack_linear_fuses_a_linear_directly_followed_by_relu_in_a_sequential_only():
    ac.manual_seed(7)

    class Block(nn.Module):     # attributes, not a Sequential: its forward decides the order
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 6)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.fc(self.act(x))

    shared = nn.ReLU()
    model = nn.Sequential(
        nn.Linear(8, 6), shared,                               # 0, 1: fused
        nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.ReLU()),  # 2: ReLU after Tanh stays
        nn.Sequential(nn.Linear(6, 6)), nn.ReLU(),              # 3, 4: not in one Sequential
        Block(),                                               # 5: not a Sequential
        nn.LayerNorm(6),                                       # 6: keeps its index and keys
        nn.Linear(6, 6, bias=False), nn.ReLU(inplace=True), shared,   # 7, 8 fused; 9 stays
        nn.Linear(6, 3), nn.ReLU())                            # 10, 11: fused at the end
    packed = nn.packed.pack_linear(model)
    kinds = [type(m) for m in packed]
    assert kinds == [nn.packed.LinearReLU, nn.Identity, nn.Sequential, nn.Sequential, nn.ReLU, Block,
                     nn.LayerNorm, nn.packed.LinearReLU, nn.Identity, nn.ReLU, nn.packed.LinearReLU,
                     nn.Identity]
    assert [type(m) for m in packed[2]] == [nn.packed.Linear, nn.Tanh, nn.ReLU]
    assert type(packed[3][0]) is nn.packed.Linear and type(packed[5].fc) is nn.packed.Linear
    assert type(packed[5].act) is nn.ReLU and packed[9] is not shared   # a copy
    assert sorted(packed.state_dict()) == ["6.bias", "6.weight"]
    assert [type(m) for m in model][:2] == [nn.Linear, nn.ReLU]           # the original as it was
    x = ac.randn(13, 8)
    with ac.no_grad():
        np.testing.assert_allclose(packed(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)
        in_place = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
        assert nn.packed.pack_linear(in_place, inplace=True) is in_place
        assert [type(m) for m in in_place] == [nn.packed.LinearReLU, nn.Identity]
    # the served MLP: each batch's rows the bits of the float model's from five rows on
    mlp = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10), nn.Softmax(dim=1))
    served = nn.packed.pack_linear(mlp)
    assert [type(m) for m in served] == [nn.packed.LinearReLU, nn.Identity, nn.packed.Linear, nn.Softmax]
    x = ac.randn(32, 784)
    with ac.no_grad():
        assert np.array_equal(served(x).numpy(), mlp(x).numpy())
        np.testing.assert_allclose(served(x[:1]).numpy(), mlp(x[:1]).numpy(), rtol=1e-5, atol=1e-6)


def test_deepcopy_shares_the_unchanging_block():
    packed = nn.packed.pack_linear(nn.Sequential(nn.Linear(6, 4), nn.Tanh()))
    twin = copy.deepcopy(packed)
    assert twin[0] is not packed[0] and twin[0]._packed is packed[0]._packed
    x = ac.randn(3, 6)
    with ac.no_grad():
        assert np.array_equal(twin(x).numpy(), packed(x).numpy())


@pytest.mark.parametrize("kind", [nn.packed.Linear, nn.packed.LinearReLU])
def test_packed_layers_do_not_train(kind):
    packed = kind.from_float(nn.Linear(4, 2))
    x = ac.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="packed_linear_forward: a packed layer does not train"):
        packed(x)
    with ac.no_grad():
        assert packed(x).shape == (3, 2)
    assert packed(ac.randn(3, 4)).requires_grad is False   # nothing asks for a gradient


def test_bad_inputs_are_refused():
    layer = nn.Linear(4, 2)
    packed = nn.packed.Linear.from_float(layer)
    with ac.no_grad():
        with pytest.raises(ShapeError, match=r"packed_linear_forward: x \(3, 5\) must be \(\.\.\., 4\)"):
            packed(ac.randn(3, 5))
        with pytest.raises(ShapeError, match="must be"):
            packed(ac.tensor(1.0))
        with pytest.raises(TypeError, match="int64"):
            packed(ac.zeros(3, 4, dtype=ac.int64))
        with pytest.raises(TypeError, match="input must be a Tensor"):
            packed(np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match="expected an nn.Linear, not ReLU"):
        nn.packed.Linear.from_float(nn.ReLU())
    with pytest.raises(TypeError, match="packed LinearReLU.from_float: expected an nn.Linear, not Sequential"):
        nn.packed.LinearReLU.from_float(nn.Sequential(nn.Linear(4, 2), nn.ReLU()))
    with pytest.raises(ShapeError, match=r"bias \(3,\) does not fit weight \(2, 4\)"):
        nn.packed.LinearReLU(layer.weight.detach(), ac.randn(3))
    with pytest.raises(TypeError, match="packed LinearReLU: weight must be a Tensor, not ndarray"):
        nn.packed.LinearReLU(np.zeros((2, 4), np.float32))
    with pytest.raises(TypeError, match="model must be an nn.Module"):
        nn.packed.pack_linear(layer.weight)
    with pytest.raises(ShapeError, match=r"weight \(4,\) must be \(out_features, in_features\)"):
        nn.packed.Linear(ac.randn(4))
    with pytest.raises(ShapeError, match=r"bias \(3,\) does not fit weight \(2, 4\)"):
        nn.packed.Linear(layer.weight.detach(), ac.randn(3))
    with pytest.raises(TypeError, match="int64"):
        nn.packed.Linear(ac.zeros(2, 4, dtype=ac.int64))
    with pytest.raises(TypeError, match="weight must be a Tensor, not ndarray"):
        nn.packed.Linear(np.zeros((2, 4), np.float32))
    with pytest.raises(TypeError, match="bias must be a Tensor, not list"):
        nn.packed.Linear(layer.weight.detach(), [0.0, 0.0])
    # the C entry points check their arguments
    assert lib.ac_packed_linear_new(ffi.NULL, ffi.NULL, lib.AC_ACTIVATION_NONE) == ffi.NULL
    for bad in (2, -1):
        assert lib.ac_packed_linear_new(layer.weight._ptr, ffi.NULL, bad) == ffi.NULL
        assert lib.ac_last_error_code() == lib.AC_ERR_ARG
        assert ("packed_linear_new: activation must be AC_ACTIVATION_NONE (0) or AC_ACTIVATION_RELU (1), "
                "got %d" % bad) == ffi.string(lib.ac_last_error()).decode()
    assert lib.ac_packed_linear_forward(ffi.NULL, ac.randn(1, 4)._ptr) == ffi.NULL
    assert lib.ac_packed_linear_forward(packed._packed, ffi.NULL) == ffi.NULL
    assert lib.ac_packed_linear_nbytes(ffi.NULL) < 0
    assert lib.ac_packed_linear_in_features(ffi.NULL) < 0
    assert lib.ac_packed_linear_out_features(ffi.NULL) < 0
    assert lib.ac_packed_linear_has_bias(ffi.NULL) < 0
    assert lib.ac_packed_linear_free(ffi.NULL) == 0
    assert (lib.ac_packed_linear_in_features(packed._packed), lib.ac_packed_linear_out_features(packed._packed),
            lib.ac_packed_linear_has_bias(packed._packed)) == (4, 2, 1)


@pytest.mark.parametrize("kind", [nn.packed.Linear, nn.packed.LinearReLU])
def test_the_block_is_counted_and_freed_and_forwards_leave_nothing(kind):
    gc.collect()
    base = ac.memory_stats()["bytes_in_use"]
    layer = nn.Linear(784, 128)
    float_bytes = ac.memory_stats()["bytes_in_use"] - base
    packed = kind.from_float(layer)
    block = ac.memory_stats()["bytes_in_use"] - base - float_bytes
    assert 0 <= block - packed.nbytes() <= 512     # the block, in a tensor of its own
    assert 784 * 128 * 4 <= packed.nbytes() <= 784 * 128 * 4 + 4096    # the panels (4 x 32 columns), the bias
    assert ac.quantization.weight_bytes(nn.Sequential(packed)) == packed.nbytes()
    x = ac.randn(32, 784)
    with ac.no_grad():
        for _ in range(3):
            with ac.checkpoint():
                packed(x)
        steady = ac.memory_stats()["bytes_in_use"]
        for _ in range(100):
            with ac.checkpoint():
                packed(x)
        assert ac.memory_stats()["bytes_in_use"] == steady
    del packed, x
    gc.collect()
    assert ac.memory_stats()["bytes_in_use"] - base == float_bytes
    del layer
    gc.collect()
    assert ac.memory_stats()["bytes_in_use"] == base


def test_a_compiled_packed_model_replays_the_eager_bits_and_cannot_be_exported(tmp_path):
    ac.manual_seed(5)
    model = nn.packed.pack_linear(nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3), nn.Softmax(1)))
    run = ac.compile(model)
    with ac.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")      # recorded: no "runs eagerly" warning
        for rows in (2, 5, 2, 1, 5):
            x = ac.randn(rows, 8)
            assert np.array_equal(run(x).numpy(), model(x).numpy()), rows
    graph = next(iter(run._graphs.values())).graph
    ops = [ffi.string(lib.ac_graph_node_op(graph, i)).decode() for i in range(lib.ac_graph_num_nodes(graph))]
    assert ops == ["packed_linear", "packed_linear", "softmax"]
    with pytest.raises(ValueError, match="node 0 is packed_linear, which a program cannot hold.*before packing"):
        ac.export(model, ac.randn(2, 8), str(tmp_path / "packed.acprog"))


def test_a_graph_keeps_the_layer_it_recorded():
    ac.manual_seed(6)
    layers = [nn.packed.LinearReLU.from_float(nn.Linear(8, 4))]
    x = ac.randn(3, 8)
    with ac.no_grad():
        want = layers[0](x).numpy()
        run = ac.compile(lambda t: layers[0](t))
        run(x)
        layers.clear()          # the layer's last reference: ac_packed_linear_free
        gc.collect()
        assert np.array_equal(run(x).numpy(), want)
