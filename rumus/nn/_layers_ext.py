"""The layers rumus.nn re-exports from the nn-ops files (activations, losses, dropout, embedding,
attention, transformer) plus rumus.nn.utils, gathered so rumus/nn/__init__.py imports them in one line."""

from . import utils
from .activation import (
    CELU, ELU, GELU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, Mish, ReLU6, SiLU, Softplus,
    Softsign, Tanhshrink,
)
from .attention import KVCache, MultiheadAttention
from .dropout import Dropout
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, NLLLoss, SmoothL1Loss
from .sparse import Embedding
from .transformer import TransformerBlock, TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "Dropout", "ELU", "Embedding", "GELU", "HuberLoss",
    "KVCache", "LeakyReLU", "Mish", "MultiheadAttention", "NLLLoss", "ReLU6", "SiLU", "SmoothL1Loss", "Softplus",
    "TransformerBlock", "TransformerEncoder", "TransformerEncoderLayer", "utils",
    "CELU", "SELU", "Hardsigmoid", "Hardswish", "Hardtanh", "LogSigmoid", "Softsign", "Tanhshrink",
]
