"""ac.backends.cuda: whether this build has CUDA, and matmul.allow_tf32."""
from aicraft._ffi import lib


class _CudaMatmul:
    """ac.backends.cuda.matmul: allow_tf32 lets CUDA matmul and linear run on the
    tensor cores in TF32 (faster, inputs rounded to 10 mantissa bits). Off by default."""

    @property
    def allow_tf32(self):
        return bool(lib.ac_cuda_allow_tf32())

    @allow_tf32.setter
    def allow_tf32(self, value):
        lib.ac_cuda_set_allow_tf32(1 if value else 0)


matmul = _CudaMatmul()


def is_built():
    return bool(lib.ac_cuda_is_built())
