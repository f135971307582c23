"""Bad input to every public Python function gives a clear exception, never a
crash, changes nothing, and leaves the library usable.

Each case is (description, call, expected exception types). Where C decides
the kind of error (a dim out of range is C's AC_ERR_ARG, PyTorch's IndexError),
either is accepted; what is checked is that it is an exception of that family
and that the library still works afterwards.
"""
import gc
import io

import numpy as np
import pytest

import aicraft as ac
import aicraft.functional as F

DIM = (IndexError, ValueError)          # a dim out of range


def t23():
    return ac.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))


def leaf():
    return ac.ones(2, 3, requires_grad=True)


def not_a_leaf():
    return ac.ones(2, requires_grad=True) * 2


CASES = [
    # ---- creation
    ("zeros negative dim", lambda: ac.zeros(-1), ValueError),
    ("zeros overflowing size", lambda: ac.zeros(2 ** 40, 2 ** 40), (MemoryError, ValueError)),
    ("zeros dim beyond 64 bits", lambda: ac.zeros(2 ** 70), (ValueError, OverflowError)),
    ("zeros float dim", lambda: ac.zeros(2.5), TypeError),
    ("zeros string", lambda: ac.zeros("a"), TypeError),
    ("zeros None", lambda: ac.zeros(None), TypeError),
    ("zeros 9 dims", lambda: ac.zeros(*([1] * 9)), ValueError),
    ("ones negative dim", lambda: ac.ones(3, -2), ValueError),
    ("ones overflowing size", lambda: ac.ones(2 ** 31, 2 ** 31, 2 ** 31), (MemoryError, ValueError)),
    ("rand negative dim", lambda: ac.rand(-3), ValueError),
    ("randn overflowing size", lambda: ac.randn(2 ** 62, 4), (MemoryError, ValueError)),
    ("full non-number value", lambda: ac.full((2,), "a"), TypeError),
    ("full bad shape", lambda: ac.full("ab", 1.0), TypeError),
    ("zeros_like non-tensor", lambda: ac.zeros_like([1, 2]), TypeError),
    ("ones_like non-tensor", lambda: ac.ones_like(np.ones(2)), TypeError),
    ("full_like non-tensor", lambda: ac.full_like(3, 1.0), TypeError),
    ("tensor of strings", lambda: ac.tensor(["a", "b"]), TypeError),
    ("tensor of objects", lambda: ac.tensor(object()), TypeError),
    ("tensor of dicts", lambda: ac.tensor({1: 2}), TypeError),
    ("tensor of complex", lambda: ac.tensor([1j]), TypeError),
    ("tensor ragged", lambda: ac.tensor([[1, 2], [3]]), ValueError),
    ("tensor 9 dims", lambda: ac.tensor(np.zeros((1,) * 9)), ValueError),
    ("from_numpy of a list", lambda: ac.from_numpy([1, 2]), TypeError),
    ("from_numpy of strings", lambda: ac.from_numpy(np.array(["a"])), TypeError),
    ("arange to inf", lambda: ac.arange(0, float("inf")), ValueError),
    ("arange to nan", lambda: ac.arange(0, float("nan")), ValueError),
    ("arange step 0", lambda: ac.arange(0, 10, 0), ValueError),
    ("arange too many", lambda: ac.arange(0, 1e30, 1e-30), (MemoryError, ValueError)),
    ("arange string", lambda: ac.arange("a"), TypeError),
    ("eye negative", lambda: ac.eye(-1), ValueError),
    ("eye negative m", lambda: ac.eye(2, -3), ValueError),
    ("eye overflowing", lambda: ac.eye(2 ** 40, 2 ** 40), (MemoryError, ValueError)),
    ("eye string", lambda: ac.eye("a"), TypeError),
    ("eye float", lambda: ac.eye(2.5), TypeError),
    ("manual_seed string", lambda: ac.manual_seed("x"), TypeError),
    ("manual_seed too big", lambda: ac.manual_seed(2 ** 70), ValueError),
    ("cat empty", lambda: ac.cat([]), ValueError),
    ("cat of a tensor", lambda: ac.cat(ac.ones(2)), TypeError),
    ("cat with a string", lambda: ac.cat([ac.ones(2), "a"]), TypeError),
    ("cat mismatched", lambda: ac.cat([ac.ones(2, 3), ac.ones(3, 3)], dim=1), ac.ShapeError),
    ("cat dim out of range", lambda: ac.cat([ac.ones(2), ac.ones(2)], dim=5), DIM),
    ("cat ndim mismatch", lambda: ac.cat([ac.ones(2), ac.ones(2, 1)]), ac.ShapeError),
    ("stack mismatched", lambda: ac.stack([ac.ones(2), ac.ones(3)]), ac.ShapeError),
    ("stack dim out of range", lambda: ac.stack([ac.ones(2)], dim=3), DIM),
    ("stack float dim", lambda: ac.stack([ac.ones(2)], dim=0.5), TypeError),
    # ---- binary ops and matmul
    ("add mismatched shapes", lambda: ac.ones(2, 3) + ac.ones(4), ac.ShapeError),
    ("mul mismatched shapes", lambda: ac.ones(3, 1, 2) * ac.ones(4, 3), ac.ShapeError),
    ("add a string", lambda: ac.ones(2) + "a", TypeError),
    ("matmul misaligned", lambda: ac.ones(3, 4) @ ac.ones(5, 6), ac.ShapeError),
    ("matmul 0-d", lambda: ac.matmul(ac.tensor(1.0), ac.ones(2)), ac.ShapeError),
    ("matmul batch mismatch", lambda: ac.ones(2, 3, 4) @ ac.ones(3, 4, 5), ac.ShapeError),
    ("matmul a scalar", lambda: ac.ones(2, 2) @ 2.0, TypeError),
    ("matmul function non-tensor", lambda: ac.matmul([1.0], ac.ones(1)), TypeError),
    ("pow mismatched", lambda: ac.ones(2) ** ac.ones(3), ac.ShapeError),
    ("huge python int scalar", lambda: ac.ones(2) + 2 ** 2000, (OverflowError, ValueError)),
    # ---- shapes and indexing
    ("reshape wrong size", lambda: t23().reshape(5), ac.ShapeError),
    ("reshape two -1", lambda: t23().reshape(-1, -1), (ac.ShapeError, ValueError)),
    ("reshape float", lambda: t23().reshape(2.0, 3), TypeError),
    ("view 9 dims", lambda: ac.ones(1).view(*([1] * 9)), ValueError),
    ("flatten bad dims", lambda: t23().flatten(1, 0), (ValueError, ac.ShapeError, IndexError)),
    ("flatten dim out of range", lambda: t23().flatten(0, 5), DIM),
    ("transpose dim out of range", lambda: t23().transpose(0, 5), DIM),
    ("transpose string", lambda: t23().transpose("a", 0), TypeError),
    ("permute repeated", lambda: t23().permute(0, 0), (ValueError, ac.ShapeError)),
    ("permute too few", lambda: t23().permute(0), (ValueError, ac.ShapeError)),
    ("permute out of range", lambda: t23().permute(0, 7), DIM),
    ("squeeze out of range", lambda: t23().squeeze(5), DIM),
    ("unsqueeze out of range", lambda: t23().unsqueeze(10), DIM),
    ("unsqueeze huge", lambda: t23().unsqueeze(2 ** 40), IndexError),
    ("index out of range", lambda: t23()[5], IndexError),
    ("negative index out of range", lambda: t23()[-3], IndexError),
    ("too many indices", lambda: t23()[0, 0, 0], IndexError),
    ("two ellipses", lambda: t23()[..., ...], IndexError),
    ("float index", lambda: t23()[1.5], TypeError),
    ("string index", lambda: t23()["a"], TypeError),
    ("list index out of range", lambda: t23()[[0, 2]], IndexError),
    ("float tensor index", lambda: t23()[ac.tensor(0.0)], IndexError),      # as PyTorch
    ("bool index", lambda: t23()[True], IndexError),

    ("two advanced indices, one out of range", lambda: t23()[[0], [3]], IndexError),
    ("slice step 0", lambda: t23()[::0], ValueError),
    ("negative slice step", lambda: t23()[::-1], ValueError),
    ("slice float bound", lambda: t23()[0.5:], TypeError),
    ("size dim out of range", lambda: t23().size(2), IndexError),
    ("len of 0-d", lambda: len(ac.tensor(1.0)), TypeError),
    ("iterate 0-d", lambda: list(ac.tensor(1.0)), TypeError),
    # ---- reductions and math
    ("sum dim out of range", lambda: t23().sum(5), DIM),
    ("sum repeated dims", lambda: t23().sum((0, 0)), (ValueError, ac.ShapeError)),
    ("sum dim string", lambda: t23().sum("a"), TypeError),
    ("sum dim float", lambda: t23().sum(1.5), TypeError),
    ("sum dim huge", lambda: t23().sum(2 ** 40), IndexError),
    ("sum dim and axis", lambda: t23().sum(dim=0, axis=1), TypeError),
    ("mean dim out of range", lambda: t23().mean(dim=(0, 3)), DIM),
    ("max dim out of range", lambda: t23().max(2), DIM),
    ("max of a tensor that does not broadcast", lambda: t23().max(ac.ones(4)), ac.ShapeError),
    ("min dim out of range", lambda: t23().min(-3), DIM),
    ("var dim out of range", lambda: t23().var(4), DIM),
    ("std correction string", lambda: t23().std(correction="a"), TypeError),
    ("argmax dim out of range", lambda: t23().argmax(2), DIM),
    ("softmax dim out of range", lambda: t23().softmax(2), DIM),
    ("softmax dim string", lambda: t23().softmax("a"), TypeError),
    ("log_softmax float dim", lambda: t23().log_softmax(1.5), TypeError),
    ("clamp without bounds", lambda: t23().clamp(), ValueError),
    ("clamp string", lambda: t23().clamp("a"), TypeError),
    ("item of many", lambda: t23().item(), RuntimeError),
    ("bool of many", lambda: bool(t23()), RuntimeError),
    ("float of many", lambda: float(t23()), RuntimeError),
    ("max of empty", lambda: ac.zeros(0).max(), (ValueError, ac.ShapeError, IndexError)),
    ("exp of a list", lambda: ac.exp([1.0]), TypeError),
    ("sum of an array", lambda: ac.sum(np.ones(3)), TypeError),
    # ---- autograd
    ("backward without grad", lambda: t23().sum().backward(), RuntimeError),
    ("backward of non-scalar", lambda: (leaf() * 2).backward(), (ac.ShapeError, RuntimeError)),
    ("backward wrong gradient shape", lambda: (leaf() * 2).backward(ac.ones(3)), ac.ShapeError),
    ("backward gradient string", lambda: (leaf() * 2).backward("a"), TypeError),
    ("requires_grad string", lambda: setattr(t23(), "requires_grad", "yes"), TypeError),
    ("requires_grad off a non-leaf", lambda: not_a_leaf().requires_grad_(False), RuntimeError),
    ("grad set to a tensor", lambda: setattr(leaf(), "grad", ac.ones(2, 3)), TypeError),
    ("data set to a list", lambda: setattr(leaf(), "data", [1, 2]), TypeError),
    ("data set wrong shape", lambda: setattr(leaf(), "data", ac.ones(4)), ac.ShapeError),
    ("in-place on a leaf with grad on", lambda: leaf().add_(1.0), RuntimeError),
    ("in-place with grad-requiring other", lambda: t23().mul_(leaf()), RuntimeError),
    ("in-place result shape", lambda: ac.ones(3).add_(ac.ones(2, 3)), ac.ShapeError),
    ("in-place string", lambda: ac.ones(3).add_("a"), TypeError),
    ("fill_ string", lambda: ac.ones(3).fill_("a"), TypeError),
    ("copy_ non-tensor", lambda: ac.ones(3).copy_([1, 2, 3]), TypeError),
    ("copy_ wrong shape", lambda: ac.ones(3).copy_(ac.ones(4)), ac.ShapeError),
    ("no_grad decorating a number", lambda: ac.no_grad()(5), TypeError),
    ("set_grad_enabled string", lambda: ac.set_grad_enabled("a"), TypeError),
    ("set_grad_enabled decorating", lambda: ac.set_grad_enabled(True)(len), TypeError),
    ("gradcheck fn not callable", lambda: ac.gradcheck(5, [leaf()]), TypeError),
    ("gradcheck inputs not tensors", lambda: ac.gradcheck(lambda a: a, [[1.0]]), TypeError),
    ("gradcheck no inputs", lambda: ac.gradcheck(lambda: ac.ones(1), []), ValueError),
    ("gradcheck fn returns a list", lambda: ac.gradcheck(lambda a: [a], [leaf()]), TypeError),
    ("gradcheck eps 0", lambda: ac.gradcheck(lambda a: a * 2, [leaf()], eps=0), ValueError),
    ("gradcheck negative atol", lambda: ac.gradcheck(lambda a: a * 2, [leaf()], atol=-1), ValueError),
    ("gradcheck non-leaf input", lambda: ac.gradcheck(lambda a: a * 2, [not_a_leaf()]), ValueError),
    ("gradcheck output without grad", lambda: ac.gradcheck(lambda a: a.detach() * 2, [leaf()]), ValueError),
    ("gradcheck fn failing in C", lambda: ac.gradcheck(lambda a: a @ ac.ones(5, 5), [leaf()]), ac.ShapeError),
    ("to_dot string", lambda: ac.viz.to_dot("a"), TypeError),
    ("to_text None", lambda: ac.viz.to_text(None), TypeError),
    ("print_graph to a non-file", lambda: ac.viz.print_graph(not_a_leaf(), file=5), AttributeError),
    # ---- functional
    ("relu of a list", lambda: F.relu([1.0]), TypeError),
    ("softmax without a tensor", lambda: F.softmax(np.ones(3), 0), TypeError),
    ("gelu unknown approximation", lambda: F.gelu(t23(), approximate="fast"), ValueError),
    ("mse shapes", lambda: F.mse_loss(ac.ones(3), ac.ones(4)), ac.ShapeError),
    ("mse reduction", lambda: F.mse_loss(ac.ones(3), ac.ones(3), reduction="avg"), ValueError),
    ("mse reduction None", lambda: F.mse_loss(ac.ones(3), ac.ones(3), reduction=None), ValueError),
    ("mse input string", lambda: F.mse_loss("a", ac.ones(3)), TypeError),
    ("mse target object", lambda: F.mse_loss(ac.ones(3), object()), TypeError),
    ("cross_entropy class too big", lambda: F.cross_entropy(ac.ones(2, 5), [0, 7]), IndexError),
    ("cross_entropy negative class", lambda: F.cross_entropy(ac.ones(2, 5), [0, -1]), IndexError),
    ("cross_entropy fractional class", lambda: F.cross_entropy(ac.ones(2, 5), [0.5, 1]), (IndexError, ValueError)),
    ("cross_entropy nan class", lambda: F.cross_entropy(ac.ones(2, 5), [float("nan"), 1]), (IndexError, ValueError)),
    ("cross_entropy inf class", lambda: F.cross_entropy(ac.ones(2, 5), [float("inf"), 1]), (IndexError, ValueError)),
    ("cross_entropy 3-d logits", lambda: F.cross_entropy(ac.ones(2, 3, 4), [0, 1]), (ac.ShapeError, ValueError)),
    ("cross_entropy target shape", lambda: F.cross_entropy(ac.ones(2, 5), [0, 1, 2]), ac.ShapeError),
    ("cross_entropy smoothing 2", lambda: F.cross_entropy(ac.ones(2, 5), [0, 1], label_smoothing=2.0), ValueError),
    ("cross_entropy smoothing string", lambda: F.cross_entropy(ac.ones(2, 5), [0, 1], label_smoothing="a"), TypeError),
    ("cross_entropy reduction", lambda: F.cross_entropy(ac.ones(2, 5), [0, 1], reduction="max"), ValueError),
    ("bce shapes", lambda: F.binary_cross_entropy(ac.full((3,), 0.5), ac.ones(2)), ac.ShapeError),
    ("bce probability above 1", lambda: F.binary_cross_entropy(ac.full((3,), 1.5), ac.ones(3)), ValueError),
    ("bce with logits shapes", lambda: F.binary_cross_entropy_with_logits(ac.ones(3), ac.ones(2, 2)), ac.ShapeError),
    # ---- named forms of operators (the operators hand NotImplemented on to Python)
    *[("%s with a string" % name, (lambda name=name: getattr(ac, name)(ac.ones(2), "x")), TypeError)
      for name in ("add", "sub", "mul", "div", "pow", "matmul", "eq", "ne", "lt", "le", "gt", "ge",
                   "logical_and", "logical_or", "logical_xor")],
    ("method add with a string", lambda: ac.ones(2).add("x"), TypeError),
    # ---- memory and threads
    ("memory limit negative", lambda: ac.set_memory_limit(-1), ValueError),
    ("memory limit string", lambda: ac.set_memory_limit("1GB"), TypeError),
    ("memory limit float", lambda: ac.set_memory_limit(1.5), TypeError),
    ("memory limit huge", lambda: ac.set_memory_limit(2 ** 64), ValueError),
    ("threads 0", lambda: ac.set_num_threads(0), ValueError),
    ("threads too many", lambda: ac.set_num_threads(1000), ValueError),
    ("threads string", lambda: ac.set_num_threads("2"), TypeError),
]


