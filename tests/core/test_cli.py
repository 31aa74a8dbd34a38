"""The `rumus` command dispatches to every tool (run as a user would, in a subprocess)."""

import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = next((p for p in (os.path.join(ROOT, "..", "shared", "fixtures", "canonical_fixed_mlp.json"),
                            "/work/shared/fixtures/canonical_fixed_mlp.json") if os.path.exists(p)), None)


def rumus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rumus", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RUMUS_BACKEND": "cpu"})


def test_info_lists_backends_and_capabilities():
    out = rumus("info")
    assert out.returncode == 0, out.stderr
    assert "backend cpu: device cpu" in out.stdout and "default device: cpu" in out.stdout
    cpu = out.stdout.split("backend cpu: device cpu", 1)[1].split("\n\n", 1)[0]
    assert any(ln.split()[:2] == ["dtypes:", "float32,"] for ln in cpu.splitlines()), cpu
    assert max(len(ln) for ln in out.stdout.splitlines()) <= 100 and not out.stderr, out.stderr
    assert "configuration: RUMUS_BACKEND='cpu'" in out.stdout  # the knobs the user set


def test_info_config_lists_every_knob_with_its_value():
    out = rumus("info", "--config")
    assert out.returncode == 0 and not out.stderr, out.stderr
    assert "  RUMUS_BACKEND = 'cpu' (set)" in out.stdout and "  RUMUS_VISION_CONV = 'auto'" in out.stdout
    assert max(len(ln) for ln in out.stdout.splitlines()) <= 100
    assert "--config" in rumus("info", "--help").stdout


def test_unknown_command_prints_usage():
    out = rumus("frobnicate")
    assert out.returncode == 2 and "conformance" in out.stderr and not out.stdout


def test_fixed_verify_checks_the_canonical_fixture(tmp_path):
    assert FIXTURE is not None
    ok = rumus("fixed", "verify", FIXTURE)
    assert ok.returncode == 0 and "bit for bit" in ok.stdout
    tampered = tmp_path / "t.json"
    tampered.write_text(open(FIXTURE).read().replace('"output": [768]', '"output": [769]'))
    bad = rumus("fixed", "verify", str(tampered))
    assert bad.returncode != 0 and "first differing index" in bad.stdout


def test_rrec_convert_inspect_verify(tmp_path):
    npz = tmp_path / "d.npz"
    np.savez(npz, inputs=np.random.rand(6, 3).astype(np.float32), targets=np.arange(6, dtype=np.float32))
    rec = tmp_path / "d.rrec"
    assert rumus("rrec", "convert", str(npz), str(rec)).returncode == 0
    assert "records:   6" in rumus("rrec", "inspect", str(rec)).stdout
    assert rumus("rrec", "verify", str(rec)).returncode == 0
    data = bytearray(rec.read_bytes())
    data[0:4] = b"XXXX"
    rec.write_bytes(bytes(data))
    bad = rumus("rrec", "verify", str(rec))
    assert bad.returncode != 0 and "magic" in (bad.stdout + bad.stderr)


def test_conformance_command_prints_the_matrix():
    out = rumus("conformance", "--backend", "cpu", "-q", "-k", "test_forward and (add or softmax)")
    assert out.returncode == 0, out.stdout[-2000:]
    assert "rumus conformance: op x dtype" in out.stdout and "softmax" in out.stdout
