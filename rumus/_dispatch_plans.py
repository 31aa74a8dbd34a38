"""The planned paths: `Op.__call__` and `Op.multi` for a call signature the checked path (`_dispatch.Op._run`)
served before. A signature is the backend, each tensor input's shape, strides and dtype, and the
attributes as given. When `_run` planned it (`Op._plans`: the call passed every check without promotion,
copies or a decomposition, and ran the kernel on the inputs as given), the planned path keeps that plan and
from then on only allocates the outputs, launches the kernel and records the autograd node. Every other
call, and every call while something observes the dispatcher (ONNX's tracer, rm.compile's capture,
trace_dispatch, autocast, ONNX's symbolic sizes), goes to `_run`, which stays the reference: a planned call
gives what `_run` would, bit for bit, and bad input raises `_run`'s errors."""

from __future__ import annotations

from math import prod
from typing import Any

from rumus_contracts import DType, OpSchema, RumusError, TensorArg

from . import _dispatch
from ._dispatch import _DECOMPOSE, _as_tensors, _plan_key
from ._tensor_base import Tensor, _contiguous, fresh_tensor, layout_sig, sig_of
from ._thread_state import autocast_state as _autocast
from .autograd.grad_mode import state as grad_state

# a key of the planned paths whose calls _run serves another way (_learn says which)
_UNPLANNED: Any = object()
# Op.__call__'s planned path, per signature: kernel, output shape, its contiguous strides, output dtype,
# element count, per input expanded strides (None for all when none is expanded), the schema's attribute
# defaults (None when it has none), whether the op is differentiable, the backend and device to allocate on
# (the key's layout signatures fix both), the output's layout signature
_QuickPlan = tuple[Any, tuple[int, ...], tuple[int, ...], DType, int, Any, Any, bool, Any, Any, int]


class _Plans(dict[tuple[Any, ...], tuple[Any, list[tuple[int, ...]], list[DType], Any]]):
    """Op._plans: signature -> (kernel, output shapes, output dtypes, per input expanded strides or None).
    `quick` and `many` hold what the planned paths learnt from these plans; clearing the plans (as code that
    changes kernel choices does) clears it too, so no call runs a kernel chosen before."""

    def __init__(self) -> None:
        super().__init__()
        self.quick: dict[tuple[Any, ...], _QuickPlan] = {}
        self.many: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # Op._planned's, for any number of outputs

    def clear(self) -> None:
        super().clear()
        self.quick.clear()
        self.many.clear()


