"""Adversarial cases of the loaders and saved files (`.pt` reader, rumus.save/load, zips, file paths,
disk full, ONNX external data): "never wrong, never in".

A case is wrong when a hostile file is accepted where it must be refused, when anything but the named
RUMUS error comes out (BadZipFile, ValueError, RecursionError, a crash), when a load differs from what
torch.load(weights_only=True) gives for the same file, when a failed write damages the previous file or
leaves a temp behind, or when something global (a dtype) changes. Every random choice is seeded.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import rumus as rm
from rumus_contracts import FileError, FormatError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hostile_files as h  # noqa: E402
from adversarial_cases import Case  # noqa: E402

F32 = np.arange(4, dtype=np.float32)
F32_BYTES = F32.tobytes()


def _expect(fn: Callable[[], object], error: type[BaseException], name: str,
            check: Callable[[], str | None] | None = None) -> Case:
    """`fn` must raise exactly `error` (a subclass counts); then `check` (global state) must hold."""
    try:
        fn()
        problem: str | None = f"accepted, expected {error.__name__}"
    except error:
        problem = None
    except BaseException as exc:  # noqa: BLE001
        problem = f"raised {type(exc).__name__}: {str(exc)[:100]}, expected {error.__name__}"
    if problem is None and check is not None:
        problem = check()
    return Case(name, problem)


def _torch_load(data: bytes) -> Any:
    import torch
    return torch.load(io.BytesIO(data), weights_only=True)


def _rm_load(data: bytes) -> Any:
    return rm.load(io.BytesIO(data))


def _same_as_torch(got: Any, want: Any, where: str = "") -> str | None:
    """None when a RUMUS load equals torch's load of the same file (structure, dtypes, shapes, values)."""
    import torch
    if isinstance(want, torch.Tensor):
        if not isinstance(got, rm.Tensor):
            return f"{where}: got {type(got).__name__}, torch a tensor"
        if tuple(got.shape) != tuple(want.shape) or str(got.dtype).split(".")[-1] != str(want.dtype).split(".")[-1]:
            return f"{where}: {got.dtype}{tuple(got.shape)} vs torch {want.dtype}{tuple(want.shape)}"
        if got.requires_grad != want.requires_grad:
            return f"{where}: requires_grad {got.requires_grad} vs torch {want.requires_grad}"
        if want.numel() <= 1 << 20:
            a = got.detach().float().numpy() if want.dtype == torch.bfloat16 else got.detach().numpy()
            b = want.detach().float().numpy() if want.dtype == torch.bfloat16 else want.detach().numpy()
            if not np.array_equal(a, b, equal_nan=True):
                return f"{where}: values differ from torch's"
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            return f"{where}: keys {list(got)[:5] if isinstance(got, dict) else type(got).__name__} vs {list(want)[:5]}"
        for k in want:
            p = _same_as_torch(got[k], want[k], f"{where}[{k!r}]")
            if p:
                return p
        return None
    if isinstance(want, (list, tuple)):
        if type(got) is not type(want) or len(got) != len(want):
            return f"{where}: {type(got).__name__} of {len(got) if hasattr(got, '__len__') else '?'} vs {want!r:.40}"
        for i, (g, w) in enumerate(zip(got, want)):
            p = _same_as_torch(g, w, f"{where}[{i}]")
            if p:
                return p
        return None
    if isinstance(want, torch.dtype):
        return None if str(got) == str(want).replace("torch.", "rumus.") or str(got).endswith(str(want)[6:]) \
            else f"{where}: dtype {got} vs {want}"
    return None if got == want or (got != got and want != want) else f"{where}: {got!r:.40} vs torch {want!r:.40}"


def _compare_with_torch(data: bytes, name: str, must_load: bool = False) -> Case:
    """torch refuses -> RUMUS must raise FormatError; torch loads -> RUMUS must load the same, or refuse
    with FormatError (RUMUS's rule is stricter) unless `must_load` says the file is an ordinary one."""
    try:
        want = _torch_load(data)
        torch_ok = True
    except Exception:  # noqa: BLE001
        torch_ok, want = False, None
    try:
        got = _rm_load(data)
    except FormatError as exc:
        return Case(name, f"refused a file torch loads: {str(exc)[:100]}" if must_load and torch_ok else None)
    except BaseException as exc:  # noqa: BLE001
        return Case(name, f"raised {type(exc).__name__}: {str(exc)[:100]}")
    if not torch_ok:
        return Case(name, "loaded a file torch.load(weights_only=True) refuses")
    return Case(name, _same_as_torch(got, want))


def _dtype_intact() -> str | None:
    got = rm.tensor([3.14159265]).tolist()[0]
    ok = got == float(np.float32(3.14159265)) and rm.float32.itemsize == 4 and rm.int64.itemsize == 8
    return None if ok else f"rumus dtypes changed: tensor([3.14159265]) reads {got}"


