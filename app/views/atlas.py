"""Atlas: checkpoints and their gauge copies on a 2-D map, raw and after alignment."""

from __future__ import annotations

import streamlit as st

from app import state
from app.components.choices import model, pick_many, seed_format
from app.components.figures import figure
from app.components.layout import controls, page_header, presentation
from app.components.long_runs import read_else_run
from app.components.needs import need_seeds
from app.components.text import plain
from app.memory import remember
from landscape import page_defaults as page
from landscape.matching import MONOMIAL_GROUPS
from landscape.plots.atlas import figure_atlas
from landscape.plots.fields import ATLAS, ATLAS_POINT
from landscape.plots.tidy import tidy_atlas

page_header(
    "Atlas",
    "Every trained seed (●) and random gauge copies of it (×: the same function with relabelled "
    "units and residual coordinates). In raw weight space the copies scatter as far as different "
    "seeds do; after weight matching to one reference seed each orbit collapses onto its seed. "
    "What stays apart then are genuinely different solutions.",
)

name = model()
seeds = need_seeds(name, 2)
with controls():
    c1, c2, c3 = st.columns([3, 2, 2])
    label = seed_format(name)
    remember(f"atlas_seeds_{name}", seeds[: page.ATLAS_SEEDS], param="seeds", options=seeds,
             many=True)  # fmt: skip
    chosen = pick_many(c1, "Seeds", seeds, key=f"atlas_seeds_{name}", format_func=label, wrap=True)
    references = chosen or seeds
    remember(f"atlas_reference_{name}", references[0], param="reference", options=references)
    reference = c2.selectbox(
        "Reference seed", references, key=f"atlas_reference_{name}", format_func=label
    )
    remember("atlas_copies", page.ATLAS_COPIES, param="copies", options=range(7))
    copies = c2.slider("Gauge copies per seed", 0, 6, key="atlas_copies")
    remember("atlas_group", page.ATLAS_GROUP, param="group", options=MONOMIAL_GROUPS)
    group = c3.radio(
        "Copies drawn from",
        list(MONOMIAL_GROUPS),
        horizontal=True,
        key="atlas_group",
        help="perm: FFN units, heads and residual coordinates "
        "relabelled; signed-perm: residual signs flipped too.",
    )
    remember("atlas_projection", page.ATLAS_PROJECTION, param="projection", options=("pca", "umap"))
    projection = c3.radio(
        "Projection",
        ["pca", "umap"],
        horizontal=True,
        key="atlas_projection",
        format_func=str.upper,
        help="UMAP is slower (its first use compiles code).",
    )

if len(chosen) < 2:
    st.info("Choose at least two seeds.")
    st.stop()

args = (name, tuple(sorted(chosen)), reference, copies, group, projection)
# the atlas's place, filled at once: the atlas of earlier choices does not stay on the page
# (faded) while this one is computed
area = st.empty()
area.info(
    f"The atlas of {plain(name)} (seeds {', '.join(map(str, sorted(chosen)))}; {copies} gauge "
    f"copies per seed, {group}, {projection.upper()}) appears here when its checkpoints are "
    "placed.",
    icon=":material/hourglass_top:",
)
n_checkpoints = len(chosen) * (1 + copies)
# the page's own view (shipped, or cheap) is drawn at once; another starts on its own only when
# the seconds per checkpoint measured on this model's atlases here say it takes at most 20 s
default = (name, tuple(sorted(seeds[: page.ATLAS_SEEDS])), seeds[0], page.ATLAS_COPIES,
           page.ATLAS_GROUP, page.ATLAS_PROJECTION)  # fmt: skip


def atlas_cost() -> list[tuple[str, float | None]]:
    return [(f"the atlas of {n_checkpoints} checkpoints ({projection.upper()})",
             state.expected("atlas", name, projection, units=n_checkpoints))]  # fmt: skip


result = read_else_run(
    lambda: state.atlas(*args),
    lambda progress: state.compute_atlas(*args, progress=progress),
    running="Placing checkpoints …",
    done=lambda r: f"{len(ATLAS.read(r, 'points'))} checkpoints placed",
    failed="Atlas failed",
    what="The atlas",
    key="atlas",
    inputs=args,
    cost=None if args == default else atlas_cost,
    basis=f"at the seconds per checkpoint the stored atlases of {name} took to compute",
    unknown="each checkpoint is aligned to the reference by weight matching, and "
    f"{projection.upper()} projects them",
)

if result is None:
    area.empty()
else:
    R = ATLAS.read  # the result's declared fields
    points = R(result, "points")
    state.measured("atlas", name, R(result, "projection"), seconds=R(result, "seconds"),
                   units=len(points))  # fmt: skip
    with area.container():
        figure(
            figure_atlas(result, presentation=presentation()),
            f"atlas-{name}-{group}-{projection}",
            title=f"seeds and their gauge copies, raw and aligned ({projection.upper()})",
            key="atlas",
            data=tidy_atlas(result, name),
            settings={
                "model": name,
                "seeds": list(R(result, "seeds")),
                "method": "weight",  # every copy weight-matched to the reference
                "group": group,
                "projection": projection,
                "reference": R(result, "reference"),
            },  # fmt: skip
        )
        # boxes stretched to the row's height: a label that wraps leaves no neighbour short
        c1, c2, c3 = st.columns(3)
        box = {"border": True, "height": "stretch"}
        raw, aligned = R(result, "orbit_ratio_raw"), R(result, "orbit_ratio_aligned")
        if raw is not None:
            c1.metric("Orbit spread / seed distance, raw", f"{raw:.2f}", **box)
            c2.metric(
                "Orbit spread / seed distance, aligned",
                f"{aligned:.2f}",
                delta=f"{aligned - raw:.2f}",
                delta_color="inverse",
                **box,
            )
        c3.metric("Weights per checkpoint", f"{R(result, 'dimension'):,}", **box)
        copies_total = sum(ATLAS_POINT.read(p, "kind") != "seed" for p in points)
        on_seed = sum(ATLAS_POINT.read(p, "on_seed_aligned") for p in points)
        if copies_total:
            st.caption(
                f"After alignment {on_seed} of {copies_total} gauge copies equal their seed "
                "(full weight-space distance 0, within float round-off): identical checkpoints "
                "are projected once and drawn at the same place, without jitter, so the map "
                "agrees with the orbit/seed distance above."
            )
        for space in ("raw", "aligned"):
            used = R(result, f"projection_{space}")
            if used and used != R(result, "projection"):
                st.caption(
                    f"{space.capitalize()} panel: {used.upper()}, because UMAP needs at least four "
                    "distinct checkpoints and this panel has fewer."
                )
        st.caption(
            "Training-curve snapshots are not stored by the zoo trainer, so the atlas shows "
            "final checkpoints and their gauge copies."
        )
