"""RUMUS: PyTorch-style eager tensors with autograd on pluggable, inspectable backends.

    import rumus as rm
    x = rm.randn(3, 4, requires_grad=True)
    (x @ x.T).sum().backward()
"""

from __future__ import annotations

from rumus_contracts import (
    AutogradError, BackendUnavailable, Device, DeviceMismatch, DType, DTypeError, FormatError, KernelNotFound,
    RumusError, ShapeError, bfloat16, float16, float32, float64, int8, int16, int32, int64, uint8,
)
from rumus_contracts import bool_ as bool  # noqa: A001  (rumus.bool mirrors torch.bool)
from rumus_contracts import ArgumentTypeError, FileError, IndexOutOfRange, MissingFile, OutOfMemory  # noqa: F401

# First: the top of the core (it imports every op module). Importing the submodule binds rumus.tensor to
# the module; the function rumus.tensor(...) imported below must come after it to win that name.
from .tensor import Tensor
from . import _composites, ops  # noqa: F401  (registers composite implementations)
from ._creation import (
    arange, empty, empty_like, eye, from_numpy, full, full_like, linspace, ones, ones_like, rand, rand_like,
    randint, randn, randn_like, randperm, tensor, zeros, zeros_like,
)
from ._math import (
    abs, add, all, allclose, amax, amin, any, argmax, argmin, bmm, cat, clamp, clip, concat, cos, div, dot, eq,
    exp, ge, gt, isclose, le, log, log_softmax, logical_and, logical_not, logical_or, logsumexp, lt, matmul,
    max, maximum, mean, min, minimum, mm, mul, ne, neg, outer, pow, prod, reciprocal, relu, rsqrt, sigmoid,
    sign, sin, softmax, sqrt, square, stack, std, sub, sum, tanh, var, where,
)
from ._math import (  # the expression-table ops added for PyTorch users
    atan2, ceil, expm1, floor, floor_divide, fmod, isfinite, isinf, isnan, log1p, logaddexp, logical_xor, remainder,
    round, trunc,
)
from ._runtime import default_device, set_default_device
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .autograd import formulas as _formulas  # noqa: F401  (registers backward formulas)
from .autograd import formulas_nn as _formulas_nn  # noqa: F401  (conv, pooling, normalization)
from .autograd import formulas_act_index as _formulas_act_index  # noqa: F401  (activations, dropout, indexing)
from .autograd import formulas_attention as _formulas_attention  # noqa: F401  (flash_attention)
from .autograd import formulas_loss as _formulas_loss  # noqa: F401  (fused cross-entropy)
from .random import Generator, initial_seed, manual_seed

__version__ = "0.1.0"


def device(spec: str) -> Device:
    return Device.parse(spec)


def synchronize(dev: str | Device | None = None) -> None:
    """Wait for everything queued on the device (GPU backends record work and run it lazily)."""
    from . import _runtime
    d = Device.parse(dev) if dev is not None else _runtime.default_device()
    _runtime.backend(d.backend).synchronize(d)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    return x.flatten(start_dim, end_dim)


def reshape(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    return x.reshape(shape)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    return x.transpose(dim0, dim1)


def permute(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    return x.permute(dims)


def squeeze(x: Tensor, dim: int | None = None) -> Tensor:
    return x.squeeze(dim)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    return x.unsqueeze(dim)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    return x.chunk(chunks, dim)


def split(x: Tensor, split_size: int, dim: int = 0) -> tuple[Tensor, ...]:
    return x.split(split_size, dim)


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    return x.narrow(dim, start, length)


def clone(x: Tensor) -> Tensor:
    return x.clone()


def numel(x: Tensor) -> int:
    return x.numel()



from . import data, fixed, io, nn, onnx, optim  # noqa: E402
from . import train, utils  # noqa: E402  (issue 4: Trainer, checkpoint; train imports optim.lr_scheduler)
from . import quant  # noqa: E402,F401  (issue 15: q8 / int4 weights, RTN / GPTQ / AWQ)
from . import amp  # noqa: E402,F401  (issue 13: autocast, GradScaler, master weights)
from .amp import autocast  # noqa: E402,F401
from . import distributed  # noqa: E402,F401  (issue 17: rm.distributed as torch.distributed; mpi4py only on init_mpi)
from ._indexing import gather, index_add, index_select, one_hot, scatter_add  # noqa: E402, F401
from .nn.functional import one_hot  # noqa: E402, F811  (the checked one: refuses out-of-range classes)
from ._tensor_methods_torch import install as _install_torch_names  # noqa: E402

_install_torch_names(globals())  # rumus.float/long/..., cuda, tril, einsum, ...; Tensor.new_zeros, .norm, ...

from .compile import compile  # noqa: E402  (issue 16: capture once, replay without Python, fuse)

save = io.save  # whole checkpoints; rumus.load also reads torch.save and safetensors files
load = io.load

__all__ = [
    'AutogradError', 'BackendUnavailable', 'DType', 'DTypeError', 'Device', 'DeviceMismatch', 'FormatError',
    'Generator', 'KernelNotFound', 'RumusError', 'ShapeError', 'Tensor', 'abs', 'add', 'all', 'allclose',
    'amax', 'amin', 'amp', 'any', 'arange', 'argmax', 'argmin', 'autocast', 'autograd', 'bfloat16', 'bmm', 'bool',
    'cat', 'chunk', 'clamp', 'clip', 'clone', 'compile', 'concat', 'cos', 'data', 'default_device', 'device', 'div',
    'dot',
    'empty', 'empty_like', 'enable_grad', 'eq', 'exp', 'eye', 'fixed', 'flatten', 'float16', 'float32',
    'float64', 'from_numpy', 'full', 'full_like', 'ge', 'gt', 'inference_mode', 'initial_seed', 'int16',
    'int32', 'int64', 'int8', 'io', 'is_grad_enabled', 'isclose', 'le', 'linspace', 'load', 'log',
    'log_softmax', 'logical_and', 'logical_not', 'logical_or', 'logsumexp', 'lt', 'manual_seed', 'matmul',
    'max', 'maximum', 'mean', 'min', 'minimum', 'mm', 'mul', 'narrow', 'ne', 'neg', 'nn', 'no_grad', 'numel',
    'ones', 'ones_like', 'ops', 'optim', 'outer', 'permute', 'pow', 'prod', 'rand', 'rand_like', 'randint',
    'randn', 'randn_like', 'random', 'randperm', 'reciprocal', 'relu', 'reshape', 'rsqrt', 'save',
    'set_default_device', 'set_grad_enabled', 'sigmoid', 'sign', 'sin', 'softmax', 'split', 'sqrt', 'square',
    'squeeze', 'stack', 'std', 'sub', 'sum', 'synchronize', 'tanh', 'tensor', 'transpose', 'uint8',
    'unsqueeze', 'var', 'where', 'zeros', 'zeros_like',
    'atan2', 'ceil', 'expm1', 'floor', 'floor_divide', 'fmod', 'isfinite', 'isinf', 'isnan', 'log1p', 'logaddexp',
    'logical_xor',
    'remainder', 'round', 'trunc',
]