# ---- 1. BUILD and the other opcodes on allowed globals ---------------------------------------------
def pickle_build_on_globals() -> Iterator[Case]:
    z = h.torch_zip
    t = h.tensor(0, (4,), (1,))
    marker = os.path.join(tempfile.gettempdir(), f"rumus-pwned-{os.getpid()}")
    hostile = {
        "BUILD {_np: float16} on torch.float32": h.pickle_of(h.glob("torch", "float32"),
                                                             h.dict_of(_np=h.text("float16")), b"b"),
        "BUILD on torch.int64 (slot state)": h.pickle_of(h.glob("torch", "int64"),
                                                        h.tup(b"N", h.dict_of(name=h.text("x"))), b"b"),
        "BUILD on torch.bool then returned": h.pickle_of(h.glob("torch", "bool"), h.dict_of(_np=h.text("f8")), b"b"),
        "BUILD on a storage class": h.pickle_of(h.glob("torch", "FloatStorage"),
                                                h.dict_of(dtype=h.text("float64")), b"b"),
        "BUILD on torch.Size": h.pickle_of(h.glob("torch", "Size"), h.dict_of(x=h.num(1)), b"b"),
        "BUILD on the OrderedDict class": h.pickle_of(h.glob("collections", "OrderedDict"),
                                                      h.dict_of(x=h.num(1)), b"b"),
        "BUILD shape=(10**8,) on a tensor": h.pickle_of(t, h.dict_of(shape=h.tup(h.num(10**8))), b"b"),
        "BUILD set_ state on a tensor": h.pickle_of(t, h.tup(h.storage(), h.num(0), h.tup(h.num(10**8)),
                                                             h.tup(h.num(1))), b"b"),
        "BUILD on a parameter": h.pickle_of(h.glob("torch._utils", "_rebuild_parameter"),
                                            h.tup(t, b"\x88", h.ordered_dict()), b"R",
                                            h.dict_of(data=h.num(0)), b"b"),
        "BUILD __class__ on an OrderedDict": h.pickle_of(h.ordered_dict(), h.dict_of(__class__=h.num(0)), b"b"),
        "BUILD __dict__ on an OrderedDict": h.pickle_of(h.ordered_dict(), h.dict_of(__dict__=h.num(0)), b"b"),
        "REDUCE os.system": h.pickle_of(h.glob("os", "system"), h.tup(h.text(f"touch {marker}")), b"R"),
        "REDUCE posix.system": h.pickle_of(h.glob("posix", "system"), h.tup(h.text(f"touch {marker}")), b"R"),
        "REDUCE builtins.eval": h.pickle_of(h.glob("builtins", "eval"), h.tup(h.text("1+1")), b"R"),
        "REDUCE builtins.getattr": h.pickle_of(h.glob("builtins", "getattr"),
                                               h.tup(h.glob("torch", "float32"), h.text("__dict__")), b"R"),
        "REDUCE a dtype (not callable)": h.pickle_of(h.glob("torch", "float32"), h.tup(), b"R"),
        "REDUCE a memoised non-global": h.pickle_of(b"]q\x00", b"0", b"h\x00", h.tup(), b"R"),
        "NEWOBJ OrderedDict": h.pickle_of(h.glob("collections", "OrderedDict"), h.tup(), b"\x81"),
        "INST opcode": b"\x80\x02(i" + b"os\nsystem\n" + b".",
        "APPEND to a dtype": h.pickle_of(h.glob("torch", "float32"), h.num(1), b"a"),
        "APPENDS to an OrderedDict": h.pickle_of(h.ordered_dict(), b"(", h.num(1), b"e"),
        "SETITEM on a dtype": h.pickle_of(h.glob("torch", "float32"), h.text("_np"), h.text("f2"), b"s"),
        "SETITEM on a list": h.pickle_of(b"]", h.num(0), h.num(1), b"s"),
        "ADDITEMS to a frozenset": h.pickle_of(h.glob("builtins", "frozenset"), h.tup(b"]"), b"R(", h.num(1),
                                               b"\x90"),
        "persistent id not a storage": h.pickle_of(h.tup(h.text("module"), h.num(1), h.num(2), h.num(3),
                                                         h.num(4)), b"Q"),
        "persistent id of a wrong type": h.pickle_of(h.num(7), b"Q"),
        "STACK_GLOBAL os.system": b"\x80\x04" + b"\x8c\x02os\x8c\x06system\x93" + h.tup(h.text("true")) + b"R.",
        "LONG4 of 2**31 bytes": h.pickle_of(b"\x8b" + struct.pack("<i", 2**31 - 1)),
        "BINUNICODE past the end": h.pickle_of(b"X" + struct.pack("<I", 2**31)),
        "GET of a memo never stored": h.pickle_of(b"h\x07"),
        "STOP with two values": b"\x80\x02NN.",
        "empty stream": b"",
        "APPEND of the MARK sentinel": h.pickle_of(b"](a"),
        "DUP of an empty stack": h.pickle_of(b"2"),
        "bytearray(2**40)": h.pickle_of(h.glob("builtins", "bytearray"), h.tup(h.num(2**40)), b"R"),
        "set of unhashable lists": h.pickle_of(h.glob("builtins", "set"), h.tup(b"](]]e"), b"R"),
        "torch.Size of a string": h.pickle_of(h.glob("torch", "Size"), h.tup(h.text("abc")), b"R"),
        "Python 2 str not UTF-8": h.pickle_of(b"U\x02\xff\xfe"),
    }
    for name, pkl in hostile.items():
        yield _expect(lambda pkl=pkl: _rm_load(z(pkl, {"0": F32_BYTES})), FormatError, name, _dtype_intact)
        if os.path.exists(marker):
            os.unlink(marker)
            yield Case(f"{name}: no code ran", "the pickle ran a command")
    # what torch's weights-only unpickler accepts for BUILD (an OrderedDict's _metadata) loads, like torch
    meta = h.pickle_of(h.ordered_dict(), b"q\x00", h.text("w"), t, b"s",
                       h.dict_of(_metadata=h.ordered_dict()), b"b")
    yield _compare_with_torch(z(meta, {"0": F32_BYTES}), "BUILD _metadata on a state_dict loads as in torch", True)
    yield Case("rumus dtypes unchanged after every case", _dtype_intact())


# ---- 2. shape / stride / offset against the storage ------------------------------------------------
LAYOUTS: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = [
    (0, (4,), (1,)), (0, (2, 2), (2, 1)), (0, (2, 2), (1, 2)), (1, (3,), (1,)), (3, (1,), (1,)), (0, (), ()),
    (2, (), ()), (0, (0,), (1,)), (4, (0,), (1,)), (0, (2, 0, 3), (5, 1, 7)), (0, (4, 3), (1, 0)),
    (0, (10**8,), (1,)), (0, (5,), (1,)), (4, (1,), (1,)), (3, (2,), (1,)), (0, (2, 2), (3, 1)), (-1, (1,), (1,)),
    (0, (-1,), (1,)), (0, (2,), (-1,)), (3, (4,), (-1,)), (0, (2**62,), (1,)), (0, (2**62, 2**62), (0, 0)),
    (0, (2**63,), (0,)), (2**62, (1,), (1,)), (0, (2,), (2**62,)), (0, (2, 2), (2**63, 1)), (0, (1,) * 65, (1,) * 65),
    (0, (2, 2), (1,)), (0, (2,), (1, 1)), (0, (10,), (0,)), (1, (2, 3), (0, 1)),
]


