"""The recorder `rm.compile` installs in the dispatcher while it captures one call of a function.

Every kernel the dispatcher runs on the capturing thread is noted as a `Call` (kernel, its TensorArgs,
attrs) together with the storages it reads and writes, so the replay can later swap new buffers in.
Code marked as a host region (optimizer and scheduler steps, zero_grad: Python bookkeeping that must
advance on every call) runs eagerly and is noted as a `HostCall` instead of its kernels. Reading tensor
values on the host while capturing is refused: a replay cannot re-run Python that depends on data.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rumus_contracts import OpSchema, RumusError, TensorArg

from .._storage import Storage
from ..tensor import Tensor

_RUMUS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Call:
    """One recorded kernel launch."""

    name: str
    schema: OpSchema | None  # None: launched by the core outside the dispatcher
    kernel: Callable[..., Any]
    outs: list[TensorArg]
    ins: list[TensorArg]
    attrs: dict[str, Any]
    reads: list[Storage]
    writes: list[Storage]
    inplace: bool  # writes its inputs (an optimizer step, copy_): outputs are not fresh buffers


@dataclass
class SubCall:
    """A kernel a host region launched while captured, with the tensors it took and made (host_replay.py)."""

    call: Call
    inputs: list[Tensor]
    outputs: list[Tensor]


@dataclass
class HostCall:
    """A host region (e.g. `optimizer.step`) to run again on every replay, and the gradients its leaves
    held when it ran during the capture (restored before it runs, since the replay set none). `sub`: its
    kernels, replayed with refreshed attributes (host_replay.py) unless `eager` (it read values or
    launched a kernel outside the dispatcher: then it runs eagerly)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grads: list[tuple[Tensor, Tensor | None]] = field(default_factory=list)
    sub: list[SubCall] = field(default_factory=list)
    eager: bool = False


@dataclass
class Leaf:
    """A leaf tensor requiring grad that the function used (a parameter): its gradient when first used
    decides whether the step accumulates into it."""

    tensor: Tensor
    grad_at_first_use: Tensor | None
    first_use: int  # index into Recorder.items


class Recorder:
    probing = False  # the dispatcher asks; only host_replay.Prober says True

    def __init__(self, fn_name: str) -> None:
        self.fn_name = fn_name
        self.thread = threading.get_ident()
        self.items: list[Call | HostCall] = []
        self.leaves: dict[int, Leaf] = {}
        self.host_depth = 0
        self.host_born: set[int] = set()  # buffers a host region allocated: later calls must not read them
        self.seeds: list[int] = []  # dropout-style seeds in the order kernels first used them
        self.host_kernels = 0  # kernels host regions launched (they launch them again on every replay)
        self.held: dict[int, int] = {}  # id(storage) -> references the recorded Calls hold to it (held_refs)

    def held_refs(self, storage: Storage) -> int:
        """How many references to `storage` this recorder holds: autograd subtracts them when it asks whether
        anything else holds a gradient (graph._sole_owner), so a captured step keeps its gradients uncopied."""
        return self.held.get(id(storage), 0)

    def _note(self, call: Call) -> Call:
        held = self.held
        for st in call.reads + call.writes:
            held[id(st)] = held.get(id(st), 0) + 1
        return call

    # ---- called by the dispatcher -------------------------------------------------------------------
    def record(self, schema: OpSchema, kernel: Callable[..., Any], outs: list[TensorArg], ins: Sequence[TensorArg],
               attrs: dict[str, Any], inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        if threading.get_ident() != self.thread:
            return  # another thread's work is not part of this function
        if self.host_depth:
            self.host_kernels += 1
            if not schema.inplace:
                self.host_born.update(id(o._storage.buffer) for o in outputs)
            if schema.name == "fill" and not inputs and attrs.get("shape") == ():
                return  # a 0-d constant from a Python number: the replay's probe makes its own (host_replay.py)
            host = self.items[-1]
            assert isinstance(host, HostCall)
            writes = [o._storage for o in outputs] + [inputs[i]._storage for i in schema.mutates_idx]
            host.sub.append(SubCall(Call(schema.name, schema, kernel, list(outs), list(ins), dict(attrs),
                                         [t._storage for t in inputs], writes, bool(schema.inplace)),
                                    list(inputs), list(outputs)))
            return
        for t in inputs:
            base = t
            while base._base is not None:  # a parameter used through a view (Linear's weight.T)
                base = base._base
            if base._requires_grad and base._grad_fn is None and id(base) not in self.leaves:
                self.leaves[id(base)] = Leaf(base, base.grad, len(self.items))
            if id(t._storage.buffer) in self.host_born:
                raise RumusError(f"rm.compile({self.fn_name}): a kernel reads a tensor created inside a host region "
                                 f"(optimizer/scheduler step); compute it outside the host region instead")
        seed = attrs.get("seed")
        if isinstance(seed, int) and seed not in self.seeds:
            self.seeds.append(seed)
        writes = [o._storage for o in outputs] + [inputs[i]._storage for i in schema.mutates_idx]
        self.items.append(self._note(Call(schema.name, schema, kernel, list(outs), list(ins), dict(attrs),
                                          [t._storage for t in inputs], writes, bool(schema.inplace))))

    def record_direct(self, name: str, kernel: Callable[..., Any], outputs: Sequence[Tensor], inputs: Sequence[Tensor],
                      attrs: dict[str, Any]) -> bool:
        """A kernel the core launches without the dispatcher (copy_into, fill_), about to run on existing
        tensors; False: the caller runs it now (only host_replay.Prober defers one)."""
        if threading.get_ident() != self.thread:
            return False
        call = Call(name, None, kernel, [o._arg for o in outputs], [t._arg for t in inputs], dict(attrs),
                    [t._storage for t in inputs], [o._storage for o in outputs], True)
        if self.host_depth:
            self.host_kernels += 1
            host = self.items[-1]
            assert isinstance(host, HostCall)
            host.sub.append(SubCall(call, list(inputs), list(outputs)))
        else:
            self.items.append(self._note(call))
        return False

    def host_read(self, what: str) -> None:
        if threading.get_ident() != self.thread:
            return
        if self.host_depth:
            self._host_eager()
            return
        raise RumusError(f"rm.compile({self.fn_name}): {what} reads tensor values on the host at {_user_line()} "
                         f"while the function is captured; a replay runs only the captured kernels and cannot "
                         f"re-run Python that depends on data. Return the tensor and read it after the call, or "
                         f"leave this function uncompiled")

    def _host_eager(self) -> None:
        host = self.items[-1]
        assert isinstance(host, HostCall)
        host.eager = True

    # ---- host regions -------------------------------------------------------------------------------
    def host_call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if threading.get_ident() != self.thread or self.host_depth:
            return fn(*args, **kwargs)
        grads = [(leaf.tensor, leaf.tensor.grad) for leaf in self.leaves.values()]
        self.items.append(HostCall(fn, args, kwargs, grads))
        self.host_depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            self.host_depth -= 1


def _user_line() -> str:
    """file:line of the innermost frame outside the rumus package (the user's code that read data)."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_RUMUS_DIR + os.sep):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"
