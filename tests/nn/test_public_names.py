"""rumus.nn and rumus.nn.functional still export every name they exported when their families were gathered by
re-export shims (`_layers_ext`, `_functional_ext`, removed): a name dropped by accident fails here. New names
need no entry when they are RUMUS ops or PyTorch's names at the same path: they arrive from their family's
__all__ (tests/core/test_family_exports.py). Any other new public name of rumus, rumus.nn or
rumus.nn.functional (in __all__ or only an attribute) is taken for a helper that leaked, until it is listed here."""

import importlib.util
import types
from pathlib import Path

import pytest
import torch

import rumus as rm
import rumus.nn as nn
import rumus.nn.functional as F
from rumus_contracts import OpRegistry
from rumus_contracts.ops import register_core_ops

NN_NAMES = {
    "AdaptiveAvgPool2d", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d", "Buffer", "CELU",
    "Conv1d", "Conv2d", "ConvTranspose2d", "CrossEntropyLoss", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "ELU",
    "Embedding", "Flatten", "GELU", "GRU", "GRUCell", "GroupNorm", "Hardsigmoid", "Hardswish", "Hardtanh", "HuberLoss",
    "Identity", "KVCache", "L1Loss", "LSTM", "LSTMCell", "LayerNorm", "LeakyReLU", "Linear", "LogSigmoid", "LogSoftmax",
    "MSELoss", "MaxPool2d", "Mish", "Module", "ModuleDict", "ModuleList", "MultiheadAttention", "NLLLoss", "Parameter",
    "RMSNorm", "RNN", "RNNBase", "RNNCell", "RNNCellBase", "ReLU", "ReLU6", "SELU", "Sequential", "SiLU", "Sigmoid",
    "SmoothL1Loss", "Softmax", "Softplus", "Softsign", "Tanh", "Tanhshrink", "Transformer", "TransformerBlock",
    "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer", "functional",
    "init", "utils",
}

F_NAMES = {
    "adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "causal_mask", "celu", "conv1d", "conv2d", "conv_transpose2d", "cosine_similarity", "cross_entropy", "dropout",
    "dropout1d", "dropout2d", "dropout3d", "elu", "embedding", "erf", "gather", "gelu",
    "generate_square_subsequent_mask", "group_norm", "hardsigmoid", "hardswish", "hardtanh", "huber_loss",
    "index_add", "index_select", "interpolate", "kl_div", "l1_loss", "layer_norm", "leaky_relu", "linear",
    "log_softmax", "logsigmoid", "max_pool2d", "mish", "mse_loss", "nll_loss", "normalize", "one_hot", "pad",
    "pairwise_distance", "reduce_loss", "relu", "relu6", "rms_norm", "scaled_dot_product_attention", "scatter_add",
    "selu", "sigmoid", "silu", "smooth_l1_loss", "softmax", "softplus", "softsign", "tanh", "tanhshrink", "upsample",
}


def test_nn_keeps_its_names_and_lists_every_public_layer():
    assert len(nn.__all__) == len(set(nn.__all__)), "a name is listed twice in rumus.nn.__all__"
    assert NN_NAMES <= set(nn.__all__), f"dropped: {sorted(NN_NAMES - set(nn.__all__))}"
    namespace: dict[str, object] = {}
    exec("from rumus.nn import *", namespace)
    assert set(nn.__all__) <= set(namespace)
    classes = {n for n in dir(nn) if not n.startswith("_") and isinstance(getattr(nn, n), type)}
    assert classes == set(nn.__all__) - {"functional", "init", "utils"}  # every public class is listed


def test_nn_functional_keeps_its_functions_and_lists_every_public_one():
    assert len(F.__all__) == len(set(F.__all__)), "a name is listed twice in rumus.nn.functional.__all__"
    assert F_NAMES <= set(F.__all__), f"dropped: {sorted(F_NAMES - set(F.__all__))}"
    public = {n for n in dir(F) if not n.startswith("_") and callable(getattr(F, n)) and
              getattr(getattr(F, n), "__module__", "").startswith("rumus")}
    assert public - {"Tensor", "ShapeError"} == set(F.__all__)  # nothing else public (those two are used here)
    assert all(callable(getattr(F, n)) for n in F.__all__)


# public on purpose, though neither recorded above (or in test_family_exports.RM_NAMES), nor a RUMUS op, nor
# PyTorch's name at the same path
ALSO_PUBLIC = {
    "rumus": {"ArgumentTypeError", "FileError", "IndexOutOfRange", "MissingFile", "OutOfMemory",  # error types
              "bool_", "float_",  # dtype spellings: rumus_contracts' and numpy's
              "one_hot"},  # rumus.nn.functional.one_hot, the checked one, at the top too
    "rumus.nn.functional": {"ShapeError"},  # raised by its functions
    "rumus.nn": set(),
}
SKIPPED_TYPES = ("typing", "__future__")  # `TYPE_CHECKING`, `annotations`, `Any`: module-level plumbing


def leaked_names(namespace: types.ModuleType, torch_namespace: types.ModuleType, recorded: set[str]) -> list[str]:
    """Public names of `namespace`, in its __all__ or only an attribute, that are none of: recorded, in
    ALSO_PUBLIC, a RUMUS op, a name `torch_namespace` has, a module."""
    registry = OpRegistry()
    register_core_ops(registry)
    known = recorded | ALSO_PUBLIC[namespace.__name__] | set(registry.names())
    out = []
    for name in sorted(set(dir(namespace)) | set(namespace.__all__)):
        obj = getattr(namespace, name, None)
        if name.startswith("_") or name in known or isinstance(obj, types.ModuleType) or hasattr(torch_namespace, name):
            continue
        plumbing = name == "TYPE_CHECKING" or getattr(obj, "__module__", "") in SKIPPED_TYPES
        if plumbing and name not in namespace.__all__:
            continue
        out.append(name)
    return out


def _rm_names() -> set[str]:
    """tests/core/test_family_exports.py's RM_NAMES (the rumus.* names none may drop), read from its file."""
    path = Path(__file__).parents[1] / "core" / "test_family_exports.py"
    spec = importlib.util.spec_from_file_location("_family_exports_names", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.RM_NAMES)


@pytest.mark.parametrize(("namespace", "torch_namespace"), [(rm, torch), (F, torch.nn.functional), (nn, torch.nn)],
                         ids=["rumus", "rumus.nn.functional", "rumus.nn"])
def test_no_helper_leaks_into_the_public_namespaces(namespace: types.ModuleType,
                                                    torch_namespace: types.ModuleType) -> None:
    recorded = {"rumus": _rm_names(), "rumus.nn.functional": F_NAMES, "rumus.nn": NN_NAMES}[namespace.__name__]
    leaked = leaked_names(namespace, torch_namespace, recorded)
    assert not leaked, (f"{namespace.__name__} has public names that are no op, no PyTorch name and not listed in "
                        f"tests/nn/test_public_names.py (a helper that leaked? else list it there): {leaked}")


def test_one_hot_is_the_checked_wrapper():
    # functional.one_hot refuses out-of-range classes; the core _indexing.one_hot it wraps does not check
    assert F.one_hot.__module__ == "rumus.nn.functional"