def tensor_layouts() -> Iterator[Case]:
    for offset, size, stride in LAYOUTS:
        pkl = h.pickle_of(h.tensor(offset, size, stride))
        name = f"offset={offset} size={str(size)[:40]} stride={str(stride)[:40]} over 4 elements"
        ordinary = len(size) <= 64  # RUMUS's rank bound; every other layout torch loads must load
        yield _compare_with_torch(h.torch_zip(pkl, {"0": F32_BYTES}), f"zip {name}", ordinary)
        legacy = h.torch_legacy(h.pickle_of(h.tensor(offset, size, stride, legacy=True)), [("0", 4, F32_BYTES)])
        yield _compare_with_torch(legacy, f"legacy {name}", ordinary)
    # the storage's element count: promised more than the entry holds, a negative count, a huge count
    for numel in (5, -1, 2**62, 2**64):
        pkl = h.pickle_of(h.tensor(0, (1,), (1,), numel=numel))
        yield _expect(lambda pkl=pkl: _rm_load(h.torch_zip(pkl, {"0": F32_BYTES})), FormatError,
                      f"storage promising {numel} elements of a 16-byte entry")
    pkl = h.pickle_of(h.tensor(0, (2,), (1,), numel=2, cls="BoolStorage"))
    yield _expect(lambda: _rm_load(h.torch_zip(pkl, {"0": b"\x01\x07"})), FormatError, "bool storage byte 7")
    pkl = h.pickle_of(h.tensor(0, (2,), (1,), numel=2, cls="LongStorage", requires_grad=True))
    yield _compare_with_torch(h.torch_zip(pkl, {"0": bytes(16)}), "int64 tensor with requires_grad")
    for cls, dtype in (("HalfStorage", np.float16), ("LongStorage", np.int64), ("BFloat16Storage", np.uint16)):
        raw = np.arange(4).astype(dtype).tobytes()
        pkl = h.pickle_of(h.tensor(1, (3,), (1,), cls=cls))
        yield _compare_with_torch(h.torch_zip(pkl, {"0": raw}), f"{cls} view at offset 1", True)
    # a tensor whose sum used to read out of bounds (SIGSEGV): run it in a child so a crash is a case
    bad = h.torch_zip(h.pickle_of(h.tensor(0, (4,), (1,)), h.dict_of(shape=h.tup(h.num(10**8))), b"b"),
                      {"0": F32_BYTES})
    code = ("import io, sys, rumus as rm\n"
            "try:\n t = rm.load(io.BytesIO(sys.stdin.buffer.read()))\nexcept rm.FormatError:\n sys.exit(0)\n"
            "print(float(t.sum())); sys.exit(1)\n")
    proc = subprocess.run([sys.executable, "-c", code], input=bad, capture_output=True, timeout=120)
    yield Case("BUILD shape past storage then .sum() in a child process",
               None if proc.returncode == 0 else f"exit {proc.returncode} {proc.stderr[-200:]!r}")


# ---- 3. shared references ---------------------------------------------------------------------------
def _dag(levels: int, legacy: bool) -> bytes:
    """[t] shared twice at each of `levels` levels through the memo: 2**levels paths, levels+1 objects."""
    ops = [b"]q\x00", h.tensor(0, (4,), (1,), legacy=legacy), b"a"]  # memo 0: [t]
    for i in range(1, levels + 1):
        ops += [b"0](", b"h" + bytes([i - 1]), b"h" + bytes([i - 1]), b"e", b"q" + bytes([i])]
    return h.pickle_of(*ops)


def shared_references() -> Iterator[Case]:
    for fmt in ("zip", "legacy"):
        pkl = _dag(40, fmt == "legacy")
        data = h.torch_zip(pkl, {"0": F32_BYTES}) if fmt == "zip" else h.torch_legacy(pkl, [("0", 4, F32_BYTES)])
        try:
            got = _rm_load(data)
            node, problem = got, None
            for level in range(40):
                if not (isinstance(node, list) and len(node) == 2 and node[0] is node[1]):
                    problem = f"level {level} is not two references to one list"
                    break
                node = node[0]
            if problem is None and not (isinstance(node, list) and np.array_equal(node[0].numpy(), F32)):
                problem = "the leaf tensor is wrong"
        except BaseException as exc:  # noqa: BLE001
            problem = f"raised {type(exc).__name__}: {str(exc)[:80]}"
        yield Case(f"{fmt}: {len(data)}-byte file, 40 levels of shared children (2**40 paths)", problem)
    cyc = h.pickle_of(b"]q\x00", b"h\x00", b"a")
    for fmt, data in (("zip", h.torch_zip(cyc)), ("legacy", h.torch_legacy(cyc, []))):
        try:
            got = _rm_load(data)
            problem = None if isinstance(got, list) and got[0] is got else "the cycle was not kept"
        except BaseException as exc:  # noqa: BLE001
            problem = f"raised {type(exc).__name__}: {str(exc)[:80]}"
        yield Case(f"{fmt}: a list that contains itself", problem)
    import torch
    x = torch.arange(8, dtype=torch.float32)
    obj = {"a": x, "b": x[2:], "c": x.view(2, 4).t(), "d": x, "e": x[::2], "f": {"same": x}}
    for fmt, new in (("zip", True), ("legacy", False)):
        buf = io.BytesIO()
        torch.save(obj, buf, _use_new_zipfile_serialization=new)
        got = _rm_load(buf.getvalue())
        problem = _same_as_torch(got, _torch_load(buf.getvalue()))
        if problem is None and not (got["a"] is got["d"] is got["f"]["same"]):
            problem = "one tensor saved three times is not one tensor"
        if problem is None and not (got["a"]._storage is got["b"]._storage is got["c"]._storage is got["e"]._storage):
            problem = "views of one storage do not share it"
        if problem is None:
            got["a"].add_(1.0)
            if not np.array_equal(got["b"].numpy(), np.arange(2, 8, dtype=np.float32) + 1):
                problem = "an in-place change of a is not seen through b (torch shares the storage)"
        yield Case(f"{fmt}: torch.save of views sharing one storage", problem)


