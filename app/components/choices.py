"""What the pages' controls choose from and read: the sidebar's model and device, the model's
seeds and kind, method/group labels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from app import state
from landscape.models.circuits import has_circuits as circuits_space
from landscape.models.registry import architecture
from landscape.models.zoo import ZOO


def model() -> str:
    """The zoo model or imported family chosen in the sidebar."""
    return st.session_state.get("model") or state.zoo_status()[0]["name"]


def device() -> str | None:
    return st.session_state.get("device")


def zoo_row(name: str) -> dict[str, Any] | None:
    """The zoo model's or imported family's row of ``state.zoo_status``."""
    return next((r for r in state.zoo_status() if r["name"] == name), None)


def seeds_of(name: str) -> list[int]:
    """Trained seeds (shipped or cached) of a zoo model."""
    row = zoo_row(name)
    return [s["seed"] for s in row["seeds"]] if row else []


def seed_format(name: str) -> Callable[[int], str]:
    """How a seed reads in a control: the number, and a family member's label."""
    row = zoo_row(name)
    labels = {s["seed"]: s.get("label") for s in row["seeds"]} if row else {}
    return lambda s: f"{s} · {labels[s]}" if labels.get(s) else str(s)


def is_imported(name: str) -> bool:
    row = zoo_row(name)
    return bool(row and row["imported"])


def has_heads(name: str) -> bool:
    """Whether the model has attention heads."""
    row = zoo_row(name)
    return bool(row) and architecture(row["arch"]).attention


def has_circuits(name: str) -> bool:
    """Whether the model has a circuits merge space: attention heads without a q/k norm
    (landscape.models.circuits). An imported family is offered it when it has heads;
    a family without a circuit form is refused per series, saying why."""
    if not has_heads(name):
        return False
    entry = ZOO.get(name)
    return entry is None or circuits_space(entry.config)


def pick_many(where: Any, label: str, options: Sequence[Any], **kw: Any) -> list[Any]:
    """``where.multiselect`` that adds one choice per Enter. Streamlit's offers "Select all
    matches" first while the user types, so Enter on "learned/orth" also picked
    learned/orth-mean (a second long run); without that action, and with the matches in their
    listed order (substring filter), Enter adds the first match only."""
    return where.multiselect(label, options, select_all=False, filter_mode="contains", **kw)
