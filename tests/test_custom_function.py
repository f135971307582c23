"""aicraft.autograd.Function, autograd.grad, Variable and inference_mode, against torch."""
import numpy as np
import pytest
import torch

import aicraft as ac


def make_exp(lib):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            y = x.exp() * k
            ctx.save_for_backward(y)
            ctx.seen = ctx.needs_input_grad
            return y

        @staticmethod
        def backward(ctx, grad):
            y, = ctx.saved_tensors
            return grad * y, None
    return Exp


def test_function_matches_torch():
    x0 = np.array([0.5, -1.0, 2.0], np.float32)
    w = np.array([1.0, 2.0, 3.0], np.float32)
    xa, xt = ac.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    ya, yt = make_exp(ac).apply(xa, 3.0), make_exp(torch).apply(xt, 3.0)
    (ya * ac.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


def test_function_in_a_chain_inside_a_scope_matches_torch():
    x0 = np.array([0.1, 0.2, -0.3], np.float32)
    xa, xt = ac.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    with ac.checkpoint():
        (make_exp(ac).apply(xa * 2.0, 1.5) * xa).sum().backward()
    (make_exp(torch).apply(xt * 2.0, 1.5) * xt).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-5)


def test_needs_input_grad_and_no_graph_without_grad():
    Exp = make_exp(ac)
    x = ac.ones(2, requires_grad=True)
    y = Exp.apply(x, 1.0)
    assert y.requires_grad
    with ac.no_grad():
        assert not Exp.apply(x, 1.0).requires_grad
    assert not Exp.apply(ac.ones(2), 1.0).requires_grad


def test_two_outputs_and_new_style():
    class Split(ac.autograd.Function):
        @staticmethod
        def forward(a, b):
            return a * b, a + b

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g1, g2):
            a, b = ctx.saved_tensors
            return g1 * b + g2, g1 * a + g2
    a = ac.tensor([1.0, 2.0], requires_grad=True)
    b = ac.tensor([3.0, 4.0], requires_grad=True)
    p, q = Split.apply(a, b)
    (p.sum() * 2 + q.sum()).backward()
    assert a.grad.tolist() == [7.0, 9.0] and b.grad.tolist() == [3.0, 5.0]


def test_backward_errors_surface_and_nodes_are_released():
    class Bad(ac.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    class WrongShape(ac.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return ac.ones(5)
    x = ac.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="boom"):
        Bad.apply(x).sum().backward()
    with pytest.raises(Exception, match="shape"):
        WrongShape.apply(x).sum().backward()
    with ac.checkpoint():
        make_exp(ac).apply(x, 1.0).sum().backward()
    import gc
    gc.collect()
    assert not ac.autograd._live_nodes


def test_autograd_grad_as_torch():
    for lib in (ac, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        (w * 5).sum().backward()
        g, = lib.autograd.grad((w * w).sum(), w)
        assert g.tolist() == [2.0, 4.0] and w.grad.tolist() == [5.0, 5.0]
        unused = lib.ones(1, requires_grad=True)
        assert lib.autograd.grad((w * 3).sum(), [w, unused], allow_unused=True)[1] is None
        with pytest.raises(RuntimeError):
            lib.autograd.grad((w * 3).sum(), [w, unused])
    with pytest.raises(NotImplementedError):
        ac.autograd.grad((w * w).sum(), w, create_graph=True)


def test_variable_inference_mode_typed_constructors():
    v = ac.autograd.Variable(ac.ones(2), requires_grad=True)
    assert isinstance(v, ac.Tensor) and v.requires_grad
    with ac.inference_mode():
        assert not ac.is_grad_enabled()
    assert ac.is_grad_enabled()

    @ac.inference_mode()
    def f():
        return ac.is_grad_enabled()
    assert f() is False
    with ac.inference_mode(False):
        assert ac.is_grad_enabled()
    for name in ("FloatTensor", "LongTensor", "BoolTensor", "ByteTensor"):
        a, t = getattr(ac, name)([1, 0]), getattr(torch, name)([1, 0])
        assert a.dtype.name == str(t.dtype).split(".")[1] and a.tolist() == t.tolist()
        assert isinstance(a, getattr(ac, name))
        assert tuple(getattr(ac, name)(2, 3).shape) == (2, 3)
    assert not isinstance(ac.ones(1), ac.LongTensor)
