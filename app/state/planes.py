"""Results over a plane of weights: the triangle through three aligned models and the loss
surfaces (around one model, or over the plane through three)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.state.stored import stored_else_computed
from landscape.device import resolve_device
from landscape.experiments.barriers.triangles import TriangleOptions
from landscape.experiments.surfaces import SurfaceOptions
from landscape.progress import Progress
from landscape.store.cache import ReadOnlyCache


@st.cache_data(max_entries=64, show_spinner=False)
def _stored_triangle(
    model: str, seeds: tuple[int, int, int], method: str, group: str, options: TriangleOptions,
    device: str | None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`triangle` read from the disk cache; :class:`NotCached` when it is not there."""
    from landscape import experiments

    return experiments.triangle(model, seeds, method, group, options,
                                context=experiments.RunContext(resolve_device(device),
                                                               ReadOnlyCache()))  # fmt: skip


def triangle(
    model: str,
    seeds: tuple[int, int, int],
    method: str,
    group: str,
    options: TriangleOptions,
    device: str | None,
    progress: Progress | None = None,
    *,
    compute: bool = True,
) -> dict[str, Any]:
    """Loss/accuracy over the barycentric grid of three aligned models
    (``experiments.triangle``; ``options``: its :class:`TriangleOptions`, the grid, the split,
    the merge ``space``, and ``joint``, B and C aligned together by learned matching).
    Memoised, else read from disk, else computed under ``progress`` (the matchings and the
    evaluation). Without ``compute`` (a cancelled run, or one waiting for a click),
    :class:`NotCached` when it is not stored."""
    from landscape import experiments

    args = (model, seeds, method, group, options, device)
    if not compute:
        return _stored_triangle(*args)
    return stored_else_computed(
        lambda: _stored_triangle(*args),
        lambda: experiments.triangle(
            model, seeds, method, group, options,
            context=experiments.RunContext(resolve_device(device), progress=progress)),
    )  # fmt: skip


@st.cache_data(max_entries=32, show_spinner=False)
def surface(
    model: str, seeds: tuple[int, ...], method: str, group: str, options: SurfaceOptions,
    device: str | None,
) -> dict[str, Any]:  # fmt: skip
    """A loss surface (``landscape.experiments.surfaces.surface``: one seed, around it along the
    options' ``directions``, random or the Hessian's; three, the plane through them aligned by
    ``method``/``group``; ``options``: its :class:`SurfaceOptions`) read from the disk cache;
    :class:`NotCached` when it is not there yet (then :func:`compute_surface`)."""
    from landscape.experiments import RunContext
    from landscape.experiments.surfaces import surface as read

    return read(model, seeds, method, group, options,
                context=RunContext(resolve_device(device), ReadOnlyCache()))


def compute_surface(
    model: str, seeds: tuple[int, ...], method: str, group: str, options: SurfaceOptions,
    device: str | None, progress: Progress | None = None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`surface` computed (aligning the models of a plane first, or finding the Hessian's
    eigenvectors) under ``progress`` and stored, then read as the page reads it."""
    from landscape.experiments import RunContext
    from landscape.experiments.surfaces import surface as compute

    compute(model, seeds, method, group, options,
            context=RunContext(resolve_device(device), progress=progress))
    return surface(model, seeds, method, group, options, device)
