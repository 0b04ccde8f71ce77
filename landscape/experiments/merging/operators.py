"""Merge operators after alignment: mergekit's SLERP, TIES and DARE beside the straight line
(``landscape merges``, the Interpolation page's operators; docs/design.md §1, "Merge operators").

For a pair and an alignment (the naive pair, and B aligned to A by a method and group), both
endpoints are taken in the coordinates the line is straight in (A processed as B was) and each
operator merges them through mergekit itself at the λ of the line's grid, by one of two routes
(:func:`merge_route`):

- ``files``: both are written as Hugging Face directories
  (:func:`landscape.models.exporters.export_hf`: in their source's format, or for a zoo model of
  Llama's layout as a Llama directory, :func:`hf_format`), merged by ``mergekit.merge.run_merge``
  on the configuration :func:`landscape.experiments.merging.mergekit.mergekit_yaml` writes, and
  read back;
- ``memory``: a model with no Hugging Face format (the zoo's GPTs, ViTs and MLPs) is merged by
  mergekit's in-memory entry point with the same parameters (:func:`merge_in_memory`), each
  parameter tensor whole under the project's canonical names.

Neither is rewritten here. The merged model is evaluated on A's data, the windows the curve is
evaluated on.

**The base-model convention.** Independently trained models share no base, and TIES and DARE
merge task vectors into one. B is the base and A − B the one task vector, at weight λ, so every
operator is a curve in λ with λ = 0 B itself (as on the line, λ = 1 is A):

- ``linear``: λ·A + (1−λ)·B, the straight line itself (a check of the round trip);
- ``slerp``: the spherical interpolation from B (t = 0) to A (t = 1) at t = λ, tensor by tensor;
- ``ties``: B + λ·trim(A − B), the task vector's largest-magnitude entries (a ``density``
  fraction of each tensor; the sign election of a single vector keeps them all);
- ``dare_ties``: B + λ·drop(A − B), each entry kept with probability ``density`` and rescaled
  (mergekit's random drop, seeded by ``merge_seed``), the sign election again trivial;
- the other task-vector methods of
  :data:`~landscape.experiments.merging.mergekit.MERGE_METHODS` alike.

``density`` is 0.5, not mergekit's default 1 (which keeps the whole task vector, so that TIES
and DARE would be the line again); ``normalize`` is off (with one task vector mergekit's
normalisation divides λ away). At λ = 1 the sparsifying operators are not A: their barrier is
measured against the line's chord, ``max_λ [L(merge(λ)) − (λ·L_A + (1−λ)·L_B)]``, so that it
reads on the same scale as the line's.

The naive pair is the same two models in the same coordinates (the alignment's processing,
B not moved): the difference between the two is what the alignment does to each operator.
Every merged point is one cache entry (kind ``"merge"``), keyed by both endpoints' weights, the
alignment, the operator, λ, density, seed, split, data and mergekit's version.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import itertools
import logging
import random
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from landscape.budget import MAX_MERGEKIT_RUNS, check_work
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import align
from landscape.experiments.barriers.coordinates import PROCESSED
from landscape.experiments.barriers.endpoints import load
from landscape.experiments.barriers.pipeline import measure_barrier
from landscape.experiments.barriers.request import BarrierRequest, seeds_request
from landscape.experiments.barriers.tables import mean_sem
from landscape.experiments.basins import barrier_from_curve
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.evaluation import EvalOptions, check_finite_loss, evaluate_path
from landscape.experiments.merging.export import hf_source
from landscape.experiments.merging.mergekit import (
    MERGE_METHODS,
    check_mergekit_covers,
    mergekit_yaml,
)
from landscape.fields import Fields
from landscape.matching import aligns, matching_key, options_key
from landscape.models import Params
from landscape.models.checkpoint import Checkpoint
from landscape.models.exporters import check_hf_writable, export_hf, llama_config
from landscape.models.importers import import_checkpoint
from landscape.progress import tell, within
from landscape.sources import Source, data_of, label
from landscape.store.cache import Cache, digest_tensors
from landscape.symmetry import ORTH, RESID_GROUPS, SIGNED_PERM
from landscape.symmetry.processing import prepare
from landscape.threads import threaded

OPERATORS = ("slerp", "ties", "dare_ties")  # the default; any of MERGE_METHODS may be asked for
DENSITY = 0.5
POINTS = 5  # each point is one mergekit run per operator and alignment
MERGES_VERSION = 1  # bump when a merged point is computed differently
INSTALL = "pip install 'landscape[merge]'"
# the operators that read the density, and those that draw at random (the others' points are
# keyed without them)
SPARSIFYING = ("ties", "dare_ties", "dare_linear", "breadcrumbs", "della")
RANDOM = ("dare_ties", "dare_linear", "della")


@dataclass(frozen=True)
class MergesOptions:
    """What :func:`merges` measures: the ``operators`` (of
    :data:`~landscape.experiments.merging.mergekit.MERGE_METHODS`) at ``points`` values of λ on
    A's ``split``, the sparsifying ones keeping a ``density`` fraction, the random ones drawn by
    ``merge_seed``; ``settings``: the matching method's (None: its defaults)."""

    operators: Sequence[str] = OPERATORS
    density: float = DENSITY
    merge_seed: int = 0
    points: int = POINTS
    split: str = "test"
    settings: dict[str, Any] | None = None


