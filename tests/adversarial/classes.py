"""Every adversarial class, gathered from `adversarial_cases.py` and each `cases_*.py` module beside it.

A module of cases ends with `CLASSES: dict[str, Callable[[], Iterator[Case]]]`; one module per family
(loaders, server, numerics, ...) keeps additions from colliding. `report.py` and the pytest test read
this table, so a class added to any module is both tested and reported."""

from __future__ import annotations

import glob
import importlib
import os
from collections.abc import Callable, Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def all_classes() -> dict[str, Callable[[], Iterator[Any]]]:
    found: dict[str, Callable[[], Iterator[Any]]] = {}
    extra = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(HERE, "cases_*.py")))
    names = ["adversarial_cases", *extra]
    for name in names:
        for label, gen in importlib.import_module(name).CLASSES.items():
            if label in found:
                raise AssertionError(f"adversarial class {label!r} is defined twice (second time in {name}.py)")
            found[label] = gen
    return found


CLASSES = all_classes()
