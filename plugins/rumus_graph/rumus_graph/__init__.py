"""rumus-graph: sparse graph ops, GNN layers and neighbour sampling for RUMUS, as a plugin package.

    import rumus as rm, rumus_graph as rg
    a = rg.SparseTensor.from_edge_index(edge_index, num_nodes=n)   # row = target, column = source
    h = rg.spmm(a, x)                                               # differentiable in a.values and x
    conv = rg.GCNConv(16, 32); out = conv(x, a)

The ops (graph_spmm, graph_spmm_t, graph_sddmm, graph_segment_*, graph_edge_softmax) are registered
through the entry point `graph` in group `rumus`, with C kernels for the CPU backend and WGSL kernels
for the WebGPU backend; `rumus conformance` checks them like the core's own ops.
"""

from .functional import (
    edge_softmax, expand_rows, gather_cols, scatter_max, scatter_mean, scatter_sum, sddmm, segment_argmax,
    segment_max, segment_mean, segment_sum, spmm,
)
from .nn import GATConv, GCNConv, SAGEConv, gcn_norm, mean_norm, with_self_loops
from .sampling import NeighborSampler, SampledSubgraph
from .sparse import SparseTensor
from .synthetic import SBMGraph, stochastic_block_model

__all__ = [
    "GATConv", "GCNConv", "NeighborSampler", "SAGEConv", "SBMGraph", "SampledSubgraph", "SparseTensor",
    "edge_softmax", "expand_rows", "gather_cols", "gcn_norm", "mean_norm", "scatter_max", "scatter_mean",
    "scatter_sum", "sddmm", "segment_argmax", "segment_max", "segment_mean", "segment_sum", "spmm",
    "stochastic_block_model", "with_self_loops",
]
__version__ = "0.1.0"
