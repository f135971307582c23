"""norm.py - nn.LayerNorm and its functional form layer_norm (aicraft.nn.functional
re-exports it), one C call each (libac's norm.c); GroupNorm, InstanceNorm1d/2d,
RMSNorm, LocalResponseNorm and their functional forms, composed of C ops (group and
instance norm are layer_norm over (N, G, rest) then a per-channel scale and shift).

Parameter names and initialisation are PyTorch's: `weight` (ones) and `bias`
(zeros), of normalized_shape, when elementwise_affine.
"""
from aicraft._args import _as_int
from aicraft._ffi import ffi, lib
from aicraft._wrapping import _wrap
from aicraft.creation import ones, zeros
from aicraft.errors import raise_error
from aicraft.nn import init
from aicraft.nn.layers import _not_a_tensor
from aicraft.nn.conv import _per_channel_state
from aicraft.nn.module import Module, Parameter, factory_kwargs
from aicraft.tensor import Tensor

__all__ = ["LayerNorm", "layer_norm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "RMSNorm",
           "LocalResponseNorm", "group_norm", "instance_norm", "rms_norm", "local_response_norm"]

_NULL = ffi.NULL


def _normalized_shape(shape, fn):
    """normalized_shape (an int or a sequence of ints) as a tuple of ints."""
    dims = (shape,) if not isinstance(shape, (tuple, list)) else tuple(shape)
    return tuple(_as_int(d, fn + ": normalized_shape entries") for d in dims)


def _layer_norm(input, shape, weight, bias, eps, fn):
    if not isinstance(input, Tensor):
        raise TypeError("%s: input must be a Tensor, not %s" % (fn, type(input).__name__))
    for value, what in ((weight, "weight"), (bias, "bias")):
        if value is not None and not isinstance(value, Tensor):
            raise TypeError("%s: %s must be a Tensor or None, not %s" % (fn, what, type(value).__name__))
    if float(eps) < 0 and shape and tuple(input.shape[input.ndim - len(shape):]) == tuple(shape):
        # torch takes a negative eps (NaN where var + eps < 0); the C op refuses it
        dims = tuple(range(input.ndim - len(shape), input.ndim))
        centred = input - input.mean(dims, keepdim=True)
        y = centred / ((centred * centred).mean(dims, keepdim=True) + float(eps)).sqrt()
        y = y if weight is None else y * weight
        return y if bias is None else y + bias
    p = lib.ac_layer_norm(input._ptr, ffi.new("int64_t[]", shape) if shape else _NULL, len(shape),
                          _NULL if weight is None else weight._ptr,
                          _NULL if bias is None else bias._ptr, float(eps))
    if p:
        return _wrap(p)
    raise_error(input, weight, bias)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise input over its last len(normalized_shape) dims (mean and biased
    variance per row), then scale by weight and shift by bias when given."""
    return _layer_norm(input, _normalized_shape(normalized_shape, "layer_norm"), weight, bias, eps,
                       "layer_norm")


class LayerNorm(Module):
    """Layer normalisation over the trailing normalized_shape dims, as torch.nn.LayerNorm."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape, "LayerNorm")
        if not self.normalized_shape or any(d < 0 for d in self.normalized_shape):
            raise ValueError("LayerNorm: normalized_shape must be non-empty sizes >= 0, got %r"
                             % (normalized_shape,))
        self.eps = float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape))
            if bias:
                self.bias = Parameter(zeros(*self.normalized_shape))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        return _layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps, "LayerNorm")

    def extra_repr(self):
        return "%s, eps=%g, elementwise_affine=%s" % (self.normalized_shape, self.eps,
                                                      self.elementwise_affine)


# ---- group, instance, RMS and local response norms (composed of C ops) ----------

