"""rm.compile's guards: new signatures capture again (LRU-bounded), data-dependent Python is refused with
its line, random numbers are fresh on every replay (and equal eager's), RUMUS_COMPILE=0 turns it off."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus import RumusError, nn
from rumus.compile import Compiled
from rumus.nn import functional as F

from _steps import train_step


def test_a_new_signature_captures_again_and_the_cache_is_bounded() -> None:
    f = rm.compile(lambda x, k: (x * k).relu() + 1.0, cache_size=2)
    shapes = [(2, 3), (4, 3), (5,)]
    for shape in shapes:
        for _ in range(3):
            x = rm.randn(*shape)
            np.testing.assert_array_equal(f(x, 2.0).numpy(), ((x * 2.0).relu() + 1.0).numpy())
    assert f.captures == 3 and f.replays == 3 and len(f._cache) == 2
    x = rm.randn(2, 3)  # evicted: runs eagerly once more, then captures again
    for _ in range(3):
        np.testing.assert_array_equal(f(x, 2.0).numpy(), ((x * 2.0).relu() + 1.0).numpy())
    assert f.captures == 4
    for _ in range(3):  # a different Python number is a different signature, never a stale constant
        np.testing.assert_array_equal(f(x, 3.0).numpy(), ((x * 3.0).relu() + 1.0).numpy())
    assert f.captures == 5


def test_dtype_and_requires_grad_are_part_of_the_signature() -> None:
    f = rm.compile(lambda x: x.exp() * 2.0)
    for x in (rm.randn(3), rm.randn(3, dtype=rm.float64), rm.randn(3, requires_grad=True)):
        for _ in range(3):
            np.testing.assert_allclose(f(x).numpy(), np.exp(x.detach().numpy()) * 2.0, rtol=1e-6)
    assert f.captures == 3


def test_reading_values_inside_raises_naming_the_line() -> None:
    def branchy(x: rm.Tensor) -> rm.Tensor:
        if x.sum().item() > 0:  # data-dependent Python: a replay could not take the other branch
            return x * 2.0
        return x
    f = rm.compile(branchy)
    f(rm.ones(3))  # the warm-up call runs eagerly
    with pytest.raises(RumusError) as info:
        f(rm.ones(3))
    line = branchy.__code__.co_firstlineno + 1
    assert f"test_compile_guards.py:{line}" in str(info.value) and "reads tensor values" in str(info.value)
    for read in (lambda x: bool(x.sum() > 0), lambda x: x.tolist(), lambda x: x.numpy(), lambda x: float(x[0])):
        g = rm.compile(read)
        g(rm.ones(2))
        with pytest.raises(RumusError, match="reads tensor values"):
            g(rm.ones(2))


def test_dropout_draws_fresh_masks_on_every_replay_equal_to_eager() -> None:
    def drop(x: rm.Tensor) -> rm.Tensor:
        return F.dropout(x * 1.0, p=0.5) + 0.0
    x = rm.ones(64, 32)
    rm.manual_seed(7)
    eager = [drop(x).numpy() for _ in range(5)]
    rm.manual_seed(7)
    f = rm.compile(drop)
    compiled = [f(x).numpy() for _ in range(5)]
    assert f.replays == 3
    for a, b in zip(compiled, eager):
        np.testing.assert_array_equal(a, b)
    masks = {(m != 0).tobytes() for m in compiled}
    assert len(masks) == 5  # a different mask on every call, replays included


def test_dropout_inside_a_compiled_training_step_matches_eager() -> None:
    def run(compiled: bool) -> list[float]:
        rm.manual_seed(3)
        model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.3), nn.Linear(16, 2))
        opt = rm.optim.AdamW(model.parameters(), lr=0.01)
        x, y = rm.randn(8, 6), rm.randn(8, 2)
        step = train_step(model, opt)
        f = rm.compile(step) if compiled else step
        return [float(f(x, y).item()) for _ in range(8)]
    assert run(True) == run(False)


def test_host_random_numbers_inside_are_refused() -> None:
    f = rm.compile(lambda x: x + rm.randn(*x.shape))
    f(rm.ones(3))
    with pytest.raises(RumusError, match="draws random numbers on the host"):
        f(rm.ones(3))


def test_results_of_earlier_calls_stay_valid() -> None:
    f = rm.compile(lambda x: (x + 1.0).tanh())
    xs = [rm.randn(4, 4) for _ in range(5)]
    outs = [f(x) for x in xs]
    for x, out in zip(xs, outs):
        np.testing.assert_array_equal(out.numpy(), (x + 1.0).tanh().numpy())


def _python_runs(times: int) -> tuple[int, Compiled]:
    """How often the function's Python ran over `times` calls of its compiled form."""
    calls = []

    def fn(x: rm.Tensor) -> rm.Tensor:
        calls.append(1)
        return x * 2.0
    f = rm.compile(fn)
    for _ in range(times):
        np.testing.assert_array_equal(f(rm.ones(2)).numpy(), [2.0, 2.0])
    return len(calls), f


def test_rumus_compile_0_runs_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUMUS_COMPILE", "0")
    runs, f = _python_runs(4)
    assert runs == 4 and f.captures == 0 and f.replays == 0


def test_replay_runs_no_python_of_the_function() -> None:
    runs, f = _python_runs(5)
    assert runs == 2 and f.replays == 3


def test_debug_prints_kernels_and_fusions(capsys: pytest.CaptureFixture[str]) -> None:
    f = rm.compile(lambda x, b: F.gelu(x + b) * 0.5, debug=True)
    x, b = rm.randn(4, 8), rm.randn(8)
    f(x, b)
    f(x, b)
    out = capsys.readouterr().out
    assert "1 kernels" in out and "fused[add,gelu,mul]" in out and "2 intermediates never allocated" in out


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(RumusError, match="expects a function"):
        rm.compile(3)
    with pytest.raises(RumusError, match="cache_size"):
        rm.compile(lambda x: x, cache_size=0)


def test_switching_train_and_eval_captures_again() -> None:
    """Dropout is on in train mode and off in eval mode: a step captured in one mode must not replay in
    the other (the signature counts train/eval flips)."""
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 32), nn.Dropout(0.5))
    f = rm.compile(lambda x: model(x))
    x = rm.ones(3, 4)
    for _ in range(3):
        f(x)
    model.eval()
    for _ in range(3):
        with rm.no_grad():
            want = model(x).numpy()
        np.testing.assert_array_equal(f(x).numpy(), want)
    model.eval()  # no flip: the eval-mode program keeps replaying
    f(x)
    assert f.captures == 2 and f.replays == 3


def test_returning_python_values_is_refused() -> None:
    f = rm.compile(lambda x: (x * 2.0, x.shape[0]))  # the count would be frozen into every replay
    f(rm.ones(2))
    with pytest.raises(RumusError, match="returns a Python value"):
        f(rm.ones(2))
    g = rm.compile(lambda x: {"out": x * 2.0, "aux": None, "pair": [x + 1.0]})
    for _ in range(3):
        out = g(rm.ones(2))
    assert out["aux"] is None and out["pair"][0].numpy().tolist() == [2.0, 2.0]
