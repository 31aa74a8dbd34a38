"""Tensor parallel layers train like their single-process counterparts (in-process and over MPI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from mpi_run import NEEDS_MPIRUN, launch_and_load
import pytest
from tp_case import train_single, train_tp

import rumus as rm
import rumus.distributed as dist
from rumus.distributed import CommunicatorError
from rumus.distributed.tensor_parallel import ColumnParallelLinear


def _assert_matches(results: list[dict[str, np.ndarray]]) -> None:
    expected = train_single()
    for r, got in enumerate(results):
        assert set(got) == set(expected)
        for n in expected:
            np.testing.assert_allclose(got[n], expected[n], rtol=1e-5, atol=1e-5, err_msg=f"rank {r} {n}")


def test_tensor_parallel_in_process_matches_single_process() -> None:
    _assert_matches(dist.spawn(train_tp, 2))


@NEEDS_MPIRUN
def test_tensor_parallel_over_mpi_matches_single_process(tmp_path: Path) -> None:
    _assert_matches([dict(f) for f in launch_and_load("mpi_tp_main.py", tmp_path)])


def test_sizes_that_do_not_divide_are_refused() -> None:
    def run(c: dist.InProcessCommunicator) -> None:
        ColumnParallelLinear(4, 5, comm=c)
    with pytest.raises(CommunicatorError, match="5 does not divide by world_size 2"):
        dist.spawn(run, 2)


def test_column_parallel_gathered_output_equals_full_linear() -> None:
    full = rm.nn.Linear(3, 4)
    x = rm.randn(2, 3)
    expected = full(x).detach().numpy()

    def run(c: dist.InProcessCommunicator) -> np.ndarray:
        return ColumnParallelLinear.from_full(full, c)(x).detach().numpy()  # type: ignore[no-any-return]
    for got in dist.spawn(run, 2):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_parallel_attention_trains_like_full_attention() -> None:
    from rumus.distributed.tensor_parallel import ParallelSelfAttention
    D, HEADS, STEPS = 8, 4, 4
    rng = np.random.default_rng(21)
    x = rng.normal(size=(STEPS, 2, 5, D)).astype(np.float32)
    y = rng.normal(size=(STEPS, 2, 5, D)).astype(np.float32)

    def projections() -> list[rm.nn.Linear]:
        r = np.random.default_rng(4)
        mods = [rm.nn.Linear(D, D) for _ in range(4)]
        with rm.no_grad():
            for m in mods:
                for p in m.parameters():
                    p.copy_(rm.from_numpy(r.normal(0, 0.4, p.shape).astype(np.float32)))
        return mods

    def full_forward(mods: list[rm.nn.Linear], t: rm.Tensor) -> rm.Tensor:
        q, k, v, o = mods
        def heads(z: rm.Tensor) -> rm.Tensor:
            return z.reshape(2, 5, HEADS, D // HEADS).transpose(1, 2)
        a = rm.nn.functional.scaled_dot_product_attention(heads(q(t)), heads(k(t)), heads(v(t)), is_causal=True)
        return o(a.transpose(1, 2).reshape(2, 5, D))

    def train(forward: object, params: list[rm.Tensor]) -> None:
        opt = rm.optim.SGD(params, lr=0.1, momentum=0.9)
        for s in range(STEPS):
            opt.zero_grad()
            rm.nn.functional.mse_loss(forward(rm.from_numpy(x[s])), rm.from_numpy(y[s])).backward()  # type: ignore[operator]
            opt.step()

    full = projections()
    train(lambda t: full_forward(full, t), [p for m in full for p in m.parameters()])
    expected = [full[i].weight.detach().numpy() for i in range(4)]

    def run(c: dist.InProcessCommunicator) -> list[np.ndarray]:
        attn = ParallelSelfAttention.from_full(*projections(), num_heads=HEADS, is_causal=True, comm=c)
        train(attn, list(attn.parameters()))
        mods = (attn.q, attn.k, attn.v)
        got = [np.concatenate(list(dist.all_gather(m.weight.detach(), c).numpy()), 0) for m in mods]
        return got + [np.concatenate(list(dist.all_gather(attn.out.weight.detach(), c).numpy()), 1)]
    for got in dist.spawn(run, 2):
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
