"""User-facing math with PyTorch signatures, built on `rumus.ops` (the kernels) and `_views`."""

from __future__ import annotations

import builtins
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

from rumus_contracts import Device, DType, RumusError, ShapeError, int32, parse_dtype
from rumus_contracts.shapes import broadcast_shapes, normalize_dim, normalize_dims

from . import _views
from . import _inplace as _inplace_mod
from .autograd.grad_mode import state as grad_state
from .autograd.graph import Context, Node
from ._tensor_base import Tensor, make_tensor
from .ops import get as _op

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])

# The names rumus.* re-exports (its __init__ star-imports them): a new op here is public by adding its
# name below. Every public function here taking a tensor first is also a Tensor method (METHODS, at the end).
__all__ = [
    "abs", "add", "all", "allclose", "amax", "amin", "any", "argmax", "argmin", "bmm", "cat", "clamp", "clip",
    "concat", "cos", "div", "dot", "eq", "exp", "ge", "gt", "isclose", "le", "log", "log_softmax", "logical_and",
    "logical_not", "logical_or", "logsumexp", "lt", "matmul", "max", "maximum", "mean", "min", "minimum", "mm",
    "mul", "ne", "neg", "outer", "pow", "prod", "reciprocal", "relu", "rsqrt", "sigmoid", "sign", "sin", "softmax",
    "sqrt", "square", "stack", "std", "sub", "sum", "tanh", "var", "where",
    # the expression-table ops added for PyTorch users
    "atan2", "ceil", "expm1", "floor", "floor_divide", "fmod", "isfinite", "isinf", "isnan", "log1p", "logaddexp",
    "logical_xor", "remainder", "round", "trunc",
]


def _t(x: Any, like: Tensor) -> Tensor:
    if isinstance(x, Tensor):
        return x
    from ._dispatch import _scalar_dtype, scalar_tensor
    return scalar_tensor(x, _scalar_dtype(x, like.dtype), like.device)


# ---- elementwise ---------------------------------------------------------------------------------

def add(a: Any, b: Any, alpha: float = 1) -> Tensor:
    """Elementwise `a + alpha * b`, with broadcasting and type promotion as in torch.add."""
    if type(alpha) is not int:
        _check_alpha("add", a, b, alpha)
    return _op("add").binary(a, b if alpha == 1 else _scaled(b, alpha))


def sub(a: Any, b: Any, alpha: float = 1) -> Tensor:
    """Elementwise `a - alpha * b`, with broadcasting and type promotion."""
    if type(alpha) is not int:
        _check_alpha("sub", a, b, alpha)
    return _op("sub").binary(a, b if alpha == 1 else _scaled(b, alpha))


def _scaled(b: Any, alpha: Any) -> Any:
    return mul(b, alpha) if isinstance(b, Tensor) else b * alpha


def _check_alpha(name: str, a: Any, b: Any, alpha: Any) -> None:
    """torch's rule: a float alpha needs a floating result, a bool alpha a bool one (a float alpha would
    otherwise turn an integer sum into a float one, or be truncated)."""
    def kind(x: Any) -> str:
        if isinstance(x, Tensor):
            return "f" if x.dtype.is_floating else "b" if x.dtype.name == "bool" else "i"
        return "b" if isinstance(x, bool) else "f" if isinstance(x, float) else "i"
    kinds = {kind(a), kind(b)}
    if isinstance(alpha, bool):
        if kinds != {"b"}:
            raise RumusError(f"{name}: a boolean alpha is only supported for boolean results; pass alpha=1 or 0")
    elif isinstance(alpha, float) and "f" not in kinds:
        raise RumusError(f"{name}: for integral input tensors, alpha must not be a floating point number (got "
                         f"{alpha}); pass an int alpha, or convert the tensors with .float() first")


def mul(a: Any, b: Any) -> Tensor:
    """Elementwise `a * b`, with broadcasting and type promotion."""
    return _op("mul").binary(a, b)


def div(a: Any, b: Any) -> Tensor:
    """Elementwise true division `a / b`, with broadcasting and type promotion."""
    return _op("div").binary(a, b)


