"""The data a checkpoint is matched and evaluated on: :class:`DataSpec` (evaluation data named for
checkpoints that are not zoo models), the splits it reads, samplers, evaluation batching under
``LOGIT_BUDGET``, and :class:`Data` with its zoo and split forms.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from landscape import data as datasets
from landscape.budget import TEXT_BYTES_CHARACTERS, check_text_file, check_windows
from landscape.data import Split
from landscape.data.text import token_corpus
from landscape.errors import LandscapeError
from landscape.matching import method_of
from landscape.models import Architecture, ModelConfig, architecture_of
from landscape.models.importers import (
    checkpoint_tokenizer,
)
from landscape.models.zoo import (
    Checkpoint,
    ZooModel,
    data_identity,
    split_for,
)
from landscape.store.families import (
    DATASETS,
    Family,
)

LOGIT_BUDGET = 2**24  # logits (or widest activations) one evaluation batch may hold


Sampler = Callable[[torch.Generator, int], tuple[torch.Tensor, torch.Tensor]]


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
    width = max(cfg.n_out, cfg.ffn_width, 3 * cfg.d_model, cfg.n_heads * positions)
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
        """The fixed batch of a method that reads one (its ``fixed_batch`` setting, activation
        matching's ``batch``): as many rows as hold the spec's ``activation_tokens``."""
        tokens, setting = self.spec.activation_tokens, method_of(method).fixed_batch
        if not setting or tokens is None:
            return {}
        train = self.splits["train"]
        tokens_in = architecture_of(cfg).inputs == "tokens"
        positions = train.inputs.shape[1] if train.inputs.ndim == 2 and tokens_in else 1
        return {setting: max(1, tokens // positions)}


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
