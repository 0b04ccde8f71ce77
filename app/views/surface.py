"""Surface: the loss around one model along two random directions or its Hessian's top two
eigenvectors, or over the plane through three aligned models, as a contour map and in 3-D."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from app import state
from app.components import (
    controls,
    device,
    duration,
    figure,
    model,
    need_data,
    need_seeds,
    page_header,
    pick_many,
    presentation,
    run_in_status,
    seed_format,
    show_error,
    show_warnings,
    side_by_side,
)
from app.components.long_runs import UNKNOWN
from app.memory import remember
from landscape import page_defaults as page
from landscape.experiments import SurfaceOptions
from landscape.matching import matching_keys
from landscape.names import BARRIER_GROUPS, METHODS
from landscape.numbers import number
from landscape.page_defaults import method_group
from landscape.plots.surface import figure_surface
from landscape.plots.theme import points
from landscape.plots.tidy import tidy_surface

AROUND, PLANE = "Around one model", "Plane through three"
RANDOM, HESSIAN = "Random", "Hessian"

page_header(
    "Surface",
    "Loss and accuracy over a plane in weight space. *Around one model*: θ + α·d₁ + β·d₂, with "
    "d₁ and d₂ Gaussian directions whose every filter (the weights feeding one output unit) is "
    "rescaled to the norm of the model's filter, so that α = 1 is a step as large as the model's "
    "own weights; biases and norm gains stay where they are. *Hessian* directions take the "
    "eigenvectors of the two largest eigenvalues of the loss's Hessian at the model instead (on "
    "a fixed batch of the training split, as `landscape curvature` takes it), rescaled the same "
    "way. *Plane through three*: A, and B "
    "and C aligned onto A, in the plane they span, reaching past the triangle; the dashed lines "
    "are the straight paths between the models.",
)

name = model()
need_data(name)
seeds = need_seeds(name, 1)
combos = matching_keys(METHODS, BARRIER_GROUPS)

with controls():
    c1, c2, c3 = st.columns([2, 3, 2])
    kinds = [AROUND, PLANE] if len(seeds) >= 3 else [AROUND]
    remember("surf_kind", AROUND, param="surface", options=kinds)
    kind = c1.radio("Surface", kinds, horizontal=True, key="surf_kind")
    if kind == AROUND:
        remember(f"surf_seed_{name}", seeds[0], param="seed", options=seeds)
        chosen = [c1.selectbox("Model", seeds, key=f"surf_seed_{name}",
                               format_func=seed_format(name))]  # fmt: skip
        remember("surf_extent", page.SURFACE_EXTENT, param="extent",
                 options=(0.25, 0.5, 1.0, 1.5, 2.0))  # fmt: skip
        extent = c2.select_slider("Extent (α and β from −extent to extent)",
                                  [0.25, 0.5, 1.0, 1.5, 2.0], key="surf_extent")  # fmt: skip
        remember("surf_axes", {"random": RANDOM, "hessian": HESSIAN}[page.SURFACE_DIRECTIONS],
                 param="axes", options=(RANDOM, HESSIAN))  # fmt: skip
        along = c2.radio("Directions", [RANDOM, HESSIAN], horizontal=True, key="surf_axes",
                         help="Hessian: the eigenvectors of its two largest eigenvalues, found "
                              "by Lanczos before the grid is evaluated")  # fmt: skip
        remember("surf_dseed", page.SURFACE_DIRECTIONS_SEED, param="directions", options=range(10))
        directions_seed = c2.selectbox("Directions seed" if along == RANDOM else
                                       "Batch seed (the Hessian's rows)", list(range(10)),
                                       key="surf_dseed")  # fmt: skip
        directions = "hessian" if along == HESSIAN else "random"
        method, group, margin = "weight", "orth", 0.2
    else:
        remember(f"surf_seeds_{name}", seeds[:3], param="seeds", options=seeds, many=True,
                 most=3)  # fmt: skip
        chosen = pick_many(c1, "Three seeds (A, B, C)", seeds, max_selections=3,
                           key=f"surf_seeds_{name}", format_func=seed_format(name))  # fmt: skip
        remember("surf_combo", "weight/orth", param="method", options=combos)
        method, group = method_group(c2.selectbox("Method / group", combos, key="surf_combo"))
        remember("surf_margin", 0.2, param="margin", options=(0.1, 0.2, 0.3, 0.5))
        margin = c2.select_slider("Margin past the triangle (of its larger side)",
                                  [0.1, 0.2, 0.3, 0.5], key="surf_margin")  # fmt: skip
        extent, directions_seed, directions = 1.0, 0, "random"
    remember("surf_resolution", page.SURFACE_RESOLUTION, param="grid", options=range(5, 42, 2))
    resolution = c3.select_slider("Grid (points per axis)", list(range(5, 42, 2)),
                                  key="surf_resolution")  # fmt: skip
    remember("surf_metric", "loss", param="colour", options=("loss", "accuracy"))
    metric = c3.radio("Colour", ["loss", "accuracy"], horizontal=True, key="surf_metric")
    remember("surf_split", page.SPLIT, param="split", options=("test", "train"))
    split = c3.radio("Data split", ["test", "train"], horizontal=True, key="surf_split")

if kind == PLANE and len(chosen) != 3:
    st.info("Choose exactly three seeds.")
    st.stop()

# a surface around one model reads its directions' options, a plane its margin
if kind == AROUND:
    options = SurfaceOptions(resolution=resolution, split=split, directions=directions,
                             directions_seed=directions_seed, extent=extent)  # fmt: skip
else:
    options = SurfaceOptions(resolution=resolution, split=split, margin=margin)
args = (name, tuple(chosen), method, group, options, device())
hessian = kind == AROUND and directions == "hessian"
if kind == AROUND:
    what = f"The surface around {name} seed {chosen[0]}"
    what += " along its Hessian's top two eigenvectors" if hessian else ""
else:
    what = f"The plane through {name} seeds {', '.join(map(str, chosen))}"
result = None
# read, else computed on the page's own button, however quick (not read_else_run, which starts
# quick work at once): the status box inside the note, both gone once the surface is there
try:
    result = state.surface(*args)
except state.NotCached:
    ask = st.empty()  # the note, the button and the run's box, gone once the surface is there
    # what it will cost: its points at the seconds per point measured on this machine (a
    # surface's point and a triangle's are one evaluation of the model on the split each)
    per_point = state.grid_seconds(name, split, "weights", device())
    first = {
        PLANE: ", and the two alignments first.",
        AROUND: ", and the Hessian's eigenvectors first." if hessian else ".",
    }[kind]
    cost = (f" About {duration(per_point * resolution**2)} at the seconds per point measured "
            "on this machine" + first
            if per_point else f" {UNKNOWN.capitalize()} (known once a surface or triangle of "
            f"{name} has been evaluated here).")  # fmt: skip
    with ask.container():
        st.info(f"{what} ({resolution} × {resolution} points, {split} split) is not computed "
                f"yet.{cost}", icon=":material/hourglass_top:")  # fmt: skip
        go = st.button("Compute the surface", key="surf_compute", icon=":material/play_arrow:")
        started = time.perf_counter()
        result = (
            None
            if not go
            else run_in_status(
                lambda progress: state.compute_surface(*args, progress=progress),
                running="Evaluating the surface …",
                done=f"{resolution * resolution} points evaluated",
                failed="Surface failed",
                what=what,
            )
        )
    if result is not None:
        ask.empty()
        if kind == AROUND and not hessian:  # computed here: the seconds per point here
            took = time.perf_counter() - started
            state.measured_grid(name, split, "weights", device(), took / resolution**2)
except Exception as err:
    show_error(what, err)

if result is not None:
    show_warnings(what, result)
    settings = {"model": name, "seeds": list(chosen), "split": split, "resolution": resolution,
                **({"extent": extent, "directions": directions,
                    "directions seed": directions_seed} if kind == AROUND
                   else {"method": method, "group": group, "margin": margin})}  # fmt: skip
    rows = [{"model": p["label"], "loss (nats)": p["loss"], "accuracy (%)": points(p["accuracy"])}
            for p in result["points"]]  # fmt: skip
    tables = {"The models": rows}
    paths = [{"path": p["label"], "loss barrier (nats)": p["barrier_loss"],
              "accuracy barrier (points)": points(p["barrier_accuracy"])}
             for p in result["paths"]]  # fmt: skip
    if paths:
        tables["The straight paths"] = paths
    slug = f"surface-{name}-{'-'.join(map(str, chosen))}-{metric}-{split}"
    shows = f"{metric} {'around the model' if kind == AROUND else 'over the plane of the three'}"
    left, right = side_by_side([1, 1])
    with left:
        figure(figure_surface(result, metric=metric, presentation=presentation()), slug,
               title=f"{shows}, contours", key="surface", data=tidy_surface(result),
               settings=settings,
               tables=tables)  # fmt: skip
    with right:
        fig3d = figure_surface(result, metric=metric, view="3d", presentation=presentation())
        if presentation():  # a whole row: a box of its own keeps the colour bar by the scene
            fig3d.update_layout(width=round(1.6 * fig3d.layout.height))
        figure(fig3d, f"{slug}-3d", title=f"{shows}, in 3-D", key="surface-3d",
               data=tidy_surface(result), settings=settings)  # fmt: skip
    # the models and the paths between them are different things: a table each, loss in nats
    # to 4 decimals, accuracy (and its barrier) in % (points) to 2, as the figure's hover
    st.table(pd.DataFrame(rows).style.format({"loss (nats)": "{:.4f}", "accuracy (%)": "{:.2f}"})
             .hide(axis="index"))  # fmt: skip
    if paths:
        st.table(pd.DataFrame(paths).style.format({"loss barrier (nats)": "{:.4f}",
                                                   "accuracy barrier (points)": "{:.2f}"})
                 .hide(axis="index"))  # fmt: skip
    st.caption(
        f"{len(result['x'])} × {len(result['y'])} grid points on the {split} split; loss coloured "
        "on a log scale. Barriers: the largest excess of loss over the chord between the ends "
        "(accuracy: the largest drop below it)."
    )
    if result.get("hessian"):
        h = result["hessian"]
        (l1, l2), (k1, k2), b = h["eigenvalues"], h["axis_curvatures"], h["batch"]
        st.caption(
            f"Hessian eigenvalues λ₁ = {number(l1)}, λ₂ = {number(l2)}, of the loss on "
            f"{b['rows']} {b['unit']} of the {h['split']} split (drawn by seed {h['seed']})"
            f"{'' if h['converged'] else '; Lanczos did not converge'}. Filter normalisation "
            "rescales the eigenvectors' filters unevenly: along the axes drawn, the batch's loss "
            f"curves as ½·κ·α² with κ = {number(k1)} (α) and {number(k2)} (β)."
        )
