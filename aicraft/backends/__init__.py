"""backends - ac.backends.mps, ac.backends.cudnn and ac.backends.cuda as PyTorch
scripts probe and set them (each a module: `import aicraft.backends.cudnn as cudnn`
works). aicraft has neither mps nor cuDNN: they report unavailable, and cudnn's
switches (benchmark, deterministic, enabled) are plain attributes that change nothing
(aicraft's kernels are deterministic whatever they say). ac.backends.cuda says whether
this build has CUDA and holds matmul.allow_tf32."""
from aicraft.backends import cpu, cuda, cudnn, mps

__all__ = ["cpu", "cuda", "cudnn", "mps"]
