"""A fake installed plugin distribution for tests that load plugins in a subprocess: a module plus a
dist-info with one `rumus` entry point, in a folder to put on PYTHONPATH."""

from __future__ import annotations

import textwrap
from pathlib import Path


def install_fake_plugin(folder: Path, name: str, source: str) -> str:
    """Writes <name>_mod.py (the dedented `source`) and <name>_plugin-0.1.dist-info whose entry point
    `name` in group `rumus` names that module; returns the folder as a path string."""
    (folder / f"{name}_mod.py").write_text(textwrap.dedent(source))
    info = folder / f"{name}_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[rumus]\n{name} = {name}_mod\n")
    return str(folder)
