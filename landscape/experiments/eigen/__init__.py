"""Eigenangles of the residual-stream rotations: the angles and their Haar reference
(:mod:`.angles`), and the Eigenangles page's result for a pair, cached as one small entry
(:mod:`.view`).
"""

from __future__ import annotations

from landscape.experiments.eigen.angles import (
    angle_summary,
    det_sign,
    eigenangles,
    haar_draws,
    haar_orthogonal,
    haar_reference,
    orthogonal_eigenangles,
)
from landscape.experiments.eigen.view import (
    eigenangle_result,
    eigenangle_view,
    pair_angles,
)

__all__ = [
    "eigenangles",
    "orthogonal_eigenangles",
    "haar_orthogonal",
    "det_sign",
    "angle_summary",
    "haar_draws",
    "haar_reference",
    "pair_angles",
    "eigenangle_result",
    "eigenangle_view",
]
