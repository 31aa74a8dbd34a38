"""OpSchema: one record per op, shared by the core's dispatcher, every backend and the conformance suite.

Following PyTorch's OpInfo idea, the record carries the op's meta rules (shape, dtype), a float64 numpy
`reference` and a `samples` generator, so registering an op is all it takes for the conformance
suite to test it on every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .dtype import FLOAT_DTYPES, DType
from .errors import PluginError, RumusError
from .registry import _Owned

Shape = tuple[int, ...]
ShapeRule = Callable[[Sequence[Shape], Mapping[str, Any]], list[Shape]]
DTypeRule = Callable[[Sequence[DType], Mapping[str, Any]], list[DType]]
Reference = Callable[..., Any]  # (*float64 arrays, **attrs) -> array | tuple of arrays


@dataclass
class Sample:
    """One call of an op: numpy inputs (any dtype; cast to the dtype under test), attributes.

    Float64 arrays are cast to the dtype under test; bool and integer arrays keep their dtype. `dtypes`
    gives explicit per-input dtypes instead (e.g. fixed_i16(4)): those arrays are raw storage values and
    the reference works on raw values too. `grad` says whether gradient checks apply (False at points
    where the op is not differentiable). The suite also feeds non-contiguous copies of every input.
    """

    inputs: Sequence[Any]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    grad: bool = True
    name: str = ""
    dtypes: Sequence[DType | None] | None = None  # explicit input dtypes (packed/fixed ops): raw storage arrays


@dataclass
class ErrorSample:
    """An input the op must refuse with `error` (a RumusError subclass) whose message contains `match`."""

    inputs: Sequence[Any]
    attrs: Mapping[str, Any]
    error: type[RumusError]
    match: str = ""
    dtypes: Sequence[DType | None] | None = None  # explicit input dtypes, as in Sample


SampleGen = Callable[[np.random.Generator], Iterable[Sample]]
ErrorGen = Callable[[], Iterable[ErrorSample]]


# the autocast classes an OpSchema may declare (None: the op runs in its inputs' dtypes)
AUTOCAST_CLASSES: tuple[str | None, ...] = ("lower", "float32", "promote", None)


def _same_dtype(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [dtypes[0]]


@dataclass
class OpSchema:
    """The contract of one op.

    name        -- `rumus.ops.<name>`; a kernel registers under the same name.
    inputs      -- names of tensor inputs (in call order). One name may end in "*": a variadic input, called
                   with a list of tensors (multi-tensor ops, PyTorch's _foreach_*); see `flat`.
    attrs       -- attribute names with default values (attributes are Python values, not tensors).
    shape       -- output shapes from input shapes and attrs; raises ShapeError on a mismatch.
    dtype       -- output dtypes from input dtypes and attrs.
    broadcast   -- elementwise op: inputs are broadcast (NumPy rules) and handed to the kernel already
                   expanded to the output shape (stride 0 on broadcast dims).
    contiguous  -- inputs that the kernel needs contiguous; the dispatcher copies the others.
    differentiable -- inputs gradients flow to (backward formulas live in the core, or in `backward`).
    dtypes      -- dtypes the op is defined for (the conformance suite tests each one a backend claims).
    composite   -- implemented in the core from other ops; no backend kernel is needed. A backend may still
                   register a fused kernel for it (an optional optimisation): where it has one for the
                   dtype, the dispatcher runs that kernel, elsewhere the composite; conformance checks
                   whichever runs against the same reference.
    inplace     -- the kernel updates its inputs (optimizer steps); it has no outputs.
    dispatch_on -- the input whose dtype selects the kernel and is the "dtype under test".
    reference   -- float64 numpy implementation used by the conformance suite.
    samples / error_samples -- conformance inputs.
    backward    -- for plugin ops: fn(ctx, *grad_outputs) over rumus tensors, like torch.autograd.Function.
    tolerance   -- per-dtype (rtol, atol) overrides with `tolerance_reason` saying why.
    onnx        -- ONNX lowering: fn(ctx, input_names, output_names, attrs) -> node descriptions
                   (see rumus_contracts.onnx_lowering); None: the op cannot be exported.
    autocast    -- the op's class under `rumus.autocast` (PyTorch's autocast lists as the model):
                   "lower" runs in the autocast dtype (GEMMs, convolutions, attention), "float32" runs
                   in float32 (reductions, norms, losses, exp/log/pow), "promote" casts its float
                   inputs to the widest of them (cat, stack, where), None runs in the input dtypes.
                   Only float16/bfloat16/float32 inputs are cast; float64 is never touched.
    volatile    -- attributes whose value changes from call to call (an optimizer's step count and learning
                   rate) and that the shape and dtype rules never read: the dispatcher's per-signature plan
                   cache leaves them out of its key, so such a call is not planned afresh every time.
    """

    name: str
    inputs: tuple[str, ...]
    shape: ShapeRule
    attrs: Mapping[str, Any] = field(default_factory=dict)
    dtype: DTypeRule = _same_dtype
    broadcast: bool = False
    contiguous: tuple[str, ...] = ()
    differentiable: tuple[str, ...] = ()
    dtypes: tuple[DType, ...] = FLOAT_DTYPES
    composite: bool = False
    inplace: bool = False
    num_outputs: int = 1
    mutates: tuple[str, ...] = ()  # in-place ops: the inputs the kernel writes (must be contiguous)
    dispatch_on: int = 0  # index of the input whose dtype selects the kernel (no inputs: output dtype)
    reference: Reference | None = None
    samples: SampleGen | None = None
    error_samples: ErrorGen | None = None
    backward: Callable[..., Any] | None = None
    tolerance: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    tolerance_reason: str = ""
    doc: str = ""
    onnx: Callable[..., Any] | None = None  # ONNX lowering (rumus_contracts.onnx_lowering)
    autocast: str | None = None  # "lower" | "float32" | "promote" | None (see above)
    volatile: tuple[str, ...] = ()  # attrs left out of the dispatcher's plan key (see above)
    variadic: int | None = field(init=False, default=None, repr=False)  # index of the '*' input (derived)

    def __post_init__(self) -> None:
        if self.autocast not in AUTOCAST_CLASSES:
            raise PluginError(f"op '{self.name}': autocast={self.autocast!r} is not one of "
                              f"{', '.join(repr(c) for c in AUTOCAST_CLASSES)}")
        unknown = [a for a in self.volatile if a not in self.attrs]
        if unknown:
            raise PluginError(f"op '{self.name}': volatile names {unknown}, which are not among its attrs "
                              f"{list(self.attrs)}")
        self.contiguous_idx = tuple(self.inputs.index(n) for n in self.contiguous)
        self.differentiable_idx = tuple(self.inputs.index(n) for n in self.differentiable)
        self.mutates_idx = tuple(self.inputs.index(n) for n in self.mutates)
        star = [i for i, n in enumerate(self.inputs) if n.endswith("*")]
        if len(star) > 1 or star and (self.broadcast or self.differentiable or self.composite):
            raise PluginError(f"op '{self.name}': at most one variadic ('*') input, and a variadic op is not "
                              f"broadcast, differentiable or composite")
        self.variadic = star[0] if star else None
        self._flat: dict[int, OpSchema] = {}

    def flat(self, count: int) -> OpSchema:
        """This op's schema for a call whose variadic input holds `count` tensors, spelled out as that many
        plain inputs ("grads*" -> "grads[0]", "grads[1]", ...): what the dispatcher, the kernels, rm.compile
        and the conformance suite see. Its shape/dtype rules and reference take the list back (`group`)."""
        hit = self._flat.get(count)
        if hit is None:
            hit = self._flat[count] = _flat_schema(self, count)
        return hit

    def group(self, flat: Sequence[Any]) -> list[Any]:
        """Flat per-tensor values (shapes, dtypes, arrays) regrouped: the variadic input's as one list."""
        v = self.variadic
        assert v is not None
        end = len(flat) - (len(self.inputs) - 1 - v)
        return [*flat[:v], list(flat[v:end]), *flat[end:]]

    def flatten(self, args: Sequence[Any]) -> tuple[OpSchema, list[Any]]:
        """(the flat schema, the flat argument list) for a call given its variadic input as a list."""
        v = self.variadic
        assert v is not None
        if len(args) != len(self.inputs) or not isinstance(args[v], (list, tuple)):
            raise RumusError(f"op '{self.name}' takes {len(self.inputs)} inputs ({', '.join(self.inputs)}), "
                             f"'{self.inputs[v]}' a list of tensors; got {len(args)} arguments")
        many = list(args[v])
        return self.flat(len(many)), [*args[:v], *many, *args[v + 1:]]

    def bind_attrs(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults filled in; unknown attribute names are refused."""
        for key in given:
            if key not in self.attrs:
                unknown = sorted(set(given) - set(self.attrs))
                raise RumusError(f"op '{self.name}' got unknown attribute(s) {unknown}; "
                                 f"it takes {sorted(self.attrs)}")
        return {**self.attrs, **given}


def _flat_schema(schema: OpSchema, count: int) -> OpSchema:
    v = schema.variadic
    assert v is not None
    star = schema.inputs[v]
    names = [f"{star[:-1]}[{k}]" for k in range(count)]

    def spelled(group: Sequence[str]) -> tuple[str, ...]:
        return tuple(m for n in group for m in (names if n == star else [n]))

    def shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        return schema.shape(schema.group(shapes), attrs)

    def dtype(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
        return schema.dtype(schema.group(dtypes), attrs)

    def reference(*arrays: Any, **attrs: Any) -> Any:
        assert schema.reference is not None
        res = schema.reference(*schema.group(arrays), **attrs)
        # results per input of an in-place op (the variadic one as a list) come back flat
        return tuple(a for r in res for a in (r if isinstance(r, list) else [r])) if isinstance(res, tuple) else res

    dispatch_on = schema.dispatch_on + (count - 1 if schema.dispatch_on > v else 0)
    return replace(schema, inputs=(*schema.inputs[:v], *names, *schema.inputs[v + 1:]), shape=shape, dtype=dtype,
                   contiguous=spelled(schema.contiguous), mutates=spelled(schema.mutates), dispatch_on=dispatch_on,
                   reference=None if schema.reference is None else reference, samples=None, error_samples=None)


class OpRegistry(_Owned):
    """All op schemas, the core's and every plugin's. A name belongs to whoever registers it first
    (the core registers first), so a plugin's op can never replace one of the core's."""

    def __init__(self) -> None:
        super().__init__()
        self._ops: dict[str, OpSchema] = {}
        self.owner: dict[str, str] = {}

    def register(self, schema: OpSchema, owner: str | None = None) -> OpSchema:
        who = self._owner(owner)
        if not isinstance(schema, OpSchema):
            raise PluginError(f"registry.register takes an OpSchema, got {type(schema).__name__}")
        if schema.name in self._ops:
            raise PluginError(f"op '{schema.name}' is registered twice (by '{self.owner[schema.name]}' "
                              f"and '{who}'); the first keeps the name, rename the other")
        self._ops[schema.name] = schema
        self.owner[schema.name] = who
        return schema

    def drop_owner(self, owner: str) -> None:
        """Remove every op of `owner` (a plugin that failed to load)."""
        for name in [n for n, o in self.owner.items() if o == owner]:
            del self._ops[name], self.owner[name]

    def get(self, name: str) -> OpSchema:
        try:
            return self._ops[name]
        except KeyError:
            raise RumusError(f"unknown op '{name}'; is the plugin that defines it installed?") from None

    def __contains__(self, name: object) -> bool:
        return name in self._ops

    def __iter__(self) -> Iterator[OpSchema]:
        return iter(sorted(self._ops.values(), key=lambda s: s.name))

    def __len__(self) -> int:
        return len(self._ops)

    def names(self) -> list[str]:
        return sorted(self._ops)
