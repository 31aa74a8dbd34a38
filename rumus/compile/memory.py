"""The memory plan of a captured program: intermediates whose lifetimes do not overlap share one buffer.

Eager execution frees an intermediate when its last tensor dies and the allocator hands the memory to
the next one; a replay keeps every captured buffer, so without a plan a step would hold all of its
intermediates at once. The plan runs before the first replay (by then the capture call's autograd graph
is gone): an intermediate qualifies only if the step made it, nothing outside the kernels sees it (results,
gradients, host regions) and no tensor of it is still alive (so nobody can read it afterwards). Buffers
are shared only between intermediates of the same device, dtype and size, first-fit by first use; one
freed by step i is reused from step i + 1 on, so a kernel never reads and writes one buffer.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rumus_contracts import TensorArg

from .._storage import Storage


@dataclass
class Candidate:
    storage: weakref.ref[Storage]
    kind: tuple[Any, ...]  # (device, dtype, numel): buffers of one kind are interchangeable
    nbytes: int


def candidates(storages: Sequence[Storage], excluded: set[int]) -> dict[int, Candidate]:
    """Weak handles on the step's own buffers (by buffer id), minus the excluded ones."""
    out: dict[int, Candidate] = {}
    for s in storages:
        key = id(s.buffer)
        if key not in excluded and key not in out:
            out[key] = Candidate(weakref.ref(s), (s.device, s.dtype, s.numel), s.numel * s.dtype.itemsize)
    return out


def plan(steps: Sequence[Any], cands: dict[int, Candidate]) -> tuple[int, int]:
    """Rewrite the steps' TensorArgs so dead intermediates share buffers; (bytes before, bytes after)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    buffer_of: dict[int, Any] = {}
    for i, st in enumerate(steps):
        for a in (*st.outs, *st.ins):
            key = id(a.buffer)
            if key in cands:
                first.setdefault(key, i)
                last[key] = i
                buffer_of[key] = a.buffer
    dead = [k for k in first if cands[k].storage() is None]  # a live tensor could still be read: keep it
    dead.sort(key=lambda k: first[k])
    free: dict[tuple[Any, ...], list[tuple[int, Any]]] = {}  # kind -> [(free from step, buffer)]
    mapping: dict[int, Any] = {}
    before = sum(cands[k].nbytes for k in dead)
    after = 0
    for k in dead:
        pool = free.setdefault(cands[k].kind, [])
        reuse = next((j for j, (ready, _) in enumerate(pool) if ready <= first[k]), None)
        if reuse is None:
            buf = buffer_of[k]
            after += cands[k].nbytes
        else:
            buf = pool.pop(reuse)[1]
        mapping[k] = buf
        pool.append((last[k] + 1, buf))
    for st in steps:
        st.outs = [_moved(a, mapping) for a in st.outs]
        st.ins = [_moved(a, mapping) for a in st.ins]
    return before, after


def _moved(a: TensorArg, mapping: dict[int, Any]) -> TensorArg:
    buf = mapping.get(id(a.buffer))
    if buf is None or buf is a.buffer:
        return a
    return TensorArg(buf, a.shape, a.strides, a.offset, a.dtype)
