"""Random numbers in a captured function: which `seed` attributes a replay must draw afresh.

Dropout (and attention dropout) hash (seed, offset, element index) on the device, the seed drawn
from rumus's default generator per call. A replay draws the same number of seeds from the same
generator in the same order, so compiled and eager runs see identical masks. Any other host draw
during the capture (rand, randn, randperm...) would be frozen into the replay: that is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import RumusError

from ..random import default_generator


def snapshot() -> dict[str, Any]:
    return default_generator.get_state()


def classify(fn_name: str, before: dict[str, Any], seeds: list[int]) -> dict[int, bool]:
    """{seed: drawn from the default generator during the capture (True) or given explicitly}."""
    sim = np.random.Generator(np.random.PCG64())
    sim.bit_generator.state = before
    expected = int(sim.integers(0, 2 ** 32)) if seeds else None
    out: dict[int, bool] = {}
    for s in seeds:
        if s == expected:
            out[s] = True
            expected = int(sim.integers(0, 2 ** 32))
        else:
            out[s] = False
    drawn = sum(out.values())
    sim.bit_generator.state = before
    for _ in range(drawn):
        sim.integers(0, 2 ** 32)
    if sim.bit_generator.state != default_generator.get_state():
        raise RumusError(f"rm.compile({fn_name}): the function draws random numbers on the host (rand, randn, "
                         f"randint, randperm, ...) while it is captured; a replay would repeat the same values. "
                         f"Draw them outside and pass them as arguments (dropout is fine: its seeds are drawn "
                         f"afresh on every replay)")
    return out
