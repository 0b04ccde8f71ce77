"""The pages' one way to the library: every Streamlit cache wrapper of the app (docs/design.md
§2), and every call that computes or changes what is stored, one module per kind of result.

Models go in ``st.cache_resource`` and are never mutated; results in ``st.cache_data``. The
library's disk cache sits underneath, so a restart or a second user sees results at once; the
in-memory layer makes a rerun with the same controls free. Arguments prefixed with ``_`` (progress
callbacks) are not hashed. The pages reach the library through the names re-exported here:

- ``stored``: ``stored_else_computed``, how a wrapper reads a result, else computes it;
- ``models``: the zoo and imported families, checkpoints, data, the disk cache; training a
  seed, importing or removing a family, clearing the cache;
- ``barriers``: barriers along lines and paths between two models, the curvature along the
  line, the barrier matrix, the aligned model's download;
- ``helpers``: what loads no model and computes nothing (requests, pairs, result rows);
- ``planes``: the triangle through three models and the loss surfaces;
- ``symmetries``: eigenangles, the atlas, the gauge sweep's parts, the transport table;
- ``timings``: what this machine measured, for the cost of the next run;
- ``report``: the session's figures, for the export report.
"""

from app.state.barriers import (
    ablation,
    aligned_archive,
    barrier,
    barrier_matrix,
    curvature,
    curve,
    iterations,
    iterations_seconds,
    merges,
    narrow_stored,
    spawn,
    widths,
)
from app.state.helpers import (
    curve_rows,
    mean_sem,
    merge_rows,
    mergekit_installed,
    model_arch,
    pairs_for,
    paper_value,
    seeds_request,
    snapshot_every,
    trajectory_spacing,
    width_factors,
)
from app.state.models import (
    cache_info,
    checkpoint,
    clear_disk_cache,
    clear_memory_caches,
    compute_home_curves,
    data_problem,
    default_threads,
    family_data_note,
    family_metrics,
    family_problems,
    fetch_shakespeare,
    home_curves,
    import_family,
    remove_family,
    symmetry_audit,
    train_seed,
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
    Borrowed,
    borrowed_learned,
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
    "aligned_archive",
    "atlas",
    "barrier",
    "barrier_matrix",
    "cache_info",
    "checkpoint",
    "clear_disk_cache",
    "clear_memory_caches",
    "compute_atlas",
    "compute_eigenangles",
    "compute_gauge_part",
    "compute_home_curves",
    "compute_surface",
    "compute_transport_table",
    "curvature",
    "curve",
    "curve_rows",
    "data_problem",
    "default_threads",
    "eigenangles",
    "expected",
    "family_data_note",
    "family_metrics",
    "family_problems",
    "fetch_shakespeare",
    "figure_identity",
    "figure_registry",
    "gauge_part",
    "grid_seconds",
    "home_curves",
    "import_family",
    "iterations",
    "iterations_seconds",
    "learned_seconds",
    "borrowed_learned",
    "Borrowed",
    "mean_sem",
    "measured",
    "measured_grid",
    "measured_learned",
    "measured_triangle",
    "merge_rows",
    "mergekit_installed",
    "merges",
    "model_arch",
    "narrow_stored",
    "on_page",
    "page_title",
    "pairs_for",
    "paper_value",
    "register_figure",
    "remove_family",
    "seeds_request",
    "session_figures",
    "snapshot_every",
    "spawn",
    "stored_else_computed",
    "surface",
    "symmetry_audit",
    "train_seed",
    "trajectory_spacing",
    "transport_table",
    "triangle",
    "triangle_aligned",
    "width_factors",
    "widths",
    "zoo_status",
]
