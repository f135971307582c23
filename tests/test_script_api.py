"""What training scripts reach beyond operators: Transformer with its decoder, amp,
backends, dtype names, random draws with Generators, data (utils.data package, lazy
samplers, FakeData, CenterCrop, Resize, FashionMNIST's layout), tensorboard's
ImportError; against torch where it applies."""
import importlib
import os
import warnings

import numpy as np
import pytest
import torch

import aicraft as ac
from aicraft import nn
from aicraft.data import transforms as T


# ---- nn.Transformer ---------------------------------------------------------------

@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_matches_torch_with_its_weights(norm_first):
    torch.manual_seed(0)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16,
              norm_first=norm_first)
    t = torch.nn.Transformer(**kw).eval()
    a = nn.Transformer(**kw).eval()
    assert list(a.state_dict()) == list(t.state_dict())
    a.load_state_dict({k: ac.tensor(v.numpy()) for k, v in t.state_dict().items()})
    src, tgt = torch.randn(5, 3, 8), torch.randn(4, 3, 8)
    mask_t = torch.nn.Transformer.generate_square_subsequent_mask(4)
    mask_a = nn.Transformer.generate_square_subsequent_mask(4)
    assert np.array_equal(mask_t.numpy(), mask_a.numpy())
    expected = t(src, tgt, tgt_mask=mask_t).detach().numpy()
    got = a(ac.tensor(src.numpy()), ac.tensor(tgt.numpy()), tgt_mask=mask_a).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_transformer_trains_and_subclasses():
    class LM(nn.Transformer):
        def __init__(self):
            super().__init__(d_model=8, nhead=2, dim_feedforward=16, num_encoder_layers=1)
            self.decoder = nn.Linear(8, 5)   # replaces the Transformer's own, as word_language_model does

        def forward(self, src):
            return self.decoder(self.encoder(src))
    m = LM()
    assert isinstance(m.decoder, nn.Linear) and len(m.encoder.layers) == 1
    out = m(ac.randn(3, 2, 8))
    out.sum().backward()
    assert m.encoder.layers[0].linear1.weight.grad is not None
    layer = nn.TransformerDecoderLayer(8, 2, 16, batch_first=True)
    dec = nn.TransformerDecoder(layer, 2)
    assert dec(ac.randn(2, 3, 8), ac.randn(2, 5, 8)).shape == (2, 3, 8)
    with pytest.raises(TypeError):
        nn.Transformer(d_model=8, nhead=2, dtype=ac.float64)


# ---- amp, backends, dtypes ---------------------------------------------------------------

def test_amp_on_cpu_keeps_float32_and_scaler_is_torchs():
    with ac.amp.autocast("cpu"):
        assert (ac.ones(2) @ ac.ones(2)).dtype is ac.float32
    with ac.cuda.amp.autocast(enabled=False):
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        off = ac.cuda.amp.GradScaler()
    if not ac.cuda.is_available():
        assert not off.is_enabled() and off.get_scale() == 1.0
        x = ac.ones(2)
        assert off.scale(x) is x and off.state_dict() == {}
    for lib in (ac, torch):
        m = lib.nn.Linear(2, 1)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        s = lib.amp.GradScaler("cpu", init_scale=4.0, growth_interval=1)
        s.scale(m(lib.ones(1, 2)).sum()).backward()
        s.step(opt)
        s.update()
        assert s.get_scale() == 8.0
        m.weight.grad = None
        s.scale(m(lib.ones(1, 2)).sum() * float("inf")).backward()
        s.step(opt)
        s.update()
        assert s.get_scale() == 4.0


def test_backends_and_dtype_names():
    cudnn = importlib.import_module("aicraft.backends.cudnn")
    cudnn.benchmark = True
    assert ac.backends.cudnn.benchmark is True and not cudnn.is_available()
    cudnn.benchmark = False
    assert not ac.backends.mps.is_available()
    for name in ("float16", "bfloat16", "float64", "complex64"):
        d = getattr(ac, name)
        assert repr(d) == "aicraft." + name
        with pytest.raises(TypeError):
            ac.ones(2).to(d)
        with pytest.raises(TypeError):
            ac.zeros(2, dtype=d)
    for name in ("float32", "float64", "float16", "bfloat16"):
        a, t = ac.finfo(getattr(ac, name)), torch.finfo(getattr(torch, name))
        assert (a.eps, a.max, a.tiny, a.bits) == (t.eps, t.max, t.tiny, t.bits)
    for name in ("int64", "uint8", "int8"):
        a, t = ac.iinfo(getattr(ac, name)), torch.iinfo(getattr(torch, name))
        assert (a.min, a.max, a.bits) == (t.min, t.max, t.bits)
    with pytest.raises(TypeError):
        ac.iinfo(ac.float32)


# ---- random draws --------------------------------------------------------------------------

