"""special.py - aicraft.special, PyTorch's torch.special: the special functions of
pointwise.py under their torch.special names (expit, gammaln, psi, ndtr, erfcx, i0e, ...),
plus the few only torch.special has (ndtri, log_ndtr, entr, erfcx, i0e, i1, i1e, xlog1py,
zeta), over libac's ac_pointwise (ops/pointwise.c)."""
import math

from aicraft import activations as _activations, pointwise as _p
from aicraft._ffi import lib as _lib

__all__ = ["expit", "logit", "erf", "erfc", "erfcx", "erfinv", "expm1", "exp2", "log1p", "sinc",
           "round", "digamma", "psi", "gammaln", "polygamma", "multigammaln", "i0", "i0e", "i1",
           "i1e", "ndtr", "ndtri", "log_ndtr", "entr", "xlogy", "xlog1py", "zeta", "softmax",
           "log_softmax"]

erf, erfc, erfinv, expm1, exp2, sinc = _p.erf, _p.erfc, _p.erfinv, _p.expm1, _p.exp2, _p.sinc
digamma = psi = _p.digamma
gammaln = _p.lgamma
polygamma = _p.polygamma
multigammaln = _p.mvlgamma
i0 = _p.i0
xlogy = _p.xlogy
logit = _p.logit


def round(input, decimals=0):  # noqa: A001 - torch.special's name
    """Round half to even to `decimals` places."""
    return _p.round(input, decimals=decimals)


def _as_float(x, name):
    x = _p._tensor_arg(x, name)
    return x if x.dtype.is_floating_point else x.float()


def expit(input):
    """1 / (1 + exp(-input)), the logistic sigmoid."""
    return _as_float(input, "expit").sigmoid()


def log1p(input):
    """log(1 + input), exact near 0."""
    return _as_float(input, "log1p").log1p()


def _special(name, code, doc):
    def fn(input):
        return _p._pw(input, code, "special." + name)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


erfcx = _special("erfcx", _lib.AC_PW_ERFCX, "exp(x^2) erfc(x), without overflow for large x.")
ndtri = _special("ndtri", _lib.AC_PW_NDTRI, "The standard normal's quantile function.")
log_ndtr = _special("log_ndtr", _lib.AC_PW_LOG_NDTR, "log of the standard normal's CDF, stable in the tails.")
entr = _special("entr", _lib.AC_PW_ENTR, "-x log x (0 at 0, -inf below 0).")
i0e = _special("i0e", _lib.AC_PW_I0E, "i0(x) exp(-|x|).")
i1 = _special("i1", _lib.AC_PW_I1, "The modified Bessel function of the first kind, order 1.")
i1e = _special("i1e", _lib.AC_PW_I1E, "i1(x) exp(-|x|).")


def ndtr(input):
    """The standard normal's CDF: 0.5 erfc(-x / sqrt 2)."""
    return _p.erfc(_as_float(input, "ndtr") * (-1.0 / math.sqrt(2.0))) * 0.5


def xlog1py(input, other):
    """input * log1p(other), 0 where input is 0 (unless other is NaN)."""
    return _p._pw2(input, other, _lib.AC_PW2_XLOG1PY, "special.xlog1py")


def zeta(input, other):
    """The Hurwitz zeta function zeta(input, other); not differentiable (as torch)."""
    _p._no_grad_needed("special.zeta", input, other)
    return _p._pw2(input, other, _lib.AC_PW2_ZETA, "special.zeta")


def softmax(input, dim, dtype=None):
    """softmax along dim (float32)."""
    return _activations.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):
    """log_softmax along dim (float32)."""
    return _activations.log_softmax(input, dim, dtype=dtype)

