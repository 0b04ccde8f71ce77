"""Spawned children: two children trained on from the parent's snapshot at step k, their barrier
against k; opt-in, for zoo models."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import state
from app.components.choices import device, pick_many
from app.components.failures import show_warnings
from app.components.figures import figure
from app.components.layout import presentation
from app.components.long_runs import duration, read_else_run
from app.components.tables import results_table
from app.memory import remember
from app.sections.interpolation.asked import Asked
from landscape.experiments.spawn import SpawnOptions
from landscape.matching import aligns, matching_key
from landscape.models.zoo import ZOO
from landscape.page_defaults import method_group
from landscape.plots.curves import figure_spawn
from landscape.plots.fields import SPAWN, SPAWN_ROW
from landscape.plots.theme import points as in_points
from landscape.plots.tidy import tidy_records


def spawned_children(asked: Asked) -> None:
    """Behind a toggle (a zoo model only): the barrier between children spawned from the first
    pair's seed A at the chosen steps, naive and aligned; read, else trained on a click."""
    name, pairs, chosen = asked.name, asked.pairs, asked.chosen
    split, points = asked.split, asked.points
    st.subheader("Spawned children")
    st.caption(
        "When do two runs enter one basin? The zoo run of seed A (the parent) is trained once "
        "with snapshots; from its snapshot at step k two children go on to the last step, each "
        "with its own data order. Their barrier along the straight line, naive (dashed) and "
        "aligned (solid), against k: spawned at the last step they are the parent, with "
        "barrier 0. Each child is trained once, then read from the cache."
    )
    remember("spawn_show", False, param="spawn", options=(False, True))
    if st.toggle("Spawned children", key="spawn_show"):
        run_steps = ZOO[name].train.steps
        every = state.snapshot_every(name)
        spawn_options = list(range(0, run_steps + 1, every))
        spawn_default = sorted({spawn_options[min(len(spawn_options) - 1, i)]
                                for i in (0, 1, 2, 5, 10, 25, len(spawn_options) - 1)})  # fmt: skip
        s1, s2 = st.columns([4, 2])
        remember(f"spawn_at_{name}", spawn_default, param="sp_at", options=spawn_options,
                 many=True)  # fmt: skip
        spawn_at = pick_many(s1, "Spawn steps k", spawn_options, key=f"spawn_at_{name}",
                             wrap=True)  # fmt: skip
        spawn_combos = [c for c in chosen if aligns(method_group(c)[0])] or ["naive"]
        remember("spawn_combo", spawn_combos[0], param="sp_method", options=spawn_combos,
                 label="spawn method")  # fmt: skip
        spawn_combo = s2.selectbox("Aligned by", spawn_combos, key="spawn_combo")
        if spawn_at:
            method, group = method_group(spawn_combo)
            parent = pairs[0][0]
            asked_for = SpawnOptions(method=method, group=group, points=points, split=split)
            wanted = (name, parent, tuple(sorted(spawn_at)), asked_for, device())

            def trained() -> float | None:
                """The seconds training seed A took (kept with its checkpoint)."""
                return state.checkpoint(name, parent).meta.get("seconds")

            def cost() -> list[tuple[str, float | None]]:
                """Not stored: the parent's run with snapshots and two children from each step
                k to the end, at the time training seed A took."""
                took, steps = trained(), ZOO[name].train.steps
                return [
                    (
                        f"the parent and {2 * len(spawn_at)} children",
                        None if not took else took * (1 + 2 * sum(1 - k / steps for k in spawn_at)),
                    )
                ]

            made = read_else_run(  # stored: drawn at once
                lambda: state.spawn(*wanted, compute=False),
                lambda progress: state.spawn(*wanted, progress=progress),
                running="Training the parent with snapshots and the children …",
                done="The spawned children are ready",
                failed="Spawning failed",
                what="Spawned children",
                key="spawn",
                inputs=wanted,
                cost=cost,
                basis=lambda: f"from the {duration(trained() or 0)} training seed {parent} took "
                "(on the machine that trained it)",
                unknown="it trains the parent with snapshots, and the children from them",
            )  # fmt: skip
            if made is not None:
                show_warnings("Spawned children", made)
                R, X = SPAWN.read, SPAWN_ROW.read  # the result's and its rows' fields
                spawn_table = [{"step": X(x, "step"),
                                "alignment": matching_key(X(x, "method"), X(x, "group")),
                                "loss barrier (nats)": X(x, "barrier_loss"),
                                "accuracy barrier (points)": in_points(X(x, "barrier_accuracy"))}
                               for x in R(made, "rows")]  # fmt: skip
                figure(
                    figure_spawn(made, presentation=presentation()),
                    f"spawn-{name}-{parent}-{split}",
                    title="the barrier between spawned children against the spawn step",
                    key="spawn",
                    data=tidy_records(spawn_table, model=name, parent_seed=parent, split=split),
                    settings={"model": name, "parent seed": parent,
                              "spawn steps": R(made, "at"), "children": R(made, "children"),
                              "snapshots every": R(made, "every"), "alignment": spawn_combo,
                              "points": points, "split": split},
                    cache_keys=[k for x in R(made, "rows") for k in X(x, "cache_keys")],
                    tables={f"Barriers between the children, {split} split": spawn_table},
                )  # fmt: skip
                results_table(pd.DataFrame(spawn_table))
