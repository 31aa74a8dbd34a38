"""Reading zip archives (torch.save and rumus.save files) where every failure is a FormatError and no
entry inflates past a bound.

`zipfile` raises BadZipFile, ValueError, EOFError, NotImplementedError, OverflowError, struct.error,
zlib.error or UnicodeDecodeError on damaged archives, and inflates a compressed entry to whatever size
its header claims. Here the declared size is checked before anything is inflated: a stored entry must
hold exactly the bytes it declares (they are in the file, so the file bounds them), compressed entries
together may inflate to `limits.MAX_INFLATED_BYTES`, and every read is checked against the declared
size and the CRC.
"""

from __future__ import annotations

import io
import zipfile
from typing import IO

from rumus_contracts import FormatError, RumusError

from . import limits


def _failure(name: str, doing: str, exc: BaseException) -> FormatError:
    return FormatError(f"{name}: corrupt or truncated zip archive ({doing}: {type(exc).__name__}: "
                       f"{str(exc)[:160]})")


class SafeZip:
    """A read-only zip archive over bytes or a seekable binary file."""

    def __init__(self, source: bytes | IO[bytes], name: str) -> None:
        self.name = name
        self._inflated = 0
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source)
            infos = self._zip.infolist()
        except RumusError:
            raise
        except Exception as exc:  # noqa: BLE001 - every way zipfile fails on a damaged file
            raise _failure(name, "reading its directory", exc) from None
        self._infos = {info.filename: info for info in infos}
        if len(self._infos) != len(infos):
            raise FormatError(f"{name}: the zip archive lists an entry name twice (a spliced or corrupt file)")

    def names(self) -> list[str]:
        return list(self._infos)

    def size(self, member: str) -> int:
        """The declared inflated size of `member` (FormatError if absent)."""
        return self._info(member).file_size

    def _info(self, member: str) -> zipfile.ZipInfo:
        info = self._infos.get(member)
        if info is None:
            raise FormatError(f"{self.name}: the archive has no entry {member!r} (a truncated or corrupt file)")
        return info

    def read(self, member: str, max_bytes: int | None = None, limit_name: str = "") -> bytes:
        """The bytes of `member`, refusing before inflating when it declares more than `max_bytes`."""
        info = self._info(member)
        if max_bytes is not None and info.file_size > max_bytes:
            raise FormatError(f"{self.name}: entry {member!r} declares {info.file_size} bytes, more than the limit "
                              f"of {max_bytes} ({limit_name})")
        if info.compress_type == zipfile.ZIP_STORED:
            if info.compress_size != info.file_size:
                raise FormatError(f"{self.name}: stored entry {member!r} declares {info.file_size} bytes but holds "
                                  f"{info.compress_size}")
        else:
            self._inflated += info.file_size
            if self._inflated > limits.MAX_INFLATED_BYTES:
                raise FormatError(f"{self.name}: compressed entries would inflate to {self._inflated} bytes, more "
                                  f"than rumus.io.limits.MAX_INFLATED_BYTES = {limits.MAX_INFLATED_BYTES} (a zip bomb, "
                                  f"or raise the limit if you trust the file)")
        try:
            with self._zip.open(info) as f:
                data = f.read(info.file_size + 1)  # the CRC is checked once the declared size is read
        except RumusError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise _failure(self.name, f"reading entry {member!r}", exc) from None
        if len(data) != info.file_size:
            raise FormatError(f"{self.name}: entry {member!r} holds {len(data)} bytes, its header declares "
                              f"{info.file_size}")
        return data
