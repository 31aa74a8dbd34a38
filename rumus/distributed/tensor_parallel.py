"""Tensor parallelism in Megatron's layout: a weight split across the ranks of a communicator, with
SUM all-reduces where partial results meet.

- `ColumnParallelLinear`: rank r holds rows r of W (output features split). The input is replicated;
  its gradient is the SUM over ranks of each rank's partial input gradient (all-reduce in backward).
  With `gather_output` the output slices are all-gathered (backward keeps the rank's slice).
- `RowParallelLinear`: rank r holds columns r of W (input features split) and takes the matching slice
  of its input (as a ColumnParallelLinear without gather produces it); the partial products are
  SUM-all-reduced in forward, gradient passes through unchanged; the bias is added once, after it.
- `VocabParallelEmbedding`: rank r holds rows [r*V/N, (r+1)*V/N) of the table; ids outside the
  rank's range give zero rows, and a SUM all-reduce assembles the full lookup.
Sizes must divide by world_size (refused otherwise). `from_full(module, comm)` cuts a rank's shard
out of an ordinary layer, which is how the tests compare against single-process training.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts.communicator import Communicator, CommunicatorError, ReduceOp

from .. import _creation
from ..autograd.function import Function, FunctionCtx
from ..autograd.grad_mode import no_grad
from ..nn import functional as F
from ..nn.linear import Linear
from ..nn.module import Module
from ..nn.parameter import Parameter
from ..nn.sparse import Embedding
from ..tensor import Tensor
from .collectives import all_gather, all_reduce
from .state import get_communicator


class _CopyToParallel(Function):
    """Identity forward; SUM all-reduce of the gradient (a replicated input feeding split weights)."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        x, ctx.comm = args  # type: ignore[attr-defined]
        return x.clone()

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        g = grads[0].contiguous().clone()
        all_reduce(g, ReduceOp.SUM, ctx.comm)  # type: ignore[attr-defined]
        return g, None


class _ReduceFromParallel(Function):
    """SUM all-reduce forward; identity gradient."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        x, comm = args
        y = x.contiguous().clone()
        all_reduce(y, ReduceOp.SUM, comm)
        return y

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        return grads[0], None


class _GatherLastDim(Function):
    """All-gather slices along the last dim; the gradient keeps this rank's slice."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        x, comm = args
        ctx.comm, ctx.width = comm, x.shape[-1]  # type: ignore[attr-defined]
        parts = all_gather(x.contiguous(), comm)
        from .._math import cat
        return cat([parts[i] for i in range(comm.world_size)], -1)

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        w, r = ctx.width, ctx.comm.rank  # type: ignore[attr-defined]
        return grads[0].narrow(-1, r * w, w).contiguous(), None


def _split(n: int, comm: Communicator, what: str) -> int:
    if n % comm.world_size:
        raise CommunicatorError(f"{what}: {n} does not divide by world_size {comm.world_size}")
    return n // comm.world_size


def _shard_param(full: Tensor, dim: int, comm: Communicator) -> Parameter:
    n = _split(full.shape[dim], comm, f"sharding a {tuple(full.shape)} weight along dim {dim}")
    with no_grad():
        return Parameter(full.detach().narrow(dim, comm.rank * n, n).contiguous().clone())


