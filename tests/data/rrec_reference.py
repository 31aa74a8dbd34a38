"""An independent SPEC B codec written with `struct` only (no rumus code), for byte-level tests.

encode_block / build_file write files by hand; decode_record / decode_file parse them by hand and
return None for anything SPEC B does not allow.
"""

from __future__ import annotations

import struct

import numpy as np

# SPEC B's float tags, then the integer and bool tags (bool: one byte, 0 or 1)
NP = {0: "<f4", 1: "<f2", 2: "i1", 3: "u1", 4: "<i2", 5: "<i4", 6: "<i8", 7: "u1"}
BOOL_TAG = 7


def encode_block(arr: np.ndarray, tag: int) -> bytes:
    arr = np.asarray(arr)
    data = np.ascontiguousarray(arr, dtype=NP[tag]).tobytes()
    pad = (-len(data)) % 4
    return struct.pack("<I", arr.ndim) + b"".join(struct.pack("<I", d) for d in arr.shape) + \
        struct.pack("<I", tag) + data + b"\x00" * pad


def build_file(records: list[tuple[bytes, bytes]], *, magic: bytes = b"RREC", version: int = 1,
               num_records: int | None = None, index_offset: int | None = None,
               index: list[tuple[int, int]] | None = None, reserved: bytes = b"\x00" * 40,
               tail: bytes = b"") -> bytes:
    """records are (input block bytes, target block bytes); every field can be overridden."""
    body, entries, pos = b"", [], 64
    for x, y in records:
        entries.append((pos, len(x) + len(y)))
        body += x + y
        pos += len(x) + len(y)
    idx = index if index is not None else entries
    n = len(records) if num_records is None else num_records
    io = pos if index_offset is None else index_offset
    header = magic + struct.pack("<I", version) + struct.pack("<Q", n) + struct.pack("<Q", io) + reserved
    assert len(header) == 64
    return header + body + b"".join(struct.pack("<QQ", o, ln) for o, ln in idx) + tail


def _decode_block(buf: bytes, pos: int, end: int) -> tuple[np.ndarray, int] | None:
    if end - pos < 8:
        return None
    (ndim,) = struct.unpack_from("<I", buf, pos)
    if ndim > 32 or pos + 4 * (ndim + 2) > end:
        return None
    dims = struct.unpack_from(f"<{ndim}I", buf, pos + 4)
    (tag,) = struct.unpack_from("<I", buf, pos + 4 + 4 * ndim)
    if tag not in NP:
        return None
    start = pos + 4 * (ndim + 2)
    n = 1
    for d in dims:
        n *= d
    nbytes = n * np.dtype(NP[tag]).itemsize
    stop = start + nbytes + (-nbytes) % 4
    if stop > end or any(buf[start + nbytes:stop]):
        return None
    if np.prod([d or 1 for d in dims], dtype=object) * np.dtype(NP[tag]).itemsize >= 1 << 62:
        return None  # an empty block whose other sizes overflow: not representable
    raw = np.frombuffer(buf[start:start + nbytes], dtype=NP[tag]).reshape(dims)
    if tag == BOOL_TAG:
        return (raw.astype(np.bool_), stop) if not (raw > 1).any() else None
    return (raw.astype(np.float32) if tag in (0, 1) else raw.astype(raw.dtype.newbyteorder("="))), stop


def decode_record(buf: bytes, offset: int, length: int) -> tuple[np.ndarray, np.ndarray] | None:
    end = offset + length
    x = _decode_block(buf, offset, end)
    if x is None:
        return None
    y = _decode_block(buf, x[1], end)
    if y is None or y[1] != end:
        return None
    return x[0], y[0]


def parse_header(buf: bytes) -> tuple[int, int]:
    assert buf[:4] == b"RREC" and struct.unpack_from("<I", buf, 4)[0] == 1 and buf[24:64] == b"\x00" * 40
    n, io = struct.unpack_from("<QQ", buf, 8)
    return n, io


def decode_file(buf: bytes) -> list[tuple[np.ndarray, np.ndarray]]:
    n, io = parse_header(buf)
    assert io + 16 * n == len(buf)
    out = []
    for i in range(n):
        off, ln = struct.unpack_from("<QQ", buf, io + 16 * i)
        rec = decode_record(buf, off, ln)
        assert rec is not None
        out.append(rec)
    return out


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shape and values, NaN == NaN, and equal bits (so -0.0 != 0.0)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


class time_limit:
    """`with time_limit(s):` raises TimeoutError in the main thread after s seconds (POSIX SIGALRM):
    a hang fails the test instead of stalling CI."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        import signal

        def fire(signum: int, frame: object) -> None:
            raise TimeoutError(f"took longer than {self.seconds} s")

        self._old = signal.signal(signal.SIGALRM, fire)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc: object) -> None:
        import signal
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._old)
