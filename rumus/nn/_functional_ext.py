"""What rumus.nn.functional re-exports from the nn-ops files (activations, dropout, embedding, losses,
attention, integer indexing), gathered in one place so functional.py imports them in one line."""

from .._indexing import gather, index_add, index_select, one_hot, scatter_add
from ._functional_act import (
    celu, dropout, elu, embedding, erf, gelu, hardsigmoid, hardswish, hardtanh, leaky_relu, logsigmoid, mish, relu6,
    selu, silu, softplus, softsign, tanhshrink,
)
from ._functional_attention import causal_mask, generate_square_subsequent_mask, scaled_dot_product_attention
from ._functional_loss import (
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss, nll_loss, smooth_l1_loss,
)

__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "causal_mask", "cross_entropy", "gather",
    "generate_square_subsequent_mask", "huber_loss", "index_add", "index_select", "nll_loss", "one_hot",
    "scaled_dot_product_attention", "scatter_add", "smooth_l1_loss",
    "celu", "dropout", "elu", "embedding", "erf", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu",
    "logsigmoid", "mish", "relu6", "selu", "silu", "softplus", "softsign", "tanhshrink",
]
