"""The Eigenangles page's result as one small cached entry (docs/design.md §4).

:func:`eigenangle_result` reads its two matchings from the cache,
and a matching entry holds the aligned pair (two models' weights): too large to ship, and a
page that reads it loads both models' weights to take a few hundred angles from them.
:func:`eigenangle_view` stores what the page draws (the angles of O_WM and of the learned
correction, their summaries, the weight-matching objective, the learned training curve) as an
entry of its own, kind ``eigenangles``, without tensors, so the zoo's default views can ship it
(``python -m landscape.assets --results``). Its key holds what the result depends on: both
checkpoints' weights, the configuration, the training data when learned matching runs, the
Haar reference's draws, and the matching's ``ALGO_VERSION``, so a change of any of them is a
miss, never a stale figure. The Haar reference (its angles and their summary) depends on the
width alone and is recomputed on read (:func:`~landscape.experiments.eigen.angles.haar_reference`,
memoised per process), not stored.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import ALGO_VERSION, align
from landscape.experiments.barriers.endpoints import load
from landscape.experiments.context import RunContext
from landscape.experiments.eigen.angles import (
    HAAR_SEED,
    angle_summary,
    eigenangles,
    haar_draws,
    haar_reference,
)
from landscape.fields import Fields
from landscape.models.zoo import Checkpoint
from landscape.progress import Progress
from landscape.sources import data_of
from landscape.store.cache import Cache, digest_tensors
from landscape.threads import threaded

EIGENVIEW_VERSION = 1  # bump when the stored fields change
# recomputed on read: a property of the width (HAAR_ANGLES floats), not of the pair
_NOT_STORED = ("angles_haar", "summary_haar")

# What an eigenangle result holds (landscape.fields): what :func:`eigenangle_result` and
# :func:`eigenangle_view` write, and what the figures, the tidy tables, the Eigenangles page and
# the command's summary read. Each ``summary_*`` is an ANGLE_SUMMARY of its ``angles_*``.
EIGENANGLES = Fields("eigenangle result",
                     ("model", "seeds", "d_model", "angles_wm", "summary_wm", "angles_haar",
                      "summary_haar", "wm_objective", "lm_curve", "seconds", "cached"),
                     {  # without learned matching (the app's fast path): no correction series
                      "angles_correction": None, "summary_correction": None, "det_flip": None,
                      # always written now; results from before the averaged Haar reference
                      # (one draw) have none
                      "haar_draws": None,
                      # only ``landscape eigenangles --iterations``: its iterations result
                      # (landscape.experiments.barriers.iterations.ITERATIONS)
                      "iterations": None})  # fmt: skip
# a ``summary_*`` (:func:`~landscape.experiments.eigen.angles.angle_summary`)
ANGLE_SUMMARY = Fields("eigenangle summary",
                       ("share_small", "median_abs", "mean_abs", "n", "small"))  # fmt: skip
# one of ``lm_curve``: learned matching's merged training loss at a step
LM_STEP = Fields("learned-matching step", ("step", "loss"))


def _pair(model: str, seeds: Sequence[int], device: torch.device) -> tuple[Checkpoint, Checkpoint]:
    if len(seeds) != 2:
        raise LandscapeError("eigenangles needs two seeds: --seeds A B")
    return load(model, seeds[0], device), load(model, seeds[1], device)


def pair_angles(
    a: Checkpoint,
    b: Checkpoint,
    *,
    learned: bool = True,
    device: torch.device = CPU,
    cache: Cache,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The angles of :func:`eigenangle_result` for two loaded checkpoints (its fields but
    ``model``, ``seeds`` and ``seconds``)."""
    wm = align(a, b, "weight", "orth", context=RunContext(device, cache))
    o_wm = wm.resid.double()
    d = o_wm.shape[0]
    angles = {"angles_wm": eigenangles(o_wm)}
    lm = None
    if learned:
        lm = align(a, b, "learned", "orth", context=RunContext(device, cache, progress))
        angles["angles_correction"] = eigenangles(lm.resid.double() @ o_wm.T)
    angles["angles_haar"] = haar_reference(d)
    out: dict[str, Any] = {"d_model": d, "haar_draws": haar_draws(d)}
    for k, v in angles.items():
        out[k] = [float(x) for x in v]
        out[k.replace("angles_", "summary_")] = angle_summary(v)
    out["wm_objective"] = wm.info["objective"]
    out["lm_curve"] = lm.info["lm_curve"] if lm is not None else []
    if lm is not None:
        out["det_flip"] = lm.info["det_flips"]
    out["cached"] = wm.cached and (lm is None or lm.cached)
    return out


@threaded
def eigenangle_result(
    model: str,
    seeds: Sequence[int],
    *,
    learned: bool = True,
    device: torch.device = CPU,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Eigenangles of O_WM, of the correction O_LM·O_WMᵀ and the Haar reference: the pooled
    eigenangles of ``haar_draws`` seeded Haar-random O(d) matrices, the same for every pair of
    one width (:func:`~landscape.experiments.eigen.angles.haar_reference`).

    ``learned=False`` leaves out learned matching (minutes on a GPT): then only O_WM and the
    Haar reference, no ``angles_correction`` and an empty ``lm_curve``. ``progress`` follows
    learned matching step by step.
    """
    t0 = time.perf_counter()
    a, b = _pair(model, seeds, device)
    angles = pair_angles(a, b, learned=learned, device=device, cache=cache or Cache(),
                         progress=progress)  # fmt: skip
    cached = angles.pop("cached")
    out = {"model": model, "seeds": list(seeds), **angles}
    out["seconds"] = round(time.perf_counter() - t0, 4)
    out["cached"] = cached
    return out


def eigenangle_view(
    model: str,
    seeds: Sequence[int],
    *,
    learned: bool = True,
    device: torch.device = CPU,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """:func:`eigenangle_result`, cached as one entry of kind ``eigenangles`` (module
    docstring); ``cached`` says whether that entry was read. The pair is loaded once, for the
    key and, on a miss, for the angles."""
    cache = cache or Cache()
    a, b = _pair(model, seeds, device)
    d = a.cfg.d_model
    inputs: dict[str, Any] = {
        "a": digest_tensors(a.params),
        "b": digest_tensors(b.params),
        "cfg": a.cfg.to_dict(),
        "learned": learned,
        "haar": {"seed": HAAR_SEED, "draws": haar_draws(d)},
        "version": ALGO_VERSION,
        "view": EIGENVIEW_VERSION,
    }
    if learned:  # learned matching descends the merge loss on A's training data
        inputs["data"] = data_of(a).key

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        t0 = time.perf_counter()
        out = {"model": model, "seeds": list(seeds),
               **pair_angles(a, b, learned=learned, device=device, cache=cache,
                             progress=progress)}  # fmt: skip
        out["seconds"] = round(time.perf_counter() - t0, 4)
        return {}, {k: v for k, v in out.items() if k not in (*_NOT_STORED, "cached")}

    entry, hit = cache.get_or_compute("eigenangles", inputs, compute)
    out = dict(entry.meta)
    haar = haar_reference(out["d_model"])
    out["angles_haar"] = [float(x) for x in haar]
    out["summary_haar"] = angle_summary(haar)
    out["cached"] = hit
    return out