class PlannedOp(_dispatch.Op):
    """A callable bound to one schema: `rumus.ops.<name>(*tensors, **attrs)`; the checked path's Op with the
    planned paths in front of it."""

    def __init__(self, schema: OpSchema) -> None:
        super().__init__(schema)
        plans = self._plans = _Plans()
        # Op.__call__'s planned path: (backend, per input shape, strides, dtype, then the attrs as given) ->
        # _QuickPlan; for single-output, out-of-place, fixed-arity ops whose plan key keeps every attribute
        self._plannable = not schema.inplace and not self._variadic and not self._volatile
        self._quick = schema.num_outputs == 1 and self._plannable
        self._autocasts = schema.autocast is not None
        self._quick_plans = plans.quick
        self._many_plans = plans.many  # Op._planned's

    def __call__(self, *args: Any, **attrs: Any) -> Tensor:
        """One output (in-place ops return their first updated input, like PyTorch's `x.add_()`)."""
        if self._quick and _dispatch._tracer is None and _dispatch._capture is None and _dispatch._route_log is None \
                and _dispatch._planned_paths and not (self._autocasts and _autocast.enabled):
            # The planned path: a call whose signature (tensor inputs on one device, their shapes, strides
            # and dtypes, the attribute names and values) ran before through _run without promotion, copies
            # or a decomposition. _run's checks proved the plan then; here it only allocates and launches.
            # Dtypes enter the key by name (a str hashes in C; DType.__hash__ is a Python call).
            n = len(args)
            key: Any = None
            if n == 2:
                a, b = args
                if isinstance(a, Tensor) and isinstance(b, Tensor):
                    key = (a._sig or layout_sig(a), b._sig or layout_sig(b))
                elif self._composite is None and (isinstance(a, Tensor) or isinstance(b, Tensor)):
                    a, b = args = tuple(_as_tensors(self.name, args))  # a number beside a tensor
                    key = (a._sig or layout_sig(a), b._sig or layout_sig(b))
            elif n == 1:
                a = args[0]
                if isinstance(a, Tensor):
                    key = a._sig or layout_sig(a)
            elif n == 3:
                a, b, c = args
                if isinstance(a, Tensor) and isinstance(b, Tensor) and isinstance(c, Tensor):
                    key = (a._sig or layout_sig(a), b._sig or layout_sig(b), c._sig or layout_sig(c))
            if key is not None:
                if attrs:
                    key = (key, *attrs.items())
                try:
                    plan = self._quick_plans[key]
                except KeyError:
                    plan = None
                except TypeError:  # an unhashable attribute value (a list): the general path, every time
                    return self._run(args, attrs)[0]
                if plan is None or plan is _UNPLANNED:
                    out = self._run(args, attrs)
                    if plan is None:
                        self._learn(key, args, attrs)
                    return out[0]
                kernel, shape, strides, dtype, numel, expanded, defaults, record, backend, device, sig = plan
                try:
                    buf = backend.allocate(device, numel, dtype)
                except (MemoryError, ValueError):  # _run's allocation says what failed, in the error it raises
                    return self._run(args, attrs)[0]
                out_arg = TensorArg(buf, shape, strides, 0, dtype)
                result = fresh_tensor(buf, device, dtype, backend, numel, shape, strides, out_arg, sig)
                if expanded is not None:
                    in_args = [t._arg if e is None else TensorArg(t._storage.buffer, shape, e, t._offset,
                                                                  t._storage.dtype) for t, e in zip(args, expanded)]
                elif n == 2:
                    in_args = [a._arg_cache or a._arg, b._arg_cache or b._arg]
                elif n == 1:
                    in_args = [a._arg_cache or a._arg]
                else:
                    in_args = [a._arg_cache or a._arg, b._arg_cache or b._arg, c._arg_cache or c._arg]
                if defaults is not None:
                    attrs = {**defaults, **attrs}
                kernel([out_arg], in_args, attrs)
                if record and grad_state.enabled:
                    for t in args:  # the slot first; the property only for views (it may recompute their history)
                        if t._requires_grad or (t._view_version >= 0 and t.requires_grad):
                            self._record(args, [result], attrs)
                            break
                return result
            if n > 3:
                many = self._planned(args, attrs)
                if many is not None:
                    return many[0]
        if self.schema.num_outputs > 1:
            raise RumusError(f"op '{self.name}' has {self.schema.num_outputs} outputs: "
                             f"call rumus.ops.{self.name}.multi(...)")
        out = self._run(args, attrs)
        return out[0] if out else args[self.schema.mutates_idx[0]]

    def binary(self, a: Any, b: Any) -> Tensor:
        """`op(a, b)` with no attributes, for Tensor's operators (`a + b`): __call__'s planned path for two
        tensors whose plan binds them as they are, without the argument tuple and keyword dict a call through
        __call__ builds. Anything else goes through __call__."""
        if self._quick and isinstance(a, Tensor) and isinstance(b, Tensor) and _dispatch._tracer is None and \
                _dispatch._capture is None and _dispatch._route_log is None and _dispatch._planned_paths and not (
                    self._autocasts and _autocast.enabled):
            try:
                plan = self._quick_plans[a._sig or layout_sig(a), b._sig or layout_sig(b)]
            except KeyError:
                plan = None
            if plan is not None and plan is not _UNPLANNED and plan[5] is None:
                kernel, shape, strides, dtype, numel, _, defaults, record, backend, device, sig = plan
                try:
                    buf = backend.allocate(device, numel, dtype)
                except (MemoryError, ValueError):  # _run's allocation says what failed, in the error it raises
                    return self._run((a, b), {})[0]
                out_arg = TensorArg(buf, shape, strides, 0, dtype)
                result = fresh_tensor(buf, device, dtype, backend, numel, shape, strides, out_arg, sig)
                attrs = {} if defaults is None else {**defaults}
                kernel([out_arg], [a._arg_cache or a._arg, b._arg_cache or b._arg], attrs)
                if record and grad_state.enabled and (a._requires_grad or b._requires_grad or (
                        a._view_version >= 0 and a.requires_grad) or (b._view_version >= 0 and b.requires_grad)):
                    self._record((a, b), [result], attrs)
                return result
        return self(a, b)

    def multi(self, *args: Any, **attrs: Any) -> tuple[Tensor, ...]:
        if self._plannable and _dispatch._tracer is None and _dispatch._capture is None and \
                _dispatch._route_log is None and _dispatch._planned_paths and not (
                    self._autocasts and _autocast.enabled):
            out = self._planned(args, attrs)
            if out is not None:
                return out
        return tuple(self._run(args, attrs))

    def _planned(self, args: tuple[Any, ...], attrs: dict[str, Any]) -> tuple[Tensor, ...] | None:
        """The planned path for any arity and number of outputs (Op.multi, and Op.__call__ past three
        inputs): Op.__call__'s, in loops. None when the call is not one it takes (then _run serves it)."""
        if self._composite is None and len(args) == 2 and (isinstance(args[0], Tensor)
                                                           is not isinstance(args[1], Tensor)):
            args = tuple(_as_tensors(self.name, args))
        if not args or not isinstance(args[0], Tensor):
            return None
        parts: list[Any] = []
        for t in args:
            if not isinstance(t, Tensor):
                return None
            parts.append(t._sig or layout_sig(t))
        if attrs:
            parts += attrs.items()
        key = tuple(parts)
        try:
            plan = self._many_plans.get(key)
        except TypeError:  # an unhashable attribute value (a list)
            return None
        if plan is None or plan is _UNPLANNED:
            out = self._run(args, attrs)
            if plan is None:
                self._learn_many(key, args, attrs)
            return tuple(out)
        kernel, outs, expanded, defaults, record, backend, device = plan
        results = []
        out_args = []
        try:
            for shape, strides, dtype, numel, sig in outs:
                buf = backend.allocate(device, numel, dtype)
                arg = TensorArg(buf, shape, strides, 0, dtype)
                out_args.append(arg)
                results.append(fresh_tensor(buf, device, dtype, backend, numel, shape, strides, arg, sig))
        except (MemoryError, ValueError):  # _run's allocation says what failed, in the error it raises
            return tuple(self._run(args, attrs))
        if expanded is None:
            in_args = [t._arg_cache or t._arg for t in args]
        else:
            shape = outs[0][0]
            in_args = [t._arg if e is None else TensorArg(t._storage.buffer, shape, e, t._offset, t._storage.dtype)
                       for t, e in zip(args, expanded)]
        if defaults is not None:
            attrs = {**defaults, **attrs}
        kernel(out_args, in_args, attrs)
        if record and grad_state.enabled:
            for t in args:
                if t._requires_grad or (t._view_version >= 0 and t.requires_grad):
                    self._record(args, results, attrs)
                    break
        return tuple(results)

    def _learn_many(self, key: tuple[Any, ...], args: tuple[Any, ...], attrs: dict[str, Any]) -> None:
        """_learn for Op._planned."""
        if len(self._many_plans) >= 4096:
            return
        bound = self.schema.bind_attrs(attrs) if attrs or self._has_attrs else attrs
        plan_key = _plan_key(args[0]._storage.backend.name, args, bound, self._volatile)
        plan = self._plans.get(plan_key) if plan_key is not None else None
        if plan is None or plan[3] is _DECOMPOSE:
            self._many_plans[key] = _UNPLANNED  # as in _learn
            return
        kernel, out_shapes, out_dtypes, expanded = plan
        backend, device = args[0]._storage.backend, args[0]._storage.device
        outs = tuple((s, _contiguous(s), d, prod(s), sig_of(backend, device, s, _contiguous(s), d))
                     for s, d in zip(out_shapes, out_dtypes))
        self._many_plans[key] = (kernel, outs, expanded, self.schema.attrs if self._has_attrs else None,
                                 bool(self.schema.differentiable), backend, device)

    def _learn(self, key: tuple[Any, ...], args: tuple[Any, ...], attrs: dict[str, Any]) -> None:
        """After _run served a call on Op.__call__'s planned path: keep its plan for that path when _run
        planned it (Op._plans) and ran the kernel on the inputs as given."""
        if len(self._quick_plans) >= 4096:
            return
        bound = self.schema.bind_attrs(attrs) if attrs or self._has_attrs else attrs
        storage = args[0]._storage
        plan_key = _plan_key(storage.backend.name, args, bound, self._volatile)
        plan = self._plans.get(plan_key) if plan_key is not None else None
        if plan is None or plan[3] is _DECOMPOSE or len(plan[1]) != 1:
            # _run took another route: the composite, promoted or copied inputs, the decomposition. Each is
            # decided by what the key holds, so calls with this key go straight to _run from now on.
            self._quick_plans[key] = _UNPLANNED
            return
        kernel, out_shapes, out_dtypes, expanded = plan
        shape, dtype = out_shapes[0], out_dtypes[0]
        strides = _contiguous(shape)
        self._quick_plans[key] = (kernel, shape, strides, dtype, prod(shape), expanded,
                                  self.schema.attrs if self._has_attrs else None,
                                  bool(self.schema.differentiable), storage.backend, storage.device,
                                  sig_of(storage.backend, storage.device, shape, strides, dtype))
