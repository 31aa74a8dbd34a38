"""Run one corpus program under one framework and print its losses as JSON (the last stdout line).

    python tests/compat/corpus/harness.py NAME[,NAME...] {torch,rumus} SEED[,SEED...]

Under rumus, `import torch...` resolves to rumus (torch_alias.py); nothing else about the program
changes. The harness then does what a user's training script would: builds the program's model with
small settings, gives every parameter the same start (drawn from numpy by the parameter's order and
shape, so both frameworks begin at the same point), feeds the same small numpy data, and takes a few
optimizer steps. SEED only seeds the framework's own generator (dropout, sampling, shuffling): two torch
runs with different seeds give the spread a rumus run is judged against.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fetch_packages  # noqa: E402
from programs import PROGRAMS, Program  # noqa: E402


def _prepare(framework: str) -> None:
    if str(HERE / "stubs") in sys.path:
        return
    sys.path.insert(0, str(HERE / "stubs"))
    sys.path.insert(1, str(fetch_packages.site_dir()))
    if framework == "rumus":
        import torch_alias

        torch_alias.install()


def _tensorboard_stub(torch: Any) -> None:
    # tensorboard is not installed for either framework; the programs only log scalars through it.
    import corpus_stubs.tensorboard as tb

    sys.modules["torch.utils.tensorboard"] = tb
    torch.utils.tensorboard = tb


def _start_point(torch: Any, model: Any) -> None:
    """Every trainable tensor gets a value drawn from numpy, by position and shape, scaled like torch's
    default init (1/sqrt(fan_in)); constant tensors (norm weights, zero biases) keep their value."""
    import numpy as np

    rng = np.random.default_rng(20240)
    with torch.no_grad():
        for _, p in model.named_parameters():
            shape = tuple(p.shape)
            values = p.detach().cpu().numpy()
            if values.size > 1 and float(values.max()) == float(values.min()):
                continue
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else max(int(values.size), 1)
            bound = 1.0 / math.sqrt(fan_in)
            new = rng.uniform(-bound, bound, size=shape).astype(np.float32)
            p.copy_(torch.from_numpy(new).to(p.dtype))


def _data(torch: Any, prog: Program) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(7)
    kind, shape = prog.input
    if kind == "float":
        x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    elif kind == "tokens":
        x = torch.from_numpy(rng.integers(0, prog.vocab, size=shape).astype(np.int64))
    else:
        raise ValueError(f"unknown input kind {kind}")
    tkind, tshape = prog.target
    if tkind == "classes":
        y = torch.from_numpy(rng.integers(0, prog.classes, size=tshape).astype(np.int64))
    elif tkind == "float":
        y = torch.from_numpy(rng.standard_normal(tshape).astype(np.float32))
    elif tkind == "none":
        y = None
    else:
        raise ValueError(f"unknown target kind {tkind}")
    return x, y


def run(name: str, framework: str, seed: int) -> dict[str, Any]:
    prog = PROGRAMS[name]
    _prepare(framework)
    import torch

    torch.manual_seed(seed)
    _tensorboard_stub(torch)
    if prog.script is not None:
        return prog.script(torch, seed)
    module = importlib.import_module(prog.module)
    namespace: dict[str, Any] = dict(vars(module))
    namespace["torch"] = torch
    model = eval(prog.build, namespace)  # noqa: S307 - the adapters' own expressions
    x, y = _data(torch, prog)
    if prog.warmup:
        env0 = {"model": model, "x": x, "y": y, "torch": torch, "F": __import__("torch.nn.functional").nn.functional}
        with torch.no_grad():
            eval(prog.loss, env0)  # noqa: S307
    _start_point(torch, model)
    if prog.eval_mode:
        model.eval()
    opt = torch.optim.Adam(model.parameters(), lr=prog.lr)
    import torch.nn.functional as F

    env = {"model": model, "x": x, "y": y, "torch": torch, "F": F}
    losses: list[float] = []
    for _ in range(prog.steps):
        opt.zero_grad()
        loss = eval(prog.loss, env)  # noqa: S307
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return {"losses": losses}


def _guarded(name: str, framework: str, seed: int) -> dict[str, Any]:
    try:
        return run(name, framework, seed)
    except BaseException as exc:  # noqa: BLE001 - the first error is the result
        tb = traceback.extract_tb(exc.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb)), "?")
        return {"error": f"{type(exc).__name__}: {exc}"[:400], "where": where,
                "traceback": traceback.format_exc()[-3000:]}


def main() -> None:
    # Several programs / seeds in one process save the framework's import time; each run builds its
    # model afresh. Runs come out program-major: (p1, s1), (p1, s2), (p2, s1), ...
    names, framework = sys.argv[1].split(","), sys.argv[2]
    outs = [_guarded(name, framework, int(s)) for name in names for s in sys.argv[3].split(",")]
    print(json.dumps({"runs": outs}))


if __name__ == "__main__":
    main()