# ---- 4. stride-0 expands and huge views ---------------------------------------------------------------
def huge_views() -> Iterator[Case]:
    pkl = h.pickle_of(h.tensor(0, (2**27,), (0,), numel=1))
    data = h.torch_zip(pkl, {"0": b"\x00\x00\x80?"})
    try:
        t = _rm_load(data)
        problem = None if (t.shape == (2**27,) and t._storage.numel == 1 and float(t[2**27 - 1]) == 1.0) \
            else f"shape {t.shape}, storage of {t._storage.numel} elements (materialised?)"
    except BaseException as exc:  # noqa: BLE001
        problem = f"raised {type(exc).__name__}: {str(exc)[:80]}"
    yield Case(f"{len(data)}-byte file, stride-0 tensor of 2**27 elements stays a view of 1 element", problem)
    for size, stride in (((2**32 + 1,), (0,)), ((2**62,), (0,)), ((2**20, 2**20, 2**20), (0, 0, 0)),
                         ((2**31, 2**31), (0, 1))):
        pkl = h.pickle_of(h.tensor(0, size, stride, numel=2**31 + 1))
        yield _expect(lambda pkl=pkl: _rm_load(h.torch_zip(pkl, {"0": bytes(4 * (2**31 + 1))[:4]})), FormatError,
                      f"view {size} stride {stride}")
    import torch
    for shape in ((1000, 4), (64, 64, 4)):
        buf = io.BytesIO()
        torch.save({"e": torch.arange(4.0).expand(*shape)}, buf)
        got = _rm_load(buf.getvalue())
        problem = _same_as_torch(got, _torch_load(buf.getvalue()))
        if problem is None and got["e"]._storage.numel != 4:
            problem = f"torch's expand was materialised ({got['e']._storage.numel} elements)"
        yield Case(f"torch.save of arange(4).expand{shape}: a view, equal to torch", problem)


# ---- 5. zip bombs -------------------------------------------------------------------------------------
@contextlib.contextmanager
def _limit(name: str, value: int) -> Iterator[None]:
    from rumus.io import limits
    old = getattr(limits, name)
    setattr(limits, name, value)
    try:
        yield
    finally:
        setattr(limits, name, old)


def _rumus_file(obj: Any) -> bytes:
    buf = io.BytesIO()
    rm.save(obj, buf)
    return buf.getvalue()


def _named(limit: str) -> Callable[[BaseException], str | None]:
    return lambda exc: None if limit in str(exc) else f"the error does not name {limit}: {str(exc)[:120]}"


def _refused_naming(fn: Callable[[], object], limit: str, name: str) -> Case:
    try:
        fn()
    except FormatError as exc:
        return Case(name, _named(limit)(exc))
    except BaseException as exc:  # noqa: BLE001
        return Case(name, f"raised {type(exc).__name__}: {str(exc)[:100]}")
    return Case(name, "accepted")


def _crc_zeros(nbytes: int) -> int:
    crc, chunk = 0, bytes(1 << 20)
    for _ in range(nbytes >> 20):
        crc = zlib.crc32(chunk, crc)
    return crc


def zip_bombs() -> Iterator[Case]:
    pkl = h.pickle_of(h.tensor(0, (4,), (1,)))
    head = {"archive/data.pkl": pkl, "archive/byteorder": b"little"}
    small = h.deflate_zeros(1 << 20)
    crc = zlib.crc32(bytes(1 << 20))
    # headers that declare 512 MiB / 4 GiB over a small stream: refused before a byte is inflated
    for declared in (512 << 20, 0xFFFFFFFE):
        bomb = h.zip_with_raw_entry(head, "archive/data/0", small, 1 << 20, crc, declared)
        yield _refused_naming(lambda b=bomb: _rm_load(b), "MAX_INFLATED_BYTES",
                              f"torch storage entry declaring {declared >> 20} MiB ({len(bomb) >> 10} KiB file)")
    # the real thing at the default bound: 512 MiB of zeros in a ~500 KiB file
    real = h.deflate_zeros(512 << 20)
    bomb = h.zip_with_raw_entry(head, "archive/data/0", real, 512 << 20, _crc_zeros(512 << 20))
    yield _refused_naming(lambda: _rm_load(bomb), "MAX_INFLATED_BYTES",
                          f"torch storage inflating {len(bomb) >> 10} KiB -> 512 MiB (default bound)")
    # a real bomb: 64 MiB of zeros in ~64 KiB, with the bound lowered to 32 MiB
    real = h.deflate_zeros(64 << 20)
    bomb = h.zip_with_raw_entry(head, "archive/data/0", real, 64 << 20, _crc_zeros(64 << 20))
    with _limit("MAX_INFLATED_BYTES", 32 << 20):
        yield _refused_naming(lambda: _rm_load(bomb), "MAX_INFLATED_BYTES",
                              f"torch storage inflating {len(real) >> 10} KiB -> 64 MiB, bound 32 MiB")
    honest = h.zip_with_raw_entry({"archive/data.pkl": h.pickle_of(h.tensor(0, (1 << 18,), (1,), numel=1 << 18)),
                                   "archive/byteorder": b"little"}, "archive/data/0", small, 1 << 20, crc)
    try:
        ok = _rm_load(honest).shape == (1 << 18,) and not _rm_load(honest).numpy().any()
        yield Case("an honest compressed 1 MiB storage loads", None if ok else "wrong values")
    except BaseException as exc:  # noqa: BLE001
        yield Case("an honest compressed 1 MiB storage loads", f"raised {type(exc).__name__}: {str(exc)[:80]}")
    # a header that declares less than the stream holds: never inflated past the declared size (CRC fails)
    liar = h.zip_with_raw_entry(head, "archive/data/0", small, 1 << 20, crc, 16)
    yield _expect(lambda: _rm_load(liar), FormatError, "storage entry declaring 16 bytes over a 1 MiB stream")
    # a stored entry whose sizes disagree
    stored = h.torch_zip(pkl, {"0": F32_BYTES})
    yield _expect(lambda: _rm_load(h.patch_declared_size(stored, "archive/data/0", 1 << 30)), FormatError,
                  "stored entry declaring 1 GiB, holding 16 bytes")
    # rumus.save's tree.json and data entries, compressed
    ck = _rumus_file({"w": rm.ones(4)})
    import zipfile
    zf = zipfile.ZipFile(io.BytesIO(ck))
    entries = {n: zf.read(n) for n in zf.namelist()}
    tree = entries.pop("rumus_checkpoint/tree.json")
    big_tree = tree + b" " * ((8 << 20) - len(tree))
    bomb = h.zip_with_raw_entry(entries, "rumus_checkpoint/tree.json", zlib.compress(big_tree, 9)[2:-4], len(big_tree),
                                zlib.crc32(big_tree))
    with _limit("MAX_METADATA_BYTES", 4 << 20):
        yield _refused_naming(lambda: _rm_load(bomb), "MAX_METADATA_BYTES", "tree.json inflating to 8 MiB, bound 4 MiB")
    decl = h.zip_with_raw_entry(entries, "rumus_checkpoint/tree.json", zlib.compress(tree, 9)[2:-4], len(tree),
                                zlib.crc32(tree), 512 << 20)
    yield _refused_naming(lambda: _rm_load(decl), "MAX_METADATA_BYTES", "tree.json declaring 512 MiB")
    back = _rm_load(h.zip_with_raw_entry(entries, "rumus_checkpoint/tree.json", zlib.compress(tree, 9)[2:-4],
                                         len(tree), zlib.crc32(tree)))
    yield Case("an honest compressed tree.json still loads", None if back["w"].tolist() == [1.0] * 4 else "wrong")
    with _limit("MAX_METADATA_BYTES", 64):
        yield _refused_naming(lambda: _rm_load(h.torch_zip(pkl * 10, {"0": F32_BYTES})), "MAX_METADATA_BYTES",
                              "data.pkl over the metadata bound")


