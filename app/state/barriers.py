"""Barriers along lines and paths between two models: the interpolation curve, the merge
operators, the trained curve, the curvature along the line, spawned children, narrower models,
the barrier per matching round, and the Llama ablation as far as it is stored.

The pages pass the sidebar's device by name (hashable for st.cache_data); it is resolved here,
once per call, and the library takes the torch.device.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.state.stored import stored_else_computed
from landscape.device import resolve_device
from landscape.experiments.barriers.curved import CurveOptions
from landscape.experiments.barriers.matrix import MatrixOptions
from landscape.experiments.barriers.request import BarrierRequest
from landscape.experiments.spawn import SpawnOptions
from landscape.progress import Progress
from landscape.store.cache import NotCached, ReadOnlyCache


@st.cache_data(max_entries=512, show_spinner=False)
def _stored_barrier(request: BarrierRequest, device: str | None) -> dict[str, Any]:
    """:func:`barrier` read from the disk cache; :class:`NotCached` when it is not there."""
    return _measure(request, device, cache=ReadOnlyCache())


def _measure(request: BarrierRequest, device: str | None, **how: Any) -> dict[str, Any]:
    from landscape.experiments import measure_barrier

    return measure_barrier(request, device=resolve_device(device), **how).to_seeds_dict()


def barrier(
    request: BarrierRequest, device: str | None, progress: Progress | None = None,
    *, compute: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """One interpolation curve and its barriers (``experiments.measure_barrier`` of
    ``request``, as ``landscape barrier`` writes it): memoised by the request, else read from
    the disk cache, else computed under ``progress`` (its matching and evaluation). Without
    ``compute`` (a cancelled run), :class:`NotCached` when it is not stored."""
    if not compute:
        return _stored_barrier(request, device)
    return stored_else_computed(
        lambda: _stored_barrier(request, device),
        lambda: _measure(request, device, progress=progress),
    )


@st.cache_data(max_entries=16, show_spinner=False)
def _stored_merges(
    request: BarrierRequest, operators: tuple[str, ...], device: str | None
) -> dict[str, Any]:
    """:func:`merges` read from the disk cache; :class:`NotCached` when a point is not there."""
    return _merge(request, operators, device, cache=ReadOnlyCache())


def _merge(
    request: BarrierRequest, operators: tuple[str, ...], device: str | None, **how: Any
) -> dict[str, Any]:
    from landscape.experiments import RunContext
    from landscape.experiments.merging.operators import MergesOptions, pair_merges

    return pair_merges(request, MergesOptions(operators=operators),
                       context=RunContext(resolve_device(device), **how))


def merges(
    request: BarrierRequest,
    operators: tuple[str, ...],
    device: str | None,
    progress: Progress | None = None,
    *,
    compute: bool = True,
) -> dict[str, Any]:
    """One pair's merge operators beside the request's line, naive and aligned
    (``experiments.merging.operators.pair_merges``): memoised by the request, else read from
    the disk cache, else computed under ``progress`` (one mergekit run per missing point).
    Without ``compute``, :class:`NotCached` when a point is not stored."""
    if not compute:
        return _stored_merges(request, operators, device)
    return stored_else_computed(
        lambda: _stored_merges(request, operators, device),
        lambda: _merge(request, operators, device, progress=progress),
    )


@st.cache_data(max_entries=16, show_spinner=False)
def _stored_curvature(
    model: str, seeds: tuple[int, int], method: str, group: str, options: dict[str, Any],
    device: str | None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`curvature` read from the disk cache; :class:`NotCached` when it is not there."""
    from landscape.experiments.curvature import curvature as measured_curvature

    return measured_curvature(model, seeds, method, group, device=resolve_device(device),
                              cache=ReadOnlyCache(), **options)  # fmt: skip


