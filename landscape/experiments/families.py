"""Imported families' members with their test loss and accuracy (the Models page, ``landscape
family``): each member evaluated once on the family's test split and cached."""

from __future__ import annotations

from typing import Any

import torch

from landscape.experiments.evaluation import EvalOptions, evaluate_path
from landscape.models.registry import architecture
from landscape.sources import data_of, eval_batch_size, evaluation_refusal, load_member
from landscape.store.cache import Cache, digest_tensors
from landscape.store.families import family, member_rows


def member_metrics(name: str, index: int, cache: Cache | None = None) -> dict[str, float]:
    """Test loss and accuracy of one family member on the family's test split (cached)."""
    ckpt = load_member(name, index)
    data = data_of(ckpt)
    test = data.split("test")
    inputs = {"weights": digest_tensors(ckpt.params), "cfg": ckpt.cfg.to_dict(),
              "data": data.key}  # fmt: skip

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        p = ckpt.params
        one_at_a_time = EvalOptions(eval_batch_size(ckpt.cfg, test.inputs), chunk=1)
        loss, acc = evaluate_path(ckpt.cfg, p, p, test.inputs, test.targets, [1.0],
                                  one_at_a_time)  # fmt: skip
        return {}, {"test_loss": float(loss[0]), "test_accuracy": float(acc[0])}

    entry, _ = (cache or Cache()).get_or_compute("family-metrics", inputs, compute)
    return {"test_loss": entry.meta["test_loss"], "test_accuracy": entry.meta["test_accuracy"]}


def family_members(name: str, cache: Cache | None = None) -> list[dict[str, Any]]:
    """The members of a family (``store.families.member_rows``), each present one with its
    test loss and accuracy (:func:`member_metrics`)."""
    rows = member_rows(name)
    unevaluated = evaluation_refusal(architecture(family(name).arch))
    for row in rows:
        if row["present"] and unevaluated:  # e.g. a masked LM: listed without metrics
            row["note"] = f"not evaluated: {unevaluated}"
        elif row["present"]:
            row.update(member_metrics(name, row["seed"], cache))
    return rows
