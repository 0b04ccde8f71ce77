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
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from landscape.data import Split
from landscape.errors import LandscapeError
from landscape.models.checkpoint import Checkpoint
from landscape.store.paths import cache_root

__all__ = [
    "Family",
    "add_family",
    "families",
    "family",
    "family_splits",
    "is_family",
    "load_member",
    "member_rows",
    "remove_family",
]

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # always fullmatch: "$" admits "\n"
DATASETS = ("digits", "fashion")
ARCHS = ("mlp", "vit", "gpt")
TMP_PREFIX = ".tmp-"


def families_root() -> Path:
    env = os.environ.get("LANDSCAPE_FAMILIES")
    return Path(env).expanduser() if env else cache_root() / "families"


@dataclass(frozen=True)
class Family:
    """A named set of checkpoint paths of one architecture and the data to evaluate them on."""

    name: str
    members: tuple[str, ...]  # absolute paths; member i is "seed" i
    arch: str  # "mlp" | "vit" | "gpt"
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
        fam = Family.from_dict(json.loads(p.read_text(encoding="utf-8")))
    except (OSError, ValueError, LandscapeError) as e:
        msg = " ".join(str(e).split())
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


def _write(fam: Family) -> Path:
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


def add_family(
    name: str,
    paths: list[str | os.PathLike],
    *,
    text: str | os.PathLike | None = None,
    data: str | None = None,
    data_dir: str | None = None,
    n_ctx: int = 128,
    max_windows: int = 64,
    lr: float = 1e-4,
    batch_size: int | None = None,
    labels: list[str] | None = None,
    replace: bool = False,
) -> Family:
    """Register a family after checking everything a later computation would trip over.

    Every member is loaded (one-line errors name the file and tensor), all must share one
    architecture and vocabulary, and the evaluation data must load and fit the model.
    """
    from landscape.experiments.pairs import check_same_architecture, load_any
    from landscape.models.importers import describe
    from landscape.models.zoo import ZOO

    if not NAME.fullmatch(name):
        raise LandscapeError(
            f"family name {name!r}: use letters, digits, '.', '_' or '-' (at most 64)"
        )
    if name in ZOO:
        raise LandscapeError(f"{name!r} is a zoo model; choose another family name")
    if _file(name).is_file() and not replace:
        raise LandscapeError(f"family {name!r} exists; remove it first or pass replace")
    if not paths:
        raise LandscapeError("a family needs at least one checkpoint path")
    if labels is not None and len(labels) != len(paths):
        raise LandscapeError(f"{len(labels)} labels for {len(paths)} checkpoints")
    members = tuple(str(Path(p).expanduser().resolve()) for p in paths)
    if len(set(members)) != len(members):
        raise LandscapeError("the same checkpoint path is given twice")
    first = load_any(members[0])
    for p in members[1:]:
        check_same_architecture(first, load_any(p), members[0], p)
    cfg = first.cfg
    if cfg.arch == "gpt":
        if text is None:
            raise LandscapeError("a family of language models needs a text file (--text FILE)")
        if data is not None:
            raise LandscapeError("language models are evaluated on --text, not --data")
        text = str(Path(text).expanduser().resolve())
    else:
        if data is None:
            raise LandscapeError(
                f"a family of {cfg.arch} classifiers needs --data {' or --data '.join(DATASETS)}"
            )
        if text is not None:
            raise LandscapeError("classifiers are evaluated on --data, not --text")
    if n_ctx < 1 or max_windows < 2 or not (math.isfinite(lr) and lr > 0):
        raise LandscapeError("n_ctx must be positive, max_windows at least 2 and lr positive")
    fam = Family(
        name=name,
        members=members,
        arch=cfg.arch,
        architecture=describe(cfg, first.meta.get("model_type", "")),
        parameters=sum(v.numel() for v in first.params.values()),
        text=str(text) if text else None,
        data=data,
        data_dir=str(Path(data_dir).expanduser().resolve()) if data_dir else None,
        n_ctx=min(n_ctx, cfg.n_ctx) if cfg.arch == "gpt" else n_ctx,
        max_windows=max_windows,
        lr=lr,
        batch_size=batch_size or (16 if cfg.arch == "gpt" else 64),
        labels=tuple(labels) if labels else (),
    )
    _splits_for(fam, first, members[0])  # the data loads and fits, or a one-line error
    _write(fam)
    return fam


