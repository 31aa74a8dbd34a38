"""Integer class labels survive a round trip through .rrec (`rumus rrec convert` of int64 targets reads back
int64 and feeds cross_entropy as class indices); labels held as floats get a cross-entropy error that says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import rumus as rm
from rumus.data import RecordDataset
from rumus.data.cli import main
from rumus.nn import functional as F


def test_converted_int64_targets_read_back_as_int64_and_train(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    inputs, targets = rng.standard_normal((6, 5)).astype(np.float32), np.array([0, 2, 1, 4, 3, 2], np.int64)
    np.savez(tmp_path / "d.npz", inputs=inputs, targets=targets)
    assert main(["convert", str(tmp_path / "d.npz"), str(tmp_path / "d.rrec")]) == 0
    with RecordDataset(tmp_path / "d.rrec") as ds:
        ys = rm.stack([ds[i][1] for i in range(len(ds))])
        xs = rm.stack([ds[i][0] for i in range(len(ds))])
    assert ys.dtype == rm.int64 and ys.tolist() == targets.tolist()
    want = torch.nn.functional.cross_entropy(torch.from_numpy(inputs), torch.from_numpy(targets))
    assert abs(F.cross_entropy(xs, ys).item() - want.item()) < 1e-5


def test_float_class_indices_get_a_hint() -> None:
    logits, labels = rm.randn(4, 3), rm.tensor([0.0, 1.0, 2.0, 1.0])
    with pytest.raises(rm.ShapeError, match=r"probability targets need .*looks like class indices stored as "
                                            r"floats: pass them as integers \(target.long\(\)\)"):
        F.cross_entropy(logits, labels)
    with pytest.raises(rm.ShapeError) as info:  # a genuinely mis-shaped probability target: no such hint
        F.cross_entropy(logits, rm.rand(4, 2))
    assert "class indices" not in str(info.value)
