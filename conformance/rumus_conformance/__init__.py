"""The RUMUS conformance suite: every op x dtype x sample of the op registry, on any backend.

    RUMUS_BACKEND=wgpu pytest --pyargs rumus_conformance
    rumus conformance --backend wgpu          # also prints the op x dtype matrix
"""

from .harness import Claim, backend_name, claims

__all__ = ["Claim", "backend_name", "claims"]
