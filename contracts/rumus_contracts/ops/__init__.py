"""The op schemas RUMUS itself defines; plugins add theirs through `rumus_register_ops`."""

from __future__ import annotations

from types import ModuleType

from ..onnx_lowering import attach_onnx_lowerings
from ..schema import OpRegistry
from . import (
    activation, elementwise, fixed, indexing, linalg, memory, nn, nn_conv, nn_norm, nn_pool, optim, quant, reduction,
    sorting, structural,
)
from . import amp, attention, cross_entropy, nn_linear, nn_rnn, softmax_backward

MODULES: tuple[ModuleType, ...] = (
    elementwise, reduction, linalg, memory, optim,  # the foundation
    fixed,  # fixed-point i16 engine
    quant,  # q8 blocks and int4 groups (SPEC C, D)
    activation, indexing, nn,  # nn stack: activations, embedding/gather, dropout, losses, attention
    nn_conv, nn_pool, nn_norm,  # nn stack: convolution, pooling, normalization
    nn_linear,  # a Linear layer with its bias as one op
    nn_rnn,  # one step of an Elman RNN as one op
    attention,  # fused FlashAttention forward and backward
    softmax_backward,  # fused softmax / log_softmax backward
    cross_entropy,  # fused cross-entropy forward / backward over class indices
    sorting,  # argsort (sort / topk are built from it in the core)
    structural,  # composites: tril, flip, roll, cumsum, norm, pad, interpolate ...
    amp,  # the loss scaler's device ops
)


def register_core_ops(registry: OpRegistry) -> None:
    for module in MODULES:
        module.register(registry)
    attach_onnx_lowerings(registry)  # each core op's schema.onnx (rumus_contracts/onnx_lowering/)
