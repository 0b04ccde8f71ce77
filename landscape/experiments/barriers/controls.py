"""Controls for zero barriers: how much is the landscape, how much the aligner (issue #9).

A rotation of the residual stream has d(d−1)/2 degrees of freedom, and learned matching
minimises the merged model's loss directly. A zero barrier after learned matching could mean
"one basin" or "a strong optimiser". The controls pair a normal model A with models B that are
*not* in A's basin by construction, and run every method on them as on real pairs:

- ``permuted-labels``: B learned the classes under the fixed relabelling k → (k + 1) mod n, a
  genuinely different function (same features would do, but the readout disagrees).
- ``disjoint-halves``: A and B trained on disjoint halves of the training data.
- ``shuffled-labels``: B memorised labels shuffled across the training inputs.
- ``barely-trained``: B is the zoo recipe stopped after 2% of its steps.

**What "loss" means on a control path.** Interpolated models are scored on the *normal* task:
A's zoo test split with its true targets, for every control. A path's endpoints are scored the
same way, so the barrier (measured against the chord between the endpoint losses) asks whether
the straight line leaves the endpoints' level on the one task both are measured on. For
``permuted-labels`` B's normal-task loss is large by design; its accuracy on its own permuted
targets is reported separately (``own_task_accuracy``). Learned matching trains on A's normal
training split (``experiments.align``), never on the test split the barrier is measured on.

A barrier is measured against the chord between the endpoints, so where one endpoint is bad on
the normal task (permuted or shuffled labels, barely trained) the chord is high and a loss
barrier of 0 says little: read the accuracy barrier and the endpoint metrics beside it. The
controls that keep both endpoints good on the normal task are ``disjoint-halves`` (and, in
accuracy, ``permuted-labels``, whose B is perfect on its own task).

**Function-space distance** of the endpoints (alignment never changes a function): the share of
test inputs whose argmax differs, and the mean total-variation distance
½·Σ_k |p_A(k|x) − p_B(k|x)| between the softmax outputs.

**Coordinates of the path** (:func:`original_coordinates`): the processing that makes a group
exact (gains folded into the readers for O(d); norm biases folded and writers centred for a
LayerNorm model) is function-preserving but not linear along a path: interpolating
``diag(γ)·W`` is not interpolating γ and W. The barrier is therefore also reported along the
straight line in the unprocessed parameterisation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from landscape.budget import check_points
from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.experiments import sweeps
from landscape.experiments.barriers.alignment import Aligned
from landscape.experiments.barriers.coordinates import Coordinates
from landscape.experiments.barriers.endpoints import check_method, eval_split
from landscape.experiments.barriers.pipeline import measure_barrier
from landscape.experiments.barriers.request import BarrierRequest
from landscape.experiments.barriers.tables import (
    DEFAULT_ROWS,
    SUMMARY,
    mean_sem,
    pairs_for,
    summarise_barriers,
)
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.fields import Fields
from landscape.matching import aligns
from landscape.models import ModelConfig, Params, forward
from landscape.models.circuits import check_circuit_form, check_space
from landscape.models.zoo import VARIANTS, Checkpoint, zoo_model
from landscape.progress import Progress, tell, within
from landscape.sources import Source
from landscape.store.cache import Cache
from landscape.symmetry import spec_for


@dataclass(frozen=True)
class Control:
    """A kind of pair: A and B are the zoo model trained with these variants (None: normal)."""

    name: str
    description: str
    variant_a: str | None = None
    variant_b: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


CONTROLS: dict[str, Control] = {
    c.name: c
    for c in [
        Control("real", "two models trained with the zoo recipe from different seeds"),
        Control("permuted-labels", "a normal model against one trained with the class labels "
                "relabelled k → (k + 1) mod n: a genuinely different function",
                variant_b="permuted-labels"),
        Control("disjoint-halves", "two models trained on disjoint halves of the training data",
                "half-a", "half-b"),
        Control("shuffled-labels", "a normal model against one that memorised labels shuffled "
                "across the training inputs", variant_b="shuffled-labels"),
        Control("barely-trained", "a normal model against one stopped after 2% of the steps",
                variant_b="early"),
    ]
}  # fmt: skip
LN_CONTROL = Control("real-ln", "two LayerNorm models (the zoo recipe with LayerNorm) from "
                     "different seeds", "ln", "ln")  # fmt: skip


def control_pair(
    model: str,
    control: str | Control,
    seeds: Sequence[int],
    *,
    device: torch.device = CPU,
    cache: Cache | None = None,
) -> tuple[Checkpoint, Checkpoint]:
    """A and B of one control pair: seed ``seeds[0]`` with variant A, ``seeds[1]`` with B.

    Variants are trained on a cache miss (seeded and deterministic, like every zoo model).
    """
    c = control if isinstance(control, Control) else _control(control)
    a = Source(model, seeds[0], variant=c.variant_a).load(device, cache)
    b = Source(model, seeds[1], variant=c.variant_b).load(device, cache)
    return a, b


def _control(name: str) -> Control:
    if name == LN_CONTROL.name:
        return LN_CONTROL
    if name not in CONTROLS:
        raise LandscapeError(f"unknown control {name!r}; expected one of {', '.join(CONTROLS)}")
    return CONTROLS[name]


# ---------------------------------------------------------------- function space


def _probabilities(ckpt: Checkpoint, inputs: torch.Tensor, device: torch.device) -> torch.Tensor:
    params = {k: v.to(device, torch.float64) for k, v in ckpt.params.items()}
    x = inputs.to(device)
    if x.is_floating_point():
        x = x.double()
    with torch.no_grad():
        logits = forward(ckpt.cfg, params, x)
    return logits.reshape(-1, logits.shape[-1]).softmax(-1).cpu()


def function_distance(
    a: Checkpoint, b: Checkpoint, split: str = "test", device: torch.device = CPU
) -> dict[str, float]:
    """How far apart two functions are on A's zoo ``split`` (every prediction counts once).

    ``disagreement``: share of predictions whose argmax differs. ``tv_distance``: mean
    ½·‖p_A − p_B‖₁ of the softmax outputs (0: same outputs, 1: disjoint supports).
    ``l2_distance``: mean ‖p_A − p_B‖₂.
    """
    data = eval_split(a, split)
    pa, pb = _probabilities(a, data.inputs, device), _probabilities(b, data.inputs, device)
    return {
        "disagreement": float((pa.argmax(-1) != pb.argmax(-1)).double().mean()),
        "tv_distance": float(0.5 * (pa - pb).abs().sum(-1).mean()),
        "l2_distance": float((pa - pb).norm(dim=-1).mean()),
    }


# ---------------------------------------------------------------- coordinates of the path


def original_coordinates(
    a: Checkpoint, b: Checkpoint, al: Aligned
) -> tuple[ModelConfig, Params, Params]:
    """A and π(B) with their norm gains and biases unfolded: (cfg, A, π(B)).

    "Original coordinates" are the parameterisation the models were trained in: norm gains γ
    and biases β as parameters of their own. Processing folded them into the readers
    (``W' = diag(γ)·W``, ``b' = b + β·W``) for O(d); this puts them back on both endpoints:

    - gains: ``γ'' = diag(Gᵀ·diag(γ)·G)``, i.e. ``γ''_i = Σ_j G_ji² γ_j`` (exactly the
      permuted gains when G is a signed permutation, γ itself for A), and every reader row
      divided by it, ``W'' = diag(γ'')⁻¹·W'``;
    - biases: ``β'' = β·G`` and reader biases ``b'' = b' − β''·W''``.

    Both rewrites preserve the function for any γ'', β'' (``(N·γ'' + β'')·W'' + b'' =
    N·W' + b'``). With π the identity they give back the checkpoints, so the naive line in
    these coordinates is the plain line between them. G is the alignment's residual element
    (writers ``W ← W·G``); A's is the identity. Centring is kept where a group needed it: O(d)
    and B_d are no symmetries of LayerNorm, so a rotated B has no LayerNorm form at all, and
    centring is linear, so it does not bend a line between LayerNorm models. Where nothing was
    folded, the result is the processed pair itself.
    """
    g = al.resid.double()
    eye = torch.eye(g.shape[0], dtype=torch.float64)
    pa = _unfold(al.cfg, al.params_a, a.params, eye)
    pb = _unfold(al.cfg, al.params_b, b.params, g)
    return al.cfg, pa, pb


def _unfold(cfg: ModelConfig, processed: Params, source: Params, g: torch.Tensor) -> Params:
    """Put back the norm gains/biases of ``source`` that processing folded (see above)."""
    out = dict(processed)
    for prefix, readers in spec_for(cfg).norm_readers.items():
        w_key, b_key = f"{prefix}.w", f"{prefix}.b"
        if w_key in source and w_key not in out:
            gain = (g**2).T @ source[w_key].double()
            for w_name, _ in readers:
                out[w_name] = _scale_rows(cfg, w_name, out[w_name], 1.0 / gain)
            out[w_key] = gain.to(source[w_key].dtype)
        if b_key in source and b_key not in out:
            beta = source[b_key].double() @ g
            for w_name, bias_name in readers:
                shift = torch.tensordot(beta, out[w_name].double(),
                                        dims=([0], [spec_for(cfg).axis_of(w_name)]))  # fmt: skip
                out[bias_name] = (out[bias_name].double() - shift).to(out[bias_name].dtype)
            out[b_key] = beta.to(source[b_key].dtype)
    return out


def _scale_rows(cfg: ModelConfig, name: str, w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    axis = spec_for(cfg).axis_of(name)
    shape = [1] * w.ndim
    shape[axis] = -1
    return (w.double() * s.view(shape)).to(w.dtype)


# the barrier pipeline's line in these coordinates: BarrierRequest(..., coordinates=ORIGINAL)
ORIGINAL = Coordinates("original", original_coordinates)


# ---------------------------------------------------------------- the table

# What a controls table holds (landscape.fields): what :func:`controls_table` writes, and what
# the command's summary reads.
CONTROLS_RESULT = Fields("controls result",
                         ("model", "split", "space", "pairs", "path_task", "controls", "rows",
                          "function_ok", "warnings", "seconds"))  # fmt: skip
# one of ``controls``: the kind of pair, its variants, its endpoints' function distance
# (:func:`function_distance`) and metrics on the normal task, means over the pairs
CONTROL_PAIRS = Fields("control pairs",
                       ("control", "description", "variant_a", "variant_b",
                        "variant_b_description", "disagreement", "tv_distance", "l2_distance",
                        "endpoint_loss_a", "endpoint_loss_b", "endpoint_accuracy_a",
                        "endpoint_accuracy_b", "own_task_accuracy_b"))  # fmt: skip
# one of ``rows``: a control under a method and group, its summary over the pairs
# (:data:`~landscape.experiments.barriers.tables.SUMMARY`) and the share of the naive barrier
# it removes (None where the naive barrier is below 1e-6)
CONTROLS_ROW = Fields("controls row",
                      ("control", "method", "group", *SUMMARY.required, "fraction_removed",
                       "split"),
                      # only with ``original`` (the default): the line in unprocessed coordinates
                      {"barrier_loss_original": None, "barrier_accuracy_original": None,
                       "fraction_removed_original": None})  # fmt: skip


@dataclass(frozen=True)
class ControlsOptions:
    """What the controls table measures and how its work is spread: the ``controls`` (names of
    :data:`CONTROLS`), the ``rows`` (method, group; the first the naive one), on A's ``split``
    at ``points`` values of λ, over the pairs of ``seeds`` (None: the model's first), in merge
    ``space``; ``original``: also the line in unprocessed coordinates; ``layernorm``: also the
    ``real-ln`` pairs; ``executor`` (``"local"`` or ``"ray"``, at ``address``)."""

    controls: Sequence[str] = tuple(CONTROLS)
    rows: Sequence[tuple[str, str]] = DEFAULT_ROWS
    split: str = "test"
    points: int = 25
    seeds: Sequence[int] | None = None
    original: bool = True
    layernorm: bool = False
    space: str = "weights"
    executor: str = "local"
    address: str | None = None


@in_context
def controls_table(
    model: str,
    pairs: int = 3,
    options: ControlsOptions = ControlsOptions(),
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """Barriers of real pairs and of every control under every method × group
    (:class:`ControlsOptions`).

    Pairs of seeds come from ``experiments.pairs_for`` (the same as ``table``); control pair i
    trains A with seed ``pairs[i][0]`` and B with ``pairs[i][1]`` in their variants. Per control
    and row: mean ± standard error of the loss and accuracy barriers over pairs, and the
    fraction of the naive barrier the method removes, ``(naive − method)/naive`` of the means
    (None where the naive barrier is below 1e-6). ``original`` adds the barrier along the
    straight line in unprocessed coordinates (``barrier_loss_original``); ``layernorm`` adds the
    ``real-ln`` pairs (LayerNorm variants), where processing also folds biases and centres.
    Every line is straight in merge ``space`` (``experiments.barriers.coordinates.in_space``).
    ``function_ok`` and ``warnings`` (also per row) gather those of every barrier.

    ``executor="ray"`` trains each control pair and measures each control row (all its pairs)
    as Ray tasks, a row once its pairs are trained (on the cluster at ``address``, else a local
    one), and stores their checkpoints and barriers in ``cache`` first
    (:mod:`landscape.experiments.sweeps`); the table is then assembled from the cache as in the
    serial run.
    """
    o = options
    controls, rows, split, points, seeds = o.controls, o.rows, o.split, o.points, o.seeds
    original, layernorm, space = o.original, o.layernorm, o.space
    executor, address = o.executor, o.address
    device, cache, progress = context.device, context.cache, context.progress
    sweeps.check_executor(executor, address)
    for m, g in rows:  # an unknown method or group is named before the first row is looked at
        check_method(m, g)
    if not rows or aligns(rows[0][0]):
        raise LandscapeError("the first row must be the naive one (fractions are relative to it)")
    check_points(points)  # before any variant is trained
    t0 = time.perf_counter()
    check_space(space)
    entry = zoo_model(model)  # an unknown model is refused before anything is trained
    if space == "circuits":
        check_circuit_form(entry.config)
    cache = cache or Cache()
    pair_list = pairs_for(model, pairs, seeds)
    kinds = [_control(c) for c in controls] + ([LN_CONTROL] if layernorm else [])
    if executor == "ray":
        options = {"points": points, "split": split, "space": space, "original": original}
        _on_ray(model, kinds, pair_list, rows, options, address, cache,
                within(progress, 0.0, 0.9))  # fmt: skip
        progress = within(progress, 0.9, 1.0)
    total = len(kinds) * len(pair_list) * (len(rows) + 1)
    done = 0

    def tick(stage: str) -> None:
        nonlocal done
        done += 1
        tell(progress, stage, done, total)

    def inside(stage: str) -> Progress | None:
        """Progress inside the next tick (e.g. the steps of learned matching)."""
        return within(progress, done / total, (done + 1) / total, f"{stage} ")

    out_controls, out_rows = [], []
    for c in kinds:
        ckpts = []
        for sa, sb in pair_list:
            ckpts.append(control_pair(model, c, (sa, sb), device=device, cache=cache))
            tick(f"{c.name} {sa}-{sb} train")
        dists = [function_distance(a, b, split, device) for a, b in ckpts]
        per_row = []
        for method, group in rows:
            res = []
            for (a, b), (sa, sb) in zip(ckpts, pair_list, strict=True):
                stage = f"{c.name} {method}/{group} {sa}-{sb}"
                res.append(_pair_barriers(a, b, method, group, points=points, split=split,
                                          space=space, original=original, device=device,
                                          cache=cache, progress=inside(stage)))  # fmt: skip
                tick(stage)
            per_row.append(_row(c.name, method, group, res, original))
        naive = per_row[0]
        for r in per_row:
            r["fraction_removed"] = _fraction(naive["barrier_loss"], r["barrier_loss"])
            if original:
                r["fraction_removed_original"] = _fraction(
                    naive["barrier_loss_original"], r["barrier_loss_original"]
                )
        out_rows += per_row
        first = per_row[0]["results"]
        out_controls.append({
            "control": c.name,
            "description": c.description,
            "variant_a": c.variant_a,
            "variant_b": c.variant_b,
            "variant_b_description": VARIANTS[c.variant_b].description if c.variant_b else None,
            **{k: mean_sem([d[k] for d in dists])[0] for k in dists[0]},
            "endpoint_loss_a": mean_sem([r["endpoint_loss"][0] for r in first])[0],
            "endpoint_loss_b": mean_sem([r["endpoint_loss"][1] for r in first])[0],
            "endpoint_accuracy_a": mean_sem([r["endpoint_accuracy"][0] for r in first])[0],
            "endpoint_accuracy_b": mean_sem([r["endpoint_accuracy"][1] for r in first])[0],
            "own_task_accuracy_b": mean_sem(
                [b.meta["metrics"]["test_accuracy"] for _, b in ckpts])[0],
        })  # fmt: skip
    for r in out_rows:
        del r["results"]
    warnings = list(dict.fromkeys(w for r in out_rows for w in r["warnings"]))
    return {
        "model": model,
        "split": split,
        "space": space,
        "pairs": [list(p) for p in pair_list],
        "path_task": "every path and endpoint is scored on the normal task: the zoo "
                     f"{split} split with its true targets",
        "controls": out_controls,
        "rows": out_rows,
        "function_ok": not warnings,
        "warnings": warnings,
        "seconds": round(time.perf_counter() - t0, 2),
    }  # fmt: skip


def _pair_barriers(a: Checkpoint, b: Checkpoint, method: str, group: str, *, points: int,
                   split: str, space: str, original: bool, device: torch.device, cache: Cache,
                   progress: Progress | None = None) -> dict[str, Any]:  # fmt: skip
    """One pair's barrier under ``method``/``group``; with ``original`` also the barrier along
    the line in the unprocessed coordinates (``*_original``, warnings of both)."""
    req = BarrierRequest(a, b, method, group, points=points, split=split, space=space)
    r = measure_barrier(req, device=device, cache=cache, progress=progress).to_dict()
    if original:
        o = measure_barrier(replace(req, coordinates=ORIGINAL), device=device,
                            cache=cache).to_dict()  # fmt: skip
        r["barrier_loss_original"] = o["barrier_loss"]
        r["barrier_accuracy_original"] = o["barrier_accuracy"]
        r["warnings"] = list(dict.fromkeys(r["warnings"] + o["warnings"]))
        r["function_ok"] = r["function_ok"] and o["function_ok"]
    return r


def _train_pair(model: str, control: str, seeds: tuple[int, int], *, cache: Cache) -> None:
    """On a worker: one control pair, trained (or read) into ``cache``."""
    control_pair(model, control, seeds, cache=cache)


def _control_row(model: str, control: str, pairs: Sequence[tuple[int, int]], method: str,
                 group: str, *, cache: Cache, **options: Any) -> None:  # fmt: skip
    """On a worker: one control row, every pair's barriers measured into ``cache``."""
    for seeds in pairs:
        a, b = control_pair(model, control, seeds, cache=cache)
        _pair_barriers(a, b, method, group, device=CPU, cache=cache, **options)


def _on_ray(model: str, kinds: Sequence[Control], pairs: Sequence[tuple[int, int]],
            rows: Sequence[tuple[str, str]], options: dict[str, Any], address: str | None,
            cache: Cache, progress: Progress | None) -> None:  # fmt: skip
    """Every control pair's training, then every control row once its pairs are trained, as
    Ray tasks; their checkpoints and barriers stored in ``cache``."""
    with sweeps.sweep(address) as pool:
        refs = []
        for c in kinds:
            trained = [pool.submit(sweeps.Call(_train_pair, (model, c.name, seeds),
                                               kinds=("checkpoint",),
                                               what=f"training the {c.name} pair "
                                                    f"{seeds[0]}-{seeds[1]}"))
                       for seeds in pairs]  # fmt: skip
            refs += trained
            refs += [pool.submit(sweeps.Call(_control_row, (model, c.name, pairs, method, group),
                                             options, kinds=("barrier",),
                                             what=f"the {c.name} row {method}/{group}"),
                                 after=trained)
                     for method, group in rows]  # fmt: skip
        pool.gather(refs, cache, progress, "ray tasks")


def _fraction(naive: float, method: float) -> float | None:
    return None if naive < 1e-6 else (naive - method) / naive


def _row(control: str, method: str, group: str, res: list[dict[str, Any]], original: bool
         ) -> dict[str, Any]:  # fmt: skip
    row: dict[str, Any] = {"control": control, "method": method, "group": group,
                           **summarise_barriers(res)}  # fmt: skip
    if original:
        row["barrier_loss_original"] = mean_sem([r["barrier_loss_original"] for r in res])[0]
        row["barrier_accuracy_original"] = mean_sem(
            [r["barrier_accuracy_original"] for r in res])[0]  # fmt: skip
    row["split"] = res[0]["split"]
    row["results"] = res
    return row
