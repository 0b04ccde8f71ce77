"""Pure figure builders: ``figure_x(result) -> plotly.graph_objects.Figure``.

The app, the CLI export and the README images all use these, so a figure looks the same
everywhere. One module per app page (``home``, ``models``, ``interpolation``, ``triangle``,
``eigenangles``, ``atlas``, ``gauge``), one theme (:mod:`.theme`), one declaration of every result
field the figures read (:mod:`.fields`), and file export (:mod:`.export`, imported on use: it
drives a headless browser).
"""

from __future__ import annotations

from landscape.plots.atlas import figure_atlas
from landscape.plots.eigenangles import (
    PI_TICKS,
    figure_checkpoint_barriers,
    figure_eigenangles,
    figure_lm_curve,
    figure_objective,
    figure_round_barriers,
)
from landscape.plots.gauge import (
    GAUGE_LABEL,
    INVALID_COLOUR,
    LOG_FLOOR,
    RECOVERY_SERIES,
    SOURCE_STYLE,
    TRANSPORT_MODES,
    VALID_COLOUR,
    figure_claims,
    figure_recovery,
    figure_scramble,
    figure_symmetry_check,
    figure_trajectory,
    figure_transport,
)
from landscape.plots.home import SYMMETRY_LEVELS, figure_symmetry_levels
from landscape.plots.interpolation import figure_interpolation, figure_widths
from landscape.plots.models import figure_training_curves, figure_zoo_overview
from landscape.plots.surface import figure_surface
from landscape.plots.theme import PALETTE, apply_theme
from landscape.plots.triangle import figure_triangles

__all__ = [
    "GAUGE_LABEL",
    "INVALID_COLOUR",
    "LOG_FLOOR",
    "PALETTE",
    "PI_TICKS",
    "RECOVERY_SERIES",
    "SOURCE_STYLE",
    "SYMMETRY_LEVELS",
    "TRANSPORT_MODES",
    "VALID_COLOUR",
    "apply_theme",
    "figure_atlas",
    "figure_claims",
    "figure_checkpoint_barriers",
    "figure_eigenangles",
    "figure_round_barriers",
    "figure_interpolation",
    "figure_widths",
    "figure_lm_curve",
    "figure_objective",
    "figure_recovery",
    "figure_scramble",
    "figure_surface",
    "figure_symmetry_check",
    "figure_symmetry_levels",
    "figure_training_curves",
    "figure_trajectory",
    "figure_transport",
    "figure_triangles",
    "figure_zoo_overview",
]
