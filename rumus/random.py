"""Random numbers: a seedable Generator (numpy PCG64 on the host); `manual_seed` seeds the default one."""

from __future__ import annotations

import numpy as np


class Generator:
    """Host-side generator; tensors drawn from it are uploaded to their device."""

    def __init__(self, seed: int | None = None) -> None:
        self._seed = seed if seed is not None else int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
        self.rng = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict[str, object]:
        return dict(self.rng.bit_generator.state)

    def set_state(self, state: dict[str, object]) -> None:
        self.rng.bit_generator.state = state


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    return default_generator.manual_seed(seed)


def initial_seed() -> int:
    return default_generator.initial_seed()
