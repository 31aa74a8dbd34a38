"""torch.backends' path. Programs set these flags for CUDA/cuDNN/MPS libraries that RUMUS does not use:
every flag is accepted and kept (so reading it back gives what was set) and changes nothing here —
RUMUS's kernels are deterministic and have no TF32 or autotuning modes. `is_available()` answers False
for the libraries RUMUS lacks."""

from . import cuda, cudnn, mkl, mkldnn, mps, openmp, opt_einsum

__all__ = ["cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp", "opt_einsum"]
