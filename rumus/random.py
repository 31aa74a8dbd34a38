"""Random numbers: a seedable Generator (numpy PCG64 on the host); `manual_seed` seeds the default one.

The default generator is per thread: `manual_seed(s)` in a thread seeds that thread's stream only,
so N threads seeded alike draw exactly what N single-threaded runs draw. The main thread starts at
seed 0; any other thread starts at a seed derived from the main thread's initial seed and the
order in which threads first draw (deterministic for a fixed program), until it calls manual_seed.
"""

from __future__ import annotations

import itertools
import threading

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


_main_thread_generator = Generator(0)
_thread_order = itertools.count(1)


class _PerThread(threading.local):
    def __init__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.gen = _main_thread_generator
        else:
            # a distinct, reproducible stream per thread (never the main thread's numbers again)
            seq = np.random.SeedSequence([_main_thread_generator.initial_seed(), next(_thread_order)])
            self.gen = Generator(int(seq.generate_state(1, np.uint64)[0] >> 1))


class _ThreadDefaultGenerator(Generator):
    """`default_generator`: one object everyone imports, drawing from the calling thread's stream."""

    def __init__(self) -> None:
        self._local = _PerThread()

    @property
    def rng(self) -> np.random.Generator:
        return self._local.gen.rng

    @rng.setter
    def rng(self, value: np.random.Generator) -> None:
        self._local.gen.rng = value

    @property
    def _seed(self) -> int:
        return self._local.gen._seed

    @_seed.setter
    def _seed(self, value: int) -> None:
        self._local.gen._seed = value

    def manual_seed(self, seed: int) -> Generator:
        self._local.gen.manual_seed(seed)
        return self

    def set_state(self, state: dict[str, object]) -> None:
        self._local.gen.set_state(state)


default_generator: Generator = _ThreadDefaultGenerator()


def manual_seed(seed: int) -> Generator:
    """Seed the default random generator (every device's), for reproducible runs; returns the generator."""
    return default_generator.manual_seed(seed)


def initial_seed() -> int:
    """The seed the default random generator started from (set by `manual_seed`)."""
    return default_generator.initial_seed()