def _affine(y, weight, bias, fn):
    """y * weight + bias along dim 1 (the channels), each optional."""
    if weight is None and bias is None:
        return y
    view = (-1,) + (1,) * (y.ndim - 2)
    for value, what in ((weight, "weight"), (bias, "bias")):
        if value is not None and not isinstance(value, Tensor):
            raise TypeError("%s: %s must be a Tensor or None, not %s" % (fn, what, type(value).__name__))
        if value is not None and tuple(value.shape) != (y.shape[1],):
            raise ValueError("%s: %s %s does not fit %d channels" % (fn, what, tuple(value.shape),
                                                                  y.shape[1]))
    if weight is not None:
        y = y * weight.reshape(*view)
    if bias is not None:
        y = y + bias.reshape(*view)
    return y


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise input (N, C, *) over each group of C/num_groups channels and the
    spatial dims, then scale and shift per channel, as torch's F.group_norm."""
    fn = "group_norm"
    if not isinstance(input, Tensor):
        raise TypeError("%s: input must be a Tensor, not %s" % (fn, type(input).__name__))
    g = _as_int(num_groups, fn + ": num_groups")
    if input.ndim < 2:
        raise ValueError("Expected at least 2 dimensions for input tensor but received %d"
                         % input.ndim)
    n, c = input.shape[0], input.shape[1]
    if g <= 0 or c % g:
        raise ValueError("Expected number of channels in input to be divisible by num_groups, but "
                         "got input of shape %s and num_groups=%d" % (tuple(input.shape), g))
    rest = c // g
    for d in input.shape[2:]:
        rest *= d
    rows = input.reshape(n, g, rest)
    y = _layer_norm(rows, (rows.shape[-1],), None, None, eps, fn).reshape(*input.shape)
    return _affine(y, weight, bias, fn)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each (n, c) plane of input (N, C, *) over its spatial dims (or with the
    running statistics when use_input_stats is False), as torch's F.instance_norm;
    running_mean/var, when given, are updated in place as torch does."""
    fn = "instance_norm"
    if not isinstance(input, Tensor):
        raise TypeError("%s: input must be a Tensor, not %s" % (fn, type(input).__name__))
    if input.ndim < 3:
        raise ValueError("%s: expected input (N, C, *) with spatial dims, got %s"
                         % (fn, tuple(input.shape)))
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("Expected running_mean and running_var to be defined when "
                             "use_input_stats is false")
        from aicraft.nn.conv import batch_norm
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if (running_mean is None) != (running_var is None):
        raise ValueError("%s: running_mean and running_var must both be given or both None" % fn)
    if running_mean is not None:
        from aicraft.autograd import no_grad
        spatial = tuple(range(2, input.ndim))
        count = 1
        for d in spatial:
            count *= input.shape[d]
        with no_grad():
            x = input.detach()
            mean = x.mean(spatial)
            var = x.var(spatial, correction=1) if count > 1 else mean * float("nan")
            m = float(momentum)
            running_mean.copy_(running_mean * (1.0 - m) + mean.mean(0) * m)
            running_var.copy_(running_var * (1.0 - m) + var.mean(0) * m)
    return group_norm(input, input.shape[1], weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the last len(normalized_shape) dims, times weight,
    as torch's F.rms_norm (eps None: float32's machine epsilon)."""
    fn = "rms_norm"
    if not isinstance(input, Tensor):
        raise TypeError("%s: input must be a Tensor, not %s" % (fn, type(input).__name__))
    shape = _normalized_shape(normalized_shape, fn)
    if tuple(input.shape[input.ndim - len(shape):]) != shape or len(shape) > input.ndim:
        raise ValueError("%s: input %s does not end in normalized_shape %s"
                         % (fn, tuple(input.shape), shape))
    if weight is not None and tuple(weight.shape) != shape:
        raise ValueError("%s: weight %s must be normalized_shape %s" % (fn, tuple(weight.shape), shape))
    eps = 1.1920928955078125e-07 if eps is None else float(eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    if not dims:
        y = input / ((input * input) + eps).sqrt()
    else:
        y = input / ((input * input).mean(dims, keepdim=True) + eps).sqrt()
    return y if weight is None else y * weight


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over size neighbouring channels)^beta, as torch's
    F.local_response_norm."""
    fn = "local_response_norm"
    if not isinstance(input, Tensor):
        raise TypeError("%s: input must be a Tensor, not %s" % (fn, type(input).__name__))
    if input.ndim < 3:
        raise ValueError("Expected 3D or higher dimensionality input (got %d dimensions)"
                         % input.ndim)
    size = _as_int(size, fn + ": size")
    if input.numel() == 0:
        return input.clone()
    from aicraft.nn.padding import pad
    from aicraft.nn.pooling import avg_pool2d
    n, c = input.shape[0], input.shape[1]
    sq = (input * input).reshape(n, 1, c, -1)
    sq = pad(sq, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(sq, (size, 1), stride=1).reshape(*input.shape)
    return input / (div * float(alpha) + float(k)) ** float(beta)


class GroupNorm(Module):
    """Group normalisation, as torch.nn.GroupNorm: weight (ones) and bias (zeros) of
    num_channels when affine."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        self.num_groups = _as_int(num_groups, "GroupNorm: num_groups")
        self.num_channels = _as_int(num_channels, "GroupNorm: num_channels")
        if self.num_groups <= 0 or self.num_channels % self.num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.eps = float(eps)
        self.affine = bool(affine)
        if self.affine:
            self.weight = Parameter(ones(self.num_channels))
            self.bias = Parameter(zeros(self.num_channels))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "%d, %d, eps=%g, affine=%s" % (self.num_groups, self.num_channels, self.eps,
                                             self.affine)





