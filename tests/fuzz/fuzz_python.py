"""fuzz_python.py - atheris over aicraft's Python entry points.

Each input picks a few calls and their arguments: tensors of random shapes,
dtypes and values (NaN, inf, huge), sizes that are huge or negative, wrong
types, tensors whose scope has ended, into creation, every op family, nn layers,
optimizers and ac.load. A call may return or raise one of the exceptions
aicraft documents (ValueError and its ShapeError, TypeError, IndexError,
MemoryError, RuntimeError and its ScopeError); anything else, a crash or a hang
is a finding. `make fuzz-python` runs it for FUZZ_SECONDS:
    python tests/fuzz/fuzz_python.py -max_total_time=600 build/fuzz/corpus-python
"""
import os
import sys
import tempfile

import atheris

with atheris.instrument_imports():
    import numpy as np

    import aicraft as ac
    from aicraft import nn
    import aicraft.nn.functional as F

DOCUMENTED = (ValueError, TypeError, IndexError, MemoryError, RuntimeError)
DTYPES = [ac.float32, ac.int64, ac.bool, ac.float64]
LOAD_PATH = os.path.join(tempfile.gettempdir(), "aicraft-fuzz-python-%d" % os.getpid())


def size(fdp):
    """A size: mostly small, sometimes negative or huge."""
    kind = fdp.ConsumeIntInRange(0, 9)
    if kind == 0:
        return fdp.ConsumeIntInRange(-3, -1)
    if kind == 1:
        return fdp.ConsumeIntInRange(2 ** 31 - 2, 2 ** 63 + 1)
    return fdp.ConsumeIntInRange(0, 4)


def number(fdp):
    kind = fdp.ConsumeIntInRange(0, 5)
    if kind == 0:
        return fdp.PickValueInList([float("nan"), float("inf"), -float("inf"), 1e999, -0.0, 1e38])
    if kind == 1:
        return fdp.ConsumeIntInRange(-2 ** 40, 2 ** 40)
    return fdp.ConsumeFloatInRange(-4.0, 4.0)


def tensor(fdp):
    shape = [fdp.ConsumeIntInRange(0, 3) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    values = np.array([number(fdp) for _ in range(int(np.prod(shape)))], dtype=np.float64)
    dtype = fdp.PickValueInList(DTYPES[:3])
    with np.errstate(all="ignore"):
        # Integer tensors stay within +-2^16: a one-element one has __index__, so
        # Python's own `t * "x"` or `[1] * t` repeats the sequence t times (as with
        # torch), and 2^40 repetitions are a harness OOM, not a finding.
        data = values.reshape(shape) if dtype is ac.float32 else \
            np.clip(np.nan_to_num(values), -(2 ** 16), 2 ** 16).reshape(shape)
        t = ac.tensor(data.astype(dtype.numpy))
    if dtype is ac.float32 and fdp.ConsumeBool():
        t.requires_grad_()
    return t


def argument(fdp, t):
    """Something to pass where a tensor, dim or number is expected."""
    return fdp.PickValueInList([
        lambda: tensor(fdp), lambda: t, lambda: size(fdp), lambda: number(fdp), lambda: None,
        lambda: "x", lambda: [size(fdp), size(fdp)], lambda: (size(fdp),), lambda: t.numpy(),
        lambda: ended_scope_tensor(fdp),
    ])()


def ended_scope_tensor(fdp):
    with ac.checkpoint():
        return tensor(fdp) * 1


def load_bytes(fdp):
    with open(LOAD_PATH, "wb") as f:
        f.write(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 256)))
    return ac.load(LOAD_PATH)


def layer_call(fdp, t):
    make = fdp.PickValueInList([
        lambda: nn.Linear(size(fdp), size(fdp)),
        lambda: nn.Conv2d(size(fdp), size(fdp), size(fdp), stride=size(fdp), padding=size(fdp)),
        # num_layers is a Python loop count: a huge one only runs until the memory limit
        lambda: nn.LSTM(size(fdp), size(fdp), num_layers=fdp.ConsumeIntInRange(-1, 3)),
        lambda: nn.GRU(size(fdp), size(fdp)),
        lambda: nn.Embedding(size(fdp), size(fdp)),
        lambda: nn.BatchNorm1d(size(fdp)),
        lambda: nn.LayerNorm(size(fdp)),
        lambda: nn.MaxPool2d(size(fdp), stride=size(fdp), padding=size(fdp)),
        lambda: nn.Dropout(number(fdp)),
    ])
    layer = make()
    out = layer(argument(fdp, t))
    if fdp.ConsumeBool():
        layer.load_state_dict({k: argument(fdp, t) for k in layer.state_dict()},
                              strict=fdp.ConsumeBool())
    return out


