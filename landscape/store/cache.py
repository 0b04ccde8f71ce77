"""Content-addressed disk cache for every expensive result (DESIGN §4).

An entry is addressed by the SHA-256 of its inputs (kind, configuration, weight digests, method,
parameters and the algorithm's code version), canonicalised as sorted JSON. One entry is one
file ``<root>/<kind>/<key[:2]>/<key>.lsc``::

    b"LSC2" | uint64 header length | SHA-256 of the header (32 bytes) | header JSON | body

The header holds the entry's key, the caller's JSON metadata and the SHA-256 of the body
(safetensors bytes), so its digest covers everything served: many results (barriers, triangles,
function checks) live in the metadata alone. Writes go to a temporary file in the same directory
and are renamed into place (atomic on POSIX), so a reader never sees a partial entry and an
interrupted computation leaves nothing behind; temporary files older than an hour (left by a
killed writer) are removed. Reads verify both digests and the key; a corrupt entry is deleted and
recomputed, never served. Entries of an older format are dropped and recomputed quietly.
``get_or_compute`` holds an exclusive file lock per key while computing, so concurrent writers of
one key compute it once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from landscape.errors import LandscapeError
from landscape.store.paths import cache_root

MAGIC = b"LSC2"
OLD_MAGICS = (b"LSC1",)  # earlier formats: stale, not corrupt
SUFFIX = ".lsc"
TMP_PREFIX = ".tmp-"
STALE_TMP_SECONDS = 3600  # no write takes this long, so such a temporary file is orphaned
KEPT = ("data", "families")  # directories under the root that hold no entries


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_jsonable)


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"cannot put {type(obj).__name__} into a cache key")


def digest_tensors(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over names, dtypes, shapes and raw bytes, in sorted name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


@dataclass
class Entry:
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)
    key: str = ""


class Cache:
    """The disk store. ``Cache()`` uses ``$LANDSCAPE_CACHE`` or ``~/.cache/landscape``."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root()

    @staticmethod
    def key(kind: str, inputs: dict[str, Any]) -> str:
        return hashlib.sha256(canonical_json({"kind": kind, "inputs": inputs}).encode()).hexdigest()

    def path(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / f"{key}{SUFFIX}"

    def get(self, kind: str, key: str) -> Entry | None:
        """The entry, or None when it is missing or fails verification (then it is removed)."""
        p = self.path(kind, key)
        try:
            raw = p.read_bytes()
        except OSError:  # missing, or the cache root is unusable
            return None
        try:
            return _decode(raw, key)
        except _Stale:  # written by an earlier version: a plain miss
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
            return None
        except Exception as e:  # any corruption: drop the entry so it is recomputed
            print(f"landscape: corrupt cache entry {p} ({e}); recomputing", file=sys.stderr)
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
            return None

    def put(self, kind: str, key: str, tensors: dict[str, torch.Tensor], meta: dict) -> Entry:
        p = self.path(kind, key)
        body = st_save({k: v.detach().cpu().contiguous() for k, v in tensors.items()})
        header = canonical_json(
            {"key": key, "meta": meta, "sha256": hashlib.sha256(body).hexdigest()}
        )
        hb = header.encode()
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            _sweep(p.parent.glob(f"{TMP_PREFIX}*"))
            fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=TMP_PREFIX, suffix=SUFFIX)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(MAGIC + struct.pack("<Q", len(hb)) + hashlib.sha256(hb).digest())
                    f.write(hb + body)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, p)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        except OSError as e:
            raise LandscapeError(
                f"cannot write cache entry under {self.root}: {e.strerror or e}"
            ) from None
        return Entry(dict(tensors), json.loads(header)["meta"], key)

    @contextlib.contextmanager
    def lock(self, kind: str, key: str) -> Iterator[None]:
        p = self.path(kind, key).with_suffix(".lock")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            f = open(p, "a")  # noqa: SIM115 - closed below
        except OSError:  # an unwritable cache: compute without the lock, storing will warn
            yield
            return
        with f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def get_or_compute(
        self,
        kind: str,
        inputs: dict[str, Any],
        compute: Callable[[], tuple[dict[str, torch.Tensor], dict[str, Any]]],
    ) -> tuple[Entry, bool]:
        """(entry, hit). On a miss ``compute()`` returns (tensors, meta), which are stored."""
        key = self.key(kind, inputs)
        entry = self.get(kind, key)
        if entry is not None:
            return entry, True
        with self.lock(kind, key):
            entry = self.get(kind, key)  # another process may have finished meanwhile
            if entry is not None:
                return entry, True
            tensors, meta = compute()
            try:
                return self.put(kind, key, tensors, meta), False
            except LandscapeError as e:
                # The result is still good; only its storage failed (e.g. a full disk).
                print(f"landscape: warning: {e}; result not cached", file=sys.stderr)
                return Entry(tensors, meta, key), False

    def _kind_dirs(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(d for d in self.root.iterdir() if d.is_dir() and d.name not in KEPT)

    def _sweep_all(self) -> None:
        _sweep(t for d in self._kind_dirs() for t in d.glob(f"*/{TMP_PREFIX}*"))

    def entries(self) -> Iterator[tuple[str, Path]]:
        """(kind, path) of every entry file; temporary files and stray directories are not."""
        for kind_dir in self._kind_dirs():
            for p in sorted(kind_dir.glob(f"*/*{SUFFIX}")):
                if not p.name.startswith(".") and p.is_file():
                    yield kind_dir.name, p

    def metas(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, metadata) of every entry of one kind, read from headers only (for listings).

        The header's digest and key are verified, so a tampered header is dropped like in
        :meth:`get`; the body is not read, so loading a result must still go through ``get``."""
        for k, p in self.entries():
            if k != kind:
                continue
            key = p.name[: -len(SUFFIX)]
            try:
                with open(p, "rb") as f:
                    head = f.read(HEAD)
                    if head[:4] in OLD_MAGICS:
                        continue
                    header = _header(head, f.read(_header_length(head)), key)
            except OSError:
                continue
            except Exception as e:
                print(f"landscape: corrupt cache entry {p} ({e}); removed", file=sys.stderr)
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                continue
            yield key, header["meta"]

    def info(self) -> dict[str, Any]:
        self._sweep_all()
        kinds: dict[str, dict[str, int]] = {}
        for kind, p in self.entries():
            try:
                size = p.stat().st_size
            except FileNotFoundError:  # removed meanwhile by another process
                continue
            k = kinds.setdefault(kind, {"entries": 0, "bytes": 0})
            k["entries"] += 1
            k["bytes"] += size
        return {
            "root": str(self.root),
            "entries": sum(k["entries"] for k in kinds.values()),
            "bytes": sum(k["bytes"] for k in kinds.values()),
            "kinds": kinds,
        }

    def clear(self, kind: str | None = None) -> int:
        """Remove all entries (or one kind's); fetched data sets and registered families
        (``data/``, ``families/``) are kept. Returns the count."""
        self._sweep_all()
        n = 0
        for k, p in list(self.entries()):
            if kind is None or k == kind:
                p.unlink(missing_ok=True)
                n += 1
        for d in self._kind_dirs():
            if kind is None or d.name == kind:
                # a fresh temporary file is another writer's entry in progress: keep its folder
                if not any(d.glob(f"*/*{SUFFIX}")) and not any(d.glob(f"*/{TMP_PREFIX}*")):
                    shutil.rmtree(d, ignore_errors=True)
        return n


HEAD = 4 + 8 + 32  # magic, header length, header digest


class _Stale(ValueError):
    """An entry in an earlier on-disk format."""


def _sweep(files: Iterable[Path]) -> None:
    """Remove the temporary files among ``files`` older than STALE_TMP_SECONDS."""
    cutoff = time.time() - STALE_TMP_SECONDS
    for t in files:
        with contextlib.suppress(OSError):  # removed meanwhile, or not ours to remove
            if t.is_file() and t.stat().st_mtime < cutoff:
                t.unlink()


def _header_length(head: bytes) -> int:
    if head[:4] in OLD_MAGICS:
        raise _Stale("older format")
    if head[:4] != MAGIC:
        raise ValueError("bad magic")
    if len(head) < HEAD:
        raise ValueError("truncated header")
    return struct.unpack("<Q", head[4:12])[0]


def _header(head: bytes, hb: bytes, key: str) -> dict[str, Any]:
    """The verified header: its digest matches and it names this entry's key."""
    if len(hb) != _header_length(head):
        raise ValueError("truncated header")
    if hashlib.sha256(hb).digest() != head[12:HEAD]:
        raise ValueError("header digest mismatch")
    header = json.loads(hb.decode())
    if not isinstance(header, dict) or header.get("key") != key:
        raise ValueError("header names another entry")
    if not isinstance(header.get("meta"), dict) or not isinstance(header.get("sha256"), str):
        raise ValueError("malformed header")
    return header


def _decode(raw: bytes, key: str) -> Entry:
    head = raw[:HEAD]
    end = HEAD + _header_length(head)
    header = _header(head, raw[HEAD:end], key)
    body = raw[end:]
    if hashlib.sha256(body).hexdigest() != header["sha256"]:
        raise ValueError("body digest mismatch")
    return Entry(st_load(body), header["meta"], key)
