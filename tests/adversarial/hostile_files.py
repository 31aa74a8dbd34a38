"""Hostile checkpoint files built by hand: pickle opcodes as raw bytes, torch-format zips and legacy
streams around them, zip entries whose headers lie. Shared by cases_loaders.py and tests/io."""

from __future__ import annotations

import io
import pickle
import struct
import zipfile
import zlib

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


# ---- pickle opcodes -------------------------------------------------------------------------------
def glob(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def text(s: str) -> bytes:
    raw = s.encode("utf-8")
    return b"X" + struct.pack("<I", len(raw)) + raw


def num(n: int) -> bytes:
    if -(2**31) <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def tup(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def dict_of(**items: bytes) -> bytes:
    return b"}(" + b"".join(text(k) + v for k, v in items.items()) + b"u"


def pickle_of(*ops: bytes) -> bytes:
    return b"\x80\x02" + b"".join(ops) + b"."


def ordered_dict() -> bytes:
    return glob("collections", "OrderedDict") + b")R"


def storage(key: str = "0", numel: int = 4, cls: str = "FloatStorage", legacy: bool = False) -> bytes:
    """A persistent storage id; the legacy format's has a sixth field (view metadata, None)."""
    return tup(text("storage"), glob("torch", cls), text(key), text("cpu"), num(numel), b"N" if legacy else b"") + b"Q"


def tensor(offset: int, size: tuple[int, ...], stride: tuple[int, ...], key: str = "0", numel: int = 4,
           cls: str = "FloatStorage", requires_grad: bool = False, legacy: bool = False) -> bytes:
    return (glob("torch._utils", "_rebuild_tensor_v2")
            + tup(storage(key, numel, cls, legacy), num(offset), tup(*map(num, size)), tup(*map(num, stride)),
                  b"\x88" if requires_grad else b"\x89", ordered_dict()) + b"R")


# ---- containers -----------------------------------------------------------------------------------
def torch_zip(pkl: bytes, storages: dict[str, bytes] | None = None) -> bytes:
    """The torch.save zip layout around a data.pkl (torch.load reads what Python's zipfile writes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        for key, raw in (storages or {}).items():
            z.writestr(f"archive/data/{key}", raw)
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def torch_legacy(obj_pkl: bytes, storages: list[tuple[str, int, bytes]]) -> bytes:
    """The pre-1.6 stream: magic, protocol, sys info, the object, the keys, then each storage."""
    info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}
    head = b"".join(pickle.dumps(v, protocol=2) for v in (LEGACY_MAGIC, 1001, info))
    keys = pickle.dumps([k for k, _, _ in storages], protocol=2)
    return head + obj_pkl + keys + b"".join(struct.pack("<q", n) + raw for _, n, raw in storages)


def deflate_zeros(nbytes: int) -> bytes:
    """A raw deflate stream of `nbytes` zeros, built cheaply: one 1 MiB chunk compressed with a full
    flush (so it depends on nothing before it) repeated, then a final empty block."""
    chunk = 1 << 20
    whole, rest = divmod(nbytes, chunk)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(chunk)) + c.flush(zlib.Z_FULL_FLUSH)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    tail = c.compress(bytes(rest)) + c.flush()
    return block * whole + tail


def zip_with_raw_entry(entries: dict[str, bytes], member: str, deflated: bytes, inflated_size: int,
                       crc: int, declared_size: int | None = None) -> bytes:
    """A zip of stored `entries` plus `member` holding a raw deflate stream; its headers may declare
    another inflated size than the stream really has (a lying header)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, raw in entries.items():
            z.writestr(name, raw)
    body = bytearray(buf.getvalue())
    # rebuild by hand: local header + data for `member`, then a central directory over everything
    z = zipfile.ZipFile(io.BytesIO(bytes(body)))
    infos = z.infolist()
    end_of_entries = max((i.header_offset + 30 + len(i.filename) + i.compress_size for i in infos), default=0)
    out = bytearray(body[:end_of_entries])
    name = member.encode()
    size = inflated_size if declared_size is None else declared_size
    local_at = len(out)
    out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(deflated), size, len(name), 0)
    out += name + deflated
    central = bytearray()
    for i in infos:
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, i.CRC, i.compress_size,
                               i.file_size, len(i.filename.encode()), 0, 0, 0, 0, 0, i.header_offset)
        central += i.filename.encode()
    central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(deflated), size,
                           len(name), 0, 0, 0, 0, 0, local_at)
    central += name
    cd_at = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(infos) + 1, len(infos) + 1, len(central), cd_at, 0)
    return bytes(out)


def patch_declared_size(data: bytes, member: str, size: int) -> bytes:
    """Change the inflated size `member` declares in both its local and central headers."""
    out = bytearray(data)
    z = zipfile.ZipFile(io.BytesIO(data))
    info = z.getinfo(member)
    struct.pack_into("<I", out, info.header_offset + 22, size)
    pos = 0
    while True:
        pos = data.find(b"PK\x01\x02", pos)
        if pos < 0:
            break
        (nlen,) = struct.unpack_from("<H", data, pos + 28)
        if data[pos + 46: pos + 46 + nlen] == member.encode():
            struct.pack_into("<I", out, pos + 24, size)
        pos += 46
    return bytes(out)