def library_works():
    """A small training step, as a check that nothing is left broken."""
    w = ac.ones(3, requires_grad=True)
    with ac.checkpoint():
        loss = ((w * ac.tensor([1.0, 2.0, 3.0])) ** 2).sum()
        loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 8.0, 18.0])
    assert ac.is_grad_enabled()
    assert ac.memory_stats()["memory_limit"] == 0


@pytest.mark.parametrize("call,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error_and_the_library_still_works(call, expected):
    depth = ac.memory_stats()
    with pytest.raises(expected) as info:
        call()
    assert str(info.value), "the exception has no message"
    library_works()
    assert depth["memory_limit"] == ac.memory_stats()["memory_limit"]


def test_error_messages_name_the_op_and_the_shapes():
    with pytest.raises(ac.ShapeError) as info:
        ac.ones(3, 4) @ ac.ones(5, 6)
    assert "matmul" in str(info.value) and "(3, 4)" in str(info.value) and "(5, 6)" in str(info.value)
    with pytest.raises(ac.ShapeError) as info:
        ac.ones(2, 3) + ac.ones(4)
    assert "add" in str(info.value) and "(2, 3)" in str(info.value) and "(4,)" in str(info.value)
    assert issubclass(ac.ShapeError, ValueError) and issubclass(ac.ScopeError, RuntimeError)
    assert issubclass(ac.GradcheckError, AssertionError) and issubclass(ac.FormatError, ValueError)


def test_failed_ops_change_nothing():
    w = ac.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ac.ShapeError):
        w.add_(ac.ones(2, 3))
    with pytest.raises(ac.ShapeError):
        w.copy_(ac.ones(4))
    with pytest.raises(TypeError):
        w += "a"
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0, 3.0])
    x = ac.ones(2, requires_grad=True)
    with pytest.raises(ac.ShapeError):
        (x * 2).backward(ac.ones(3))
    assert x.grad is None


def test_failed_calls_leak_nothing():
    gc.collect()
    before = ac.memory_stats()
    for _ in range(50):
        for _, call, expected in CASES:
            try:
                call()
            except expected:
                pass
    gc.collect()
    after = ac.memory_stats()
    assert after["bytes_in_use"] == before["bytes_in_use"]
    assert after["live_tensors"] == before["live_tensors"]
    assert after["live_nodes"] == before["live_nodes"]


def test_nan_and_inf_data_flow_through_without_errors():
    t = ac.tensor([float("nan"), float("inf"), -float("inf"), 1.0])
    assert "nan" in repr(t) and "inf" in repr(t)
    out = (t * 2).numpy()
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf and out[3] == 2.0
    assert np.isnan(ac.tensor([-1.0]).log().item())
    assert ac.tensor([1.0]).div(0.0).item() == np.inf
    assert np.isnan(ac.full((2,), float("nan")).sum().item())
    library_works()


def test_print_graph_writes_text():
    out = io.StringIO()
    ac.viz.print_graph(not_a_leaf().sum(), file=out)
    assert "sum" in out.getvalue()