def optimizer_step(fdp, t):
    w = ac.randn(max(0, min(size(fdp), 4)), requires_grad=True)
    opt = fdp.PickValueInList([ac.optim.SGD, ac.optim.Adam, ac.optim.AdamW, ac.optim.RMSprop,
                               ac.optim.Adagrad, ac.optim.Adadelta])
    kwargs = {"lr": number(fdp)}
    if fdp.ConsumeBool():
        kwargs["weight_decay"] = number(fdp)
    optimizer = opt([w], **kwargs)
    (w * argument(fdp, t)).sum().backward()
    optimizer.step()
    if fdp.ConsumeBool():
        optimizer.load_state_dict(optimizer.state_dict())


def calls(fdp, t):
    """The entry points, one lambda each, over t and arguments drawn from fdp."""
    a = lambda: argument(fdp, t)
    return [
        lambda: ac.zeros(*[size(fdp) for _ in range(fdp.ConsumeIntInRange(0, 9))]),
        lambda: ac.full((size(fdp), size(fdp)), number(fdp), dtype=fdp.PickValueInList(DTYPES)),
        lambda: ac.arange(number(fdp), number(fdp), number(fdp)),
        lambda: ac.eye(size(fdp), size(fdp)),
        lambda: ac.randn(size(fdp), size(fdp)),
        lambda: ac.tensor(a()),
        lambda: t + a(), lambda: t - a(), lambda: t * a(), lambda: t / a(), lambda: t ** a(),
        lambda: a() ** t, lambda: t @ a(), lambda: t < a(), lambda: t == a(),
        lambda: t.logical_and(a()), lambda: ac.where(t > 0, t, a()),
        lambda: ac.cat([t, a()], size(fdp)), lambda: ac.stack([t, a()], size(fdp)),
        lambda: getattr(t, fdp.PickValueInList(["exp", "log", "sqrt", "abs", "sin", "relu",
                                                "sigmoid", "tanh", "neg", "log1p"]))(),
        lambda: t.clamp(number(fdp), number(fdp)), lambda: t.softmax(size(fdp)),
        lambda: getattr(t, fdp.PickValueInList(["sum", "mean", "amax", "amin", "var", "std",
                                                "argmax", "cumsum"]))(a()),
        lambda: t.max(size(fdp), keepdim=fdp.ConsumeBool()), lambda: t.sum(a(), a()),
        lambda: t.reshape(*[size(fdp) for _ in range(fdp.ConsumeIntInRange(0, 4))]),
        lambda: t.permute(*[size(fdp) for _ in range(fdp.ConsumeIntInRange(0, 4))]),
        lambda: t.transpose(size(fdp), size(fdp)), lambda: t.squeeze(a()),
        lambda: t.unsqueeze(a()), lambda: t.flatten(size(fdp), size(fdp)),
        lambda: t.expand(*[size(fdp) for _ in range(fdp.ConsumeIntInRange(0, 4))]),
        lambda: t[a()], lambda: t[slice(number(fdp), number(fdp), number(fdp))],
        lambda: t.__setitem__(a(), a()), lambda: t.index_select(size(fdp), a()),
        lambda: t.gather(size(fdp), a()), lambda: t.topk(size(fdp)), lambda: t.sort(a()),
        lambda: t.to(fdp.PickValueInList(DTYPES)), lambda: t.item(), lambda: t.tolist(),
        lambda: F.cross_entropy(t, a()), lambda: F.mse_loss(t, a()),
        lambda: F.binary_cross_entropy(t, a()), lambda: F.conv2d(t, a()),
        lambda: F.max_pool2d(t, size(fdp)), lambda: F.embedding(a(), t),
        lambda: layer_call(fdp, t), lambda: optimizer_step(fdp, t), lambda: load_bytes(fdp),
        lambda: t.sum().backward(), lambda: ac.mul(t, a()).backward(a()),
        lambda: ended_scope_tensor(fdp) + t, lambda: ac.set_num_threads(size(fdp)),
    ]


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    t = tensor(fdp)
    entry_points = calls(fdp, t)
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        call = fdp.PickValueInList(entry_points)
        try:
            call()
        except DOCUMENTED:
            pass
    ac.set_num_threads(2)


def main():
    ac.set_memory_limit(1 << 28)   # huge sizes fail as MemoryError, not by swapping
    atheris.Setup(sys.argv, TestOneInput)
    try:
        atheris.Fuzz()
    finally:
        if os.path.exists(LOAD_PATH):
            os.remove(LOAD_PATH)


if __name__ == "__main__":
    main()
