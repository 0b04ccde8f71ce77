"""Reading and writing user files safely: JSON a user (or anyone) may have written, and new
folders that appear whole or not at all.

:func:`read_json` is the one reader of JSON files the project did not write itself (family
records, ``config.json`` and safetensors indexes of imported checkpoints, landscape-format
configs, artifact sidecars). It reads only a regular file (a FIFO is refused instead of blocking
forever), bounds its size by the memory budget before reading it, and turns everything a hostile
file can make the parser raise (deep nesting, absurd integers, bad UTF-8, syntax) into one
:class:`~landscape.errors.LandscapeError` naming the file, and the field where one is to blame.

:func:`new_folder` writes a folder that must not exist yet (``align --out``): the caller fills a
fresh temporary folder of its own beside the destination, which is then renamed into place; a
destination that appeared meanwhile (another writer) is a one-line error, and on any failure only
the temporary folder is removed. :func:`replace_file` writes a file whole in the same way. Both
give what they write the modes the umask gives a file or folder made directly (0644 and 0755 under
the usual 022), not the 0600 and 0700 of the temporary files they start as, so a folder written
to be shared can be read by whom the user's umask allows.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from landscape.budget import budget_bytes
from landscape.errors import LandscapeError

__all__ = ["JSONFileError", "new_folder", "open_regular", "read_json", "replace_file",
           "shared_mode", "umask", "write_problem"]

# Parsed JSON costs up to ~25 bytes of Python objects per byte of text (``[{},{},…]``: a dict
# per 3 bytes), so a file is refused above the budget divided by this (64 MB at 2 GB).
JSON_BYTES_PER_BYTE = 32
# No configuration or record holds an integer of more digits than this; a longer one is refused
# by name instead of reaching int() (whose 4,300-digit limit raises an error naming nothing).
MAX_INT_DIGITS = 100


class JSONFileError(LandscapeError):
    """A JSON file that cannot be used; ``problem`` is the message without the file's path."""

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = str(path), problem


def open_regular(path: str | os.PathLike, follow_links: bool = True) -> IO[bytes]:
    """``path`` opened for binary reading, only if it is a regular file.

    Opened non-blocking, so a FIFO never waits for a writer, and checked on the open descriptor
    (no race with a swap). ``follow_links=False`` also refuses a symbolic link. Raises OSError
    (``ELOOP`` for a link, ``EINVAL`` for anything not a regular file), like a failed open."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        # reads of a regular file never block; plain blocking mode from here on
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux's
    ``/proc/self/status``), else set and restored at once."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def shared_mode(path: str | os.PathLike, folder: bool = False) -> None:
    """Give ``path`` the mode the umask gives a new file (0666 masked) or folder (0777 masked)."""
    os.chmod(path, (0o777 if folder else 0o666) & ~umask())


def json_limit() -> int:
    """The largest JSON file :func:`read_json` reads, in bytes (the memory budget's share)."""
    return budget_bytes() // JSON_BYTES_PER_BYTE


class _BigInt:
    """An integer literal of more than MAX_INT_DIGITS digits, kept unparsed."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


class _Refused(Exception):
    def __init__(self, problem: str) -> None:
        self.problem = problem


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a field holding an absurd integer (or a list of them) by name."""
    for key, v in pairs:
        big = v if isinstance(v, _BigInt) else None
        if big is None and isinstance(v, list):
            big = next((x for x in v if isinstance(x, _BigInt)), None)
        if big is not None:
            raise _Refused(f"{_field(key)} is an integer of {big.digits} digits")
    return dict(pairs)


def _field(key: str) -> str:
    return repr(key) if len(key) <= 40 and key.isprintable() else repr(key[:37] + "...")


def _problem(e: BaseException) -> str:
    if isinstance(e, _Refused):
        return e.problem
    if isinstance(e, RecursionError):
        return "not usable JSON (nested too deeply)"
    if isinstance(e, MemoryError):
        return "not usable JSON (too large to parse)"
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte {e.start})"
    return f"not valid JSON ({' '.join(str(e).split())[:200]})"


