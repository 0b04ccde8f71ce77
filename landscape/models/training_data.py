"""The data a zoo model's training run reads: its control variant's view of the splits (changed
labels, half of the data), the endless seeded stream of training batches, and the splits its
metrics are measured on.

Same seed → the same data order (a ``torch.Generator`` seeded from the seed), so a run can be
replayed, or resumed, batch for batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from landscape import data
from landscape.models.zoo import Variant, ZooModel, corpus_for, split_for

# Fixed seeds of the control variants' data changes: the same for every training seed.
SHUFFLE_SEED, HALVES_SEED = 20_000, 20_001


def relabel(v: Variant | None, targets: torch.Tensor, n: int) -> torch.Tensor:
    """``targets`` as variant ``v`` labels them (permuted labels: shifted by one class)."""
    return (targets + 1) % n if v is not None and v.labels == "permuted" else targets


def variant_train(model: ZooModel, v: Variant | None, split: data.Split) -> data.Split:
    """A classification training split as a variant sees it (labels, half)."""
    if v is None:
        return split
    x, y = split.inputs, relabel(v, split.targets, model.config.n_out)
    if v.labels == "shuffled":
        y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(SHUFFLE_SEED))]
    if v.half >= 0:
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(HALVES_SEED))
        keep = order[: len(y) // 2] if v.half == 0 else order[len(y) // 2 :]
        x, y = x[keep], y[keep]
    return data.Split(x, y)


def batches(model: ZooModel, seed: int, vocab: str | None, data_dir: str | None,
            v: Variant | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:  # fmt: skip
    """Endless seeded stream of training batches (as the variant ``v`` sees them, if any)."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    bs = model.train.batch_size
    if model.is_text:
        stream = corpus_for(model, vocab).train
        labels = stream
        if v is not None and v.half >= 0:
            stream = stream[: len(stream) // 2] if v.half == 0 else stream[len(stream) // 2 :]
            labels = stream
        if v is not None and v.labels == "shuffled":
            g = torch.Generator().manual_seed(SHUFFLE_SEED)
            labels = stream[torch.randperm(len(stream), generator=g)]
        t = model.config.n_ctx
        while True:
            starts = torch.randint(0, len(stream) - t - 1, (bs,), generator=gen)
            idx = starts[:, None] + torch.arange(t + 1)
            chunk = stream[idx].long()  # streams are compact codes; embeddings take int64
            target = labels[idx[:, 1:]].long() if v is not None else chunk[:, 1:]
            yield chunk[:, :-1], relabel(v, target, model.config.n_out)
    split = variant_train(model, v, split_for(model, "train", data_dir=data_dir))
    while True:
        order = torch.randperm(len(split), generator=gen)
        for i in range(0, len(order) - bs + 1, bs):
            j = order[i : i + bs]
            yield split.inputs[j], split.targets[j]


def replay(stream: Iterator[Any], steps: int) -> None:
    """Advance a batch stream by ``steps`` batches (a resumed run reads on where it stopped)."""
    for _ in range(steps):
        next(stream)


def held_out(model: ZooModel, v: Variant | None, vocab: str | None,
             data_dir: str | None) -> data.Split:  # fmt: skip
    """The test split on the variant's own task (permuted labels: permuted targets)."""
    test = split_for(model, "test", vocab=vocab, data_dir=data_dir)
    if v is not None:
        test = data.Split(test.inputs, relabel(v, test.targets, model.config.n_out))
    return test


def train_for_metrics(model: ZooModel, v: Variant | None, vocab: str | None,
                      data_dir: str | None) -> data.Split:  # fmt: skip
    """The training split a finished run's metrics are measured on (text: its first
    ``eval_windows``), as the variant sees it."""
    train_split = split_for(model, "train", vocab=vocab, data_dir=data_dir)
    if not model.is_text:
        return variant_train(model, v, train_split)
    train_split = data.Split(
        train_split.inputs[: model.eval_windows], train_split.targets[: model.eval_windows]
    )
    if v is not None:
        train_split = data.Split(
            train_split.inputs, relabel(v, train_split.targets, model.config.n_out)
        )
    return train_split
