"""Barriers between two checkpoints that are not zoo models (issue "Real checkpoints").

``barrier_paths(paths_request(A, B, method, group, data=DataSpec(text=FILE)))`` loads two
checkpoints (Hugging Face directories or ``.gguf`` files through
:func:`landscape.models.importers.import_checkpoint`, or landscape-format directories written
by ``zoo.save_checkpoint_dir``), aligns B to A and measures the loss/accuracy barrier along
``θ(λ) = λ·θ_A + (1−λ)·π(θ_B)`` (λ = 1 is A, docs/design.md §1).
Typical use: two fine-tunes of one base model.

Evaluation data
---------------
- Language models: next-token loss and accuracy on non-overlapping windows of a local UTF-8 text
  file, encoded with A's ``tokenizer.json`` when its directory has one, else UTF-8 bytes or
  characters (:func:`landscape.data.text.token_corpus`; the result's ``tokens`` says which).
  Landscape-format character models use their own vocabulary. The ``test`` split is the last
  10% of the text; ``n_ctx`` tokens per window, at most ``max_windows`` windows.
- ViT and MLP classifiers: an image data set, ``data="digits"`` (8×8) or ``"fashion"``
  (28×28 Fashion-MNIST, ``data_dir``), which must fit the model's input (grey images, image
  size, at least 10 classes); anything else is refused in one line.

Memory
------
A pair holds about three copies of one model's parameters at its peak, not five. Tensors are
read from safetensors with plain file reads, one at a time (``models.importers``: a memory
map would keep every page it touched resident), and converted as they come. Weight matching
takes over the loaded endpoints (``consume``, ``landscape.matching.match``): the probe logits
of both originals are taken first, each original is dropped as soon as it is processed, and
the aligned B is formed one parameter at a time while the processed B is emptied; the
similarities are built one touched parameter at a time. The curve is evaluated one λ at a time
(a single interpolated copy beside the processed A and the aligned B), in batches of windows
sized so that one batch's logits stay near ``LOGIT_BUDGET`` elements, under
``torch.no_grad``. Parameters are float32 on the CPU; on CUDA weight matching runs on the GPU
(the processed pair moved there once, products and SVDs in float64, only assignments on the
host) and ``dtype="bfloat16"`` halves the evaluation's memory. Other methods keep the originals
beside the processed copies.

Results are cached as one entry of the barrier pipeline
(``experiments.barriers.pipeline.measure_barrier``)
keyed by the weight digests of A and B, the configuration, method, group, data identity and
evaluation settings; the matching itself is not stored (two more copies of large weights).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from landscape.errors import LandscapeError
from landscape.experiments.barriers.pipeline import CURVE, measure_barrier, peak_rss_mb
from landscape.experiments.barriers.request import BarrierRequest, refuse_unread
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.fields import Fields
from landscape.matching import declaring, method_of
from landscape.models.importers import describe
from landscape.sources import (
    DATASETS,
    LOGIT_BUDGET,
    DataSpec,
    Source,
    check_same_architecture,
    eval_batch_size,
    load_any,
)

__all__ = [
    "AM_TOKENS",
    "PAIR_BARRIER",
    "DATASETS",
    "LOGIT_BUDGET",
    "barrier_paths",
    "paths_request",
    "check_same_architecture",
    "eval_batch_size",
    "load_any",
    "peak_rss_mb",
]

AM_TOKENS = 2048  # positions whose activations activation matching correlates

# What a pair-barrier result holds (landscape.fields): what :func:`barrier_paths` writes and the
# command's summary reads; ``data`` is what was evaluated (its note), ``matching`` the matching's
# seconds, rounds, objective, kinds and det_flips.
PAIR_BARRIER = Fields(
    "pair-barrier result",
    ("a", "b", "method", "group", "split", "space", "architecture", "parameters", "data", *CURVE,
     "function_check", "function_check_a", "matching", "windows", "batches_per_lambda",
     "compute_seconds", "compute_peak_rss_mb", "function_ok", "warnings", "seconds", "cached",
     "device", "dtype", "peak_rss_mb"),
)  # fmt: skip


def paths_request(
    path_a: str | os.PathLike,
    path_b: str | os.PathLike,
    method: str = "weight",
    group: str = "perm",
    *,
    data: DataSpec | None = None,
    points: int = 11,
    max_rounds: int | None = None,
    **request: Any,
) -> BarrierRequest:
    """The request for two checkpoint paths evaluated on ``data`` (None: none named; ``text``,
    ``n_ctx`` and ``max_windows`` of a language model, the image data set ``data`` in
    ``data_dir``; activation matching correlates :data:`AM_TOKENS` positions), at ``points``
    values of λ.
    ``max_rounds`` caps weight matching's rounds (None: its default; other methods refuse it).
    ``request``: the rest of :class:`BarrierRequest` that :func:`barrier_paths` reads
    (``split``, ``space``, ``dtype``, ``seed``)."""
    owners = declaring("max_rounds")  # weight matching's setting
    if max_rounds is not None and method_of(method) not in owners:
        titles = " or ".join(m.title for m in owners)
        raise LandscapeError(f"--max-rounds is for {titles}, not {method}")
    options = None if max_rounds is None else {"max_rounds": max_rounds}
    data = data or DataSpec()
    spec = replace(data, text=None if data.text is None else str(data.text),
                   activation_tokens=AM_TOKENS)  # fmt: skip
    return BarrierRequest(Source(str(path_a), data=spec), Source(str(path_b), data=spec),
                          method, group, options, points, store_matching=False,
                          **request)  # fmt: skip


@in_context
def barrier_paths(request: BarrierRequest, *, context: RunContext = RUN) -> dict[str, Any]:
    """Align B to A with the request's method under its group and measure the barrier (module
    docstring); the request's endpoints are checkpoint paths with their data
    (:func:`paths_request`). The matching is not stored apart (``store_matching`` off).

    Returns the keys of ``experiments.barrier`` (``lambdas``, ``loss``, ``accuracy``,
    ``barrier_loss``, ``barrier_accuracy``, ``endpoint_loss`` [A, B], ``endpoint_accuracy``,
    ``function_check``, ``seconds``, ``cached``, ``device``) and the pair's facts: ``a``, ``b``,
    ``space``, ``architecture``, ``parameters``, ``data`` (what was evaluated and how it was
    encoded), ``windows``, ``matching`` (rounds, objective, seconds) and ``peak_rss_mb``; the
    function checks of aligned B and processed A (``function_check``, ``function_check_a``),
    ``function_ok`` and ``warnings`` (one line per check that is NaN or above the tolerance).
    ``space``: the merge space of the line (``experiments.barriers.coordinates.in_space``).
    A NaN or infinite loss on the line is a LandscapeError naming the λ. Points, windows and
    the text are checked against the memory budget (``landscape.budget``) before work starts.
    """
    if not all(isinstance(x, Source) for x in (request.a, request.b)):
        raise LandscapeError("pair-barrier compares two checkpoint paths: A and B")
    refuse_unread(
        request,
        "pair-barrier",
        ("method", "group", "options", "points", "split", "space", "dtype", "seed"),
    )
    r = replace(request, store_matching=False)
    path_a, path_b = r.a.model, r.b.model  # type: ignore[union-attr]
    method, group, split, space, dtype = r.method, r.group, r.split, r.space, r.dtype
    device = context.device
    run = measure_barrier(r, device=device, cache=context.cache, progress=context.progress)
    e = run.entry
    matching = {**e["matching"], "seconds": round(e["matching"]["seconds"], 4)}
    health = run.to_dict()
    return {
        "a": str(path_a),
        "b": str(path_b),
        "method": method,
        "group": group,
        "split": split,
        "space": space,
        "architecture": describe(run.cfg, run.meta.get("model_type", "")),
        "parameters": run.parameters,
        "data": run.data.note,
        **e["curve"],
        "function_check": e["function_check"],
        "function_check_a": e.get("function_check_a"),
        "matching": matching,
        "windows": e["windows"],
        "batches_per_lambda": e["batches_per_lambda"],
        "compute_seconds": e["compute_seconds"],
        "compute_peak_rss_mb": e["compute_peak_rss_mb"],
        "function_ok": health["function_ok"],
        "warnings": health["warnings"],
        "seconds": round(run.seconds, 4),
        "cached": run.cached,
        "device": str(device),
        "dtype": dtype,
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
