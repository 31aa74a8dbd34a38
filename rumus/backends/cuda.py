"""torch.backends.cuda's path: `cuda.matmul.allow_tf32 = True` and the SDP kernel switches are accepted and
change nothing (RUMUS has no CUDA backend; its float32 matmuls are always full float32)."""

from __future__ import annotations

from typing import Any

from ._flags import Flags

matmul = Flags(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
               allow_bf16_reduced_precision_reduction=True)
cufft_plan_cache = Flags(max_size=0, size=0)


def is_built() -> bool:
    """False: RUMUS is not built with CUDA."""
    return False


def _accept(enabled: bool = True) -> None:
    """Accepted: selects nothing (RUMUS's attention picks its kernel itself)."""


enable_flash_sdp = enable_mem_efficient_sdp = enable_math_sdp = enable_cudnn_sdp = _accept


def flash_sdp_enabled() -> bool:
    return False


def mem_efficient_sdp_enabled() -> bool:
    return False


def math_sdp_enabled() -> bool:
    return True


def preferred_linalg_library(backend: Any = None) -> None:
    """Accepted: RUMUS's linear algebra runs where its tensors are."""
