"""Graph layers with PyTorch Geometric's parameter names (a PyG state dict's tensors fit them).

    GCNConv   lin.weight, bias                       symmetric normalisation with self loops
    SAGEConv  lin_l.weight, lin_l.bias, lin_r.weight  mean (or sum / max) aggregation of neighbours
    GATConv   lin.weight, att_src, att_dst, bias     heads, concat, leaky_relu(0.2), edge softmax

`forward(x, graph)` takes a SparseTensor in graph convention (row = target, column = source) or a
PyG edge_index (2, E). The normalised adjacency each layer needs is built on the host once per graph
object and cached on the layer (the last graph seen), so a full-batch loop builds it once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import rumus as rm
from rumus import nn
from rumus_contracts import RumusError

from .functional import edge_softmax, expand_rows, gather_cols, scatter_max, spmm
from .sparse import SparseTensor


def as_graph(graph: Any, num_nodes: int, device: Any, dtype: Any) -> SparseTensor:
    if isinstance(graph, SparseTensor):
        if graph.shape != (num_nodes, num_nodes):
            raise RumusError(f"the graph is {graph.shape} but x has {num_nodes} nodes")
        return graph
    return SparseTensor.from_edge_index(graph, num_nodes=num_nodes, dtype=dtype, device=device)


def _host_values(a: SparseTensor, who: str) -> np.ndarray:
    if a.values.requires_grad:
        raise RumusError(f"{who} normalises the edge weights on the host, so they cannot require grad; pass "
                         f"values.detach() or normalise them yourself with rumus ops")
    return np.asarray(a.values.detach().numpy(), np.float64)


def with_self_loops(a: SparseTensor, fill: float = 1.0, keep_existing: bool = True) -> SparseTensor:
    """A + fill * I, where a node that already has a self loop keeps it (PyG's add_remaining_self_loops)
    or, with keep_existing=False, loses it first (PyG's remove_self_loops + add_self_loops)."""
    row, col = a.coo()
    vals = _host_values(a, "with_self_loops")
    loop = row == col
    n = a.shape[0]
    has = np.zeros(n, bool)
    if keep_existing:
        has[row[loop]] = True
    else:
        row, col, vals = row[~loop], col[~loop], vals[~loop]
    add = np.flatnonzero(~has)
    return SparseTensor.from_coo(np.concatenate([row, add]), np.concatenate([col, add]),
                                 np.concatenate([vals, np.full(add.size, fill)]), a.shape, a.values.dtype, a.device)


def gcn_norm(a: SparseTensor, add_self_loops: bool = True, improved: bool = False) -> SparseTensor:
    """D^-1/2 (A + I) D^-1/2 with D the row sums (in-degrees) of A + I, as PyG's gcn_norm."""
    if add_self_loops:
        a = with_self_loops(a, 2.0 if improved else 1.0)
    row, col = a.coo()
    vals = _host_values(a, "gcn_norm")
    deg = np.bincount(row, weights=vals, minlength=a.shape[0])
    with np.errstate(divide="ignore"):
        dinv = np.where(deg > 0, 1.0 / np.sqrt(deg), 0.0)
    return a.with_values(rm.tensor(dinv[row] * vals * dinv[col], dtype=a.values.dtype, device=a.device))


def mean_norm(a: SparseTensor) -> SparseTensor:
    """Each row's values divided by the row's entry count: A @ x is then the mean over neighbours."""
    row, _ = a.coo()
    vals = _host_values(a, "mean_norm")
    deg = np.maximum(a.degree(1), 1)
    return a.with_values(rm.tensor(vals / deg[row], dtype=a.values.dtype, device=a.device))


class _GraphCache:
    """The derived adjacency of the last graph object a layer saw."""

    def __init__(self) -> None:
        self._key: Any = None
        self._value: SparseTensor | None = None

    def get(self, graph: Any, build: Any) -> SparseTensor:
        if self._value is None or self._key is not graph:
            self._value, self._key = build(), graph
        return self._value


def _glorot(t: rm.Tensor, fan_in: int, fan_out: int) -> None:
    bound = math.sqrt(6.0 / max(fan_in + fan_out, 1))
    nn.init.uniform_(t, -bound, bound)


class GCNConv(nn.Module):
    """x' = D^-1/2 (A + I) D^-1/2 x W^T + b (Kipf & Welling); PyG's names lin.weight and bias."""

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False, add_self_loops: bool = True,
                 normalize: bool = True, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.add_self_loops, self.normalize = improved, add_self_loops, normalize
        self.lin = nn.Linear(in_channels, out_channels, bias=False, device=device, dtype=dtype)
        self.bias: nn.Parameter | None
        if bias:
            self.bias = nn.Parameter(rm.zeros(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self._cache = _GraphCache()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _glorot(self.lin.weight, self.in_channels, self.out_channels)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: rm.Tensor, graph: Any) -> rm.Tensor:
        def build() -> SparseTensor:
            a = as_graph(graph, x.shape[0], x.device, x.dtype)
            return gcn_norm(a, self.add_self_loops, self.improved) if self.normalize else a
        out = spmm(self._cache.get(graph, build), self.lin(x))
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"


class SAGEConv(nn.Module):
    """x'_i = lin_l(aggr_{j -> i} x_j) + lin_r(x_i) (Hamilton et al.); PyG's names lin_l (with the bias), lin_r."""

    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean", normalize: bool = False,
                 root_weight: bool = True, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if aggr not in ("mean", "sum", "max"):
            raise RumusError(f"SAGEConv: aggr must be 'mean', 'sum' or 'max', got {aggr!r}")
        self.in_channels, self.out_channels, self.aggr = in_channels, out_channels, aggr
        self.normalize, self.root_weight = normalize, root_weight
        self.lin_l = nn.Linear(in_channels, out_channels, bias=bias, device=device, dtype=dtype)
        self.lin_r: nn.Linear | None = (nn.Linear(in_channels, out_channels, bias=False, device=device, dtype=dtype)
                                        if root_weight else None)
        self._cache = _GraphCache()

    def forward(self, x: rm.Tensor, graph: Any) -> rm.Tensor:
        def build() -> SparseTensor:
            a = as_graph(graph, x.shape[0], x.device, x.dtype)
            return mean_norm(a) if self.aggr == "mean" else a
        a = self._cache.get(graph, build)
        if self.aggr == "max":
            row, _ = a.coo()
            agg = scatter_max(gather_cols(a, x), row, dim_size=a.shape[0])
        else:
            agg = spmm(a, x)
        out: rm.Tensor = self.lin_l(agg)
        if self.lin_r is not None:
            out = out + self.lin_r(x)
        if self.normalize:
            out = out / out.norm(dim=-1, keepdim=True).clamp(min=1e-12)
        return out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, aggr={self.aggr}"


class GATConv(nn.Module):
    """Graph attention (Velickovic et al.) with PyG's names: lin.weight (heads*out, in), att_src and att_dst
    (1, heads, out), bias. alpha_ij = softmax_j(leaky_relu(att_src.h_j + att_dst.h_i, 0.2)) over the edges
    arriving at i (self loops added); heads are concatenated (concat=True) or averaged."""

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in_channels, self.out_channels, self.heads, self.concat = in_channels, out_channels, heads, concat
        self.negative_slope, self.dropout, self.add_self_loops = negative_slope, dropout, add_self_loops
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False, device=device, dtype=dtype)
        self.att_src = nn.Parameter(rm.empty(1, heads, out_channels, device=device, dtype=dtype))
        self.att_dst = nn.Parameter(rm.empty(1, heads, out_channels, device=device, dtype=dtype))
        self.bias: nn.Parameter | None
        if bias:
            self.bias = nn.Parameter(rm.zeros(heads * out_channels if concat else out_channels, device=device,
                                              dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self._cache = _GraphCache()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _glorot(self.lin.weight, self.in_channels, self.heads * self.out_channels)
        _glorot(self.att_src, self.heads, self.out_channels)
        _glorot(self.att_dst, self.heads, self.out_channels)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: rm.Tensor, graph: Any) -> rm.Tensor:
        n, heads, c = x.shape[0], self.heads, self.out_channels

        def build() -> SparseTensor:
            a = as_graph(graph, n, x.device, x.dtype)
            return with_self_loops(a, keep_existing=False) if self.add_self_loops else a
        a = self._cache.get(graph, build)
        h = self.lin(x).reshape(n, heads, c)
        a_src = (h * self.att_src).sum(-1)  # (n, heads)
        a_dst = (h * self.att_dst).sum(-1)
        logits = nn.functional.leaky_relu(gather_cols(a, a_src) + expand_rows(a, a_dst), self.negative_slope)
        alpha = edge_softmax(a, logits)  # (nnz, heads)
        if self.dropout > 0 and self.training:
            alpha = nn.functional.dropout(alpha, self.dropout, training=True)
        outs = [spmm(a.with_values(alpha[:, k].contiguous()), h[:, k, :].contiguous()) for k in range(heads)]
        out = rm.stack(outs, 1)  # (n, heads, c)
        out = out.reshape(n, heads * c) if self.concat else out.mean(1)
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
