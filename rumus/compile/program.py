"""A captured call turned into a replayable program: kernel steps with buffer slots, and host calls.

Buffers fall in four kinds. *Input* slots take the storages of the new call's tensor arguments; *grad*
slots take a parameter's current `.grad` where the captured step accumulated into it; *output* slots get
a fresh buffer on every replay, for what the function returns (so results of earlier calls stay valid);
every other buffer — parameters, optimizer state, intermediates — is the captured one, reused as is
(parameters and optimizer state are updated in place, intermediates are rewritten before being read).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rumus_contracts import RumusError, TensorArg

from .._storage import Storage
from ..tensor import Tensor, make_tensor
from .. import _dispatch
from . import memory
from .host_replay import Prober
from .tape import taped
from .capture import Call, HostCall, Leaf, Recorder


@dataclass
class Step:
    kernel: Callable[..., Any]
    outs: list[TensorArg]
    ins: list[TensorArg]
    attrs: dict[str, Any]
    patches: list[tuple[int, int, int]]  # (0 = outs / 1 = ins, position, slot)
    seeded: bool  # has a `seed` attr drawn from the default generator: fresh on every replay
    label: str  # for debug printing: op name, shapes
    place: tuple[Any, Any] | None  # (backend, device) it runs on, for the launch tape (no Storage: memory.py
    # decides from storages' reachability which intermediates may share a buffer)
    launches: Callable[[list[Any]], None] | None = None  # its frozen launches (tape.py), once taken
    tape_tried: bool = False


@dataclass
class Host:
    call: HostCall


@dataclass
class LeafCheck:
    """Before the segment that first uses `leaf`: its .grad must be present iff it was at capture."""

    leaf: Leaf
    slot: int  # the grad slot bound to leaf.grad, or -1 when the capture saw no gradient


class Program:
    def __init__(self, rec: Recorder, inputs: Sequence[Tensor], outputs: Sequence[Any], seeds: dict[int, bool],
                 items: list[Any], keep: set[int], debug: bool = False, tape: bool = True) -> None:
        self.fn_name = rec.fn_name
        self.debug = debug
        slot_of: dict[int, int] = {}
        self.slot_storage: list[Storage] = []  # capture-time storage of each slot (device, dtype, numel)
        self.n_inputs = 0
        for t in inputs:
            self._slot(slot_of, t._storage)
        self.n_inputs = len(self.slot_storage)
        self.input_slot = [slot_of[id(t._storage.buffer)] for t in inputs]
        # accumulated gradients: bound to the parameter's .grad of the day, checked where the segment (the
        # kernels between two host regions; fusion never crosses one) that first uses the parameter starts
        segment_at = [0]
        for it in rec.items:
            segment_at.append(segment_at[-1] + isinstance(it, HostCall))
        self.checks: dict[int, list[LeafCheck]] = {}
        for leaf in rec.leaves.values():
            slot = -1 if leaf.grad_at_first_use is None else self._slot(slot_of, leaf.grad_at_first_use._storage)
            self.checks.setdefault(segment_at[leaf.first_use], []).append(LeafCheck(leaf, slot))
        self.first_fresh = len(self.slot_storage)
        born = _born(items)
        for t in outputs:  # returned tensors made by the step: a new buffer per replay
            if isinstance(t, Tensor) and id(t._storage.buffer) in born:
                self._slot(slot_of, t._storage)
        self.end_grads: list[tuple[Tensor, Tensor | None, int]] = []
        for leaf in rec.leaves.values():
            g = leaf.tensor.grad
            fresh = g is not None and leaf.grad_at_first_use is not None and id(g._storage.buffer) in born
            slot = self._slot(slot_of, g._storage) if g is not None and fresh else -1
            self.end_grads.append((leaf.tensor, g, slot))
        self.slot_of = slot_of
        self.outputs = outputs
        self.ext_written = _external_writes(items, born, slot_of)
        self.seeds = [s for s, dynamic in seeds.items() if dynamic]
        self.items: list[Step | Host | tuple[int, list[LeafCheck]]] = []
        segment = 0
        for it in items:
            if segment in self.checks:
                self.items.append((segment, self.checks.pop(segment)))
            if isinstance(it, HostCall):
                self.items.append(Host(it))
                segment += 1
            else:
                self.items.append(self._step(it, slot_of, seeds))
        for segment, checks in self.checks.items():  # parameters first used after the last kernel
            self.items.append((segment, checks))
        self.n_kernels = sum(isinstance(s, Step) for s in self.items)
        own = [s for c in items if isinstance(c, Call) and not c.inplace for s in c.writes if id(s.buffer) in born]
        self.memory: dict[int, memory.Candidate] | None = memory.candidates(own, set(slot_of) | keep)
        self.memory_bytes = (0, 0)  # (intermediates' bytes, after the plan), known after the first replay
        self.n_host_kernels = rec.host_kernels
        self.tape = tape  # replay captured kernels from their launches where the backend can (tape.py)

    def _slot(self, slot_of: dict[int, int], storage: Storage) -> int:
        key = id(storage.buffer)
        if key not in slot_of:
            slot_of[key] = len(self.slot_storage)
            self.slot_storage.append(storage)
        return slot_of[key]

    @staticmethod
    def _step(c: Any, slot_of: dict[int, int], seeds: dict[int, bool]) -> Step:
        patches = [(w, i, slot_of[id(a.buffer)]) for w, args in ((0, c.outs), (1, c.ins))
                   for i, a in enumerate(args) if id(a.buffer) in slot_of]
        seed = c.attrs.get("seed")
        seeded = isinstance(seed, int) and seeds.get(seed, False)
        shapes = ", ".join(str(list(a.shape)) for a in c.ins)
        st = (c.writes or c.reads or [None])[0]
        place = None if st is None else (st.backend, st.device)
        return Step(c.kernel, c.outs, c.ins, c.attrs, patches, seeded, f"{c.name}({shapes})", place)

    # ---- replay ---------------------------------------------------------------------------------------
    def run(self, inputs: Sequence[Tensor]) -> list[Any] | None:
        """Replay with new inputs; None when a gradient precondition fails before anything ran (the
        caller captures again)."""
        if self.memory is not None:  # planned at the first replay: the capture's graph is gone by then
            self.memory_bytes = memory.plan([s for s in self.items if isinstance(s, Step)], self.memory)
            self.memory = None
            if self.debug:
                print(f"rm.compile({self.fn_name}): memory plan: intermediates {self.memory_bytes[0]} bytes -> "
                      f"{self.memory_bytes[1]} bytes")
        bufs: list[Any] = [None] * len(self.slot_storage)
        storages: list[Storage | None] = [None] * len(self.slot_storage)
        for t, slot in zip(inputs, self.input_slot):
            bufs[slot] = t._storage.buffer
            storages[slot] = t._storage
        for slot in range(self.first_fresh, len(self.slot_storage)):
            s = self.slot_storage[slot]
            st = storages[slot] = Storage(s.backend.allocate(s.device, s.numel, s.dtype), s.device, s.dtype,
                                          s.backend, s.numel)
            bufs[slot] = st.buffer
        seed_map: dict[int, int] = {}
        if self.seeds:
            from ..nn._functional_act import next_seed
            seed_map = {s: next_seed() for s in self.seeds}
        started = False
        for item in self.items:
            if type(item) is Step:
                started = True
                if item.launches is not None:
                    item.launches(bufs)
                    continue
                if item.patches:
                    outs, ins = list(item.outs), list(item.ins)
                    for which, pos, slot in item.patches:
                        lst = outs if which == 0 else ins
                        a = lst[pos]
                        lst[pos] = TensorArg(bufs[slot], a.shape, a.strides, a.offset, a.dtype)
                else:
                    outs, ins = item.outs, item.ins
                attrs = item.attrs if not item.seeded else {**item.attrs, "seed": seed_map[item.attrs["seed"]]}
                if item.tape_tried or item.seeded or item.place is None or not self.tape:
                    item.kernel(outs, ins, attrs)
                else:  # the first replay: note its launches, issued directly from then on
                    item.tape_tried = True
                    item.launches = taped(*item.place, functools.partial(item.kernel, outs, ins, attrs), bufs,
                                          [*item.outs, *item.ins],
                                          {p if w == 0 else len(item.outs) + p for w, p, _ in item.patches})
            elif type(item) is Host:
                started = True
                for leaf, g in item.call.grads:  # as at the capture, over this replay's buffers
                    leaf.grad = self._output(g, storages)
                _run_host(item.call)
            elif isinstance(item, tuple):
                if not self._bind_grads(item[1], bufs, storages):
                    if not started:
                        return None
                    raise RumusError(f"rm.compile({self.fn_name}): a parameter's .grad was "
                                     f"{'set' if item[1][0].slot < 0 else 'None'} after a host region where the "
                                     f"captured call had the opposite; keep gradient handling the same on every "
                                     f"call")
        for s in self.ext_written:
            s.version += 1
        for leaf_t, g, slot in self.end_grads:
            if slot >= 0:
                fresh_storage = storages[slot]
                assert g is not None and fresh_storage is not None
                g = make_tensor(fresh_storage, g.shape, g._strides, g._offset)
            leaf_t.grad = g
        return [self._output(o, storages) for o in self.outputs]

    def _bind_grads(self, checks: list[LeafCheck], bufs: list[Any], storages: list[Storage | None]) -> bool:
        for c in checks:
            g = c.leaf.tensor.grad
            if (g is None) != (c.slot < 0):
                return False
            if g is not None:
                want = c.leaf.grad_at_first_use
                assert want is not None
                if (g.shape, g._strides, g._offset, g.dtype) != (want.shape, want._strides, want._offset, want.dtype):
                    return False
                bufs[c.slot] = g._storage.buffer
                storages[c.slot] = g._storage
        return True

    def _output(self, o: Any, storages: list[Storage | None]) -> Any:
        if not isinstance(o, Tensor):
            return o
        slot = self.slot_of.get(id(o._storage.buffer))
        if slot is None:
            return o  # a parameter or a constant: the live tensor itself
        st = storages[slot]
        assert st is not None
        return make_tensor(st, o.shape, o._strides, o._offset)

    def describe(self) -> str:
        lines = [f"rm.compile({self.fn_name}): {self.n_kernels} kernels, "
                 f"{sum(isinstance(i, Host) for i in self.items)} host regions ({self.n_host_kernels} kernels), "
                 f"{len(self.slot_storage)} slots"]
        for it in self.items:
            if isinstance(it, Step):
                lines.append(f"  kernel {it.label}{'  [fresh seed]' if it.seeded else ''}")
            elif isinstance(it, Host):
                lines.append(f"  host   {getattr(it.call.fn, '__qualname__', it.call.fn)}")
        return "\n".join(lines)


def _run_host(call: HostCall) -> None:
    """A host region: its Python again, its kernels replayed by a Prober (or dispatched eagerly)."""
    if call.eager or not call.sub:
        call.fn(*call.args, **call.kwargs)
        return
    prober = Prober(call)
    _dispatch._capture = prober
    try:
        call.fn(*call.args, **call.kwargs)
    finally:
        _dispatch._capture = None
    prober.finish()


def _born(items: list[Any]) -> set[int]:
    """Buffers first written as fresh outputs by a captured kernel (made by the step itself)."""
    seen: set[int] = set()
    born: set[int] = set()
    for c in items:
        if not isinstance(c, Call):
            continue
        for s in c.reads:
            seen.add(id(s.buffer))
        if not c.inplace:
            for s in c.writes:
                if id(s.buffer) not in seen:
                    born.add(id(s.buffer))
                    seen.add(id(s.buffer))
    return born


def _external_writes(items: list[Any], born: set[int], slot_of: dict[int, int]) -> list[Storage]:
    """Storages from outside the step that its kernels update in place (their version must move)."""
    out: dict[int, Storage] = {}
    for c in items:
        if isinstance(c, Call):
            for s in c.writes:
                if id(s.buffer) not in born and id(s.buffer) not in slot_of:
                    out[id(s.buffer)] = s
    return list(out.values())
