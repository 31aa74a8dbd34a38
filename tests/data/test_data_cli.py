"""`rumus rrec inspect | verify | convert` through rumus.data.cli.main(argv)."""

import numpy as np

from rumus.data import RecordFile, RecordWriter
from rumus.data.cli import main


def _file(path, n=5):
    with RecordWriter(path) as w:
        for i in range(n):
            w.append(np.full((3, 4), i, np.float32), np.array([i], np.float16))
    return path


def test_inspect(tmp_path, capsys):
    path = _file(tmp_path / "a.rrec")
    assert main(["rrec", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "records:   5" in out and "5 x [3, 4] float32" in out and "5 x [1] float16" in out
    assert f"size:      {path.stat().st_size} bytes" in out and "record size: min 80, max 80" in out
    assert main(["inspect", str(path)]) == 0  # the leading "rrec" is optional


def test_verify_ok_and_corrupted(tmp_path, capsys):
    path = _file(tmp_path / "a.rrec")
    assert main(["rrec", "verify", str(path)]) == 0
    assert "OK" in capsys.readouterr().out
    data = bytearray(path.read_bytes())
    data[64 + 80 * 3 + 4 * 3] = 9  # dtype tag of record 3's input block
    path.write_bytes(bytes(data))
    assert main(["rrec", "verify", str(path)]) == 1
    err = capsys.readouterr().err
    assert "unknown dtype tag 9" in err and f"byte {64 + 80 * 3 + 12}" in err
    assert main(["rrec", "inspect", str(path)]) == 1  # inspect reports the defect too
    path.write_bytes(bytes(data[:100]))
    assert main(["rrec", "verify", str(path)]) == 1
    assert "beyond the end of the file" in capsys.readouterr().err
    assert main(["rrec", "verify", str(tmp_path / "missing.rrec")]) == 2


def test_convert(tmp_path, capsys):
    npz = tmp_path / "d.npz"
    inputs = np.random.default_rng(0).standard_normal((6, 2, 3)).astype(np.float32)
    targets = np.arange(6)
    np.savez(npz, inputs=inputs, targets=targets)
    out = tmp_path / "d.rrec"
    assert main(["rrec", "convert", str(npz), str(out)]) == 0
    assert "wrote 6 records" in capsys.readouterr().out
    with RecordFile(out) as f:
        assert len(f) == 6 and np.array_equal(f.arrays(4)[0], inputs[4]) and f.arrays(4)[1].item() == 4.0
        assert f.layout(0).target.shape == ()
    half = tmp_path / "h.rrec"
    assert main(["rrec", "convert", str(npz), str(half), "--float16"]) == 0
    with RecordFile(half) as f:
        assert f.layout(0).input.dtype_name == "float16"
        assert np.array_equal(f.arrays(1)[0], inputs[1].astype(np.float16).astype(np.float32))
    np.savez(npz, inputs=inputs, labels=targets)
    assert main(["rrec", "convert", str(npz), str(out)]) == 2
    assert "no array named targets" in capsys.readouterr().err
    np.savez(npz, inputs=inputs, targets=targets[:5])
    assert main(["rrec", "convert", str(npz), str(out)]) == 2
    assert main(["rrec", "bogus"]) == 2
