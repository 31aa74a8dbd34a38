"""A small local stand-in for gymnasium: CartPole-v1 and Pendulum-v1 (the classic-control equations in
numpy), the spaces, SyncVectorEnv with autoreset, and the wrappers the corpus's RL programs wrap their
environments in. The normalising wrappers pass values through unchanged (the programs' data, not their
code, is what the corpus swaps)."""

from __future__ import annotations

from . import spaces, vector, wrappers
from .envs import Env, make

__all__ = ["Env", "make", "spaces", "vector", "wrappers"]
