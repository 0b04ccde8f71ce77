"""The Eigenangles page's result as one small cached entry (docs/design.md §4).

:func:`~landscape.experiments.runs.eigenangle_result` reads its two matchings from the cache,
and a matching entry holds the aligned pair (two models' weights): too large to ship, and a
page that reads it loads both models' weights to take a few hundred angles from them.
:func:`eigenangle_view` stores what the page draws (the angles of O_WM and of the learned
correction, their summaries, the weight-matching objective, the learned training curve) as an
entry of its own, kind ``eigenangles``, without tensors, so the zoo's default views can ship it
(``python -m landscape.assets --results``). Its key holds what the result depends on: both
checkpoints' weights, the configuration, the training data when learned matching runs, the
Haar reference's draws, and the matching's ``ALGO_VERSION``, so a change of any of them is a
miss, never a stale figure. The Haar reference (its angles and their summary) depends on the
width alone and is recomputed on read (:func:`~landscape.experiments.eigen.haar_reference`,
memoised per process), not stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.experiments.eigen import HAAR_SEED, angle_summary, haar_draws, haar_reference
from landscape.experiments.runs import ALGO_VERSION, eigenangle_result, load
from landscape.progress import Progress
from landscape.sources import data_of
from landscape.store.cache import Cache, digest_tensors

EIGENVIEW_VERSION = 1  # bump when the stored fields change
# recomputed on read: a property of the width (HAAR_ANGLES floats), not of the pair
_NOT_STORED = ("angles_haar", "summary_haar")


def eigenangle_view(
    model: str,
    seeds: Sequence[int],
    *,
    learned: bool = True,
    device: torch.device = CPU,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """:func:`~landscape.experiments.runs.eigenangle_result`, cached as one entry of kind
    ``eigenangles`` (module docstring); ``cached`` says whether that entry was read."""
    if len(seeds) != 2:
        raise LandscapeError("eigenangles needs two seeds: --seeds A B")
    cache = cache or Cache()
    a, b = load(model, seeds[0], device), load(model, seeds[1], device)
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
        out = eigenangle_result(model, seeds, learned=learned, device=device, cache=cache,
                                progress=progress)  # fmt: skip
        return {}, {k: v for k, v in out.items() if k not in (*_NOT_STORED, "cached")}

    entry, hit = cache.get_or_compute("eigenangles", inputs, compute)
    out = dict(entry.meta)
    haar = haar_reference(out["d_model"])
    out["angles_haar"] = [float(x) for x in haar]
    out["summary_haar"] = angle_summary(haar)
    out["cached"] = hit
    return out
