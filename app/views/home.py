"""Home: what linear mode connectivity is, the four levels of symmetry, and where to look."""

from __future__ import annotations

import streamlit as st

from app.components import figure, page_header, presentation
from app.navigation import pages
from landscape.plots.home import figure_symmetry_levels

page_header(
    "Landscape",
    "Do two independently trained networks live in **one basin**? Walk the straight line "
    "θ(λ) = λ·θ_A + (1−λ)·π(θ_B) between them: if loss never rises above the chord between the "
    "endpoints, they are **linearly mode connected**. The highest excess over the chord is the "
    "*loss barrier* (and, with the sign flipped, the *accuracy barrier*). Naively the barrier is "
    "large; but many weight settings compute the same function, so B is first moved by a "
    "symmetry π that leaves its function unchanged and brings it as close to A as possible.",
)

left, right = st.columns([1, 1], gap="large")
with left:
    figure(figure_symmetry_levels(presentation=presentation()), "symmetry-levels")
with right:
    st.markdown(
        "**Four levels of symmetry**, each containing the previous one:\n\n"
        "1. **Permutations** of FFN hidden units and of attention heads: relabel them and "
        "nothing changes.\n"
        "2. **Signed permutations** of the residual stream: with RMSNorm, coordinates may be "
        "relabelled and their signs flipped.\n"
        "3. **Rotations** of the residual stream: once the norm gains are folded into the "
        "readers, any orthogonal map of the d-dimensional stream is exact.\n"
        "4. **Within-head invertible maps**: W_Q·M with W_K·M⁻ᵀ, and W_V·N with N⁻¹·W_O, inside "
        "every head.\n\n"
        "Aligning under a larger group can only bring B closer: the barrier that remains after "
        "rotations have been factored out is what the landscape really has."
    )

st.subheader("Where to look")
cols = st.columns(3)
routes = (
    (
        "interpolation",
        "Loss and accuracy along λ for several pairs and methods; the barrier "
        "table (mean ± s.e.m.).",
    ),
    ("triangle", "The plane through three models: how much of it is one basin."),
    (
        "eigenangles",
        "Why rotations matter: eigenangles of the weight-matching rotation and of "
        "the learned correction.",
    ),
    ("atlas", "Checkpoints and their gauge copies on a map, before and after alignment."),
    (
        "gauge",
        "Random function-preserving gauges: which symmetries are exact, what matching "
        "recovers, and which coordinate claims survive.",
    ),
    ("models", "The zoo: train more seeds, import checkpoints, manage the cache."),
)
links = pages()
for i, (url, text) in enumerate(routes):
    with cols[i % 3]:
        st.page_link(links[url], icon=links[url].icon)
        st.caption(text)
