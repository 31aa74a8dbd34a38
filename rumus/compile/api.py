"""`rm.compile(fn)`: run once eagerly, capture the second call, replay later calls without Python.

Per signature (see signature.py): call 1 runs eagerly (one-time setup such as optimizer state happens
there), call 2 runs eagerly while the dispatcher records its kernels, calls 3+ replay the recording:
new argument buffers swapped in, host regions (optimizer/scheduler steps) re-run their Python while
their kernels replay (host_replay.py), fresh dropout seeds, no dispatch and no autograd graph.
Programs live in an LRU of `cache_size` signatures.

Python numbers computed inside the function, and tensors it builds from host data, are constants of a
capture (as in tinygrad's TinyJit): pass values that change as arguments. Reading tensor values inside
(`.item()`, `bool(t)`, `.numpy()`) raises while capturing, naming the line. `RUMUS_COMPILE=0` (read
when `rm.compile` wraps the function) turns compilation off. Replayed results carry no autograd
history: call backward() inside the function.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from rumus_contracts import RumusError, config

from .. import _dispatch
from ..autograd import graph
from ..tensor import Tensor
from .capture import HostCall, Recorder
from .fusion import fuse
from .program import Program
from .rng import classify, snapshot
from .signature import _Leaf, flatten, signature, unflatten


class _Entry:
    __slots__ = ("calls", "program", "out_tree")

    def __init__(self) -> None:
        self.calls = 0
        self.program: Program | None = None
        self.out_tree: Any = None


class Compiled:
    def __init__(self, fn: Callable[..., Any], debug: bool = False, cache_size: int = 8, fuse: bool = True,
                 fuse_rows: bool = True) -> None:
        self.fn = fn
        self.debug = debug
        self.fuse = fuse
        self.fuse_rows = fuse_rows
        self.cache_size = cache_size
        self.name = getattr(fn, "__qualname__", repr(fn))
        self._cache: OrderedDict[Hashable, _Entry] = OrderedDict()
        self.off = not config.flag("RUMUS_COMPILE")  # read when the function is wrapped
        # RUMUS_COMPILE_TAPE=0: replay every kernel through its Python wrapper (no launch tapes, tape.py)
        self.tape = config.flag("RUMUS_COMPILE_TAPE")
        self.captures = 0  # how many times a call was captured (tests and debugging read it)
        self.replays = 0
        functools.update_wrapper(self, fn)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self.__call__, obj)

    def reset(self) -> None:
        """Forget every capture (e.g. after replacing a model's parameters)."""
        self._cache.clear()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.off or _dispatch._capture is not None:
            return self.fn(*args, **kwargs)  # off, or called inside another capture: plain Python
        key, tensors = signature(self.name, args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = _Entry()
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        entry.calls += 1
        if entry.program is not None:
            outs = entry.program.run(tensors)
            if outs is not None:
                self.replays += 1
                return unflatten(entry.out_tree, outs)
        elif entry.calls == 1:
            return self.fn(*args, **kwargs)  # warm-up: lazily created state is made here, eagerly
        return self._capture(entry, tensors, args, kwargs)

    def _capture(self, entry: _Entry, tensors: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        rec = Recorder(self.name)
        before = snapshot()
        _dispatch._capture, graph.held_by_capture = rec, rec.held_refs
        try:
            result = self.fn(*args, **kwargs)
        finally:
            _dispatch._capture, graph.held_by_capture = None, None
        seeds = classify(self.name, before, rec.seeds)
        outputs: list[Any] = []
        entry.out_tree = flatten(result, outputs)
        _refuse_python_results(self.name, entry.out_tree)
        report: list[str] = []
        keep = _escaping(rec, outputs)
        items = fuse(rec.items, keep, self.name, report, self.fuse_rows) if self.fuse else rec.items
        entry.program = Program(rec, tensors, outputs, seeds, items, keep, self.debug, self.tape)
        self.captures += 1
        if self.debug:
            print("\n".join([entry.program.describe(), *report]))
        return result

    def stats(self) -> dict[str, int]:
        """Captured kernels per replay of the most recently used signature, the kernels its host regions
        (optimizer steps) dispatch eagerly on each replay, and the counters."""
        last = next(reversed(self._cache.values()), None)
        program = last.program if last is not None else None
        return {"kernels": program.n_kernels if program else 0,
                "host_kernels": program.n_host_kernels if program else 0,
                "captures": self.captures, "replays": self.replays}


def _refuse_python_results(name: str, tree: Any) -> None:
    """A replay returns what the capture returned for anything that is not a tensor: refuse values."""
    if isinstance(tree, (tuple, list)):
        for t in tree:
            _refuse_python_results(name, t)
    elif isinstance(tree, dict):
        for t in tree.values():
            _refuse_python_results(name, t)
    elif tree is not None and not isinstance(tree, _Leaf):
        raise RumusError(f"rm.compile({name}): the function returns a Python value ({type(tree).__name__} "
                         f"{tree!r:.40}); a replay runs no Python and would return it unchanged. Return tensors "
                         f"(and None) only")


def _escaping(rec: Recorder, outputs: list[Any]) -> set[int]:
    """Buffers seen outside the kernels: results, gradients, and tensors handed to host regions."""
    seen: list[Any] = [o for o in outputs if isinstance(o, Tensor)]
    seen += [leaf.tensor.grad for leaf in rec.leaves.values() if leaf.tensor.grad is not None]
    for item in rec.items:
        if isinstance(item, HostCall):
            seen += [g for _, g in item.grads if g is not None]
            flatten((item.args, item.kwargs), seen)
    return {id(t._storage.buffer) for t in seen}


def compile(fn: Callable[..., Any] | None = None, *, debug: bool = False, cache_size: int = 8,
            fuse: bool = True, fuse_rows: bool = True) -> Any:
    """Compile `fn` (a function of tensors, e.g. a whole training step); usable as `@rm.compile` or
    `@rm.compile(debug=True)`. See the module docstring for what is captured and what is refused.
    fuse=False runs every captured kernel as it was; fuse_rows=False fuses elementwise chains only, not
    into the row ops they feed (row_fusion.py)."""
    if cache_size < 1:
        raise RumusError(f"rm.compile: cache_size must be >= 1, got {cache_size}")
    if fn is None:
        return lambda f: Compiled(f, debug, cache_size, fuse, fuse_rows)
    if not callable(fn):
        raise RumusError(f"rm.compile expects a function, got {type(fn).__name__}")
    return Compiled(fn, debug, cache_size, fuse, fuse_rows)
