"""pointwise.py - PyTorch's pointwise math: the Tensor methods (bound into Tensor by
bind(), with their in-place x_ forms) and the module functions (aicraft.erf,
aicraft.maximum, ...), over libac's ac_pointwise and ac_pointwise2 (ops/pointwise.c).
The activations (F.silu, ...) are activations.py's, over the helpers here.

dtypes follow torch: float math promotes int64, uint8 and bool inputs to float32;
the ops that keep integers in torch (sign, square, floor, ceil, round, trunc,
maximum, minimum, fmax, fmin, clamp, fmod, heaviside) compute them exactly in
int64 in C; where torch refuses a dtype, so does aicraft (TypeError).

lerp, addcmul, addcdiv and isclose compose aicraft's own
ops (their autograd comes with them); none loops over elements in Python.
"""
import builtins
import math

from aicraft._args import _as_dim, _scalar
from aicraft._ffi import lib
from aicraft._wrapping import _live, _shape_of, _wrap
from aicraft.errors import ShapeError, raise_error
from aicraft.tensor import Tensor

_F32, _I64, _BOOL, _U8 = 0, 1, 2, 3
_INF = float("inf")
_METHODS = {}


def _method(fn, *names):
    for name in names or (fn.__name__,):
        _METHODS[name] = fn
    return fn


