"""The page's controls: the pairs, methods, split, points on λ and merge spaces every section
reads (:class:`Asked`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from app import state
from app.components.choices import has_circuits, model, pick_many, seed_format
from app.components.layout import controls
from app.components.needs import need_data, need_seeds
from app.memory import remember
from landscape import page_defaults as page
from landscape.matching import matching_keys
from landscape.names import BARRIER_GROUPS, METHODS


@dataclass(frozen=True)
class Asked:
    """What the controls at the top of the page ask for."""

    name: str  # the sidebar's model
    arch: str  # its architecture's name (the paper's numbers differ between ViTs and GPT-2)
    seeds: list[int]  # its seeds (or a family's members)
    pairs: list[tuple[int, int]]  # the pairs (A, B) chosen, at least one
    chosen: list[str]  # the methods chosen ("naive", "weight/perm", …), at least one
    split: str
    points: int  # points on λ
    spaces: list[str]  # the merge spaces: weights, circuits or both
    seed_label: Callable[[int], str]  # a seed as the pickers write it

    def pair_label(self, pair: tuple[int, int]) -> str:
        return f"{self.seed_label(pair[0])} ↔ {self.seed_label(pair[1])}"


def ask() -> Asked:
    """The page's controls, and what they ask for; the page stops (saying so) until at least one
    pair and one method are chosen, or where the model's seeds or data are missing."""
    name = model()
    arch = state.model_arch(name)
    seeds = need_seeds(name, 2)
    need_data(name)
    all_pairs = list(itertools.combinations(seeds, 2))
    seed_label = seed_format(name)
    default_pairs = ([p for p in state.pairs_for(name, 1, seeds) if p in all_pairs]
                     or all_pairs[:1])  # fmt: skip
    # a method that aligns comes under every group; naive, which does not, once
    combos = matching_keys(METHODS, BARRIER_GROUPS)

    with controls():
        c1, c2, c3 = st.columns([2, 3, 2])
        remember(f"interp_pairs_{name}", default_pairs, param="pairs", options=all_pairs,
                 many=True)  # fmt: skip
        pairs = pick_many(
            c1,
            "Seed pairs (A, B)",
            all_pairs,
            format_func=lambda p: f"{seed_label(p[0])} ↔ {seed_label(p[1])}",
            key=f"interp_pairs_{name}",
            wrap=True,
            help="Each pair is aligned and interpolated; curves are averaged.",
        )
        remember("interp_combos", list(page.METHODS), param="methods",
                 options=combos, many=True)  # fmt: skip
        chosen = pick_many(
            c2,
            "Method / group",
            combos,
            key="interp_combos",
            wrap=True,
            help="Learned matching trains a transform: slow the first time, then read from the "
            "cache.",
        )
        remember("interp_split", page.SPLIT, param="split", options=("test", "train"))
        split = c3.radio("Data split", ["test", "train"], horizontal=True, key="interp_split")
        remember("interp_points", page.INTERPOLATION_POINTS, param="points",
                 options=range(5, 52, 2))  # fmt: skip
        points = c3.slider("Points on λ", 5, 51, step=2, key="interp_points")
        spaces = ["weights"]
        if has_circuits(name):
            remember("interp_space", "weights", param="space",
                     options=("weights", "circuits", "both"))  # fmt: skip
            choice = c3.radio(
                "Merge space",
                ["weights", "circuits", "both"],
                horizontal=True,
                key="interp_space",
                help="weights: the straight line between the parameters as stored. circuits: "
                "between the heads' QK and OV circuits (with rotary positions, at every offset). "
                "both: two curves per method in its colour, dash and marker: weights thick with "
                "filled markers, circuits thin and faded with open markers.",
            )
            spaces = ["weights", "circuits"] if choice == "both" else [choice]

    if not pairs or not chosen:
        st.info("Choose at least one seed pair and one method.")
        st.stop()
    return Asked(name, arch, seeds, pairs, chosen, split, points, spaces, seed_label)