MERGES = MergesOptions()  # the defaults


def require_mergekit() -> str:
    """mergekit's version, or one line saying how to install it."""
    try:
        import mergekit.merge  # noqa: F401
    except ImportError:
        raise LandscapeError(f"the merge operators run mergekit, which is not installed: "
                             f"{INSTALL}") from None  # fmt: skip
    return importlib.metadata.version("mergekit")


def mergekit_installed() -> bool:
    try:
        require_mergekit()
    except LandscapeError:
        return False
    return True


def check_operators(operators: Sequence[str]) -> list[str]:
    ops = list(dict.fromkeys(operators))
    if not ops:
        raise LandscapeError("give at least one merge operator")
    for op in ops:
        if op not in MERGE_METHODS:
            raise LandscapeError(f"unknown merge operator {op!r}; expected one of "
                                 f"{', '.join(MERGE_METHODS)}")  # fmt: skip
    return ops


@contextlib.contextmanager
def _own_rng() -> Iterator[None]:
    """mergekit seeds the global generators (torch, numpy, random) for its random drops: the
    caller's are restored afterwards."""
    state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(state)
            np.random.set_state(np_state)


def run_operator(a_dir: str | Path, b_dir: str | Path, operator: str, lam: float,
                 out: str | Path, *, density: float = DENSITY,
                 merge_seed: int = 0) -> None:  # fmt: skip
    """mergekit's ``operator`` at λ on the Hugging Face directories A and B (B the base;
    module docstring), written to the new folder ``out``, through ``mergekit.merge.run_merge``."""
    require_mergekit()
    import yaml
    from mergekit.config import MergeConfiguration
    from mergekit.merge import run_merge
    from mergekit.options import MergeOptions

    text = mergekit_yaml(a_dir, b_dir, operator, lam, density)
    config = MergeConfiguration.model_validate(yaml.safe_load(text))
    options = MergeOptions(random_seed=merge_seed, quiet=True, copy_tokenizer=False,
                           write_model_card=False)  # fmt: skip
    quiet = logging.getLogger("mergekit")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with _own_rng():
            run_merge(config, str(out), options)
    finally:
        quiet.setLevel(level)


def merge_in_memory(params_a: Params, params_b: Params, operator: str, lam: float, *,
                    density: float = DENSITY, merge_seed: int = 0) -> Params:  # fmt: skip
    """mergekit's ``operator`` at λ on A's and B's parameters in memory (B the base; module
    docstring), through mergekit's own in-memory entry point
    (``mergekit.merge_methods.api.merge_state_dicts``), for models mergekit cannot read as a
    Hugging Face directory (the zoo's GPTs and ViTs). The parameters of :func:`mergekit_yaml`'s
    configuration, tensor by tensor in the project's canonical names: a per-tensor operator
    (SLERP's norms, TIES' and DARE's magnitudes and drops) sees each parameter tensor whole,
    as it sees the tensors of a Hugging Face file. The random drops are seeded as mergekit's
    command seeds them, and the caller's generators are restored."""
    require_mergekit()
    import transformers
    from mergekit.merge_methods.api import merge_state_dicts

    check_operators([operator])
    mergekit_yaml(".", ".", operator, lam, density)  # the same refusals as the file's
    if operator == "linear":
        base, parameters = None, {"weight": {"a": lam, "b": 1.0 - lam}}
    elif operator == "slerp":
        base, parameters = "b", {"t": lam}
    else:
        base, parameters = "b", {"weight": {"a": lam}, "density": {"a": density},
                                 "normalize": False}  # fmt: skip
    with _own_rng(), torch.no_grad():
        transformers.trainer_utils.set_seed(merge_seed)
        merged = merge_state_dicts({"a": params_a, "b": params_b}, operator,
                                   parameters=parameters, base=base,
                                   dtype=torch.float32)  # fmt: skip
    return {k: v.float() for k, v in merged.items()}


