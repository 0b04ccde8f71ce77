"""Home: linear mode connectivity on one shipped pair, the barrier, the symmetries, where to go.

The curves are read from a file shipped with the app (``assets/home``), so the page draws at
once on any machine; the λ slider only moves a marker over them.
"""

from __future__ import annotations

import contextlib

import streamlit as st

from app import state
from app.components.failures import Fix, show_error
from app.components.figures import figure
from app.components.layout import page_header, presentation, side_by_side
from app.memory import remember
from app.navigation import PAGE_SPECS, pages
from landscape.assets.figures import HOME_MODEL
from landscape.plots.fields import BARRIER
from landscape.plots.home import figure_symmetry_levels
from landscape.plots.interpolation import figure_interpolation
from landscape.plots.tidy import tidy_interpolation, tidy_symmetry_levels

page_header(
    "Landscape",
    "Do two independently trained networks live in **one basin**? Walk the straight line "
    "θ(λ) = λ·θ_A + (1−λ)·π(θ_B) between them: if the loss never rises above the chord between "
    "the endpoints, they are **linearly mode connected**. Naively it rises; but many weight "
    "settings compute the same function, so B is first moved by a symmetry π that leaves its "
    "function unchanged and brings it as close to A as possible. Below: two small MLPs trained "
    "on digits from different seeds, the line between them before and after alignment.",
)

try:
    curves = state.home_curves()
except (OSError, ValueError) as err:
    show_error(
        "The Home page's curves",
        err,
        Fix("Compute them (about half a minute)", run=state.compute_home_curves),
    )
    st.stop()

series = [{"label": s["label"], "results": [s["result"]]} for s in curves["series"]]
lambdas = BARRIER.read(series[0]["results"][0], "lambdas")
lam = remember("home_lambda", lambdas[len(lambdas) // 2], param="lam", options=lambdas)
a, b = curves["seeds"]
title = f"{HOME_MODEL}, seeds {a} (A) and {b} (B): the line between them"
if not presentation():
    st.subheader(title)
# on a projector the figure comes first, whole on a 1280×720 screen, and its name shares the row
# below it with the slider (above it, they pushed the figure's axis below the fold)
above = st.container() if presentation() else contextlib.nullcontext()
named, slider = st.columns([2, 3]) if presentation() else (None, st.container())
if named is not None:
    named.markdown(f"**{title}**")
slider.select_slider(
    "λ: move along the line, from B aligned (0) to A (1)",
    lambdas,
    key="home_lambda",
    format_func=lambda v: f"{v:.2f}",
)
with above:
    figure(
        figure_interpolation(series, split=curves["split"], mark=lam, presentation=presentation()),
        f"home-{HOME_MODEL}-{a}-{b}",
        title="loss and accuracy along the line",
        key="home",
        data=tidy_interpolation(series),
        settings={
            "model": HOME_MODEL,
            "seeds": [a, b],
            "methods": [s["label"] for s in series],
            "split": curves["split"],
            "points": len(lambdas),
            "source": "shipped curves",
        },
    )

st.markdown(
    f"**The merged model θ(λ = {lam:.2f})**: its test loss, and how far it lies above the chord "
    "between the endpoints' losses (the barrier is the largest such gap):"
)
# One row of names, one of numbers, one of notes: each row starts level across the columns, so
# a name that wraps to two lines does not push its number below its neighbours'.
names, numbers, notes = (st.columns(len(series)) for _ in range(3))
for name, number, note, s in zip(names, numbers, notes, series, strict=True):
    r = s["results"][0]
    loss, acc = BARRIER.read(r, "loss"), BARRIER.read(r, "accuracy")
    i = lambdas.index(lam)
    above = loss[i] - (lam * loss[-1] + (1 - lam) * loss[0])  # λ runs from 0 (B) to 1 (A)
    name.markdown(f"**{s['label']}**")  # wraps where a metric's label would be cut
    number.metric(
        s["label"],
        f"{loss[i]:.3f} nats",
        label_visibility="collapsed",
        delta=f"{above:+.3f}",
        delta_description="above the chord",
        delta_color="inverse",
        help=f"The loss barrier of this line is {r['barrier_loss']:.3f} nats, at "
        f"λ = {r['lambda_peak_loss']:.2f}.",
    )
    note.caption(f"accuracy {acc[i]:.1%} · barrier {r['barrier_loss']:.3f} nats")

st.latex(
    r"B_{\mathrm{loss}} = \max_{\lambda \in [0, 1]} \Big[\, L\big(\lambda\,\theta_A"
    r" + (1-\lambda)\,\pi(\theta_B)\big) - \big(\lambda\, L(\theta_A)"
    r" + (1-\lambda)\, L(\pi(\theta_B))\big) \Big]"
)
st.caption(
    "The accuracy barrier is the same with the sign flipped: the largest drop of accuracy below "
    "the chord. Naive: π is the identity. Weight matching picks π to bring B's weights closest "
    "to A's; learned matching trains π so that the merged models have a low loss."
)

st.subheader("Start here")
routes = {
    "interpolation": "See the barrier for several pairs, methods and symmetry groups, with the "
    "table of barriers (mean ± s.e.m.).",
    "triangle": "Widen the line to the plane through three models: how much of it is one basin.",
    "ablation": "Why the layout of the models researchers bring keeps a barrier: one change "
    "at a time from a GPT where learned rotations remove it to the Llama layout.",
    "surface": "The loss over a plane around one model, or through three aligned ones, in 2-D "
    "and 3-D.",
    "eigenangles": "Why rotations matter: how far the weight-matching rotation is from a "
    "relabelling, and what learned matching adds.",
    "atlas": "Checkpoints and their symmetric copies on a map, before and after alignment.",
    "gauge": "Which symmetries are exact for a model, whether matching finds them again, and "
    "which claims about single coordinates survive them.",
    "models": "The zoo: train more seeds, import your own checkpoints, manage the cache.",
}
links = pages()
titles = {url: title for _, title, _, url in PAGE_SPECS}
for n, (url, text) in enumerate(routes.items(), start=1):
    left, right = st.columns([2, 5], vertical_alignment="center")
    left.page_link(links[url], label=f"{n}. {titles[url]}", icon=links[url].icon)
    right.markdown(text)

st.subheader("Four levels of symmetry")
left, right = side_by_side([1, 1])
with left:
    figure(figure_symmetry_levels(presentation=presentation()), "symmetry-levels",
           title="four levels of symmetry", data=tidy_symmetry_levels())  # fmt: skip
with right:
    st.markdown(
        "Each level contains the previous one:\n\n"
        "1. **Permutations** of FFN hidden units and of attention heads: relabel them and "
        "nothing changes.\n"
        "2. **Signed permutations** of the residual stream: with RMSNorm, coordinates may be "
        "relabelled and their signs flipped.\n"
        "3. **Rotations** of the residual stream: once the norm gains are folded into the "
        "readers, any orthogonal map of the d-dimensional stream is exact.\n"
        "4. **Within-head invertible maps**: W_Q·M with W_K·M⁻ᵀ, and W_V·N with N⁻¹·W_O, inside "
        "every head (one map per key/value group under grouped-query attention; with rotary "
        "positions only QK maps commuting with RoPE, a scaled rotation per frequency pair).\n\n"
        "Aligning under a larger group can only bring B closer: the barrier that remains after "
        "rotations have been factored out is what the landscape really has."
    )
