"""CartPole-v1 and Pendulum-v1 with gymnasium's equations and step API."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .spaces import Box, Discrete


class Env:
    observation_space: Any
    action_space: Any
    max_steps = 0

    def __init__(self) -> None:
        self.np_random = np.random.default_rng()
        self.t = 0

    @property
    def unwrapped(self) -> Env:
        return self

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.t = 0
        return self._reset(), {}

    def _reset(self) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass


class CartPole(Env):
    max_steps = 500

    def __init__(self) -> None:
        super().__init__()
        high = np.array([4.8, np.inf, 0.418, np.inf], dtype=np.float32)
        self.observation_space = Box(-high, high, dtype=np.float32)
        self.action_space = Discrete(2)
        self.state = np.zeros(4)

    def _reset(self) -> np.ndarray:
        self.state = self.np_random.uniform(-0.05, 0.05, size=4)
        return self.state.astype(np.float32)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if int(action) == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        tau = 0.02
        self.state = np.array([x + tau * x_dot, x_dot + tau * x_acc, theta + tau * theta_dot,
                               theta_dot + tau * theta_acc])
        self.t += 1
        terminated = bool(abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * 2 * math.pi / 360)
        return self.state.astype(np.float32), 1.0, terminated, self.t >= self.max_steps, {}


class Pendulum(Env):
    max_steps = 200

    def __init__(self) -> None:
        super().__init__()
        high = np.array([1.0, 1.0, 8.0], dtype=np.float32)
        self.observation_space = Box(-high, high, dtype=np.float32)
        self.action_space = Box(-2.0, 2.0, shape=(1,), dtype=np.float32)
        self.state = np.zeros(2)

    def _obs(self) -> np.ndarray:
        th, thdot = self.state
        return np.array([math.cos(th), math.sin(th), thdot], dtype=np.float32)

    def _reset(self) -> np.ndarray:
        self.state = self.np_random.uniform([-math.pi, -1.0], [math.pi, 1.0])
        return self._obs()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        th, thdot = self.state
        u = float(np.clip(np.asarray(action).reshape(-1)[0], -2.0, 2.0))
        norm = ((th + math.pi) % (2 * math.pi)) - math.pi
        cost = norm**2 + 0.1 * thdot**2 + 0.001 * u**2
        thdot = float(np.clip(thdot + (3 * 10.0 / 2 * math.sin(th) + 3.0 * u) * 0.05, -8.0, 8.0))
        self.state = np.array([th + thdot * 0.05, thdot])
        self.t += 1
        return self._obs(), -cost, False, self.t >= self.max_steps, {}


_ENVS = {"CartPole-v1": CartPole, "Pendulum-v1": Pendulum}


def make(env_id: str, **kwargs: Any) -> Env:
    if env_id not in _ENVS:
        raise KeyError(f"the corpus's gymnasium stand-in has {sorted(_ENVS)}, not {env_id!r}")
    return _ENVS[env_id]()
