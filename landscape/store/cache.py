"""Content-addressed disk cache for every expensive result (docs/design.md §4).

An entry is addressed by the SHA-256 of its inputs (kind, configuration, weight digests, method,
parameters and the algorithm's code version), canonicalised as sorted JSON. One entry is one
file ``<root>/<kind>/<key[:2]>/<key>.lsc``::

    b"LSC2" | uint64 header length | SHA-256 of the header (32 bytes) | header JSON | body

The header holds the entry's key, the caller's JSON metadata, the SHA-256 of the body
(safetensors bytes) and the body's length, so its digest covers everything served: many results
(barriers, triangles, function checks) live in the metadata alone. Writes go to a temporary file
in the same directory and are renamed into place (atomic on POSIX), so a reader never sees a
partial entry and an interrupted computation leaves nothing behind; temporary files older than an
hour (left by a killed writer) are removed. Reads open only a regular file (never following a
link, never waiting on a FIFO), check the lengths the header declares against the file's size
(and the size against this machine's memory) before reading the body, and verify both digests
and the key; a corrupt entry is deleted (that file alone) and recomputed, never served. Entries
of an older format are dropped and recomputed quietly. ``get_or_compute`` holds an exclusive file
lock per key while computing, so concurrent writers of one key compute it once.

The cache removes only what it wrote: an entry is a regular file named ``<key>.lsc`` (64 hex
digits) in the folder named by the key's first two, starting with the format's magic bytes;
``cache clear`` removes those, their lock files and stale temporary files of the same naming,
then the folders it emptied. Anything else under the root (a user's project, an ``align --out``
folder, ``data/`` and ``families/``) is never touched, whatever the root is.

**Shipped results.** Entries of the small result kinds (:data:`SHIPPED_KINDS`) may also come
from ``assets/results`` (the zoo's standard views, built by ``python -m landscape.assets
--results``), laid out as the cache is and keyed alike, so a request finds them only when its
inputs (weights, data, options, the algorithm's version) are those they were computed from.
That layer is read after the cache, verified the same way, and never written or removed: a
shipped entry that fails verification is a miss. ``LANDSCAPE_SHIPPED_RESULTS=0`` turns it off.

**What is promised.** The digests in an entry promise *integrity*: a file damaged, truncated,
half-written or copied under another key is never served. They do not promise *authenticity*:
whoever can write a file can recompute its digests. So the two layers promise different things:

- the cache holds what this user's own runs wrote; whoever can write into it could as well edit
  the installed code, so a forged entry there is out of reach of any check the code could make
  and it is trusted as the user's own files are;
- a shipped entry is served only if the SHA-256 of its file is the one listed for its kind and
  key in :data:`SHIPPED_DIGESTS`, a list kept in the package and rewritten by the build of the
  shipped results alone (:func:`write_shipped_digests`). An entry edited after the build, or
  added beside the built ones (with or without recomputed digests), is not in that list and is a
  miss: it is never served as shipped. ``Cache(shipped=FOLDER)``, a folder the caller names
  (the build's own), is checked for integrity only.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
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
from landscape.store.files import open_regular, replace_file
from landscape.store.paths import cache_root, shipped_results_root

MAGIC = b"LSC2"
OLD_MAGICS = (b"LSC1",)  # earlier formats: stale, not corrupt
SUFFIX = ".lsc"
TMP_PREFIX = ".tmp-"
STALE_TMP_SECONDS = 3600  # no write takes this long, so such a temporary file is orphaned
KEPT = ("data", "families")  # directories under the root that hold no entries
# kinds whose entries are results alone (no weights), which the assets may ship: the curves of
# Interpolation, the grids of Triangle, the Eigenangles page's angles (experiments.eigen.view),
# the atlas's coordinates, the gauge sweep's parts
SHIPPED_KINDS = ("barrier", "triangle", "eigenangles", "atlas", "gauge-sweep", "ablation",
                 "surface")
# The SHA-256 of every shipped entry's file, by "<kind>/<key>" (module docstring, "What is
# promised"): written by ``python -m landscape.assets --results``, read when a shipped entry is.
SHIPPED_DIGESTS = Path(__file__).with_name("shipped_results.json")
# What the cache writes, by name: entries, their locks, temporary files, in two-digit folders.
_KEY_NAME = re.compile(r"([0-9a-f]{64})\.(lsc|lock)")
_TMP_NAME = re.compile(r"\.tmp-[a-z0-9_]{8}\.lsc")  # as tempfile.mkstemp names them
_SHARD_NAME = re.compile(r"[0-9a-f]{2}")
# An entry that cannot be opened as a regular file (a link, a FIFO, a device, a socket)
_NOT_A_FILE = (errno.ELOOP, errno.EINVAL, errno.ENXIO, errno.ENODEV, errno.EISDIR)


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


def shipped_results_on() -> bool:
    """``$LANDSCAPE_SHIPPED_RESULTS``: ``1`` (the default) reads the shipped entries, ``0`` does
    not; anything else is a one-line error, not a guess."""
    raw = os.environ.get("LANDSCAPE_SHIPPED_RESULTS", "1").strip()
    if raw not in ("0", "1"):
        raise LandscapeError(f"LANDSCAPE_SHIPPED_RESULTS must be 1 (read the shipped results) or "
                             f"0 (do not), got {raw!r}")  # fmt: skip
    return raw == "1"


def file_digest(p: Path) -> str:
    """The SHA-256 of the file at ``p`` (an entry's, as :data:`SHIPPED_DIGESTS` lists it)."""
    with open_regular(p, follow_links=False) as f:
        return hashlib.sha256(f.read()).hexdigest()


def shipped_digests(path: Path = SHIPPED_DIGESTS) -> dict[str, str]:
    """The listed digests of the shipped entries (module docstring, "What is promised"); none
    when the list is missing or unreadable, so that then nothing is served as shipped."""
    try:
        with open_regular(path) as f:
            doc = json.loads(f.read().decode("utf-8"))
        entries = doc["entries"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, str)}