def curvature(
    model: str,
    seeds: tuple[int, int],
    method: str,
    group: str,
    options: dict[str, Any],
    device: str | None,
    progress: Progress | None = None,
    *,
    compute: bool = True,
) -> dict[str, Any]:
    """The top Hessian eigenvalues and trace along one pair's line, naive and aligned
    (``experiments.curvature.curvature``; ``options``: its ``CurvatureOptions`` fields):
    memoised, else read from the disk cache, else computed under ``progress`` (the matching,
    then the Hessian-vector products point by point) and read again. Without ``compute``,
    :class:`NotCached` when it is not stored."""
    from landscape.experiments.curvature import curvature as measured_curvature

    args = (model, seeds, method, group, options, device)
    if not compute:
        return _stored_curvature(*args)
    return stored_else_computed(
        lambda: _stored_curvature(*args),
        lambda: measured_curvature(model, seeds, method, group, device=resolve_device(device),
                                   progress=progress, **options),
    )  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def _stored_curve(request: BarrierRequest, options: CurveOptions, device: str | None
                  ) -> dict[str, Any]:  # fmt: skip
    """:func:`curve` read from the disk cache; :class:`NotCached` when it is not there."""
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.curved import curve as curved

    return curved(request, options, context=RunContext(resolve_device(device), ReadOnlyCache()))


def curve(
    request: BarrierRequest,
    options: CurveOptions,
    device: str | None,
    progress: Progress | None = None,
    *,
    compute: bool = True,
) -> dict[str, Any]:
    """The trained curve of ``request``'s pair beside its straight line, naive and aligned
    (``experiments.barriers.curved.curve``; ``options``: its :class:`CurveOptions`): memoised
    by the request and options, else read from the disk cache, else computed under
    ``progress`` (the lines, the curves' training and evaluation) and read again. Without
    ``compute``, :class:`NotCached` when it is not stored."""
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.curved import curve as curved

    if not compute:
        return _stored_curve(request, options, device)
    return stored_else_computed(
        lambda: _stored_curve(request, options, device),
        lambda: curved(request, options,
                       context=RunContext(resolve_device(device), progress=progress)),
    )  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def _stored_spawn(
    model: str, seed: int, at: tuple[int, ...], options: SpawnOptions, device: str | None
) -> dict[str, Any]:
    """:func:`spawn` read from the disk cache; :class:`NotCached` when a part is not there."""
    from landscape.experiments import RunContext
    from landscape.experiments.spawn import spawn as spawned

    return spawned(model, at, options, seed=seed,
                   context=RunContext(resolve_device(device), ReadOnlyCache()))


