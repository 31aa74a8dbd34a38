"""Host work of the small eager training steps on wgpu, one source tree against another (issue 10).

The eager MLP, CNN and small transformer steps of benchmarks/compile_steps.py are host-bound on a real GPU
(Python dispatch + wgpu command recording). This measures that host work where it is deterministic, on any
machine (lavapipe's GPU timing is noise, the host's Python is not), for this tree and for each --tree:

* calls/step: Python function calls per step (cProfile over --profile-steps steps after warm-up and a
  host wait, as each of compile_steps.py's timed rounds starts);
* bind groups made per step (the programs' bind-group cache misses);
* host ms/step: the calling thread's CPU time (time.thread_time: neither lavapipe's worker threads nor
  time this process waits for a core on a shared machine count) in the step calls, best and median of
  --rounds rounds of --steps steps;
* kernels/step, and the recorder's submits and syncs per step;
* with --wall: wall ms/step, time.perf_counter around whole steps with the GPU work (median).
Calls and host time are measured with the GPU work left out: the recorder's queue.submit is dropped
(everything up to and including encoder.finish() still runs; nothing reads values back in these steps).
then the functions whose calls per step grew the most from the first tree to the last.

Each tree runs in its own interpreter (the base Python, not a venv with an editable install) with its
source roots on PYTHONPATH and entry-point metadata as benchmarks/source_tree_env.sh writes it:

    XDG_RUNTIME_DIR=/tmp python benchmarks/host_calls.py --tree /work/wt-s3 --passes 3   # old tree vs this one
    XDG_RUNTIME_DIR=/tmp python benchmarks/host_calls.py --models MLP --json out.json  # this tree alone
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
THIS_TREE = os.path.dirname(HERE)


# -- worker: runs inside one tree's interpreter ---------------------------------------------------------
class _NoSubmit:
    """The recorder's queue with submit dropped: the GPU gets no work, the host does all of its own."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def submit(self, buffers: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def _func_key(tree: str, code: tuple[str, int, str]) -> str:
    path, _, name = code
    if path.startswith(tree):
        path = os.path.relpath(path, tree)
    elif "site-packages" in path:
        path = path.split("site-packages" + os.sep, 1)[1]
    return f"{path}:{name}"


def _time_steps(step: Any, steps: int, rounds: int, clock: Any) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = clock()
        for _ in range(steps):
            step()
        out.append((clock() - t0) / steps)
    return out


