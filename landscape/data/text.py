"""Token batches for imported language models from any local UTF-8 text file.

The text is encoded with the model's own tokenizer when its caller hands one in (a
:class:`Tokenizer`: the ``tokenizer.json`` text, read with the ``tokenizers`` library, no hub
access). Where a checkpoint's tokenizer is (its directory's ``tokenizer.json``, or the one a
GGUF file stores) is the importers' knowledge:
:func:`landscape.models.importers.checkpoint_tokenizer` finds it and
:func:`read_tokenizer_json` reads a file of it. A tokenizer that is there but cannot be read is
an error, never a quiet change of ids. Without one it falls back
to UTF-8 bytes (ids 0–255, when the model's vocabulary has at least 256 entries) or characters
(the file's sorted character set), and says so in :attr:`TokenCorpus.tokenizer` and
:attr:`TokenCorpus.note`: a model trained on another tokenizer sees meaningless ids then, so
its loss is only a smoke test.

:attr:`TokenCorpus.tokenizer_digest` is the sha256 of the tokenizer.json text the ids come
from, so that data keys change when the tokenizer does (same kind, other content).

Windows are non-overlapping, ``n_ctx`` inputs and the next-token targets, as
:meth:`landscape.data.TextCorpus.windows`; the last ``val_fraction`` of the tokens is the test
split.

Memory: the streams are kept as the narrowest integer codes that hold the ids (uint8 for bytes
and characters, int32 for a tokenizer), and only the windows handed out are int64;
a file whose encoding would exceed the memory budget is refused before it is read
(``landscape.budget``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from landscape.budget import TEXT_BYTES_CODES, TEXT_BYTES_TOKENIZER, check_text_file
from landscape.data import Split, read_text, stream_windows
from landscape.errors import LandscapeError

__all__ = [
    "NO_TOKENIZER",
    "OTHER_TOKENIZER_FILES",
    "TokenCorpus",
    "Tokenizer",
    "encoding_sources",
    "read_tokenizer_json",
    "token_corpus",
]


@dataclass(frozen=True)
class Tokenizer:
    """A model's tokenizer as the encoder reads it: the ``tokenizer.json`` text (None: there is
    none), its kind (``"tokenizer.json"`` or ``"gguf"``; "" without one), what it is in words
    (or why there is none, for the note) and the file it came from ("" without one)."""

    text: str | None
    kind: str = ""
    what: str = ""
    where: str = ""


NO_TOKENIZER = Tokenizer(None)


@dataclass(frozen=True)
class TokenCorpus:
    """Encoded train/test token streams and how they were encoded."""

    train: torch.Tensor  # (n_train,) uint8 or int32 codes
    test: torch.Tensor  # (n_test,) same dtype
    tokenizer: str  # "tokenizer.json", "gguf", "bytes" or "characters"
    vocab_size: int  # ids are < vocab_size
    source: str
    digest: str  # sha256 of the UTF-8 text
    note: str  # one line for the user: which encoding, and what it means for the loss
    tokenizer_digest: str = ""  # sha256 of the tokenizer.json text used ("" without one)

    def windows(self, split: str, n_ctx: int, max_windows: int | None = None) -> Split:
        """Non-overlapping windows of ``n_ctx`` inputs and their next-token targets (int64)."""
        if split not in ("train", "test"):
            raise LandscapeError(f"unknown split {split!r}; expected 'train' or 'test'")
        s = self.train if split == "train" else self.test
        out = stream_windows(s, n_ctx, max_windows)
        if out is None:
            raise LandscapeError(
                f"the {split} split of {self.source} has {len(s)} tokens; need {n_ctx + 1}"
            )
        return Split(out.inputs.long(), out.targets.long())  # ids index embeddings: int64


def read_tokenizer_json(f: Path) -> Tokenizer:
    """The tokenizer in the ``tokenizer.json`` file ``f`` (one line when it cannot be read)."""
    try:
        text = f.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        msg = " ".join(str(e).split())
        raise LandscapeError(f"{f}: not a readable tokenizer ({msg})") from None
    return Tokenizer(text, "tokenizer.json", f"the model's own tokenizer ({f})", str(f))


# a tokenizer's files other than tokenizer.json, which the encoder does not read: named in the
# note so that a fallback to bytes is not mistaken for the model's tokenizer
OTHER_TOKENIZER_FILES = ("tokenizer.model", "vocab.json", "merges.txt", "vocab.txt")


def encoding_sources(text: str | os.PathLike, tokenizer_files: Sequence[Path] = ()) -> tuple:
    """What encoding ``text`` reads, as (inode, size, modification time) of the text file and
    of the files its tokenizer comes from
    (:func:`landscape.models.importers.tokenizer_files`), without reading them: a memo of the
    encoding is stale when this changes."""

    def stamp(f: Path) -> tuple[int, int, int] | None:
        try:
            st = f.stat()
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    return tuple(stamp(f) for f in [Path(text), *tokenizer_files])


def token_corpus(
    path: str | os.PathLike,
    tokenizer: Tokenizer | None = None,
    d_vocab: int | None = None,
    val_fraction: float = 0.1,
) -> TokenCorpus:
    """Encode the text file ``path`` for a model (module docstring for the fallbacks).

    ``tokenizer``: the model's (``landscape.models.importers.checkpoint_tokenizer``; None or
    :data:`NO_TOKENIZER`: bytes or characters); ``d_vocab``: the model's input vocabulary,
    used to refuse ids it cannot embed.
    """
    tok = tokenizer or NO_TOKENIZER
    tok_text, tok_kind, tok_what, tok_file = tok.text, tok.kind, tok.what, tok.where
    if tok_text is not None:
        check_text_file(path, TEXT_BYTES_TOKENIZER, f"with {tok_file}")
    else:
        check_text_file(path, TEXT_BYTES_CODES, "as bytes or characters")
    text = read_text(path)
    raw = text.encode("utf-8")
    digest = hashlib.sha256(raw).hexdigest()
    tok_digest = ""
    if tok_text is not None:
        if importlib.util.find_spec("tokenizers") is None:
            raise LandscapeError(
                f"{tok_file}: reading it needs the tokenizers package (pip install tokenizers)"
            )
        try:
            from tokenizers import Tokenizer as Encoder
        except ImportError as e:  # installed but broken: say so, not that it is missing
            msg = " ".join(str(e).split())
            raise LandscapeError(f"{tok_file}: the tokenizers package failed to import ({msg})"
                                 ) from None  # fmt: skip
        try:
            encoder = Encoder.from_str(tok_text)
        except Exception as e:
            msg = " ".join(str(e).split())
            raise LandscapeError(f"{tok_file}: not a readable tokenizer ({msg})") from None
        kind, vocab = tok_kind, encoder.get_vocab_size(with_added_tokens=True)
        ids = torch.tensor(encoder.encode(text, add_special_tokens=False).ids, dtype=torch.int32)
        note = f"encoded with {tok_what}"
        tok_digest = hashlib.sha256(tok_text.encode("utf-8")).hexdigest()
    elif d_vocab is None or d_vocab >= 256:
        ids, kind, vocab = torch.frombuffer(bytearray(raw), dtype=torch.uint8), "bytes", 256
        note = f"{tok_what or 'no tokenizer'}: UTF-8 bytes as ids 0-255"
        if d_vocab not in (None, 256):
            note += " (not the model's tokenizer: its loss on these ids is only a smoke test)"
    else:
        chars = sorted(set(text))
        if len(chars) > d_vocab:
            raise LandscapeError(
                f"{path}: {len(chars)} distinct characters but the model has {d_vocab} ids, "
                "and no tokenizer.json was found"
            )
        # fewer than 256 ids: each character becomes the one byte of its code
        codes = text.translate({ord(c): i for i, c in enumerate(chars)}).encode("latin-1")
        ids = torch.frombuffer(bytearray(codes), dtype=torch.uint8)
        kind, vocab = "characters", len(chars)
        note = (
            f"{tok_what or 'no tokenizer'}: the file's {len(chars)} characters in sorted order "
            "as ids (not the model's vocabulary unless it was trained that way)"
        )
    if d_vocab is not None and len(ids) and int(ids.max()) >= d_vocab:
        raise LandscapeError(
            f"{path}: token id {int(ids.max())} from {kind} is outside the model's {d_vocab} ids"
        )
    cut = int(len(ids) * (1 - val_fraction))
    return TokenCorpus(ids[:cut], ids[cut:], kind, vocab, str(path), digest, note, tok_digest)
