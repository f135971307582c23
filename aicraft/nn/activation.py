"""activation.py - the activation modules of aicraft.nn beyond layers.py's ReLU, Sigmoid,
Tanh, Softmax: SiLU, LeakyReLU, Softplus, ELU, CELU, SELU, GELU(approximate=), Hardtanh,
ReLU6, Mish, Hardswish, Hardsigmoid, Hardshrink, Softshrink, Tanhshrink, Softsign,
LogSigmoid, GLU, PReLU, RReLU (eval), Threshold, Softmin, with torch's constructor
signatures.

The elementwise ones run one C call per forward (ac_pointwise, ops/pointwise.c).
`inplace=True` is accepted, as torch code passes it, and changes nothing: the result
is always a new tensor (as ReLU's), which `x = act(x)` cannot tell apart.
"""
from aicraft import activations as P
from aicraft._ffi import lib
from aicraft._wrapping import _wrap
from aicraft.errors import raise_error
from aicraft.dtypes import float32 as _float32
from aicraft.nn.module import Module, Parameter
from aicraft.tensor import Tensor as ac_Tensor

__all__ = ["SiLU", "LeakyReLU", "Softplus", "ELU", "CELU", "SELU", "GELU", "Hardtanh", "ReLU6",
           "Mish", "Hardswish", "Hardsigmoid", "Hardshrink", "Softshrink", "Tanhshrink",
           "Softsign", "LogSigmoid", "GLU", "PReLU", "RReLU", "Threshold", "Softmin"]

_pointwise = lib.ac_pointwise


def _run(module, input, code, p0=0.0, p1=0.0, p2=0.0):
    try:
        p = _pointwise(input._ptr, code, p0, p1, p2)
    except AttributeError:
        raise TypeError("%s.forward: input must be a Tensor, not %s"
                        % (type(module).__name__, type(input).__name__)) from None
    if p:
        return _wrap(p)
    raise_error(input)


class _Elementwise(Module):
    """An activation of one C op: _code, and the scalars _params() gives."""
    _code = 0

    def _params(self):
        return ()

    def forward(self, input):
        return _run(self, input, self._code, *self._params())


def _inplace_repr(inplace):
    return ", inplace=True" if inplace else ""


class SiLU(_Elementwise):
    """x * sigmoid(x)."""
    _code = lib.AC_PW_SILU

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Mish(SiLU):
    """x * tanh(softplus(x))."""
    _code = lib.AC_PW_MISH


class Hardswish(SiLU):
    """x * relu6(x + 3) / 6."""
    _code = lib.AC_PW_HARDSWISH


class Hardsigmoid(SiLU):
    """relu6(x + 3) / 6."""
    _code = lib.AC_PW_HARDSIGMOID


class LeakyReLU(_Elementwise):
    """x where x > 0, else negative_slope * x."""
    _code = lib.AC_PW_LEAKY_RELU

    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope = P._number(negative_slope, "LeakyReLU", "negative_slope")
        self.inplace = bool(inplace)

    def forward(self, input):
        return _run(self, input, lib.AC_PW_LEAKY_RELU, self.negative_slope)

    def extra_repr(self):
        return "negative_slope=%s%s" % (self.negative_slope, _inplace_repr(self.inplace))


class Softplus(_Elementwise):
    """log(1 + exp(beta x)) / beta; x itself where beta x > threshold."""
    _code = lib.AC_PW_SOFTPLUS

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = P._number(beta, "Softplus", "beta")
        if self.beta == 0:
            raise ValueError("Softplus: beta must not be 0")
        self.threshold = P._number(threshold, "Softplus", "threshold")

    def _params(self):
        return (self.beta, self.threshold)

    def extra_repr(self):
        return "beta=%s, threshold=%s" % (self.beta, self.threshold)


class ELU(_Elementwise):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    _code = lib.AC_PW_ELU

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = P._number(alpha, type(self).__name__, "alpha")
        self.inplace = bool(inplace)

    def _params(self):
        return (self.alpha, 1.0, 1.0)

    def extra_repr(self):
        return "alpha=%s%s" % (self.alpha, _inplace_repr(self.inplace))


class CELU(ELU):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(alpha, inplace)
        if self.alpha == 0:
            raise ValueError("CELU: alpha must not be 0")

    def _params(self):
        return (self.alpha, 1.0, 1.0 / self.alpha)


class SELU(SiLU):
    """scale * elu(x, alpha) with SELU's constants."""
    _code = lib.AC_PW_ELU

    def _params(self):
        return (P._SELU_ALPHA, P._SELU_SCALE, 1.0)