def _tensor_arg(x, fn, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError("%s(): argument '%s' must be a Tensor, not %s" % (fn, what, type(x).__name__))
    return x


def _number(value, fn, what):
    s = _scalar(value)
    if s is None or type(value) is bool:
        raise TypeError("%s(): %s must be a number, not %s" % (fn, what, type(value).__name__))
    return s


def _refuse_integers(name, *tensors):
    """torch implements some float math for floating dtypes only: TypeError, as it refuses."""
    for t in tensors:
        if isinstance(t, Tensor) and _live(t).dtype != _F32:
            raise TypeError("%s(): not implemented for %s tensors (float32 only, as torch)" % (name, t.dtype))


def _pw(x, code, name, p0=0.0, p1=0.0, p2=0.0, keep_int=False):
    """ac_pointwise(x, code): float math promotes integer inputs to float32."""
    _tensor_arg(x, name)
    if _live(x).dtype != _F32 and not keep_int:
        x = x.float()
    p = lib.ac_pointwise(x._ptr, code, p0, p1, p2)
    if p:
        return _wrap(p)
    raise_error(x)


def _scalar_tensor(value, like):
    """A 0-d tensor for a number operand, of the dtype torch would give it next to like."""
    from aicraft.creation import tensor
    from aicraft import dtypes
    if isinstance(value, builtins.bool):
        return tensor(value, dtype=dtypes.bool)
    if isinstance(value, int) and _live(like).dtype != _F32:
        if _live(like).dtype == _U8:
            if not 0 <= value < 256:
                raise ValueError("value %d cannot be converted to uint8 without overflow" % value)
            return tensor(value, dtype=dtypes.uint8)
        return tensor(value, dtype=dtypes.int64)
    s = _scalar(value)
    if s is None:
        return None
    return tensor(s, dtype=dtypes.float32)


def _pw2(a, b, code, name, keep_int=False, scalar_ok=True):
    """ac_pointwise2(a, b, code), broadcast: integers stay integers where keep_int and
    both are integral, else both compute in float32."""
    if not isinstance(a, Tensor):
        if not isinstance(b, Tensor) or not scalar_ok:
            _tensor_arg(a, name)
        a = _scalar_tensor(a, b)
    if not isinstance(b, Tensor):
        t = _scalar_tensor(b, a) if scalar_ok else None
        if t is None:
            raise TypeError("%s(): argument 'other' must be a Tensor, not %s" % (name, type(b).__name__))
        b = t
    da, db = _live(a).dtype, _live(b).dtype
    if not (keep_int and da != _F32 and db != _F32):
        if da != _F32:
            a = a.float()
        if db != _F32:
            b = b.float()
    p = lib.ac_pointwise2(a._ptr, b._ptr, code)
    if p:
        return _wrap(p)
    if code == lib.AC_PW2_FMOD and lib.ac_last_error_code() == lib.AC_ERR_ARG:
        raise ZeroDivisionError("%s: integer division by zero" % name)
    raise_error(a, b)


def _write_into(self, result, name):
    """self's data replaced by result's (an x_ method): no graph, as the other in-place ops."""
    p = _live(self)
    if lib.ac_is_grad_enabled() and p.requires_grad:
        raise RuntimeError("%s: in-place changes of tensors that require grad are not recorded; "
                           "do them under `with ac.no_grad():`" % name)
    q = _live(result)
    if q.dtype != p.dtype:
        raise TypeError("%s: result type %s can't be cast to the desired output type %s"
                        % (name, result.dtype, self.dtype))
    if _shape_of(q) != _shape_of(p):
        raise ShapeError("%s: result of shape %s cannot be written into a tensor of shape %s"
                         % (name, _shape_of(q), _shape_of(p)))
    if lib.ac_tensor_copy_(p, q) < 0:
        raise_error(self)
    return self


def _inplace_of(fn, name):
    def method(self, *args, **kwargs):
        return _write_into(self, fn(self, *args, **kwargs), name)
    method.__name__ = name
    method.__doc__ = "In-place form of %s." % fn.__name__
    return method


# ---- unary math --------------------------------------------------------------

def _unary(name, code, doc, keep_int=False, aliases=(), float_only=False):
    def fn(input):
        if float_only:
            _refuse_integers(name, input)
        return _pw(input, code, name, keep_int=keep_int)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    _method(fn, name, *aliases)
    for alias in (name,) + tuple(aliases):
        _METHODS[alias + "_"] = _inplace_of(fn, alias + "_")
    return fn


rsqrt = _unary("rsqrt", lib.AC_PW_RSQRT, "1 / sqrt(input), elementwise.")
square = _unary("square", lib.AC_PW_SQUARE, "input * input; integers stay integers (bool gives int64).",
                keep_int=True)
reciprocal = _unary("reciprocal", lib.AC_PW_RECIPROCAL, "1 / input, elementwise.")
erf = _unary("erf", lib.AC_PW_ERF, "The error function, elementwise.")
erfc = _unary("erfc", lib.AC_PW_ERFC, "1 - erf(input), computed without cancellation.")
erfinv = _unary("erfinv", lib.AC_PW_ERFINV, "The inverse error function on (-1, 1).")
expm1 = _unary("expm1", lib.AC_PW_EXPM1, "exp(input) - 1, exact near 0.")
exp2 = _unary("exp2", lib.AC_PW_EXP2, "2 ** input, elementwise.")
log2 = _unary("log2", lib.AC_PW_LOG2, "Base-2 logarithm, elementwise.")
log10 = _unary("log10", lib.AC_PW_LOG10, "Base-10 logarithm, elementwise.")
sign = _unary("sign", lib.AC_PW_SIGN, "-1, 0 or 1 by the sign of input (0 for NaN); keeps integers.",
              keep_int=True)
sgn = _unary("sgn", lib.AC_PW_SIGN, "sign, for real tensors.", keep_int=True)
floor = _unary("floor", lib.AC_PW_FLOOR, "Round down; integers are returned as they are.",
               keep_int=True)
ceil = _unary("ceil", lib.AC_PW_CEIL, "Round up; integers are returned as they are.", keep_int=True)
trunc = _unary("trunc", lib.AC_PW_TRUNC, "Round toward zero; integers are returned as they are.",
               keep_int=True, aliases=("fix",))
fix = trunc
frac = _unary("frac", lib.AC_PW_FRAC, "input - trunc(input), elementwise.", float_only=True)
tan = _unary("tan", lib.AC_PW_TAN, "Tangent, elementwise.")
asin = _unary("asin", lib.AC_PW_ASIN, "Arcsine, elementwise.", aliases=("arcsin",))
acos = _unary("acos", lib.AC_PW_ACOS, "Arccosine, elementwise.", aliases=("arccos",))
atan = _unary("atan", lib.AC_PW_ATAN, "Arctangent, elementwise.", aliases=("arctan",))
sinh = _unary("sinh", lib.AC_PW_SINH, "Hyperbolic sine, elementwise.")
cosh = _unary("cosh", lib.AC_PW_COSH, "Hyperbolic cosine, elementwise.")
asinh = _unary("asinh", lib.AC_PW_ASINH, "Inverse hyperbolic sine.", aliases=("arcsinh",))
acosh = _unary("acosh", lib.AC_PW_ACOSH, "Inverse hyperbolic cosine.", aliases=("arccosh",))
atanh = _unary("atanh", lib.AC_PW_ATANH, "Inverse hyperbolic tangent.", aliases=("arctanh",))
sinc = _unary("sinc", lib.AC_PW_SINC, "sin(pi x) / (pi x), 1 at 0.")
lgamma = _unary("lgamma", lib.AC_PW_LGAMMA, "log |Gamma(input)|, elementwise.")
digamma = _unary("digamma", lib.AC_PW_DIGAMMA, "The logarithmic derivative of Gamma.")
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


@_method
def round(input, *, decimals=0):
    """Round half to even, to `decimals` decimal places (negative: tens, hundreds, ...)."""
    _tensor_arg(input, "round")
    if isinstance(decimals, builtins.bool) or not isinstance(decimals, int):
        raise TypeError("round(): decimals must be an int, not %s" % type(decimals).__name__)
    if decimals != 0 and _live(input).dtype != _F32:
        raise TypeError("round(): decimals is supported on float32 tensors only, not %s" % input.dtype)
    return _pw(input, lib.AC_PW_ROUND, "round", float(decimals), keep_int=True)


_METHODS["round_"] = _inplace_of(round, "round_")


@_method
def logit(input, eps=None):
    """log(p / (1 - p)); with eps, p is first clamped to [eps, 1 - eps]."""
    e = -1.0 if eps is None else _number(eps, "logit", "eps")
    return _pw(input, lib.AC_PW_LOGIT, "logit", e)


_METHODS["logit_"] = _inplace_of(logit, "logit_")


@_method
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, inf and -inf replaced by nan, posinf and neginf (default: float32's largest
    and lowest finite values); integer tensors are returned as copies."""
    _tensor_arg(input, "nan_to_num")
    if _live(input).dtype != _F32:
        return input.clone()
    big = 3.4028234663852886e38
    return _pw(input, lib.AC_PW_NAN_TO_NUM, "nan_to_num", _number(nan, "nan_to_num", "nan"),
               big if posinf is None else _number(posinf, "nan_to_num", "posinf"),
               -big if neginf is None else _number(neginf, "nan_to_num", "neginf"))


_METHODS["nan_to_num_"] = _inplace_of(nan_to_num, "nan_to_num_")


@_method
def deg2rad(input):
    """Degrees to radians."""
    _tensor_arg(input, "deg2rad")
    return (input if _live(input).dtype == _F32 else input.float()) * (math.pi / 180.0)


@_method
def rad2deg(input):
    """Radians to degrees."""
    _tensor_arg(input, "rad2deg")
    return (input if _live(input).dtype == _F32 else input.float()) * (180.0 / math.pi)


_METHODS["deg2rad_"] = _inplace_of(deg2rad, "deg2rad_")
_METHODS["rad2deg_"] = _inplace_of(rad2deg, "rad2deg_")


@_method
def positive(input):
    """input itself, as torch.positive (bool tensors are refused, as torch does)."""
    _tensor_arg(input, "positive")
    if _live(input).dtype == _BOOL:
        raise TypeError("positive(): the + operator on a bool tensor is not supported")
    return input


def _test(name, code, doc):
    def fn(input):
        _tensor_arg(input, name)
        p = lib.ac_pointwise(input._ptr, code, 0.0, 0.0, 0.0)
        if p:
            return _wrap(p)
        raise_error(input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return _method(fn)


isnan = _test("isnan", lib.AC_PW_ISNAN, "A bool tensor: True where input is NaN.")
isinf = _test("isinf", lib.AC_PW_ISINF, "A bool tensor: True where input is inf or -inf.")
isposinf = _test("isposinf", lib.AC_PW_ISPOSINF, "A bool tensor: True where input is inf.")
isneginf = _test("isneginf", lib.AC_PW_ISNEGINF, "A bool tensor: True where input is -inf.")
isfinite = _test("isfinite", lib.AC_PW_ISFINITE, "A bool tensor: True where input is finite.")
signbit = _test("signbit", lib.AC_PW_SIGNBIT, "A bool tensor: True where the sign bit is set (-0.0 too).")


@_method
def isreal(input):
    """All True: aicraft's tensors are real."""
    _tensor_arg(input, "isreal")
    from aicraft.creation import ones
    from aicraft import dtypes
    return ones(*_shape_of(_live(input)), dtype=dtypes.bool)


angle = _unary("angle", lib.AC_PW_ANGLE, "The angle of a real number: pi where input < 0, else 0.")
i0 = _unary("i0", lib.AC_PW_I0, "The modified Bessel function of the first kind, order 0.")


@_method
def polygamma(n, input):
    """The n-th derivative of digamma (torch.polygamma(n, input); Tensor.polygamma(n))."""
    if isinstance(n, Tensor) and not isinstance(input, Tensor):   # the method form: self first
        n, input = input, n
    if isinstance(n, builtins.bool) or not isinstance(n, int) or n < 0:
        raise ValueError("polygamma(): n must be a non-negative integer, got %r" % (n,))
    return _pw(input, lib.AC_PW_POLYGAMMA, "polygamma", float(n))


def _polygamma_method(self, n):
    return polygamma(n, self)


_METHODS["polygamma"] = _polygamma_method
_METHODS["polygamma_"] = _inplace_of(_polygamma_method, "polygamma_")


@_method
def mvlgamma(input, p):
    """The multivariate log-gamma of dimension p: sum over i < p of lgamma(x - i/2),
    plus p (p - 1) / 4 log(pi)."""
    _tensor_arg(input, "mvlgamma")
    if isinstance(p, builtins.bool) or not isinstance(p, int) or p < 1:
        raise ValueError("mvlgamma(): p has to be a positive integer, got %r" % (p,))
    x = input if _live(input).dtype == _F32 else input.float()
    out = lgamma(x)
    for i in range(1, p):
        out = out + lgamma(x - i / 2.0)
    return out + p * (p - 1) / 4.0 * math.log(math.pi)


_METHODS["mvlgamma_"] = _inplace_of(mvlgamma, "mvlgamma_")


@_method
def real(input):
    """input itself: aicraft's tensors are real."""
    _live(_tensor_arg(input, "real"))
    return input


@_method
def imag(input):
    """Refused, as torch refuses it for real tensors."""
    _live(_tensor_arg(input, "imag"))
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


@_method
def conj(input):
    """input itself: the conjugate of a real tensor."""
    _live(_tensor_arg(input, "conj"))
    return input


_METHODS["conj_physical"] = conj
_METHODS["resolve_conj"] = _METHODS["resolve_neg"] = conj
conj_physical = conj


# ---- binary math ---------------------------------------------------------------

def _binary(name, code, doc, keep_int=False, scalar_ok=True, aliases=(), inplace=True,
            float_only=False):
    def fn(input, other):
        if float_only:
            _refuse_integers(name, input, other)
        return _pw2(input, other, code, name, keep_int, scalar_ok)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    _method(fn, name, *aliases)
    if inplace:
        for alias in (name,) + tuple(aliases):
            _METHODS[alias + "_"] = _inplace_of(fn, alias + "_")
    return fn


atan2 = _binary("atan2", lib.AC_PW2_ATAN2, "atan(input / other) in the right quadrant.",
                scalar_ok=False, aliases=("arctan2",))
arctan2 = atan2
hypot = _binary("hypot", lib.AC_PW2_HYPOT, "sqrt(input^2 + other^2), without overflow.",
                scalar_ok=False, float_only=True)
fmod = _binary("fmod", lib.AC_PW2_FMOD, "C's fmod: the remainder with input's sign; integers stay "
               "integers (a zero divisor raises).", keep_int=True)
copysign = _binary("copysign", lib.AC_PW2_COPYSIGN, "|input| with other's sign.")
logaddexp = _binary("logaddexp", lib.AC_PW2_LOGADDEXP, "log(exp(input) + exp(other)), stable.",
                    scalar_ok=False, inplace=False, float_only=True)
logaddexp2 = _binary("logaddexp2", lib.AC_PW2_LOGADDEXP2, "log2(2^input + 2^other), stable.",
                     scalar_ok=False, inplace=False, float_only=True)
maximum = _binary("maximum", lib.AC_PW2_MAXIMUM, "The larger of input and other, elementwise "
                  "(NaN propagates); integers stay integers.", keep_int=True, scalar_ok=False,
                  inplace=False)
minimum = _binary("minimum", lib.AC_PW2_MINIMUM, "The smaller of input and other, elementwise "
                  "(NaN propagates); integers stay integers.", keep_int=True, scalar_ok=False,
                  inplace=False)
fmax = _binary("fmax", lib.AC_PW2_FMAX, "maximum, ignoring a NaN operand.", keep_int=True,
               scalar_ok=False, inplace=False)
fmin = _binary("fmin", lib.AC_PW2_FMIN, "minimum, ignoring a NaN operand.", keep_int=True,
               scalar_ok=False, inplace=False)


gcd = _binary("gcd", lib.AC_PW2_GCD, "The greatest common divisor (integer tensors only).",
              keep_int=True)
lcm = _binary("lcm", lib.AC_PW2_LCM, "The least common multiple (integer tensors only).",
              keep_int=True)


@_method
def ldexp(input, other):
    """input * 2 ** other, in float32."""
    _tensor_arg(input, "ldexp")
    x = input if _live(input).dtype == _F32 else input.float()
    return x * exp2(other) if isinstance(other, Tensor) else x * (2.0 ** _number(other, "ldexp", "other"))


_METHODS["ldexp_"] = _inplace_of(ldexp, "ldexp_")


@_method
def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN)."""
    return _pw2(input, other, lib.AC_PW2_XLOGY, "xlogy")


_METHODS["xlogy_"] = _inplace_of(xlogy, "xlogy_")


def _no_grad_needed(name, *tensors):
    if lib.ac_is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in tensors):
        raise RuntimeError("%s: the derivative is not implemented (as in torch); call it under "
                           "`with ac.no_grad():` or on detached tensors" % name)


@_method
def heaviside(input, values):
    """0 where input < 0, 1 where input > 0, values where input == 0; integers stay integers."""
    _tensor_arg(input, "heaviside")
    _tensor_arg(values, "heaviside", "values")
    _no_grad_needed("heaviside", input, values)
    if (_live(input).dtype == _F32) != (_live(values).dtype == _F32):
        raise TypeError("heaviside(): input (%s) and values (%s) must have the same dtype"
                        % (input.dtype, values.dtype))
    return _pw2(input, values, lib.AC_PW2_HEAVISIDE, "heaviside", keep_int=True, scalar_ok=False)


@_method
def nextafter(input, other):
    """The next float32 after input toward other."""
    _tensor_arg(input, "nextafter")
    _tensor_arg(other, "nextafter", "other")
    _no_grad_needed("nextafter", input, other)
    if _live(input).dtype != _F32 or _live(other).dtype != _F32:
        raise TypeError("nextafter(): float32 tensors only, not %s and %s" % (input.dtype, other.dtype))
    return _pw2(input, other, lib.AC_PW2_NEXTAFTER, "nextafter", scalar_ok=False)


_METHODS["heaviside_"] = _inplace_of(heaviside, "heaviside_")
_METHODS["nextafter_"] = _inplace_of(nextafter, "nextafter_")


# ---- clamp with tensor bounds, and integer clamps --------------------------------

def _bound(value, input, name, what):
    if value is None or isinstance(value, Tensor):
        return value
    t = _scalar_tensor(value, input)
    if t is None or isinstance(value, builtins.bool):
        raise TypeError("%s(): %s must be a number or a Tensor, not %s" % (name, what, type(value).__name__))
    return t


def _clamp_general(input, min, max, name):
    lo = _bound(min, input, name, "min")
    hi = _bound(max, input, name, "max")
    out = input
    if lo is not None:
        out = _pw2(out, lo, lib.AC_PW2_CLAMP_MIN, name, keep_int=True, scalar_ok=False)
    if hi is not None:
        out = _pw2(out, hi, lib.AC_PW2_CLAMP_MAX, name, keep_int=True, scalar_ok=False)
    return out


def _clamp_wrapper(original, name):
    """Tensor.clamp taking tensor bounds and integer tensors (exact), as torch; plain
    float32 clamps with number bounds stay the one-pass ac_clamp."""
    def clamp(self, min=None, max=None):
        if min is None and max is None:
            raise ValueError("%s: at least one of min and max must be given" % name)
        numbers = not isinstance(min, Tensor) and not isinstance(max, Tensor)
        if numbers and _live(self).dtype == _F32:
            return original(self, min, max)
        return _clamp_general(self, min, max, name)
    clamp.__name__ = name
    clamp.__doc__ = ("input limited to [min, max]; a bound may be a number, a Tensor (broadcast) or "
                     "None; integer tensors with integer bounds stay integers.")
    return clamp


@_method
def clamp_min(input, min):
    """input limited below by min (a number or a Tensor)."""
    _tensor_arg(input, "clamp_min")
    return input.clamp(min=min)


@_method
def clamp_max(input, max):
    """input limited above by max (a number or a Tensor)."""
    _tensor_arg(input, "clamp_max")
    return input.clamp(max=max)


_METHODS["clamp_min_"] = _inplace_of(clamp_min, "clamp_min_")
_METHODS["clamp_max_"] = _inplace_of(clamp_max, "clamp_max_")


def _clamp_(self, min=None, max=None):
    return _write_into(self, self.clamp(min, max), "clamp_")


_METHODS["clamp_"] = _METHODS["clip_"] = _clamp_


# ---- composed helpers --------------------------------------------------------------

def _float_operand(x, like, name):
    if isinstance(x, Tensor):
        return x
    s = _scalar(x)
    if s is None:
        raise TypeError("%s(): expected a Tensor or a number, not %s" % (name, type(x).__name__))
    return s


@_method
def lerp(input, end, weight):
    """input + weight * (end - input), weight a number or a Tensor (float32 only, as torch)."""
    _tensor_arg(input, "lerp")
    _tensor_arg(end, "lerp", "end")
    if _live(input).dtype != _F32 or _live(end).dtype != _F32:
        raise TypeError("lerp(): expected float32 tensors, got %s and %s" % (input.dtype, end.dtype))
    w = _float_operand(weight, input, "lerp")
    if isinstance(w, Tensor) and _live(w).dtype != _F32:
        raise TypeError("lerp(): weight must be float32, not %s" % w.dtype)
    return input + w * (end - input)


@_method
def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2."""
    _tensor_arg(input, "addcmul")
    v = _number(value, "addcmul", "value")
    prod = tensor1 * tensor2
    return input + (prod if v == 1 else prod * value)


