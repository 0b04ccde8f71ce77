"""Tables over pairs: which pairs of seeds, mean ± standard error of their barriers, and the
methods × groups grid of the paper's Table 2 (``landscape table``; controls build on it).

Every barrier comes from the one pipeline (:func:`landscape.experiments.barriers.pipeline.barrier`),
so a table is a view of cached barriers: rerunning it, or asking for one of its cells on another
page, reads them from disk.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from landscape.budget import check_points
from landscape.errors import LandscapeError
from landscape.experiments import sweeps
from landscape.experiments.barriers.pipeline import BARRIER, measure_barrier
from landscape.experiments.barriers.request import seeds_request
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.fields import Fields
from landscape.matching import METHODS_BY_NAME, worst_check
from landscape.models.circuits import SPACES, check_space
from landscape.models.registry import architecture
from landscape.progress import tell, within
from landscape.sources import available_seeds, model_arch, model_config
from landscape.store.cache import Cache


def pairs_for(model: str, n: int, seeds: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """N pairs of seeds: disjoint consecutive pairs when there are enough seeds, else all pairs.

    Seeds default to the shipped/cached ones (a family's members; at least 2·N of them when
    available).
    """
    if n < 1:
        raise LandscapeError("--pairs must be at least 1")
    if seeds is None:
        seeds = [r["seed"] for r in available_seeds(model)]
        if len(seeds) < 2:
            seeds = list(range(max(2, 2 * n)))
    seeds = list(seeds)
    if 2 * n <= len(seeds):
        return [(seeds[2 * i], seeds[2 * i + 1]) for i in range(n)]
    combos = list(itertools.combinations(seeds, 2))
    if n > len(combos):
        raise LandscapeError(f"{len(seeds)} seeds give only {len(combos)} pairs; asked for {n}")
    return combos[:n]


def mean_sem(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


# What the summary of several pairs' barriers holds (landscape.fields): what
# :func:`summarise_barriers` writes, the part of a table's row (and an ablation's or a control's
# cell) that it makes.
SUMMARY = Fields("barrier summary over pairs",
                 ("barrier_loss", "barrier_loss_sem", "barrier_accuracy", "barrier_accuracy_sem",
                  "per_pair_loss", "function_check", "function_ok", "warnings"))  # fmt: skip


def summarise_barriers(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± standard error of the loss and accuracy barriers of several pairs' results
    (barrier results, :data:`~landscape.experiments.barriers.pipeline.BARRIER`): a
    :data:`SUMMARY`.

    Nothing NaN is dropped: a NaN barrier makes the mean NaN, a NaN function check makes
    ``function_check`` NaN; ``function_ok`` holds only if it holds for every pair, and
    ``warnings`` collects every pair's warnings.
    """
    R = BARRIER.read
    losses = [R(r, "barrier_loss") for r in results]
    bl = mean_sem(losses)
    ba = mean_sem([R(r, "barrier_accuracy") for r in results])
    return {
        "barrier_loss": bl[0],
        "barrier_loss_sem": bl[1],
        "barrier_accuracy": ba[0],
        "barrier_accuracy_sem": ba[1],
        "per_pair_loss": losses,
        "function_check": worst_check(R(r, "function_check") for r in results),
        # a record without a check's verdict or warnings (a bare curve's) has none to add
        "function_ok": all(r.get("function_ok", True) for r in results),
        "warnings": list(dict.fromkeys(w for r in results for w in r.get("warnings", []))),
    }


# What a table holds (landscape.fields): what :func:`table` writes, and what the command's
# summary reads. ``left_out`` only when some row's method does not align the model,
# ``learned_options`` only when learned matching's settings were said.
TABLE = Fields("table result",
               ("model", "split", "space", "spaces", "paper", "pairs", "rows", "function_ok",
                "warnings"),
               {"left_out": (), "learned_options": None})  # fmt: skip
# one row of ``rows``: a method under a group in one merge space, its :data:`SUMMARY` over the
# pairs, the mean matching seconds and the paper's number (:func:`paper_value`, "" if none)
TABLE_ROW = Fields("table row",
                   ("method", "group", "space", *SUMMARY.required, "matching_seconds",
                    "paper"))  # fmt: skip
