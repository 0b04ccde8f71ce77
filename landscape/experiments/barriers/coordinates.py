"""The coordinates in which a barrier's line is straight: the processed pair as matched
(:data:`PROCESSED`), others that rewrite the matched pair (:class:`Coordinates`), and the same
coordinates in the circuits merge space (:func:`in_space`), with the function checks of the
rewrite (:func:`unfolded_checks`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import Aligned
from landscape.matching import function_check
from landscape.matching.result import check_dtype
from landscape.models import ModelConfig, Params
from landscape.models.circuits import check_space, circuit_forms
from landscape.models.zoo import Checkpoint

Unfold = Callable[[Checkpoint, Checkpoint, Aligned], tuple[ModelConfig, Params, Params]]


@dataclass(frozen=True)
class Coordinates:
    """The coordinates in which a barrier's line is straight.

    ``name`` goes into results and cache keys; ``unfold(a, b, aligned) -> (cfg, A, π(B))``
    rewrites the matched pair in them (None: the processed pair as matched). The original
    coordinates of the checkpoints are ``landscape.experiments.barriers.controls.ORIGINAL``.
    ``space``
    is the merge space (``landscape.models.circuits``): ``"weights"``, the model's own factors,
    or ``"circuits"``, every head rewritten as its full QK and OV circuits (:func:`in_space`).
    """

    name: str
    unfold: Unfold | None = None
    space: str = "weights"

    @property
    def key(self) -> str:
        """The name in cache keys (weights-space keys are the names alone, as before spaces)."""
        return self.name if self.space == "weights" else f"{self.name}/{self.space}"


PROCESSED = Coordinates("processed")


def unfolded_checks(
    coordinates: Coordinates, a: Checkpoint, b: Checkpoint, al: Aligned
) -> dict[str, float]:
    """Both endpoints written in ``coordinates`` against the checkpoints, max |Δlogits|.

    Whether the rewrite keeps each function, so it is done from float64 copies and evaluated in
    float64 (:func:`landscape.matching.result.check_dtype`; see ``circuit_checks``). What the
    float32 line is then evaluated on is the same rewrite, rounded once more.
    """
    dtype = check_dtype(a.params)

    def cast(p: Params) -> Params:
        return {k: v.to(dtype) for k, v in p.items()}

    a_, b_ = replace(a, params=cast(a.params)), replace(b, params=cast(b.params))
    al_ = replace(al, params_a=cast(al.params_a), params_b=cast(al.params_b))
    cfg, pa, pb = coordinates.unfold(a_, b_, al_)
    return {"a": function_check(a.cfg, a_.params, cfg, pa, dtype),
            "b": function_check(b.cfg, b_.params, cfg, pb, dtype)}  # fmt: skip


def in_space(coordinates: Coordinates, space: str) -> Coordinates:
    """``coordinates`` in merge space ``space``: for ``"circuits"``, both endpoints in these
    coordinates, then rewritten together for the circuits space (``circuit_forms``: the same
    functions, the line averages QKᵀ and VO instead of the factors)."""
    check_space(space)
    if space == coordinates.space:
        return coordinates
    if coordinates.space != "weights":
        raise LandscapeError(f"{coordinates.name} coordinates are already in {coordinates.space}")
    inner = coordinates.unfold

    def unfold(a: Checkpoint, b: Checkpoint, al: Aligned) -> tuple[ModelConfig, Params, Params]:
        cfg, pa, pb = (al.cfg, al.params_a, al.params_b) if inner is None else inner(a, b, al)
        cfg_c, (ca, cb) = circuit_forms(cfg, [pa, pb])
        return cfg_c, ca, cb

    return Coordinates(coordinates.name, unfold, space)
