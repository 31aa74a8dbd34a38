"""RUMUS: PyTorch-style eager tensors with autograd on pluggable, inspectable backends.

    import rumus as rm
    x = rm.randn(3, 4, requires_grad=True)
    (x @ x.T).sum().backward()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Re-exports are written `name as name` or star-imported from a module with __all__: both are public to
# mypy --strict (no implicit re-export) and to IDEs.
from rumus_contracts import (
    AutogradError as AutogradError, BackendUnavailable as BackendUnavailable, Device as Device,
    DeviceMismatch as DeviceMismatch, DType as DType, DTypeError as DTypeError, FormatError as FormatError,
    KernelNotFound as KernelNotFound, RumusError as RumusError, ShapeError as ShapeError,
    bfloat16 as bfloat16, float16 as float16, float32 as float32, float64 as float64, int8 as int8, int16 as int16,
    int32 as int32, int64 as int64, uint8 as uint8,
)
from rumus_contracts import bool_
from rumus_contracts import (
    ArgumentTypeError as ArgumentTypeError, FileError as FileError, IndexOutOfRange as IndexOutOfRange,
    MissingFile as MissingFile, OutOfMemory as OutOfMemory,
)

# First: the top of the core (it imports every op module). Importing the submodule binds rumus.tensor to
# the module; the function rumus.tensor(...) star-imported below must come after it to win that name.
from .tensor import Tensor as Tensor
from . import _composites, autograd, ops, random  # noqa: F401  (_composites registers composite implementations)
# The op families: each module's __all__ is its public names, so a new op is public where it is written.
from . import _creation, _math
from ._creation import *  # noqa: F403
from ._math import *  # noqa: F403
from ._runtime import default_device as default_device, set_default_device as set_default_device
from .autograd import (
    enable_grad as enable_grad, inference_mode as inference_mode, is_grad_enabled as is_grad_enabled,
    no_grad as no_grad, set_grad_enabled as set_grad_enabled,
)
from .autograd import formulas as _formulas  # noqa: F401  (registers backward formulas)
from .autograd import formulas_nn as _formulas_nn  # noqa: F401  (conv, pooling, normalization)
from .autograd import formulas_act_index as _formulas_act_index  # noqa: F401  (activations, dropout, indexing)
from .autograd import formulas_attention as _formulas_attention  # noqa: F401  (flash_attention)
from .autograd import formulas_loss as _formulas_loss  # noqa: F401  (fused cross-entropy)
from . import decompositions as _decompositions  # noqa: F401  (registers the non-primitive ops' decompositions)
from .random import Generator as Generator, initial_seed as initial_seed, manual_seed as manual_seed

__version__ = "0.1.0"
bool = bool_  # noqa: A001  (rumus.bool mirrors torch.bool; an assignment, since `bool_ as bool` is no re-export)


def device(spec: str) -> Device:
    """Parse a device string such as "cpu", "wgpu" or "wgpu:1" into a Device."""
    return Device.parse(spec)


def synchronize(dev: str | Device | None = None) -> None:
    """Wait for everything queued on the device (GPU backends record work and run it lazily)."""
    from . import _runtime
    d = Device.parse(dev) if dev is not None else _runtime.default_device()
    _runtime.backend(d.backend).synchronize(d)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """A view (or copy when strides require it) of `x` with dims `start_dim` to `end_dim` merged into one."""
    return x.flatten(start_dim, end_dim)


def reshape(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """`x` with a new shape (one dim may be -1): a view when the strides allow, else a copy."""
    return x.reshape(shape)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """A view of `x` with dims `dim0` and `dim1` swapped."""
    return x.transpose(dim0, dim1)


def permute(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    """A view of `x` with its dims reordered by `dims`."""
    return x.permute(dims)


def squeeze(x: Tensor, dim: int | None = None) -> Tensor:
    """A view of `x` without its size-1 dims (only `dim`, when given)."""
    return x.squeeze(dim)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """A view of `x` with a size-1 dim inserted at `dim`."""
    return x.unsqueeze(dim)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """Split `x` into `chunks` views of (nearly) equal size along `dim`, as torch.chunk."""
    return x.chunk(chunks, dim)


def split(x: Tensor, split_size: int, dim: int = 0) -> tuple[Tensor, ...]:
    """Split `x` into views of `split_size` elements along `dim` (the last may be smaller)."""
    return x.split(split_size, dim)


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A view of `length` elements of `x` along `dim`, from `start`, as torch.narrow."""
    return x.narrow(dim, start, length)


