"""Adversarial cases of the fallback path: the non-primitive ops run on a cpu with only the primitives
(their decompositions), on inputs where a decomposition is easy to get wrong — NaN and infinities,
ties, integer extremes, bad indices — judged against torch, and every error sample of a decomposed op
must be refused as the op refuses it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import rumus as rm
from adversarial_cases import Case, _refuses
from rumus import backend_api as api
from rumus._dispatch import DECOMPOSITIONS
from rumus_conformance import harness
from rumus_conformance.cases import error_samples
from rumus_contracts import IndexOutOfRange

sys.path.insert(0, str(Path(__file__).parent.parent / "core"))
from primitives_only import only_primitives  # noqa: E402

NAN, INF = float("nan"), float("inf")
ROWS = np.array([[1.0, NAN, 3.0], [2.0, 2.0, -1.0], [INF, -INF, NAN], [-INF, -INF, -INF], [5.0, 5.0, 5.0],
                 [0.0, -0.0, 0.0]])


def _same(name: str, got: Any, want: Any) -> Case:
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if g.shape == w.shape and np.allclose(g, w, rtol=1e-6, atol=1e-7, equal_nan=True):
        return Case(name, None)
    return Case(name, f"wrong: got {g.tolist()}, torch says {w.tolist()}")


def numerics_on_primitives() -> Iterator[Case]:
    import torch
    t = torch.tensor(ROWS)
    ints = np.array([[-2 ** 63, 3, 3], [7, 7, -1], [2 ** 62, -2 ** 62, 0]], dtype=np.int64)
    ti = torch.tensor(ints)
    checks: list[tuple[str, Callable[[], Any], Any]] = [
        ("argmax with NaN, ties, infinities", lambda: rm.argmax(rm.tensor(ROWS), dim=1).tolist(),
         torch.argmax(t, dim=1)),
        ("argmin with NaN, ties, infinities", lambda: rm.argmin(rm.tensor(ROWS), dim=1).tolist(),
         torch.argmin(t, dim=1)),
        ("amin with NaN and infinities", lambda: rm.amin(rm.tensor(ROWS), dim=1).tolist(), torch.amin(t, dim=1)),
        ("amin of int64 extremes", lambda: rm.amin(rm.tensor(ints), dim=1).tolist(), torch.amin(ti, dim=1)),
        ("argmax of int64 ties", lambda: rm.argmax(rm.tensor(ints), dim=1).tolist(), torch.argmax(ti, dim=1)),
        ("prod with 0 * inf", lambda: rm.prod(rm.tensor([[0.0, INF, 1.0], [2.0, -3.0, 0.5]]), dim=1).tolist(),
         torch.prod(torch.tensor([[0.0, INF, 1.0], [2.0, -3.0, 0.5]]), dim=1)),
        ("softmax rows of NaN / inf / all -inf", lambda: rm.softmax(rm.tensor(ROWS), dim=1).tolist(),
         torch.softmax(t, dim=1)),
        ("log_softmax rows of NaN / inf / all -inf", lambda: rm.log_softmax(rm.tensor(ROWS), dim=1).tolist(),
         torch.log_softmax(t, dim=1)),
        ("clamp of NaN and infinities", lambda: rm.clamp(rm.tensor(ROWS), -1.0, 1.0).tolist(),
         torch.clamp(t, -1.0, 1.0)),
        ("cross_entropy with an infinite logit", lambda: rm.nn.functional.cross_entropy(
            rm.tensor([[INF, 0.0], [1.0, 2.0]]), rm.tensor([1, 0]), reduction="none").tolist(),
         torch.nn.functional.cross_entropy(torch.tensor([[INF, 0.0], [1.0, 2.0]]), torch.tensor([1, 0]),
                                           reduction="none")),
    ]
    with only_primitives():
        for name, ours, theirs in checks:
            try:
                got = ours()
            except Exception as exc:  # noqa: BLE001  (any exception is the finding)
                yield Case(name, f"raised {type(exc).__name__}: {exc}")
                continue
            yield _same(name, got, theirs.numpy())
        yield _refuses(lambda: rm.nn.functional.embedding(rm.tensor([0, 5]), rm.ones(3, 2)), IndexOutOfRange,
                       "embedding index past the table")
        yield _refuses(lambda: rm.index_select(rm.ones(3, 2), 0, rm.tensor([0, -1])), IndexOutOfRange,
                       "index_select negative index")
        yield _refuses(lambda: rm.ops.cross_entropy_fwd.multi(rm.ones(2, 3), rm.tensor([0, 7]), rm.ones(3)),
                       IndexOutOfRange, "cross_entropy_fwd target past the classes")


def error_samples_on_primitives() -> Iterator[Case]:
    """Every error sample of every decomposed op, on the fallback path: the same refusal as the kernel's."""
    with only_primitives():
        for name in sorted(DECOMPOSITIONS):
            schema = api.op_schema(name)
            for k, err in enumerate(error_samples(schema)):
                msg = harness.check_error(schema, err, "cpu")
                yield Case(f"{name} error sample {k}", None if msg is None else f"wrong: {msg}")


CLASSES: dict[str, Callable[[], Iterator[Case]]] = {
    "32 decompositions: numerics on a primitives-only cpu vs torch": numerics_on_primitives,
    "32 decompositions: error samples on the fallback path": error_samples_on_primitives,
}
