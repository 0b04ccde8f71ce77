"""Every Streamlit cache wrapper of the app, one module per kind of result (docs/design.md §2).

Models go in ``st.cache_resource`` and are never mutated; results in ``st.cache_data``. The
library's disk cache sits underneath, so a restart or a second user sees results at once; the
in-memory layer makes a rerun with the same controls free. Arguments prefixed with ``_`` (progress
callbacks) are not hashed. The pages reach the library through the names re-exported here:

- ``stored``: ``stored_else_computed``, how a wrapper reads a result, else computes it;
- ``models``: the zoo and imported families, checkpoints, data, the disk cache's size;
- ``barriers``: barriers along lines and paths between two models;
- ``planes``: the triangle through three models and the loss surfaces;
- ``symmetries``: eigenangles, the atlas, the gauge sweep's parts, the transport table;
- ``timings``: what this machine measured, for the cost of the next run;
- ``report``: the session's figures, for the export report.
"""

from app.state.barriers import (
    ablation,
    barrier,
    curve,
    iterations,
    iterations_seconds,
    merges,
    narrow_stored,
    spawn,
    widths,
)
from app.state.models import (
    cache_info,
    checkpoint,
    clear_memory_caches,
    data_problem,
    default_threads,
    family_metrics,
    family_problems,
    home_curves,
    symmetry_audit,
    zoo_status,
)
from app.state.planes import compute_surface, surface, triangle
from app.state.report import (
    FIGURES,
    LATEST,
    PAGE,
    REPORT_LIMIT,
    figure_identity,
    figure_registry,
    on_page,
    page_title,
    register_figure,
    session_figures,
)
from app.state.stored import stored_else_computed
from app.state.symmetries import (
    atlas,
    compute_atlas,
    compute_eigenangles,
    compute_gauge_part,
    compute_transport_table,
    eigenangles,
    gauge_part,
    transport_table,
)
from app.state.timings import (
    expected,
    grid_seconds,
    learned_seconds,
    measured,
    measured_grid,
    measured_learned,
    measured_triangle,
    triangle_aligned,
)
from landscape.store.cache import NotCached

__all__ = [
    "FIGURES",
    "LATEST",
    "PAGE",
    "REPORT_LIMIT",
    "NotCached",
    "ablation",
    "atlas",
    "barrier",
    "cache_info",
    "checkpoint",
    "clear_memory_caches",
    "compute_atlas",
    "compute_eigenangles",
    "compute_gauge_part",
    "compute_surface",
    "compute_transport_table",
    "curve",
    "data_problem",
    "default_threads",
    "eigenangles",
    "expected",
    "family_metrics",
    "family_problems",
    "figure_identity",
    "figure_registry",
    "gauge_part",
    "grid_seconds",
    "home_curves",
    "iterations",
    "iterations_seconds",
    "learned_seconds",
    "measured",
    "measured_grid",
    "measured_learned",
    "measured_triangle",
    "merges",
    "narrow_stored",
    "on_page",
    "page_title",
    "register_figure",
    "session_figures",
    "spawn",
    "stored_else_computed",
    "surface",
    "symmetry_audit",
    "transport_table",
    "triangle",
    "triangle_aligned",
    "widths",
    "zoo_status",
]