# ---- 6. mutated and truncated files ---------------------------------------------------------------
def _mutants(data: bytes, seed: int, n: int) -> Iterator[tuple[str, bytes, set[int] | None]]:
    """(label, mutated bytes, flipped positions or None) — truncations, flips, inserts, deletes, bombs."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        kind, pos = i % 5, int(rng.integers(0, len(data)))
        if kind == 0:
            yield f"truncate@{pos}", data[:pos], None
        elif kind == 1:
            out, flipped = bytearray(data), set()
            for p in rng.integers(0, len(data), int(rng.integers(1, 6))):
                out[int(p)] ^= 1 << int(rng.integers(0, 8))
                flipped.add(int(p))
            yield f"flip@{sorted(flipped)}", bytes(out), flipped
        elif kind == 2:
            junk = rng.integers(0, 256, int(rng.integers(1, 16))).astype(np.uint8).tobytes()
            yield f"insert@{pos}", data[:pos] + junk + data[pos:], None
        elif kind == 3:
            yield f"delete@{pos}", data[:pos] + data[pos + int(rng.integers(1, 16)):], None
        else:
            bomb = bytes(rng.choice([b"-1", b"9" * 30, b"\xff\xff\xff\x7f", b"[[[[[[[[", b"\x80\x02", b"PK\x03\x04"]))
            yield f"bomb@{pos}", data[:pos] + bomb + data[pos:], None


def _deep_equal(a: Any, b: Any) -> bool:
    if isinstance(b, rm.Tensor):
        return isinstance(a, rm.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            a.requires_grad == b.requires_grad and np.array_equal(a.detach().numpy(), b.detach().numpy())
    if isinstance(b, dict):
        return isinstance(a, dict) and list(a) == list(b) and all(_deep_equal(a[k], b[k]) for k in b)
    if isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b))
    return bool(a == b or (a != a and b != b))


def _sample_objects() -> tuple[Any, Any]:
    import torch
    rm.manual_seed(3)
    net = rm.nn.Sequential(rm.nn.Linear(4, 3), rm.nn.ReLU(), rm.nn.Linear(3, 2))
    ours = {"model": net.state_dict(), "epoch": 3, "lr": 0.5, "hist": [1.0, float("inf")], "name": "n",
            "mask": rm.tensor([True, False]), "ids": rm.arange(5), "half": rm.ones(3, dtype=rm.bfloat16)}
    torch.manual_seed(3)
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    theirs = {"model": tnet.state_dict(), "epoch": 3, "ids": torch.arange(5), "mask": torch.tensor([True, False]),
              "half": torch.ones(3, dtype=torch.bfloat16), "t": (1, 2.5)}
    return ours, theirs


def _storage_region(legacy: bytes) -> int:
    """Where a legacy file's storages begin: after its five pickles (magic, protocol, info, object, keys)."""
    import pickletools
    pos = 0
    for _ in range(5):
        for op, _arg, at in pickletools.genops(legacy[pos:]):
            if op.name == "STOP":
                pos += (at or 0) + 1
                break
    return pos


def _same_structure(a: Any, b: Any) -> bool:
    if isinstance(b, rm.Tensor):
        return isinstance(a, rm.Tensor) and a.dtype == b.dtype and a.shape == b.shape
    if isinstance(b, dict):
        return isinstance(a, dict) and list(a) == list(b) and all(_same_structure(a[k], b[k]) for k in b)
    if isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_structure(x, y) for x, y in zip(a, b))
    return bool(a == b)


def mutated_files() -> Iterator[Case]:
    import torch
    ours, theirs = _sample_objects()
    files: dict[str, bytes] = {"rumus.save": _rumus_file(ours)}
    buf = io.BytesIO()
    torch.save(theirs, buf)
    files["torch.save zip"] = buf.getvalue()
    buf = io.BytesIO()
    torch.save(theirs, buf, _use_new_zipfile_serialization=False)
    files["torch.save legacy"] = buf.getvalue()
    from rumus.io.safetensors import serialize
    files["rm.io safetensors"] = serialize({"w": rm.arange(6.0).reshape(2, 3), "b": rm.ones(2, dtype=rm.bfloat16)})
    for seed, (label, data) in enumerate(files.items()):
        original = _rm_load(data)
        region = _storage_region(data) if "legacy" in label else len(data)
        for mutation, bad, flipped in _mutants(data, 33 + seed, 120):
            name = f"{label} {mutation}"
            try:
                got = _rm_load(bad)
            except FormatError:
                yield Case(name, None)
                continue
            except BaseException as exc:  # noqa: BLE001
                yield Case(name, f"raised {type(exc).__name__}: {str(exc)[:90]}")
                continue
            if _deep_equal(got, original):
                yield Case(name, None)
            elif flipped and min(flipped) >= region and _same_structure(got, original):
                # legacy files carry no checksum: a flipped payload byte loads as a changed value in torch too
                # (a flipped element count cannot load: the storages must fill the file exactly)
                yield Case(name, None)
            elif label == "rm.io safetensors" and flipped:
                yield Case(name, None)  # safetensors has no checksum either; its own fuzz class covers it
            else:
                yield Case(name, "loaded something else than the original without an error")


# ---- 6b. hostile fields: tree.json and legacy streams --------------------------------------------------
def _rumus_zip(tree: Any, entries: dict[str, bytes] | None = None, raw_tree: bytes | None = None) -> bytes:
    import json
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("rumus_checkpoint/tree.json", raw_tree if raw_tree is not None else json.dumps(tree))
        for name, data in (entries or {}).items():
            z.writestr(f"rumus_checkpoint/data/{name}", data)
    return buf.getvalue()


