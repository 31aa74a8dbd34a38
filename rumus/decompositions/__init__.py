"""Decompositions: every op that is not a primitive, written with core ops (DESIGN.md section 9).

The dispatcher runs an op's decomposition when the backend of its inputs has no kernel for (op, dtype),
so a backend that provides only the primitives (`rumus_contracts.PRIMITIVES`) still runs every op; a
backend's own kernel for a decomposed op is an optimisation, held to the same reference by the
conformance suite. A decomposition is registered per op name:

    @register("softmax")
    def softmax(x: Tensor, *, dim: int) -> Tensor: ...

It receives the op's inputs as tensors and its attributes bound by the schema (defaults filled in),
and returns what the op returns (a tuple for several outputs; for an in-place op it writes its
mutated inputs with in-place core ops and returns None). Gradients come from the ops it calls.
Each family lives in a module of its own in this package; every module here is imported once, when
the package is (so a new family is one new file).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any, TypeVar

from .._dispatch import DECOMPOSITIONS, FORMULA_GRAD

F = TypeVar("F", bound=Callable[..., Any])


def register(name: str, *, grad: str = "ops") -> Callable[[F], F]:
    """Register `fn` as the decomposition of op `name` (one per op: a second one is a mistake).

    grad="ops": the gradient is the history the decomposition's ops record (the default). grad="formula":
    the decomposition runs without recording, and the op's own backward formula is recorded, as on the
    kernel path: for ops whose decomposition is not differentiated the way the op is (amin's tie rule
    shares the gradient evenly, a tree of minimum() would halve it per level)."""
    if grad not in ("ops", "formula"):
        raise ValueError(f"register({name!r}): grad must be 'ops' or 'formula', got {grad!r}")

    def wrap(fn: F) -> F:
        if name in DECOMPOSITIONS:
            raise AssertionError(f"op {name!r} has two decompositions: {DECOMPOSITIONS[name]} and {fn}")
        DECOMPOSITIONS[name] = fn
        if grad == "formula":
            FORMULA_GRAD.add(name)
        return fn
    return wrap


def _import_families() -> None:
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):  # _helpers: shared code, no registrations
            importlib.import_module(f"{__name__}.{info.name}")


_import_families()
