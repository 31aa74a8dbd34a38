"""Every environment knob RUMUS reads, declared once: name, type, default, a one-line doc, and whether it
is for users or an experiment kept for A/B runs and tests.

The table lives in the ports so that backends and plugins (which never import the core) read their knobs
through it too; `rumus.config` is the user-facing view (`rumus info --config`, docs/CONFIG.md). A plugin
declares its own knobs with `declare` at import. Values are read from the environment on every `get`, so
a test or a program that sets a variable later sees it; a value that does not parse raises `ConfigError`
naming the variable and what it accepts (a typo must not silently become the default).

The C build scripts (setup.py, */csrc/build_*.py) run before RUMUS is importable and read their one
knob, RUMUS_NO_OPENMP, themselves; it is declared here so that it is listed with the rest.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from .errors import RumusError

Kind = Literal["str", "int", "float", "flag", "choice", "path"]
Value = str | int | float | bool | None

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


class ConfigError(RumusError, ValueError):
    """An environment knob holds a value its declaration does not accept (torch raises ValueError-kinds for
    bad settings); the message names the variable, the value and what it accepts."""


@dataclass(frozen=True)
class Knob:
    name: str  # the environment variable
    kind: Kind
    default: Value  # what an unset (or empty) variable means
    doc: str  # one line: what it changes, in the user's terms
    owner: str  # who reads it: core, cpu, wgpu, conformance, distributed, build, or a plugin's name
    user: bool = False  # True: a user-facing setting; False: an experiment / test switch
    choices: tuple[str, ...] = ()  # for kind "choice"
    least: float | None = None  # smallest accepted number for kind "int" / "float"

    def parse(self, raw: str) -> Value:
        """The value of the variable's text `raw` (already stripped and non-empty)."""
        if self.kind in ("str", "path"):
            return os.path.expanduser(raw) if self.kind == "path" else raw
        if self.kind == "flag":
            word = raw.lower()
            if word in TRUE_WORDS:
                return True
            if word in FALSE_WORDS:
                return False
            raise ConfigError(f"{self.name}={raw!r} is not a yes/no value; use 1 or 0 ({self.doc})")
        if self.kind == "choice":
            word = raw.lower()
            if word not in self.choices:
                raise ConfigError(f"{self.name}={raw!r} is not one of {', '.join(self.choices)} ({self.doc})")
            return word
        try:
            number: int | float = int(raw) if self.kind == "int" else float(raw)
        except ValueError:
            number = float("nan")
        if number != number or (self.least is not None and number < self.least):
            what = "an integer" if self.kind == "int" else "a number"
            bound = f" >= {self.least:g}" if self.least is not None else ""
            raise ConfigError(f"{self.name}={raw!r} is not {what}{bound} ({self.doc})")
        return number


KNOBS: dict[str, Knob] = {}


def declare(name: str, kind: Kind, default: Value, doc: str, *, owner: str, user: bool = False,
            choices: tuple[str, ...] = (), least: float | None = None) -> Knob:
    """Add a knob to the table (a plugin calls this at import for its own). Declaring the same name again
    with the same fields is a no-op (modules may be reloaded); with different fields it is an error."""
    if not name.startswith("RUMUS_"):
        raise ConfigError(f"knob {name!r}: RUMUS's knobs are environment variables named RUMUS_*")
    if kind == "choice" and not choices:
        raise ConfigError(f"knob {name!r}: a choice knob lists its choices")
    knob = Knob(name, kind, default, doc, owner, user, choices, least)
    have = KNOBS.get(name)
    if have is not None and have != knob:
        raise ConfigError(f"knob {name!r} is declared twice, differently (by {have.owner} and {owner})")
    KNOBS[name] = knob
    return knob


def get(name: str) -> Value:
    """The knob's current value: the environment variable parsed by its declaration, else its default."""
    knob = KNOBS.get(name)
    if knob is None:
        raise ConfigError(f"{name} is not a declared knob; see `rumus info --config` for the list")
    raw = os.environ.get(name, "").strip()
    return knob.parse(raw) if raw else knob.default


def is_set(name: str) -> bool:
    """Whether the user set the knob's variable to something non-empty (for 'as set by the user' notes)."""
    if name not in KNOBS:
        raise ConfigError(f"{name} is not a declared knob; see `rumus info --config` for the list")
    return bool(os.environ.get(name, "").strip())


def flag(name: str) -> bool:
    return bool(get(name))


def integer(name: str) -> int:
    value = get(name)
    assert isinstance(value, int) and not isinstance(value, bool), name
    return value


def text(name: str) -> str:
    value = get(name)
    return "" if value is None else str(value)