def _tree(root: Any) -> dict[str, Any]:
    return {"format": "rumus-checkpoint", "version": 1, "root": root}


def _t(key: Any = 0, dtype: Any = "float32", shape: Any = (4,), rg: Any = False) -> dict[str, Any]:
    return {"tensor": key, "dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape,
            "requires_grad": rg}


def hostile_fields() -> Iterator[Case]:
    data = {"0": F32_BYTES}
    deep: Any = {"str": "x"}
    for _ in range(400):
        deep = {"list": [deep]}
    trees: dict[str, Any] = {
        "unknown node kind": _tree({"code": "os.system"}),
        "int holding a list": _tree({"int": [1]}),
        "int of 5000 digits": _tree({"int": "9" * 5000}),
        "int with junk": _tree({"int": "12ab"}),
        "float that is not non-finite text": _tree({"float": "1e999999"}),
        "float holding a dict": _tree({"float": {}}),
        "str holding a number": _tree({"str": 5}),
        "list holding a string": _tree({"list": "abc"}),
        "dict holding a number": _tree({"dict": 5}),
        "dict item of three": _tree({"dict": [[{"str": "a"}, 1, 2]]}),
        "dict key a list": _tree({"dict": [[{"list": []}, 1]]}),
        "dict key twice": _tree({"dict": [[{"str": "a"}, 1], [{"str": "a"}, 2]]}),
        "node with two kinds": _tree({"str": "a", "list": []}),
        "empty node": _tree({}),
        "nested 400 deep": _tree(deep),
        "tensor key negative": _tree(_t(key=-1)),
        "tensor key a string": _tree(_t(key="0")),
        "tensor key a bool": _tree(_t(key=True)),
        "tensor of unknown dtype": _tree(_t(dtype="float128")),
        "tensor of packed dtype q8(32)": _tree(_t(dtype="q8(32)")),
        "tensor of packed dtype int4(32)": _tree(_t(dtype="int4(32)")),
        "tensor of fixed dtype": _tree(_t(dtype="fixed_i16(8)")),
        "tensor dtype a list": _tree(_t(dtype=["float32"])),
        "tensor negative shape": _tree(_t(shape=(-1, -4))),
        "tensor shape of floats": _tree(_t(shape=[2.0, 2.0])),
        "tensor shape 2**64": _tree(_t(shape=(2**64,))),
        "tensor of rank 65": _tree(_t(shape=(1,) * 65)),
        "tensor shape larger than its bytes": _tree(_t(shape=(5,))),
        "tensor shape smaller than its bytes": _tree(_t(shape=(3,))),
        "tensor whose data entry is missing": _tree(_t(key=7)),
        "int tensor requiring grad": _tree(_t(dtype="int32", rg=True)),
        "requires_grad a string": _tree(_t(rg="yes")),
        "tensor node with an extra field": _tree({**_t(), "code": 1}),
        "one tensor key, two shapes": _tree({"list": [_t(shape=(4,)), _t(shape=(2, 2))]}),
        "no root": {"format": "rumus-checkpoint", "version": 1},
        "version 2": {**_tree(None), "version": 2},
        "tree a list": [1, 2],
    }
    for name, tree in trees.items():
        yield _expect(lambda tree=tree: _rm_load(_rumus_zip(tree, data)), FormatError, f"tree.json: {name}")
    bools = _rumus_zip(_tree(_t(dtype="bool", shape=(2,))), {"0": b"\x01\x02"})
    yield _expect(lambda: _rm_load(bools), FormatError, "tree.json: bool tensor holding byte 2")
    for raw, name in ((b"\xff\xfe", "not UTF-8"), (b'{"format": NaN}', "NaN"), (b"[" * 100_000, "100000 brackets"),
                      (b'{"a": 1, "a": 2}', "duplicate top-level key")):
        yield _expect(lambda raw=raw: _rm_load(_rumus_zip(None, data, raw)), FormatError, f"tree.json: {name}")
    shared = _rm_load(_rumus_zip(_tree({"list": [_t(), _t()]}), data))
    yield Case("tree.json: one tensor key twice is one tensor", None if shared[0] is shared[1] else "two copies")
    # the legacy stream's own fields
    t = h.pickle_of(h.tensor(0, (4,), (1,), legacy=True))
    good = h.torch_legacy(t, [("0", 4, F32_BYTES)])
    import pickle
    magic_len = len(pickle.dumps(h.LEGACY_MAGIC, protocol=2))
    streams = {
        "wrong magic": pickle.dumps(12345, protocol=2) + good[magic_len:],
        "big-endian sys info": good.replace(b"\x88", b"\x89", 1) if b"little_endian" in good else good,
        "storage count negative": good[:-24] + struct.pack("<q", -4) + good[-16:],
        "storage count 2**62": good[:-24] + struct.pack("<q", 2**62) + good[-16:],
        "storage count 3 of 4 promised": good[:-24] + struct.pack("<q", 3) + good[-16:-4],
        "trailing bytes": good + b"\x00" * 8,
        "truncated storage": good[:-3],
        "key list not a list": good.replace(pickle.dumps(["0"], protocol=2), pickle.dumps("0", protocol=2)),
        "key list with an unused key": good.replace(pickle.dumps(["0"], protocol=2), pickle.dumps(["0", "1"],
                                                                                                  protocol=2)),
        "key list missing the used key": good.replace(pickle.dumps(["0"], protocol=2), pickle.dumps([], protocol=2)),
        "storage view metadata (pre-1.0)": h.torch_legacy(h.pickle_of(
            h.glob("torch._utils", "_rebuild_tensor_v2")
            + h.tup(h.tup(h.text("storage"), h.glob("torch", "FloatStorage"), h.text("0"), h.text("cpu"), h.num(4),
                          h.tup(h.text("1"), h.num(0), h.num(2))) + b"Q",
                    h.num(0), h.tup(h.num(2)), h.tup(h.num(1)), b"\x89", h.ordered_dict()) + b"R"),
            [("0", 4, F32_BYTES)]),
    }
    for name, stream in streams.items():
        yield _expect(lambda stream=stream: _rm_load(stream), FormatError, f"legacy: {name}")
    back = _rm_load(good)
    yield Case("legacy: the untouched stream loads", None if back.tolist() == [0.0, 1.0, 2.0, 3.0] else "wrong")


