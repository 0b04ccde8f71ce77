"""Sources: the one way to get a model with its data.

A :class:`Source` names a checkpoint: a zoo seed (``Source("mlp-digits", 3)``, optionally a
control variant of the recipe), a member of an imported family (``Source("tunes", 1)``,
:mod:`landscape.store.families`) or a checkpoint path (a landscape directory, a Hugging Face
directory or a ``.gguf`` file), with a :class:`DataSpec` naming its evaluation data.
``source.load()`` gives the :class:`~landscape.models.zoo.Checkpoint`; :func:`data_of` gives
the checkpoint's :class:`Data`: the splits it is matched and evaluated on, how to batch its
evaluation, its fine-tuning recipe, and the data key that identifies the data in cache keys.

- zoo checkpoints (and landscape directories written from them, whose metadata names the zoo
  model): the zoo model's data (``models.zoo.split_for``), evaluated with the library defaults;
- family members: the family's data (text windows or an image data set), memoised per process;
- paths with a :class:`DataSpec`: the same kind of data as a family's, the text encoded with
  the checkpoint's own ``tokenizer.json`` when it has one (``data.text.token_corpus``).

Families and paths may hold large models: their curves are evaluated one λ at a time in batches
sized so that one batch's widest activation stays near ``LOGIT_BUDGET`` elements.

:mod:`landscape.tasks` builds on these: a loaded model on a device with its data as the gauge
sweep and artifact transport use it.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from landscape import data as datasets
from landscape.budget import TEXT_BYTES_CHARACTERS, check_text_file, check_windows
from landscape.data import Split
from landscape.data.text import encoding_sources, token_corpus
from landscape.device import CPU
from landscape.errors import LandscapeError, did_you_mean
from landscape.models import Architecture, ModelConfig, architecture_of, count_params
from landscape.models.importers import (
    checkpoint_tokenizer,
    describe,
    import_checkpoint,
    inspect_checkpoint,
    tokenizer_files,
)
from landscape.models.registry import describe as describe_architecture
from landscape.models.train import available_seeds as zoo_seeds
from landscape.models.train import get_checkpoint
from landscape.models.zoo import (
    ZOO,
    Checkpoint,
    ZooModel,
    data_identity,
    load_checkpoint_dir,
    split_for,
    zoo_model,
)
from landscape.store.cache import Cache
from landscape.store.families import (
    DATASETS,
    NAME,
    Family,
    check_member,
    families,
    family,
    is_family,
    member_rows,
    save_family,
)
from landscape.store.files import read_json
from landscape.symmetry import admitted_symmetries

__all__ = [
    "DATASETS",
    "LOGIT_BUDGET",
    "Data",
    "DataSpec",
    "Source",
    "add_family",
    "available_seeds",
    "check_evaluable",
    "check_same_architecture",
    "data_of",
    "eval_batch_size",
    "evaluation_refusal",
    "family_splits",
    "label",
    "load_any",
    "load_member",
    "model_arch",
    "split_sampler",
    "stream_sampler",
]

LOGIT_BUDGET = 2**24  # logits (or widest activations) one evaluation batch may hold
Sampler = Callable[[torch.Generator, int], tuple[torch.Tensor, torch.Tensor]]


# ---------------------------------------------------------------- checkpoints


def load_any(path: str | os.PathLike) -> Checkpoint:
    """A float32 checkpoint from a landscape-format directory or any format the importers read
    (:func:`landscape.models.importers.import_checkpoint`)."""
    p = Path(path)
    if not p.exists():
        known = [*ZOO, *(f.name for f in families())]
        raise LandscapeError(
            f"{p} is not a zoo model, a family or a checkpoint path{did_you_mean(str(p), known)}"
        )
    if _landscape_dir(p):
        ckpt = load_checkpoint_dir(p)
        params = {k: v.float() for k, v in ckpt.params.items()}
        return Checkpoint(ckpt.cfg, params, ckpt.meta)
    return import_checkpoint(p)


def _landscape_dir(p: Path) -> bool:
    """Whether ``p`` is a folder landscape wrote: a ``config.json`` that says
    ``"format": "landscape"`` (``train --save``, ``align --out``, a family's planted member)."""
    if not (p.is_dir() and (p / "config.json").is_file()):
        return False
    try:
        doc = read_json(p / "config.json")
    except LandscapeError:  # the importer names the problem
        return False
    return isinstance(doc, dict) and doc.get("format") == "landscape"


def label(ckpt: Checkpoint) -> str:
    """How a checkpoint is named in messages: ``mlp-digits seed 3``, or for a family member
    ``fam member 1 (its label)`` (members share the family's name, which cannot tell them apart)."""
    if ckpt.meta.get("family"):
        tag = ckpt.meta.get("label")
        return f"{ckpt.meta['family']} member {ckpt.seed}" + (f" ({tag})" if tag else "")
    return ckpt.name if ckpt.seed is None else f"{ckpt.name} seed {ckpt.seed}"


def check_same_architecture(a: Checkpoint, b: Checkpoint, label_a: str, label_b: str) -> None:
    """One-line error naming the configuration fields where A and B differ (the first with both
    values), or their vocabularies."""
    da, db = asdict(a.cfg), asdict(b.cfg)
    da["n_kv_heads"], db["n_kv_heads"] = a.cfg.kv_heads, b.cfg.kv_heads  # 0 means n_heads
    diff = [k for k in da if da[k] != db[k]]
    if diff:
        k = diff[0]
        hint = ""
        if set(diff) <= {"d_model", "d_norm"}:  # residual width only: a semi-orthogonal embedding
            hint = "; they differ only in width: compare them with `landscape widths`"
        raise LandscapeError(
            f"mismatched architectures: {label_a} and {label_b} differ in {diff}: {label_a} has "
            f"{k}={da[k]!r}, {label_b} has {k}={db[k]!r}{hint}"
        )
    if a.meta.get("vocab") != b.meta.get("vocab"):
        raise LandscapeError(f"{label_a} and {label_b} use different character vocabularies")


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class DataSpec:
    """Evaluation data named for checkpoints that are not zoo models (a family's, a path's).

    Language models: non-overlapping windows of ``n_ctx`` tokens of the UTF-8 file ``text``, at
    most ``max_windows`` per split (the test split is the last 10%). Classifiers: the image data
    set ``data`` (``digits`` or ``fashion``, its IDX files in ``data_dir``).
    ``activation_tokens``: how many positions activation matching correlates (windows of
    ``n_ctx`` tokens, or images); None: the matching's default number of training rows.
    """

    text: str | None = None
    data: str | None = None
    data_dir: str | None = None
    n_ctx: int = 128
    max_windows: int = 64
    activation_tokens: int | None = None

    @classmethod
    def of(cls, fam: Family) -> DataSpec:
        return cls(fam.text, fam.data, fam.data_dir, fam.n_ctx, fam.max_windows)


def _text_splits(
    ckpt: Checkpoint, path: str, text: str, n_ctx: int, max_windows: int
) -> tuple[dict[str, Split], dict[str, Any]]:
    cfg = ckpt.cfg
    if n_ctx > cfg.n_ctx:
        raise LandscapeError(f"--n-ctx {n_ctx} exceeds the model's context of {cfg.n_ctx}")
    check_windows(max_windows, n_ctx)  # before the text is read
    vocab = ckpt.meta.get("vocab")
    if vocab:  # a landscape character model: its own vocabulary
        check_text_file(text, TEXT_BYTES_CHARACTERS, "with the checkpoint's characters")
        corpus = datasets.text_corpus(text, vocab)
        splits = {s: corpus.windows(s, n_ctx, max_windows) for s in ("train", "test")}
        ident = {"text": corpus.digest, "tokens": "model vocabulary (characters)"}
        return splits, {**ident, "note": "encoded with the checkpoint's character vocabulary"}
    corpus = token_corpus(text, checkpoint_tokenizer(path), d_vocab=cfg.d_vocab)
    splits = {s: corpus.windows(s, n_ctx, max_windows) for s in ("train", "test")}
    ident = {"text": corpus.digest, "tokens": corpus.tokenizer, "note": corpus.note}
    if corpus.tokenizer_digest:  # the tokenizer's content, not only its kind
        ident["tokenizer"] = corpus.tokenizer_digest
    return splits, ident


def _image_splits(
    cfg: ModelConfig, data: str, data_dir: str | None
) -> tuple[dict[str, Split], dict[str, Any]]:
    if data not in DATASETS:
        raise LandscapeError(f"unknown data set {data!r}; expected one of {', '.join(DATASETS)}")
    flat = architecture_of(cfg).inputs == "features"
    if data == "digits":
        splits = {s: datasets.digits(s, flat=flat) for s in ("train", "test")}
    else:
        splits = {s: datasets.fashion(s, data_dir) for s in ("train", "test")}
        if flat:
            splits = {s: Split(v.inputs.flatten(1), v.targets) for s, v in splits.items()}
    x = splits["test"].inputs
    if flat and x.shape[1] != cfg.d_in:
        raise LandscapeError(f"{data} has {x.shape[1]} features; the model expects {cfg.d_in}")
    if architecture_of(cfg).inputs == "images":
        if cfg.channels > 1:
            raise LandscapeError(
                f"the model expects {cfg.channels}-channel images; {data} is grey (1 channel)"
            )
        if x.shape[-1] != cfg.image_size:
            raise LandscapeError(
                f"{data} images are {x.shape[-1]}×{x.shape[-1]}; the model expects "
                f"{cfg.image_size}×{cfg.image_size}"
            )
        if cfg.channels == 1:
            splits = {s: Split(v.inputs[:, None], v.targets) for s, v in splits.items()}
    if cfg.n_out < 10:
        raise LandscapeError(f"{data} has 10 classes; the model has {cfg.n_out} outputs")
    return splits, {"data": data, "note": f"{data} images, {len(x)} test examples"}


def spec_splits(
    ckpt: Checkpoint, path: str, spec: DataSpec
) -> tuple[dict[str, Split], dict[str, Any]]:
    """``({"train": Split, "test": Split}, identity)`` of the data ``spec`` names for ``ckpt``
    (read from ``path``, whose ``tokenizer.json`` encodes a text); the identity's ``note`` says
    in words what was read. Refused in one line when the data does not fit the model."""
    cfg = ckpt.cfg
    if spec.n_ctx < 1 or spec.max_windows < 1:
        raise LandscapeError("--n-ctx and --max-windows must be positive")
    if architecture_of(cfg).inputs == "tokens":
        if spec.text is None:
            raise LandscapeError("a language model pair needs --text FILE (a UTF-8 text file)")
        return _text_splits(ckpt, path, str(spec.text), spec.n_ctx, spec.max_windows)
    if spec.data is None:
        raise LandscapeError(
            f"a {cfg.arch} pair needs an image data set: --data {' or --data '.join(DATASETS)}"
        )
    return _image_splits(cfg, spec.data, spec.data_dir)


def eval_batch_size(cfg: ModelConfig, inputs: torch.Tensor) -> int:
    """Rows per evaluation batch of these inputs (windows of tokens, or images) so that one
    batch's widest activation fits ``LOGIT_BUDGET``."""
    positions = inputs.shape[1] if architecture_of(cfg).inputs == "tokens" else cfg.n_ctx or 1
    width = max(cfg.n_out, cfg.d_mlp, 3 * cfg.d_model, cfg.n_heads * positions)
    return max(1, min(512, LOGIT_BUDGET // (positions * width)))


def split_sampler(split: Split) -> Sampler:
    """Uniform minibatches (with replacement across batches) from a fixed split."""

    def sample(gen: torch.Generator, bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        j = torch.randint(0, len(split), (bs,), generator=gen)
        return split.inputs[j], split.targets[j]

    return sample


def stream_sampler(stream: torch.Tensor, n_ctx: int) -> Sampler:
    """Random windows of ``n_ctx`` characters and their next-character targets."""

    def sample(gen: torch.Generator, bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(stream) - n_ctx - 1, (bs,), generator=gen)
        chunk = stream[starts[:, None] + torch.arange(n_ctx + 1)].long()  # compact codes
        return chunk[:, :-1], chunk[:, 1:]

    return sample


class Data:
    """The data of a model: what it is matched, evaluated and fine-tuned on.

    ``key`` identifies the data in cache keys; ``split(name)`` is a split as a whole (matching
    learns from ``split("train")``); ``evaluation(name)`` what curves and grids are evaluated
    on; ``eval_options(cfg, inputs)`` the batching of that evaluation; ``lr``, ``batch_size``
    and ``sampler(cfg, train)`` the fine-tuning recipe; ``task_splits()``, ``task_sizes(cfg)``
    the splits and default sizes of a :class:`Task` and ``task_key`` what it adds to its cache
    keys (None: the weights and config say it all).
    """

    key: dict[str, Any]
    lr: float
    batch_size: int
    task_key: dict[str, Any] | None = None

    def split(self, name: str) -> Split:
        raise NotImplementedError

    def evaluation(self, name: str) -> Split:
        return self.split(name)

    def eval_options(self, cfg: ModelConfig, inputs: torch.Tensor) -> dict[str, Any]:
        return {}

    def match_options(self, cfg: ModelConfig, method: str) -> dict[str, Any]:
        """Options of ``method`` that follow from the data (and go into cache keys)."""
        return {}

    def task_splits(self) -> tuple[Split, Split]:
        """(training split, test split) of a :class:`Task`."""
        return self.split("train"), self.split("test")

    def sampler(self, cfg: ModelConfig, train: Split) -> Sampler:
        return split_sampler(train)

    def task_sizes(self, cfg: ModelConfig) -> tuple[int, int | None]:
        """Default (activation examples, test examples) of a :class:`Task` (None: all)."""
        return (64, None) if architecture_of(cfg).inputs == "tokens" else (512, None)


class ZooData(Data):
    """A zoo model's data: its fixed splits, text windows capped at ``eval_windows``."""

    def __init__(self, model: ZooModel, vocab: str | None) -> None:
        self.model, self.vocab = model, vocab
        self.lr, self.batch_size = model.train.lr, model.train.batch_size
        try:
            self.key = data_identity(model)
        except LandscapeError:  # data files missing here: the name still tells data apart
            self.key = {"name": model.dataset}

    def split(self, name: str) -> Split:
        if self.model.dataset == "shakespeare" and name == "train":
            # Learned matching trains on every training window; evaluation uses a fixed subset.
            return datasets.shakespeare(self.vocab).windows("train", self.model.config.n_ctx)
        return split_for(self.model, name, vocab=self.vocab)

    def evaluation(self, name: str) -> Split:
        s, cap = self.split(name), self.model.eval_windows
        return Split(s.inputs[:cap], s.targets[:cap]) if cap and len(s) > cap else s

    def task_splits(self) -> tuple[Split, Split]:
        return (split_for(self.model, "train", vocab=self.vocab),
                split_for(self.model, "test", vocab=self.vocab))  # fmt: skip

    def sampler(self, cfg: ModelConfig, train: Split) -> Sampler:
        if self.model.dataset == "shakespeare":  # random windows of the whole training text
            return stream_sampler(datasets.shakespeare(self.vocab).train, cfg.n_ctx)
        return split_sampler(train)

    def task_sizes(self, cfg: ModelConfig) -> tuple[int, int | None]:
        return (64, 128) if self.model.dataset == "shakespeare" else (512, None)


class SplitData(Data):
    """Fixed train/test splits named by a :class:`DataSpec` (a family's or a path's data)."""

    def __init__(self, splits: dict[str, Split], ident: dict[str, Any], spec: DataSpec,
                 lr: float = 1e-4, batch_size: int = 16,
                 task_key: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.splits, self.spec = splits, spec
        self.note = ident  # with its ``note``: what was read, in words
        self.key = {**{k: v for k, v in ident.items() if k != "note"}, "n_ctx": spec.n_ctx,
                    "max_windows": spec.max_windows}  # fmt: skip
        self.lr, self.batch_size, self.task_key = lr, batch_size, task_key

    def split(self, name: str) -> Split:
        return self.splits[name]  # already capped at max_windows

    def eval_options(self, cfg: ModelConfig, inputs: torch.Tensor) -> dict[str, Any]:
        # possibly a large model: one λ at a time, batches sized to the logit budget
        return {"batch_size": eval_batch_size(cfg, inputs), "chunk": 1}

    def match_options(self, cfg: ModelConfig, method: str) -> dict[str, Any]:
        tokens = self.spec.activation_tokens
        if method != "activation" or tokens is None:
            return {}
        train = self.splits["train"]
        tokens_in = architecture_of(cfg).inputs == "tokens"
        positions = train.inputs.shape[1] if train.inputs.ndim == 2 and tokens_in else 1
        return {"batch": max(1, tokens // positions)}


def evaluation_refusal(arch: Architecture) -> str:
    """Why no evaluation data can be built for models of ``arch`` ("" when it can).

    Text windows hold next-token targets, which only a causal model predicts: a bidirectional
    encoder (BERT) sees every token, so its masked-LM loss needs masked windows, and a sequence
    classifier needs labelled sequences; neither is implemented. What needs no data (registering
    a family, ``landscape symmetries``, ``landscape inspect --audit``) works on them."""
    if arch.inputs != "tokens" or arch.causal:
        return ""
    if arch.readout == "class token":
        return (
            "a sequence classifier over tokens needs labelled sequences, which no data set here "
            "provides"
        )
    return (
        "masked-LM evaluation of a bidirectional encoder needs masked text windows, and "
        "masking is not implemented"
    )


def check_evaluable(cfg: ModelConfig) -> None:
    """One line refusing evaluation data for ``cfg`` (:func:`evaluation_refusal`)."""
    why = evaluation_refusal(architecture_of(cfg))
    if why:
        raise LandscapeError(
            f"{why}: barriers, data-driven matching and sweeps are not available for it "
            "(symmetries and inspect --audit need no data)"
        )


def spec_data(ckpt: Checkpoint, path: str | os.PathLike, spec: DataSpec) -> SplitData:
    """The data ``spec`` names for the checkpoint read from ``path`` (:func:`check_evaluable`)."""
    check_evaluable(ckpt.cfg)
    splits, ident = spec_splits(ckpt, str(path), spec)
    return SplitData(splits, ident, spec)


_FAMILY_DATA: dict[tuple, SplitData] = {}  # by family definition and files, the 8 most recent
_FAMILY_DATA_LOCK = threading.Lock()  # the app's sessions run in threads


def _family_data(doc: str, first: Checkpoint | None) -> SplitData:
    fam = Family.from_dict(json.loads(doc))
    spec = DataSpec.of(fam)
    first = first or load_member(fam.name, 0)
    check_evaluable(first.cfg)
    splits, ident = spec_splits(first, fam.members[0], spec)
    data = SplitData(splits, ident, spec, fam.lr, fam.batch_size)
    data.task_key = {**data.key, "lr": fam.lr, "batch_size": fam.batch_size}
    return data


def family_data(name: str, member0: Checkpoint | None = None) -> SplitData:
    """A family's data. Memoised per process on the family's definition and on the files its
    text encoding reads (:func:`landscape.data.text.encoding_sources`), so a family redefined
    under the same name, or a text or tokenizer replaced on disk, reads its data again. The
    data is read with member 0's configuration and vocabulary; ``member0``, that member already
    loaded, saves loading it again (a GGUF member takes most of a minute)."""
    fam = family(name)
    doc = json.dumps(fam.to_dict(), sort_keys=True)
    memo = (doc, encoding_sources(fam.text, tokenizer_files(fam.members[0])) if fam.text else ())
    with _FAMILY_DATA_LOCK:
        data = _FAMILY_DATA.pop(memo, None)
        if data is None:
            data = _family_data(doc, member0)
        _FAMILY_DATA[memo] = data  # most recent last
        while len(_FAMILY_DATA) > 8:
            del _FAMILY_DATA[next(iter(_FAMILY_DATA))]
    return data


def family_splits(name: str) -> tuple[dict[str, Split], dict[str, Any]]:
    """``({"train": Split, "test": Split}, data key)`` of a family; the key identifies the
    evaluation data in cache keys (text digest and encoding, or image data set; window length
    and count)."""
    d = family_data(name)
    return d.splits, d.key


def data_of(ckpt: Checkpoint) -> Data:
    """The data a checkpoint is evaluated on, from its metadata: its family's, else its zoo
    model's (a control variant is evaluated on the normal task)."""
    if ckpt.meta.get("family"):
        fam = family(ckpt.meta["family"])
        member0 = ckpt if ckpt.meta.get("member") == fam.members[0] else None
        return family_data(fam.name, member0)
    name = ckpt.meta.get("name")
    if name not in ZOO:
        raise LandscapeError(
            f"no evaluation data is known for checkpoint {name!r}: it is not a zoo model; "
            "register it in a family (`landscape family add`) to give it data"
        )
    return ZooData(zoo_model(name), ckpt.meta.get("vocab"))


# ---------------------------------------------------------------- families


def load_member(name: str, index: int | None) -> Checkpoint:
    """Member ``index`` of a family as a float32 Checkpoint whose meta names the family."""
    fam = family(name)
    i = check_member(fam, index)
    ckpt = load_any(fam.members[i])
    meta = {**ckpt.meta, "name": fam.name, "family": fam.name, "seed": i,
            "member": fam.members[i], "label": fam.label(i)}  # fmt: skip
    return Checkpoint(ckpt.cfg, ckpt.params, meta)


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
        n_ctx=min(n_ctx, cfg.n_ctx) if language else n_ctx,
        max_windows=max_windows,
        lr=lr,
        batch_size=batch_size or (16 if language else 64),
        labels=tuple(labels) if labels else (),
    )
    spec_splits(first, members[0], DataSpec.of(fam))  # the data loads and fits, or one line
    save_family(fam)
    return fam


def available_seeds(name: str, cache: Cache | None = None) -> list[dict[str, Any]]:
    """The checkpoints of a zoo model (:func:`landscape.models.train.available_seeds`: seeds
    cached or shipped, with metrics) or of a family (its members: ``seed, label, path,
    present``)."""
    if name not in ZOO and is_family(name):
        return member_rows(name)
    return zoo_seeds(name, cache)


def model_arch(name: str) -> str:
    """The architecture name of a zoo model or an imported family (``mlp``, ``vit``, …)."""
    if name not in ZOO and is_family(name):
        return family(name).arch
    return zoo_model(name).config.arch  # the zoo's error for an unknown name


# ---------------------------------------------------------------- sources


@dataclass(frozen=True)
class Source:
    """Where a model comes from: a zoo seed, a family member, or a checkpoint path.

    ``model`` is a zoo name, a family name or a path; ``seed`` the zoo seed or member number;
    ``variant`` a control variant of a zoo recipe (``models.zoo.VARIANTS``); ``data`` the
    evaluation data of a path (without it, a landscape directory written from a zoo checkpoint
    is evaluated on its zoo model's data).
    """

    model: str
    seed: int | None = None
    variant: str | None = None
    data: DataSpec | None = None

    @property
    def kind(self) -> Literal["zoo", "family", "path"]:
        if self.model in ZOO:
            return "zoo"
        return "family" if is_family(self.model) else "path"

    def load(
        self, device: torch.device = CPU, cache: Cache | None = None, train_if_missing: bool = True
    ) -> Checkpoint:
        """The checkpoint (a zoo seed comes from the cache, the shipped assets or, unless
        ``train_if_missing`` is off, training on ``device``; a family member or a path is read
        from disk)."""
        kind = self.kind
        if self.variant is not None and kind != "zoo":
            raise LandscapeError(f"control variants are zoo recipes; {self.model} is a {kind}")
        if kind == "family":
            return load_member(self.model, self.seed)
        if kind == "path":
            return load_any(self.model)
        return get_checkpoint(self.model, self.seed, device=device, cache=cache,
                              train_if_missing=train_if_missing, variant=self.variant)  # fmt: skip

    def label(self, ckpt: Checkpoint) -> str:
        """How the loaded checkpoint is named in messages (a path by its path)."""
        return str(self.model) if self.kind == "path" else label(ckpt)

    def data_of(self, ckpt: Checkpoint) -> Data:
        """The loaded checkpoint's data: the spec's for a path given one, else :func:`data_of`."""
        if self.data is not None:
            return spec_data(ckpt, self.model, self.data)
        return data_of(ckpt)


def inspect(path: str | os.PathLike, *, audit: bool = False) -> dict[str, Any]:
    """``landscape inspect PATH``: what a checkpoint is (:func:`~landscape.models.importers.
    inspect_checkpoint`; a folder landscape wrote, ``format`` landscape, from its own
    configuration and metadata) and, under ``symmetries``, the gauge groups it admits as
    imported (:func:`landscape.symmetry.admitted_symmetries`, read from the configuration).

    ``audit``: also ``audit``, the measured symmetry table of the weights
    (:func:`landscape.symmetry.symmetry_table`): every group level with a random element
    applied, its max |Δlogits| in float64, whether it is valid, what it needs and why (which
    norm or gain blocks it), and for an invalid level the row measured after the processing
    that makes it exact.
    """
    if _landscape_dir(Path(path)):
        cfg, info = _inspect_landscape(Path(path))
    else:
        cfg, info = inspect_checkpoint(path)
    out = {**info, "symmetries": admitted_symmetries(cfg)}
    if audit:
        from landscape.symmetry import symmetry_table

        ckpt = load_any(path)
        out["audit"] = symmetry_table(ckpt.cfg, ckpt.params)
    return out


def _inspect_landscape(p: Path) -> tuple[ModelConfig, dict[str, Any]]:
    """:func:`inspect` of a folder landscape wrote: its own configuration (no source model
    type: the format is landscape's), the weights checked as loading checks them, and what its
    metadata says (the zoo model or family it came from, an alignment it holds)."""
    ckpt = load_checkpoint_dir(p)
    return ckpt.cfg, {
        "path": str(p),
        "format": "landscape",
        "architecture": describe_architecture(ckpt.cfg),
        "config": ckpt.cfg.to_dict(),
        "parameters": count_params(ckpt.cfg),
        "source_parameters": sum(v.numel() for v in ckpt.params.values()),
        "meta": ckpt.meta,
    }
