"""Tensor.register_post_accumulate_grad_hook: C's backward walk calls a leaf's hooks
once its gradient is final, the leaves nearest the loss first, as PyTorch does."""
import numpy as np
import pytest

import aicraft as ac


def _mlp(lib, x, w1, b1, w2):
    return lib.relu(x @ w1 + b1) @ w2


def test_hooks_see_final_grads_in_pytorchs_order():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((5, 4), (4, 3), (3,), (3, 2))]
    for lib, tensor in ((ac, lambda a, g: ac.tensor(a, requires_grad=g)),
                        (torch, lambda a, g: torch.tensor(a, requires_grad=g))):
        x, w1, b1, w2 = [tensor(a, i > 0) for i, a in enumerate(arrays)]
        seen = []
        for name, p in (("w1", w1), ("b1", b1), ("w2", w2)):
            p.register_post_accumulate_grad_hook(
                lambda t, name=name: seen.append((name, t.grad.detach().numpy().copy())))
        _mlp(lib, x, w1, b1, w2).sum().backward()
        order = [name for name, _ in seen]
        assert order[0] == "w2" and sorted(order[1:]) == ["b1", "w1"], order
        for (_, grad), p in zip(seen, [dict(w1=w1, b1=b1, w2=w2)[n] for n in order]):
            np.testing.assert_array_equal(grad, p.grad.detach().numpy())
        if lib is ac:
            ours = {n: g for n, g in seen}
        else:
            for name, grad in seen:
                np.testing.assert_allclose(ours[name], grad, rtol=1e-5, atol=1e-6)


def test_hook_of_a_weight_used_twice_runs_once():
    w = ac.full((3,), 3.0, requires_grad=True)
    x = ac.full((3,), 2.0)
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.numpy().copy()))
    ((w * x).sum() + (w * w).sum()).backward()
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [8.0, 8.0, 8.0])


def test_hooks_run_in_order_and_remove():
    w = ac.ones(2, requires_grad=True)
    calls = []
    first = w.register_post_accumulate_grad_hook(lambda t: calls.append("first"))
    w.register_post_accumulate_grad_hook(lambda t: calls.append("second"))
    (w * w).sum().backward()
    assert calls == ["first", "second"]
    first.remove()
    first.remove()   # twice is harmless
    (w * w).sum().backward()
    assert calls == ["first", "second", "second"]


def test_exception_in_a_hook_reaches_backwards_caller():
    w1 = ac.randn(3, 3, requires_grad=True)
    w2 = ac.randn(3, 3, requires_grad=True)

    def fail(t):
        raise KeyError("from the hook")
    handle = w2.register_post_accumulate_grad_hook(fail)
    with pytest.raises(KeyError, match="from the hook"):
        (ac.randn(2, 3) @ w1 @ w2).sum().backward()
    assert w1.grad is None   # the walk stopped at w2's hook
    handle.remove()
    (ac.randn(2, 3) @ w1 @ w2).sum().backward()
    assert w1.grad is not None


def test_bad_hooks_are_refused():
    w = ac.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="hook must be callable"):
        w.register_post_accumulate_grad_hook(3)
    with pytest.raises(RuntimeError, match="does not require grad"):
        ac.ones(2).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match=r"is not a leaf \(made by mul"):
        (w * 2).register_post_accumulate_grad_hook(print)
    with ac.checkpoint():
        scoped = ac.ones(2, requires_grad=True)
    with pytest.raises(ac.ScopeError):
        scoped.register_post_accumulate_grad_hook(print)
