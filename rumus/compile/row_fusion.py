"""Fusion into row ops: an elementwise run that feeds a row op of the row-op table along the last dim
(softmax, log_softmax, layer_norm, rms_norm) becomes one kernel with it.

The row op's input x is then the run's last step, computed per element inside the row kernel (the
backend's `compile_fused_row`, rumus_contracts.backend.FusedRowProgram), so the tensor x is never
stored unless something else reads it: a norm's backward reads its input, so under autograd x is
written by the same kernel (one pass instead of two); a softmax's backward reads only its output, so
`softmax(q @ k.T * scale + mask)` never stores the scaled, masked scores. Steps of the run that other
kernels read are written out as in an elementwise fusion. A backend that cannot take the chain (an op
it cannot render inside a row, a layout it refuses) leaves both as they were.
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import KernelNotFound, RumusError
from rumus_contracts.backend import FusedRowProgram
from rumus_contracts.ops.expr_lang import Unsupported
from rumus_contracts.ops.row_ops import ROW_OPS

from . import fusion as _fusion
from .capture import Call


def row_call(c: Any) -> bool:
    """Whether c is a forward row op over the last dim whose operands fit a FusedRowProgram."""
    if not (isinstance(c, Call) and c.name in ROW_OPS and not c.inplace and len(c.outs) == 1):
        return False
    op = ROW_OPS[c.name]
    if len(op.inputs) != 1 or len(c.ins) != 1 + len(op.columns):
        return False
    x, cols = c.ins[0], c.ins[1:]
    if not x.shape or not x.dtype.is_floating or any(a.dtype != x.dtype for a in (*c.ins, *c.outs)):
        return False
    if cols:  # a norm over the last dim only (weight of that length, contiguous as its schema makes it)
        return all(a.shape == (x.shape[-1],) and a.strides == (1,) for a in cols)
    return int(c.attrs.get("dim", -1)) % len(x.shape) == len(x.shape) - 1


def fuse_into_row(items: list[Any], run: list[int], i: int, readers: dict[int, set[int]], keep: set[int],
                  fn_name: str, report: list[str] | None, out: list[Any]) -> bool:
    """Fuse the tail of `run` into the row op items[i] when the run's last result is its input x; on
    success the run's other ops and the fused kernel are appended to `out`."""
    c = items[i]
    if not row_call(c):
        return False
    x = c.ins[0]
    last = items[run[-1]].outs[0]
    if last.buffer is not x.buffer or _fusion._layout(last) != _fusion._layout(x):
        return False
    start = len(run)  # the tail the backend renders (an op it cannot render stays its own kernel)
    while start > 0 and _fusion._renders(items[run[start - 1]]):
        start -= 1
    part = run[start:]
    if not part:
        return False
    cols = c.ins[1:]
    ch = _fusion.chain(items, part, readers, keep, {*part, i}, False)
    if any(id(a.buffer) in ch.step_of for a in cols):
        return False  # a column operand made by the chain: it must exist whole before the rows start
    op = ROW_OPS[c.name]
    program = FusedRowProgram(ch.program(), c.name, tuple(float(c.attrs.get(p, d)) for p, d in op.params))
    backend = c.writes[0].backend
    compile_row = getattr(backend, "compile_fused_row", None)
    if compile_row is None:
        return False
    names = ", ".join(k.name for k in ch.calls)
    try:
        kernel = compile_row(program)
    except (Unsupported, KernelNotFound) as exc:
        if report is not None:
            report.append(f"  not fused into {c.name} ({exc}): {names}")
        return False
    except Exception as exc:  # a compiler that fails is a problem to report, not a reason to give wrong answers
        raise RumusError(f"rm.compile({fn_name}): the {backend.name} backend failed to compile a fused {c.name} "
                         f"kernel for {names}: {exc}; rm.compile(fn, fuse=False) runs unfused") from exc
    _fusion._flush(items, run[:start], readers, keep, fn_name, report, out)
    written = ch.written
    outs = [c.outs[0], *(ch.calls[k].outs[0] for k in written)]
    writes = [c.writes[0], *(ch.calls[k].writes[0] for k in written)]
    name = "fused_row[" + ",".join([*(k.name for k in ch.calls), c.name]) + "]"
    if report is not None:
        report.append(f"  {name}: {len(ch.calls)} ops into {c.name} -> 1 kernel, {len(ch.inputs)} inputs, "
                      f"{len(written)} chain values written, {len(ch.calls) - len(written)} never allocated")
    out.append(Call(name, c.schema, kernel, outs, [*ch.inputs, *cols], {}, ch.reads([c]), writes, False))
    return True
