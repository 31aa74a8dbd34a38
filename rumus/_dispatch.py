"""The checked per-op path: schema rules -> device check -> cached kernel -> output allocation -> kernel call
-> autograd node. Kept short on purpose: it runs for every op (DESIGN.md section 4). It is the reference:
the planned paths above it (`_dispatch_plans`) replay what it decided for a call signature and hand every
call they do not take back to `Op._run`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import copysign, prod
from typing import Any

from rumus_contracts import (
    AutogradError, Device, DeviceMismatch, DType, DTypeError, KernelNotFound, OpSchema, RumusError, TensorArg, bool_,
    float32, int64, promote,
)
from rumus_contracts.schema import _same_dtype as _same_dtype_rule
from rumus_contracts.shapes import broadcast_shapes

from . import _runtime
from ._bool_arithmetic import AS_LOGICAL, REFUSED_WITH_BOOL, bool_target
from ._storage import Storage
from ._thread_state import autocast_state as _autocast
from .autograd.grad_mode import no_grad
from .autograd.grad_mode import state as grad_state
from .autograd.graph import Node
from ._tensor_base import Tensor, make_tensor

Formula = Callable[..., Any]
# backward formulas of core ops: name -> (formula, saves inputs, saves outputs); filled by autograd.formulas
FORMULAS: dict[str, tuple[Formula, bool, bool]] = {}
# composite ops implemented in the core: name -> python function taking (*tensors, **attrs)
COMPOSITES: dict[str, Callable[..., Any]] = {}
# decompositions of non-primitive ops: name -> python function taking (*tensors, **attrs); run when the
# backend has no kernel for (op, dtype). Filled by rumus.decompositions (one module per op family).
DECOMPOSITIONS: dict[str, Callable[..., Any]] = {}
# decomposed ops whose gradient is the op's own backward formula (as on the kernel path) rather than the
# history of the decomposition's ops (register(name, grad="formula"))
FORMULA_GRAD: set[str] = set()

# ONNX export (rumus.onnx) sets this to observe every dispatched op: _tracer(schema, inputs, outputs, attrs),
# and _tracer.composite(fn, schema, args, attrs) for composites that have an ONNX lowering of their own.
# One global read per dispatch when unset.
_tracer: Any = None
# rm.compile sets this while it captures a function: _capture.record(schema, kernel, out_args, in_args, attrs,
# inputs, outputs) notes every kernel launch (rumus/compile/capture.py). One global read per dispatch when unset.
_capture: Any = None
# backend_api.trace_dispatch() sets this to a list and every dispatch appends (op name, backend name, route):
# route "kernel" (a backend kernel ran), "composite" (the core's composite ran), "decomposition" (the backend
# has no kernel for (op, dtype) and the core's decomposition ran). The conformance suite reads it to tell
# ok-by-kernel from ok-by-decomposition. One global read per dispatch when unset.
_route_log: list[tuple[str, str, str]] | None = None

# Op._kernels' entry for an (op, backend, dtype) with no kernel but a decomposition, and the marker a plan
# holds in its expanded-strides slot for it: a call with a plan checks it only where it already branches.
_DECOMPOSED: Any = object()
_DECOMPOSE: list[Any] = []

# False turns the planned paths (_dispatch_plans) off: ONNX's symbolic sizes set it while a trace
# runs, as they turn off _plan_key, since shapes holding SymInts hash and compare as the plain sizes would.
_planned_paths = True

_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}
_scalar_cache: dict[tuple[Any, ...], Tensor] = {}


def scalar_tensor(value: Any, dtype: DType, device: Device) -> Tensor:
    """A 0-d constant (cached: the same small set of constants appears in every training step). The key
    spells the dtype and device by their fields (strings hash in C), and tells -0.0 from 0.0, which compare
    equal but divide differently."""
    key: tuple[Any, ...] = (value, type(value), dtype.name, device.backend, device.index)
    if value == 0 and type(value) is float and copysign(1.0, value) < 0:
        key = (*key, "-0")
    t = _scalar_cache.get(key)
    if t is None:
        from ._creation import full  # late binding: creation ops run through this dispatcher
        t = full((), value, dtype=dtype, device=device)
        if len(_scalar_cache) < 4096:
            _scalar_cache[key] = t
    return t


def _scalar_dtype(value: Any, like: DType) -> DType:
    kind = "b" if isinstance(value, bool) else "i" if isinstance(value, int) else "f"
    if _KIND_RANK[like.kind if like.kind in _KIND_RANK else "f"] >= _KIND_RANK[kind]:
        return like
    return float32 if kind == "f" else int64


def _as_tensors(name: str, args: Sequence[Any]) -> list[Tensor]:
    """Python numbers become 0-d tensors of the tensor operands' dtype (PyTorch's weak scalars)."""
    ref = None
    for a in args:
        if isinstance(a, Tensor):
            ref = a
            break
    if ref is None:
        raise RumusError(f"{name}: needs at least one tensor argument")
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a)
        elif isinstance(a, (int, float, bool)):
            out.append(scalar_tensor(a, _scalar_dtype(a, ref.dtype), ref._storage.device))
        else:
            raise RumusError(f"{name}: expected a Tensor or a number, got {type(a).__name__}")
    return out


class Op:
    """A callable bound to one schema: `rumus.ops.<name>(*tensors, **attrs)`."""

    def __init__(self, schema: OpSchema) -> None:
        self.schema = schema
        self.name = schema.name
        self._kernels: dict[tuple[str, DType], Any] = {}
        self._formula: tuple[Formula, bool, bool] | None = None
        self._dtypes = frozenset(schema.dtypes)
        self._skip = 1 if schema.name == "where" else 0  # where's condition keeps its bool dtype
        self._has_attrs = bool(schema.attrs)
        self._volatile = frozenset(schema.volatile)  # attrs the plan key leaves out (OpSchema.volatile)
        self._shape_cache: dict[tuple[Any, ...], list[tuple[int, ...]]] = {}
        # signature -> (kernel, output shapes, output dtypes, per input: expanded strides or None — None for
        # all when no input is expanded); see _prepare
        self._plans: dict[tuple[Any, ...], tuple[Any, list[tuple[int, ...]], list[DType], Any]] = {}
        self._same_dtype = schema.dtype is _same_dtype_rule
        self._composite = COMPOSITES.get(schema.name) if schema.composite else None
        self._fused: dict[tuple[str, DType], bool] = {}  # composite ops: (backend, dtype) -> a fused kernel exists
        self._variadic = schema.variadic is not None
        self.__doc__ = schema.doc

    def __repr__(self) -> str:
        return f"<rumus op {self.name}{self.schema.inputs}>"

    def _backward(self) -> tuple[Formula, bool, bool] | None:
        if self._formula is None:
            f = FORMULAS.get(self.name)
            if f is None and self.schema.backward is not None:
                f = (_plugin_formula(self.schema.backward), True, True)
            self._formula = f
        return self._formula

    def __call__(self, *args: Any, **attrs: Any) -> Tensor:
        """One output (in-place ops return their first updated input, like PyTorch's `x.add_()`)."""
        if self.schema.num_outputs > 1:
            raise RumusError(f"op '{self.name}' has {self.schema.num_outputs} outputs: "
                             f"call rumus.ops.{self.name}.multi(...)")
        out = self._run(args, attrs)
        return out[0] if out else args[self.schema.mutates_idx[0]]

    def multi(self, *args: Any, **attrs: Any) -> tuple[Tensor, ...]:
        return tuple(self._run(args, attrs))

    def _run(self, args: tuple[Any, ...], attrs: dict[str, Any]) -> list[Tensor]:
        schema = self.schema
        if self._variadic:  # a multi-tensor op: its list spelled out as plain inputs from here on (OpSchema.flat)
            schema, flat = schema.flatten(args)
            args = tuple(flat)
        if _autocast.enabled and schema.autocast is not None:  # rumus.autocast: the schema's class decides
            from .amp.policy import cast_inputs  # late binding: autocast casts with ops that dispatch here
            args = tuple(cast_inputs(schema, args))
        if self._composite is not None and not self._has_fused_kernel(args):
            if _route_log is not None:
                _route_log.append((self.name, _backend_name_of(args), "composite"))
            if _tracer is not None and schema.onnx is not None:
                return list(_tracer.composite(self._composite, schema, args, attrs))
            res = self._composite(*args, **attrs)
            return list(res) if isinstance(res, tuple) else [res]
        if _capture is not None and _capture.probing:  # rm.compile replaying an optimizer step's kernels
            return _capture.probe(self, args, attrs)  # type: ignore[no-any-return]
        dev_attr = attrs.pop("device", None) if not args and attrs else None
        if attrs or self._has_attrs:
            attrs = schema.bind_attrs(attrs)
        inputs: Sequence[Tensor] = args
        for a in args:
            if not isinstance(a, Tensor):  # a number (a Parameter is a Tensor: no conversion needed)
                inputs = _as_tensors(self.name, args)
                break
        if inputs:
            first = inputs[0]._storage
            device, backend = first.device, first.backend
            for t in inputs:
                d = t._storage.device
                if d is not device and d != device:  # identity first: Device.__eq__ is a Python call
                    raise DeviceMismatch(f"{self.name}: inputs are on different devices: "
                                         f"{', '.join(str(x._storage.device) for x in inputs)}; move them with "
                                         f".to(device) first")
        else:
            device = _runtime.default_device() if dev_attr is None else Device.parse(dev_attr)
            backend = _runtime.backend(device.backend)
        plan_key = _plan_key(backend.name, inputs, attrs, self._volatile) if inputs else None
        plan = self._plans.get(plan_key) if plan_key is not None else None
        if plan is not None:  # this signature ran before: its checks passed and their results are cached
            kernel, out_shapes, out_dtypes, expanded = plan
            if expanded is None:  # every input as it is (the usual case: no call to the _arg property once cached)
                in_args = [a if (a := t._arg_cache) is not None else t._arg for t in inputs]
            elif expanded is _DECOMPOSE:  # no kernel for (op, dtype) on this backend: the core's decomposition
                return self._decompose(schema, inputs, attrs, backend.name)
            else:
                in_args = [t._arg if s is None else TensorArg(t._storage.buffer, out_shapes[0], s, t._offset,
                                                              t._storage.dtype) for t, s in zip(inputs, expanded)]
        else:
            given = inputs
            kernel, inputs, out_shapes, out_dtypes, in_args = self._prepare(schema, inputs, attrs, backend)
            if kernel is _DECOMPOSED:
                if plan_key is not None and inputs is given and len(self._plans) < 4096:
                    self._plans[plan_key] = (kernel, out_shapes, out_dtypes, _DECOMPOSE)
                return self._decompose(schema, inputs, attrs, backend.name)
            if plan_key is not None and inputs is given and len(self._plans) < 4096:
                strides = [None if a is t._arg else a.strides for t, a in zip(inputs, in_args)]
                self._plans[plan_key] = (kernel, out_shapes, out_dtypes,
                                         None if all(s is None for s in strides) else strides)
        if len(out_shapes) == 1:  # one output: no comprehensions (each is a Python call in 3.11)
            outputs = [empty(out_shapes[0], out_dtypes[0], device, backend)]
            out_args = [outputs[0]._arg]
        else:
            outputs = [empty(s, d, device, backend) for s, d in zip(out_shapes, out_dtypes)]
            out_args = [o._arg for o in outputs]
        kernel(out_args, in_args, attrs)
        if _route_log is not None:
            _route_log.append((self.name, backend.name, "kernel"))
        if _capture is not None:
            _capture.record(schema, kernel, out_args, in_args, attrs, inputs, outputs)
        if _tracer is not None:
            _tracer(schema, inputs, outputs, attrs)
        if schema.inplace:
            for i in schema.mutates_idx:
                inputs[i]._storage.version += 1
            if grad_state.enabled:
                _refuse_tracked_inplace(self.name, [inputs[i] for i in schema.mutates_idx])
            return []
        if grad_state.enabled and schema.differentiable:
            for t in inputs:  # the slot first; the property only for views (it may recompute their history)
                if t._requires_grad or (t._view_version >= 0 and t.requires_grad):
                    self._record(inputs, outputs, attrs)
                    break
        return outputs

    def _has_fused_kernel(self, args: tuple[Any, ...]) -> bool:
        """Whether a composite op runs a backend's own (fused) kernel for this call instead of its
        composite: the backend of the dispatch input registered one for its dtype (OpSchema.composite)."""
        i = self.schema.dispatch_on
        t = args[i] if i < len(args) else None
        if not isinstance(t, Tensor):
            return False
        key = (t._storage.backend.name, t._storage.dtype)
        hit = self._fused.get(key)
        if hit is None:
            hit = self._fused[key] = _runtime.plugins().kernels.find(self.name, *key) is not None
        return hit

    def _prepare(self, schema: OpSchema, inputs: Sequence[Tensor], attrs: dict[str, Any], backend: Any
                 ) -> tuple[Any, Sequence[Tensor], list[tuple[int, ...]], list[DType], list[TensorArg]]:
        """Everything a call decides from its signature (input shapes, strides and dtypes, attrs, backend):
        promotion, output shapes and dtypes, the kernel, contiguous copies, the kernel's input args. Every
        check that can refuse a call runs here, so a signature seen before (Op._plans) skips it all. `schema`
        is the call's: a variadic op's spelled out for this list (OpSchema.flat), not self.schema."""
        if schema.broadcast:
            inputs, out_shapes = self._broadcast(inputs)
        else:
            if self._variadic:  # mixed float dtypes are the op's to judge (its dtype rule)
                out_shapes = schema.shape([t.shape for t in inputs], attrs)
            else:
                out_shapes = self._shapes(inputs, attrs)
                if len(inputs) > 1:
                    _same_float_dtype(self.name, inputs)
        if inputs:
            key_dtype = inputs[schema.dispatch_on]._storage.dtype
            out_dtypes = [key_dtype] if self._same_dtype else schema.dtype([t._storage.dtype for t in inputs], attrs)
        else:
            out_dtypes = schema.dtype([], attrs)
            key_dtype = out_dtypes[0]
        kernel = self._kernels.get((backend.name, key_dtype))
        if kernel is None:
            if key_dtype is bool_ and self.name in AS_LOGICAL:  # True + True is True: the logical op's kernel
                kernel = _runtime.kernel(AS_LOGICAL[self.name], backend, bool_)
            elif key_dtype not in self._dtypes:
                raise DTypeError(f"{self.name}: dtype {key_dtype} is not supported; the op takes "
                                 f"{', '.join(str(d) for d in schema.dtypes)}")
            else:
                kernel = self._find_kernel(backend, key_dtype)
            self._kernels[(backend.name, key_dtype)] = kernel
        if kernel is _DECOMPOSED:  # the decomposition reads any layout; written inputs obey the same rule
            for i in schema.mutates_idx:
                if not inputs[i].is_contiguous():
                    raise RumusError(f"{self.name}: input '{schema.inputs[i]}' is updated in place and must be "
                                     f"contiguous (shape {inputs[i].shape}, strides {inputs[i]._strides})")
            return kernel, inputs, out_shapes, out_dtypes, []
        for i in schema.contiguous_idx:
            if not inputs[i].is_contiguous():
                if i in schema.mutates_idx:
                    raise RumusError(f"{self.name}: input '{schema.inputs[i]}' is updated in place and must be "
                                     f"contiguous (shape {inputs[i].shape}, strides {inputs[i]._strides})")
                inputs = list(inputs)
                inputs[i] = inputs[i].contiguous()
        if schema.broadcast:
            out_shape = out_shapes[0]
            in_args = [t._arg if t.shape == out_shape else t._expanded_arg(out_shape) for t in inputs]
        else:
            in_args = [t._arg for t in inputs]
        return kernel, inputs, out_shapes, out_dtypes, in_args

    def _find_kernel(self, backend: Any, dtype: DType) -> Any:
        """The backend's kernel for (op, dtype), or _DECOMPOSED when it has none and the op has a
        decomposition (decided once per (backend, dtype): Op._kernels caches the answer)."""
        try:
            return _runtime.kernel(self.name, backend, dtype)
        except KernelNotFound:
            if self.name not in DECOMPOSITIONS:
                raise
            return _DECOMPOSED

    def _decompose(self, schema: OpSchema, inputs: Sequence[Tensor], attrs: dict[str, Any],
                   backend_name: str) -> list[Tensor]:
        """Run the op's decomposition on the checked (promoted) inputs with the bound attributes. Its core
        ops record autograd themselves, so no node is recorded for the op; inputs the op is not
        differentiable in are detached, and an op without gradients runs it under no_grad, so the result
        carries exactly the history the kernel's would. An in-place op's decomposition writes its mutated
        inputs with in-place core ops (which bump their versions) and records nothing, as the kernel does."""
        if _route_log is not None:
            _route_log.append((self.name, backend_name, "decomposition"))
        fn = DECOMPOSITIONS[self.name]
        if schema.inplace or not schema.differentiable or not grad_state.enabled or self.name in FORMULA_GRAD:
            with no_grad():
                res = fn(*inputs, **attrs)
            if schema.inplace:
                if grad_state.enabled:
                    _refuse_tracked_inplace(self.name, [inputs[i] for i in schema.mutates_idx])
                return []
            outputs = list(res) if isinstance(res, tuple) else [res]
            if grad_state.enabled and schema.differentiable and any(t.requires_grad for t in inputs):
                self._record(inputs, outputs, attrs)  # FORMULA_GRAD: the node the kernel path records
            return outputs
        diff = schema.differentiable_idx
        if len(diff) < len(inputs):
            inputs = [t if i in diff or not t.requires_grad else t.detach() for i, t in enumerate(inputs)]
        res = fn(*inputs, **attrs)
        return list(res) if isinstance(res, tuple) else [res]

    def _shapes(self, inputs: Sequence[Tensor], attrs: dict[str, Any]) -> list[tuple[int, ...]]:
        """The schema's shape rule, memoised: rules are pure functions of (input shapes, attrs), and a
        training loop asks the same questions every step."""
        shapes = [t.shape for t in inputs]
        try:
            key = (*shapes, *attrs.values())
            hit = self._shape_cache.get(key)
        except TypeError:  # an unhashable attribute (a list): no memo for this call
            return self.schema.shape(shapes, attrs)
        if hit is None:
            hit = self.schema.shape(shapes, attrs)
            if len(self._shape_cache) < 4096:
                self._shape_cache[key] = hit
        return hit

    def _broadcast(self, inputs: Sequence[Tensor]) -> tuple[Sequence[Tensor], list[tuple[int, ...]]]:
        """Elementwise ops: one dtype for all operands, and the broadcast output shape."""
        skip = self._skip
        dt0 = inputs[skip]._storage.dtype
        if dt0 not in self._dtypes or any(t._storage.dtype != dt0 for t in inputs[skip:]) or (
                skip and inputs[0]._storage.dtype != bool_):
            inputs = self._promote(list(inputs))
        s0: tuple[int, ...] | None = None
        for t in inputs:  # 0-d operands (scalars) broadcast to anything
            if t.shape:
                if s0 is None:
                    s0 = t.shape
                elif t.shape != s0:
                    return inputs, [broadcast_shapes(self.name, *(t.shape for t in inputs))]
        return inputs, [s0 if s0 is not None else ()]

    def _promote(self, inputs: list[Tensor]) -> list[Tensor]:
        """Common dtype for elementwise ops; ints/bools go to float32 for float-only ops (div, exp...)."""
        skip = self._skip
        dts = [t.dtype for t in inputs[skip:]]
        target = dts[0]
        for d in dts[1:]:
            if d != target:
                target = promote(target, d)
        if target is bool_ and bool_ not in self._dtypes:
            target = bool_target(self.name, self.schema)
        elif self.name in REFUSED_WITH_BOOL and bool_ in dts:
            raise DTypeError(f"{self.name}: {REFUSED_WITH_BOOL[self.name]}")
        if target not in self.schema.dtypes and not target.is_floating and float32 in self.schema.dtypes \
                and not (target is bool_ and self.name in AS_LOGICAL):
            target = float32
        if self.name == "where" and inputs[0].dtype != bool_:  # a float mask is a mistake, not "nonzero"
            raise DTypeError(f"where: the condition must be a bool tensor, got {inputs[0].dtype}; compare first "
                             f"(e.g. where(x > 0, a, b)) or convert with .bool()")
        return [t if i < skip or t.dtype == target else t.to(target) for i, t in enumerate(inputs)]

    def _record(self, inputs: Sequence[Tensor], outputs: list[Tensor], attrs: dict[str, Any]) -> None:
        formula = self._formula or self._backward()
        if formula is None:
            raise RumusError(f"op '{self.name}' is marked differentiable but has no backward formula")
        fn, save_in, save_out = formula
        if len(outputs) == 1:
            out = outputs[0]
            if out._storage.dtype.kind != "f":
                return
        elif not any(o._storage.dtype.kind == "f" for o in outputs):
            return
        diff = self.schema.differentiable_idx
        node = Node(self.name, fn, inputs, attrs, len(outputs), save_in, self.schema.broadcast,
                    None if len(diff) == len(inputs) else diff)
        if save_out:
            node.save_outputs(outputs)
        if len(outputs) == 1:
            out._requires_grad = True
            out._grad_fn = node
            out._output_nr = 0
            return
        for i, o in enumerate(outputs):
            if o._storage.dtype.kind == "f":
                o._requires_grad = True
                o._grad_fn = node
                o._output_nr = i


def _plan_key(backend_name: str, inputs: Sequence[Tensor], attrs: dict[str, Any],
              volatile: frozenset[str] = frozenset()) -> tuple[Any, ...] | None:
    """What Op._prepare's decisions depend on: the backend, each input's shape, strides and dtype, the
    attribute values (in the schema's order) but the volatile ones, which the shape and dtype rules never
    read (an optimizer's step count: with it in the key every step was planned afresh). None when an
    attribute is unhashable (no plan then)."""
    key: tuple[Any, ...]
    if len(inputs) == 1:
        t = inputs[0]
        key = (backend_name, t.shape, t._strides, t._storage.dtype)
    elif len(inputs) == 2:
        t, u = inputs
        key = (backend_name, t.shape, t._strides, t._storage.dtype, u.shape, u._strides, u._storage.dtype)
    else:
        key = (backend_name, *[(t.shape, t._strides, t._storage.dtype) for t in inputs])
    if attrs:
        key = (*key, *(attrs.values() if not volatile else [v for a, v in attrs.items() if a not in volatile]))
        try:
            hash(key)
        except TypeError:
            return None
    return key


def _backend_name_of(args: Sequence[Any]) -> str:
    t = next((a for a in args if isinstance(a, Tensor)), None)
    return t._storage.backend.name if t is not None else _runtime.default_device().backend


def _refuse_tracked_inplace(name: str, written: Sequence[Tensor]) -> None:
    """Schema-level in-place ops (optimizer steps) record no graph: writing a tensor that takes part
    in autograd in grad mode would leave its history silently wrong, so it is refused (after the
    write: the version bump already makes any saved copy of it fail loudly)."""
    for t in written:
        if t.requires_grad:
            raise AutogradError(f"{name}: updates a tensor that requires grad in place while grad mode is on; "
                                f"run it under `with rumus.no_grad():` (as optimizers do)")


def _same_float_dtype(name: str, inputs: Sequence[Tensor]) -> None:
    """Non-elementwise ops never mix float dtypes silently (elementwise ops promote instead)."""
    first: DType | None = None
    for t in inputs:
        dt = t._storage.dtype
        if dt.kind == "f":
            if first is None:
                first = dt
            elif dt != first:
                raise DTypeError(f"{name}: inputs have different dtypes {first} and {dt}; convert one with "
                                 f".to({first.name!r}) or .to({dt.name!r})")


def empty(shape: tuple[int, ...], dtype: DType, device: Device, backend: Any = None) -> Tensor:
    if backend is None:
        backend = _runtime.backend(device.backend)
    numel = prod(shape)
    if dtype.kind == "q":  # quantized storage is not one element per logical element
        raise DTypeError(f"{dtype} tensors are created by their own constructors, not by generic ops")
    try:
        buf = backend.allocate(device, numel, dtype)
    except (MemoryError, ValueError) as exc:  # numpy: MemoryError, or ValueError "array is too big"
        if isinstance(exc, RumusError) or not isinstance(exc, MemoryError) and "too big" not in str(exc) \
                and "Maximum allowed" not in str(exc):
            raise
        from rumus_contracts import OutOfMemory
        nbytes = numel * dtype.itemsize
        raise OutOfMemory(f"cannot allocate a tensor of shape {tuple(shape)} and dtype {dtype} on {device}: "
                          f"{nbytes} bytes; use smaller sizes (or chunk the computation)") from None
    return make_tensor(Storage(buf, device, dtype, backend, numel), shape)


def _plugin_formula(backward: Callable[..., Any]) -> Formula:
    def formula(ctx: Any, *grads: Any) -> Any:
        out = backward(ctx, *grads)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return formula


def arg_of(t: Tensor) -> TensorArg:
    return t._arg
