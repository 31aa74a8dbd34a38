"""Print issue 20's table: per adversarial class, the cases tried and how many went wrong.

    python tests/adversarial/report.py            # CPU (RUMUS_BACKEND=wgpu for the WebGPU casts)
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from classes import CLASSES  # noqa: E402


def main() -> int:
    width = max(len(k) for k in CLASSES)
    print(f"{'class (issue 20 item)':<{width}}  {'tried':>6}  {'wrong':>6}  {'seconds':>8}")
    total_wrong = 0
    for label, gen in CLASSES.items():
        start = time.perf_counter()
        cases = list(gen())
        wrong = [c for c in cases if c.problem is not None]
        total_wrong += len(wrong)
        print(f"{label:<{width}}  {len(cases):>6}  {len(wrong):>6}  {time.perf_counter() - start:>8.1f}")
        for c in wrong[:5]:
            print(f"    WRONG {c.name}: {c.problem}")
    print(f"backend: {os.environ.get('RUMUS_BACKEND', 'cpu')}; wrong in total: {total_wrong}")
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