def pow(a: Any, b: Any) -> Tensor:
    """Elementwise `a ** b`."""
    if isinstance(b, (int, float)) and isinstance(a, Tensor):
        if b == 2:
            return _op("mul")(a, a)
        if b == 1:
            return a
        if b == 0.5:
            return _op("sqrt")(a)
    return _op("pow")(a, b)


def neg(x: Tensor) -> Tensor:
    """Elementwise `-x`."""
    return _op("neg")(x)
def abs(x: Tensor) -> Tensor:
    """Elementwise absolute value."""
    return _op("abs")(x)
def exp(x: Tensor) -> Tensor:
    """Elementwise e ** x."""
    return _op("exp")(x)
def log(x: Tensor) -> Tensor:
    """Elementwise natural logarithm."""
    return _op("log")(x)
def sqrt(x: Tensor) -> Tensor:
    """Elementwise square root."""
    return _op("sqrt")(x)
def rsqrt(x: Tensor) -> Tensor:
    """Elementwise `1 / sqrt(x)`."""
    return _op("rsqrt")(x)
def sin(x: Tensor) -> Tensor:
    """Elementwise sine."""
    return _op("sin")(x)
def cos(x: Tensor) -> Tensor:
    """Elementwise cosine."""
    return _op("cos")(x)
def tanh(x: Tensor) -> Tensor:
    """Elementwise hyperbolic tangent."""
    return _op("tanh")(x)
def sigmoid(x: Tensor) -> Tensor:
    """Elementwise logistic function 1 / (1 + e ** -x)."""
    return _op("sigmoid")(x)
def relu(x: Tensor) -> Tensor:
    """Elementwise max(x, 0)."""
    return _op("relu")(x)
def maximum(a: Any, b: Any) -> Tensor:
    """Elementwise maximum of `a` and `b` (NaN if either is NaN)."""
    return _op("maximum")(a, b)
def minimum(a: Any, b: Any) -> Tensor:
    """Elementwise minimum of `a` and `b` (NaN if either is NaN)."""
    return _op("minimum")(a, b)
def eq(a: Any, b: Any) -> Tensor:
    """Elementwise `a == b`; a bool tensor."""
    return _op("eq")(a, b)
def ne(a: Any, b: Any) -> Tensor:
    """Elementwise `a != b`; a bool tensor."""
    return _op("ne")(a, b)
def lt(a: Any, b: Any) -> Tensor:
    """Elementwise `a < b`; a bool tensor."""
    return _op("lt")(a, b)
def le(a: Any, b: Any) -> Tensor:
    """Elementwise `a <= b`; a bool tensor."""
    return _op("le")(a, b)
def gt(a: Any, b: Any) -> Tensor:
    """Elementwise `a > b`; a bool tensor."""
    return _op("gt")(a, b)
def ge(a: Any, b: Any) -> Tensor:
    """Elementwise `a >= b`; a bool tensor."""
    return _op("ge")(a, b)