def hf_format(ckpt: Checkpoint) -> tuple[str | None, dict[str, Any] | None]:
    """How ``ckpt`` is written for mergekit, which reads Hugging Face directories: its source
    directory's format (source, None), or for a model with no source but Llama's layout,
    Llama's (None, config; :func:`landscape.models.exporters.llama_config`). Anything else is
    refused in one line."""
    source = hf_source(ckpt)
    if source is not None:
        return source, None
    try:
        return None, llama_config(ckpt.cfg)
    except LandscapeError as e:
        raise LandscapeError(
            f"mergekit merges Hugging Face directories: {label(ckpt)} was not imported from one, "
            f"and its architecture has no Hugging Face format here ({e})"
        ) from None


def merge_route(a: Checkpoint, b: Checkpoint, group: str) -> str:
    """How mergekit merges the pair: ``"files"`` where it reads both as Hugging Face
    directories (:func:`hf_format`), else ``"memory"`` (:func:`merge_in_memory`). On the files
    route, a group whose processing the format cannot hold, or a model whose tensors mergekit's
    architecture definition does not hold exactly (it would drop biases it has no place for, or
    fail on a tensor it requires: :func:`check_mergekit_covers`), is refused here, before any
    matching or merge."""
    formats = []
    for ckpt in (a, b):
        try:
            formats.append(hf_format(ckpt))
        except LandscapeError:
            return "memory"
    moves_mean = RESID_GROUPS.get(group) in (SIGNED_PERM, ORTH)
    for ckpt, (source, config) in zip((a, b), formats, strict=True):
        check_mergekit_covers(*check_hf_writable(*prepare(ckpt.cfg, ckpt.params, group), source,
                                                 moves_mean=moves_mean, config=config))  # fmt: skip
    return "files"


