"""The wrappers the corpus programs use."""

from __future__ import annotations

from typing import Any

import numpy as np


class Wrapper:
    def __init__(self, env: Any, *args: Any, **kwargs: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        return self.env.step(action)


class RecordEpisodeStatistics(Wrapper):
    def reset(self, **kwargs: Any) -> Any:
        self.ret, self.length = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.ret += float(reward)
        self.length += 1
        if terminated or truncated:
            info = dict(info, episode={"r": np.array([self.ret]), "l": np.array([self.length])})
        return obs, reward, terminated, truncated, info


class RecordVideo(Wrapper):
    pass


class ClipAction(Wrapper):
    def step(self, action: Any) -> Any:
        space = self.env.action_space
        return self.env.step(np.clip(action, space.low, space.high))


class FlattenObservation(Wrapper):
    pass


class NormalizeObservation(Wrapper):
    pass


class NormalizeReward(Wrapper):
    pass


class TransformObservation(Wrapper):
    def __init__(self, env: Any, f: Any, *args: Any) -> None:
        super().__init__(env)
        self.f = f

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        return self.f(obs), info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self.f(obs), reward, terminated, truncated, info


class TransformReward(Wrapper):
    def __init__(self, env: Any, f: Any) -> None:
        super().__init__(env)
        self.f = f

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, self.f(reward), terminated, truncated, info
