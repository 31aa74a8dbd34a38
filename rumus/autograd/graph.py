"""The define-by-run graph: nodes hang off outputs; backward walks them in topological order (Kahn)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from sys import getrefcount as _refs
from typing import TYPE_CHECKING, Any

from rumus_contracts import AutogradError, ShapeError

from .._thread_state import autocast_state
from .grad_mode import state
from .hooks import run_grad_hooks, run_post_hooks

if TYPE_CHECKING:
    from ..tensor import Tensor

Formula = Callable[..., Sequence["Tensor | None"]]


class Context:
    """What a backward formula sees: the forward's inputs/outputs (version-checked), attrs, shapes."""

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def inputs(self) -> _Saved:
        """Saved inputs; each one is version-checked when it is read, so only what a formula uses counts."""
        return _Saved(self.node, self.node.saved_inputs, "input")

    @property
    def outputs(self) -> list[Tensor]:
        saved = self.node.saved_values(self.node.saved_outputs, "output")
        if state.enabled:  # create_graph: an output is a function of the inputs through this node, so a
            # formula using it must differentiate through it (PyTorch re-attaches saved outputs the same way)
            for i, t in enumerate(saved):
                saved[i] = a = t.detach()
                a._requires_grad, a._grad_fn, a._output_nr = True, self.node, i
        return saved

    @property
    def attrs(self) -> dict[str, Any]:
        return self.node.attrs

    @property
    def input_shapes(self) -> list[tuple[int, ...]]:
        return self.node.input_shapes

    @property
    def needs_input_grad(self) -> list[bool]:
        return [e is not None for e in self.node.edges]


class _Saved:
    __slots__ = ("node", "saved", "what")

    def __init__(self, node: Node, saved: list[tuple[Tensor, int]] | None, what: str) -> None:
        self.node, self.saved, self.what = node, saved, what

    def __getitem__(self, i: int) -> Tensor:
        return self.node.check_saved(self.saved, self.what, i)

    def __len__(self) -> int:
        return len(self.saved or ())

    def __iter__(self) -> Any:
        return iter(self.node.saved_values(self.saved, self.what))


# What holds a leaf's incoming gradient in run_backward's loop when nothing else does (CPython's counts): the
# formula's result, the zip's tuple, the loop variable, getrefcount's argument. tests/compat/test_grad_aliasing.py
# fails if an interpreter counts otherwise.
_LOOP_REFS = 4
# rm.compile's recorder while it captures: how many references to a storage the recorded calls hold, which are
# not another tensor's (compile/capture.py sets it with the dispatcher's _capture). Another thread's backward
# during a capture reads 0 for its own storages: the recorder holds only the capturing thread's (kept alive,
# so their ids are not reused)
held_by_capture: Callable[[Any], int] | None = None


def _sole_owner(g: Tensor) -> bool:
    """Whether no other tensor reaches g's storage: g is the only tensor on it, or a contiguous view whose base
    only g holds (a reduction's keepdim=False view, as the bias gradient of linear is). PyTorch's AccumulateGrad
    steals a gradient on the same condition (use_count) and copies it otherwise."""
    n = _refs(g._storage)  # the tensors on it, and the argument
    if held_by_capture is not None:
        n -= held_by_capture(g._storage)
    if n <= 2:
        return True
    base = g._base
    return n == 3 and base is not None and _refs(base) <= 3 and g.is_contiguous()  # view's _base, local, argument


