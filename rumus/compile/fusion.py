"""Fusion: runs of elementwise table ops in a captured stream become one generated kernel each.

A run is consecutive kernel calls of ops from the expression table, all with the same output shape and
dtype, where each call reads earlier results of the run with exactly the layout they were written in
(so a value can stay in a register). A result is written out only when something outside the run
needs it (a later kernel, a host region, the function's results, a gradient); the others are never
allocated on replay. The backend renders the kernel from the same expressions its unfused kernels
come from (`compile_fused`), so a fused chain computes what the unfused one did, op for op. A run
that feeds a row op (softmax, a norm) fuses into it instead (row_fusion.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rumus_contracts import KernelNotFound, RumusError, TensorArg
from rumus_contracts.backend import FusedProgram
from rumus_contracts.ops.expr_lang import Unsupported
from rumus_contracts.ops.expressions import all_kernels

from . import row_fusion
from .capture import Call

_TABLE = all_kernels()
_FUSABLE = {name for name, e in _TABLE.items() if e.result == "same"}


def _layout(a: TensorArg) -> tuple[Any, ...]:
    return (a.shape, a.strides, a.offset, a.dtype)


def fusable(c: Any) -> bool:
    return (isinstance(c, Call) and c.name in _FUSABLE and not c.inplace and len(c.outs) == 1
            and c.outs[0].dtype.is_floating and all(a.dtype == c.outs[0].dtype for a in c.ins))


def fuse(items: list[Any], keep: set[int], fn_name: str, report: list[str] | None = None,
         rows: bool = True) -> list[Any]:
    """`items` with fusable runs replaced by fused Calls. `keep`: buffer ids that must be written out
    (function results, gradients host regions or the caller see). rows: also fuse a run into the row
    op it feeds (row_fusion.py)."""
    readers: dict[int, set[int]] = {}
    for i, c in enumerate(items):
        if isinstance(c, Call):
            for a in c.ins:
                readers.setdefault(id(a.buffer), set()).add(i)
    out: list[Any] = []
    run: list[int] = []
    for i, c in enumerate(items):
        if fusable(c) and (not run or _extends(items, run, c)):
            run.append(i)
            continue
        if run and rows and row_fusion.fuse_into_row(items, run, i, readers, keep, fn_name, report, out):
            run = []
            continue
        _flush(items, run, readers, keep, fn_name, report, out)
        run = [i] if fusable(c) else []
        if not run:
            out.append(c)
    _flush(items, run, readers, keep, fn_name, report, out)
    return out


def _flush(items: list[Any], run: list[int], readers: dict[int, set[int]], keep: set[int], fn_name: str,
           report: list[str] | None, out: list[Any]) -> None:
    part: list[int] = []
    for i in run:  # an op the backend cannot render splits the run (cheap: kernels build on first use)
        if _renders(items[i]):
            part.append(i)
            continue
        _emit(items, part, readers, keep, fn_name, report, out)
        out.append(items[i])
        part = []
    _emit(items, part, readers, keep, fn_name, report, out)


def _emit(items: list[Any], part: list[int], readers: dict[int, set[int]], keep: set[int], fn_name: str,
          report: list[str] | None, out: list[Any]) -> None:
    """Fuse `part`; a backend that cannot take it whole (too many operands, an op it cannot express)
    gets its two halves, down to single unfused kernels. (Module-level functions, not closures: a
    recursive closure is a reference cycle that would keep the capture's buffers alive.)"""
    fused = _fuse_run(items, part, readers, keep, fn_name, report) if len(part) >= 2 else None
    if fused is not None:
        out.append(fused)
    elif len(part) >= 4:
        _emit(items, part[:len(part) // 2], readers, keep, fn_name, report, out)
        _emit(items, part[len(part) // 2:], readers, keep, fn_name, report, out)
    else:
        out.extend(items[i] for i in part)


_RENDERS: dict[tuple[str, str, Any], bool] = {}


def _renders(c: Call) -> bool:
    """Whether c's backend can put c's op into a fused kernel at all."""
    backend = c.writes[0].backend
    key = (backend.name, c.name, c.outs[0].dtype)
    hit = _RENDERS.get(key)
    if hit is None:
        compile_fused = getattr(backend, "compile_fused", None)
        n = len(c.ins)
        program = FusedProgram(c.outs[0].dtype, n, ((c.name, tuple(range(n)), tuple(
            float(c.attrs[p]) for p in _TABLE[c.name].params)),), (0,))
        try:
            hit = compile_fused is not None and compile_fused(program) is not None
        except (Unsupported, KernelNotFound):
            hit = False
        _RENDERS[key] = hit
    return hit


def _extends(items: list[Any], run: list[int], c: Call) -> bool:
    first = items[run[0]].outs[0]
    o = c.outs[0]
    if o.shape != first.shape or o.dtype != first.dtype:
        return False
    written = {id(items[i].outs[0].buffer): items[i].outs[0] for i in run}
    for a in c.ins:
        w = written.get(id(a.buffer))
        if w is not None and _layout(w) != _layout(a):
            return False  # reads a result of the run through another view: needs it in memory first
    return True


@dataclass
class Chain:
    """A run as a FusedProgram's parts: its operands from outside, its steps, the steps written out."""

    calls: list[Call]
    inputs: list[TensorArg]
    steps: tuple[tuple[str, tuple[int, ...], tuple[float, ...]], ...]
    written: list[int]
    step_of: dict[int, int]  # buffer id -> step that wrote it

    def program(self) -> FusedProgram:
        return FusedProgram(self.calls[0].outs[0].dtype, len(self.inputs), self.steps, tuple(self.written))

    def reads(self, more: Sequence[Any] = ()) -> list[Any]:
        """Storages read from outside the chain (by its calls, and by `more` calls fused with it)."""
        return _dedup([s for c in [*self.calls, *more] for s in c.reads if id(s.buffer) not in self.step_of])


def chain(items: list[Any], run: list[int], readers: dict[int, set[int]], keep: set[int],
          members: set[int], last_written: bool) -> Chain:
    """The run's chain. A step is written out when a kernel outside `members` reads it or it is kept
    (and the last one always, if `last_written`)."""
    calls: list[Call] = [items[i] for i in run]
    step_of: dict[int, int] = {}
    inputs: list[TensorArg] = []
    input_of: dict[tuple[Any, ...], int] = {}
    raw_steps: list[tuple[str, list[tuple[bool, int]], tuple[float, ...]]] = []
    for k, c in enumerate(calls):
        refs: list[tuple[bool, int]] = []
        for a in c.ins:
            s = step_of.get(id(a.buffer))
            if s is not None:
                refs.append((True, s))
                continue
            key = (id(a.buffer), *_layout(a))
            if key not in input_of:
                input_of[key] = len(inputs)
                inputs.append(a)
            refs.append((False, input_of[key]))
        params = tuple(float(c.attrs[p]) for p in _TABLE[c.name].params)
        raw_steps.append((c.name, refs, params))
        step_of[id(c.outs[0].buffer)] = k
    n_in = len(inputs)
    steps = tuple((name, tuple(r + n_in if is_step else r for is_step, r in refs), params)
                  for name, refs, params in raw_steps)
    written = [k for k, c in enumerate(calls)
               if (last_written and k == len(calls) - 1) or id(c.outs[0].buffer) in keep
               or readers.get(id(c.outs[0].buffer), set()) - members]
    return Chain(calls, inputs, steps, written, step_of)


def _fuse_run(items: list[Any], run: list[int], readers: dict[int, set[int]], keep: set[int], fn_name: str,
              report: list[str] | None) -> Call | None:
    ch = chain(items, run, readers, keep, set(run), True)
    calls, written = ch.calls, ch.written
    program = ch.program()
    backend = calls[0].writes[0].backend
    compile_fused = getattr(backend, "compile_fused", None)
    if compile_fused is None:
        return None
    try:
        kernel = compile_fused(program)
    except (Unsupported, KernelNotFound) as exc:
        if report is not None:
            report.append(f"  not fused ({exc}): {', '.join(c.name for c in calls)}")
        return None
    except Exception as exc:  # a compiler that fails is a problem to report, not a reason to give wrong answers
        raise RumusError(f"rm.compile({fn_name}): the {backend.name} backend failed to compile a fused kernel for "
                         f"{', '.join(c.name for c in calls)}: {exc}; rm.compile(fn, fuse=False) runs unfused") from exc
    outs = [calls[k].outs[0] for k in written]
    name = "fused[" + ",".join(c.name for c in calls) + "]"
    if report is not None:
        report.append(f"  {name}: {len(calls)} ops -> 1 kernel, {len(ch.inputs)} inputs, {len(outs)} outputs "
                      f"written, {len(calls) - len(outs)} intermediates never allocated")
    writes = [calls[k].writes[0] for k in written]
    return Call(name, calls[0].schema, kernel, outs, ch.inputs, {}, ch.reads(), writes, False)


def _dedup(storages: Sequence[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    for s in storages:
        seen.setdefault(id(s.buffer), s)
    return list(seen.values())
