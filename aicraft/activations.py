"""activations.py - torch.nn.functional's activations over libac's ac_pointwise
(ops/pointwise.c): silu, leaky_relu, softplus, elu, celu, selu, gelu(approximate=),
hardtanh, relu6, mish, hardswish, hardsigmoid, hardshrink, softshrink, tanhshrink, softsign,
logsigmoid, threshold, rrelu (eval), glu, prelu, softmin, softmax/log_softmax(dtype=), and
the in-place forms torch has (leaky_relu_, elu_, ...). Re-exported by aicraft.functional
and aicraft.nn.functional; the modules are nn/activation.py's.

Activations take float32 (torch refuses integers for most of them); hardtanh, relu6 and
threshold keep int64/uint8 exactly, softsign and tanhshrink promote them, as torch does.
`inplace=True` writes into the input where no graph needs it (else the result is new).
"""
from aicraft._args import _as_dim
from aicraft._ffi import lib
from aicraft._wrapping import _live
from aicraft.errors import ShapeError
from aicraft.pointwise import _BOOL, _F32, _U8, _number, _pw, _tensor_arg, _write_into

def _act(x, code, name, p0=0.0, p1=0.0, p2=0.0):
    _tensor_arg(x, name)
    if _live(x).dtype != _F32:
        raise TypeError("%s(): expected a float32 tensor, not %s (torch refuses integer inputs "
                        "too)" % (name, x.dtype))
    return _pw(x, code, name, p0, p1, p2)


def _maybe_inplace(x, out, inplace, name):
    """inplace=True: written into x (where no graph needs x), as torch; else out."""
    if inplace and not (lib.ac_is_grad_enabled() and x.requires_grad):
        return _write_into(x, out, name)
    return out


def silu(input, inplace=False):
    """x * sigmoid(x) (swish)."""
    return _maybe_inplace(input, _act(input, lib.AC_PW_SILU, "silu"), inplace, "silu")


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x."""
    s = _number(negative_slope, "leaky_relu", "negative_slope")
    return _maybe_inplace(input, _act(input, lib.AC_PW_LEAKY_RELU, "leaky_relu", s), inplace,
                          "leaky_relu")


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold."""
    b = _number(beta, "softplus", "beta")
    if b == 0:
        raise ValueError("softplus(): beta must not be 0")
    return _act(input, lib.AC_PW_SOFTPLUS, "softplus", b, _number(threshold, "softplus", "threshold"))


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    a = _number(alpha, "elu", "alpha")
    return _maybe_inplace(input, _act(input, lib.AC_PW_ELU, "elu", a, 1.0, 1.0), inplace, "elu")


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    a = _number(alpha, "celu", "alpha")
    if a == 0:
        raise ValueError("celu(): alpha must not be 0 (ZeroDivisionError in torch)")
    return _maybe_inplace(input, _act(input, lib.AC_PW_ELU, "celu", a, 1.0, 1.0 / a), inplace, "celu")


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """scale * elu(x, alpha) with SELU's constants."""
    return _maybe_inplace(input, _act(input, lib.AC_PW_ELU, "selu", _SELU_ALPHA, _SELU_SCALE, 1.0),
                          inplace, "selu")


def gelu(input, approximate="none"):
    """GELU: x Phi(x) (approximate='none', the erf form) or its tanh approximation."""
    _tensor_arg(input, "gelu")
    if approximate == "none":
        if _live(input).dtype != _F32:
            raise TypeError("gelu(): expected a float32 tensor, not %s" % input.dtype)
        return input.gelu()
    if approximate == "tanh":
        return _act(input, lib.AC_PW_GELU_TANH, "gelu")
    raise ValueError("gelu(): approximate must be 'none' or 'tanh', not %r" % (approximate,))


