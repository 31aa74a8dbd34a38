"""SyncVectorEnv with gymnasium 0.28's autoreset and final_observation / final_info."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .spaces import Box, Discrete


class SyncVectorEnv:
    def __init__(self, thunks: list[Callable[[], Any]]) -> None:
        self.envs = [t() for t in thunks]
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        space = self.single_action_space
        if isinstance(space, Discrete):
            self.action_space: Any = Discrete(space.n)
        else:
            self.action_space = Box(np.stack([space.low] * self.num_envs), np.stack([space.high] * self.num_envs))
        self.observation_space = self.single_observation_space

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs = [e.reset(seed=None if seed is None else seed + i)[0] for i, e in enumerate(self.envs)]
        return np.stack(obs), {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rews, terms, truncs = [], [], [], []
        final_obs: list[Any] = [None] * self.num_envs
        final_info: list[Any] = [None] * self.num_envs
        done_any = False
        for i, (env, a) in enumerate(zip(self.envs, actions)):
            o, r, term, trunc, info = env.step(a)
            if term or trunc:
                done_any = True
                final_obs[i], final_info[i] = o, info
                o, _ = env.reset()
            obs.append(o)
            rews.append(r)
            terms.append(term)
            truncs.append(trunc)
        infos: dict[str, Any] = {}
        if done_any:
            infos["final_observation"] = np.array(final_obs, dtype=object)
            infos["final_info"] = np.array([fi if fi is not None else {} for fi in final_info], dtype=object)
        return (np.stack(obs), np.array(rews, dtype=np.float64), np.array(terms), np.array(truncs), infos)

    def close(self) -> None:
        pass
