"""Results about the symmetries themselves: the eigenangles of the matching rotations, the
atlas of checkpoints and their gauge copies, the gauge sweep's parts and the transport table.
Each is read (memoised) from the disk cache, :class:`NotCached` when not there; its
``compute_`` twin computes and stores it under the page's progress, outside the memo."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st

from landscape.device import resolve_device
from landscape.experiments.gauge.runner import GaugeOptions
from landscape.progress import Progress
from landscape.store.cache import Cache, ReadOnlyCache


@st.cache_data(max_entries=32, show_spinner=False)
def eigenangles(
    model: str, seeds: tuple[int, int], learned: bool, device: str | None
) -> dict[str, Any]:
    """Eigenangle histograms; without ``learned`` only O_WM and the Haar reference (fast).
    Read from the disk cache (or the shipped results: ``experiments.eigenangle_view``);
    :class:`NotCached` when the result is not stored yet (then :func:`compute_eigenangles`,
    under a progress bar)."""
    from landscape.experiments import eigenangle_view

    return eigenangle_view(model, seeds, learned=learned, device=resolve_device(device),
                           cache=ReadOnlyCache())  # fmt: skip


def compute_eigenangles(
    model: str,
    seeds: tuple[int, int],
    learned: bool,
    device: str | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Compute :func:`eigenangles` (its matchings, when not cached) and store it on disk (not
    memoised, as :func:`compute_atlas`); ``progress`` follows learned matching step by step."""
    from landscape.experiments import eigenangle_view

    return eigenangle_view(model, seeds, learned=learned, device=resolve_device(device),
                           progress=progress)  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def atlas(
    model: str,
    seeds: tuple[int, ...],
    reference: int,
    copies: int,
    group: str,
    projection: str,
) -> dict[str, Any]:
    """Atlas coordinates (``landscape.experiments.atlas.atlas``) read from the disk cache;
    :class:`NotCached`
    when they are not there yet (then :func:`compute_atlas`)."""
    from landscape.experiments.atlas import AtlasOptions
    from landscape.experiments.atlas import atlas as read
    from landscape.experiments.context import RunContext

    options = AtlasOptions(reference=reference, copies=copies, group=group, projection=projection)
    return read(model, seeds, options, context=RunContext(cache=ReadOnlyCache()))


def compute_atlas(
    model: str,
    seeds: tuple[int, ...],
    reference: int,
    copies: int,
    group: str,
    projection: str,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Compute the atlas and store it on disk. Not memoised: a cached function would record the
    progress bar's updates and replay them in later runs, where that bar no longer exists.
    ``progress`` drives the page's bar."""
    from landscape.experiments.atlas import AtlasOptions
    from landscape.experiments.atlas import atlas as compute
    from landscape.experiments.context import RunContext

    options = AtlasOptions(reference=reference, copies=copies, group=group, projection=projection)
    return compute(model, seeds, options, context=RunContext(progress=progress))


@st.cache_data(max_entries=64, show_spinner=False)
def gauge_part(
    model: str, seed: int, part: str, options: GaugeOptions, device: str | None
) -> dict[str, Any]:
    """One part of the gauge sweep (``landscape.experiments.gauge.runner.gauge_sweep``;
    ``options``: its :class:`GaugeOptions`, whose ``parts`` are not read: ``part`` is the one)
    read from the disk cache; :class:`NotCached` when it is not there (exceptions are not
    memoised, so a later call sees the entry once :func:`compute_gauge_part` has stored it)."""
    return _gauge_sweep_part(model, seed, part, options, device, cache=ReadOnlyCache())


def compute_gauge_part(
    model: str,
    seed: int,
    part: str,
    options: GaugeOptions,
    device: str | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Compute (or read) one gauge-sweep part and store it on disk (``options`` as for
    :func:`gauge_part`). Not memoised here: a cached function would record the progress bar's
    updates and replay them in later runs, where that bar no longer exists; :func:`gauge_part`
    memoises the stored result."""
    return _gauge_sweep_part(model, seed, part, options, device, progress=progress)


def _gauge_sweep_part(
    model: str,
    seed: int,
    part: str,
    options: GaugeOptions,
    device: str | None,
    *,
    progress: Progress | None = None,
    cache: Cache | None = None,
) -> dict[str, Any]:
    from landscape.experiments.context import RunContext
    from landscape.experiments.gauge.runner import gauge_sweep

    out = gauge_sweep(model, seed, replace(options, parts=(part,)),
                      context=RunContext(resolve_device(device), cache, progress))  # fmt: skip
    return out[part]


@st.cache_data(max_entries=32, show_spinner=False)
def transport_table(
    model: str, seed: int, gauge_seed: int, device: str | None
) -> list[dict[str, Any]]:
    """Artifacts moved across a random B_d gauge
    (``landscape.experiments.transport.transport_table``),
    read from the disk cache; :class:`NotCached` when not there (as :func:`gauge_part`)."""
    from landscape.experiments.context import RunContext
    from landscape.experiments.transport import TransportOptions
    from landscape.experiments.transport import transport_table as table

    return table(model, seed, TransportOptions(gauge_seed=gauge_seed),
                 context=RunContext(resolve_device(device), ReadOnlyCache()))


def compute_transport_table(
    model: str,
    seed: int,
    gauge_seed: int,
    device: str | None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Compute (or read) the transport table and store it on disk (see
    :func:`compute_gauge_part` for why this is not memoised)."""
    from landscape.experiments.context import RunContext
    from landscape.experiments.transport import TransportOptions
    from landscape.experiments.transport import transport_table as table

    return table(model, seed, TransportOptions(gauge_seed=gauge_seed),
                 context=RunContext(resolve_device(device), progress=progress))
