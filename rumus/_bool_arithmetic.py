"""What arithmetic on bool tensors means, as in torch: `a + b` and `maximum` are logical or, `a * b` and
`minimum` logical and (results stay bool); subtraction, negation and the other ops that have no bool meaning
raise; the remaining integer ops (square, clamp) compute in int64. Elementwise ops otherwise promote a
dtype they do not take to float32, which gave True + True = 2.0."""

from __future__ import annotations

from rumus_contracts import DType, DTypeError, OpSchema, bool_, int64

# op: the bool op that computes it
AS_LOGICAL = {"add": "logical_or", "maximum": "logical_or", "mul": "logical_and", "minimum": "logical_and"}

_REFUSED = {
    "sub": "subtraction of two bool tensors is not supported; use `^` or logical_xor() instead",
    "neg": "negation of a bool tensor is not supported; to invert a mask, use `~` or logical_not() instead",
    "rsub": "subtraction of two bool tensors is not supported; use `^` or logical_xor() instead",
}
# refused even beside an operand of another dtype (torch's rule for subtraction)
REFUSED_WITH_BOOL = {k: v.replace("of two bool tensors", "with a bool tensor") for k, v in _REFUSED.items()
                     if k in ("sub", "rsub")}
_NO_BOOL_KERNEL = ("abs", "relu", "pow", "logaddexp", "floor_divide", "remainder", "fmod")


def bool_target(name: str, schema: OpSchema) -> DType:
    """The dtype an elementwise op whose operands are all bool computes in (its schema lacks bool)."""
    if name in AS_LOGICAL:
        return bool_
    if name in _REFUSED:
        raise DTypeError(f"{name}: {_REFUSED[name]}")
    if name in _NO_BOOL_KERNEL:
        raise DTypeError(f"{name}: not implemented for bool tensors (as in torch); convert first with .int() "
                         f"or .float()")
    return int64 if int64 in schema.dtypes else bool_  # bool_: the caller's float32 rule for float-only ops