def test_generator_seeds_the_ops_that_take_it():
    g = ac.Generator().manual_seed(3)
    a = ac.randn(5, generator=g)
    ac.manual_seed(3)
    assert np.array_equal(a.numpy(), ac.randn(5).numpy())
    state = g.get_state()
    x = ac.rand(4, generator=g)
    ac.rand(10)                      # the thread's generator does not move g's
    g.set_state(state)
    assert np.array_equal(x.numpy(), ac.rand(4, generator=g).numpy())
    g.manual_seed(1)
    p = ac.randperm(8, generator=g)
    g.manual_seed(1)
    assert p.tolist() == ac.randperm(8, generator=g).tolist() and sorted(p.tolist()) == list(range(8))
    with pytest.raises(TypeError):
        ac.rand(2, generator=np.random.default_rng())


def test_multinomial_distribution_and_errors():
    ac.manual_seed(0)
    w = ac.tensor([0.1, 0.0, 0.6, 0.3])
    draws = ac.multinomial(w, 200000, replacement=True).numpy()
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 2e5, [0.1, 0, 0.6, 0.3], atol=0.005)
    rows = ac.multinomial(ac.tensor([[1.0, 0, 1, 1], [0, 5, 0, 1]]), 2)
    assert rows.shape == (2, 2) and rows.dtype is ac.int64
    assert all(len(set(r)) == 2 for r in rows.tolist()) and set(rows.tolist()[1]) == {1, 3}
    second = np.bincount([ac.multinomial(w, 2)[1].item() for _ in range(3000)], minlength=4) / 3000
    np.testing.assert_allclose(second, [0.193, 0, 0.324, 0.483], atol=0.04)  # sum_j p_j p_k / (1 - p_j)
    for bad, kw in ((ac.tensor([0.5, -1.0]), {}), (ac.tensor([0.0, 0.0]), {}), (w, {"num_samples": 4}),
                    (ac.ones(2, 2, 2), {})):
        with pytest.raises((ValueError, ac.ShapeError)):
            ac.multinomial(bad, kw.get("num_samples", 1))
    with pytest.raises(RuntimeError):
        ac.multinomial(ac.tensor([1, 2]), 1)


def test_other_draws_and_inplace_fills():
    ac.manual_seed(0)
    b = ac.bernoulli(ac.full((10000,), 0.3))
    assert b.dtype is ac.float32 and abs(b.numpy().mean() - 0.3) < 0.02
    n = ac.normal(2.0, 3.0, (20000,)).numpy()
    assert abs(n.mean() - 2) < 0.1 and abs(n.std() - 3) < 0.1
    assert ac.normal(ac.zeros(3), ac.ones(3)).shape == (3,)
    r = ac.randint_like(ac.zeros(1000, dtype=ac.int64), 3, 7)
    assert r.dtype is ac.int64 and set(r.tolist()) == {3, 4, 5, 6}
    t = ac.empty(10000)
    assert abs(t.uniform_(-1, 1).numpy().mean()) < 0.05 and abs(t.normal_(1, 2).numpy().std() - 2) < 0.1
    assert set(t.bernoulli_(0.5).tolist()) == {0.0, 1.0} and t.exponential_().numpy().min() >= 0
    assert ac.zeros(3).data_ptr() != 0
    with pytest.raises(RuntimeError):
        ac.ones(2, requires_grad=True).uniform_()


# ---- data ------------------------------------------------------------------------------------

def test_utils_data_is_a_package_with_torchs_submodules():
    from aicraft.utils.data.dataloader import DataLoader
    from aicraft.utils.data.dataset import ConcatDataset
    from aicraft.utils.data.distributed import DistributedSampler  # noqa: F401
    from aicraft.utils.data.sampler import RandomSampler, Sampler  # noqa: F401
    assert DataLoader is ac.data.DataLoader and ConcatDataset is ac.data.ConcatDataset
    assert ac.utils.data.dataloader.DataLoader is DataLoader