def clamp(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Alias of `clamp`."""
    """Elementwise `x` limited to [`min`, `max`] (either bound may be None)."""
    if min is None and max is None:
        raise RumusError("clamp: give at least one of min and max")
    return _op("clamp")(x, min=None if min is None else float(min), max=None if max is None else float(max))


clip = clamp


def where(cond: Tensor, a: Any, b: Any) -> Tensor:
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    if like is None:
        like = cond.to(parse_dtype("float32"))
    return _op("where")(cond, _t(a, like), _t(b, like))


# ---- expression-table ops added for PyTorch users (kernels rendered from rumus_contracts.ops.expressions)

def log1p(x: Tensor) -> Tensor:
    """Elementwise log(1 + x), accurate for small x."""
    return _op("log1p")(x)
def expm1(x: Tensor) -> Tensor:
    """Elementwise e ** x - 1, accurate for small x."""
    return _op("expm1")(x)
def floor(x: Tensor) -> Tensor:
    """Elementwise largest integer <= x (same dtype)."""
    return x if not x.dtype.is_floating else _op("floor")(x)
def ceil(x: Tensor) -> Tensor:
    """Elementwise smallest integer >= x (same dtype)."""
    return x if not x.dtype.is_floating else _op("ceil")(x)
def trunc(x: Tensor) -> Tensor:
    """Elementwise rounding toward zero (same dtype)."""
    return x if not x.dtype.is_floating else _op("trunc")(x)
def sign(x: Tensor) -> Tensor:
    """Elementwise sign: -1, 0 or 1."""
    return _op("sign")(x)
def reciprocal(x: Tensor) -> Tensor:
    """Elementwise `1 / x`."""
    return _op("reciprocal")(x)
def square(x: Tensor) -> Tensor:
    """Elementwise `x * x`."""
    return _op("square")(x)
def fmod(a: Any, b: Any) -> Tensor:
    """Elementwise remainder of `a / b` with the sign of `a` (C's fmod)."""
    return _op("fmod")(*_int_divisor("fmod", a, b))
def atan2(a: Any, b: Any) -> Tensor:
    """Elementwise arctangent of `a / b` with the quadrant from both signs."""
    return _op("atan2")(a, b)
def logaddexp(a: Any, b: Any) -> Tensor:
    """Elementwise log(e ** a + e ** b), computed without overflow."""
    return _op("logaddexp")(a, b)
def logical_not(x: Tensor) -> Tensor:
    """Elementwise logical not of the truth value of `x`; a bool tensor."""
    return _op("logical_not")(x)
def logical_and(a: Any, b: Any) -> Tensor:
    """Elementwise logical and of the truth values of `a` and `b`; a bool tensor."""
    return _op("logical_and")(a, b)
def logical_or(a: Any, b: Any) -> Tensor:
    """Elementwise logical or of the truth values of `a` and `b`; a bool tensor."""
    return _op("logical_or")(a, b)
def logical_xor(a: Any, b: Any) -> Tensor:
    """Elementwise exclusive or of the truth values of `a` and `b`; a bool tensor."""
    return _op("logical_xor")(a, b)


def round(x: Tensor, decimals: int = 0) -> Tensor:
    """Half to even, like PyTorch; with decimals, round(x * 10**decimals) / 10**decimals as PyTorch does."""
    if not x.dtype.is_floating:
        return x
    if decimals == 0:
        return _op("round")(x)
    scale = 10.0 ** decimals
    return div(_op("round")(mul(x, scale)), scale)


def isnan(x: Tensor) -> Tensor:
    """Elementwise: NaN; a bool tensor."""
    return _op("isnan")(x) if x.dtype.is_floating else _op("ne")(x, x)


def isinf(x: Tensor) -> Tensor:
    """Elementwise: +inf or -inf; a bool tensor."""
    return _op("isinf")(x) if x.dtype.is_floating else _op("ne")(x, x)


def isfinite(x: Tensor) -> Tensor:
    """Elementwise: neither infinite nor NaN; a bool tensor."""
    return _op("isfinite")(x) if x.dtype.is_floating else _op("eq")(x, x)


class IntegerDivisionByZero(RumusError, RuntimeError, ZeroDivisionError):
    """PyTorch raises `RuntimeError: ZeroDivisionError` here; this is both (and a ZeroDivisionError)."""


def _int_divisor(op: str, a: Any, b: Any) -> tuple[Any, Any]:
    """Integer division by zero has no value: refuse it, as PyTorch does (one host read, integers only).
    An empty result divides nothing, so it is never refused (PyTorch returns the empty tensor)."""
    like = a if isinstance(a, Tensor) else b
    if not isinstance(like, Tensor) or like.dtype.is_floating:
        return a, b
    divisor = b if isinstance(b, Tensor) else None
    if divisor is None:
        zero = isinstance(b, int) and b == 0
    else:
        zero = not divisor.dtype.is_floating and divisor.numel() > 0 and _out_numel(a, b) > 0 \
            and sum(eq(divisor, 0).to(int32)).item() > 0
    if zero and _out_numel(a, b) > 0:
        raise IntegerDivisionByZero(f"ZeroDivisionError: {op}: integer division by zero")
    return a, b


def _out_numel(a: Any, b: Any) -> int:
    shapes = [tuple(x.shape) for x in (a, b) if isinstance(x, Tensor)]
    try:
        shape = broadcast_shapes("divide", *shapes) if len(shapes) > 1 else shapes[0]
    except ShapeError:
        return 1  # the op itself reports the shape mismatch
    n = 1
    for d in shape:
        n *= int(d)
    return n


def floor_divide(a: Any, b: Any) -> Tensor:
    """a // b rounded toward negative infinity (Python's rule, PyTorch's floor_divide)."""
    return _op("floor_divide")(*_int_divisor("floor_divide", a, b))


def remainder(a: Any, b: Any) -> Tensor:
    """a % b with the sign of b (Python's rule, PyTorch's remainder)."""
    return _op("remainder")(*_int_divisor("remainder", a, b))


def isclose(a: Tensor, b: Any, rtol: float = 1e-5, atol: float = 1e-8) -> Tensor:
    """Elementwise `|a - b| <= atol + rtol * |b|`; a bool tensor."""
    return le(_op("abs")(sub(a, b)), add(mul(_op("abs")(_t(b, a)), rtol), atol))


def allclose(a: Tensor, b: Any, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
    """Whether `a` and `b` are elementwise equal within `atol + rtol * |b|` (a Python bool; NaNs differ)."""
    return bool(all(isclose(a, b, rtol, atol)))


# ---- reductions -----------------------------------------------------------------------------------

_ALL_DIMS = [tuple(range(n)) for n in range(65)]


def _dims(op: str, x: Tensor, dim: int | Sequence[int] | None) -> tuple[int, ...]:
    if dim is None:
        return _ALL_DIMS[len(x.shape)]
    return normalize_dims(op, dim, x.ndim)


def _finish(r: Tensor, dims: tuple[int, ...], keepdim: bool) -> Tensor:
    return r if keepdim or not dims else _views.drop_dims(r, dims)


def sum_dims(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    """Keepdim sum over normalized dims (used by un-broadcasting)."""
    return _op("sum")(x, dims=dims)


def sum(x: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    if dtype is not None:
        x = x.to(parse_dtype(dtype))
    dims = _dims("sum", x, dim)
    return _finish(_op("sum")(x, dims=dims), dims, keepdim)


def prod(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The product over all elements or along `dim`."""
    dims = _dims("prod", x, dim)
    return _finish(_op("prod")(x, dims=dims), dims, keepdim)


def mean(x: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The mean over all dims or along `dim`."""
    dims = _dims("mean", x, dim)
    return _finish(_op("mean")(x, dims=dims), dims, keepdim)


def _correction(unbiased: bool | None, correction: int | None) -> int:
    if correction is not None:
        return int(correction)
    return 0 if unbiased is False else 1


def var(x: Tensor, dim: int | Sequence[int] | None = None, unbiased: bool | None = None, keepdim: bool = False,
        correction: int | None = None) -> Tensor:
    """Variance over all dims or along `dim` (Bessel-corrected unless `correction=0`)."""
    dims = _dims("var", x, dim)
    return _finish(_op("var")(x, dims=dims, correction=_correction(unbiased, correction)), dims, keepdim)


def std(x: Tensor, dim: int | Sequence[int] | None = None, unbiased: bool | None = None, keepdim: bool = False,
        correction: int | None = None) -> Tensor:
    """Standard deviation over all dims or along `dim` (Bessel-corrected unless `correction=0`)."""
    dims = _dims("std", x, dim)
    return _finish(_op("std")(x, dims=dims, correction=_correction(unbiased, correction)), dims, keepdim)


def logsumexp(x: Tensor, dim: int | Sequence[int], keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) along `dim`, computed without overflow."""
    dims = _dims("logsumexp", x, dim)
    return _finish(_op("logsumexp")(x, dims=dims), dims, keepdim)


def amax(x: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The largest value over all dims or along `dim` (no indices; the gradient is shared among ties)."""
    dims = _dims("amax", x, dim)
    return _finish(_op("amax")(x, dims=dims), dims, keepdim)


def amin(x: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The smallest value over all dims or along `dim` (no indices; the gradient is shared among ties)."""
    dims = _dims("amin", x, dim)
    return _finish(_op("amin")(x, dims=dims), dims, keepdim)


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the largest value (the first one; a NaN counts as largest), over all elements or along `dim`."""
    if dim is None:
        return _op("argmax")(x.reshape(-1), dim=0).reshape(())
    d = normalize_dim("argmax", dim, x.ndim)
    return _finish(_op("argmax")(x, dim=d), (d,) if x.ndim else (), keepdim)


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the smallest value (the first one; a NaN counts as smallest), over all elements or along `dim`."""
    if dim is None:
        return _op("argmin")(x.reshape(-1), dim=0).reshape(())
    d = normalize_dim("argmin", dim, x.ndim)
    return _finish(_op("argmin")(x, dim=d), (d,) if x.ndim else (), keepdim)


def _extreme(x: Tensor, dim: Any, keepdim: bool, pairwise: Any, reduce: Any, arg: Any) -> Any:
    """torch.max / torch.min's three forms: elementwise against a tensor, over everything, or along a dim
    (values and indices)."""
    if isinstance(dim, Tensor):
        return pairwise(x, dim)
    if dim is None:
        return reduce(x)
    return ValuesIndices(reduce(x, dim, keepdim), arg(x, dim, keepdim))


def max(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The largest element; with `dim`, (values, indices) along it; with a tensor, the elementwise maximum."""
    return _extreme(x, dim, keepdim, maximum, amax, argmax)


def min(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The smallest element; with `dim`, (values, indices) along it; with a tensor, the elementwise minimum."""
    return _extreme(x, dim, keepdim, minimum, amin, argmin)


def any(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Whether any element is true (non-zero), over all dims or along `dim`; a bool tensor. (The count runs in
    int32, which every backend holds: the wgpu backend has no uint8.)"""
    return gt(sum(ne(x, 0).to(int32), dim, keepdim), 0)


def all(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Whether every element is true (non-zero), over all dims or along `dim`; a bool tensor."""
    return logical_not(any(logical_not(x), dim, keepdim))


def softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """exp(x) normalised to sum to 1 along `dim`, computed stably."""
    if dtype is not None:
        x = x.to(parse_dtype(dtype))
    return _op("softmax")(x, dim=normalize_dim("softmax", dim, x.ndim) if x.ndim else 0)


def log_softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """log(softmax(x)) along `dim`, computed stably in one pass."""
    if dtype is not None:
        x = x.to(parse_dtype(dtype))
    return _op("log_softmax")(x, dim=normalize_dim("log_softmax", dim, x.ndim) if x.ndim else 0)


# ---- linear algebra ---------------------------------------------------------------------------------

def matmul(a: Tensor, b: Tensor) -> Tensor:
    """NumPy matmul semantics: 1-D operands are promoted and the added dim removed afterwards."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise RumusError("matmul: both operands must be tensors")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both operands need at least 1 dim, got shapes {a.shape} and {b.shape}")
    a2 = _views.unsqueeze(a, 0) if a.ndim == 1 else a
    b2 = _views.unsqueeze(b, 1) if b.ndim == 1 else b
    try:
        if b2.ndim == 2 and a2.ndim > 2 and a2.shape[-1] == b2.shape[0]:
            # [..., M, K] @ [K, N] is one [B*M, K] GEMM (and so is its weight gradient): batched
            # BLAS calls plus a reduction over the batch would be many times slower
            lead = a2.shape[:-1]
            out = _op("matmul")(_views.reshape(a2, (-1, a2.shape[-1])), b2)
            out = _views.reshape(out, (*lead, b2.shape[1]))
        else:
            out = _op("matmul")(a2, b2)
    except ShapeError:
        raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} cannot be multiplied "
                         f"({a.shape[-1]} vs {b.shape[-2] if b.ndim > 1 else b.shape[0]})") from None
    if a.ndim == 1:
        out = _views.squeeze(out, -2)
    if b.ndim == 1:
        out = _views.squeeze(out, -1)
    return out


def mm(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors."""
    if a.ndim != 2 or b.ndim != 2:
        raise ShapeError(f"mm expects 2-D operands, got {a.shape} and {b.shape}")
    return matmul(a, b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix product of [B, n, k] and [B, k, m] tensors."""
    if a.ndim != 3 or b.ndim != 3:
        raise ShapeError(f"bmm expects 3-D operands, got {a.shape} and {b.shape}")
    return matmul(a, b)


def dot(a: Tensor, b: Tensor) -> Tensor:
    """The inner product of two 1-D tensors."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"dot expects 1-D operands, got {a.shape} and {b.shape}")
    return matmul(a, b)


def outer(a: Tensor, b: Tensor) -> Tensor:
    """The outer product of two 1-D tensors."""
    return mul(_views.unsqueeze(a, 1), _views.unsqueeze(b, 0))


# ---- copies, casts, devices -------------------------------------------------------------------------

def cast(x: Tensor, dtype: DType) -> Tensor:
    if x.dtype.is_fixed or dtype.is_fixed:
        raise RumusError(f"casting between {x.dtype} and {dtype} is refused: fixed-point tensors are "
                         f"converted explicitly with rumus.fixed (from_float / fixed_i16_data)")
    return _op("copy")(x, dtype=dtype.name)


def clone(x: Tensor) -> Tensor:
    return _op("copy")(x)


def copy_into(dst: Tensor, src: Tensor) -> None:
    """Kernel-level strided copy of src (broadcast to dst's shape) into dst; no autograd, bumps version."""
    if src.device != dst.device:
        src = to_device(src.detach(), dst.device)
    if src.shape != dst.shape:
        src = _views.expand(src.detach(), dst.shape)
    from . import _runtime
    k = _runtime.kernel("copy", dst._storage.backend, src.dtype)
    from . import _dispatch
    cap = _dispatch._capture  # rm.compile records kernels launched outside the dispatcher too (replaying, defers)
    if cap is None or not cap.record_direct("copy", k, [dst], [src], {"dtype": dst.dtype.name}):
        k([dst._arg], [src._arg], {"dtype": dst.dtype.name})
    dst._storage.version += 1


def _to_device_back(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (to_device(g, ctx.attrs["src"]),)


def to_device(x: Tensor, device: Any) -> Tensor:
    dev = Device.parse(device)
    if dev == x.device:
        return x
    from ._creation import from_host
    if x.dtype.is_fixed:
        raise RumusError(f"fixed-point tensors live on the CPU only; cannot move {x.dtype} to {dev}")
    from . import _dispatch
    if _dispatch._capture is not None:  # rm.compile: a device move reads values on the host
        _dispatch._capture.host_read(f"moving a tensor to {dev}")
    host = x._storage.backend.to_numpy(x._arg)
    if x.dtype.is_packed:  # q8 / int4 words move as they are: the packing is the same on every backend
        from ._creation import from_storage
        return from_storage(host, x.dtype, dev)
    out = from_host(host, x.dtype, dev) if x.dtype.name != "bfloat16" else from_host(x.numpy(), x.dtype, dev)
    if grad_state.enabled and x.requires_grad:
        out.requires_grad = True
        out.grad_fn = Node("to_device", _to_device_back, [x], {"src": x.device}, save_inputs=False)
    return out


# ---- joining ----------------------------------------------------------------------------------------

def _cat_back(ctx: Context, g: Tensor) -> list[Tensor]:
    dim, sizes = ctx.attrs["dim"], ctx.attrs["sizes"]
    return list(_views.split(g, sizes, dim))


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Alias of `cat`."""
    """Join `tensors` along an existing dim `dim` (their other dims must match)."""
    tensors = [t for t in tensors]
    if not tensors:
        raise RumusError("cat: expected a non-empty sequence of tensors")
    ref = next((t for t in tensors if t.shape != (0,)), tensors[0])
    tensors = [t for t in tensors if t.shape != (0,) or t is ref]  # PyTorch skips legacy empty tensors
    d = normalize_dim("cat", dim, ref.ndim)
    for t in tensors:
        if t.ndim != ref.ndim or builtins.any(t.shape[i] != ref.shape[i] for i in range(ref.ndim) if i != d):
            raise ShapeError(f"cat: shapes {[x.shape for x in tensors]} differ outside dim {d}")
        if t.device != ref.device:
            raise RumusError(f"cat: tensors are on different devices {[str(x.device) for x in tensors]}")
    dtype = ref.dtype
    for t in tensors:
        if t.dtype != dtype:
            from rumus_contracts import promote
            dtype = promote(dtype, t.dtype)
    sizes = [t.shape[d] for t in tensors]
    shape = (*ref.shape[:d], builtins.sum(sizes), *ref.shape[d + 1:])
    from ._dispatch import empty
    out = empty(shape, dtype, ref.device)
    start = 0
    for t, s in zip(tensors, sizes):
        if s:
            copy_into(_views.raw_index(out, (slice(None),) * d + (slice(start, start + s),)), t)
        start += s
    if grad_state.enabled and builtins.any(t.requires_grad for t in tensors) and dtype.is_floating:
        out.requires_grad = True
        out.grad_fn = Node("cat", _cat_back, tensors, {"dim": d, "sizes": sizes}, save_inputs=False)
    return out


concat = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join `tensors` of equal shape along a new dim `dim`."""
    tensors = list(tensors)
    if not tensors:
        raise RumusError("stack: expected a non-empty sequence of tensors")
    shapes = {t.shape for t in tensors}
    if len(shapes) != 1:
        raise ShapeError(f"stack: all tensors need the same shape, got {[t.shape for t in tensors]}")
    d = normalize_dim("stack", dim, tensors[0].ndim + 1)
    return cat([_views.unsqueeze(t, d) for t in tensors], d)


# ---- in-place ---------------------------------------------------------------------------------------

def _writable(x: Tensor, name: str) -> Tensor:
    """x itself, after refusing fixed-point tensors: runs before the out-of-place result is computed,
    so the refusal (not some dtype error of the out-of-place op) is what the user sees."""
    if x.dtype.is_fixed:
        raise RumusError(f"{name} is refused on a fixed-point tensor: in-place writes to fixed-point "
                         f"tensors are not allowed (build a new tensor with rumus.fixed.tensor)")
    return x


def _inplace(x: Tensor, result: Tensor, name: str) -> Tensor:
    """Write `result` into x's storage, bump the version, and rebase x's autograd history on result
    (rumus._inplace.commit: views rebase their base, PyTorch's rule)."""
    return _inplace_mod.commit(x, result, name)


def add_(x: Tensor, o: Any, alpha: float = 1) -> Tensor: return _inplace(_writable(x, "add_"), add(x, o, alpha), "add_")
def sub_(x: Tensor, o: Any, alpha: float = 1) -> Tensor: return _inplace(_writable(x, "sub_"), sub(x, o, alpha), "sub_")
def mul_(x: Tensor, o: Any) -> Tensor: return _inplace(_writable(x, "mul_"), mul(x, o), "mul_")
def div_(x: Tensor, o: Any) -> Tensor: return _inplace(_writable(x, "div_"), div(x, o), "div_")
def pow_(x: Tensor, o: Any) -> Tensor: return _inplace(_writable(x, "pow_"), pow(x, o), "pow_")
def clamp_(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    return _inplace(_writable(x, "clamp_"), clamp(x, min, max), "clamp_")
def neg_(x: Tensor) -> Tensor: return _inplace(_writable(x, "neg_"), neg(x), "neg_")
def exp_(x: Tensor) -> Tensor: return _inplace(_writable(x, "exp_"), exp(x), "exp_")
def sqrt_(x: Tensor) -> Tensor: return _inplace(_writable(x, "sqrt_"), sqrt(x), "sqrt_")
def relu_(x: Tensor) -> Tensor: return _inplace(_writable(x, "relu_"), relu(x), "relu_")


def fill_(x: Tensor, value: float) -> Tensor:
    return _inplace_mod.fill_(x, value)


def zero_(x: Tensor) -> Tensor:
    return _inplace_mod.fill_(x, 0)


def copy_(x: Tensor, src: Any) -> Tensor:
    return _inplace_mod.copy_(x, src)


def setitem(x: Tensor, index: Any, value: Any) -> None:
    """x[index] = value; recorded by autograd when x or value requires grad (rumus._inplace)."""
    _inplace_mod.setitem(x, index, value)


# Every public function above whose first argument is a tensor is also a Tensor method.
METHODS: dict[str, Callable[..., Any]] = {}
for _name, _fn in list(globals().items()):
    if callable(_fn) and not _name.startswith("_") and getattr(_fn, "__module__", None) == __name__:
        METHODS[_name] = _fn
for _skip in ("cat", "concat", "stack", "where", "copy_into", "cast", "to_device", "setitem", "sum_dims"):
    METHODS.pop(_skip, None)
METHODS["where"] = lambda self, cond, other: where(cond, self, other)
METHODS["masked_fill"] = lambda self, mask, value: where(mask, _t(value, self), self)
METHODS["add"] = add
del _name, _fn, _skip
_ = make_tensor