def read_json(path: str | os.PathLike, limit: int | None = None) -> Any:
    """The parsed JSON of the file at ``path`` (UTF-8), read safely (module docstring).

    ``limit`` bounds the file's size in bytes (default :func:`json_limit`). Any problem (missing
    or unreadable, not a regular file, too large, not UTF-8, not JSON, nested too deeply, an
    integer of more than 100 digits) is a :class:`JSONFileError` naming the file."""
    p = Path(path)
    limit = json_limit() if limit is None else limit
    try:
        with open_regular(p) as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise _Refused(f"{size} bytes is more than the {limit} a JSON file may hold "
                               "(the memory budget, set by LANDSCAPE_MEMORY_GB)")  # fmt: skip
            raw = f.read(limit + 1)
        if len(raw) > limit:  # grew while being read
            raise _Refused(f"more than the {limit} bytes a JSON file may hold")
        big: list[int] = []

        def parse_int(s: str) -> int | _BigInt:
            digits = len(s) - s.startswith("-")
            if digits <= MAX_INT_DIGITS:
                return int(s)
            big.append(digits)
            return _BigInt(digits)

        doc = json.loads(raw.decode("utf-8"), parse_int=parse_int, object_pairs_hook=_object)
        if big:  # not directly under a field (_object names that): deeper in lists
            raise _Refused(f"holds an integer of {big[0]} digits")
        return doc
    except OSError as e:
        raise JSONFileError(p, f"cannot read it ({e.strerror or e})") from None
    except (_Refused, RecursionError, MemoryError, ValueError) as e:
        raise JSONFileError(p, _problem(e)) from None


def write_problem(e: BaseException) -> str:
    """What went wrong writing a file, in a few words: ``no space left on device`` for a full
    disk, whether raised as OSError or wrapped by safetensors (whose message holds the OS's)."""
    if isinstance(e, OSError):
        if e.errno == errno.ENOSPC:
            return "no space left on device"
        return (e.strerror or str(e)).strip() or type(e).__name__
    text = " ".join(str(e).split())
    if "No space left" in text or "StorageFull" in text:
        return "no space left on device"
    return text[:200] or type(e).__name__


@contextlib.contextmanager
def new_folder(dst: str | os.PathLike) -> Iterator[Path]:
    """A fresh empty folder for the caller to fill; on normal exit it becomes ``dst``.

    ``dst`` must not exist (checked before and again when the folder is renamed into place, so of
    two writers to one path exactly one wins and the other gets a one-line error). The folder is
    created here beside ``dst`` (``.<name>.<random>.landscape-tmp``), so no other writer's folder
    is ever reused or removed; if the block raises, or the rename fails, this folder and only it is
    removed. An OSError or a safetensors error inside the block (a full disk) becomes one line
    naming ``dst`` and the cause; other errors pass through unchanged."""
    dst = Path(dst)
    if dst.exists() or dst.is_symlink():
        raise LandscapeError(f"{dst} exists; choose a new folder")
    if not dst.parent.is_dir():
        raise LandscapeError(f"{dst.parent} does not exist")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name[:80]}.", suffix=".landscape-tmp",
                                    dir=dst.parent))  # fmt: skip
    except OSError as e:
        raise LandscapeError(f"cannot write {dst}: {write_problem(e)}") from None
    try:
        yield tmp
        _share(tmp)
        _publish(tmp, dst)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)  # ours alone: made by mkdtemp above
        if isinstance(e, LandscapeError) or not _is_write_error(e):
            raise
        raise LandscapeError(f"cannot write {dst}: {write_problem(e)}") from None


def replace_file(target: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Write ``target`` whole or not at all: ``write(path)`` fills a temporary file of this call's
    own beside it (``.<name>.<random>.landscape-tmp``), renamed over ``target`` at the end. A
    failed write (a full disk) leaves an earlier ``target`` whole and no partial file; two
    writers never share a temporary file, and no file but this call's own is ever removed. The
    file gets the umask's mode (:func:`shared_mode`), not the temporary file's 0600."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:80]}.",
                               suffix=".landscape-tmp")  # fmt: skip
    os.close(fd)
    try:
        write(Path(tmp))
        shared_mode(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _share(folder: Path) -> None:
    """The umask's modes for ``folder`` and everything in it (:func:`shared_mode`): mkdtemp makes
    it 0700, and some writers (safetensors) make their files 0600 whatever the umask."""
    shared_mode(folder, folder=True)
    for p in folder.rglob("*"):
        st = p.lstat()
        if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
            shared_mode(p, folder=stat.S_ISDIR(st.st_mode))


def _is_write_error(e: BaseException) -> bool:
    return isinstance(e, OSError) or type(e).__name__ == "SafetensorError"


def _publish(tmp: Path, dst: Path) -> None:
    """Rename the finished ``tmp`` to ``dst``, which must not exist.

    ``mkdir`` is the claim: it fails if ``dst`` exists, so of concurrent writers exactly one
    creates it; renaming a folder onto that empty folder then replaces it whole. If the rename
    fails, the claimed folder is removed only while it is still empty (still ours)."""
    try:
        os.mkdir(dst)
    except FileExistsError:
        raise LandscapeError(f"{dst} exists; choose a new folder") from None
    try:
        os.rename(tmp, dst)
    except OSError:
        with contextlib.suppress(OSError):
            os.rmdir(dst)
        raise