def spawn(
    model: str,
    seed: int,
    at: tuple[int, ...],
    options: SpawnOptions,
    device: str | None,
    progress: Progress | None = None,
    *,
    compute: bool = True,
) -> dict[str, Any]:
    """Children spawned from ``seed``'s run at the steps ``at`` and their barriers
    (``experiments.spawn.spawn``; ``options``: its :class:`SpawnOptions`): memoised, else read
    from the disk cache, else computed under ``progress`` (the parent's snapshots, the
    children's training, the barriers) and read again. Without ``compute``,
    :class:`NotCached` when they are not stored."""
    from landscape.experiments import RunContext
    from landscape.experiments.spawn import spawn as spawned

    args = (model, seed, at, options, device)
    if not compute:
        return _stored_spawn(*args)
    return stored_else_computed(
        lambda: _stored_spawn(*args),
        lambda: spawned(model, at, options, seed=seed,
                        context=RunContext(resolve_device(device), progress=progress)),
    )  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def _stored_widths(
    model: str, seed_a: int, seed_b: int, factors: tuple[int, ...], split: str,
    device: str | None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`widths` read from the disk cache; :class:`NotCached` when it is not there."""
    from landscape.experiments import RunContext, WidthOptions, width_barriers

    return width_barriers(model, seed_a, seed_b, WidthOptions(factors=list(factors), split=split),
                          context=RunContext(resolve_device(device), ReadOnlyCache()))


def widths(
    model: str, seed_a: int, seed_b: int, factors: tuple[int, ...], split: str,
    device: str | None, progress: Progress | None = None, *, compute: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Barriers between A and narrower versions of B (``experiments.width_barriers``):
    memoised, else read from the disk cache, else computed under ``progress`` (training each
    narrow B not stored, aligning, evaluating). Without ``compute``, :class:`NotCached` when
    not stored."""
    from landscape.experiments import RunContext, WidthOptions, width_barriers

    args = (model, seed_a, seed_b, factors, split, device)
    if not compute:
        return _stored_widths(*args)
    return stored_else_computed(
        lambda: _stored_widths(*args),
        lambda: width_barriers(model, seed_a, seed_b,
                               WidthOptions(factors=list(factors), split=split),
                               context=RunContext(resolve_device(device), progress=progress)),
    )  # fmt: skip


def narrow_stored(model: str, factor: int, seed: int, device: str | None) -> bool:
    """Whether the narrow version (width d/``factor``) of seed ``seed`` is trained and stored."""
    from landscape.experiments.barriers.widths import narrow_checkpoint

    try:
        narrow_checkpoint(model, factor, seed, device=resolve_device(device),
                          cache=ReadOnlyCache())  # fmt: skip
    except NotCached:
        return False
    return True


@st.cache_data(max_entries=16, show_spinner=False)
def _stored_iterations(
    model: str, seeds: tuple[int, int], learned: bool, device: str | None
) -> dict[str, Any]:
    """:func:`iterations` read from the disk cache; :class:`NotCached` when a part is not
    there."""
    from landscape.experiments import IterationOptions, RunContext, iteration_barriers

    return iteration_barriers(model, seeds, IterationOptions(learned=learned),
                              context=RunContext(resolve_device(device), ReadOnlyCache()))


def iterations(
    model: str, seeds: tuple[int, int], learned: bool, device: str | None,
    progress: Progress | None = None, *, compute: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """The barrier after every weight-matching round (and learned-matching checkpoint) of a
    pair (``experiments.iteration_barriers``): memoised, else read from the disk cache, else
    computed under ``progress``. Without ``compute``, :class:`NotCached` when not stored."""
    from landscape.experiments import IterationOptions, RunContext, iteration_barriers

    if not compute:
        return _stored_iterations(model, seeds, learned, device)
    return stored_else_computed(
        lambda: _stored_iterations(model, seeds, learned, device),
        lambda: iteration_barriers(model, seeds, IterationOptions(learned=learned),
                                   context=RunContext(resolve_device(device),
                                                      progress=progress)),
    )  # fmt: skip


def iterations_seconds(r: dict[str, Any]) -> float:
    """The seconds a barrier-per-round result took to compute: its matchings and evaluations."""
    return sum(part.get("matching_seconds", 0.0) + part.get("evaluation_seconds", 0.0)
               for facts in (r.get("weight_matching", {}), r.get("learned_matching", {}))
               for part in facts.values())  # fmt: skip


@st.cache_data(max_entries=4, show_spinner=False)
def _stored_ablation() -> dict[str, Any]:
    from landscape.experiments.barriers.ablation import stored_ablation

    result = stored_ablation()
    if result is None:  # raised, so not remembered: entries stored later are read
        raise NotCached("ablation")
    return result


def ablation() -> dict[str, Any] | None:
    """The Llama ablation's default entries as far as they are stored (``landscape ablation``,
    read from the disk cache or the shipped results, each entry with the widest set of seeds
    stored); None when no entry is. Never computed here: its entries train for hours."""
    try:
        return _stored_ablation()
    except NotCached:
        return None


def barrier_matrix(
    model: str, seeds: list[int], method: str, group: str, options: MatrixOptions,
    device: str | None, progress: Progress | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The barrier of every pair of ``seeds`` (``experiments.barriers.matrix.barrier_matrix``;
    ``options``: its :class:`MatrixOptions`), each pair read from the disk cache or computed
    under ``progress``. Not memoised: the page keeps the result it asked for in its session."""
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.matrix import barrier_matrix as matrix

    return matrix(model, seeds, method, group, options,
                  context=RunContext(resolve_device(device), progress=progress))


def aligned_archive(
    model: str, seeds: tuple[int, int], method: str, group: str, *, merge: float | None,
    split: str, device: str | None, progress: Progress | None = None,
) -> tuple[bytes, dict[str, Any]]:  # fmt: skip
    """B aligned to A (or the merge at λ = ``merge``) written in B's own format and zipped, with
    the checks of the written files (``experiments.merging.export.aligned_archive``). Not
    memoised: the page keeps the bytes it prepared in its session."""
    from landscape.experiments import RunContext
    from landscape.experiments.merging.export import AlignedOptions
    from landscape.experiments.merging.export import aligned_archive as archive

    return archive(model, seeds, method, group, AlignedOptions(merge=merge, split=split),
                   context=RunContext(resolve_device(device), progress=progress))
