"""Imported families' data (memoised per process) and :func:`add_family`, which registers a family
after checking everything a later computation would trip over.
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Any

from landscape.data import Split
from landscape.data.text import encoding_sources
from landscape.errors import FieldError, LandscapeError
from landscape.models import architecture_of
from landscape.models.importers import (
    describe,
    tokenizer_files,
)
from landscape.models.zoo import (
    ZOO,
    Checkpoint,
)
from landscape.sources.checkpoints import check_same_architecture, load_any, load_member
from landscape.sources.data import (
    DataSpec,
    SplitData,
    check_evaluable,
    evaluation_refusal,
    spec_splits,
)
from landscape.store.families import (
    DATASETS,
    NAME,
    Family,
    family,
    is_family,
    save_family,
)

_FAMILY_DATA: dict[tuple, SplitData] = {}  # by family definition and files, the 8 most recent


_FAMILY_DATA_LOCK = threading.Lock()  # the app's sessions run in threads


def _family_data(doc: str, first: Checkpoint | None) -> SplitData:
    fam = Family.from_dict(json.loads(doc))
    spec = DataSpec.of(fam)
    first = first or load_member(fam.name, 0)
    check_evaluable(first.cfg)
    return _split_data(fam, *spec_splits(first, fam.members[0], spec))


def _split_data(fam: Family, splits: dict[str, Split], ident: dict[str, Any]) -> SplitData:
    data = SplitData(splits, ident, DataSpec.of(fam), fam.lr, fam.batch_size)
    data.task_key = {**data.key, "lr": fam.lr, "batch_size": fam.batch_size}
    return data


def _memo_key(fam: Family) -> tuple:
    doc = json.dumps(fam.to_dict(), sort_keys=True)
    return (doc, encoding_sources(fam.text, tokenizer_files(fam.members[0])) if fam.text else ())


def _keep(memo: tuple, data: SplitData) -> None:
    """Remember a family's data, most recent last (the caller holds the lock)."""
    _FAMILY_DATA[memo] = data
    while len(_FAMILY_DATA) > 8:
        del _FAMILY_DATA[next(iter(_FAMILY_DATA))]


def family_data(name: str, member0: Checkpoint | None = None) -> SplitData:
    """A family's data. Memoised per process on the family's definition and on the files its
    text encoding reads (:func:`landscape.data.text.encoding_sources`), so a family redefined
    under the same name, or a text or tokenizer replaced on disk, reads its data again. The
    data is read with member 0's configuration and vocabulary; ``member0``, that member already
    loaded, saves loading it again (a GGUF member takes most of a minute)."""
    memo = _memo_key(family(name))
    with _FAMILY_DATA_LOCK:
        data = _FAMILY_DATA.pop(memo, None)
        if data is None:
            data = _family_data(memo[0], member0)
        _keep(memo, data)
    return data


def family_data_note(name: str) -> str:
    """What a family is evaluated on, in words: for a text, how it was encoded (the model's
    tokenizer, or UTF-8 bytes or characters when there is none, and what that means for the
    loss); for images, the data set and its test size."""
    return str(family_data(name).note.get("note", ""))


def family_splits(name: str) -> tuple[dict[str, Split], dict[str, Any]]:
    """``({"train": Split, "test": Split}, data key)`` of a family; the key identifies the
    evaluation data in cache keys (text digest and encoding, or image data set; window length
    and count)."""
    d = family_data(name)
    return d.splits, d.key


def add_family(
    name: str,
    paths: list[str | os.PathLike],
    spec: DataSpec,
    *,
    lr: float = 1e-4,
    batch_size: int | None = None,
    labels: list[str] | None = None,
    replace: bool = False,
) -> Family:
    """Register a family after checking everything a later computation would trip over.

    ``spec`` (:class:`DataSpec`) names the evaluation data: a text file for language models
    (``text``, in windows of ``n_ctx`` tokens, at most ``max_windows`` per split), an image
    data set for classifiers (``data``, in ``data_dir``); a family keeps no
    ``activation_tokens``. ``lr`` and ``batch_size`` (None: 16 windows, or 64 images) are
    fine-tuning's on the family's data; ``labels``: a short label per member; ``replace``: a
    family of that name is replaced instead of refused.

    Every member is loaded (one-line errors name the file and tensor), all must share one
    architecture and vocabulary, and the evaluation data must load and fit the model.
    """
    text, data, data_dir = spec.text, spec.data, spec.data_dir
    n_ctx, max_windows = spec.n_ctx, spec.max_windows
    if not NAME.fullmatch(name):
        raise LandscapeError(
            f"family name {name!r}: use letters, digits, '.', '_' or '-' (at most 64)"
        )
    if name in ZOO:
        raise LandscapeError(f"{name!r} is a zoo model; choose another family name")
    if is_family(name) and not replace:
        raise LandscapeError(f"family {name!r} exists; remove it first or pass replace")
    if not paths:
        raise LandscapeError("a family needs at least one checkpoint path")
    if labels is not None and len(labels) != len(paths):
        raise LandscapeError(f"{len(labels)} labels for {len(paths)} checkpoints")
    if spec.activation_tokens is not None:
        raise LandscapeError("a family's data has no activation_tokens: leave it None")
    for p in paths:  # a path, never a zoo name: say that it is missing, not what it is not
        if not Path(p).expanduser().exists():
            raise FieldError(f"checkpoint path {p} does not exist", field="paths",
                             plain=f"checkpoint path {p} does not exist")  # fmt: skip
    members = tuple(str(Path(p).expanduser().resolve()) for p in paths)
    if len(set(members)) != len(members):
        raise LandscapeError("the same checkpoint path is given twice")
    first = load_any(members[0])
    for p in members[1:]:
        check_same_architecture(first, load_any(p), members[0], p)
    cfg = first.cfg
    language = architecture_of(cfg).inputs == "tokens"
    if language:
        if text is None:
            raise FieldError("a family of language models needs a text file (--text FILE)",
                             field="text", plain="a family of language models is evaluated on "
                             "a text file: give one")  # fmt: skip
        if data is not None:
            raise LandscapeError("language models are evaluated on --text, not --data")
        text = str(Path(text).expanduser().resolve())
    else:
        if data is None:
            raise LandscapeError(
                f"a family of {cfg.arch} classifiers needs --data {' or --data '.join(DATASETS)}"
            )
        if text is not None:
            raise FieldError("classifiers are evaluated on --data, not --text", field="text",
                             plain="classifiers are evaluated on image data, not on a text "
                             "file: leave it empty")  # fmt: skip
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
        n_ctx=min(n_ctx, cfg.n_ctx) if language else n_ctx,
        max_windows=max_windows,
        lr=lr,
        batch_size=batch_size or (16 if language else 64),
        labels=tuple(labels) if labels else (),
    )
    splits, ident = spec_splits(first, members[0], DataSpec.of(fam))  # loads and fits, or one line
    save_family(fam)
    if not evaluation_refusal(architecture_of(cfg)):  # never kept where evaluation is refused
        with _FAMILY_DATA_LOCK:  # read once: what the pages (and family_data_note) use next
            _keep(_memo_key(fam), _split_data(fam, splits, ident))
    return fam