def _integer_clamp_ok(input, name, lo):
    """hardtanh and relu6 keep int64 and uint8 (torch's rule: no negative bound on uint8)."""
    d = _live(input).dtype
    if d == _BOOL:
        raise TypeError("%s(): bool inputs are not supported" % name)
    if d == _U8 and lo < 0:
        raise ValueError("%s(): cannot do hardtanh on an unsigned type with negative limits" % name)
    return d != _F32


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]; the gradient passes strictly inside. Integer
    tensors stay integers (the bounds truncated), as torch."""
    _tensor_arg(input, "hardtanh")
    lo = _number(min_val, "hardtanh", "min_val")
    hi = _number(max_val, "hardtanh", "max_val")
    if lo > hi:
        raise ValueError("hardtanh(): min_val cannot be greater than max_val")
    if _integer_clamp_ok(input, "hardtanh", lo):
        return _maybe_inplace(input, _pw(input, lib.AC_PW_HARDTANH, "hardtanh", lo, hi, keep_int=True),
                              inplace, "hardtanh")
    return _maybe_inplace(input, _act(input, lib.AC_PW_HARDTANH, "hardtanh", lo, hi), inplace,
                          "hardtanh")


def relu6(input, inplace=False):
    """min(max(x, 0), 6); integer tensors stay integers."""
    _tensor_arg(input, "relu6")
    if _integer_clamp_ok(input, "relu6", 0.0):
        return _maybe_inplace(input, _pw(input, lib.AC_PW_HARDTANH, "relu6", 0.0, 6.0, keep_int=True),
                              inplace, "relu6")
    return _maybe_inplace(input, _act(input, lib.AC_PW_HARDTANH, "relu6", 0.0, 6.0), inplace, "relu6")


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return _maybe_inplace(input, _act(input, lib.AC_PW_MISH, "mish"), inplace, "mish")


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6."""
    return _maybe_inplace(input, _act(input, lib.AC_PW_HARDSWISH, "hardswish"), inplace, "hardswish")


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6."""
    return _maybe_inplace(input, _act(input, lib.AC_PW_HARDSIGMOID, "hardsigmoid"), inplace,
                          "hardsigmoid")


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0."""
    return _act(input, lib.AC_PW_HARDSHRINK, "hardshrink", _number(lambd, "hardshrink", "lambd"))


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""
    lam = _number(lambd, "softshrink", "lambd")
    if lam < 0:
        raise ValueError("softshrink(): lambda must be greater or equal to 0, but found to be %g" % lam)
    return _act(input, lib.AC_PW_SOFTSHRINK, "softshrink", lam)


def _promoted_act(x, code, name):
    """tanhshrink and softsign: int64 and uint8 promote to float32, bool is refused (torch)."""
    _tensor_arg(x, name)
    if _live(x).dtype == _BOOL:
        raise TypeError("%s(): bool inputs are not supported" % name)
    return _pw(x, code, name)


def tanhshrink(input):
    """x - tanh(x); integers promote to float32."""
    return _promoted_act(input, lib.AC_PW_TANHSHRINK, "tanhshrink")


def softsign(input):
    """x / (1 + |x|); integers promote to float32."""
    return _promoted_act(input, lib.AC_PW_SOFTSIGN, "softsign")


def logsigmoid(input):
    """log(sigmoid(x)), stable."""
    return _act(input, lib.AC_PW_LOGSIGMOID, "logsigmoid")


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value; integer tensors stay integers (value truncated)."""
    _tensor_arg(input, "threshold")
    th = _number(threshold, "threshold", "threshold")
    v = _number(value, "threshold", "value")
    if _live(input).dtype == _BOOL:
        raise TypeError("threshold(): bool inputs are not supported")
    if _live(input).dtype == _U8 and not (-1 < th < 256 and -1 < v < 256):
        raise ValueError("threshold(): threshold %g or value %g cannot be converted to uint8 without "
                         "overflow" % (th, v))
    out = _pw(input, lib.AC_PW_THRESHOLD, "threshold", th, v, keep_int=True)
    return _maybe_inplace(input, out, inplace, "threshold")


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU; in eval (training=False) the slope is (lower + upper) / 2.
    training=True (random slopes) is not built."""
    if training:
        raise NotImplementedError("rrelu(): training=True (random slopes) is not supported by "
                                  "aicraft; use training=False")
    slope = (_number(lower, "rrelu", "lower") + _number(upper, "rrelu", "upper")) / 2.0
    return leaky_relu(input, slope, inplace)


def glu(input, dim=-1):
    """a * sigmoid(b), a and b the two halves of input along dim."""
    _tensor_arg(input, "glu")
    d = _as_dim(dim)
    shape = input.shape
    if not shape:
        raise ShapeError("glu: zero-dimensional tensor is not supported")
    if not -len(shape) <= d < len(shape):
        raise IndexError("glu: dim %d is out of range for a tensor of %d dims" % (d, len(shape)))
    if shape[d] % 2:
        raise ShapeError("glu: halving dimension must be even, but dimension %d is size %d"
                         % (d % len(shape), shape[d]))
    a, b = input.chunk(2, d)
    return a * b.sigmoid()


