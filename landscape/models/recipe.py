"""What every seed's training run of one zoo model shares: the recipe with its variant applied
(steps, vocabulary, test split), the learning-rate schedule (warm-up, then cosine decay), the
weight-decay rule and the AdamW built from them, and the empty loss/accuracy curves a run fills.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from landscape import data
from landscape.errors import LandscapeError
from landscape.models.params import Params
from landscape.models.training_data import held_out
from landscape.models.zoo import (
    TrainConfig,
    Variant,
    ZooModel,
    corpus_for,
    get_variant,
    with_variant,
)


@dataclass(frozen=True)
class Recipe:
    """What every seed's run of one zoo model (and variant) shares."""

    model: ZooModel  # with the variant's architecture change
    var: Variant | None
    steps: int
    vocab: str | None
    test: data.Split  # on the variant's own task (permuted labels: permuted targets)


def recipe(model: ZooModel, variant_name: str | None, data_dir: str | None) -> Recipe:
    """The run of ``model`` as control variant ``variant_name`` changes it (None: as it is)."""
    var = get_variant(variant_name)
    model = with_variant(model, variant_name)
    cfg, tc = model.config, model.train
    steps = tc.steps if var is None else max(1, round(var.stop * tc.steps))
    vocab = corpus_for(model).vocab if model.is_text else None
    if vocab is not None and len(vocab) != cfg.d_vocab:
        raise LandscapeError(f"the text has {len(vocab)} symbols, the model expects {cfg.d_vocab}")
    return Recipe(model, var, steps, vocab, held_out(model, var, vocab, data_dir))


def learning_rate(step: int, tc: TrainConfig) -> float:
    """The recipe's learning rate at ``step``: linear warm-up, then cosine decay to a tenth."""
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    t = (step - tc.warmup) / max(1, tc.steps - tc.warmup)
    return tc.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def decays(name: str, w: torch.Tensor) -> bool:
    """The recipe's weight-decay rule: decay matrices, never vectors or positions (``W_pos``).

    The one copy of the rule: the functional AdamW of ``landscape.optim`` uses it too.
    """
    return w.ndim >= 2 and "W_pos" not in name


def adamw(params: Params, tc: TrainConfig, seed_axis: bool = False) -> torch.optim.AdamW:
    """The recipe's AdamW over ``params``, decayed by :func:`decays` (on one seed's slice when
    the tensors carry a leading ``seed_axis``)."""
    rule = [decays(k, v[0] if seed_axis else v) for k, v in params.items()]
    decay = [v for v, d in zip(params.values(), rule, strict=True) if d]
    no_decay = [v for v, d in zip(params.values(), rule, strict=True) if not d]
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": tc.weight_decay},
            {"params": no_decay, "weight_decay": 0},
        ],
        lr=tc.lr,
        betas=(0.9, 0.98),
    )


def new_curves() -> dict[str, list[float]]:
    """A run's curves before its first evaluation, their columns in the order rows fill them."""
    return {"step": [], "train_loss": [], "test_loss": [], "test_accuracy": []}
