"""RUMUS ports: what the core, every backend, every plugin and the conformance suite rely on."""

from .backend import Backend, Capabilities, Kernel, ShaderKernel, callable_kernel
from .communicator import Communicator, CommunicatorError, ReduceOp, Work
from .device import Device
from .dtype import (
    FLOAT_DTYPES, PLAIN_DTYPES, DType, bfloat16, bool_, fixed_i16, float16, float32, float64,
    from_numpy_dtype, int4, int8, int16, int32, int64, parse_dtype, promote, q8, uint8,
)
from .errors import (
    AutogradError, BackendUnavailable, DeviceMismatch, DTypeError, FormatError, KernelNotFound,
    PluginError, RumusError, ShapeError,
)
from .errors import ArgumentTypeError, FileError, IndexOutOfRange, MissingFile, OutOfMemory
from .hookspecs import hookimpl, hookspec
from .plugins import Candidate, LoadedPlugins, load_plugins
from .primitives import PRIMITIVES
from .registry import BackendRegistry, ChooseByShape, KernelEntry, KernelRegistry
from .schema import ErrorSample, OpRegistry, OpSchema, Sample
from .tensor_arg import TensorArg, contiguous_strides

__all__ = [
    "AutogradError", "Backend", "BackendRegistry", "BackendUnavailable", "Candidate", "Capabilities", "ChooseByShape",
    "DType", "DTypeError", "Device", "DeviceMismatch", "ErrorSample", "FLOAT_DTYPES", "FormatError", "Kernel",
    "KernelEntry", "KernelNotFound", "KernelRegistry", "LoadedPlugins", "OpRegistry", "OpSchema",
    "PLAIN_DTYPES", "PluginError", "RumusError", "Sample", "ShaderKernel", "ShapeError", "TensorArg",
    "bfloat16", "bool_", "callable_kernel", "contiguous_strides", "fixed_i16", "float16", "float32", "float64",
    "from_numpy_dtype", "hookimpl", "hookspec", "int16", "int32", "int4", "int64", "int8",
    "load_plugins", "parse_dtype", "promote", "q8", "uint8",
    "ArgumentTypeError", "FileError", "IndexOutOfRange", "MissingFile", "OutOfMemory",
]
__all__ += ["Communicator", "CommunicatorError", "ReduceOp", "Work"]
__all__ += ["PRIMITIVES"]
