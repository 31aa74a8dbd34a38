"""Verifying a fixture: re-run the recorded layers on the recorded input, compare bit for bit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fixture import Fixture


@dataclass(frozen=True)
class VerifyResult:
    """ok, or where the recomputed output first differs (flat row-major index and position)."""

    ok: bool
    n_values: int
    n_mismatches: int
    first_index: int | None = None
    first_position: tuple[int, ...] | None = None
    recorded: int | None = None
    recomputed: int | None = None

    def summary(self) -> str:
        if self.ok:
            return (f"{self.n_values} output value{'s match' if self.n_values != 1 else ' matches'} bit for bit")
        return (f"first differing index {self.first_index} (position {list(self.first_position or ())}): "
                f"recorded {self.recorded}, recomputed {self.recomputed}; {self.n_mismatches} of "
                f"{self.n_values} values differ")

    def __bool__(self) -> bool:
        return self.ok


def verify(fixture: Fixture) -> VerifyResult:
    got = fixture.model()(fixture.input_tensor()).fixed_i16_data().reshape(-1)
    want = np.array(fixture.output, dtype=np.int16)
    if got.shape != want.shape:  # cannot happen for a validated fixture; kept as a clear failure
        return VerifyResult(False, want.size, want.size, 0, None, None, None)
    diff = np.flatnonzero(got != want)
    if diff.size == 0:
        return VerifyResult(True, int(want.size), 0)
    i = int(diff[0])
    position = tuple(int(p) for p in np.unravel_index(i, fixture.output_shape))
    return VerifyResult(False, int(want.size), int(diff.size), i, position, int(want[i]), int(got[i]))