class Node:
    """One recorded op. `edges[i]` leads to where input i's gradient goes: a Node (output slot) or a
    leaf Tensor, or None when input i needs no gradient."""

    __slots__ = ("name", "formula", "edges", "attrs", "input_shapes", "saved_inputs", "saved_outputs",
                 "num_outputs", "released", "unbroadcast", "input_dtypes", "tensor_hooks", "__weakref__")

    def __init__(self, name: str, formula: Formula, inputs: Sequence[Tensor], attrs: dict[str, Any],
                 num_outputs: int = 1, save_inputs: bool = True, unbroadcast: bool = False,
                 differentiable: Sequence[int] | None = None) -> None:
        self.name = name
        self.formula = formula
        self.attrs = attrs
        self.num_outputs = num_outputs
        self.unbroadcast = unbroadcast
        shapes: list[tuple[int, ...]] = []
        dtypes: list[Any] = []
        edges: list[tuple[Any, int] | None] = []
        saved: list[tuple[Tensor, int]] | None = [] if save_inputs else None
        i = 0
        for t in inputs:  # one loop for every per-input list: this runs for every recorded op
            storage = t._storage
            shapes.append(t.shape)
            dtypes.append(storage.dtype)
            if saved is not None:
                saved.append((t, storage.version))
            if t._view_version >= 0 and t._view_version != storage.version:
                t.grad_fn  # noqa: B018 - a view whose base changed in place: recompute its history first
            if not t._requires_grad or (differentiable is not None and i not in differentiable):
                edges.append(None)
            elif t._grad_fn is not None:
                edges.append((t._grad_fn, t._output_nr))
            else:
                edges.append((t, 0))  # a leaf: its gradient accumulates into .grad
            i += 1
        self.input_shapes = shapes
        self.input_dtypes = dtypes
        self.edges = edges
        self.saved_inputs = saved
        self.saved_outputs: list[tuple[Tensor, int]] | None = None
        self.released = False
        self.tensor_hooks: dict[int, list[Any]] | None = None  # output slot -> its tensor's hooks (hooks.py)

    def save_outputs(self, outputs: Sequence[Tensor]) -> None:
        # detached aliases: share storage and version counter, but no grad_fn (no reference cycle)
        self.saved_outputs = [(o.detach(), o._storage.version) for o in outputs]

    def saved_values(self, saved: list[tuple[Tensor, int]] | None, what: str) -> list[Tensor]:
        self._check_alive(saved, what)
        assert saved is not None
        out = []
        for i, (t, version) in enumerate(saved):
            if t._storage.version != version:
                self.check_saved(saved, what, i)  # raises, saying which tensor changed
            out.append(t)
        return out

    def _check_alive(self, saved: list[tuple[Tensor, int]] | None, what: str) -> None:
        if self.released:
            raise AutogradError(
                "trying to backward through the graph a second time (or to read saved tensors after they were "
                "freed): the saved tensors were freed after the first backward. Pass retain_graph=True to the "
                "first backward() if you need to call it twice.")
        if saved is None:
            raise AutogradError(f"internal: op '{self.name}' did not save its {what}s")

    def check_saved(self, saved: list[tuple[Tensor, int]] | None, what: str, i: int) -> Tensor:
        self._check_alive(saved, what)
        assert saved is not None
        t, version = saved[i]
        if t._storage.version != version:
            raise AutogradError(
                f"one of the tensors needed for gradient computation (the {what} {i} of '{self.name}', "
                f"shape {t.shape}) has been modified by an in-place operation: it is at version "
                f"{t._storage.version}, expected {version}. Use an out-of-place op instead, or clone() "
                f"the tensor before modifying it.")
        return t

    def apply(self, grads: list[Tensor | None]) -> Sequence[Tensor | None]:
        if self.released:
            raise AutogradError(
                "trying to backward through the graph a second time: the graph's saved tensors were freed "
                "after the first backward. Specify retain_graph=True on the first backward() if you need to "
                "backward twice.")
        out = self.formula(Context(self), *grads)
        if len(out) != len(self.edges):
            raise AutogradError(f"backward of '{self.name}' returned {len(out)} gradients for "
                                f"{len(self.edges)} inputs")
        if self.unbroadcast:  # most gradients already have their input's shape: no call for those
            out = [g if g is None or g.shape == shape else _unbroadcast(g, shape)
                   for g, shape in zip(out, self.input_shapes)]
        return out

    def release(self) -> None:
        self.released = True
        self.saved_inputs = None
        self.saved_outputs = None

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


