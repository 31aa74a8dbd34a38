"""conv2d on the CPU backend's threads (csrc/nn_conv.c, the fused kernels): forward, input gradient and
weight gradient bit-identical at 1, 2, 3 and 4 threads, and right against PyTorch in float64, for shapes
that cut the work every way the plan does: several bands of output rows per image, several batch slices
for the weight gradient, several output-channel blocks per group, input-channel blocks for the gradients
of small batches, groups, stride, dilation, padding."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rumus_cpu._kernels")

from thread_count_runs import run_at_each_thread_count  # noqa: E402

# name: (x shape, w shape, stride, padding, dilation, groups)
CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], int, int, int, int]] = {
    # R = 576 columns of 40: a band is 2 output rows, 20 bands per image; 3 weight-gradient slices
    "bands": ((3, 64, 40, 40), (48, 64, 3, 3), 1, 1, 1, 1),
    # 130 output channels per group: 3 blocks of <= 64 in the weight gradient; stride 2, no padding
    "oblocks": ((5, 8, 13, 12), (260, 4, 3, 3), 2, 0, 1, 2),
    # dilation and a 5x5 kernel reaching past the padding; 17 samples, one slice each
    "dilated": ((17, 6, 11, 9), (12, 3, 5, 5), 1, 3, 2, 2),
    # the CNN's small layer: every sample one unit
    "small": ((64, 16, 14, 14), (32, 16, 3, 3), 1, 1, 1, 1),
    # one image: the gradients split the 32 input channels into 4 blocks ("bands" too: 6 uneven blocks)
    "one_image": ((1, 32, 9, 9), (8, 32, 3, 3), 1, 1, 1, 1),
}

SCRIPT = r"""
import json, sys
import numpy as np
import rumus as rm
from rumus.nn import functional as F
from rumus_cpu import threads
cases = json.loads(sys.argv[2])
rng = np.random.default_rng(0)
res = {}
for name, (xs, ws, s, p, d, g) in cases.items():
    for dt in (np.float32, np.float64):
        x = rm.tensor(rng.standard_normal(xs).astype(dt), requires_grad=True)
        w = rm.tensor((rng.standard_normal(ws) * 0.1).astype(dt), requires_grad=True)
        y = F.conv2d(x, w, stride=s, padding=p, dilation=d, groups=g)
        gy = rm.tensor(rng.standard_normal(tuple(y.shape)).astype(dt))
        (y * gy).sum().backward()
        key = f"{name}_{np.dtype(dt).name}"
        res[key + "_y"], res[key + "_gx"], res[key + "_gw"] = y.numpy(), x.grad.numpy(), w.grad.numpy()
        res[key + "_x"], res[key + "_w"], res[key + "_gy"] = x.numpy(), w.numpy(), gy.numpy()
np.savez(sys.argv[1], **res)
print(json.dumps({"threads": threads.get_num_threads()}))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: Any) -> list[tuple[dict[str, Any], Any]]:
    return run_at_each_thread_count(SCRIPT, tmp_path_factory.mktemp("conv_threads"), json.dumps(CASES))


def test_conv_results_are_bit_identical_at_1_2_3_4_threads(runs: list[tuple[dict[str, Any], Any]]) -> None:
    assert [info["threads"] for info, _ in runs] == [1, 2, 3, 4]
    base = runs[0][1]
    assert len(base.files) == len(CASES) * 2 * 6
    for _, res in runs[1:]:
        for key in base.files:
            np.testing.assert_array_equal(base[key], res[key], err_msg=key)


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_values_match_torch_in_float64(runs: list[tuple[dict[str, Any], Any]], name: str) -> None:
    torch = pytest.importorskip("torch")
    _, stride, padding, dilation, groups = CASES[name][1:]
    res = runs[-1][1]  # 4 threads
    for dt, rtol, atol in (("float64", 1e-10, 1e-10), ("float32", 1e-4, 1e-4)):
        k = f"{name}_{dt}"
        x = torch.tensor(res[k + "_x"], dtype=torch.float64, requires_grad=True)
        w = torch.tensor(res[k + "_w"], dtype=torch.float64, requires_grad=True)
        y = torch.nn.functional.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        (y * torch.tensor(res[k + "_gy"], dtype=torch.float64)).sum().backward()
        assert x.grad is not None and w.grad is not None
        scale = float(np.abs(res[k + "_gw"]).max())
        np.testing.assert_allclose(res[k + "_y"], y.detach().numpy(), rtol=rtol, atol=atol, err_msg=k + " y")
        np.testing.assert_allclose(res[k + "_gx"], x.grad.numpy(), rtol=rtol, atol=atol, err_msg=k + " gx")
        np.testing.assert_allclose(res[k + "_gw"], w.grad.numpy(), rtol=rtol, atol=atol * scale, err_msg=k + " gw")
