"""torch_oracle.py - run one function on aicraft and on torch (the oracle) and compare:
values, dtypes and shapes exactly for data-moving ops, and the gradients of every float32
input under the same upstream gradient.

A case is fn(m, *tensors) written once for both libraries: m is the module (aicraft or
torch), the tensors are that library's.
"""
import numpy as np
import pytest

import aicraft as ac

torch = pytest.importorskip("torch")

DTYPES = {"float32": (torch.float32, ac.float32), "int64": (torch.int64, ac.int64),
          "bool": (torch.bool, ac.bool), "uint8": (torch.uint8, ac.uint8)}


def sample(shape, dtype, seed=0):
    """A torch tensor of shape and dtype name; int64 values past 2**40 (so a trip
    through float32 would show)."""
    g = torch.Generator().manual_seed(seed)
    if dtype == "float32":
        return torch.randn(shape, generator=g)
    if dtype == "int64":
        return torch.randint(-5, 6, shape, generator=g) + (2 ** 40 + 3)
    if dtype == "uint8":
        return torch.randint(0, 256, shape, generator=g).to(torch.uint8)
    return torch.randint(0, 2, shape, generator=g).bool()


def to_ac(t, requires_grad=False):
    out = ac.tensor(t.detach().numpy()) if t.dim() else ac.tensor(t.item(), dtype=DTYPES[str(t.dtype)[6:]][1])
    if requires_grad:
        out.requires_grad_(True)
    return out


def to_numpy(x):
    if isinstance(x, (tuple, list)):
        return [to_numpy(v) for v in x]
    if isinstance(x, ac.Tensor):
        return x.numpy()
    if hasattr(x, "detach"):
        return x.detach().numpy()
    return np.asarray(x)


def same(got, want, what=""):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (what, got, want)
        for g, w in zip(got, want):
            same(g, w, what)
        return
    if isinstance(want, torch.Tensor):
        assert isinstance(got, ac.Tensor), (what, type(got))
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (what, got.dtype, want.dtype)
        assert tuple(got.shape) == tuple(want.shape), (what, got.shape, want.shape)
        g, w = got.numpy(), want.detach().numpy()
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)
        return
    assert got == want, (what, got, want)


def check(fn, *inputs, grad=True, args_only=()):
    """fn on aicraft and on torch, values and (for float32 inputs) gradients the same.
    inputs are torch tensors; those at positions in args_only (indices) never get grad."""
    want_in = [t.clone().requires_grad_(grad and t.dtype == torch.float32 and i not in args_only)
               for i, t in enumerate(inputs)]
    got_in = [to_ac(t, w.requires_grad) for t, w in zip(inputs, want_in)]
    want = fn(torch, *want_in)
    got = fn(ac, *got_in)
    same(got, want)
    outs_w = [o for o in (want if isinstance(want, (tuple, list)) else [want])
              if isinstance(o, torch.Tensor) and o.requires_grad]
    if not outs_w:
        return got
    outs_g = [o for o in (got if isinstance(got, (tuple, list)) else [got]) if isinstance(o, ac.Tensor)
              and o.requires_grad]
    assert len(outs_g) == len(outs_w)
    loss_w, loss_g = 0, 0
    for k, (ow, og) in enumerate(zip(outs_w, outs_g)):
        w = torch.randn(ow.shape, generator=torch.Generator().manual_seed(k + 1))
        loss_w = loss_w + (ow * w).sum()
        loss_g = loss_g + (og * to_ac(w)).sum()
    loss_w.backward()
    loss_g.backward()
    for i, (tw, tg) in enumerate(zip(want_in, got_in)):
        if tw.requires_grad:
            want_grad = tw.grad if tw.grad is not None else torch.zeros_like(tw)
            got_grad = tg.grad if tg.grad is not None else ac.zeros(*tw.shape)
            np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg="grad of input %d" % i)
    return got
