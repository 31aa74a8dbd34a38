"""Run the whole corpus: each program twice under torch (seeds 0 and 1: the spread) and once under rumus
(seed 0, imports renamed), each run in its own subprocess with a timeout; print the summary table.

    python tests/compat/corpus/run_corpus.py [--jobs 2] [--only NAME ...] [--min-pass N] [--json FILE]

Verdicts: `match` (every step's loss within 1e-4 + 1e-3*|loss| of torch's seed-0 run), `spread` (each
step within the range of torch's own runs over seeds 0..torch_seeds-1, widened by that tolerance: the
program samples, e.g. dropout or exploration), `DIFFERS` (outside both), `FAIL` (rumus raised; first error shown),
`TORCH-FAIL` (the adapter is broken under torch itself; not counted as a program run).
Exit status 1 when fewer than --min-pass programs pass.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fetch_packages  # noqa: E402
from programs import PROGRAMS  # noqa: E402

TIMEOUT_S = 180


def run_one(name: str, framework: str, seeds: list[int]) -> list[dict[str, Any]]:
    cmd = [sys.executable, str(HERE / "harness.py"), name, framework, ",".join(map(str, seeds))]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return [{"error": f"timed out after {TIMEOUT_S} s", "where": "?"}] * len(seeds)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return [{"error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}", "where": "?"}] * len(seeds)
    runs: list[dict[str, Any]] = json.loads(lines[-1])["runs"]
    return runs


def _tol(v: float) -> float:
    return 1e-4 + 1e-3 * abs(v)


def verdict(torch_runs: list[dict[str, Any]], r: dict[str, Any]) -> tuple[str, str]:
    """torch_runs[0] is seed 0 (rumus's seed); the others give the spread."""
    bad = next((t for t in torch_runs if "error" in t), None)
    if bad is not None:
        return "TORCH-FAIL", f"{bad['error']} ({bad.get('where')})"
    if "error" in r:
        return "FAIL", f"{r['error']} ({r.get('where')})"
    a, c = torch_runs[0]["losses"], r["losses"]
    if len(c) != len(a) or any(len(t["losses"]) != len(a) for t in torch_runs):
        return "DIFFERS", f"{len(c)} losses, torch gave {len(a)}"
    if any(x != x for x in c):
        return "DIFFERS", "rumus loss is NaN"
    if all(abs(x - y) <= _tol(y) for x, y in zip(c, a)):
        return "match", ""
    cols = [[t["losses"][i] for t in torch_runs] for i in range(len(a))]
    if all(min(col) - _tol(col[0]) <= x <= max(col) + _tol(col[0]) for x, col in zip(c, cols)):
        return "spread", (f"torch's {len(torch_runs)} seeds differ (the program samples); rumus lies within"
                          " their range at every step")
    worst = max(range(len(c)), key=lambda i: abs(c[i] - a[i]))
    return "DIFFERS", (f"step {worst}: rumus {c[worst]:.6g}, torch {min(cols[worst]):.6g} .. {max(cols[worst]):.6g}"
                       f" over {len(torch_runs)} seeds")


def _fmt(res: dict[str, Any]) -> str:
    return "error" if "error" in res else f"{res['losses'][-1]:.5f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--min-pass", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    fetch_packages.fetch_all()
    names = args.only or list(PROGRAMS)
    jobs = [(n, fw, seeds) for n in names
            for fw, seeds in (("rumus", [0]), ("torch", list(range(PROGRAMS[n].torch_seeds))))]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outs = list(pool.map(lambda j: run_one(*j), jobs))
    results = {(n, fw, s): o for (n, fw, seeds), runs in zip(jobs, outs) for s, o in zip(seeds, runs)}
    rows = []
    counted = passed = 0
    print("| program | package | torch seed 0 | torch seed 1 | rumus | verdict | note / first error |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in names:
        tr = [results[(n, "torch", s)] for s in range(PROGRAMS[n].torch_seeds)]
        t0, t1, r = tr[0], tr[1], results[(n, "rumus", 0)]
        v, why = verdict(tr, r)
        if v != "TORCH-FAIL":
            counted += 1
            passed += v in ("match", "spread")
        why = why.replace("|", "\\|").replace("\n", " ")
        print(f"| {n} | {PROGRAMS[n].package} | {_fmt(t0)} | {_fmt(t1)} | {_fmt(r)} | {v} | {why} |")
        rows.append({"program": n, "verdict": v, "why": why, "torch": tr, "rumus": r})
    print(f"\n{passed} passed, {counted - passed} failed (of {counted} programs run; "
          f"{len(names) - counted} with a broken adapter)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if passed >= args.min_pass else 1


if __name__ == "__main__":
    sys.exit(main())
