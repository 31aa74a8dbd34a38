"""Download the corpus wheels (pinned in packages.py) with pip, check their hashes, unpack them.

    python tests/compat/corpus/fetch_packages.py        # idempotent; prints the unpack folder

The cache lives outside git: $RUMUS_CORPUS_CACHE, else ~/.cache/rumus-corpus.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from packages import PACKAGES, SCAN_PACKAGES, Package  # noqa: E402


def cache_dir() -> Path:
    return Path(os.environ.get("RUMUS_CORPUS_CACHE", Path.home() / ".cache" / "rumus-corpus"))


def site_dir() -> Path:
    return cache_dir() / "site"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def scan_dir() -> Path:
    return cache_dir() / "scan"


def fetch_all(packages: dict[str, Package] | None = None, site: Path | None = None) -> Path:
    """Download and unpack `packages` (default: the corpus's) into `site` (default: site_dir())."""
    packages = PACKAGES if packages is None else packages
    site = site_dir() if site is None else site
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    site.mkdir(parents=True, exist_ok=True)
    for name, pkg in packages.items():
        wheel = wheels / pkg.wheel
        marker = site / f".{pkg.wheel}.unpacked"
        if marker.exists():
            continue
        if not wheel.exists():
            # The wheels are pure Python; --python-version lets pip take one whose metadata names an
            # older interpreter range than ours (the code itself runs here).
            where = (["--platform", "manylinux_2_28_x86_64", "--python-version", "3.11"] if "cp311" in pkg.wheel
                     else ["--python-version", "3.10"])
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            *where, "-d", str(wheels), f"{name}=={pkg.version}"], check=True)
        digest = _sha256(wheel)
        if digest != pkg.sha256:
            raise SystemExit(f"{pkg.wheel}: sha256 {digest} is not the pinned {pkg.sha256}; refusing to use it")
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
        marker.write_text(pkg.sha256)
    return site


if __name__ == "__main__":
    print(fetch_all())
    if "--scan" in sys.argv:
        print(fetch_all(SCAN_PACKAGES, scan_dir()))