# ---- 7. paths that are not regular files ------------------------------------------------------------
def non_regular_paths() -> Iterator[Case]:
    with tempfile.TemporaryDirectory() as d:
        zero = os.path.join(d, "zero.pt")
        os.symlink("/dev/zero", zero)
        fifo = os.path.join(d, "fifo.pt")
        os.mkfifo(fifo)
        readers: dict[str, Callable[[str], object]] = {
            "rm.load": rm.load, "rm.io.load_file": rm.io.load_file,
            "json_safe.load": lambda p: __import__("rumus.io.json_safe", fromlist=["load"]).load(p),
        }
        for label, reader in readers.items():
            yield _expect(lambda r=reader: r(zero), FileError, f"{label} of a symlink to /dev/zero")
            yield _expect(lambda r=reader: r(d), FileError, f"{label} of a directory")
            # a writer holds the FIFO open and closes it after 3 s, so a reader that blocks cannot hang here
            wfd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            os.write(wfd, b"PK\x03\x04 not a zip")
            timer = threading.Timer(3.0, os.close, [wfd])
            timer.start()
            yield _expect(lambda r=reader: r(fifo), FileError, f"{label} of a FIFO (no blocking open)")
            if timer.is_alive():
                timer.cancel()
                os.close(wfd)
            else:
                timer.join()
        yield _expect(lambda: rm.load(os.path.join(d, "missing.pt")), FileNotFoundError, "rm.load of a missing path")
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)


# ---- 8. disk full and other failing writes ----------------------------------------------------------
class _FullFile:
    """A file object whose writes fail as a full disk does."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


class _FullRaw(io.FileIO):
    """The raw file under AtomicFile's writer, on a full disk."""

    def write(self, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


@contextlib.contextmanager
def _disk_full(where: str) -> Iterator[None]:
    import onnx
    real_fileio, real_fsync, real_replace, real_save = io.FileIO, os.fsync, os.replace, onnx.save_model

    def enospc(*a: Any, **k: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")
    if where == "write":
        io.FileIO = _FullRaw  # type: ignore[misc]
        onnx.save_model = enospc
    elif where == "fsync":
        os.fsync = enospc
        onnx.save_model = enospc
    else:
        os.replace = enospc
    try:
        yield
    finally:
        io.FileIO, os.fsync, os.replace, onnx.save_model = real_fileio, real_fsync, real_replace, real_save  # type: ignore[misc]


def _leftovers(d: str, keep: set[str]) -> list[str]:
    return sorted(set(os.listdir(d)) - keep)


def disk_full() -> Iterator[Case]:
    from rumus.io.safetensors import load_file, save_file
    model = rm.nn.Linear(3, 2)
    x = rm.randn(2, 3)
    writers: dict[str, tuple[str, Callable[[str, float], None], Callable[[str], float]]] = {
        "rm.save": ("c.pt", lambda p, v: rm.save({"w": rm.full((3,), v)}, p), lambda p: float(rm.load(p)["w"][0])),
        "rm.io.save_file": ("s.safetensors", lambda p, v: save_file({"w": rm.full((3,), v)}, p),
                            lambda p: float(load_file(p)["w"][0])),
        ".rrec RecordWriter": ("d.rrec", _write_rrec, _read_rrec),
        "onnx export": ("m.onnx", lambda p, v: _export(model, x, p, v, False), lambda p: _ort_bias(p)),
        "onnx export, external data": ("e.onnx", lambda p, v: _export(model, x, p, v, True), lambda p: _ort_bias(p)),
    }
    for label, (fname, write, read) in writers.items():
        for where in ("write", "fsync", "replace"):
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, fname)
                write(path, 1.0)
                keep = set(os.listdir(d))
                try:
                    with _disk_full(where):
                        write(path, 2.0)
                    problem: str | None = "the write succeeded on a full disk"
                except FileError:
                    problem = None
                except BaseException as exc:  # noqa: BLE001
                    problem = f"raised {type(exc).__name__}: {str(exc)[:80]}, expected FileError"
                if problem is None and read(path) != 1.0:
                    problem = "the previous file is damaged"
                if problem is None and _leftovers(d, keep):
                    problem = f"left behind: {_leftovers(d, keep)}"
                yield Case(f"{label}: ENOSPC at {where}", problem)
    full = _FullFile(io.BytesIO())
    yield _expect(lambda: rm.save({"w": rm.ones(2)}, full), FileError, "rm.save to a file object on a full disk")


def _write_rrec(path: str, value: float) -> None:
    from rumus.data.rrec_writer import RecordWriter
    with RecordWriter(path) as w:
        for _ in range(3):
            w.append(np.full(1000, value, np.float32), np.float32(value))


def _read_rrec(path: str) -> float:
    from rumus.data.rrec_reader import RecordFile
    f = RecordFile(path)
    try:
        return float(f.arrays(0)[0][0])
    finally:
        f.close()


def _export(model: Any, x: Any, path: str, bias: float, external: bool) -> None:
    with rm.no_grad():
        model.bias.fill_(bias)
    rm.onnx.export(model, (x,), path, input_names=["x"], external_data=external)


def _ort_bias(path: str) -> float:
    """What the model at `path` computes for a zero input in onnxruntime: its bias."""
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return float(sess.run(None, {"x": np.zeros((2, 3), np.float32)})[0][0, 0])


# ---- 9. ONNX external data: atomic ---------------------------------------------------------------
@contextlib.contextmanager
def _replace_fails_on(call: int, error: BaseException) -> Iterator[None]:
    real = os.replace
    count = [0]

    def replace(src: Any, dst: Any) -> None:
        count[0] += 1
        if count[0] == call:
            raise error
        real(src, dst)
    os.replace = replace  # type: ignore[assignment]
    try:
        yield
    finally:
        os.replace = real


def onnx_external_data() -> Iterator[Case]:
    model, x = rm.nn.Linear(3, 2), rm.randn(2, 3)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "small.onnx")
        try:
            _export(model, x, path, 0.25, True)
            problem = None if _ort_bias(path) == 0.25 else "onnxruntime reads another bias"
            from rumus.onnx._atomic_save import referenced_data_files
            if problem is None and len(referenced_data_files(path)) != 1:
                problem = "the weights did not go to external data"
        except BaseException as exc:  # noqa: BLE001
            problem = f"raised {type(exc).__name__}: {str(exc)[:80]}"
        yield Case("a 2x3 Linear exported with external_data=True", problem)
    for external in (True, False):
        for call in (1, 2, 3, 4):
            for error in (OSError(errno.EIO, "crash"), KeyboardInterrupt()):
                with tempfile.TemporaryDirectory() as d:
                    path = os.path.join(d, "m.onnx")
                    _export(model, x, path, 1.0, True)
                    keep = set(os.listdir(d))
                    problem = None
                    try:
                        with _replace_fails_on(call, error):
                            _export(model, x, path, 2.0, external)
                        committed = True
                    except (FileError, KeyboardInterrupt):
                        committed = False
                    except BaseException as exc:  # noqa: BLE001
                        committed, problem = False, f"raised {type(exc).__name__}: {str(exc)[:80]}"
                    bias = _ort_bias(path)
                    if problem is None and bias != (2.0 if committed else 1.0):
                        problem = f"onnxruntime reads bias {bias} (committed: {committed})"
                    left = _leftovers(d, set()) if committed else _leftovers(d, keep)
                    if problem is None and (len(left) > 2 if committed else left):
                        problem = f"left behind: {left}"
                    yield Case(f"re-export (external={external}) with os.replace call {call} raising "
                               f"{type(error).__name__}", problem)
    # a writer killed between its renames leaves a data file and a temp folder; the next export removes them
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.onnx")
        _export(model, x, path, 1.0, True)
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout.strip()
        os.mkdir(os.path.join(d, f".k.onnx.tmp-{dead}-abc"))
        open(os.path.join(d, f"k.onnx.{dead}-0123456789ab.data"), "wb").close()
        _export(model, x, path, 3.0, True)
        from rumus.onnx._atomic_save import referenced_data_files
        expected = {"k.onnx", *referenced_data_files(path)}
        left = set(os.listdir(d))
        yield Case("the next export removes a killed writer's leftovers and the old data",
                   None if left == expected and _ort_bias(path) == 3.0 else f"folder holds {sorted(left)}")


