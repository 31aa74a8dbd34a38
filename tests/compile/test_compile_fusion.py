"""Fusion details: fused C modules are cached on disk by source hash (a later process compiles nothing),
intermediates of a fused chain are never allocated on replay, and chains of ops the renderer cannot
fuse (sin/cos, integer dtypes) stay as their own kernels with unchanged results."""

from __future__ import annotations

import numpy as np
import pytest
from cffi import FFI

import rumus as rm
from rumus.compile import program as compiled_program
from rumus.nn import functional as F
from rumus_cpu import fused as cpu_fused


def test_fused_modules_come_from_the_disk_cache(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUMUS_CACHE_DIR", str(tmp_path))
    cpu_fused._MODULES.clear()

    def chain(x: rm.Tensor) -> rm.Tensor:
        return F.silu(x * 1.25 - 0.5) + x
    f = rm.compile(chain)
    x = rm.randn(5, 7)
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), chain(x).numpy())
    built = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert len(built) == 1 and built[0].startswith("_rumus_fused_")

    cpu_fused._MODULES.clear()  # as in a new process: nothing in memory, the file on disk

    def no_compiler(self: FFI, *args: object, **kwargs: object) -> str:
        raise AssertionError("a cached fused kernel was compiled again")
    monkeypatch.setattr(FFI, "compile", no_compiler)
    g = rm.compile(chain)
    for _ in range(3):
        np.testing.assert_array_equal(g(x).numpy(), chain(x).numpy())
    assert g.stats()["kernels"] == 1


def test_intermediates_of_a_fused_chain_are_never_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    f = rm.compile(lambda x, b: ((x + b).relu() * 3.0 - 1.0).sigmoid())
    x, b = rm.randn(16, 32), rm.randn(32)
    f(x, b)
    f(x, b)
    program = next(iter(f._cache.values())).program
    assert program is not None and program.n_kernels == 1
    step = next(s for s in program.items if isinstance(s, compiled_program.Step))
    assert len(step.outs) == 1  # four intermediates live in registers only
    allocated = []
    backend = x._storage.backend
    real = type(backend).allocate

    def counting(self, device, numel, dtype):  # noqa: ANN001
        allocated.append(numel)
        return real(self, device, numel, dtype)
    monkeypatch.setattr(type(backend), "allocate", counting)
    out = f(x, b)
    assert allocated == [16 * 32]  # only the result (fresh per call, so earlier results stay valid)
    np.testing.assert_array_equal(out.numpy(), ((x + b).relu() * 3.0 - 1.0).sigmoid().numpy())


def test_chains_the_renderer_cannot_fuse_stay_unfused_and_exact() -> None:
    f = rm.compile(lambda x: (x.sin() * 2.0 + 1.0).cos())  # sin, fused[mul,add], cos
    g = rm.compile(lambda n: (n * 3 + 1) * n)  # int64: no fused kernel
    x, n = rm.randn(6, 5), rm.tensor([[1, 2, 3], [4, 5, 6]])
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), (x.sin() * 2.0 + 1.0).cos().numpy())
        np.testing.assert_array_equal(g(n).numpy(), ((n * 3 + 1) * n).numpy())
    assert f.stats()["kernels"] == 3 and g.stats()["kernels"] == 3


def test_fuse_false_keeps_every_kernel() -> None:
    f = rm.compile(lambda x: (x + 1.0).relu() * 2.0, fuse=False)
    x = rm.randn(3, 3)
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), ((x + 1.0).relu() * 2.0).numpy())
    assert f.stats()["kernels"] == 3


def _mlp() -> rm.nn.Sequential:
    return rm.nn.Sequential(rm.nn.Linear(16, 32), rm.nn.GELU(), rm.nn.Linear(32, 32), rm.nn.GELU(), rm.nn.Linear(32, 4))


def test_memory_plan_shares_buffers_of_dead_intermediates() -> None:
    def run(compiled: bool) -> tuple[list[float], tuple[int, int]]:
        rm.manual_seed(0)
        model = _mlp()
        opt = rm.optim.SGD(model.parameters(), lr=0.1)
        x = rm.randn(8, 16)

        def step(x: rm.Tensor) -> rm.Tensor:
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            return loss
        f = rm.compile(step) if compiled else step
        losses = [float(f(x).item()) for _ in range(5)]
        return losses, (f._cache[next(iter(f._cache))].program.memory_bytes if compiled else (0, 0))
    compiled, (before, after) = run(True)
    assert 0 < after < before  # fewer bytes than one buffer per intermediate
    assert compiled == run(False)[0]  # and the shared buffers changed nothing


def test_memory_plan_keeps_intermediates_a_caller_still_holds() -> None:
    rm.manual_seed(0)
    model = _mlp()
    opt = rm.optim.SGD(model.parameters(), lr=0.0)  # parameters stay put: the hidden values never change
    seen: list[rm.Tensor] = []

    def step(x: rm.Tensor) -> rm.Tensor:
        opt.zero_grad()
        hidden = model[1](model[0](x))
        seen.append(hidden)  # still readable after the call: its buffer must not be shared
        loss = model[4](model[3](model[2](hidden))).square().mean()
        loss.backward()
        opt.step()
        return loss
    f = rm.compile(step)
    x = rm.randn(8, 16)
    for _ in range(5):
        f(x)
    assert f.replays == 3
    with rm.no_grad():
        want = model[1](model[0](x)).numpy()
    np.testing.assert_array_equal(seen[1].numpy(), want)  # the captured call's tensor, after three replays
