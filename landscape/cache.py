"""Content-addressed disk cache for every expensive result (DESIGN §4).

An entry is addressed by the SHA-256 of its inputs (kind, configuration, weight digests, method,
parameters and the algorithm's code version), canonicalised as sorted JSON. One entry is one
file ``<root>/<kind>/<key[:2]>/<key>.lsc``::

    b"LSC1" | uint64 header length | header JSON | body (safetensors bytes)

The header holds the caller's JSON metadata and the SHA-256 of the body. Writes go to a temporary
file in the same directory and are renamed into place (atomic on POSIX), so a reader never sees a
partial entry and an interrupted computation leaves nothing behind. Reads verify the digest; a
corrupt entry is deleted and recomputed, never served. ``get_or_compute`` holds an exclusive
file lock per key while computing, so concurrent writers of one key compute it once.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from landscape.errors import LandscapeError
from landscape.paths import cache_root

MAGIC = b"LSC1"
SUFFIX = ".lsc"
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
        except Exception as e:  # any corruption: drop the entry so it is recomputed
            print(f"landscape: corrupt cache entry {p} ({e}); recomputing", file=sys.stderr)
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
            return None

    def put(self, kind: str, key: str, tensors: dict[str, torch.Tensor], meta: dict) -> Entry:
        p = self.path(kind, key)
        body = st_save({k: v.detach().cpu().contiguous() for k, v in tensors.items()})
        header = canonical_json({"meta": meta, "sha256": hashlib.sha256(body).hexdigest()})
        hb = header.encode()
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=SUFFIX)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(MAGIC + struct.pack("<Q", len(hb)) + hb + body)
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

    def entries(self) -> Iterator[tuple[str, Path]]:
        if not self.root.is_dir():
            return
        for kind_dir in sorted(d for d in self.root.iterdir() if d.is_dir() and d.name not in KEPT):
            for p in sorted(kind_dir.glob(f"*/*{SUFFIX}")):
                if not p.name.startswith("."):
                    yield kind_dir.name, p

    def metas(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, metadata) of every entry of one kind, read from headers only (for listings)."""
        for k, p in self.entries():
            if k != kind:
                continue
            try:
                with open(p, "rb") as f:
                    head = f.read(12)
                    if head[:4] != MAGIC:
                        continue
                    (n,) = struct.unpack("<Q", head[4:12])
                    yield p.name[: -len(SUFFIX)], json.loads(f.read(n).decode())["meta"]
            except (OSError, ValueError, KeyError):
                continue

    def info(self) -> dict[str, Any]:
        kinds: dict[str, dict[str, int]] = {}
        for kind, p in self.entries():
            k = kinds.setdefault(kind, {"entries": 0, "bytes": 0})
            k["entries"] += 1
            k["bytes"] += p.stat().st_size
        return {
            "root": str(self.root),
            "entries": sum(k["entries"] for k in kinds.values()),
            "bytes": sum(k["bytes"] for k in kinds.values()),
            "kinds": kinds,
        }

    def clear(self, kind: str | None = None) -> int:
        """Remove all entries (or one kind's); fetched data sets and registered families
        (``data/``, ``families/``) are kept. Returns the count."""
        n = 0
        for k, p in list(self.entries()):
            if kind is None or k == kind:
                p.unlink(missing_ok=True)
                n += 1
        for d in list(self.root.iterdir()) if self.root.is_dir() else []:
            if d.is_dir() and d.name not in KEPT and (kind is None or d.name == kind):
                if not any(d.glob(f"*/*{SUFFIX}")):
                    shutil.rmtree(d, ignore_errors=True)
        return n


def _decode(raw: bytes, key: str) -> Entry:
    if raw[:4] != MAGIC:
        raise ValueError("bad magic")
    (n,) = struct.unpack("<Q", raw[4:12])
    header = json.loads(raw[12 : 12 + n].decode())
    body = raw[12 + n :]
    if hashlib.sha256(body).hexdigest() != header["sha256"]:
        raise ValueError("digest mismatch")
    return Entry(st_load(body), header["meta"], key)