def prelu(input, weight):
    """x where x > 0, else weight * x; weight has 1 element or one per channel (dim 1)."""
    _tensor_arg(input, "prelu")
    _tensor_arg(weight, "prelu", "weight")
    n = weight.numel()
    shape = input.shape
    channels = shape[1] if len(shape) >= 2 else 1
    if n != 1 and (weight.dim() != 1 or n != channels):
        raise ShapeError("prelu: weight of %d elements does not fit input %s (expected 1 or %d)"
                         % (n, tuple(shape), channels))
    if n != 1 and len(shape) > 2:
        weight = weight.reshape(*([n] + [1] * (len(shape) - 2)))
    if n == 1 and weight.dim() > len(shape):
        weight = weight.reshape(*([1] * len(shape)))
    pos = input.relu()
    return pos + weight * (input - pos)


def _softmax_dtype(dtype, name):
    if dtype is None:
        return
    from aicraft import dtypes
    if dtype is not dtypes.float32 and dtype != dtypes.float32:
        raise TypeError("%s(): dtype=%s is not supported: aicraft computes softmax in float32 only"
                        % (name, dtype))


def _legacy_dim(ndim):
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim; dtype may be float32 (the only one computed)."""
    _tensor_arg(input, "softmax")
    _softmax_dtype(dtype, "softmax")
    if _live(input).dtype != _F32:
        input = input.float()
    return input.softmax(_legacy_dim(input.dim()) if dim is None else dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(x)) along dim, stable; dtype may be float32."""
    _tensor_arg(input, "log_softmax")
    _softmax_dtype(dtype, "log_softmax")
    if _live(input).dtype != _F32:
        input = input.float()
    return input.log_softmax(_legacy_dim(input.dim()) if dim is None else dim)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x) along dim."""
    _tensor_arg(input, "softmin")
    _softmax_dtype(dtype, "softmin")
    if _live(input).dtype != _F32:
        input = input.float()
    return (-input).softmax(_legacy_dim(input.dim()) if dim is None else dim)


def _softmax_method(original, name):
    def method(self, dim=None, dtype=None):
        _softmax_dtype(dtype, name)
        if dim is None:
            raise TypeError("%s(): missing the argument 'dim'" % name)
        x = self if _live(self).dtype == _F32 else self.float()
        return original(x, dim)
    method.__name__ = name
    method.__doc__ = original.__doc__
    return method


FUNCTIONAL = ["silu", "leaky_relu", "softplus", "elu", "celu", "selu", "gelu", "hardtanh", "relu6",
              "mish", "hardswish", "hardsigmoid", "hardshrink", "softshrink", "tanhshrink",
              "softsign", "logsigmoid", "threshold", "rrelu", "glu", "prelu", "softmin", "softmax",
              "log_softmax"]


def _functional_inplace(name):
    fn = globals()[name]

    def function(input, *args, **kwargs):
        return _write_into(input, fn(input, *args, **kwargs), name + "_")
    function.__name__ = name + "_"
    function.__doc__ = "In-place form of %s." % name
    return function


for _name in ("leaky_relu", "elu", "celu", "selu", "hardtanh", "rrelu", "threshold"):
    globals()[_name + "_"] = _functional_inplace(_name)
    FUNCTIONAL.append(_name + "_")
del _name


def functional_functions():
    """{name: function} of the activations aicraft.nn.functional re-exports."""
    return {name: globals()[name] for name in FUNCTIONAL}


def bind(cls):
    """The Tensor methods of the activations torch has them for (after pointwise.bind)."""
    cls.hardshrink, cls.prelu = hardshrink, prelu
    cls.softmax = _softmax_method(cls.softmax, "softmax")
    cls.log_softmax = _softmax_method(cls.log_softmax, "log_softmax")


# The activations aicraft itself re-exports (functions.py), as torch.celu, torch.prelu, ...
MODULE_FUNCTIONS = ("celu", "selu", "rrelu", "threshold", "celu_", "selu_", "rrelu_", "threshold_",
                    "hardshrink", "prelu")


def module_functions():
    """{name: function} of the activations aicraft re-exports (functions.py)."""
    return {name: globals()[name] for name in MODULE_FUNCTIONS}