def shipped_digest_list(folder: Path) -> dict[str, str]:
    """``"<kind>/<key>"`` → file SHA-256 of every entry in a shipped results ``folder``."""
    out = {}
    for p in sorted(folder.rglob(f"*{SUFFIX}")):
        kind, key = p.parent.parent.name, p.name[: -len(SUFFIX)]
        if _named_for(p, SUFFIX) and kind in SHIPPED_KINDS:
            out[f"{kind}/{key}"] = file_digest(p)
    return out


def write_shipped_digests(folder: Path, path: Path = SHIPPED_DIGESTS) -> dict[str, str]:
    """List every entry of the shipped results ``folder`` by its file's SHA-256 in ``path`` (the
    package's :data:`SHIPPED_DIGESTS`): what the build of the shipped results calls last, so
    that exactly the entries it built are served as shipped. Returns the list."""
    entries = shipped_digest_list(folder)
    text = json.dumps({"about": "SHA-256 of each shipped result file (assets/results), by "
                       "kind/key; written by python -m landscape.assets --results",
                       "entries": entries}, indent=1, sort_keys=True) + "\n"  # fmt: skip
    replace_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return entries


class Cache:
    """The disk store. ``Cache()`` uses ``$LANDSCAPE_CACHE`` or ``~/.cache/landscape``."""

    def __init__(
        self, root: str | os.PathLike | None = None, shipped: str | os.PathLike | bool = True
    ) -> None:
        """``shipped``: the folder of shipped entries read after the cache (module docstring);
        True is ``assets/results`` unless ``$LANDSCAPE_SHIPPED_RESULTS`` is ``0``, False none."""
        self.root = Path(root) if root is not None else cache_root()
        # the shipped entries' listed digests: None trusts a folder the caller named
        self.shipped_digests: dict[str, str] | None = None
        if shipped is True:
            self.shipped = shipped_results_root() if shipped_results_on() else None
            self.shipped_digests = shipped_digests() if self.shipped is not None else None
        else:
            self.shipped = Path(shipped) if shipped else None

    @staticmethod
    def key(kind: str, inputs: dict[str, Any]) -> str:
        return hashlib.sha256(canonical_json({"kind": kind, "inputs": inputs}).encode()).hexdigest()

    def path(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / f"{key}{SUFFIX}"

    def get(self, kind: str, key: str) -> Entry | None:
        """The entry, or None when it is missing or fails verification (then it is removed);
        a shipped entry of the kind when the cache has none."""
        entry = self._get(kind, key)
        return entry if entry is not None else self.shipped_entry(kind, key)

    def shipped_entry(self, kind: str, key: str) -> Entry | None:
        """The shipped entry alone (not the cache's), None when there is none to serve."""
        if self.shipped is None or kind not in SHIPPED_KINDS:
            return None
        listed = None if self.shipped_digests is None else self.shipped_digests.get(
            f"{kind}/{key}", "")  # fmt: skip
        if listed == "":  # not a shipped result of this package, whatever the file says
            return None
        p = self.shipped / kind / key[:2] / f"{key}{SUFFIX}"
        try:
            return _read(p, key, listed)
        except _NotListed:  # edited since the build: said, then a miss
            print(f"landscape: shipped result {p} is not the one the package lists (edited "
                  "since the build); not served", file=sys.stderr)  # fmt: skip
        except Exception:  # never removed, never an error: a miss
            pass
        return None

    def _get(self, kind: str, key: str) -> Entry | None:
        p = self.path(kind, key)
        try:
            return _read(p, key)
        except _Stale:  # written by an earlier version: a plain miss
            with contextlib.suppress(OSError):
                p.unlink()
            return None
        except OSError as e:
            if e.errno not in _NOT_A_FILE:  # missing, or the cache root is unusable
                return None
            problem = "not a regular file"
        except Exception as e:  # any corruption (MemoryError too): recompute, never serve
            problem = " ".join(str(e).split()) or type(e).__name__
        print(f"landscape: corrupt cache entry {p} ({problem}); recomputing", file=sys.stderr)
        with contextlib.suppress(OSError):  # the entry file alone (a link, not its target)
            p.unlink()
        return None

    def put(self, kind: str, key: str, tensors: dict[str, torch.Tensor], meta: dict) -> Entry:
        p = self.path(kind, key)
        body = st_save({k: v.detach().cpu().contiguous() for k, v in tensors.items()})
        header = canonical_json({"key": key, "meta": meta, "bytes": len(body),
                                 "sha256": hashlib.sha256(body).hexdigest()})  # fmt: skip
        hb = header.encode()
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            _sweep(p.parent.iterdir())
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

    def remove(self, kind: str, key: str) -> bool:
        """Remove one entry this cache wrote (never a shipped one); True if there was one."""
        p = self.path(kind, key)
        if not _is_entry(p):
            return False
        try:
            p.unlink()
        except FileNotFoundError:
            return False
        return True

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
        """Folders under the root that may hold entries (links and hidden folders never do)."""
        try:
            found = list(self.root.iterdir())
        except OSError:
            return []
        return sorted(d for d in found if d.name not in KEPT and not d.name.startswith(".")
                      and _is_dir(d))  # fmt: skip

    def _shards(self, kind: str | None = None) -> Iterator[tuple[str, Path]]:
        """(kind, folder) of every two-hex-digit folder an entry may lie in."""
        for kind_dir in self._kind_dirs():
            if kind is not None and kind_dir.name != kind:
                continue
            with contextlib.suppress(OSError):
                for d in sorted(kind_dir.iterdir()):
                    if _SHARD_NAME.fullmatch(d.name) and _is_dir(d):
                        yield kind_dir.name, d

    def _sweep_all(self) -> None:
        for _, shard in self._shards():
            with contextlib.suppress(OSError):
                _sweep(shard.iterdir())

    def entries(self, kind: str | None = None) -> Iterator[tuple[str, Path]]:
        """(kind, path) of every entry file (module docstring: what marks a file as an entry),
        of one ``kind`` when given; temporary files, stray files and directories are not."""
        for name, shard in self._shards(kind):
            with contextlib.suppress(OSError):
                for p in sorted(shard.iterdir()):
                    if _is_entry(p):
                        yield name, p

    def metas(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, metadata) of every entry of one kind, read from headers only (for listings).

        The header's digest and key are verified, so a tampered header is dropped like in
        :meth:`get`; the body is not read, so loading a result must still go through ``get``."""
        for _, p in self.entries(kind):
            key = p.name[: -len(SUFFIX)]
            try:
                with open_regular(p, follow_links=False) as f:
                    header, _ = _read_header(f, key)
            except (_Stale, OSError):
                continue
            except Exception as e:
                print(f"landscape: corrupt cache entry {p} ({e}); removed", file=sys.stderr)
                with contextlib.suppress(OSError):
                    p.unlink()
                continue
            yield key, header["meta"]

    def info(self) -> dict[str, Any]:
        self._sweep_all()
        kinds: dict[str, dict[str, int]] = {}
        for kind, p in self.entries():
            try:
                size = p.lstat().st_size
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
        """Remove all entries (or one kind's) and return their count.

        Only what the cache wrote is removed (module docstring): entry files, their lock files
        and stale temporary files, then each two-digit folder and kind folder this call emptied.
        Anything else stays, with the folders that hold it; ``data/`` and ``families/`` (fetched
        data sets, registered families) are never looked into. A fresh temporary file is another
        writer's entry in progress: it, its folder and the locks beside it are kept."""
        self._sweep_all()
        n = 0
        emptied: set[Path] = set()
        for _, shard in list(self._shards(kind)):
            try:
                files = sorted(shard.iterdir())
            except OSError:
                continue
            busy = any(_TMP_NAME.fullmatch(p.name) for p in files)
            mine = False
            for p in files:
                if _is_entry(p) or (not busy and _is_lock(p)):
                    with contextlib.suppress(FileNotFoundError):
                        p.unlink()
                        n += p.suffix == SUFFIX
                    mine = True
            if mine and _rmdir(shard):
                emptied.add(shard.parent)
        for kind_dir in emptied:
            _rmdir(kind_dir)  # only if it now holds nothing else
        return n


class NotCached(Exception):
    """A read-only lookup (:class:`ReadOnlyCache`) found no entry; nothing was computed."""


class ReadOnlyCache(Cache):
    """The cache (and its shipped entries), read-only: a miss raises :class:`NotCached` instead
    of computing. The app reads stored results through it before offering to compute them."""

    def get_or_compute(
        self, kind: str, inputs: dict[str, Any], compute: Callable[[], Any]
    ) -> tuple[Entry, bool]:
        entry = self.get(kind, self.key(kind, inputs))
        if entry is None:
            raise NotCached(kind)
        return entry, True


def _is_dir(p: Path) -> bool:
    """A real directory, not a link to one (the cache never walks out of its root)."""
    try:
        return stat.S_ISDIR(p.lstat().st_mode)
    except OSError:
        return False


def _rmdir(d: Path) -> bool:
    """Remove ``d`` if it is empty; True if removed."""
    try:
        d.rmdir()
    except OSError:
        return False
    return True


def _named_for(p: Path, suffix: str) -> bool:
    """``p`` is named ``<key><suffix>`` inside the folder named by the key's first two digits."""
    m = _KEY_NAME.fullmatch(p.name)
    return m is not None and m.group(2) == suffix[1:] and p.parent.name == m.group(1)[:2]


def _is_lock(p: Path) -> bool:
    """A lock file the cache made: named for a key, regular and empty."""
    try:
        st = p.lstat()
    except OSError:
        return False
    return _named_for(p, ".lock") and stat.S_ISREG(st.st_mode) and st.st_size == 0


def _is_entry(p: Path) -> bool:
    """An entry file: named for a key, a regular file (not a link), starting with a magic."""
    if not _named_for(p, SUFFIX):
        return False
    try:
        with open_regular(p, follow_links=False) as f:
            return f.read(4) in (MAGIC, *OLD_MAGICS)
    except OSError:
        return False


HEAD = 4 + 8 + 32  # magic, header length, header digest


class _Stale(ValueError):
    """An entry in an earlier on-disk format."""


class _NotListed(ValueError):
    """A shipped entry whose file is not the one the package's digest list names."""


def _sweep(files: Iterable[Path]) -> None:
    """Remove the cache's temporary files (by name) among ``files`` older than
    STALE_TMP_SECONDS."""
    cutoff = time.time() - STALE_TMP_SECONDS
    for t in files:
        if not _TMP_NAME.fullmatch(t.name):
            continue
        with contextlib.suppress(OSError):  # removed meanwhile, or not ours to remove
            st = t.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
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


def _memory_bytes() -> int:
    """This machine's physical memory: no entry larger than it can be served."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return 2**62


def _read_header(f: Any, key: str) -> tuple[dict[str, Any], int]:
    """(verified header, body length) of the open entry ``f``, read without its body: the
    declared header length is checked against the file's size before it is read."""
    size = os.fstat(f.fileno()).st_size
    if size > _memory_bytes():
        raise ValueError(f"{size} bytes, more than this machine's memory")
    head = f.read(HEAD)
    n = _header_length(head)
    if n > size - HEAD:
        raise ValueError(f"header of {n} bytes in a file of {size}")
    header = _header(head, f.read(n), key)
    body = size - HEAD - n
    declared = header.get("bytes", body)  # entries written before the length was recorded
    if declared != body:
        raise ValueError(f"body of {body} bytes where the header says {declared}")
    return header, body


def _read(p: Path, key: str, listed: str | None = None) -> Entry:
    """The verified entry at ``p`` (module docstring); OSError when it cannot be opened as a
    regular file, _Stale for an earlier format, another exception when it is corrupt or, with
    ``listed``, when the file's SHA-256 is not that one (a shipped entry edited after it was
    built)."""
    with open_regular(p, follow_links=False) as f:
        header, n = _read_header(f, key)
        body = f.read(n)
        if listed is not None:
            f.seek(0)
            if hashlib.sha256(f.read()).hexdigest() != listed:
                raise _NotListed("not the shipped result listed for its key")
    if len(body) != n:
        raise ValueError("truncated body")
    if hashlib.sha256(body).hexdigest() != header["sha256"]:
        raise ValueError("body digest mismatch")
    return Entry(st_load(body), header["meta"], key)
