"""Imported families: named sets of checkpoints of one architecture, used like zoo models.

A zoo model is a recipe whose seeds are the checkpoints compared. An imported family is the same
thing for checkpoints that come from elsewhere (two fine-tunes of one base, a few independently
trained ViTs): its *members* are checkpoint paths — Hugging Face directories (config.json +
safetensors), ``.gguf`` files, or landscape-format directories — numbered 0, 1, … in the order
given, and those numbers play the role of seeds everywhere a zoo name is accepted::

    landscape family add tunes /ckpt/ft-a /ckpt/ft-b --text corpus.txt
    landscape barrier tunes --seeds 0 1 --method weight --group orth
    landscape gauge-sweep tunes --seed 0 --parts table scramble
    landscape transport tunes --seed 0 --artifact probe --to-seed 1 --out moved

and the app's sidebar lists the family under "Model family".

Evaluation data is part of the family: language models are evaluated on non-overlapping windows
of a local UTF-8 text file (the first member's ``tokenizer.json`` when present, else bytes or
characters; the last 10% is the test split, :mod:`landscape.data.text`), classifiers on an image
data set (``digits`` or ``fashion``). Training-style work on a family (the gauge sweep's drift,
LoRA, AdamW resumption) samples minibatches from the training split at the family's ``lr``.

Storage: one JSON file per family under ``$LANDSCAPE_FAMILIES`` or ``<cache>/families``, written
atomically. Clearing the cache keeps the families. Results on a family are cached like any other,
keyed by the members' weight digests, so moving or renaming a checkpoint file costs nothing and a
changed file gives new results.

This module is the store of family records only; registering a family (which loads and checks
its members) and loading a member with its data is :mod:`landscape.sources`' work.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from landscape.errors import LandscapeError
from landscape.store.files import JSONFileError, read_json
from landscape.store.paths import cache_root, folder_env

__all__ = [
    "Family",
    "check_member",
    "families",
    "family",
    "family_problems",
    "is_family",
    "member_rows",
    "remove_family",
    "save_family",
]

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # always fullmatch: "$" admits "\n"
DATASETS = ("digits", "fashion")
ARCHS = ("mlp", "vit", "gpt", "bert", "bert-cls")
TMP_PREFIX = ".tmp-"


def families_root() -> Path:
    return folder_env("LANDSCAPE_FAMILIES") or cache_root() / "families"


@dataclass(frozen=True)
class Family:
    """A named set of checkpoint paths of one architecture and the data to evaluate them on."""

    name: str
    members: tuple[str, ...]  # absolute paths; member i is "seed" i
    arch: str  # one of ARCHS
    architecture: str  # one line, as ``landscape inspect`` prints it
    parameters: int
    text: str | None = None  # language models: UTF-8 text file
    data: str | None = None  # classifiers: "digits" | "fashion"
    data_dir: str | None = None  # Fashion-MNIST IDX directory
    n_ctx: int = 128  # tokens per evaluation window
    max_windows: int = 64  # windows per split
    lr: float = 1e-4  # learning rate for fine-tuning steps on the family's data
    batch_size: int = 16
    labels: tuple[str, ...] = field(default=())  # a short label per member

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> Family:
        """A family from its stored record; a malformed record is a one-line LandscapeError
        naming the field (unknown fields are ignored, for records of later versions)."""
        if not isinstance(d, dict):
            raise LandscapeError(f"a family record is a JSON object, not {type(d).__name__}")
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        for name in ("name", "members", "arch", "architecture", "parameters"):
            if name not in known:
                raise LandscapeError(f"family record lacks {name!r}")
        known["members"] = tuple(_check_field(known, "members", list))
        known["labels"] = tuple(_check_field(known, "labels", list, optional=True) or ())
        for name in ("name", "architecture", "text", "data", "data_dir"):
            _check_field(known, name, str, optional=name not in ("name", "architecture"))
        for name, least in (("parameters", 0), ("n_ctx", 1), ("max_windows", 2),
                            ("batch_size", 1)):  # fmt: skip
            if _check_field(known, name, int, optional=name != "parameters") is not None:
                if known[name] < least:
                    raise LandscapeError(f"family record: {name} {known[name]} is below {least}")
        if _check_field(known, "lr", float, optional=True) is not None:
            if not (math.isfinite(known["lr"]) and known["lr"] > 0):
                raise LandscapeError(f"family record: lr {known['lr']} is not a positive number")
        if not NAME.fullmatch(known["name"]):
            raise LandscapeError(f"family record: {known['name']!r} is not a family name")
        if not known["members"] or not all(isinstance(m, str) for m in known["members"]):
            raise LandscapeError("family record: members must be a non-empty list of paths")
        if not all(isinstance(x, str) for x in known["labels"]):
            raise LandscapeError("family record: labels must be strings")
        if known["arch"] not in ARCHS:
            raise LandscapeError(f"family record: unknown arch {known['arch']!r}")
        if known.get("data") is not None and known["data"] not in DATASETS:
            raise LandscapeError(f"family record: unknown data set {known['data']!r}")
        return cls(**known)

    def label(self, i: int) -> str:
        return self.labels[i] if i < len(self.labels) else Path(self.members[i]).name

    @property
    def dataset(self) -> str:
        return f"text: {Path(self.text).name}" if self.text else str(self.data)


_TYPES = {str: "a string", list: "a list", int: "an integer", float: "a number"}


def _check_field(d: dict[str, Any], name: str, kind: type, optional: bool = False) -> Any:
    v = d.get(name)
    if v is None and optional:
        return None
    kinds = {float: (int, float), list: (list, tuple)}.get(kind, kind)  # to_dict keeps tuples
    ok = isinstance(v, kinds) and not isinstance(v, bool)
    if not ok:
        raise LandscapeError(f"family record: {name} must be {_TYPES[kind]}, not {v!r:.40}")
    return v


def _file(name: str) -> Path:
    return families_root() / f"{name}.json"


def _names() -> list[str]:
    """Names of the family files present, unread (temporary and misnamed files left out)."""
    root = families_root()
    files = sorted(root.glob("*.json")) if root.is_dir() else []
    return [p.stem for p in files if NAME.fullmatch(p.stem) and p.is_file()]


def is_family(name: str) -> bool:
    """Whether ``name`` is a registered family (never true for a path or a zoo name)."""
    return bool(NAME.fullmatch(name)) and _file(name).is_file()


def family(name: str) -> Family:
    p = _file(name) if NAME.fullmatch(name) else None
    if p is None or not p.is_file():
        known = ", ".join(_names()) or "none registered"
        raise LandscapeError(f"unknown family {name!r} (families: {known})")
    try:
        fam = Family.from_dict(read_json(p))
    except LandscapeError as e:  # the file's own problems name it once, below
        msg = e.problem if isinstance(e, JSONFileError) else " ".join(str(e).split())
        raise LandscapeError(f"family file {p} is unreadable ({msg}); remove it and add again"
                             ) from None  # fmt: skip
    if fam.name != name:
        raise LandscapeError(f"family file {p} holds family {fam.name!r}; remove it and add again")
    return fam


def families() -> list[Family]:
    """Every registered family, by name. An unreadable or invalid file is skipped with a
    warning on stderr, so one stray file does not hide the others (:func:`family_problems`
    lists them for a page)."""
    found, problems = _scan()
    for problem in problems:
        print(f"landscape: warning: {problem}", file=sys.stderr)
    return found


def family_problems() -> list[str]:
    """One line per file in the families directory that is skipped because it is not a valid
    family record (temporary files of writes in progress are not problems)."""
    return _scan()[1]


def _scan() -> tuple[list[Family], list[str]]:
    out, problems = [], []
    root = families_root()
    for p in sorted(root.glob("*.json")) if root.is_dir() else []:
        if p.name.startswith(TMP_PREFIX):  # a write in progress, or one that died
            continue
        if not NAME.fullmatch(p.stem) or not p.is_file():
            problems.append(f"ignoring {p}: not a family file")
            continue
        try:
            out.append(family(p.stem))
        except LandscapeError as e:
            problems.append(str(e))
    return out, problems


def save_family(fam: Family) -> Path:
    """Write atomically: the record appears whole or not at all, and no temporary file stays."""
    root = families_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=TMP_PREFIX, suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(fam.to_dict(), f, indent=1, allow_nan=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, _file(fam.name))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise LandscapeError(f"cannot write family {fam.name} under {root}: {e.strerror or e}"
                             ) from None  # fmt: skip
    return _file(fam.name)


def remove_family(name: str) -> bool:
    """Forget a family (its checkpoints and cached results stay). True if it existed."""
    if not NAME.fullmatch(name):
        return False
    try:
        _file(name).unlink()
    except FileNotFoundError:
        return False
    return True


def check_member(fam: Family, i: int | None) -> int:
    """Member number ``i`` of ``fam`` (a family's members play the seeds), or a one-line error."""
    if i is None:
        raise LandscapeError(f"{fam.name} is a family: give a member number (0–"
                             f"{len(fam.members) - 1}) as the seed")  # fmt: skip
    if not 0 <= int(i) < len(fam.members):
        raise LandscapeError(
            f"family {fam.name} has members 0–{len(fam.members) - 1}; there is no member {i}"
        )
    return int(i)


def member_rows(name: str) -> list[dict[str, Any]]:
    """One row per member (``seed``, ``label``, ``path``, ``present``), like
    :func:`landscape.sources.zoo.available_seeds`; with metrics:
    :func:`landscape.experiments.family_members`."""
    fam = family(name)
    return [{"seed": i, "label": fam.label(i), "path": p, "present": Path(p).exists()}
            for i, p in enumerate(fam.members)]  # fmt: skip
