"""Replaying a host region (an optimizer step) without dispatching its kernels one by one.

The region's Python runs again on every replay — it advances step counts and reads the scheduler's
learning rate — but with a `Prober` in the dispatcher's capture slot: each op call is matched to the
kernel the region launched during the capture and only refreshes that kernel's attributes (and the
0-d constants made from Python numbers, such as a bias-corrected step size); it returns the captured
outputs instead of dispatching. When the region returns, the matched kernels run in order.

If a call does not match (another op, other tensors) or the region reads values, the prober first runs
the kernels matched so far — what eager execution would have done up to there, so the captured outputs
it handed out now hold the right values — and lets the rest of the region dispatch eagerly.
"""

from __future__ import annotations

import threading
from typing import Any

from rumus_contracts import TensorArg

from ..tensor import Tensor
from .capture import HostCall


class Prober:
    def __init__(self, host: HostCall) -> None:
        self.host = host
        self._probing = True  # False once the region fell back to eager dispatch
        self.thread = threading.get_ident()
        self.k = 0
        self.pending: list[tuple[Any, list[TensorArg], dict[str, Any]]] = []

    @property
    def probing(self) -> bool:
        """Read by the dispatcher on every op: only the replaying thread's ops are probed."""
        return self._probing and threading.get_ident() == self.thread

    @probing.setter
    def probing(self, value: bool) -> None:
        self._probing = value

    def probe(self, op: Any, args: tuple[Any, ...], attrs: dict[str, Any]) -> list[Tensor]:
        from .._dispatch import scalar_tensor
        sub = self.host.sub[self.k] if self.k < len(self.host.sub) else None
        if sub is None or sub.call.schema is None or sub.call.name != op.name or len(args) != len(sub.inputs):
            return self._fall_back(op, args, attrs)
        ins = sub.call.ins
        for i, (a, rec) in enumerate(zip(args, sub.inputs)):
            if isinstance(a, Tensor):
                if a._storage.buffer is not rec._storage.buffer:
                    return self._fall_back(op, args, attrs)
            elif isinstance(a, (int, float)) and not rec.shape:  # a Python number: its 0-d constant
                if ins is sub.call.ins:
                    ins = list(ins)
                self.probing = False  # a new constant is made by a real fill (then cached)
                buf = scalar_tensor(a, rec.dtype, rec._storage.device)._storage.buffer
                self.probing = True
                old = ins[i]
                ins[i] = TensorArg(buf, old.shape, old.strides, old.offset, old.dtype)
            else:
                return self._fall_back(op, args, attrs)
        if not args:
            attrs = {k: v for k, v in attrs.items() if k != "device"}  # creation ops: the device is fixed
        bound = op.schema.bind_attrs(attrs) if attrs or op._has_attrs else attrs
        self.pending.append((sub.call, ins, bound))
        self.k += 1
        # what the eager in-place op would have done to autograd's counters (the recorded schema: flat for
        # a variadic op, whose args arrive spelled out)
        for i in sub.call.schema.mutates_idx:
            args[i]._storage.version += 1
        return list(sub.outputs)

    def _fall_back(self, op: Any, args: tuple[Any, ...], attrs: dict[str, Any]) -> list[Tensor]:
        self.finish()
        self.probing = False
        result: list[Tensor] = op._run(args, attrs)
        return result

    def finish(self) -> None:
        """Run the matched kernels (at the region's end, or before falling back to eager dispatch)."""
        for call, ins, attrs in self.pending:
            call.kernel(call.outs, ins, attrs)
        self.pending = []

    # the rest of the recorder interface, as the dispatcher and host regions call it
    def record(self, *args: Any) -> None:
        pass

    def record_direct(self, name: str, kernel: Any, outputs: list[Tensor], inputs: list[Tensor],
                      attrs: dict[str, Any]) -> bool:
        """copy_into / fill_ inside the region: deferred like a probed op when it matches (True)."""
        if not self.probing:
            return False
        sub = self.host.sub[self.k] if self.k < len(self.host.sub) else None
        if sub is None or sub.call.schema is not None or sub.call.name != name or any(
                a._storage.buffer is not r._storage.buffer for a, r in zip((*outputs, *inputs),
                                                                          (*sub.outputs, *sub.inputs))):
            self.finish()
            self.probing = False
            return False
        self.pending.append((sub.call, sub.call.ins, dict(attrs)))
        self.k += 1
        return True

    def host_call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return fn(*args, **kwargs)

    def host_read(self, what: str) -> None:
        if self.probing:  # the values it reads must be current: run what is pending, then go on eagerly
            self.finish()
            self.probing = False
