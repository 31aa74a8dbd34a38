"""Issue 20's adversarial classes (items 6-11): every case must behave; a wrong one is named.

The cases live in adversarial_cases.py (seeded, so CI replays the same ones); `python
tests/adversarial/report.py` prints the same classes as a table."""

from __future__ import annotations

import pytest

from classes import CLASSES


@pytest.mark.parametrize("label", sorted(CLASSES))
def test_class_has_no_wrong_case(label: str) -> None:
    cases = list(CLASSES[label]())
    wrong = [f"{c.name}: {c.problem}" for c in cases if c.problem is not None]
    assert cases, "a class with no cases proves nothing"
    assert not wrong, f"{len(wrong)} of {len(cases)} wrong:\n" + "\n".join(wrong[:20])
