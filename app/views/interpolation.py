"""Interpolation curves: loss and accuracy along λ for several pairs, methods and groups.

The page's sections are in ``app/sections/interpolation/``, one function each, given what the
controls at the top ask for."""

from __future__ import annotations

from app.components.choices import has_heads, is_imported
from app.components.layout import page_header, presentation
from app.sections.interpolation import (
    aligned_download,
    ask,
    barrier_matrix,
    curvature_along_line,
    curved_path,
    curves,
    different_widths,
    merge_operators,
    spawned_children,
)
from landscape.models.zoo import ZOO

page_header(
    "Interpolation curves",
    "Loss and accuracy of θ(λ) = λ·θ_A + (1−λ)·π(θ_B), with π found by the chosen matching "
    "method under the chosen symmetry group. λ = 1 is A, λ = 0 is the aligned B (the "
    "endpoints are marked in each curve's own marker). Lines are means over the selected "
    "pairs; bands span their range. For transformers the line can be straight in the weights "
    "(the model's own factors W_Q, W_K, …) or in the circuits (every head rewritten as its "
    "products QKᵀ and VO, which average differently): two paths between the same two "
    "functions.",
)

asked = ask()  # the controls; the page stops here until a pair and a method are chosen
curves(asked)  # the figure, then the barrier table
barrier_matrix(asked)
merge_operators(asked)
curved_path(asked)
curvature_along_line(asked)
if asked.name in ZOO:  # a zoo run is trained again with snapshots
    spawned_children(asked)
if not presentation():
    aligned_download(asked)
if has_heads(asked.name) and not is_imported(asked.name):  # narrow versions of a zoo model
    different_widths(asked)