@_method
def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2 (true division; integer tensor1 and tensor2 are
    refused, as torch does)."""
    _tensor_arg(input, "addcdiv")
    for t in (tensor1, tensor2):
        if isinstance(t, Tensor) and _live(t).dtype != _F32:
            raise TypeError("addcdiv(): integer division with addcdiv is no longer supported; "
                            "use float32 tensors")
    v = _number(value, "addcdiv", "value")
    q = tensor1 / tensor2
    return input + (q if v == 1 else q * value)


_METHODS["lerp_"] = _inplace_of(lerp, "lerp_")
_METHODS["addcmul_"] = _inplace_of(addcmul, "addcmul_")
_METHODS["addcdiv_"] = _inplace_of(addcdiv, "addcdiv_")


@_method
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, elementwise, as a bool tensor; equal values
    (infinities included) are close; NaN is close to NaN only with equal_nan."""
    _tensor_arg(input, "isclose")
    _tensor_arg(other, "isclose", "other")
    if rtol < 0 or atol < 0:
        raise ValueError("isclose(): rtol and atol must be >= 0, got %g and %g" % (rtol, atol))
    equal = input == other
    if _live(input).dtype != _F32 and _live(other).dtype != _F32 and rtol == 0 and atol == 0:
        return equal
    a = input if _live(input).dtype == _F32 else input.float()
    b = other if _live(other).dtype == _F32 else other.float()
    from aicraft.autograd import no_grad
    with no_grad():
        diff = (a - b).abs()
        close = (diff <= b.abs() * rtol + atol).logical_and(isfinite(diff))
        out = equal.logical_or(close)
        if equal_nan:
            out = out.logical_or(isnan(a).logical_and(isnan(b)))
    return out