def clone(x: Tensor) -> Tensor:
    """A copy of `x` with its own storage; gradients flow back to `x`."""
    return x.clone()


def numel(x: Tensor) -> int:
    """The number of elements of `x`."""
    return x.numel()



from . import data, fixed, io, nn, onnx, optim  # noqa: E402
from . import train, utils  # noqa: E402  (Trainer, checkpoint; train imports optim.lr_scheduler)
from . import quant  # noqa: E402,F401  (q8 / int4 weights, RTN / GPTQ / AWQ)
from . import amp  # noqa: E402,F401  (autocast, GradScaler, master weights)
from .amp import autocast as autocast  # noqa: E402
from . import distributed  # noqa: E402,F401  (rm.distributed as torch.distributed; mpi4py only on init_mpi)
from ._indexing import gather, index_add, index_select, one_hot, scatter_add  # noqa: E402, F401
from .nn.functional import one_hot  # noqa: E402, F811  (the checked one: refuses out-of-range classes)
from ._tensor_methods_torch import install as _install_torch_names  # noqa: E402

_install_torch_names(globals())  # rumus.float/long/..., cuda, tril, einsum, ...; Tensor.new_zeros, .norm, ...

from .compile import compile as compile  # noqa: E402  (capture once, replay without Python, fuse)

from . import serialization  # noqa: E402,F401  (torch.serialization's path)
from . import distributions  # noqa: E402,F401  (torch.distributions)
from . import multiprocessing  # noqa: E402,F401  (torch.multiprocessing: shared-memory tensors between processes)
from . import linalg  # noqa: E402,F401  (torch.linalg: decompositions and solves with autograd, norms)
globals().update(linalg.TORCH_ALIASES)  # torch.det, torch.inverse, torch.svd (U, S, V), ...
save = io.save  # whole checkpoints; rumus.load also reads torch.save and safetensors files
load = io.load
from ._torch_corpus_additions import install as _install_corpus_additions  # noqa: E402

_install_corpus_additions(globals())  # torch.normal, nn.utils.weight_norm, ... (the corpus programs' names)

# `from rumus import *`: the names above plus each family's (a run-time list: mypy reads the `as` and star
# imports instead, since it takes only a literal __all__ and would hide every name missing from it).
if not TYPE_CHECKING:
    __all__ = [
        'ArgumentTypeError', 'AutogradError', 'BackendUnavailable', 'DType', 'DTypeError', 'Device',
        'DeviceMismatch', 'FileError', 'FormatError', 'Generator', 'IndexOutOfRange', 'KernelNotFound',
        'MissingFile', 'OutOfMemory', 'RumusError', 'ShapeError', 'Tensor', 'amp', 'autocast', 'autograd',
        'bfloat16', 'bool', 'chunk', 'clone', 'compile', 'data', 'default_device', 'device', 'enable_grad', 'fixed',
        'flatten', 'float16', 'float32', 'float64', 'inference_mode', 'initial_seed', 'int16', 'int32', 'int64',
        'int8', 'io', 'is_grad_enabled', 'load', 'manual_seed', 'narrow', 'nn', 'no_grad', 'numel', 'ops', 'optim',
        'permute', 'random', 'reshape', 'save', 'set_default_device', 'set_grad_enabled', 'split', 'squeeze',
        'synchronize', 'transpose', 'uint8', 'unsqueeze', *_creation.__all__, *_math.__all__,
    ]
