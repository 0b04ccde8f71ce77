"""Results over a plane of weights: the triangle through three aligned models and the loss
surfaces (around one model, or over the plane through three)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.state.stored import stored_else_computed
from landscape.device import resolve_device
from landscape.progress import Progress
from landscape.store.cache import ReadOnlyCache


@st.cache_data(max_entries=64, show_spinner=False)
def _stored_triangle(
    model: str, seeds: tuple[int, int, int], method: str, group: str, resolution: int,
    split: str, device: str | None, space: str, joint: bool,
) -> dict[str, Any]:  # fmt: skip
    """:func:`triangle` read from the disk cache; :class:`NotCached` when it is not there."""
    from landscape import experiments

    options = experiments.TriangleOptions(resolution=resolution, split=split, space=space,
                                          joint=joint)  # fmt: skip
    return experiments.triangle(model, seeds, method, group, options,
                                context=experiments.RunContext(resolve_device(device),
                                                               ReadOnlyCache()))  # fmt: skip


def triangle(
    model: str,
    seeds: tuple[int, int, int],
    method: str,
    group: str,
    resolution: int,
    split: str,
    device: str | None,
    space: str = "weights",
    joint: bool = False,
    progress: Progress | None = None,
    *,
    compute: bool = True,
) -> dict[str, Any]:
    """Loss/accuracy over the barycentric grid of three aligned models, mixed in merge ``space``;
    ``joint`` aligns B and C together (learned matching). Memoised, else read from disk, else
    computed under ``progress`` (the matchings and the evaluation). Without ``compute`` (a
    cancelled run, or one waiting for a click), :class:`NotCached` when it is not stored."""
    from landscape import experiments

    args = (model, seeds, method, group, resolution, split, device, space, joint)
    if not compute:
        return _stored_triangle(*args)
    return stored_else_computed(
        lambda: _stored_triangle(*args),
        lambda: experiments.triangle(
            model, seeds, method, group,
            experiments.TriangleOptions(resolution=resolution, split=split, space=space,
                                        joint=joint),
            context=experiments.RunContext(resolve_device(device), progress=progress)),
    )  # fmt: skip


@st.cache_data(max_entries=32, show_spinner=False)
def surface(
    model: str, seeds: tuple[int, ...], method: str, group: str, resolution: int, split: str,
    device: str | None, extent: float, directions_seed: int, margin: float,
    directions: str = "random",
) -> dict[str, Any]:  # fmt: skip
    """A loss surface (``landscape.experiments.surfaces.surface``: one seed, around it along
    ``directions``, random or the Hessian's; three, the plane through them) read from the disk
    cache; :class:`NotCached` when it is not there yet (then :func:`compute_surface`)."""
    from landscape.experiments import RunContext
    from landscape.experiments.surfaces import surface as read

    return read(model, seeds, method, group, _surface_options(len(seeds), resolution, split,
                extent, directions_seed, margin, directions),
                context=RunContext(resolve_device(device), ReadOnlyCache()))  # fmt: skip


def compute_surface(
    model: str, seeds: tuple[int, ...], method: str, group: str, resolution: int, split: str,
    device: str | None, extent: float, directions_seed: int, margin: float,
    directions: str = "random", progress: Progress | None = None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`surface` computed (aligning the models of a plane first, or finding the Hessian's
    eigenvectors) under ``progress`` and stored, then read as the page reads it."""
    from landscape.experiments import RunContext
    from landscape.experiments.surfaces import surface as compute

    args = (model, seeds, method, group, resolution, split, device, extent, directions_seed,
            margin, directions)  # fmt: skip
    compute(model, seeds, method, group, _surface_options(len(seeds), resolution, split, extent,
            directions_seed, margin, directions),
            context=RunContext(resolve_device(device), progress=progress))  # fmt: skip
    return surface(*args)


def _surface_options(n: int, resolution: int, split: str, extent: float, directions_seed: int,
                     margin: float, directions: str = "random") -> Any:  # fmt: skip
    """The options of a surface around one model (``n`` = 1) or through three
    (``landscape.experiments.surfaces.SurfaceOptions``)."""
    from landscape.experiments.surfaces import SurfaceOptions

    if n == 1:
        return SurfaceOptions(resolution=resolution, split=split, directions=directions,
                              directions_seed=directions_seed, extent=extent)
    return SurfaceOptions(resolution=resolution, split=split, margin=margin)