def _unbroadcast(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum a gradient of the broadcast shape back down to an input's shape."""
    if g.shape == shape:
        return g
    from .. import _math  # late binding: the graph sits below the ops; summing a gradient is an op
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
    r = _math.sum_dims(g, dims)  # keepdim shape
    return r.reshape(shape)


def run_backward(roots: Sequence[Tensor], root_grads: Sequence[Tensor], retain_graph: bool,
                 create_graph: bool, capture: Sequence[Tensor] | None = None) -> list[Tensor | None] | None:
    """Kahn's algorithm from the roots. With `capture`, return gradients for those tensors instead of
    accumulating into leaves' .grad (rumus.autograd.grad)."""
    from .._tensor_base import Tensor  # the run-time class for isinstance (see _tensor_base)

    # 1. dependency counts over the graph reachable from the roots
    deps: dict[int, int] = {}
    stack = [r.grad_fn for r in roots if r.grad_fn is not None]
    seen = {id(n) for n in stack}
    while stack:
        node = stack.pop()
        for edge in node.edges:
            if edge is None:
                continue
            child = edge[0]
            if not isinstance(child, Node):  # a leaf tensor
                continue
            key = id(child)
            deps[key] = deps.get(key, 0) + 1
            if key not in seen:
                seen.add(key)
                stack.append(child)

    captured: dict[int, Tensor | None] = {}
    capture_leaf = {id(t): i for i, t in enumerate(capture or []) if t.grad_fn is None}
    capture_node = {(id(t.grad_fn), t._output_nr): i for i, t in enumerate(capture or []) if t.grad_fn is not None}

    buffers: dict[int, list[Tensor | None]] = {}

    def accumulate(target: Any, slot: int, g: Tensor, owned: bool = False) -> None:
        if isinstance(target, Node):
            buf = buffers.setdefault(id(target), [None] * target.num_outputs)
            buf[slot] = g if buf[slot] is None else buf[slot] + g
        elif capture is not None:
            i = capture_leaf.get(id(target))
            if i is not None:
                g = run_grad_hooks(target._hooks, g)
                prev = captured.get(i)
                captured[i] = g if prev is None else prev + g
        else:
            leaf: Tensor = target
            if g.shape != leaf.shape:
                raise ShapeError(f"gradient of shape {g.shape} does not match leaf of shape {leaf.shape}")
            hooks = leaf._hooks
            if hooks:
                g = run_grad_hooks(hooks, g)
                owned = False  # a hook may keep the tensor it was given
            if leaf.grad is not None:
                leaf.grad = leaf.grad + g  # a new tensor
            elif owned:
                # nothing else holds this gradient: .grad takes it as it is (a graph tensor loses its history)
                leaf.grad = g if create_graph or not (g._requires_grad or g._grad_fn is not None) else g.detach()
            else:
                # another leaf's .grad, a view or the caller's tensor may share it (x + y hands both the same
                # gradient): a copy, so that an in-place change of one .grad (clipping, zero_) stays its own
                leaf.grad = g.clone()  # recorded under create_graph, a plain copy otherwise
            if leaf._hooks:  # read again: a grad hook may have registered one
                run_post_hooks(leaf._hooks, leaf)

    ready: list[Node] = []
    for r, g in zip(roots, root_grads):
        if r.grad_fn is None:
            if not r.requires_grad:
                raise AutogradError("element 0 of tensors does not require grad and does not have a grad_fn: "
                                    "nothing to differentiate. Create inputs with requires_grad=True.")
            accumulate(r, 0, g)
            continue
        accumulate(r.grad_fn, r._output_nr, g)
    for r in roots:
        if r.grad_fn is not None and deps.get(id(r.grad_fn), 0) == 0 and r.grad_fn not in ready:
            ready.append(r.grad_fn)

    prev_mode = state.enabled
    state.enabled = create_graph
    prev_autocast = autocast_state.push(False, None)  # backward formulas run in the forward's dtypes
    try:
        while ready:
            node = ready.pop()
            grads = buffers.pop(id(node), None) or [None] * node.num_outputs
            if node.tensor_hooks:  # hooks of the tensors this node produced, on their total gradients
                grads = [g if g is None else run_grad_hooks(node.tensor_hooks.get(slot), g)
                         for slot, g in enumerate(grads)]
            if capture is not None:
                for slot, out_grad in enumerate(grads):
                    i = capture_node.get((id(node), slot))
                    if i is not None:
                        captured[i] = out_grad
            if grads[0] is None if len(grads) == 1 else all(g is None for g in grads):
                in_grads: Sequence[Tensor | None] = [None] * len(node.edges)
            else:
                in_grads = node.apply(grads)  # formulas of multi-output ops accept None grads
            del grads  # so that a view of it handed on (x.mT's gradient) does not look shared (_sole_owner)
            if not retain_graph:
                node.release()
            for edge, in_grad in zip(node.edges, in_grads):
                if edge is None:
                    continue
                target, slot = edge
                is_node = isinstance(target, Node)
                if in_grad is not None:
                    if not isinstance(in_grad, Tensor):
                        raise AutogradError(f"backward of '{node.name}' returned {type(in_grad).__name__}, "
                                            f"not a Tensor")
                    if is_node:  # accumulate's first case, inline: most edges lead to a node
                        key = id(target)
                        buf = buffers.get(key)
                        if buf is None:
                            buf = buffers[key] = [None] * target.num_outputs
                        prev = buf[slot]
                        buf[slot] = in_grad if prev is None else prev + in_grad
                        del buf, prev  # the node's buffer is its own once popped (see `del grads`)
                    else:  # a leaf: `owned` when only this loop holds the gradient (counted before the call)
                        owned = _refs(in_grad) <= _LOOP_REFS and _sole_owner(in_grad)
                        accumulate(target, slot, in_grad, owned)
                if is_node:
                    key = id(target)
                    left = deps[key] - 1
                    deps[key] = left
                    if left == 0:
                        ready.append(target)
    finally:
        state.enabled = prev_mode
        autocast_state.restore(prev_autocast)
    if capture is None:
        return None
    return [captured.get(i) for i in range(len(capture))]