def _count_bind_groups(wdev: Any) -> list[int]:
    """Count the bind groups the device makes (its cache misses), by whichever path this tree makes them."""
    made = [0]

    def counting(fn: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            made[0] += 1
            return fn(*args, **kwargs)
        return counted
    layer = getattr(wdev, "native", None)  # rumus_wgpu/native.py's probe result, in trees that have it
    if layer is not None and layer.bind_groups:
        layer.bind_group = counting(layer.bind_group)
    elif getattr(wdev, "make_bind_group", None) is not None:
        wdev.make_bind_group = counting(wdev.make_bind_group)
    else:
        wdev.device.create_bind_group = counting(wdev.device.create_bind_group)
    return made


def worker(tree: str, models: list[str], steps: int, rounds: int, profile_steps: int,
           with_wall: bool) -> dict[str, Any]:
    sys.path.insert(0, os.path.join(tree, "benchmarks"))
    import rumus as rm
    if not os.path.abspath(rm.__file__).startswith(tree):
        raise SystemExit(f"rumus was imported from {rm.__file__}, not from {tree}")
    import compile_steps
    from rumus_contracts import Device

    device = Device("wgpu", 0)
    backend = rm._runtime.backend("wgpu")
    rec = backend.device(device).recorder
    results: dict[str, Any] = {}
    for name in models:
        b = compile_steps.build(name, "wgpu:0", "cpu", name == "transformer")
        step = b["eager"]
        for _ in range(5):  # warm-up: programs, plans, pool, optimizer state
            step()
        backend.synchronize(device)
        kernels = b["eager_kernels"]()
        backend.synchronize(device)  # every round starts after a host wait, as in compile_steps.py
        groups = _count_bind_groups(backend.device(device))
        queue = rec.queue
        rec.queue = _NoSubmit(queue)  # from here on the GPU gets no work: the host's share alone
        try:
            s0 = rec.stats()
            with cProfile.Profile() as prof:
                for _ in range(profile_steps):
                    step()
            s1 = rec.stats()
            made = groups[0]
            host = _time_steps(step, steps, rounds, time.thread_time)
            rec.flush()
        finally:
            rec.queue = queue
        backend.synchronize(device)
        wall = _time_steps(step, steps, rounds, time.perf_counter) if with_wall else [float("nan")]
        backend.synchronize(device)
        st = pstats.Stats(prof)
        funcs: dict[str, list[float]] = {}
        for code, (_cc, nc, tt, _ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
            f = funcs.setdefault(_func_key(tree, code), [0.0, 0.0])
            f[0] += nc / profile_steps
            f[1] += tt / profile_steps * 1e6
        results[name] = {
            "kernels": kernels,
            # less the counting wrapper's one call per bind group
            "calls": (st.total_calls - made) / profile_steps,  # type: ignore[attr-defined]
            "bind_groups": made / profile_steps,
            "host_ms": min(host) * 1e3, "host_ms_median": statistics.median(host) * 1e3,
            "wall_ms_median": statistics.median(wall) * 1e3,
            "submits": (s1["submits"] - s0["submits"]) / profile_steps,
            "syncs": (s1["syncs"] - s0["syncs"]) / profile_steps,
            "funcs": funcs,
        }
    return results


# -- driver ---------------------------------------------------------------------------------------------
def _site_for(tree: str) -> str:
    """Entry-point metadata for a source tree run from PYTHONPATH (as benchmarks/source_tree_env.sh)."""
    site = tempfile.mkdtemp(prefix="rumus_site_")
    meta = os.path.join(site, "rumus-0.0.0.dist-info")
    os.makedirs(meta)
    with open(os.path.join(meta, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: rumus\nVersion: 0.0.0\n")
    with open(os.path.join(meta, "entry_points.txt"), "w") as f:
        f.write("[rumus]\ncpu = rumus_cpu.plugin\nwgpu = rumus_wgpu.plugin\n")
    link = os.path.join(tree, "backends", "rumus_wgpu", "shaders")
    if not os.path.lexists(link):  # the build's link to the top-level shaders/
        os.symlink(os.path.join("..", "..", "shaders"), link)
    return site


def run_tree(tree: str, args: argparse.Namespace) -> dict[str, Any]:
    tree = os.path.abspath(tree)
    roots = [_site_for(tree), tree] + [os.path.join(tree, d) for d in ("contracts", "backends", "conformance")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(roots), "RUMUS_BACKEND": "wgpu",
           "PYTHONDONTWRITEBYTECODE": "1"}  # another tree stays as it was
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    python = getattr(sys, "_base_executable", sys.executable)  # not a venv: its editable install wins imports
    cmd = [python, os.path.abspath(__file__), "--worker", tree, "--steps", str(args.steps), "--rounds",
           str(args.rounds), "--profile-steps", str(args.profile_steps), *(["--wall"] if args.wall else []),
           "--models", *args.models]
    done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: worker failed\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One tree's passes as one result: counts from the first (they repeat), host CPU best / median of all."""
    out = {m: dict(r) for m, r in runs[0].items()}
    for m, r in out.items():
        r["host_ms"] = min(x[m]["host_ms"] for x in runs)
        r["host_ms_median"] = statistics.median(x[m]["host_ms_median"] for x in runs)
        r["wall_ms_median"] = statistics.median(x[m]["wall_ms_median"] for x in runs)
    return out


def _by_name(funcs: dict[str, list[float]]) -> dict[str, list[float]]:
    """Per-function totals keyed by function name alone (this tool's own counting wrapper left out)."""
    out: dict[str, list[float]] = {}
    for key, (calls, tottime) in funcs.items():
        if key.startswith("benchmarks/host_calls.py:"):
            continue
        name = re.sub(r" at 0x[0-9a-f]+", "", key.rsplit(":", 1)[1])  # builtins' addresses differ per process
        f = out.setdefault(name, [0.0, 0.0])
        f[0] += calls
        f[1] += tottime
    return out


def report(trees: list[str], res: list[dict[str, Any]], models: list[str], top: int) -> str:
    lines = ["| step | tree | kernels | calls/step | bind groups made | host CPU ms (best / median) | wall ms "
             "| submits | syncs |", "|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        for tree, r in zip(trees, res):
            x = r[m]
            lines.append(f"| {m} | {tree} | {x['kernels']} | {x['calls']:.0f} | {x['bind_groups']:.1f} | "
                         f"{x['host_ms']:.3f} / {x['host_ms_median']:.3f} | {x['wall_ms_median']:.3f} | "
                         f"{x['submits']:.2f} | {x['syncs']:.2f} |")
    if len(res) > 1:
        old, new = res[0], res[-1]
        for m in models:
            fo, fn = _by_name(old[m]["funcs"]), _by_name(new[m]["funcs"])
            grew = sorted(((fn[k][0] - fo.get(k, [0.0])[0], k) for k in fn), reverse=True)[:top]
            lines += ["", f"{m}: functions whose calls/step grew most ({trees[0]} -> {trees[-1]}; by name, "
                      "so a function that moved to another file counts as the same)",
                      "| function | old calls | new calls | new tottime us/step (profiled) |", "|---|---|---|---|"]
            lines += [f"| {k} | {fo.get(k, [0.0])[0]:.0f} | {fn[k][0]:.0f} | {fn[k][1]:.0f} |"
                      for d, k in grew if d > 0]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], help="another source tree (measured first)")
    ap.add_argument("--models", nargs="*", default=["MLP", "CNN", "transformer"])
    ap.add_argument("--steps", type=int, default=10, help="steps per timed round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile-steps", type=int, default=20, help="steps profiled (compile_steps.py times 20 "
                    "per round)")
    ap.add_argument("--top", type=int, default=15, help="rows of the grown-functions tables")
    ap.add_argument("--wall", action="store_true", help="also time whole steps with the real submit (on lavapipe "
                    "that is the software GPU's time: slow, and noise for this purpose)")
    ap.add_argument("--passes", type=int, default=1, help="run every tree this many times, in turn; host CPU: "
                    "best and median over all passes (on a shared machine the load drifts between runs)")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.models, args.steps, args.rounds, args.profile_steps, args.wall)))
        return
    trees = [os.path.abspath(t) for t in args.tree] + [THIS_TREE]
    passes = [[run_tree(t, args) for t in trees] for _ in range(args.passes)]  # trees alternate: load drifts
    res = [_merge([p[i] for p in passes]) for i in range(len(trees))]
    print(report(trees, res, args.models, args.top))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(zip(trees, res)), f)


if __name__ == "__main__":
    main()
