"""The barrier along the way of matching: per weight-matching round, per learned checkpoint.

Weight matching is coordinate descent (:mod:`landscape.matching.weight`); after round r it holds
an element π_r per gauge variable (π_0 = identity). Learned matching scores its projected
transform every ``eval_every`` steps (:mod:`landscape.matching.learned`). For each of these
transforms the aligned B is built as every matching builds its result
(:func:`landscape.matching.result.finish`: π applied to B as processed, then function-checked),
and the line ``θ(λ) = λ·θ_A + (1−λ)·π(θ_B)`` is evaluated on A's data with the barriers

    B_loss = max_λ [ L(θ(λ)) − (λ·L_A + (1−λ)·L_B) ],
    B_acc  = max_λ [ (λ·acc_A + (1−λ)·acc_B) − acc(θ(λ)) ]

(:func:`landscape.experiments.basins.barrier_from_curve`). Two comparisons:

- **rounds**: rotations (``orth``, O(d) on the stream) against permutations (``perm``). Round 0
  is the naive barrier of that group's processing, the last round the weight-matching barrier
  (the same numbers as ``landscape barrier --method weight``). Every round up to
  :data:`FULL_ROUNDS` is measured, then every :data:`ROUND_STRIDE`-th and the last; the
  objective ``‖θ_A − π_r(θ_B)‖²`` is kept for every round.
- **checkpoints**: learned rotations started from weight matching against started from the
  identity. Step 0 of each is its start (the weight-matching or the naive barrier).

Each group and each start is one cache entry (kind ``"iterations"``), keyed by both endpoints'
weights, the configuration, the settings, A's data key and :data:`ITERATIONS_VERSION`.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from landscape.budget import check_points
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import ALGO_VERSION, learned_space
from landscape.experiments.barriers.endpoints import SPLITS
from landscape.experiments.barriers.pipeline import health
from landscape.experiments.basins import barrier_from_curve
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.evaluation import EvalOptions, check_finite_loss, evaluate_path
from landscape.fields import Fields
from landscape.matching import BARRIER_GROUPS, function_check, worst_check
from landscape.matching.learned import INITS, learned_matching
from landscape.matching.methods import MatchContext, Prepared, prepare_pair
from landscape.matching.result import MatchResult, circuit_checks, finish
from landscape.matching.weight import weight_matching
from landscape.models.circuits import check_circuit_form, check_space, circuit_forms
from landscape.models.zoo import Checkpoint
from landscape.progress import Progress, tell, within
from landscape.sources import Data, Source, check_same_architecture
from landscape.store.cache import Cache, digest_tensors
from landscape.symmetry import Element, Transform

ITERATIONS_VERSION = 2  # bump when what is measured per round or checkpoint changes
# 2: circuit-form checks in float64
FULL_ROUNDS = 10  # every round up to this one is measured ...
ROUND_STRIDE = 5  # ... then every ROUND_STRIDE-th, and the last
LEARNED_GROUP = "orth"  # learned matching learns the residual rotation (docs/design.md §1)
STEPS = 300  # learned matching's own default, so the final transform is the usual one
CHECKPOINTS = 6  # scoring points after the start: every STEPS / CHECKPOINTS steps


__all__ = ["FULL_ROUNDS", "ITERATIONS", "ITERATIONS_VERSION", "ITERATION_ROUND",
           "LEARNED_CHECKPOINT", "LEARNED_GROUP", "LEARNED_RUN", "ROUND_STRIDE", "WEIGHT_RUN",
           "IterationOptions", "iteration_barriers", "measured_rounds"]  # fmt: skip

# What an iterations result holds (landscape.fields): what :func:`iteration_barriers` writes, and
# what the figures, the tidy tables and the Eigenangles page read.
ITERATIONS = Fields("iterations result",
                    ("model", "seeds", "points", "learned_group", "rounds", "checkpoints",
                     "weight_matching", "learned_matching", "function_check", "function_check_a",
                     "function_ok", "warnings", "seconds", "cached", "device"),
                    # always written; a figure drawn from a record without them reads these
                    {"split": "test", "space": "weights"})  # fmt: skip
# one of ``rounds``: a measured round of weight matching under ``group`` (:func:`_rounds`)
ITERATION_ROUND = Fields("weight-matching round",
                         ("group", "round", "barrier_loss", "barrier_accuracy",
                          "lambda_peak_loss", "function_check", "objective"))  # fmt: skip
# one of ``checkpoints``: a scoring point of learned matching from ``init`` (:func:`_learned`)
LEARNED_CHECKPOINT = Fields("learned-matching checkpoint",
                            ("init", "step", "barrier_loss", "barrier_accuracy",
                             "lambda_peak_loss", "function_check", "train_merge_loss"),
                            # written on every checkpoint; absent (a row drawn by hand): not the
                            # one learned matching returns
                            {"selected": False})  # fmt: skip
# ``weight_matching[group]``: the run behind that group's rounds, without its rows
WEIGHT_RUN = Fields("weight-matching run",
                    ("objective", "rounds", "converged", "function_check_a", "matching_seconds",
                     "evaluation_seconds"))  # fmt: skip
# ``learned_matching[init]``: the run behind that init's checkpoints, without its rows
LEARNED_RUN = Fields("learned-matching run",
                     ("eval_every", "selected_step", "det_flips", "function_check_a",
                      "matching_seconds", "evaluation_seconds"))  # fmt: skip


def measured_rounds(rounds: int) -> list[int]:
    """The rounds 0…``rounds`` whose barrier is measured: all up to :data:`FULL_ROUNDS`, then
    every :data:`ROUND_STRIDE`-th, and the last."""
    keep = {r for r in range(rounds + 1) if r <= FULL_ROUNDS or r % ROUND_STRIDE == 0}
    return sorted(keep | {rounds})


def _check(seeds: Sequence[int], groups: Sequence[str], inits: Sequence[str],
           max_rounds: int | None, steps: int, checkpoints: int, points: int,
           split: str) -> None:  # fmt: skip
    if len(seeds) != 2:
        raise LandscapeError("iterations need two seeds: --seeds A B")
    for g in groups:
        if g not in BARRIER_GROUPS:
            known = ", ".join(BARRIER_GROUPS)
            raise LandscapeError(f"unknown group {g!r}; expected one of {known}")
    for i in inits:
        if i not in INITS:
            raise LandscapeError(f"unknown learned start {i!r}; expected one of {', '.join(INITS)}")
    if not groups and not inits:
        raise LandscapeError("iterations need a group to match or a learned start")
    if max_rounds is not None and max_rounds < 1:
        raise LandscapeError(f"--max-rounds must be at least 1, got {max_rounds}")
    if steps < 1:
        raise LandscapeError(f"learned matching needs at least 1 step, got {steps}")
    if checkpoints < 1:
        raise LandscapeError(f"--checkpoints must be at least 1, got {checkpoints}")
    if points < 2:
        raise LandscapeError("--points must be at least 2 (the endpoints)")
    check_points(points)
    if split not in SPLITS:
        raise LandscapeError(f"unknown split {split!r}; expected train or test")


class _Line:
    """Evaluates the line of one alignment on A's ``split`` and names its function checks."""

    def __init__(self, a: Checkpoint, b: Checkpoint, data: Data, split: str, points: int,
                 space: str, device: torch.device) -> None:  # fmt: skip
        self.a, self.b, self.data, self.split, self.space = a, b, data, split, space
        self.lam = torch.linspace(0, 1, points, dtype=torch.float64)
        self.device = device
        self.ev = data.evaluation(split)

    def measure(self, r: MatchResult, what: str) -> dict[str, Any]:
        """Barriers of the line between processed A and ``r``'s aligned B (in ``space``), with
        the worst function check of aligned B (and, in circuit form, of both endpoints)."""
        cfg, pa, pb = r.cfg, r.params_a, r.params_b
        check = r.function_check
        if self.space == "circuits":
            originals = [(self.a.cfg, self.a.params), (self.b.cfg, self.b.params)]
            check = worst_check([check, *circuit_checks(originals, cfg, [pa, pb])])
            cfg, (pa, pb) = circuit_forms(cfg, [pa, pb])
        loss, acc = evaluate_path(cfg, pa, pb, self.ev.inputs, self.ev.targets, self.lam,
                                  EvalOptions(**self.data.eval_options(cfg, self.ev.inputs)),
                                  context=RunContext(self.device))  # fmt: skip

        def where(i: int) -> str:
            return f"λ = {float(self.lam[i]):.6g} of {what}"

        check_finite_loss(loss, where, self.split)  # refused, and nothing is stored
        c = barrier_from_curve(self.lam, loss, acc)
        return {"barrier_loss": c.barrier_loss, "barrier_accuracy": c.barrier_accuracy,
                "lambda_peak_loss": c.lambda_peak_loss, "function_check": check}  # fmt: skip