# ---- 10. every format still loads ---------------------------------------------------------------------
def every_format_loads() -> Iterator[Case]:
    import torch
    from safetensors.torch import save as st_save
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
              torch.int8, torch.uint8, torch.bool]
    torch.manual_seed(0)
    values = {str(dt): (torch.randn(3, 4) * 10).to(dt) for dt in dtypes}
    values["param"] = torch.nn.Parameter(torch.randn(2, 2))
    values["frozen"] = torch.nn.Parameter(torch.randn(2), requires_grad=False)
    values["scalar"] = torch.tensor(2.5)
    values["empty"] = torch.zeros(0, 3)
    values["nc"] = torch.randn(4, 5).t()
    values["nested"] = {"list": [torch.ones(2), 3, "s", None, (1.5, True)], "od": OrderedDict(a=torch.zeros(1))}
    opt = torch.optim.Adam([values["param"]], lr=0.1)
    values["param"].sum().backward()
    opt.step()
    values["optim"] = opt.state_dict()
    for new in (True, False):
        for proto in (2, 4, 5) if new else (2,):
            buf = io.BytesIO()
            torch.save(values, buf, _use_new_zipfile_serialization=new, pickle_protocol=proto)
            data = buf.getvalue()
            try:  # a file made here: torch's reference load need not be weights-only (it refuses protocol 4+)
                problem = _same_as_torch(_rm_load(data), torch.load(io.BytesIO(data), weights_only=False))
            except BaseException as exc:  # noqa: BLE001
                problem = f"raised {type(exc).__name__}: {str(exc)[:100]}"
            yield Case(f"torch.save ({'zip' if new else 'legacy'}, protocol {proto}) of every dtype, params, "
                       f"nesting, optimizer state", problem)
    flat = {k: v.detach().contiguous() for k, v in values.items() if isinstance(v, torch.Tensor)}
    data = st_save(flat)
    got = _rm_load(data)
    yield Case("safetensors.torch.save of every dtype -> rm.load", _same_as_torch(dict(sorted(got.items())),
                                                                                 dict(sorted(flat.items()))))
    ours, _ = _sample_objects()
    with tempfile.TemporaryDirectory() as d:
        for label, target in (("a path", os.path.join(d, "c.pt")), ("a BytesIO", io.BytesIO())):
            rm.save(ours, target)
            if isinstance(target, io.BytesIO):
                target.seek(0)
            back = rm.load(target)
            yield Case(f"rm.save -> rm.load through {label}", None if _deep_equal(back, ours) else "differs")
        from rumus.io.safetensors import save_file
        sd = {k: v for k, v in ours["model"].items()}
        save_file(sd, os.path.join(d, "m.safetensors"))
        back = rm.load(os.path.join(d, "m.safetensors"))
        yield Case("rm.io.save_file -> rm.load", None if _deep_equal(dict(sorted(back.items())),
                                                                     dict(sorted(sd.items()))) else "differs")
    deep: Any = rm.ones(1)
    from rumus.io import limits
    for _ in range(limits.MAX_TREE_DEPTH):
        deep = [deep]
    yield Case("rm.save of the deepest allowed nesting loads back", None if _deep_equal(
        _rm_load(_rumus_file(deep)), deep) else "differs")
    yield _expect(lambda: _rumus_file([deep]), rm.RumusError, "rm.save one level deeper is refused on save")


CLASSES: dict[str, Callable[[], Iterator[Case]]] = {
    "33 .pt BUILD/REDUCE/APPEND on allowed globals": pickle_build_on_globals,
    "33 .pt shape/stride/offset vs storage": tensor_layouts,
    "33 .pt shared references (DAG, cycles, views)": shared_references,
    "33 .pt stride-0 expands and huge views": huge_views,
    "33 zip bombs (declared and actual sizes)": zip_bombs,
    "33 mutated rumus.save/torch.save/safetensors": mutated_files,
    "33 hostile tree.json and legacy .pt fields": hostile_fields,
    "33 non-regular paths (/dev/zero, FIFO, dir)": non_regular_paths,
    "33 disk full (ENOSPC) on every writer": disk_full,
    "33 ONNX external data, crash between renames": onnx_external_data,
    "33 every format still loads (vs torch)": every_format_loads,
}
