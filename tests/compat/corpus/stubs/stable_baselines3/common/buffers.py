"""A replay buffer with stable-baselines3's add/sample interface; samples come back as tensors of
whatever `torch` is (torch itself, or rumus under the harness's import renaming)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class ReplayBufferSamples(NamedTuple):
    observations: Any
    actions: Any
    next_observations: Any
    dones: Any
    rewards: Any


class ReplayBuffer:
    def __init__(self, buffer_size: int, observation_space: Any, action_space: Any, device: Any = "cpu",
                 handle_timeout_termination: bool = True, **kwargs: Any) -> None:
        self.size, self.pos, self.full = buffer_size, 0, False
        act_shape = action_space.shape if action_space.shape else (1,)
        self.discrete = not action_space.shape
        self.obs = np.zeros((buffer_size, *observation_space.shape), dtype=np.float32)
        self.next_obs = np.zeros_like(self.obs)
        self.actions = np.zeros((buffer_size, *act_shape), dtype=np.int64 if self.discrete else np.float32)
        self.rewards = np.zeros((buffer_size, 1), dtype=np.float32)
        self.dones = np.zeros((buffer_size, 1), dtype=np.float32)

    def add(self, obs: Any, next_obs: Any, action: Any, reward: Any, done: Any, infos: Any) -> None:
        self.obs[self.pos] = np.asarray(obs)[0]
        self.next_obs[self.pos] = np.asarray(next_obs)[0]
        self.actions[self.pos] = np.asarray(action).reshape(self.actions.shape[1:])
        self.rewards[self.pos] = np.asarray(reward).reshape(-1)[0]
        self.dones[self.pos] = np.asarray(done).reshape(-1)[0]
        self.pos = (self.pos + 1) % self.size
        self.full = self.full or self.pos == 0

    def sample(self, batch_size: int) -> ReplayBufferSamples:
        import torch

        upper = self.size if self.full else self.pos
        idx = np.random.randint(0, upper, size=batch_size)

        def t(a: np.ndarray) -> Any:
            return torch.from_numpy(np.ascontiguousarray(a[idx]))

        return ReplayBufferSamples(t(self.obs), t(self.actions), t(self.next_obs), t(self.dones), t(self.rewards))