# --- user-facing -------------------------------------------------------------------------------------------
declare("RUMUS_BACKEND", "str", "cpu", "default device of new tensors: cpu, wgpu, wgpu:1, or a plugin backend",
        owner="core", user=True)
declare("RUMUS_NUM_THREADS", "int", None, "CPU kernel and BLAS threads (unset: one per physical core)",
        owner="cpu", user=True, least=1)
declare("RUMUS_PLUGINS", "str", "", "comma-separated third-party plugins to load (unset: every installed one)",
        owner="core", user=True)
declare("RUMUS_DISABLE_PLUGIN_AUTOLOAD", "flag", False, "load no third-party plugin, only RUMUS's own",
        owner="core", user=True)
declare("RUMUS_CACHE_DIR", "path", None,
        "where rm.compile's fused CPU kernels are cached (unset: ~/.cache/rumus/fused)", owner="cpu", user=True)
declare("RUMUS_COMPILE", "flag", True, "0 makes rm.compile run functions eagerly (for debugging)",
        owner="core", user=True)
declare("RUMUS_TRACEBACK", "flag", False, "the CLI prints the full traceback of an internal error",
        owner="core", user=True)
declare("RUMUS_CONFORMANCE_XFAILS", "path", None, "the known-failures file the conformance suite reads",
        owner="conformance", user=True)
declare("RUMUS_DIST_DEVICE", "choice", "cpu", "the device each rank of `rumus launch` uses (wgpu: wgpu:<local rank>)",
        owner="distributed", user=True, choices=("cpu", "wgpu"))
declare("RUMUS_WGPU_DETERMINISTIC", "flag", False,
        "wgpu index_add/scatter_add in a fixed order (bit-reproducible, slower)",
        owner="wgpu", user=True)

# --- experiments and test switches: each forces one side of a choice the code otherwise makes itself ---------
declare("RUMUS_COMPILE_TAPE", "flag", True, "0: rm.compile replays its captured graph without the recorded tape",
        owner="core")
declare("RUMUS_NO_OPENMP", "flag", False, "build the plugins' C kernels without OpenMP (read by their build scripts)",
        owner="build")
declare("RUMUS_GEMM_KERNEL", "choice", "auto", "float32 GEMM: own micro-kernel where it wins (auto), OpenBLAS, or own",
        owner="cpu", choices=("auto", "blas", "own"))
declare("RUMUS_MALLOC_KEEP_MB", "int", 256, "MiB of freed memory glibc keeps for the next step (0: glibc's default)",
        owner="cpu", least=0)
declare("RUMUS_QUANT_ISA", "choice", None, "force the quantized matmuls' inner loop (unset: the best the CPU has)",
        owner="cpu", choices=("portable", "avx2", "avx512vnni"))
declare("RUMUS_WGPU_POOL_CACHE_MB", "float", 8192.0, "MiB of freed GPU buffers the wgpu pool keeps for reuse",
        owner="wgpu", least=0)
declare("RUMUS_WGPU_PUBLIC_API", "flag", False, "use only wgpu-py's public API (no private fast paths)", owner="wgpu")
declare("RUMUS_WGPU_CHECKED", "flag", False, "compile shaders with wgpu's bounds checks", owner="wgpu")
declare("RUMUS_WGPU_GEMM", "str", None, "force the GEMM tile (name[:split-K]) for A/B runs", owner="wgpu")
declare("RUMUS_WGPU_ROW_SPLIT_WORKGROUPS", "int", 1024, "target workgroups when a long row is split (0: never)",
        owner="wgpu", least=0)
declare("RUMUS_WGPU_CONV_IM2COL", "flag", False, "every wgpu convolution through im2col + GEMM", owner="wgpu")
declare("RUMUS_WGPU_NO_SUBGROUPS", "flag", False, "row merges through workgroup memory even with subgroups",
        owner="wgpu")
declare("RUMUS_WGPU_NOVEC", "flag", False, "scalar shaders instead of the vec4 forms", owner="wgpu")
declare("RUMUS_WGPU_IMPL", "choice", "native", "the WebGPU implementation under the wgpu backend: native (wgpu-py on "
        "wgpu-native) or dawn (the wgpudawn package, which reaches matrix units)", owner="wgpu", user=True,
        choices=("native", "dawn"))
declare("RUMUS_WGPU_DAWN_UNCHECKED", "flag", False, "Dawn without its shader bounds checks (robustness) on every "
        "kernel: the matrix GEMM about 2x faster, out-of-bounds accesses undefined", owner="wgpu")
declare("RUMUS_WGPU_MATRIX_UNITS", "flag", True, "float16 GEMMs and attention on subgroup matrices where the "
        "device has them (RUMUS_WGPU_IMPL=dawn)", owner="wgpu")