def _aligned(method: str, group: str, b: Checkpoint, prepared: Prepared,
             elements: Mapping[str, Element]) -> MatchResult:  # fmt: skip
    """B aligned by ``elements`` (acting on B as ``prepared`` for ``group``: ``prepare_pair``),
    as a matching returns it."""
    return finish(method, group, b.cfg, b.params, prepared, Transform(dict(elements)),
                  time.perf_counter())  # fmt: skip


def _processed_check(a: Checkpoint, prepared: Prepared) -> float:
    """Processed A against A (as ``matching.match`` checks it)."""
    return function_check(a.cfg, a.params, prepared[0], prepared[1])


def _rounds(line: _Line, group: str, max_rounds: int | None, seed: int,
            progress: Progress | None) -> dict[str, Any]:  # fmt: skip
    """Weight matching under ``group`` with the elements of every round, then the measured
    rounds' barriers."""
    a, b = line.a, line.b
    kept: list[dict[str, Element]] = []
    tell(progress, f"weight matching {group}", 0)
    t0 = time.perf_counter()
    options = {**line.data.match_options(a.cfg, "weight"),
               **({} if max_rounds is None else {"max_rounds": max_rounds})}  # fmt: skip
    heard = MatchContext(seed, on_elements=lambda r, el: kept.append(dict(el)))
    wm = weight_matching(a.cfg, a.params, b.params, group, context=heard, **options)
    matching_seconds = time.perf_counter() - t0
    which = measured_rounds(wm.rounds)
    prepared = prepare_pair(a.cfg, a.params, b.params, group)
    rows = []
    t1 = time.perf_counter()
    for i, r in enumerate(which):
        tell(progress, f"{group} round {r}", 0.2 + 0.8 * i / len(which))
        al = _aligned("weight", group, b, prepared, kept[r])
        row = line.measure(al, f"round {r} of weight matching ({group})")
        rows.append({"group": group, "round": r, **row, "objective": wm.objective[r]})
    return {
        "rows": rows,
        "objective": wm.objective,
        "rounds": wm.rounds,
        "converged": wm.info["converged"],
        "function_check_a": _processed_check(a, prepared),
        "matching_seconds": round(matching_seconds, 4),
        "evaluation_seconds": round(time.perf_counter() - t1, 4),
    }


