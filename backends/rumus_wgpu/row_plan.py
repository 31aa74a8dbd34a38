"""The launch plan of a softmax / log_softmax row launch (and of their fused backward): how many
invocations own a row, whether a row is split into chunks over grid z, and how many loads an invocation
keeps in flight. A pure function of (rows, row length, load width, adapter limits): no shape is special.

Thresholds:
- group: about LOADS_PER_INVOCATION loads per invocation, a power of two up to 256 (a whole workgroup
  for a long row, 256 / group short rows per workgroup); over an outer dim with many rows, small groups
  so neighbouring invocations read neighbouring rows.
- unroll: an invocation issues UNROLL loads before folding them (one step of a row walk covers
  group * UNROLL loads), so a row's loads are in flight together instead of one round trip each; the
  sizes of the groups make a typical invocation's share of a row exactly one step.
- split: a row is split when it fills a whole workgroup, the one-pass launch would run fewer than
  SPLIT_WORKGROUPS / 4 workgroups (few long rows leave most of a big GPU idle: 64 rows on a 132-SM GPU
  is one workgroup on half of its multiprocessors), the row holds at least two chunks of SPLIT_CHUNK
  elements and at least SPLIT_MIN_ROW elements. The last bound is measured: on the H200
  (`gpu_rows.py` plans table) 64 rows of 32000 or 32001 ran 1.05x to 3.4x faster in one unrolled pass
  than split 8 ways (the second pass and the partials cost more than the idle multiprocessors), while
  8 rows of 262144 or one of 2**20 need the split to fill the GPU (split, they ran at 2.9x and 7.3x
  torch's speed).
  Splits: enough to reach about SPLIT_WORKGROUPS workgroups, at most one per
  SPLIT_CHUNK elements (a chunk is then about one unrolled step of each invocation, or more), within the
  adapter's grid limit. SPLIT_WORKGROUPS is 1024: 4 to 8 workgroups of 256 per multiprocessor on a
  128- to 132-SM GPU, more than smaller GPUs need (a split launch costs one more dispatch and a pair per
  chunk, little against a long row).

RUMUS_WGPU_ROW_SPLIT_WORKGROUPS=N sets the split target (0: never split), for an A/B on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from rumus_contracts import config

from .reduce import SPLIT_CHUNK, pow2_ceil, pow2_floor

SPLIT_TARGET = "RUMUS_WGPU_ROW_SPLIT_WORKGROUPS"  # the split launch's target workgroup count (0: no split)
LOADS_PER_INVOCATION = 4  # enough loads in flight per invocation, few invocations idle in the merge
UNROLL = 4  # loads an invocation issues before folding them
SPLIT_WORKGROUPS = 1024  # a split launch aims for about this many workgroups
SPLIT_MIN_ROW = 1 << 16  # shorter rows stay whole (measured: see the module doc)
WORKGROUP = 256  # invocations per workgroup of the row kernels (shaders/softmax.wgsl)


@dataclass(frozen=True)
class RowPlan:
    group: int  # invocations per row: a power of two, 1..WORKGROUP
    workgroups: int  # workgroups of the one-pass launch (grid x * y): rows / (WORKGROUP / group)
    splits: int  # chunks per row over grid z; 1: one pass writes the rows
    chunk: int  # elements per chunk (a multiple of the load width); the row length when not split
    unroll: int  # loads per invocation in flight per step of a row walk


def split_target() -> int:
    return config.integer(SPLIT_TARGET)


def plan_key() -> int:
    """What a cached launch depends on besides the operands' layouts."""
    return split_target()


def group_for(rows: int, rlen: int, per: int, outer_strided: bool) -> int:
    """Invocations per row: about LOADS_PER_INVOCATION loads each (`per` elements a load), a power of two
    up to WORKGROUP; over an outer dim with many rows (outer_strided), small groups, so neighbouring
    invocations read neighbouring rows."""
    loads = (rlen + per - 1) // per
    t = min(WORKGROUP, pow2_ceil((loads + LOADS_PER_INVOCATION - 1) // LOADS_PER_INVOCATION))
    if outer_strided and rows >= 2048:
        t = max(1, min(t, pow2_floor(65536 // rows)))
    return t


def plan_rows(rows: int, rlen: int, per: int, outer_strided: bool, max_groups: int,
              target: int | None = None) -> RowPlan:
    """The launch of `rows` rows of `rlen` elements, `per` elements a load (4: vec4, 1: scalar), on an
    adapter whose grid holds at most `max_groups` workgroups a dimension. target defaults to the
    environment (RUMUS_WGPU_ROW_SPLIT_WORKGROUPS)."""
    target = split_target() if target is None else target
    t = group_for(rows, rlen, per, outer_strided)
    workgroups = (rows + WORKGROUP // t - 1) // (WORKGROUP // t)
    splits = 1
    long_enough = rlen > 2 * SPLIT_CHUNK and rlen >= SPLIT_MIN_ROW
    if t == WORKGROUP and workgroups < target // 4 and long_enough:
        splits = min((rlen + SPLIT_CHUNK - 1) // SPLIT_CHUNK, max(1, target // workgroups), max_groups)
    chunk = (rlen + splits - 1) // splits
    chunk = (chunk + per - 1) // per * per
    splits = (rlen + chunk - 1) // chunk  # rounding the chunk up can leave the last split empty: drop it
    return RowPlan(t, workgroups, splits, chunk, UNROLL)