def test_samplers_draw_lazily():
    ds = ac.data.TensorDataset(ac.arange(10.0))
    s = ac.data.RandomSampler(ds, replacement=True, num_samples=int(1e10))
    loader = ac.data.DataLoader(ds, batch_size=4, sampler=s)
    assert len(loader) == 2_500_000_000
    it = iter(loader)
    batches = [next(it)[0].tolist() for _ in range(3)]
    assert all(len(b) == 4 and set(b) <= set(range(10)) for b in batches)
    first = next(iter(s))
    assert 0 <= first < 10
    bs = ac.data.BatchSampler(ac.data.SequentialSampler(range(10)), 3, False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]] and len(bs) == 4
    assert list(ac.data.BatchSampler(range(10), 3, True)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    w = ac.data.WeightedRandomSampler([0.1, 0.9, 0.0], 5000, generator=np.random.default_rng(0))
    counts = np.bincount(list(w), minlength=3)
    assert counts[2] == 0 and abs(counts[1] / 5000 - 0.9) < 0.02
    assert sorted(ac.data.WeightedRandomSampler([1, 1, 1], 3, replacement=False)) == [0, 1, 2]
    g = ac.Generator().manual_seed(0)
    parts = ac.data.random_split(range(10), [0.5, 0.5], generator=g)
    assert sorted(list(parts[0].indices) + list(parts[1].indices)) == list(range(10))
    c = ds + ds
    assert len(c) == 20 and float(c[12][0]) == 2.0 and float(c[-1][0]) == 9.0


@pytest.mark.parametrize("size", [(10, 13), (17, 11), (85, 85), 7])
def test_resize_matches_torchs_antialiased_bilinear(size):
    rng = np.random.default_rng(0)
    x = rng.random((3, 30, 40), dtype=np.float32)
    th, tw = (size, int(size * 40 / 30)) if isinstance(size, int) else size
    ref = torch.nn.functional.interpolate(torch.tensor(x)[None], size=(th, tw), mode="bilinear",
                                          antialias=True, align_corners=False)[0].numpy()
    np.testing.assert_allclose(T.Resize(size)(ac.tensor(x)).numpy(), ref, atol=2e-6)
    hwc = T.Resize(size)(x.transpose(1, 2, 0))
    np.testing.assert_allclose(hwc.transpose(2, 0, 1), ref, atol=2e-6)
    img = (x.transpose(1, 2, 0) * 255).astype(np.uint8)
    assert T.Resize(size)(img).dtype == np.uint8
    with pytest.raises(NotImplementedError):
        T.Resize(size, interpolation="bicubic")


def test_center_crop_as_torchvision():
    img = np.arange(5 * 6).reshape(5, 6).astype(np.uint8)
    assert T.CenterCrop(2)(img).tolist() == [[14, 15], [20, 21]]
    assert T.CenterCrop((7, 2))(img).shape == (7, 2)          # padded with zeros
    t = ac.tensor(np.arange(2 * 5 * 6, dtype=np.float32).reshape(2, 5, 6))
    assert T.CenterCrop(3)(t).shape == (2, 3, 3)
    batch = T.Compose([T.CenterCrop(4), T.ToTensor()]).batch(np.zeros((2, 5, 6), np.uint8))
    assert batch.shape == (2, 1, 4, 4)


def test_fake_data():
    fd = ac.data.datasets.FakeData(size=6, image_size=(3, 8, 9), num_classes=4, transform=T.ToTensor())
    x, y = fd[2]
    assert x.shape == (3, 8, 9) and 0 <= y < 4 and np.array_equal(fd[2][0].numpy(), x.numpy())
    xb, yb = next(iter(ac.data.DataLoader(fd, batch_size=4)))
    assert xb.shape == (4, 3, 8, 9) and yb.dtype is ac.int64
    with pytest.raises(IndexError):
        fd[6]


def _write_idx(path, array):
    ac.data.datasets.write_idx(path, array)


def test_fashion_mnist_torchvision_layout_and_download(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for split, n in (("train", 3), ("t10k", 2)):
        _write_idx(str(raw / ("%s-images-idx3-ubyte.gz" % split)), np.full((n, 28, 28), 7, np.uint8))
        _write_idx(str(raw / ("%s-labels-idx1-ubyte" % split)), np.arange(n, dtype=np.uint8))
    ds = ac.data.FashionMNIST(str(tmp_path), train=True, download=True, transform=T.ToTensor())
    assert len(ds) == 3 and ds[1][1] == 1 and ds[0][0].shape == (1, 28, 28)
    assert len(ac.data.FashionMNIST(str(tmp_path), False)) == 2
    with pytest.raises(RuntimeError, match="FashionMNIST/raw"):
        ac.data.FashionMNIST(str(tmp_path / "none"), download=True)
    with pytest.raises(FileNotFoundError):
        ac.data.FashionMNIST(str(tmp_path / "none"))


def test_tensorboard_import_error_names_the_package(tmp_path):
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="tensorboard package"):
            importlib.import_module("aicraft.utils.tensorboard")
    else:
        from aicraft.utils.tensorboard import SummaryWriter
        with SummaryWriter(str(tmp_path)) as w:
            w.add_scalar("loss", ac.tensor(0.5), 1)
        assert os.listdir(tmp_path)


def test_dropout2d_on_2d_input_is_elementwise_dropout_with_a_warning_as_torch():
    ac.manual_seed(0)
    with pytest.warns(UserWarning, match="2-D input"):
        y = nn.Dropout2d(0.5)(ac.ones(200, 50))
    values = set(np.unique(y.numpy()).tolist())
    assert values == {0.0, 2.0}
    per_row = (y.numpy() == 0).sum(axis=1)
    assert per_row.min() < 50 and per_row.max() > 0   # not whole rows: element-wise
    assert nn.Dropout2d(0.5).eval()(ac.ones(3, 4)).tolist() == [[1.0] * 4] * 3
