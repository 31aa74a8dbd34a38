"""`rm.compile`: capture a function's kernels once, replay them without Python, fuse elementwise chains."""

from .api import Compiled, compile
from .host import host_region

__all__ = ["Compiled", "compile", "host_region"]
