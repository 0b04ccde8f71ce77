"""The endpoints of a barrier and what is checked about a request before anything is measured:
a checkpoint loaded by source, its evaluation split, the refusals of an unknown method, group or
split and of two checkpoints of different architectures (each one line, docs/design.md §5)."""

from __future__ import annotations

import torch

from landscape.data import Split
from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.matching import BARRIER_GROUPS, METHODS_BY_NAME
from landscape.models.zoo import Checkpoint
from landscape.sources import Source, check_same_architecture, data_of, label

SPLITS = ("train", "test")
Endpoint = Source | Checkpoint


def load(model: str, seed: int | None, device: torch.device = CPU) -> Checkpoint:
    """The checkpoint of a zoo seed, a family member or a path (``Source(model, seed)``)."""
    return Source(model, seed).load(device)


def eval_split(ckpt: Checkpoint, split: str) -> Split:
    """The data a checkpoint is evaluated on (its zoo model's split, or its family's)."""
    check_split(split)
    return data_of(ckpt).split(split)


def check_pair(a: Checkpoint, b: Checkpoint) -> None:
    """One line naming the first difference of A's and B's architectures or vocabularies."""
    check_same_architecture(a, b, label(a), label(b))


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise LandscapeError(f"unknown split {split!r}; expected train or test")


def check_method(method: str, group: str) -> None:
    """One line refusing a method that is not registered or a group no barrier is measured
    under (``landscape.names.BARRIER_GROUPS``)."""
    if method not in METHODS_BY_NAME:
        known = ", ".join(METHODS_BY_NAME)
        raise LandscapeError(f"unknown method {method!r}; expected one of {known}")
    if group not in BARRIER_GROUPS:
        known = ", ".join(BARRIER_GROUPS)
        raise LandscapeError(f"unknown group {group!r}; expected one of {known}")
