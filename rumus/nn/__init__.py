"""Neural-network layers with PyTorch's names, signatures, parameter names and layouts."""

from . import functional, init
from .activation import LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .containers import ModuleDict, ModuleList, Sequential
from .linear import Flatten, Identity, Linear
from .loss import L1Loss, MSELoss
from .module import Module
from .parameter import Buffer, Parameter

__all__ = ["Buffer", "Flatten", "Identity", "L1Loss", "Linear", "LogSoftmax", "MSELoss", "Module", "ModuleDict",
           "ModuleList", "Parameter", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh", "functional", "init"]
from ._layers_ext import *  # noqa: E402, F401, F403  (activations, losses, dropout, embedding, attention, transformer)
__all__ += _layers_ext.__all__  # type: ignore[name-defined]  # noqa: F405
from ._layers_cnn import *  # noqa: E402, F401, F403  (conv, pooling, normalization)
__all__ += _layers_cnn.__all__  # type: ignore[name-defined]  # noqa: F405
from ._layers_compat import *  # noqa: E402, F401, F403  (issue 12: recurrent layers, Dropout2d, decoder)
__all__ += _layers_compat.__all__  # type: ignore[name-defined]  # noqa: F405
