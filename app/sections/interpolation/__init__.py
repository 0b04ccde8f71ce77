"""The Interpolation page's sections, one module each, in the order the page draws them: each a
function given what the page's controls ask for (:class:`Asked`).

- ``asked``: the controls, and what they ask for;
- ``curves``: the curves of every chosen method and pair, one figure;
- ``table``: their barrier table;
- ``matrix``: the barrier matrix of every pair of some seeds;
- ``merges``: mergekit's merge operators beside the line;
- ``curved``: a trained curve beside the line;
- ``curvature``: the Hessian's top eigenvalue and trace along the line, beside its loss;
- ``spawn``: children spawned from a parent's snapshot;
- ``download``: the aligned model, as a zip;
- ``widths``: A against narrower versions of B.
"""

from app.sections.interpolation.asked import Asked, ask
from app.sections.interpolation.curvature import curvature_along_line
from app.sections.interpolation.curved import curved_path
from app.sections.interpolation.curves import curves
from app.sections.interpolation.download import aligned_download
from app.sections.interpolation.matrix import barrier_matrix
from app.sections.interpolation.merges import merge_operators
from app.sections.interpolation.spawn import spawned_children
from app.sections.interpolation.widths import different_widths

__all__ = [
    "Asked",
    "aligned_download",
    "ask",
    "barrier_matrix",
    "curvature_along_line",
    "curved_path",
    "curves",
    "different_widths",
    "merge_operators",
    "spawned_children",
]