class GELU(Module):
    """GELU: exact (approximate='none', the erf form) or its tanh approximation."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError("GELU: approximate must be 'none' or 'tanh', not %r" % (approximate,))
        self.approximate = approximate

    def forward(self, input):
        if self.approximate == "tanh":
            return _run(self, input, lib.AC_PW_GELU_TANH)
        try:
            p = lib.ac_gelu(input._ptr)
        except AttributeError:
            raise TypeError("GELU.forward: input must be a Tensor, not %s" % type(input).__name__) from None
        if p:
            return _wrap(p)
        raise_error(input)

    def extra_repr(self):
        return "approximate=%r" % (self.approximate,)


class Hardtanh(_Elementwise):
    """x clamped to [min_val, max_val]."""
    _code = lib.AC_PW_HARDTANH

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        if min_value is not None:
            min_val = min_value
        if max_value is not None:
            max_val = max_value
        self.min_val = P._number(min_val, type(self).__name__, "min_val")
        self.max_val = P._number(max_val, type(self).__name__, "max_val")
        if self.min_val > self.max_val:
            raise ValueError("Hardtanh: min_val cannot be greater than max_val")
        self.inplace = bool(inplace)

    def _params(self):
        return (self.min_val, self.max_val)

    def forward(self, input):
        if type(input) is not ac_Tensor or input.dtype is not _float32:
            return P.hardtanh(input, self.min_val, self.max_val)
        return _run(self, input, lib.AC_PW_HARDTANH, self.min_val, self.max_val)

    def extra_repr(self):
        return "min_val=%s, max_val=%s%s" % (self.min_val, self.max_val, _inplace_repr(self.inplace))


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Hardshrink(_Elementwise):
    """x where |x| > lambd, else 0."""
    _code = lib.AC_PW_HARDSHRINK

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = P._number(lambd, type(self).__name__, "lambd")

    def _params(self):
        return (self.lambd,)

    def extra_repr(self):
        return str(self.lambd)


class Softshrink(Hardshrink):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""
    _code = lib.AC_PW_SOFTSHRINK

    def __init__(self, lambd=0.5):
        super().__init__(lambd)
        if self.lambd < 0:
            raise ValueError("Softshrink: lambda must be >= 0, got %g" % self.lambd)


class Tanhshrink(_Elementwise):
    """x - tanh(x); integers promote to float32."""
    _code = lib.AC_PW_TANHSHRINK

    def forward(self, input):
        return P.tanhshrink(input)


class Softsign(_Elementwise):
    """x / (1 + |x|); integers promote to float32."""
    _code = lib.AC_PW_SOFTSIGN

    def forward(self, input):
        return P.softsign(input)


class LogSigmoid(_Elementwise):
    """log(sigmoid(x)), stable."""
    _code = lib.AC_PW_LOGSIGMOID


class Threshold(_Elementwise):
    """x where x > threshold, else value."""
    _code = lib.AC_PW_THRESHOLD

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = P._number(threshold, "Threshold", "threshold")
        self.value = P._number(value, "Threshold", "value")
        self.inplace = bool(inplace)

    def _params(self):
        return (self.threshold, self.value)

    def forward(self, input):
        if type(input) is not ac_Tensor or input.dtype is not _float32:
            return P.threshold(input, self.threshold, self.value)
        return _run(self, input, lib.AC_PW_THRESHOLD, self.threshold, self.value)

    def extra_repr(self):
        return "threshold=%s, value=%s%s" % (self.threshold, self.value, _inplace_repr(self.inplace))


class RReLU(Module):
    """Randomized leaky ReLU. In eval mode the slope is (lower + upper) / 2; training mode
    (random slopes per element) is not built and raises NotImplementedError."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = P._number(lower, "RReLU", "lower")
        self.upper = P._number(upper, "RReLU", "upper")
        self.inplace = bool(inplace)

    def forward(self, input):
        return P.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self):
        return "lower=%s, upper=%s%s" % (self.lower, self.upper, _inplace_repr(self.inplace))


class GLU(Module):
    """a * sigmoid(b), a and b the halves of the input along dim."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return P.glu(input, self.dim)

    def extra_repr(self):
        return "dim=%s" % (self.dim,)


class PReLU(Module):
    """x where x > 0, else a * x, with a learned (num_parameters: 1, or one per channel,
    dim 1 of the input), initialised to init."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        from aicraft.creation import full
        from aicraft import dtypes
        if dtype is not None and dtype is not dtypes.float32 and dtype != dtypes.float32:
            raise TypeError("PReLU: dtype=%s is not supported (float32 only)" % (dtype,))
        n = int(num_parameters)
        if n < 1:
            raise ValueError("PReLU: num_parameters must be >= 1, got %d" % n)
        self.num_parameters = n
        self.init = P._number(init, "PReLU", "init")
        self.weight = Parameter(full((n,), self.init))
        if device is not None:
            self.to(device)

    def forward(self, input):
        return P.prelu(input, self.weight)

    def extra_repr(self):
        return "num_parameters=%d" % self.num_parameters


class Softmin(Module):
    """softmax(-x) along dim."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return P.softmin(input, self.dim)

    def extra_repr(self):
        return "dim=%s" % (self.dim,)
