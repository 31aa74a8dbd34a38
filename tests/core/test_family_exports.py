"""rumus.*, rumus.nn and rumus.nn.functional take their names from the op families' __all__ (star imports), so an op is
public in the file where it is written. Checked here: every family name arrives in its namespace as the same
object, nothing private leaks through a family's __all__, every star-imported family is in the namespace's
__all__, and an op function written in a family but left out of its __all__ is caught."""

import ast
import importlib
import inspect
import typing
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import rumus as rm
import rumus.nn as nn
import rumus.nn.functional as F
from rumus import _creation, _math
from rumus_contracts import OpRegistry
from rumus_contracts.ops import register_core_ops

FAMILIES: list[tuple[ModuleType, ModuleType]] = [
    (rm, _creation), (rm, _math), *((F, family) for family in F._FAMILIES), *((nn, family) for family in nn._FAMILIES)]
# rumus.sum, rumus.prod, rumus.where, rumus.maximum and rumus.minimum are replaced by PyTorch's dtype rules
# (rumus/_tensor_methods_torch.py, rumus/_torch_functions.py: bool operands stay bool)
REPLACED = {(rm, "sum"), (rm, "prod"), (rm, "where"), (rm, "maximum"), (rm, "minimum")}
# rumus.* names of the old hand-written list: none may be dropped
RM_NAMES = {
    "AutogradError", "BackendUnavailable", "DType", "DTypeError", "Device", "DeviceMismatch", "FormatError",
    "Generator", "KernelNotFound", "RumusError", "ShapeError", "Tensor", "abs", "add", "all", "allclose", "amax",
    "amin", "amp", "any", "arange", "argmax", "argmin", "atan2", "autocast", "autograd", "bfloat16", "bmm", "bool",
    "cat", "ceil", "chunk", "clamp", "clip", "clone", "compile", "concat", "cos", "data", "default_device", "device",
    "div", "dot", "empty", "empty_like", "enable_grad", "eq", "exp", "expm1", "eye", "fixed", "flatten", "float16",
    "float32", "float64", "floor", "floor_divide", "fmod", "from_numpy", "full", "full_like", "ge", "gt",
    "inference_mode", "initial_seed", "int16", "int32", "int64", "int8", "io", "is_grad_enabled", "isclose",
    "isfinite", "isinf", "isnan", "le", "linspace", "load", "log", "log1p", "log_softmax", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "logsumexp", "lt", "manual_seed", "matmul", "max", "maximum", "mean",
    "min", "minimum", "mm", "mul", "narrow", "ne", "neg", "nn", "no_grad", "numel", "ones", "ones_like", "ops",
    "optim", "outer", "permute", "pow", "prod", "rand", "rand_like", "randint", "randn", "randn_like", "random",
    "randperm", "reciprocal", "relu", "remainder", "reshape", "round", "rsqrt", "save", "set_default_device",
    "set_grad_enabled", "sigmoid", "sign", "sin", "softmax", "split", "sqrt", "square", "squeeze", "stack", "std",
    "sub", "sum", "synchronize", "tanh", "tensor", "transpose", "trunc", "uint8", "unsqueeze", "var", "where",
    "zeros", "zeros_like",
}


def _id(pair: tuple[ModuleType, ModuleType]) -> str:
    return pair[1].__name__


@pytest.mark.parametrize("namespace, family", FAMILIES, ids=map(_id, FAMILIES))
def test_every_family_name_is_public_as_the_same_object(namespace: ModuleType, family: ModuleType) -> None:
    names = family.__all__
    assert len(names) == len(set(names)), f"{family.__name__}.__all__ lists a name twice"
    assert set(names) <= set(namespace.__all__), sorted(set(names) - set(namespace.__all__))
    for name in names:
        if (namespace, name) not in REPLACED:
            assert getattr(namespace, name) is getattr(family, name), f"{namespace.__name__}.{name}"


@pytest.mark.parametrize("namespace, family", FAMILIES, ids=map(_id, FAMILIES))
def test_no_private_name_leaks_through_a_family(namespace: ModuleType, family: ModuleType) -> None:
    for name in family.__all__:
        obj = getattr(family, name)
        assert not name.startswith("_"), f"{family.__name__} exports the private {name}"
        assert not isinstance(obj, ModuleType), f"{family.__name__} exports the module {name}"
        assert name not in typing.__all__ and getattr(obj, "__module__", None) != "typing", name
        # defined in the family itself: a name it merely imports belongs to the family that defines it
        assert getattr(obj, "__module__", None) == family.__name__, f"{family.__name__}.{name} is imported there"


def test_families_do_not_collide() -> None:
    # two families exporting one name: the later star import would silently win
    for namespace in (rm, F, nn):
        seen: dict[str, str] = {}
        for ns, family in FAMILIES:
            if ns is namespace:
                for name in family.__all__:
                    assert name not in seen, f"{name} is in {seen.get(name)} and {family.__name__}"
                    seen[name] = family.__name__


@pytest.mark.parametrize("namespace", [rm, F, nn], ids=["rumus", "rumus.nn.functional", "rumus.nn"])
def test_every_star_imported_family_is_listed(namespace: ModuleType) -> None:
    # a star import makes names public to mypy and IDEs; the run-time __all__ must list them too
    tree = ast.parse(Path(inspect.getfile(namespace)).read_text())
    stars = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.names[0].name == "*"]
    assert stars, f"{namespace.__name__} star-imports no family"
    for node in stars:
        module = importlib.import_module("." * node.level + (node.module or ""), namespace.__package__)
        assert set(module.__all__) <= set(namespace.__all__), module.__name__
        assert (namespace, module) in FAMILIES, f"{module.__name__} is star-imported but not checked here"


def test_an_op_function_left_out_of_all_is_caught() -> None:
    registry = OpRegistry()
    register_core_ops(registry)
    ops = set(registry.names())
    for _, family in FAMILIES:
        for name, obj in vars(family).items():
            if name in ops and inspect.isfunction(obj) and obj.__module__ == family.__name__:
                assert name in family.__all__, f"{family.__name__}.{name} is the {name} op but not in __all__"


def test_rumus_keeps_its_names() -> None:
    assert len(rm.__all__) == len(set(rm.__all__))
    assert RM_NAMES <= set(rm.__all__), sorted(RM_NAMES - set(rm.__all__))
    namespace: dict[str, object] = {}
    exec("from rumus import *", namespace)
    assert set(rm.__all__) <= set(namespace)


def test_math_family_functions_are_tensor_methods() -> None:
    # no method table to edit: every _math function taking the tensor first is a method
    x = rm.tensor(np.array([[0.5, -1.5], [2.0, 3.0]]))
    y = rm.tensor(np.array([[1.0, 2.0], [-0.5, 0.25]]))
    for name in ("logaddexp", "atan2", "fmod", "maximum"):
        np.testing.assert_array_equal(getattr(x, name)(y).numpy(), getattr(rm, name)(x, y).numpy())
    for name in ("expm1", "log1p", "square", "sign", "trunc"):
        np.testing.assert_array_equal(getattr(x.abs(), name)().numpy(), getattr(rm, name)(x.abs()).numpy())
    sequence_first = {"cat", "concat", "stack", "where"}
    for name in set(_math.__all__) - sequence_first:
        assert callable(getattr(x, name)), name