def _learned(line: _Line, init: str, steps: int, checkpoints: int, seed: int,
             progress: Progress | None) -> dict[str, Any]:  # fmt: skip
    """Learned rotations from ``init``, with the barrier of the transform at every scoring
    point (every ``⌈steps / checkpoints⌉`` steps, and the start)."""
    a, b = line.a, line.b
    kept: list[tuple[int, dict[str, Element]]] = []
    eval_every = max(1, math.ceil(steps / checkpoints))
    t0 = time.perf_counter()
    options = {**line.data.match_options(a.cfg, "learned"), **learned_space("learned", line.space)}
    lm = learned_matching(a.cfg, a.params, b.params, LEARNED_GROUP, line.data.split("train"),
                          init=init, steps=steps, eval_every=eval_every,
                          context=MatchContext(seed, line.device, within(progress, 0.0, 0.8),
                                               lambda s, el: kept.append((s, dict(el)))),
                          **options)  # fmt: skip
    matching_seconds = time.perf_counter() - t0
    scores = {p["step"]: p["loss"] for p in lm.info["eval_curve"]}
    prepared = prepare_pair(a.cfg, a.params, b.params, LEARNED_GROUP)
    rows = []
    t1 = time.perf_counter()
    for i, (step, elements) in enumerate(kept):
        tell(progress, f"from {init}: step {step}", 0.8 + 0.2 * i / len(kept))
        al = _aligned("learned", LEARNED_GROUP, b, prepared, elements)
        row = line.measure(al, f"learned matching from {init}, step {step}")
        rows.append({"init": init, "step": step, **row, "train_merge_loss": scores[step],
                     "selected": step == lm.info["selected_step"]})  # fmt: skip
    return {
        "rows": rows,
        "eval_every": eval_every,
        "selected_step": lm.info["selected_step"],
        "det_flips": lm.det_flips,
        "function_check_a": _processed_check(a, prepared),
        "matching_seconds": round(matching_seconds, 4),
        "evaluation_seconds": round(time.perf_counter() - t1, 4),
    }


@dataclass(frozen=True)
class IterationOptions:
    """What :func:`iteration_barriers` measures: weight matching under each of ``groups``
    (capped at ``max_rounds``; None: its own cap), learned matching from each of ``inits``
    (``learned=False``: none) for ``steps`` steps scored at ``checkpoints`` points, each line at
    ``points`` values of λ on A's ``split`` in merge ``space``; ``seed`` seeds the matchings."""

    groups: Sequence[str] = ("perm", "orth")
    max_rounds: int | None = None
    learned: bool = True
    inits: Sequence[str] = ("identity", "weight")
    steps: int = STEPS
    checkpoints: int = CHECKPOINTS
    points: int = 11
    split: str = "test"
    space: str = "weights"
    seed: int = 0