# one of ``left_out`` (:func:`fitting_rows`)
LEFT_OUT = Fields("table row left out", ("method", "group", "reason"))

DEFAULT_ROWS = (("naive", "perm"), ("activation", "perm"), ("weight", "perm"),
                ("weight", "orth"), ("learned", "perm"), ("learned", "orth"))  # fmt: skip

# The numbers a table is read against: the test-loss barriers the generalized-LMC paper reports
# for independently trained ViTs and GPT-2 (its Table 2, ranges over its data sets). Its merge is
# the circuits space's line.
PAPER_REFERENCE = {
    "source": "generalized LMC for transformers, Table 2: test-loss barriers, circuits space",
    "naive": "1.69–2.84",
    "weight": "0.34–0.69",
    "learned/orth": {"ViT": "0.00", "GPT-2, Tiny Shakespeare": "0.02"},
}


def paper_value(method: str, group: str, arch: str = "") -> str:
    """The paper's number for a table row, as :data:`PAPER_REFERENCE` states it ("" where it
    reports none). Its weight-matching range is for weight matching as such, not per group; its
    learned rotations are 0.00 for ViTs and 0.02 for GPT-2 (``arch`` ``"vit"``/``"gpt"`` picks
    one, else both are given)."""
    ref = PAPER_REFERENCE
    if isinstance(ref.get(method), str):  # a row of the paper for the method as such
        return ref[method]
    if (method, group) == ("learned", "orth"):
        vit, gpt = ref["learned/orth"].values()
        return {"vit": vit, "gpt": gpt}.get(arch, f"{vit} (ViT), {gpt} (GPT-2)")
    return ""


@dataclass(frozen=True)
class TableOptions:
    """What a table measures and how its cells are spread: its ``rows`` (method, group), on A's
    ``split`` at ``points`` values of λ, over the pairs of ``seeds`` (None: the model's first),
    in merge ``space`` (or ``"both"``); ``learned_options``: learned matching's settings, for
    the learned rows only; ``executor`` (``"local"`` or ``"ray"``, at ``address``)."""

    rows: Sequence[tuple[str, str]] = DEFAULT_ROWS
    split: str = "test"
    points: int = 25
    seeds: Sequence[int] | None = None
    space: str = "weights"
    learned_options: dict[str, Any] | None = None
    executor: str = "local"
    address: str | None = None