@_method
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element of input is close to other's (isclose)."""
    far = isclose(input, other, rtol, atol, equal_nan).logical_not()
    return builtins.bool(far.sum().item() == 0)


@_method
def equal(input, other):
    """True when input and other have the same shape and elements."""
    _tensor_arg(input, "equal")
    _tensor_arg(other, "equal", "other")
    if input.shape != other.shape:
        return False
    return builtins.bool((input != other).sum().item() == 0)


_METHODS["sigmoid_"] = _inplace_of(lambda x: x.sigmoid(), "sigmoid_")


# ---- torch.max(a, b), torch.min(a, b) -------------------------------------------------

def _with_other(extreme, pair, name):
    """Tensor.max / min that also take a Tensor as the second argument: the elementwise
    maximum / minimum, as torch.max(a, b)."""
    def method(self, *args, **kwargs):
        other = args[0] if args else kwargs.get("other")
        if isinstance(other, Tensor) and len(args) + len(kwargs) == 1:
            return pair(self, other)
        return extreme(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = (extreme.__doc__ or "") + " With a Tensor as the argument: the elementwise %s." \
        % pair.__name__
    return method


def bind(cls):
    for name, fn in _METHODS.items():
        setattr(cls, name, fn)
    cls.clamp = _clamp_wrapper(cls.clamp, "clamp")
    cls.clip = _clamp_wrapper(cls.clip, "clip")
    cls.max = _with_other(cls.max, maximum, "max")
    cls.min = _with_other(cls.min, minimum, "min")


# The module functions re-exported by aicraft (functions.py) and F; activations.py has its own.
FUNCTIONS = [name for name in _METHODS if not name.endswith("_") or name in (
    "rsqrt_", "square_", "reciprocal_", "erf_", "erfc_", "expm1_", "exp2_", "log2_", "log10_",
    "floor_", "ceil_", "round_", "trunc_", "fix_", "frac_", "tan_", "asin_", "arcsin_", "acos_",
    "arccos_", "atan_", "arctan_", "sinh_", "cosh_", "asinh_", "arcsinh_", "acosh_", "arccosh_",
    "atanh_", "arctanh_", "sigmoid_", "logit_", "xlogy_", "deg2rad_", "rad2deg_", "sinc_",
    "nan_to_num_", "clamp_min_", "clamp_max_", "clamp_", "clip_", "i0_")]


def module_functions():
    """{name: function} of the module functions aicraft re-exports (functions.py)."""
    return {name: _METHODS.get(name) or globals()[name] for name in FUNCTIONS}

