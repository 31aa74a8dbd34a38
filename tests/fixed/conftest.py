"""Shared pieces of the fixed-point tests: the canonical MLP of SPEC E and the shared fixtures folder."""

from __future__ import annotations

from pathlib import Path

import pytest

import rumus.fixed as fx

ROOT = Path(__file__).resolve().parents[2]
CANONICAL_NAME = "canonical_fixed_mlp.json"


def shared_fixture(name: str) -> Path:
    """shared/fixtures/ beside the checkout (CI clones it there), else the workspace's copy."""
    for folder in (ROOT.parent / "shared" / "fixtures", Path("/work/shared/fixtures")):
        if (folder / name).is_file():
            return folder / name
    pytest.fail(f"{name} not found in ../shared/fixtures or /work/shared/fixtures")


def canonical_parts() -> tuple[fx.FixedLinear, fx.FixedLinear, object]:
    """SPEC E: s=8; L1 W=[256,-256,256,256] (2x2, no bias); relu; L2 W=[256,256] (2x1), b=[256]."""
    l1 = fx.FixedLinear([[256, -256], [256, 256]], None, 8)
    l2 = fx.FixedLinear([[256], [256]], [256], 8)
    return l1, l2, fx.tensor([256, 256], (1, 2), 8)


@pytest.fixture
def canonical_path() -> Path:
    return shared_fixture(CANONICAL_NAME)


@pytest.fixture
def canonical_fixture() -> fx.Fixture:
    l1, l2, x = canonical_parts()
    out = l2(fx.relu(l1(x)))
    return fx.FixedFixtureBuilder(8).add_linear(l1).add_relu().add_linear(l2).finish(x, out)
