"""Files: atomic saves (temp next to the target, then rename) and reads with RUMUS errors.

Every writer of a RUMUS file (safetensors, .rrec, training checkpoints, fixed-point fixtures) saves
through `AtomicFile`, so all of them share one rule:

- the bytes go to `.<target name>.tmp-<pid>-<random>` in the target's directory (same filesystem, so
  the final `os.replace` is atomic, and the name says which file the temp belongs to);
- any exception, KeyboardInterrupt and SystemExit included, removes the temp and leaves the target
  untouched;
- a process killed outright (kill -9, power loss) cannot clean up, so the next successful save of the
  same target removes that target's stale temps: those whose writing process is gone.
"""

from __future__ import annotations

import errno
import io
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO

from rumus_contracts import FileError, MissingFile

TEMP_MARK = ".tmp-"


def temp_prefix(target: str) -> str:
    """The name prefix of every temp file belonging to `target` (in the same directory)."""
    return f".{os.path.basename(target)}{TEMP_MARK}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists but belongs to someone else: not ours to judge
    return True


def sweep_stale_temps(target: str) -> list[str]:
    """Remove temps of `target` left by processes that no longer run; returns the removed paths."""
    directory = os.path.dirname(os.path.abspath(target))
    prefix = temp_prefix(target)
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        pid_text = name[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit() or _pid_alive(int(pid_text)):
            continue  # a live writer (maybe another process saving the same file right now)
        try:
            os.unlink(os.path.join(directory, name))
            removed.append(os.path.join(directory, name))
        except OSError:
            pass
    return removed


def _fsync_dir(directory: str) -> None:
    """Persist the rename itself (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _file_error(exc: OSError, path: str, doing: str) -> FileError:
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOENT:
        return MissingFile(f"{path}: no such file or directory")
    return FileError(f"{path}: cannot {doing} it: {reason}")


class _TempWriter(io.BufferedWriter):
    """The temp file's writer: an OSError of a write or flush (disk full, quota) is a FileError naming the
    target, whichever writer streams into it."""

    def __init__(self, raw: io.FileIO, target: str) -> None:
        super().__init__(raw)
        self._target = target

    def write(self, data: Any) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            raise _as_file_error(exc, self._target) from None

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as exc:
            raise _as_file_error(exc, self._target) from None


def _as_file_error(exc: OSError, target: str) -> OSError:
    return exc if isinstance(exc, FileError) else _file_error(exc, target, "write")


class AtomicFile:
    """A file being written under a temp name; `commit()` renames it onto the target, `discard()` drops it.

    Use it as a context manager (commit on success, discard on any exception) or, for writers that
    stream over many calls, keep it open and call commit()/discard() yourself.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(self.path))
        self.tmp = os.path.join(directory, f"{temp_prefix(self.path)}{os.getpid()}-{secrets.token_hex(6)}")
        try:
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as exc:
            raise _file_error(exc, self.path, "write") from None
        self.file: BinaryIO = _TempWriter(io.FileIO(fd, "wb"), self.path)
        self.state = "open"

    def commit(self) -> None:
        """fsync, give the temp the target's permissions, rename it into place, sweep stale temps."""
        if self.state != "open":
            raise FileError(f"{self.path}: this save was already {self.state}")
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            try:
                os.chmod(self.tmp, os.stat(self.path).st_mode & 0o7777)
            except FileNotFoundError:
                pass  # a new file keeps the umask's permissions
            os.replace(self.tmp, self.path)
        except BaseException as exc:
            self.discard()
            if isinstance(exc, OSError) and not isinstance(exc, FileError):
                raise _file_error(exc, self.path, "write") from None
            raise
        self.state = "committed"
        _fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        sweep_stale_temps(self.path)

    def discard(self) -> None:
        """Remove the temp; the target is left as it was. Safe to call more than once."""
        if self.state == "committed":
            return
        self.state = "discarded"
        try:
            self.file.close()
        except OSError:
            pass
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass

    def __enter__(self) -> BinaryIO:
        return self.file

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
            return
        self.discard()
        if isinstance(exc, OSError) and not isinstance(exc, FileError):  # disk full, quota, I/O error
            raise _file_error(exc, self.path, "write") from None

    def __del__(self) -> None:
        # never commit implicitly: an AtomicFile dropped while open is an error path
        if getattr(self, "state", None) == "open":
            try:
                self.discard()
            except Exception:
                pass


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write bytes to `path` so that a crash leaves either the old file or the new one, never half."""
    with AtomicFile(path) as f:
        f.write(data)


@contextmanager
def open_for_reading(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """open(path, 'rb') of a regular file; OS failures are MissingFile / FileError naming the path.

    A FIFO, a device (/dev/zero, also through a symlink) or a directory is refused before any byte is
    read: such a path has no size to bound a read by, and opening a FIFO would block. The file is opened
    non-blocking and checked with fstat, so a path swapped after a check cannot slip through."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise _file_error(exc, str(name), "read") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FileError(f"{name}: not a regular file ({_kind(mode)}); RUMUS reads files only from regular "
                            f"files, whose size bounds the read")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a plain file"


def read_regular_file(path: str | os.PathLike[str]) -> bytes:
    """All bytes of a regular file (its size, from fstat, bounds the read); FileError / MissingFile else."""
    with open_for_reading(path) as f:
        size = os.fstat(f.fileno()).st_size
        try:
            data = f.read(size + 1)
        except OSError as exc:
            raise _file_error(exc, os.fspath(path), "read") from None
    if len(data) > size:  # it grew while being read: a file still being written
        raise FileError(f"{os.fspath(path)}: the file grew while it was read; read it once its writer is done")
    return data