def remove_family(name: str) -> bool:
    """Forget a family (its checkpoints and cached results stay). True if it existed."""
    if not NAME.fullmatch(name):
        return False
    try:
        _file(name).unlink()
    except FileNotFoundError:
        return False
    return True


def _check_index(fam: Family, i: int | None) -> int:
    if i is None:
        raise LandscapeError(f"{fam.name} is a family: give a member number (0–"
                             f"{len(fam.members) - 1}) as the seed")  # fmt: skip
    if not 0 <= int(i) < len(fam.members):
        raise LandscapeError(
            f"family {fam.name} has members 0–{len(fam.members) - 1}; there is no member {i}"
        )
    return int(i)


def load_member(name: str, index: int | None) -> Checkpoint:
    """Member ``index`` of a family as a float32 Checkpoint whose meta names the family."""
    from landscape.experiments.pairs import load_any

    fam = family(name)
    i = _check_index(fam, index)
    ckpt = load_any(fam.members[i])
    meta = {**ckpt.meta, "name": fam.name, "family": fam.name, "seed": i,
            "member": fam.members[i], "label": fam.label(i)}  # fmt: skip
    return Checkpoint(ckpt.cfg, ckpt.params, meta)


def _splits_for(fam: Family, ckpt: Checkpoint, path: str) -> tuple[dict[str, Split], dict]:
    from landscape.experiments.pairs import _splits

    return _splits(ckpt, path, fam.text, fam.data, fam.data_dir, fam.n_ctx, fam.max_windows)


@functools.lru_cache(maxsize=8)
def _cached_splits(doc: str) -> tuple[dict[str, Split], dict[str, Any]]:
    fam = Family.from_dict(json.loads(doc))
    splits, ident = _splits_for(fam, load_member(fam.name, 0), fam.members[0])
    key = {k: v for k, v in ident.items() if k != "note"}
    return splits, {**key, "n_ctx": fam.n_ctx, "max_windows": fam.max_windows}


def family_splits(name: str) -> tuple[dict[str, Split], dict[str, Any]]:
    """``({"train": Split, "test": Split}, data key)`` of a family; the key identifies the
    evaluation data in cache keys (text digest and encoding, or image data set; window length
    and count). Memoised per process on the family's definition, so a family redefined under
    the same name reads its data again."""
    fam = family(name)
    return _cached_splits(json.dumps(fam.to_dict(), sort_keys=True))


def member_rows(name: str, *, metrics: bool = False) -> list[dict[str, Any]]:
    """One row per member (``seed``, ``label``, ``path``, ``present``), like
    :func:`landscape.models.train.available_seeds`. With ``metrics`` each present member is
    evaluated on the family's test split (``test_loss``, ``test_accuracy``)."""
    fam = family(name)
    rows = []
    for i, p in enumerate(fam.members):
        row: dict[str, Any] = {"seed": i, "label": fam.label(i), "path": p,
                               "present": Path(p).exists()}  # fmt: skip
        if metrics and row["present"]:
            row.update(member_metrics(name, i))
        rows.append(row)
    return rows


def member_metrics(name: str, index: int) -> dict[str, float]:
    """Test loss and accuracy of one member on the family's test split (cached on disk)."""
    import torch

    from landscape.experiments.curves import evaluate_path
    from landscape.experiments.pairs import eval_batch_size
    from landscape.store.cache import Cache, digest_tensors

    ckpt = load_member(name, index)
    splits, data_key = family_splits(name)
    test = splits["test"]
    inputs = {"weights": digest_tensors(ckpt.params), "cfg": ckpt.cfg.to_dict(),
              "data": data_key}  # fmt: skip

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        p = ckpt.params
        loss, acc = evaluate_path(ckpt.cfg, p, p, test.inputs, test.targets, [1.0],
                                  batch_size=eval_batch_size(ckpt.cfg, test.inputs),
                                  chunk=1)  # fmt: skip
        return {}, {"test_loss": float(loss[0]), "test_accuracy": float(acc[0])}

    entry, _ = Cache().get_or_compute("family-metrics", inputs, compute)
    return {"test_loss": entry.meta["test_loss"], "test_accuracy": entry.meta["test_accuracy"]}
