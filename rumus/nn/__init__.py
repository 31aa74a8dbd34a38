"""Neural-network layers with PyTorch's names, signatures, parameter names and layouts, imported by name
from the file of each family (the names are the public API: tests/nn/test_public_names.py)."""

from . import functional, init, utils
from .activation import (
    CELU, ELU, GELU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish, ReLU, ReLU6,
    Sigmoid, SiLU, Softmax, Softplus, Softsign, Tanh, Tanhshrink,
)
from .attention import KVCache, MultiheadAttention
from .containers import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose2d
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from .linear import Flatten, Identity, Linear
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm
from .parameter import Buffer, Parameter
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .sparse import Embedding
from .transformer import TransformerBlock, TransformerEncoder, TransformerEncoderLayer
from .transformer_decoder import Transformer, TransformerDecoder, TransformerDecoderLayer

__all__ = [
    "functional", "init", "utils",
    # modules and parameters
    "Buffer", "Module", "ModuleDict", "ModuleList", "Parameter", "Sequential",
    # activations
    "CELU", "ELU", "GELU", "SELU", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU", "LogSigmoid", "LogSoftmax",
    "Mish", "ReLU", "ReLU6", "SiLU", "Sigmoid", "Softmax", "Softplus", "Softsign", "Tanh", "Tanhshrink",
    # linear, convolution, pooling, normalization, dropout, embedding
    "Flatten", "Identity", "Linear", "Conv1d", "Conv2d", "ConvTranspose2d", "AdaptiveAvgPool2d", "AvgPool2d",
    "MaxPool2d", "BatchNorm1d", "BatchNorm2d", "GroupNorm", "LayerNorm", "RMSNorm", "Dropout", "Dropout1d",
    "Dropout2d", "Dropout3d", "Embedding",
    # losses
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "L1Loss", "MSELoss", "NLLLoss", "SmoothL1Loss",
    # attention, transformers, recurrent layers
    "KVCache", "MultiheadAttention", "TransformerBlock", "TransformerEncoder", "TransformerEncoderLayer",
    "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "GRU", "LSTM", "RNN", "GRUCell", "LSTMCell",
    "RNNBase", "RNNCell", "RNNCellBase",
]