@in_context
def iteration_barriers(
    model: str,
    seeds: Sequence[int],
    options: IterationOptions = IterationOptions(),
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """Barrier per weight-matching round for each of ``groups``, and per scoring point of
    learned rotations from each of ``inits`` (module docstring), between two seeds of ``model``
    on A's ``split`` in merge ``space`` (:class:`IterationOptions`).

    ``max_rounds`` caps weight matching (default: its own cap); ``learned=False`` leaves the
    learned part out. Learned matching runs ``steps`` steps and scores every
    ``⌈steps / checkpoints⌉``. Returns ``rounds`` (rows ``{group, round, barrier_loss,
    barrier_accuracy, objective, lambda_peak_loss, function_check}``), ``checkpoints`` (rows
    ``{init, step, barrier_loss, barrier_accuracy, train_merge_loss, selected,
    lambda_peak_loss, function_check}``), per part the matching facts and seconds
    (``weight_matching``, ``learned_matching``), ``function_check`` (worst aligned B),
    ``function_check_a`` (worst processed A), ``function_ok``, ``warnings``, ``seconds``,
    ``cached`` and ``device``. Inputs are checked before anything is loaded.
    """
    o = options
    groups, max_rounds, learned, inits = o.groups, o.max_rounds, o.learned, o.inits
    steps, checkpoints, points, split = o.steps, o.checkpoints, o.points, o.split
    space, seed = o.space, o.seed
    device, cache, progress = context.device, context.cache, context.progress
    inits = tuple(inits) if learned else ()
    groups = tuple(groups)
    _check(seeds, groups, inits, max_rounds, steps, checkpoints, points, split)
    check_space(space)
    t0 = time.perf_counter()
    cache = cache or Cache()
    tell(progress, "load", 0)
    src_a, src_b = Source(model, seeds[0]), Source(model, seeds[1])
    a, b = src_a.load(device, cache), src_b.load(device, cache)
    name_a, name_b = src_a.label(a), src_b.label(b)
    check_same_architecture(a, b, name_a, name_b)
    if space == "circuits":
        check_circuit_form(a.cfg)
    data = src_a.data_of(a)
    line = _Line(a, b, data, split, points, space, device)
    base = {
        "a": digest_tensors(a.params),
        "b": digest_tensors(b.params),
        "cfg": a.cfg.to_dict(),
        "seed": seed,
        "points": points,
        "split": split,
        "space": space,
        "data": data.key,
        "version": ITERATIONS_VERSION,
        "matching_version": ALGO_VERSION,
    }
    parts = [("weight", g) for g in groups] + [("learned", i) for i in inits]
    # learned matching costs a few hundred forward-backward passes, a round a few products
    weights = [1.0 if kind == "weight" else 4.0 for kind, _ in parts]
    done, total = 0.0, sum(weights)
    facts: dict[str, dict[str, Any]] = {"weight_matching": {}, "learned_matching": {}}
    rows: dict[str, list[dict[str, Any]]] = {"weight": [], "learned": []}
    checks: dict[str, float | None] = {}
    hits = []
    for (kind, which), w in zip(parts, weights, strict=True):
        sub = within(progress, done / total, (done + w) / total)
        done += w
        if kind == "weight":
            inputs = {**base, "part": "rounds", "group": which, "max_rounds": max_rounds}
            run = functools.partial(_rounds, line, which, max_rounds, seed, sub)
            what, group = f"weight/{which}, every round", which
        else:
            inputs = {**base, "part": "learned", "group": LEARNED_GROUP, "init": which,
                      "steps": steps, "checkpoints": checkpoints}  # fmt: skip
            run = functools.partial(_learned, line, which, steps, checkpoints, seed, sub)
            what, group = f"learned/{LEARNED_GROUP} from {which}, every checkpoint", LEARNED_GROUP
        entry, hit = cache.get_or_compute("iterations", inputs, lambda run=run: ({}, run()))
        hits.append(hit)
        rows[kind] += entry.meta["rows"]
        facts[f"{kind}_matching"][which] = {k: v for k, v in entry.meta.items() if k != "rows"}
        checks[f"{name_b} aligned to {name_a} ({what})"] = worst_check(
            r["function_check"] for r in entry.meta["rows"]
        )
        checks[f"{name_a} processed for {group}"] = entry.meta["function_check_a"]
    tell(progress, "done", 1)
    return {
        "model": model,
        "seeds": list(seeds),
        "split": split,
        "space": space,
        "points": points,
        "learned_group": LEARNED_GROUP,
        "rounds": rows["weight"],
        "checkpoints": rows["learned"],
        **facts,
        "function_check": worst_check(v for k, v in checks.items() if " aligned to " in k),
        "function_check_a": worst_check(v for k, v in checks.items() if " processed " in k),
        **health(checks),
        "seconds": round(time.perf_counter() - t0, 4),
        "cached": all(hits),
        "device": str(device),
    }
