"""gradcheck.py - ac.gradcheck: analytic gradients against central differences, run by C.

C's ac_gradient_check calls back into Python (`_py_gradcheck_fn`, an extern
"Python" callback) to evaluate fn. It runs fn inside scopes of its own, so the
callback registers matching Python scopes for the tensors fn makes and ends
them when fn returns.
"""
from aicraft._ffi import ffi, lib
from aicraft.errors import raise_error
from aicraft._scope import Scope, stack
from aicraft._wrapping import _live
from aicraft.tensor import Tensor


class _Call:
    """What one gradcheck call shares with its callback."""

    def __init__(self, fn, inputs):
        self.fn = fn
        self.inputs = inputs
        self.error = None
        self.results = []    # keeps fn's outputs alive until C has read them


@ffi.def_extern()
def _py_gradcheck_fn(inputs, n_inputs, user):
    call = ffi.from_handle(user)
    opened = [Scope() for _ in range(len(stack()), lib.ac_mem_depth())]
    for scope in opened:
        scope.open()
    try:
        out = call.fn(*call.inputs)
        if not isinstance(out, Tensor):
            raise TypeError("gradcheck: fn must return a Tensor, not %s" % type(out).__name__)
        call.results.append(out)
        return _live(out)
    except BaseException as exc:   # noqa: B902 - handed back to gradcheck(), never lost
        if call.error is None:
            call.error = exc
        return ffi.NULL
    finally:
        if opened:
            opened[0].close()


def gradcheck(fn, inputs, eps=1e-3, atol=1e-2, rtol=1e-2, raise_exception=True):
    """Check fn's gradients for every input that requires grad against central
    differences of step eps. Returns True, or raises GradcheckError naming the
    worst element (returns False instead when raise_exception is False).

    fn takes the inputs and returns a tensor; inputs are leaf tensors."""
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    if not callable(fn):
        raise TypeError("gradcheck: fn must be callable")
    if not isinstance(inputs, (tuple, list)) or not all(isinstance(t, Tensor) for t in inputs):
        raise TypeError("gradcheck: inputs must be a tensor or a sequence of tensors")
    inputs = tuple(inputs)
    array = ffi.new("AcTensor *[]", [_live(t) for t in inputs]) if inputs else ffi.NULL
    call = _Call(fn, inputs)
    handle = ffi.new_handle(call)
    max_err = ffi.new("float *")
    rc = lib.ac_gradient_check(lib._py_gradcheck_fn, array, len(inputs), handle,
                               float(eps), float(atol), float(rtol), max_err)
    if call.error is not None:
        raise call.error
    if rc == lib.AC_ERR_GRADCHECK and not raise_exception:
        return False
    if rc < 0:
        raise_error(*inputs)
    return True
