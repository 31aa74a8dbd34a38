"""Plumbing shared by the nn kernels (conv, pool, norm, dropout): sectioned WGSL sources, uniform
packing and dispatch over a 2-D grid of workgroups.

An nn shader file holds common code (config struct, helpers) followed by sections that each start
with a line `//// <name>` and declare their own bindings and `main`: a program is the common part
plus the sections it names, so one file serves kernels with different binding sets. Code that several
shader files share lives in files of its own (`grid`: the launch and `main`, `exact_div`,
`dropout_hash`), put in front by `include`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import cache
from typing import Any

from rumus_contracts import DType

from .layout import WG, grid
from .pipelines import shader_source, wgsl_scalar, with_scalar

SECTION = "\n//// "


@cache
def split_sections(name: str) -> tuple[str, dict[str, str]]:
    """shaders/<name>.wgsl as (its common part, {section name: section text})."""
    common, *parts = shader_source(name).split(SECTION)
    found = {}
    for part in parts:
        head, _, body = part.partition("\n")
        found[head.strip()] = body
    return common, found


def source(name: str, sections: str, dtype: DType, include: tuple[str, ...] = ()) -> str:
    """The `include`d shader files, then shaders/<name>.wgsl: the common part, then the sections named
    in `sections` ("a+b" for several: helpers that use a section's bindings live in sections of their
    own), with `scalar` set for dtype."""
    common, found = split_sections(name)
    missing = [s for s in sections.split("+") if s not in found]
    if missing:
        raise KeyError(f"shaders/{name}.wgsl has no section {missing[0]!r}")
    parts = [*(shader_source(n) for n in include), common, *(found[s] for s in sections.split("+"))]
    return with_scalar("\n".join(parts), wgsl_scalar(dtype))


def pack(values: Sequence[int | float]) -> bytes:
    """32-bit words: ints as u32 (negative ones two's complement), floats as f32."""
    out = bytearray()
    for v in values:
        if isinstance(v, float):
            out += struct.pack("<f", v)
        else:
            out += struct.pack("<I", int(v) & 0xFFFFFFFF)
    return bytes(out)


def dispatch(dev: Any, name: str, sections: str, dtype: DType, buffers: Sequence[Any], words: Sequence[int | float],
             count: int, per_group: int = WG, include: tuple[str, ...] = ()) -> None:
    """Run `sections` of shaders/<name>.wgsl (after the `include`d files) over `count` items,
    `per_group` items per workgroup.

    The uniform starts with (count, workgroups per grid row); the shader's item index is
    (wid.y * gx + wid.x) * per_group + (its place in the workgroup): shaders/grid.wgsl's `item`.
    """
    if count <= 0:
        return
    prog = dev.programs.get(("nn", name, sections, dtype.name, include),
                            lambda: source(name, sections, dtype, include))
    x, y, _ = grid((count + per_group - 1) // per_group, dev.max_groups)
    dev.recorder.dispatch(prog, list(buffers), pack([count, x, *words]), (x, y, 1))
