"""A property over the Python API's bad inputs: whatever hypothesis passes (ints
past int64, negative and huge sizes, NaN and inf, None, strings, nested lists,
tensors of other dtypes, tensors whose scope has ended, deep nesting), a call
returns or raises one of the exceptions the README's Errors section documents
(ValueError and its ShapeError/FormatError, TypeError, IndexError, ScopeError,
MemoryError, DeviceError, RuntimeError as torch raises it), never OverflowError,
RecursionError, KeyError or AttributeError from inside aicraft."""
import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn, optim

BANNED = (OverflowError, RecursionError, KeyError, AttributeError)
DOCUMENTED = (ValueError, TypeError, IndexError, MemoryError, RuntimeError)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def ended():
    with ac.checkpoint():
        return ac.ones(2) * 1


def deep(n):
    value = 1
    for _ in range(n):
        value = [value]
    return value


ints = st.one_of(st.integers(-4, 4), st.integers(2 ** 31 - 2, 2 ** 31 + 2), st.integers(2 ** 62, 2 ** 64 + 1),
                 st.integers(-(2 ** 64) - 1, -(2 ** 62)), st.integers(-(10 ** 30), 10 ** 30))
numbers = st.one_of(ints, st.floats(allow_nan=True, allow_infinity=True), st.just(10 ** 400))
shapes = st.lists(ints, min_size=0, max_size=4)
tensors = st.sampled_from([
    lambda: ac.ones(2, 3), lambda: ac.arange(6), lambda: ac.tensor([True, False]), lambda: ac.zeros(0, 3),
    lambda: ac.tensor(2.5), lambda: ac.tensor(np.array([0, 5, 200], dtype=np.uint8)), ended,
]).map(lambda make: make())
anything = st.one_of(ints, numbers, shapes, tensors, st.none(), st.text(max_size=4), st.booleans(),
                     st.tuples(ints, ints), st.builds(deep, st.sampled_from([3, 400])),
                     st.builds(lambda: {"a": 1}), st.builds(lambda: slice(2 ** 63, None, 2 ** 70)))

CALLS = {
    "zeros": lambda a, b: ac.zeros(a) if not isinstance(a, list) else ac.zeros(*a),
    "full": lambda a, b: ac.full(a, b),
    "arange": lambda a, b: ac.arange(a, b),
    "tensor": lambda a, b: ac.tensor(a),
    "reshape": lambda a, b: ac.ones(2, 3).reshape(a),
    "view": lambda a, b: ac.zeros(0, 2).view(a),
    "expand": lambda a, b: ac.ones(1, 3).expand(a, b),
    "flatten": lambda a, b: ac.ones(2, 3).flatten(a, b),
    "getitem": lambda a, b: ac.arange(6)[a],
    "getitem2": lambda a, b: ac.ones(2, 3)[a, b],
    "setitem": lambda a, b: ac.ones(2, 3).__setitem__(a, b),
    "sum": lambda a, b: ac.ones(2, 3).sum(a),
    "topk": lambda a, b: ac.arange(6.0).topk(a),
    "narrow": lambda a, b: ac.arange(6).narrow(0, a, b),
    "unsqueeze": lambda a, b: ac.ones(2).unsqueeze(a),
    "transpose": lambda a, b: ac.ones(2, 3).transpose(a, b),
    "permute": lambda a, b: ac.ones(2, 3).permute(a, b),
    "add": lambda a, b: ac.ones(2, 3) + a,
    "mul": lambda a, b: a * ac.ones(3),
    "matmul": lambda a, b: ac.ones(2, 3) @ a,
    "cat": lambda a, b: ac.cat([ac.ones(2), a], b),
    "clamp": lambda a, b: ac.ones(3).clamp(a, b),
    "pow": lambda a, b: ac.ones(3) ** a,
    "to": lambda a, b: ac.ones(3).to(a),
    "linear": lambda a, b: nn.Linear(a, b),
    "conv": lambda a, b: F.conv2d(ac.ones(1, 1, 4, 4), ac.ones(1, 1, 2, 2), stride=a, padding=b),
    "max_pool": lambda a, b: F.max_pool2d(ac.ones(1, 1, 4, 4), a, b),
    "cross_entropy": lambda a, b: F.cross_entropy(ac.ones(2, 3), a),
    "sgd": lambda a, b: optim.SGD([nn.Parameter(ac.ones(2))], lr=a, momentum=b),
    "adam": lambda a, b: optim.Adam([nn.Parameter(ac.ones(2))], lr=a, betas=b),
    "set_lr": lambda a, b: optim.SGD([nn.Parameter(ac.ones(2))], lr=0.1).param_groups[0].__setitem__("lr", a),
    "memory_limit": lambda a, b: ac.set_memory_limit(a),
    "threads": lambda a, b: ac.set_num_threads(a),
    "save": lambda a, b: ac.save({"x": a, "y": b}, io.BytesIO()),
    "manual_seed": lambda a, b: ac.manual_seed(a),
    "randn": lambda a, b: ac.randn(a, b),
}


def call_and_check(fn, a, b):
    ac.set_memory_limit(1 << 28)   # huge sizes fail as MemoryError, not by taking the machine
    try:
        with ac.checkpoint():
            fn(a, b)
    except BANNED as exc:
        pytest.fail("%s: %r" % (type(exc).__name__, exc))
    except DOCUMENTED:
        pass
    finally:
        ac.set_memory_limit(None)
        ac.set_num_threads(2)


@pytest.mark.parametrize("name", sorted(CALLS))
@SETTINGS
@given(a=anything, b=anything)
def test_bad_arguments_raise_documented_exceptions(name, a, b):
    call_and_check(CALLS[name], a, b)


@SETTINGS
@given(lr=numbers, step=ints)
def test_optimizer_state_dicts_with_values_out_of_range(lr, step):
    p = nn.Parameter(ac.ones(2))
    opt = optim.Adam([p], lr=0.01)
    (p * 2).sum().backward()
    opt.step()
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = lr
    sd["state"][0]["step"] = step
    try:
        opt.load_state_dict(sd)
        opt.step()
    except BANNED as exc:
        pytest.fail("%s: %r" % (type(exc).__name__, exc))
    except DOCUMENTED:
        pass