@in_context
def table(
    model: str,
    pairs: int = 3,
    options: TableOptions = TableOptions(),
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """Table-2-style grid: rows method × group, mean ± standard error over pairs, every barrier
    along the straight line in merge ``space`` (``experiments.barriers.coordinates.in_space``), or
    ``"both"``:
    every row in the weights and then in the circuits space (models without heads have only
    the weights). Each row carries the paper's number for it (:func:`paper_value`).

    ``executor="ray"`` computes the cells as Ray tasks (on the cluster at ``address``, else a
    local one) and stores them in ``cache`` first (:mod:`landscape.experiments.sweeps`); the
    table is then assembled from the cache as in the serial run. ``function_ok`` and
    ``warnings`` (also per row) gather those of every barrier. Rows whose method does not
    align the model (:func:`fitting_rows`) are named in ``left_out``. ``learned_options``
    (learned matching's keywords, e.g. ``steps``) go to the learned rows only and are said in
    the result's ``learned_options``. Options: :class:`TableOptions`.
    """
    o = options
    rows, split, points, seeds, space = o.rows, o.split, o.points, o.seeds, o.space
    executor, address, learned_options = o.executor, o.address, o.learned_options
    device, cache, progress = context.device, context.cache, context.progress
    sweeps.check_executor(executor, address)
    check_points(points)
    spaces = table_spaces(model, space)
    pair_list = pairs_for(model, pairs, seeds)
    rows, left_out = fitting_rows(model, rows, pair_list[0][0])
    if executor == "ray":
        cells = [sweeps.Call(_barrier_cell, (model, pair, method, group, space_, points, split,
                                             _options(method, learned_options)),
                             kinds=("barrier",),
                             what=f"the table cell {method}/{group} {pair[0]}-{pair[1]}")
                 for (method, group), space_ in itertools.product(rows, spaces)
                 for pair in pair_list]  # fmt: skip
        sweeps.run(cells, cache or Cache(), address=address, stage="ray cells",
                   progress=within(progress, 0.0, 0.9))  # fmt: skip
        progress = within(progress, 0.9, 1.0)
    arch = model_arch(model)
    out_rows = []
    total = len(rows) * len(pair_list) * len(spaces)
    done = 0
    # rows in order, each in every space: weights then circuits under a method, as the paper reads
    for (method, group), space_ in itertools.product(rows, spaces):
        results = []
        for sa, sb in pair_list:
            stage = f"{method}/{group} {sa}-{sb}"
            # within one barrier too, e.g. the steps of learned matching
            sub = within(progress, done / total, (done + 1) / total, f"{stage} ")
            options = _options(method, learned_options)
            req = seeds_request(model, (sa, sb), method, group, points=points, split=split,
                                space=space_, options=options)  # fmt: skip
            run = measure_barrier(req, device=device, cache=cache, progress=sub)
            results.append(run.to_seeds_dict())
            done += 1
            tell(progress, stage, done, total)
        out_rows.append({
            "method": method,
            "group": group,
            "space": space_,
            **summarise_barriers(results),
            "matching_seconds": sum(BARRIER.read(r, "matching_seconds")
                                    for r in results) / len(results),
            "paper": paper_value(method, group, arch),
        })  # fmt: skip
    warnings = list(dict.fromkeys(w for r in out_rows for w in TABLE_ROW.read(r, "warnings")))
    out = {"model": model, "split": split, "space": space, "spaces": list(spaces),
           "paper": PAPER_REFERENCE, "pairs": [list(p) for p in pair_list],
           "rows": out_rows, "function_ok": not warnings, "warnings": warnings}  # fmt: skip
    if left_out:
        out["left_out"] = left_out
    if learned_options:
        out["learned_options"] = dict(learned_options)
    return out


def fitting_rows(model: str, rows: Sequence[tuple[str, str]], seed: int = 0,
                 ) -> tuple[list[tuple[str, str]], list[dict[str, str]]]:  # fmt: skip
    """The ``rows`` whose method aligns ``model`` (its config; a family's member ``seed``), and
    those left out, each with the reason: a method not built for a mixture of experts
    (``MatchingMethod.experts``) has no row of one. An unknown method is kept, for the barrier
    to refuse."""
    cfg = model_config(model, seed)
    kept, left_out = [], []
    for method, group in rows:
        entry = METHODS_BY_NAME.get(method)
        if entry is None or entry.fits(cfg):
            kept.append((method, group))
        else:
            left_out.append(
                {
                    "method": method,
                    "group": group,
                    "reason": f"{entry.title} is not built for mixtures of experts",
                }
            )
    if not kept:
        raise LandscapeError(f"no row of the table aligns {model}: "
                             f"{', '.join(f'{m}/{g}' for m, g in rows)}")  # fmt: skip
    return kept, left_out


def _options(method: str, learned_options: dict[str, Any] | None) -> dict[str, Any] | None:
    """The matching settings of a row: the learned settings for learned rows, else none."""
    entry = METHODS_BY_NAME.get(method)  # an unknown one is refused by the barrier
    return (learned_options or None) if entry is not None and entry.learned else None


def _barrier_cell(model: str, seeds: tuple[int, int], method: str, group: str, space: str,
                  points: int, split: str, options: dict[str, Any] | None, *,
                  cache: Cache) -> None:  # fmt: skip
    """On a worker: one cell of a table, measured into ``cache`` (its barrier entry is what the
    driver needs)."""
    measure_barrier(seeds_request(model, seeds, method, group, points=points, split=split,
                                  space=space, options=options), cache=cache)  # fmt: skip


def table_spaces(model: str, space: str) -> tuple[str, ...]:
    """The merge spaces a table of ``model`` is measured in: ``space``, or for ``"both"`` the
    weights and, when the model has attention heads, the circuits."""
    if space != "both":
        check_space(space)
        return (space,)
    return SPACES if architecture(model_arch(model)).attention else ("weights",)