class _InstanceNorm(Module):
    _spatial = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__()
        self.num_features = _as_int(num_features, type(self).__name__ + ": num_features")
        self.eps = float(eps)
        self.momentum = momentum
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        _per_channel_state(self)
        factory_kwargs(self, device, dtype)

    def forward(self, input):
        if not isinstance(input, Tensor):
            raise _not_a_tensor(self, input)
        name = type(self).__name__
        batched = self._spatial + 2
        if input.ndim not in (batched - 1, batched):
            raise ValueError("%s: expected %dD or %dD input (got %dD input)"
                             % (name, batched - 1, batched, input.ndim))
        unbatched = input.ndim == batched - 1
        x = input.unsqueeze(0) if unbatched else input
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError("%s: expected input's size at dim=%d to match num_features (%d), but "
                             "got: %d." % (name, 0 if unbatched else 1, self.num_features,
                                           x.shape[1]))
        use_input_stats = self.training or not self.track_running_stats
        momentum = 0.0 if self.momentum is None else self.momentum
        y = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                          use_input_stats, momentum, self.eps)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self):
        return "%d, eps=%g, momentum=%s, affine=%s, track_running_stats=%s" % (
            self.num_features, self.eps, self.momentum, self.affine, self.track_running_stats)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation over (N, C, L) or (C, L), as torch.nn.InstanceNorm1d."""
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation over (N, C, H, W) or (C, H, W), as torch.nn.InstanceNorm2d."""
    _spatial = 2


class RMSNorm(Module):
    """RMS normalisation over the trailing normalized_shape dims, as torch.nn.RMSNorm."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape, "RMSNorm")
        self.eps = eps
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape))
        else:
            self.register_parameter("weight", None)
        factory_kwargs(self, device, dtype)

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return "%s, eps=%s, elementwise_affine=%s" % (self.normalized_shape, self.eps,
                                                      self.elementwise_affine)


class LocalResponseNorm(Module):
    """Local response normalisation across channels, as torch.nn.LocalResponseNorm."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = _as_int(size, "LocalResponseNorm: size")
        self.alpha, self.beta, self.k = float(alpha), float(beta), float(k)

    def forward(self, input):
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return "%d, alpha=%s, beta=%s, k=%s" % (self.size, self.alpha, self.beta, self.k)
