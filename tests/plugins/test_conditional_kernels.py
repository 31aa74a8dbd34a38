"""Conditional kernels (KernelRegistry.register(..., priority>=1, applies=...)): a faster kernel for some
shapes sits in front of the built-in one, and the dispatcher chooses per call (ChooseByShape)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from rumus_contracts import ChooseByShape, KernelNotFound, KernelRegistry, PluginError, TensorArg, float32, float64


def _kernel(tag: str, log: list[str]) -> Any:
    def k(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        log.append(tag)
    return k


def _wide(shapes: Sequence[tuple[int, ...]], attrs: Mapping[str, Any]) -> bool:
    return shapes[0][-1] >= 8


def _arg(*shape: int) -> TensorArg:
    return TensorArg(None, shape, (1,) * len(shape), 0, float32)


def test_candidates_are_conditional_kernels_then_the_fallback() -> None:
    reg, log = KernelRegistry(), []
    reg.register("op", "cpu", _kernel("core", log), owner="cpu")
    reg.register("op", "cpu", _kernel("fast", log), dtypes=[float32], owner="plugin", priority=1, applies=_wide)
    assert [e.owner for e in reg.candidates("op", "cpu", float32)] == ["plugin", "cpu"]
    assert [e.owner for e in reg.candidates("op", "cpu", float64)] == ["cpu"]  # the plugin claims float32 only
    entries = reg.candidates("op", "cpu", float32)
    chooser = ChooseByShape("op", "cpu", float32, [(entries[0].applies, entries[0].kernel)], entries[1].kernel)
    chooser([], [_arg(2, 8)], {})
    chooser([], [_arg(2, 7)], {})
    assert log == ["fast", "core"]


def test_an_unconditional_override_hides_everything_below() -> None:
    reg = KernelRegistry()
    reg.register("op", "cpu", _kernel("core", []), owner="cpu")
    reg.register("op", "cpu", _kernel("fast", []), owner="plugin", priority=1, applies=_wide)
    reg.register("op", "cpu", _kernel("all", []), owner="other", priority=2)
    assert [e.owner for e in reg.candidates("op", "cpu", float32)] == ["other"]


def test_without_a_fallback_a_declined_call_is_kernel_not_found() -> None:
    chooser = ChooseByShape("op", "cpu", float32, [(_wide, _kernel("fast", []))], None)
    with pytest.raises(KernelNotFound, match="op"):
        chooser([], [_arg(2, 3)], {})


@pytest.mark.parametrize("kw,match", [({"applies": _wide}, "priority >= 1"),
                                      ({"applies": "wide", "priority": 1}, "applies = a function"),
                                      ({"samples": 3, "priority": 1}, "samples must be a function")])
def test_bad_conditional_registrations_are_refused(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(PluginError, match=match):
        KernelRegistry().register("op", "cpu", _kernel("x", []), owner="plugin", **kw)
