"""Compiled vs eager on 30 random elementwise chains (broadcasting, every activation), on each device.

The CPU fuses a chain into one C loop calling the same element functions as the unfused kernels, so the
results must be bit-identical; WebGPU shaders may be compiled with other contractions, so float32
tolerance there. Replays get new input values, so a replay that kept the captured inputs would fail.
"""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm

ACTIVATIONS = ["relu", "sigmoid", "tanh", "erf", "gelu", "gelu_tanh", "silu", "leaky_relu", "softplus", "elu",
               "celu", "selu", "softsign", "mish", "hardswish", "hardsigmoid", "logsigmoid", "tanhshrink"]
UNARY = ["neg", "abs", "square", *ACTIVATIONS]
BINARY = ["add", "sub", "mul", "maximum", "minimum", "div"]
SHAPES = [(3, 4, 5), (4, 5), (1, 5), (3, 1, 1), (4, 1), ()]
PARAMS = {"leaky_relu": {"negative_slope": 0.2}, "elu": {"alpha": 0.7}, "celu": {"alpha": 1.3},
          "softplus": {"beta": 2.0, "threshold": 5.0}}


def make_chain(seed: int):
    """A random chain: 2-3 inputs broadcast against [3, 4, 5], 3-8 ops, every activation over the 30 seeds."""
    rng = np.random.default_rng(seed)
    shapes = [SHAPES[0]] + [SHAPES[int(i)] for i in rng.integers(1, len(SHAPES), size=int(rng.integers(1, 3)))]
    ops: list[tuple[str, int]] = []
    for k in range(int(rng.integers(3, 9))):
        if k == 0:  # seeds 0..17 start with activation `seed` so that every activation appears
            ops.append((ACTIVATIONS[seed % len(ACTIVATIONS)], -1))
        elif rng.random() < 0.5:
            ops.append((UNARY[int(rng.integers(len(UNARY)))], -1))
        else:
            ops.append((BINARY[int(rng.integers(len(BINARY)))], int(rng.integers(len(shapes)))))

    def chain(*xs: rm.Tensor) -> rm.Tensor:
        v = xs[0]
        for name, operand in ops:
            op = rm.ops.get(name)
            if operand < 0:
                v = op(v, **PARAMS.get(name, {}))
            elif name == "div":  # a denominator bounded away from 0
                v = op(v, rm.ops.get("add")(rm.ops.get("square")(xs[operand]), 0.5))
            else:
                v = op(v, xs[operand]) if operand % 2 else op(xs[operand], v)
        return v * 0.5 + 1.0  # a Python-number tail: scalars broadcast as stride-0 operands

    return chain, shapes, ops


def _inputs(shapes, seed: int, device: str) -> list[rm.Tensor]:
    rng = np.random.default_rng(seed)
    return [rm.tensor(rng.standard_normal(s).astype(np.float32) * 2, device=device) for s in shapes]


@pytest.mark.parametrize("seed", range(30))
def test_compiled_chain_equals_eager(seed: int, device: str) -> None:
    chain, shapes, ops = make_chain(seed)
    compiled = rm.compile(chain)
    a = _inputs(shapes, 1000 + seed, device)
    for _ in range(2):  # warm-up, then capture
        np.testing.assert_array_equal(compiled(*a).numpy(), chain(*a).numpy())
    for k in range(2):  # replays on new values
        b = _inputs(shapes, 2000 + 10 * seed + k, device)
        got, want = compiled(*b).numpy(), chain(*b).numpy()
        if device == "cpu":
            np.testing.assert_array_equal(got, want, err_msg=f"chain {ops}")
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"chain {ops}")
    assert compiled.replays == 2 and compiled.captures == 1
    # the chain and its scalar tail became one kernel; a denominator of another shape than the chain's
    # (square + add over a broadcast operand) is a run of its own that splits the chain's run in two
    side_runs = sum(name == "div" and shapes[operand] != shapes[0] for name, operand in ops)
    assert compiled.stats()["kernels"] == 1 + 2 * side_runs, f"chain {ops} over {shapes} was not fused"


def test_every_activation_is_covered() -> None:
    seen = {make_chain(s)[2][0][0] for s in range(30)}
    assert set(ACTIVATIONS) <= seen
