"""What rumus.nn.functional re-exports from the nn-ops files (activations, dropout, embedding, losses,
attention, integer indexing), gathered in one place so functional.py imports them in one line."""

from .._indexing import gather, index_add, index_select, one_hot, scatter_add
from ._functional_act import (
    dropout, elu, embedding, erf, gelu, hardtanh, leaky_relu, logsigmoid, mish, relu6, silu, softplus,
)
from ._functional_attention import causal_mask, generate_square_subsequent_mask, scaled_dot_product_attention
from ._functional_loss import (
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss, nll_loss, smooth_l1_loss,
)

__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "causal_mask", "cross_entropy", "dropout", "elu",
    "embedding", "erf", "gather", "gelu", "generate_square_subsequent_mask", "hardtanh", "huber_loss", "index_add",
    "index_select", "leaky_relu", "logsigmoid", "mish", "nll_loss", "one_hot", "relu6", "scaled_dot_product_attention",
    "scatter_add", "silu", "smooth_l1_loss", "softplus",
]
