"""backends - ac.backends.mps, ac.backends.cudnn and ac.backends.cuda as PyTorch
scripts probe them: aicraft has neither mps nor cuDNN, so they report unavailable;
ac.backends.cuda says whether this build has CUDA and holds matmul.allow_tf32."""
from types import SimpleNamespace

from aicraft._ffi import lib

mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cudnn = SimpleNamespace(is_available=lambda: False, enabled=False, deterministic=False,
                        benchmark=False)


class _CudaMatmul:
    """ac.backends.cuda.matmul: allow_tf32 lets CUDA matmul and linear run on the
    tensor cores in TF32 (faster, inputs rounded to 10 mantissa bits). Off by default."""

    @property
    def allow_tf32(self):
        return bool(lib.ac_cuda_allow_tf32())

    @allow_tf32.setter
    def allow_tf32(self, value):
        lib.ac_cuda_set_allow_tf32(1 if value else 0)


cuda = SimpleNamespace(is_built=lambda: bool(lib.ac_cuda_is_built()), matmul=_CudaMatmul())
