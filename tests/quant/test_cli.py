"""`rumus quantize CHECKPOINT --model ... --scheme int4 --group-size 32 --method gptq --calib FILE`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import rumus as rm
from rumus.cli import main


def small_model() -> rm.nn.Sequential:  # the --model factory the CLI imports
    return rm.nn.Sequential(rm.nn.Linear(64, 32), rm.nn.ReLU(), rm.nn.Linear(32, 8))


def test_cli_quantizes_a_checkpoint_with_gptq(tmp_path: Path) -> None:
    rm.manual_seed(1)
    model = small_model()
    ckpt = tmp_path / "m.safetensors"
    rm.io.save_file(model.state_dict(), ckpt)
    x = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    np.save(tmp_path / "calib.npy", x)
    out = tmp_path / "m.q.safetensors"
    rc = main(["quantize", str(ckpt), "--model", "tests.quant.test_cli:small_model", "--scheme", "int4",
               "--group-size", "32", "--method", "gptq", "--calib", str(tmp_path / "calib.npy")])
    assert rc == 0 and out.exists()
    q = rm.quant.load_quantized(small_model(), out)
    assert type(q[0]).__name__ == "QLinear" and q[0].scheme == "int4" and q[0].size == 32
    direct = rm.quant.quantize(model, "int4", 32, "gptq", calib=[rm.tensor(x)])
    np.testing.assert_array_equal(q(rm.tensor(x)).numpy(), direct(rm.tensor(x)).numpy())


def test_cli_refuses_gptq_without_calibration(tmp_path: Path) -> None:
    ckpt = tmp_path / "m.safetensors"
    rm.io.save_file(small_model().state_dict(), ckpt)
    assert main(["quantize", str(ckpt), "--model", "tests.quant.test_cli:small_model", "--method", "gptq"]) == 2
