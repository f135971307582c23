"""Every CUDA kernel of the table against the CPU path, forward and backward, on random
shapes: odd sizes, broadcasts, empty tensors. Gradients flow back through .cuda()
to CPU leaves, so both runs share their inputs."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from gpu import needs_gpu, seeded  # noqa: F401 (seeded: an autouse fixture)

pytestmark = needs_gpu

RTOL, ATOL = 1e-4, 1e-5
BROADCASTS = [((7,), (7,)), ((3, 5), (5,)), ((4, 1, 3), (1, 6, 1)), ((1,), (2, 9)), ((0, 3), (3,)),
              ((33, 65), (33, 65)), ((2, 3, 4, 5), (3, 1, 5))]


def leaves(*shapes, low=-2.0, high=2.0, seed=0):
    rng = np.random.default_rng(seed)
    return [ac.tensor(rng.uniform(low, high, s).astype(np.float32), requires_grad=True) for s in shapes]


def both(fn, *xs, grad_seed=1):
    """fn on the CPU and on CUDA from the same leaves: (out_cpu, out_cuda, grads_cpu, grads_cuda)."""
    outs, grads = [], []
    for device in ("cpu", "cuda"):
        for x in xs:
            x.grad = None
        out = fn(*[x.to(device) for x in xs])
        assert out.device.type == device
        g = ac.tensor(np.random.default_rng(grad_seed).standard_normal(out.shape).astype(np.float32))
        out.backward(g.to(device))
        outs.append(out.cpu().detach().numpy())
        grads.append([None if x.grad is None else x.grad.numpy() for x in xs])
    return outs[0], outs[1], grads[0], grads[1]


def check(fn, *xs, rtol=RTOL, atol=ATOL):
    out_cpu, out_cuda, g_cpu, g_cuda = both(fn, *xs)
    np.testing.assert_allclose(out_cuda, out_cpu, rtol=rtol, atol=atol)
    for a, b in zip(g_cuda, g_cpu):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_binary_ops_broadcast(op, shapes):
    low = 0.5 if op in ("div", "pow") else -2.0
    a, b = leaves(*shapes, low=low)
    check(lambda u, v: getattr(u, op)(v), a, b)


@pytest.mark.parametrize("fn, low", [
    (lambda x: x + 1.5, -2), (lambda x: x * -3.0, -2), (lambda x: 2.0 - x, -2), (lambda x: x / 4.0, -2),
    (lambda x: 3.0 / x, 0.5), (lambda x: x ** 3, -2), (lambda x: x ** 0.5, 0.1), (lambda x: -x, -2),
    (lambda x: x.exp(), -2), (lambda x: x.log(), 0.1), (lambda x: x.log1p(), -0.5), (lambda x: x.sqrt(), 0.1),
    (lambda x: x.abs(), -2), (lambda x: x.sin(), -2), (lambda x: x.cos(), -2),
    (lambda x: x.clamp(-0.5, 0.7), -2), (lambda x: x.relu(), -2), (lambda x: x.sigmoid(), -8),
    (lambda x: x.tanh(), -4), (lambda x: F.gelu(x), -4),
])
@pytest.mark.parametrize("shape", [(1,), (129,), (3, 7, 5), (0,)])
def test_unary_ops_and_activations(fn, low, shape):
    [x] = leaves(shape, low=low)
    check(fn, x)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_and_log_softmax(dim, log):
    [x] = leaves((5, 11, 3), low=-6, high=6)
    fn = F.log_softmax if log else F.softmax
    check(lambda t: fn(t, dim=dim), x)


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((65, 129), (129, 67)), ((7,), (7, 3)), ((2, 5), (5,)),
                                    ((4, 3, 6), (6, 2)), ((2, 1, 3, 4), (5, 4, 7)), ((0, 4), (4, 3)),
                                    ((3, 0), (0, 2))])
def test_matmul(shapes):
    a, b = leaves(*shapes)
    check(lambda u, v: u @ v, a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows, inp, out, bias", [(64, 784, 128, True), (1, 3, 2, False), (17, 65, 33, True),
                                                  (0, 4, 3, True)])
def test_linear_with_the_bias_in_the_epilogue(rows, inp, out, bias):
    x, w, b = leaves((rows, inp), (out, inp), (out,))
    if bias:
        check(lambda u, v, c: F.linear(u, v, c), x, w, b, atol=1e-4)
    else:
        check(lambda u, v: F.linear(u, v), x, w, atol=1e-4)


def test_dropout_draws_the_cpu_mask():
    [x] = leaves((37, 29))
    ac.manual_seed(5)
    cpu = F.dropout(x, 0.3, training=True).detach().numpy()
    ac.manual_seed(5)
    cuda = F.dropout(x.cuda(), 0.3, training=True).cpu().detach().numpy()
    np.testing.assert_array_equal(cuda, cpu)

    def reseeded_dropout(t):
        ac.manual_seed(5)   # the same mask on both devices, forward and backward
        return F.dropout(t, 0.3, training=True)
    check(reseeded_dropout, x)


@pytest.mark.parametrize("make", [
    lambda ps: ac.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda ps: ac.optim.Adam(ps, lr=1e-2),
    lambda ps: ac.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
])
def test_optimizer_steps_match_the_cpu(make):
    shapes = [(5000,), (33, 7), (1,)]
    runs = []
    for device in ("cpu", "cuda"):
        params = [ac.full(s, 0.5, device=device).requires_grad_(True) for s in shapes]
        opt = make(params)
        for step in range(3):
            opt.zero_grad()
            for p, s in zip(params, shapes):   # a leaf's backward(g) sets its grad to g
                g = np.sin(np.arange(int(np.prod(s)), dtype=np.float32) + step).reshape(s)
                p.backward(ac.tensor(g, device=device))
            opt.step()
        runs.append([p.cpu().detach().numpy() for p in params])
    for cuda, cpu in zip(runs[1], runs[0]):
        np.testing.assert_allclose(cuda, cpu, rtol=1e-5, atol=1e-6)


def test_fill_copy_and_mixing_devices():
    x = ac.full((3, 5), 2.5, device="cuda")
    assert x.device == "cuda:0" and x.is_cuda and x.tolist() == [[2.5] * 5] * 3
    assert ac.zeros_like(x).device == x.device and x.clone().cpu().tolist() == x.tolist()
    with pytest.raises(TypeError, match="cpu"):
        x.numpy()
    with pytest.raises(ac.DeviceError, match="same device"):
        x + ac.ones(3, 5)
    assert repr(x).endswith("device='cuda:0')")


@pytest.mark.parametrize("x_shape, w_shape, kw", [
    ((2, 1, 28, 28), (16, 1, 3, 3), dict(padding=1)), ((3, 4, 9, 7), (6, 2, 3, 2), dict(stride=2, groups=2)),
    ((1, 3, 11, 10), (5, 3, 3, 3), dict(padding=2, dilation=2)), ((2, 8, 5, 5), (4, 8, 1, 1), {}),
    ((0, 3, 5, 5), (2, 3, 3, 3), {}),
])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(x_shape, w_shape, kw, bias):
    x, w, b = leaves(x_shape, w_shape, (w_shape[0],))
    if bias:
        check(lambda u, v, c: F.conv2d(u, v, c, **kw), x, w, b, atol=1e-4)
    else:
        check(lambda u, v: F.conv2d(u, v, **kw), x, w, atol=1e-4)


@pytest.mark.parametrize("fn", [lambda t: F.max_pool2d(t, 2), lambda t: F.max_pool2d(t, 3, stride=2, padding=1),
                                lambda t: F.avg_pool2d(t, 2), lambda t: F.avg_pool2d(t, 3, stride=2, padding=1),
                                lambda t: F.adaptive_avg_pool2d(t, (3, 2))])
@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (1, 2, 7, 9)])
def test_pooling(fn, shape):
    [x] = leaves(shape)
    check(fn, x)


@pytest.mark.parametrize("shapes", [((65, 129), (129, 67)), ((4, 3, 6), (6, 2)), ((64, 784), (784, 128))])
def test_matmul_on_tensor_cores_in_tf32(shapes):
    a, b = leaves(*shapes)
    ac.backends.cuda.matmul.allow_tf32 = True
    try:
        check(lambda u, v: u @ v, a, b, rtol=2e-2, atol=2e-2)   # inputs rounded to 10 mantissa bits
    finally:
        ac.backends.cuda.matmul.allow_tf32 = False


@pytest.mark.parametrize("rows, classes", [(64, 10), (7, 1000), (1, 3), (0, 5)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_fused(rows, classes, reduction, smoothing):
    [x] = leaves((rows, classes), low=-5, high=5)
    target = ac.tensor(np.random.default_rng(2).integers(0, classes, rows))

    def loss(logits):
        out = F.cross_entropy(logits, target.to(logits.device), reduction=reduction, label_smoothing=smoothing)
        return out if reduction == "none" else out.reshape(1)
    if rows == 0 and reduction == "mean":
        assert np.isnan(F.cross_entropy(x.cuda(), target.cuda()).item())
        return
    check(loss, x)


def test_cross_entropy_names_a_bad_target():
    logits = ac.zeros(3, 4, device="cuda")
    with pytest.raises(IndexError, match="position 1 is not a class index"):
        F.cross_entropy(logits, ac.tensor([0, 7, 1], device="cuda"))


@pytest.mark.parametrize("name, kw, low, high", [
    ("mse_loss", {}, -2, 2), ("l1_loss", {}, -2, 2), ("smooth_l1_loss", dict(beta=0.5), -2, 2),
    ("binary_cross_entropy", {}, 0.05, 0.95), ("binary_cross_entropy_with_logits", {}, -4, 4),
])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(37,), (5, 9), (0,)])
def test_elementwise_losses(name, kw, low, high, reduction, shape):
    x, t = leaves(shape, shape, low=low, high=high)

    def loss(u, v):
        out = getattr(F, name)(u, v, reduction=reduction, **kw)
        return out if reduction == "none" else out.reshape(1)
    if shape == (0,) and reduction == "mean":
        assert np.isnan(getattr(F, name)(x.cuda(), t.cuda(), **kw).item())
        return
    check(loss, x, t)


def test_binary_cross_entropy_names_an_input_out_of_range():
    with pytest.raises(ValueError, match="position 2 .* not a probability"):
        F.binary_cross_entropy(ac.tensor([0.5, 0.2, 1.5], device="cuda"), ac.ones(3, device="cuda"))