class ColumnParallelLinear(Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True, gather_output: bool = True,
                 comm: Communicator | None = None, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        c = get_communicator(comm)
        object.__setattr__(self, "comm", c)
        self.in_features, self.out_features, self.gather_output = in_features, out_features, gather_output
        _split(out_features, c, "ColumnParallelLinear out_features")
        # PyTorch's init of the full layer, then this rank's rows: seed every rank alike (rm.manual_seed)
        self.bias: Parameter | None = None
        self._load(Linear(in_features, out_features, bias, device=device, dtype=dtype))

    def _load(self, full: Linear) -> None:
        self.weight = _shard_param(full.weight, 0, self.comm)
        self.bias = _shard_param(full.bias, 0, self.comm) if full.bias is not None else None

    @classmethod
    def from_full(cls, full: Linear, comm: Communicator | None = None, gather_output: bool = True
                  ) -> ColumnParallelLinear:
        m = cls(full.in_features, full.out_features, full.bias is not None, gather_output, comm,
                device=full.weight.device, dtype=full.weight.dtype)
        m._load(full)
        return m

    def forward(self, x: Tensor) -> Tensor:
        y = F.linear(_CopyToParallel.apply(x, self.comm), self.weight, self.bias)
        return _GatherLastDim.apply(y, self.comm) if self.gather_output else y


class RowParallelLinear(Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True, comm: Communicator | None = None,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        c = get_communicator(comm)
        object.__setattr__(self, "comm", c)
        self.in_features, self.out_features = in_features, out_features
        _split(in_features, c, "RowParallelLinear in_features")
        self.bias: Parameter | None = None
        self._load(Linear(in_features, out_features, bias, device=device, dtype=dtype))

    def _load(self, full: Linear) -> None:
        self.weight = _shard_param(full.weight, 1, self.comm)
        self.bias = Parameter(full.bias.detach().clone()) if full.bias is not None else None

    @classmethod
    def from_full(cls, full: Linear, comm: Communicator | None = None) -> RowParallelLinear:
        m = cls(full.in_features, full.out_features, full.bias is not None, comm, device=full.weight.device,
                dtype=full.weight.dtype)
        m._load(full)
        return m

    def forward(self, x_parallel: Tensor) -> Tensor:
        y: Tensor = _ReduceFromParallel.apply(F.linear(x_parallel, self.weight), self.comm)
        return y + self.bias if self.bias is not None else y


class VocabParallelEmbedding(Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, comm: Communicator | None = None,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        c = get_communicator(comm)
        object.__setattr__(self, "comm", c)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.per_rank = _split(num_embeddings, c, "VocabParallelEmbedding num_embeddings")
        self.weight = _shard_param(Embedding(num_embeddings, embedding_dim, device=device, dtype=dtype).weight, 0, c)

    @classmethod
    def from_full(cls, full: Embedding, comm: Communicator | None = None) -> VocabParallelEmbedding:
        m = cls(full.num_embeddings, full.embedding_dim, comm, device=full.weight.device, dtype=full.weight.dtype)
        m.weight = _shard_param(full.weight, 0, m.comm)
        return m

    def forward(self, ids: Tensor) -> Tensor:
        host = ids.numpy().astype(np.int64)
        if host.size and (host.min() < 0 or host.max() >= self.num_embeddings):
            raise CommunicatorError(f"VocabParallelEmbedding: ids must be in [0, {self.num_embeddings})")
        lo = self.comm.rank * self.per_rank
        mine = (host >= lo) & (host < lo + self.per_rank)
        local = _creation.from_numpy(np.where(mine, host - lo, 0), device=self.weight.device)
        keep = _creation.from_host(mine[..., None], self.weight.dtype, self.weight.device)
        rows = F.embedding(local, self.weight) * keep  # other ranks' ids: zero rows, zero gradient
        return _ReduceFromParallel.apply(rows, self.comm)  # type: ignore[no-any-return]


def _heads(x: Tensor, heads: int) -> Tensor:
    b, t, d = x.shape
    return x.reshape(b, t, heads, d // heads).transpose(1, 2)


class ParallelSelfAttention(Module):
    """Multi-head self-attention with the heads split across ranks (Megatron): q, k and v are
    ColumnParallelLinear without gather, so rank r holds heads [r*H/N, (r+1)*H/N) of each; attention
    runs locally on those heads; the output projection is a RowParallelLinear over the concatenated
    local heads, whose SUM all-reduce assembles the full result. Input and output: (batch, seq, embed)."""

    def __init__(self, q: ColumnParallelLinear, k: ColumnParallelLinear, v: ColumnParallelLinear,
                 out: RowParallelLinear, num_heads: int, is_causal: bool = False) -> None:
        super().__init__()
        c = q.comm
        self.local_heads = _split(num_heads, c, "ParallelSelfAttention num_heads")
        self.q, self.k, self.v, self.out, self.is_causal = q, k, v, out, is_causal

    @classmethod
    def from_full(cls, q: Linear, k: Linear, v: Linear, out: Linear, num_heads: int, is_causal: bool = False,
                  comm: Communicator | None = None) -> ParallelSelfAttention:
        c = get_communicator(comm)
        def col(m: Linear) -> ColumnParallelLinear:
            return ColumnParallelLinear.from_full(m, c, gather_output=False)
        return cls(col(q), col(k), col(v), RowParallelLinear.from_full(out, c), num_heads, is_causal)

    def forward(self, x: Tensor) -> Tensor:
        h = self.local_heads
        o = F.scaled_dot_product_attention(_heads(self.q(x), h), _heads(self.k(x), h), _heads(self.v(x), h),
                                           is_causal=self.is_causal)
        b, _, t, hd = o.shape
        return self.out(o.transpose(1, 2).reshape(b, t, h * hd))  # type: ignore[no-any-return]