def _curve(lam: Sequence[float], loss: Sequence[float], acc: Sequence[float],
           chord: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """An operator's curve with its barriers against the line's chord (module docstring)."""
    c = barrier_from_curve(lam, loss, acc, endpoints_loss=chord["endpoint_loss"],
                           endpoints_accuracy=chord["endpoint_accuracy"])  # fmt: skip
    return {"loss": c.loss, "accuracy": c.accuracy, "barrier_loss": c.barrier_loss,
            "barrier_accuracy": c.barrier_accuracy}  # fmt: skip


@in_context
def pair_merges(
    request: BarrierRequest,
    options: MergesOptions = MERGES,
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """The operators' curves for one pair of seeds (the request's endpoints: two seeds of one
    model), naive and aligned by the request's method and group (module docstring):
    ``alignments``, one record each with its ``line`` (the barrier pipeline's curve of the
    request, :func:`~landscape.experiments.barriers.pipeline.measure_barrier`) and ``operators``
    (operator → loss, accuracy and barriers at the line's λ), ``merge_seconds`` (what its
    ``merges`` merged points took to compute, read from the cache or not). The operators act on the
    processed weights: the request's line is straight there, in float32, matched with seed 0.
    Of ``options`` the operators, density and merge seed are read; the request holds the rest
    (its points, split and the matching's settings)."""
    operators, density, merge_seed = options.operators, options.density, options.merge_seed
    device, progress = context.device, context.progress
    version = require_mergekit()
    ops = check_operators(operators)
    model, seeds = _pair_of(request)
    mergekit_yaml(".", ".", "ties", 0.5, density)  # refuses a density now, not after matching
    cache = context.cache or Cache()
    tell(progress, "load", 0)
    a, b = load(model, seeds[0], device), load(model, seeds[1], device)
    method, group, split, points = request.method, request.group, request.split, request.points
    route = merge_route(a, b, group)
    data = data_of(a)
    ev = data.evaluation(split)
    alignments = [("naive", group)] + ([(method, group)] if aligns(method) else [])
    per = len(ops) * points
    total = len(alignments) * (1 + per)
    out: list[dict[str, Any]] = []
    for k, (m, g) in enumerate(alignments):
        base = k * (1 + per)
        asked = request if m == method else replace(request, method=m, options=None)
        line = measure_barrier(asked, device=device, cache=cache,
                               progress=within(progress, base / total, (base + 1) / total,
                                               f"{m}/{g} line: ")).to_dict()  # fmt: skip
        lam = line["lambdas"]
        inputs = {
            "a": digest_tensors(a.params), "b": digest_tensors(b.params),
            "cfg": a.cfg.to_dict(), "method": m, "group": g,
            "options": options_key(asked.options),
            "split": split, "data": data.key, "mergekit": version, "version": MERGES_VERSION,
        }  # fmt: skip
        if route == "memory":  # keyed apart: the tensors are partitioned as the project's
            inputs["route"] = route
        with tempfile.TemporaryDirectory(prefix="landscape-merges-") as tmp:
            ends: dict[str, Any] = {}

            def endpoints(m: str = m, g: str = g, tmp: str = tmp, ends: dict[str, Any] = ends,
                          asked: BarrierRequest = asked) -> dict[str, Any]:  # fmt: skip
                """A and the aligned B, written once (on the Hugging Face route), when a merge
                is first computed."""
                if not ends:
                    mo = asked.settings(a.cfg, data)  # the line's own matching
                    al = align(a, b, m, g, options=mo, data=data, context=RunContext(device, cache))
                    if route == "memory":
                        ends.update(cfg=al.cfg, a=al.params_a, b=al.params_b)
                        return ends
                    for name, params, ckpt in (("a", al.params_a, a), ("b", al.params_b, b)):
                        source, config = hf_format(ckpt)
                        ends[name] = export_hf(al.cfg, params, source, Path(tmp) / name,
                                               config=config)["path"]  # fmt: skip
                return ends

            curves = {}
            for j, (op, x) in enumerate(itertools.product(ops, lam)):
                tell(progress, f"{m}/{g} {op} λ={x:g}", base + 1 + j, total)
                here = f"{op}'s merge at λ = {x:g} ({m}/{g})"

                def compute(op: str = op, x: float = x, tmp: str = tmp, here: str = here
                            ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:  # fmt: skip
                    t0 = time.perf_counter()
                    e = endpoints()
                    if route == "memory":
                        cfg = e["cfg"]
                        params = merge_in_memory(e["a"], e["b"], op, x, density=density,
                                                 merge_seed=merge_seed)  # fmt: skip
                    else:
                        merged = Path(tmp) / f"{op}-{x!r}"
                        run_operator(e["a"], e["b"], op, x, merged, density=density,
                                     merge_seed=merge_seed)  # fmt: skip
                        back = import_checkpoint(merged)
                        cfg, params = back.cfg, back.params
                    opts = EvalOptions(**data.eval_options(cfg, ev.inputs))
                    loss, acc = evaluate_path(cfg, params, params, ev.inputs, ev.targets, [1.0],
                                              opts, context=RunContext(device))  # fmt: skip
                    # refused, and nothing stored, as on the line
                    check_finite_loss(loss, lambda _: here, split)
                    return {}, {"loss": float(loss[0]), "accuracy": float(acc[0]),
                                "seconds": round(time.perf_counter() - t0, 4)}  # fmt: skip

                point = {**inputs, "operator": op, "lambda": x,
                         "density": density if op in SPARSIFYING else None,
                         "merge_seed": merge_seed if op in RANDOM else None}  # fmt: skip
                entry, _ = cache.get_or_compute("merge", point, compute)
                curves.setdefault(op, []).append(entry.meta)
        chord = {"endpoint_loss": line["endpoint_loss"],
                 "endpoint_accuracy": line["endpoint_accuracy"]}  # fmt: skip
        out.append({
            "method": m, "group": g,
            "line": {"loss": line["loss"], "accuracy": line["accuracy"],
                     "barrier_loss": line["barrier_loss"],
                     "barrier_accuracy": line["barrier_accuracy"]},
            "operators": {op: _curve(lam, [p["loss"] for p in c], [p["accuracy"] for p in c],
                                     chord) for op, c in curves.items()},
            "function_check": line["function_check"], "warnings": line["warnings"],
            # what its merged points took to compute (read or not): the cost of the next ones
            "merge_seconds": round(sum(p.get("seconds", 0.0) for c in curves.values()
                                       for p in c), 4),
            "merges": sum(len(c) for c in curves.values()),
        })  # fmt: skip
    tell(progress, "done", 1)
    return {"model": model, "seeds": list(seeds), "lambdas": lam, "split": split,
            "density": density, "merge_seed": merge_seed, "mergekit": version, "route": route,
            "alignments": out}  # fmt: skip


# What one pair's merges hold (landscape.fields): what :func:`pair_merges` writes, and what the
# figure and the page read.
PAIR_MERGES = Fields("merges of a pair",
                     ("model", "seeds", "lambdas", "density", "merge_seed", "mergekit", "route",
                      "alignments"),
                     # always written; a figure drawn from a record without it reads the test split
                     {"split": "test"})  # fmt: skip
# one of ``alignments``: naive, then the method's; the straight ``line`` and each operator's
# curve (MERGE_CURVE), the line's function check, and what its merged points took
MERGE_ALIGNMENT = Fields("merges alignment",
                         ("method", "group", "line", "operators", "function_check", "warnings",
                          "merge_seconds", "merges"))  # fmt: skip
# the ``line`` or one of the ``operators`` of an alignment, at the line's λ
MERGE_CURVE = Fields("merge curve", ("loss", "accuracy", "barrier_loss", "barrier_accuracy"))


def _pair_of(request: BarrierRequest) -> tuple[str, tuple[int, int]]:
    """The model and the two seeds of a merges request; one line refusing anything else."""
    a, b = request.a, request.b
    if not (isinstance(a, Source) and isinstance(b, Source) and a.model == b.model):
        raise LandscapeError("merges take two seeds of one model: A and B")
    if a.seed == b.seed:
        raise LandscapeError("give two different seeds: A and B")
    if (request.line.key, request.dtype, request.seed) != (PROCESSED.key, "float32", 0):
        raise LandscapeError("merge operators act on the processed weights: a line in the "
                             "weights space, in float32, matched with seed 0")  # fmt: skip
    return a.model, (a.seed, b.seed)


def merge_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One pair's barriers (:func:`pair_merges`) as tidy records: per path (the line, then each
    operator) and alignment, the loss and accuracy barrier against the line's chord."""
    rows = []
    for al in result["alignments"]:
        for path in ["line", *al["operators"]]:
            c = _path(al, path)
            rows.append({"operator": "straight line" if path == "line" else path,
                         "alignment": matching_key(al["method"], al["group"]),
                         "loss barrier (nats)": c["barrier_loss"],
                         "accuracy barrier (fraction)": c["barrier_accuracy"]})  # fmt: skip
    return rows


@dataclass
class MergesResult:
    """``landscape merges``: per pair the curves (:func:`pair_merges`), and ``rows``, one per
    path (the straight ``line``, then each operator): its loss and accuracy barrier naive and
    aligned, means over the pairs with standard errors, and ``gain`` (naive − aligned, the
    mean of the per-pair differences)."""

    model: str
    seeds: list[int]
    method: str
    group: str
    operators: list[str]
    points: int
    split: str
    density: float
    merge_seed: int
    mergekit: str
    pairs: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    seconds: float
    function_ok: bool = True
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# What a merges result holds (landscape.fields): what :func:`merges` writes
# (:class:`MergesResult`, each of ``pairs`` a PAIR_MERGES), and what the command's summary
# reads.
MERGES_RESULT = Fields("merges result",
                       ("model", "seeds", "method", "group", "operators", "points", "split",
                        "density", "merge_seed", "mergekit", "pairs", "rows", "seconds",
                        "function_ok", "warnings"))  # fmt: skip
# one of ``rows`` (:func:`_rows`): a path's barriers naive and aligned and the gain, each with
# its standard error over the pairs (None with one pair)
MERGES_ROW = Fields("merges row",
                    ("operator", *(f"{m}_{c}{s}" for m in ("loss", "accuracy")
                                   for c in ("naive", "aligned", "gain") for s in ("", "_sem"))))


def _path(alignment: dict[str, Any], path: str) -> dict[str, Any]:
    return alignment["line"] if path == "line" else alignment["operators"][path]


def _rows(pairs: list[dict[str, Any]], ops: list[str]) -> list[dict[str, Any]]:
    """The table (:class:`MergesResult`): naive is each pair's first alignment, aligned its
    last (the same one when the method is naive)."""
    rows = []
    for path in ["line", *ops]:
        row: dict[str, Any] = {"operator": path}
        for metric in ("loss", "accuracy"):
            key = f"barrier_{metric}"
            per = [(_path(p["alignments"][0], path)[key], _path(p["alignments"][-1], path)[key])
                   for p in pairs]  # fmt: skip
            for name, values in (("naive", [n for n, _ in per]), ("aligned", [a for _, a in per]),
                                 ("gain", [n - a for n, a in per])):  # fmt: skip
                mean, sem = mean_sem(values)
                row[f"{metric}_{name}"] = mean
                row[f"{metric}_{name}_sem"] = sem if len(pairs) > 1 else None
        rows.append(row)
    return rows


@threaded
def check_merges_work(seeds: int, method: str, operators: Sequence[str], points: int) -> None:
    """Refuse, before any work, more mergekit runs than the time limit allows without long work
    asked for (:func:`landscape.budget.check_work`): one per operator and λ point, for the naive
    and the aligned pair (one alignment for ``naive``) of every pair of ``seeds`` seeds."""
    pairs = seeds * (seeds - 1) // 2
    alignments = 2 if aligns(method) else 1  # the naive line, and the aligned one
    runs = pairs * alignments * len(operators) * points
    check_work(f"{pairs} pair(s) × {alignments} alignment(s) × {len(operators)} operator(s) × "
               f"--points {points} ask for {runs} mergekit runs", runs, MAX_MERGEKIT_RUNS,
               "each a fresh mergekit process, 20-35 s")  # fmt: skip


@in_context
def merges(
    model: str,
    seeds: Sequence[int],
    method: str = "weight",
    group: str = "perm",
    options: MergesOptions = MERGES,
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """:class:`MergesResult` of every pair of ``seeds`` (B the later seed, aligned to A, as
    ``landscape matrix`` pairs them), as a dict; what it measures in ``options``
    (:class:`MergesOptions`: each pair's request takes its ``points``, ``split`` and
    ``settings``), where it runs in ``context``."""
    operators, density, merge_seed = options.operators, options.density, options.merge_seed
    progress = context.progress
    t0 = time.perf_counter()
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2 or len(set(seeds)) < len(seeds):
        raise LandscapeError(f"give two or more different seeds (got "
                             f"{' '.join(map(str, seeds))}): one merge per pair")  # fmt: skip
    ops = check_operators(operators)
    check_merges_work(len(seeds), method, ops, options.points)
    require_mergekit()
    todo = list(itertools.combinations(seeds, 2))
    first = seeds_request(model, todo[0], method, group, points=options.points,
                          split=options.split, options=options.settings)  # fmt: skip
    points, split = first.points, first.split
    pairs, warnings = [], []
    for i, pair in enumerate(todo):
        sub = within(progress, i / len(todo), (i + 1) / len(todo), f"{pair[0]}-{pair[1]} ")
        asked = replace(first, a=Source(model, pair[0]), b=Source(model, pair[1]))
        r = pair_merges(asked, replace(options, operators=ops), context=context.hearing(sub))
        pairs.append(r)
        warnings += [f"seeds {pair[0]}-{pair[1]}: {w}" for al in r["alignments"]
                     for w in al["warnings"]]  # fmt: skip
    return MergesResult(
        model=model, seeds=seeds, method=method, group=group, operators=ops, points=points,
        split=split, density=density, merge_seed=merge_seed, mergekit=pairs[0]["mergekit"],
        pairs=pairs, rows=_rows(pairs, ops), seconds=round(time.perf_counter() - t0, 4),
        function_ok=not warnings, warnings=warnings,
    ).to_dict()  # fmt: skip
