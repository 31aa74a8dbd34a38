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
    _start_params(torch, [p for _, p in model.named_parameters()])


def _start_params(torch: Any, params: list[Any], seed: int = 20240) -> None:
    """Every trainable tensor gets a value drawn from numpy, by position and shape, scaled like torch's
    default init (1/sqrt(fan_in)); constant tensors (norm weights, zero biases) keep their value."""
    import numpy as np

    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in params:
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
        return _run_script(torch, prog, seed)
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


def _run_script(torch: Any, prog: Program, seed: int) -> dict[str, Any]:
    import os
    import runpy
    import tempfile

    import corpus_stubs.tensorboard as tb

    adam_init = torch.optim.Adam.__init__
    count = [0]

    def adam_with_common_start(self: Any, params: Any, *args: Any, **kwargs: Any) -> None:
        params = list(params)
        flat = [p for group in params for p in (group["params"] if isinstance(group, dict) else [group])]
        count[0] += 1
        _start_params(torch, flat, seed=20240 + count[0])
        adam_init(self, params, *args, **kwargs)

    torch.optim.Adam.__init__ = adam_with_common_start
    path = fetch_packages.site_dir() / prog.script
    sys.argv = [str(path), *prog.argv, "--seed", str(seed + 1)]
    tb.SCALARS.clear()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            runpy.run_path(str(path), run_name="__main__")
        finally:
            os.chdir(cwd)
            torch.optim.Adam.__init__ = adam_init
    if prog.loss_tag not in tb.SCALARS:
        raise RuntimeError(f"the program logged no {prog.loss_tag!r}")
    return {"losses": [v for _, v in tb.SCALARS[prog.loss_tag]]}


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
    names, framework, seeds = sys.argv[1].split(","), sys.argv[2], [int(s) for s in sys.argv[3].split(",")]
    outs = [_guarded(name, framework, s) for name in names for s in seeds]
    print(json.dumps({"runs": outs}))


if __name__ == "__main__":
    main()
