"""The primitive tier: the ops a backend must provide. Every other op has a decomposition in the core
(rumus/decompositions/) written with these, which the dispatcher runs when a backend has no kernel for
(op, dtype); a backend's own kernel for a decomposed op is an optimisation, held to the same reference
by the conformance suite.

Every primitive is an ordinary op with an OpSchema (its shape and dtype rules, float64 reference and
samples live there); what a kernel must do, in short:

Elementwise (the expression table, rumus_contracts.ops.expressions.EXPRESSIONS): every forward entry
    (neg, add, mul, exp, the activations, comparisons, logic, ...). The inputs arrive broadcast to the
    output shape (stride 0 on broadcast dims). The table is language-neutral, so a backend renders all of
    them from one renderer (the C, WGSL and numpy renderers in rumus_contracts.ops.expr_*): they cost no
    hand-written kernel. The table's fused backward ops (`<op>_backward`, `<op>_backward_a/_b`) are not
    primitives: they decompose into the forward entries (the same expression, rumus/decompositions/
    elementwise.py), and a backend that renders them gets one kernel per gradient instead of a chain.
where(cond, a, b)
    Elementwise select with a bool condition, broadcast like the expression ops. The decompositions use it
    for masking (ignored rows, skipped optimizer steps, padding rows), which arithmetic cannot do with
    infinities and NaN around.
copy(x, dtype=None)
    A strided read into a contiguous output, converting to `dtype` when given (the cast). Every contiguous
    copy, `.to(dtype)` and in-place write (`copy_`, optimizer states) goes through it.
fill(shape, value, dtype)
    A new tensor of one value (zeros, ones, constants of the decompositions).
sum(x, dims), amax(x, dims)
    Reductions over sorted distinct dims, keepdim shape. sum of an empty dim is 0; amax propagates NaN and
    refuses an empty dim. Together with the elementwise table they give mean, softmax, log_softmax,
    logsumexp, norms and the losses; amin, prod, argmax and argmin are decomposed from them.
matmul(a, b)
    Batched matrix product with broadcast batch dims (linear layers, convolutions as GEMMs, attention).
gather(x, index, dim), scatter_add(x, index, src, dim)
    Indexed read and indexed accumulate along one dim (torch.gather / torch.scatter_add semantics; an
    index out of range raises IndexOutOfRange). They give index_select, index_add, embedding and its
    backward, the picked logits of cross-entropy, and max-pool's argmax routing.
argsort(x, dim, descending)
    A stable sort's permutation: sorting has no reasonable decomposition into the ops above (sort, topk,
    median and quantiles are built on it).

Not in the tier, and with no decomposition: the ops of the packed dtypes (q8, int4 and fixed_i16:
quantize, dequantize, the fixed-point linears, fixed_relu, fixed_requantize). Their storage is
bit-packed words that only a backend declaring those dtypes holds, so they are kernels of such a
backend, not of every backend (q8_linear and int4_linear do decompose, to dequantize + matmul).
"""

from __future__ import annotations

from .ops.expressions import EXPRESSIONS

# the primitives that are not elementwise expressions, with the reason each is one (see above)
STRUCTURAL: dict[str, str] = {
    "where": "masking with infinities and NaN around (arithmetic selects are wrong there)",
    "copy": "strided copies and dtype casts",
    "fill": "constants",
    "sum": "the additive reduction",
    "amax": "the max reduction (NaN-propagating)",
    "matmul": "matrix products",
    "gather": "indexed reads along a dim",
    "scatter_add": "indexed accumulation along a dim",
    "argsort": "sorting",
}

EXPRESSION_OPS: frozenset[str] = frozenset(EXPRESSIONS)

# every op a backend must provide: the elementwise table's forward ops, and STRUCTURAL
PRIMITIVES: frozenset[str] = EXPRESSION_OPS | frozenset(STRUCTURAL)

# ops outside the tier that have no decomposition, by design (packed storage only some backends hold)
PACKED_DTYPE_OPS: frozenset[str] = frozenset({
    "q8_quantize", "q8_dequantize", "int4_quantize", "int4_dequantize", "fixed_linear", "fixed_linear_nobias",
    "fixed_relu", "fixed_requantize",
})
