"""Every public name of rumus, rumus.nn, rumus.nn.functional and rumus.optim (their `__all__`) that is a
function, class or module has a docstring of its own: the API reference (docs/api/) is built from them."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

import rumus
import rumus.nn
import rumus.nn.functional
import rumus.optim

MODULES = (rumus, rumus.nn, rumus.nn.functional, rumus.optim)


def _own_doc(obj: object) -> str:
    # a class's own docstring, not one inherited from its base (inspect.getdoc would climb the MRO)
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    return (doc or "").strip()


def _documentable(obj: object) -> bool:
    return inspect.isclass(obj) or inspect.ismodule(obj) or callable(obj)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_public_name_has_a_docstring(module: ModuleType) -> None:
    assert _own_doc(module), f"{module.__name__} has no module docstring"
    names = list(module.__all__)
    assert len(names) >= 10
    missing = [n for n in names if _documentable(getattr(module, n)) and not _own_doc(getattr(module, n))]
    assert not missing, f"{module.__name__}: no docstring on {', '.join(missing)}"


def test_the_check_sees_a_missing_docstring() -> None:
    def undocumented() -> None:
        pass

    class Bare(rumus.nn.Module):
        pass

    assert not _own_doc(undocumented) and not _own_doc(Bare) and _own_doc(rumus.nn.Module)
