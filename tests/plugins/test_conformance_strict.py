"""`rumus conformance` is strict by default (issue 9): it exits non-zero on a plugin that fails to load,
on a kernel module that did not import, on a stale/missing C build, on a held dtype without a kernel
(MISSING) and on a registered kernel that nothing can test (UNTESTED); known gaps go in an xfails file,
and an xfail that passes fails the run. Each case runs the real command in a subprocess with a small
fake plugin installed as an entry point; a well-behaved variant of the same plugin exits 0, so every
non-zero exit below is caused by the one thing the test changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fake_plugin import install_fake_plugin

PLUGIN = """
import numpy as np
from rumus_contracts import OpSchema, Sample, hookimpl, float16, float32, float64

def reference(x):
    return -x

def samples(rng):
    return [Sample([rng.uniform(-1, 1, (3, 4))], name="3x4"), Sample([rng.uniform(-1, 1, (5,))], name="5")]

def kernel(outputs, inputs, attrs):
    (out,), (x,) = outputs, inputs
    n = x.numel
    np.negative(x.buffer[x.offset:x.offset + n], out=out.buffer[out.offset:out.offset + n])

@hookimpl
def rumus_register_ops(registry):
    registry.register(OpSchema("fakeneg", ("x",), lambda s, a: [tuple(s[0])], dtypes={schema_dtypes},
                               contiguous=("x",), reference=reference, samples=samples))

@hookimpl
def rumus_register_kernels(registry):
    registry.register("fakeneg", "cpu", kernel, dtypes={kernel_dtypes})
"""
GOOD = {"schema_dtypes": "(float32, float64)", "kernel_dtypes": "[float32, float64]"}


def install(tmp_path: Path, source: str, name: str = "fakeneg") -> str:
    return install_fake_plugin(tmp_path, name, source)


def conformance(path: str, *args: str, pre: str = "") -> subprocess.CompletedProcess[str]:
    """`rumus conformance --backend cpu -k fakeneg ARGS`, after running `pre` in the same process."""
    code = (f"import sys\n{pre}\nfrom rumus_conformance.runner import main\n"
            f"sys.exit(main(['--backend', 'cpu', '-k', 'fakeneg', *{list(args)!r}]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([path, *sys.path]), "RUMUS_BACKEND": "cpu"}
    for key in ("RUMUS_DISABLE_PLUGIN_AUTOLOAD", "RUMUS_PLUGINS", "RUMUS_CONFORMANCE_XFAILS"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_well_behaved_plugin_passes(tmp_path: Path):
    out = conformance(install(tmp_path, PLUGIN.format(**GOOD)))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "fakeneg" in out.stdout and "passed" in out.stdout


def test_plugin_that_fails_to_load_fails_the_run(tmp_path: Path):
    path = install(tmp_path, PLUGIN.format(**GOOD))
    install(tmp_path, "raise ImportError('libbroken.so: cannot open shared object file')\n", name="broken")
    out = conformance(path)
    assert out.returncode != 0
    assert "plugin 'broken' failed to load" in out.stdout and "libbroken.so" in out.stdout


def test_kernel_module_that_does_not_import_fails_the_run(tmp_path: Path):
    # None in sys.modules makes `import rumus_cpu.kernels_optim` raise ImportError, as a broken module would
    pre = "sys.modules['rumus_cpu.kernels_optim'] = None"
    out = conformance(install(tmp_path, PLUGIN.format(**GOOD)), pre=pre)
    assert out.returncode != 0
    assert "plugin 'cpu' loaded partly" in out.stdout and "rumus_cpu.kernels_optim" in out.stdout


def test_unloadable_c_extension_fails_the_run(tmp_path: Path):
    # what a missing or stale build looks like to the CPU plugin: importing rumus_cpu._lib raises
    pre = "sys.modules['rumus_cpu._lib'] = None"
    out = conformance(install(tmp_path, PLUGIN.format(**GOOD)), pre=pre)
    assert out.returncode != 0
    assert "plugin 'cpu' loaded partly: C kernels" in out.stdout


# the CPU backend holds float16 since issue 13: these run against one that does not
DROP_FLOAT16 = "import rumus_cpu.backend as b\nb.DTYPES = tuple(d for d in b.DTYPES if d.name != 'float16')"


def test_a_named_dtype_the_backend_does_not_hold_is_untested_and_fails_the_run(tmp_path: Path):
    # the kernel names float16, which the backend does not hold: that registration can never be
    # tested, and must not pass as "skipped"
    source = PLUGIN.format(schema_dtypes="(float32, float16)", kernel_dtypes="[float32, float16]")
    out = conformance(install(tmp_path, source), pre=DROP_FLOAT16)
    assert out.returncode != 0
    assert "UNTESTED" in out.stdout and "fakeneg / rumus.float16" in out.stdout


def test_dtypes_none_claims_only_the_dtypes_the_backend_holds(tmp_path: Path):
    # dtypes=None claims every dtype of the op that the backend holds: float16 is no claim here
    source = PLUGIN.format(schema_dtypes="(float32, float16)", kernel_dtypes="None")
    out = conformance(install(tmp_path, source), pre=DROP_FLOAT16)
    assert out.returncode == 0, out.stdout[-3000:]
    lines = out.stdout.splitlines()
    header = lines[lines.index("backend: cpu") + 1].split()
    assert header == ["op", "f32"]  # no float16 column: nothing claims it
    assert next(line.split() for line in lines if line.startswith("fakeneg ")) == ["fakeneg", "ok"]
    assert "fakeneg-float16" not in out.stdout and "UNTESTED" not in out.stdout


def test_held_dtype_without_kernel_fails_unless_listed_as_known_gap(tmp_path: Path):
    path = install(tmp_path, PLUGIN.format(schema_dtypes="(float32, float64)", kernel_dtypes="[float32]"))
    out = conformance(path)
    assert out.returncode != 0 and "MISSING" in out.stdout and "MISS" in out.stdout
    gaps = tmp_path / "xfails.txt"
    gaps.write_text("# known gaps of the fake plugin\nfakeneg-float64  # no float64 kernel yet\n")
    listed = conformance(path, "--xfails", str(gaps))
    assert listed.returncode == 0, listed.stdout[-3000:]
    assert "xfailed" in listed.stdout


def test_xfail_that_passes_fails_the_run(tmp_path: Path):
    gaps = tmp_path / "xfails.txt"
    gaps.write_text("fakeneg-float32\n")  # listed as a gap, but the kernel is there and right
    out = conformance(install(tmp_path, PLUGIN.format(**GOOD)), "--xfails", str(gaps))
    assert out.returncode != 0
    assert "XPASS" in out.stdout


def test_malformed_xfails_file_is_refused(tmp_path: Path):
    gaps = tmp_path / "xfails.txt"
    gaps.write_text("this is not an entry\n")
    out = conformance(install(tmp_path, PLUGIN.format(**GOOD)), "--xfails", str(gaps))
    assert out.returncode != 0 and "is not an xfails entry" in out.stderr
