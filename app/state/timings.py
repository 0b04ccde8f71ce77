"""What this machine measured, for the cost of the next run (``app.components.long_runs``'s
``ask_first``): kept per server process, read and written through the functions here."""

from __future__ import annotations

from typing import Any

from landscape.device import resolve_device

# seconds per grid point of a triangle or surface, by (model, split, space, device), from the
# grids evaluated here; and the triangles whose corners were aligned, by (model, seeds, method,
# group, space, joint): a grid of another size reuses their matchings.
GRID_SECONDS: dict[tuple, float] = {}
TRIANGLES_ALIGNED: set[tuple] = set()
# seconds learned matching took on a pair of a model here, by (model, device): from the
# Interpolation page's learned curves and the Eigenangles page's learned results
LEARNED_SECONDS: dict[tuple, float] = {}


# and the seconds per unit of the other long runs here, by (kind, model, device): "atlas" per
# checkpoint placed (by projection too), "curve" per training step of one curve, "merge" per
# merged point, "rounds" the barrier per round of a pair (by learned too), "curvature" per
# Hessian-vector product (its points' seconds, the matching left out)
RUN_SECONDS: dict[tuple, float] = {}


def measured(kind: str, *key: Any, seconds: float | None, units: float = 1) -> None:
    """Remember that ``units`` of a ``kind`` of run (keyed by ``key``) took ``seconds`` here."""
    if seconds is not None and seconds > 0 and units > 0:
        RUN_SECONDS[(kind, *map(str, key))] = float(seconds) / units


def expected(kind: str, *key: Any, units: float = 1) -> float | None:
    """The seconds ``units`` of a ``kind`` of run should take here (:func:`measured`), None
    when none was measured."""
    each = RUN_SECONDS.get((kind, *map(str, key)))
    return None if each is None else each * units


def measured_learned(model: str, device: str | None, seconds: float | None) -> None:
    """Remember how long learned matching took on a pair of ``model`` here."""
    if seconds is not None and seconds > 0:
        LEARNED_SECONDS[model, str(device)] = float(seconds)


def measured_triangle(r: dict[str, Any], device: str | None, joint: bool) -> None:
    """Remember what triangle result ``r`` says of this machine (:data:`GRID_SECONDS`)."""
    TRIANGLES_ALIGNED.add((r["model"], tuple(r["seeds"]), r["method"], r["group"], r["space"],
                           joint))  # fmt: skip
    n = len(r.get("points") or [])
    if (
        r.get("eval_seconds") is not None
        and n
        and r.get("eval_device") == str(resolve_device(device))
    ):
        GRID_SECONDS[r["model"], r["split"], r["space"], str(device)] = r["eval_seconds"] / n


def grid_seconds(model: str, split: str, space: str, device: str | None) -> float | None:
    """The seconds per grid point of ``model`` measured here (:data:`GRID_SECONDS`), None when
    no grid of it was evaluated on this split, space and device."""
    return GRID_SECONDS.get((model, split, space, str(device)))


def measured_grid(model: str, split: str, space: str, device: str | None,
                  seconds_per_point: float) -> None:  # fmt: skip
    """Remember the seconds per grid point a grid of ``model`` took here."""
    GRID_SECONDS[model, split, space, str(device)] = seconds_per_point


def triangle_aligned(model: str, seeds: tuple[int, ...], method: str, group: str, space: str,
                     joint: bool) -> bool:  # fmt: skip
    """Whether a triangle of these seeds was aligned here, so that a grid of another size
    reuses its matchings (:data:`TRIANGLES_ALIGNED`)."""
    return (model, seeds, method, group, space, joint) in TRIANGLES_ALIGNED


def learned_seconds(model: str, device: str | None) -> float | None:
    """The seconds learned matching took on a pair of ``model`` here, None when never run."""
    return LEARNED_SECONDS.get((model, str(device)))
