"""conftest.py - helpers the Python tests share.

Gradient checks compare aicraft's analytic gradients with central differences
of a float64 NumPy implementation of the same function, written in the test.
"""
import os

import numpy as np


def numeric_grad(f64_fn, inputs, eps=1e-6):
    """Central differences of the scalar f64_fn(*inputs) with respect to each input.

    inputs are copied to float64; returns one gradient array per input.
    """
    inputs = [np.array(x, dtype=np.float64) for x in inputs]
    grads = []
    for x in inputs:
        grad = np.zeros_like(x)
        flat, grad_flat = x.reshape(-1), grad.reshape(-1)   # views: x is a fresh contiguous copy
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            up = f64_fn(*inputs)
            flat[i] = old - eps
            down = f64_fn(*inputs)
            flat[i] = old
            grad_flat[i] = (up - down) / (2 * eps)
        grads.append(grad)
    return grads


def check_gradients(ac_fn, f64_fn, arrays, rtol=1e-4, atol=1e-5, seed=0):
    """Check aicraft's gradients of ac_fn against central differences of f64_fn.

    Both run at the same float32-representable points; the output is weighted
    by a fixed random upstream gradient w, so the checked function is
    sum(fn(inputs) * w). Returns aicraft's output for further checks.
    """
    import aicraft as ac

    x32 = [np.asarray(a, dtype=np.float32) for a in arrays]
    x64 = [a.astype(np.float64) for a in x32]
    tensors = [ac.tensor(a, requires_grad=True) for a in x32]
    out = ac_fn(*tensors)
    w = np.random.default_rng(seed).standard_normal(np.shape(f64_fn(*x64))).astype(np.float32)
    out.backward(ac.tensor(w))
    numeric = numeric_grad(lambda *xs: float(np.sum(f64_fn(*xs) * w)), x64)
    for i, (t, expected) in enumerate(zip(tensors, numeric)):
        assert t.grad is not None, "input %d got no gradient" % i
        got = t.grad.numpy()
        assert got.shape == expected.shape, "input %d: grad shape %s, expected %s" % (i, got.shape, expected.shape)
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg="gradient of input %d" % i)
    return out


def c_link_libs():
    """What a C program linking libac.a statically adds after it: libm and pthreads, and
    nothing more, CUDA build or not (libac.a carries CUDA's static runtime)."""
    return ["-lm", "-lpthread"]
