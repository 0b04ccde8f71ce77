"""What this machine measured, for the cost of the next run (``app.components.long_runs``'s
``ask_first``): kept per server process, read and written through the functions here."""

from __future__ import annotations

import functools
from dataclasses import dataclass
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


# ---------------------------------------------------------------- the shipped results' times
# Learned matching's cost before anything was measured here: the shipped Eigenangles results
# (assets/results) keep the seconds their computation took where they were built, learned
# matching of their pair included. Their index's ``seconds`` is not used: a build that found the
# matching already stored took seconds where the matching had taken minutes.


@dataclass(frozen=True)
class Borrowed:
    """An estimate not measured here: ``seconds``, said with ``about`` ("about", "under about",
    "over") and ``basis``, what it was measured on."""

    seconds: float
    about: str
    basis: str


@functools.cache
def shipped_learned() -> dict[str, tuple[tuple[int, ...], float]]:
    """The seconds each shipped Eigenangles result with learned matching took to compute where
    the shipped results were built, by model: ``(seeds, seconds)`` (the slowest where a model
    has several)."""
    from landscape.store.cache import Cache, shipped_digests

    cache, out = Cache(), {}
    for name in shipped_digests():
        kind, _, key = name.partition("/")
        entry = cache.shipped_entry(kind, key) if kind == "eigenangles" else None
        meta = entry.meta if entry is not None else {}
        if meta.get("lm_curve") and meta.get("seconds"):
            seeds, seconds = tuple(meta["seeds"]), float(meta["seconds"])
            if seconds > out.get(meta["model"], ((), 0.0))[1]:
                out[meta["model"]] = (seeds, seconds)
    return out


def _work(model: str) -> float | None:
    """Parameters times the positions one step of learned matching runs them on (its forward
    and backward passes grow with both, its steps are the same for every model); None for a
    model outside the zoo."""
    from landscape.matching.learning import BATCH_ROWS, BATCH_TOKENS
    from landscape.models.params import count_params
    from landscape.models.registry import architecture_of
    from landscape.models.zoo import ZOO

    entry = ZOO.get(model)
    if entry is None:
        return None
    cfg = entry.config
    tokens = architecture_of(cfg).inputs == "tokens"
    return count_params(cfg) * (BATCH_TOKENS if tokens else BATCH_ROWS * max(cfg.n_ctx, 1))


BUILT = "where the shipped results were built (another machine)"


def borrowed_learned(model: str) -> Borrowed | None:
    """Learned matching's cost on a pair of ``model`` from the shipped results' times, where
    nothing was measured here: that model's own shipped pair; else, bounded by the zoo model of
    nearest work per step (:func:`_work`) with a time shipped, a larger one (under its time) or,
    when none is larger, a smaller one (over its time). None when none tells. A bound is as good
    as the shipped times are steady: they were measured on one machine under its load of the
    day."""
    shipped = shipped_learned()
    if model in shipped:
        seeds, seconds = shipped[model]
        pair = " ↔ ".join(map(str, seeds))
        return Borrowed(seconds, "about", f"as long as learned matching of seeds {pair} of "
                                          f"{model} took {BUILT}")  # fmt: skip
    work = _work(model)
    # (work, minus seconds, name): of models of equal work, a bound from above takes the
    # slowest one's time, a bound from below the quickest one's
    sized = [(w, -shipped[name][1], name) for name in shipped if (w := _work(name)) is not None]
    if work is None or not sized:
        return None
    larger = [s for s in sized if s[0] >= work]
    _, _, name = min(larger) if larger else max(sized)
    seconds = shipped[name][1]
    size = "a larger model" if larger else "a smaller model"
    return Borrowed(seconds, "under about" if larger else "over",
                    f"learned matching of {name}, {size}, took that long {BUILT}")  # fmt: skip
