"""Every Streamlit cache wrapper of the app lives here (docs/design.md §2).

Models go in ``st.cache_resource`` and are never mutated; results in ``st.cache_data``. The
library's disk cache sits underneath, so a restart or a second user sees results at once; the
in-memory layer makes a rerun with the same controls free. Arguments prefixed with ``_`` (progress
callbacks) are not hashed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from landscape.assets import home_curves_path
from landscape.device import resolve_device
from landscape.errors import LandscapeError
from landscape.experiments.barriers.pipeline import BarrierRequest
from landscape.models.zoo import ZOO, Checkpoint, data_identity, zoo_table
from landscape.progress import Progress
from landscape.sources import Source, family_data
from landscape.sources.zoo import available_seeds
from landscape.store.cache import Cache, NotCached, ReadOnlyCache
from landscape.threads import AUTO, resolve_threads

T = TypeVar("T")

# The pages pass the sidebar's device by name (hashable for st.cache_data); it is resolved here,
# once per call, and the library takes the torch.device.


@st.cache_data(ttl=5, show_spinner=False)
def zoo_status() -> list[dict[str, Any]]:
    """The zoo with every trained seed (shipped or cached) and its metrics, then the imported
    families (``imported: True``) with their members as seeds (no metrics: see
    :func:`family_metrics`)."""
    from landscape.store.families import families, member_rows

    rows = zoo_table()
    for r in rows:
        r["seeds"] = available_seeds(r["name"])
        r["imported"] = False
    for f in families():
        members = member_rows(f.name)
        rows.append({
            "name": f.name,
            "dataset": f.dataset,
            "architecture": f.architecture,
            "arch": f.arch,
            "parameters": f.parameters,
            "description": f"imported family of {len(f.members)} checkpoints",
            "seeds": [m for m in members if m["present"]],
            "missing": [m["path"] for m in members if not m["present"]],
            "imported": True,
        })  # fmt: skip
    return rows


@st.cache_data(ttl=30, max_entries=32, show_spinner=False)
def data_problem(name: str) -> str | None:
    """Why the evaluation data of a zoo model or imported family cannot be read here, in the
    library's one line; None when it can. A zoo model's files are only looked at (the Shakespeare
    text is read once); a family's data is read, as its every page needs it. Forgotten after a
    fix (:func:`clear_memory_caches`), and every 30 s, so data fetched from a terminal shows."""
    try:
        if name in ZOO:
            data_identity(ZOO[name])
        else:
            family_data(name)
    except LandscapeError as err:
        return str(err)
    except (OSError, ValueError) as err:  # a file that vanished or does not parse
        return f"{type(err).__name__}: {err}"
    return None


@st.cache_data(show_spinner=False)
def home_curves() -> dict[str, Any]:
    """The Home page's curves, shipped with the app (``python -m landscape.assets --home``): read
    once per server, no model loaded."""
    return json.loads(home_curves_path().read_text())


@st.cache_data(ttl=5, show_spinner=False)
def family_problems() -> list[str]:
    """Files in the families directory skipped as invalid (shown on the Models page)."""
    from landscape.store.families import family_problems

    return family_problems()


@st.cache_data(max_entries=16, show_spinner=False)
def family_metrics(name: str) -> list[dict[str, Any]]:
    """Members of a family with their test loss and accuracy (evaluated once, then on disk)."""
    from landscape.experiments import family_members

    return family_members(name)


@st.cache_resource(max_entries=64, show_spinner=False)
def checkpoint(model: str, seed: int | None) -> Checkpoint:
    return Source(model, seed).load(train_if_missing=False)  # never trains behind a page's back


@st.cache_data(max_entries=8, show_spinner=False)
def symmetry_audit(model: str, seed: int) -> list[dict[str, Any]]:
    """The measured symmetry table of one checkpoint (``landscape inspect --audit``)."""
    from landscape.symmetry import symmetry_table

    ckpt = checkpoint(model, seed)
    return symmetry_table(ckpt.cfg, ckpt.params)


@st.cache_resource(show_spinner=False)
def default_threads() -> int:
    """The sidebar's starting thread count, as the command line's default: ``$LANDSCAPE_THREADS``
    if set, else ``auto`` (once per server; the user's choice then lives in the session)."""
    return resolve_threads(os.environ.get("LANDSCAPE_THREADS", AUTO))


@st.cache_data(ttl=5, show_spinner=False)
def cache_info() -> dict[str, Any]:
    return Cache().info()


def stored_else_computed(read: Callable[[], T], compute: Callable[[], object]) -> T:
    """The app's one way to a stored result: ``read()`` (memoised in ``st.cache_data``, from the
    disk cache; :class:`NotCached` when it is not there), else ``compute()`` (which stores it on
    disk, under the page's progress: outside the memo, which must not draw on the page), then
    ``read()`` again, so that the memo holds it."""
    try:
        return read()
    except NotCached:
        compute()
        return read()


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
    from landscape.experiments.merging.operators import pair_merges

    return pair_merges(request, operators=operators, device=resolve_device(device), **how)


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
def _stored_curve(
    model: str, seeds: tuple[int, int], method: str, group: str, kind: str, steps: int,
    points: int, split: str, device: str | None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`curve` read from the disk cache; :class:`NotCached` when it is not there."""
    from landscape.experiments.barriers.curved import curve as curved

    return curved(model, seeds, method, group, kind=kind, steps=steps, points=points,
                  split=split, device=resolve_device(device), cache=ReadOnlyCache())  # fmt: skip


def curve(
    model: str,
    seeds: tuple[int, int],
    method: str,
    group: str,
    kind: str,
    steps: int,
    points: int,
    split: str,
    device: str | None,
    progress: Progress | None = None,
    *,
    compute: bool = True,
) -> dict[str, Any]:
    """One pair's trained curve beside its straight line, naive and aligned
    (``experiments.barriers.curved.curve``): memoised, else read from the disk cache, else
    computed under ``progress`` (the lines, the curves' training and evaluation) and read
    again. Without ``compute``, :class:`NotCached` when it is not stored."""
    from landscape.experiments.barriers.curved import curve as curved

    args = (model, seeds, method, group, kind, steps, points, split, device)
    if not compute:
        return _stored_curve(*args)
    return stored_else_computed(
        lambda: _stored_curve(*args),
        lambda: curved(model, seeds, method, group, kind=kind, steps=steps, points=points,
                       split=split, device=resolve_device(device), progress=progress),
    )  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def _stored_spawn(
    model: str, seed: int, at: tuple[int, ...], method: str, group: str, points: int,
    split: str, device: str | None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`spawn` read from the disk cache; :class:`NotCached` when a part is not there."""
    from landscape.experiments.spawn import spawn as spawned

    return spawned(model, at, seed=seed, method=method, group=group, points=points, split=split,
                   device=resolve_device(device), cache=ReadOnlyCache())  # fmt: skip


def spawn(
    model: str,
    seed: int,
    at: tuple[int, ...],
    method: str,
    group: str,
    points: int,
    split: str,
    device: str | None,
    progress: Progress | None = None,
    *,
    compute: bool = True,
) -> dict[str, Any]:
    """Children spawned from ``seed``'s run at the steps ``at`` and their barriers
    (``experiments.spawn.spawn``): memoised, else read from the disk cache, else computed under
    ``progress`` (the parent's snapshots, the children's training, the barriers) and read
    again. Without ``compute``, :class:`NotCached` when they are not stored."""
    from landscape.experiments.spawn import spawn as spawned

    args = (model, seed, at, method, group, points, split, device)
    if not compute:
        return _stored_spawn(*args)
    return stored_else_computed(
        lambda: _stored_spawn(*args),
        lambda: spawned(model, at, seed=seed, method=method, group=group, points=points,
                        split=split, device=resolve_device(device), progress=progress),
    )  # fmt: skip


# What this machine measured, for the cost of the next run (app.components.long_runs.ask_first):
# seconds per grid point of a triangle, by (model, split, space, device), from the grids
# evaluated here; and the triangles whose corners were aligned, by (model, seeds, method,
# group, space, joint): a grid of another size reuses their matchings.
GRID_SECONDS: dict[tuple, float] = {}
TRIANGLES_ALIGNED: set[tuple] = set()
# seconds learned matching took on a pair of a model here, by (model, device): from the
# Interpolation page's learned curves and the Eigenangles page's learned results
LEARNED_SECONDS: dict[tuple, float] = {}


# and the seconds per unit of the other long runs here, by (kind, model, device): "atlas" per
# checkpoint placed (by projection too), "curve" per training step of one curve, "merge" per
# merged point, "rounds" the barrier per round of a pair (by learned too)
RUN_SECONDS: dict[tuple, float] = {}


def measured(kind: str, *key: Any, seconds: float | None, units: float = 1) -> None:
    """Remember that ``units`` of a ``kind`` of run (keyed by ``key``) took ``seconds`` here."""
    if seconds is not None and seconds > 0 and units > 0:
        RUN_SECONDS[(kind, *map(str, key))] = float(seconds) / units


def expected(kind: str, *key: Any, units: float = 1) -> float | None:
    """The seconds ``units`` of a ``kind`` of run should take here (:func:`measured`), None
    when none was measured."""
    each = RUN_SECONDS.get((kind, *map(str, key)))
    return None if each is None else each * units


def measured_learned(model: str, device: str | None, seconds: float | None) -> None:
    """Remember how long learned matching took on a pair of ``model`` here."""
    if seconds is not None and seconds > 0:
        LEARNED_SECONDS[model, str(device)] = float(seconds)


def measured_triangle(r: dict[str, Any], device: str | None, joint: bool) -> None:
    """Remember what triangle result ``r`` says of this machine (:data:`GRID_SECONDS`)."""
    TRIANGLES_ALIGNED.add((r["model"], tuple(r["seeds"]), r["method"], r["group"], r["space"],
                           joint))  # fmt: skip
    n = len(r.get("points") or [])
    if r.get("eval_seconds") is not None and n and r.get("eval_device") == str(
        resolve_device(device)
    ):
        GRID_SECONDS[r["model"], r["split"], r["space"], str(device)] = r["eval_seconds"] / n


@st.cache_data(max_entries=64, show_spinner=False)
def _stored_triangle(
    model: str, seeds: tuple[int, int, int], method: str, group: str, resolution: int,
    split: str, device: str | None, space: str, joint: bool,
) -> dict[str, Any]:  # fmt: skip
    """:func:`triangle` read from the disk cache; :class:`NotCached` when it is not there."""
    from landscape import experiments

    return experiments.triangle(model, seeds, method, group, resolution=resolution, split=split,
                                space=space, joint=joint, device=resolve_device(device),
                                cache=ReadOnlyCache())  # fmt: skip


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
        lambda: experiments.triangle(model, seeds, method, group, resolution=resolution,
                                     split=split, space=space, joint=joint,
                                     device=resolve_device(device), progress=progress),
    )  # fmt: skip


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
def _stored_iterations(
    model: str, seeds: tuple[int, int], learned: bool, device: str | None
) -> dict[str, Any]:
    """:func:`iterations` read from the disk cache; :class:`NotCached` when a part is not
    there."""
    from landscape.experiments import iteration_barriers

    return iteration_barriers(model, seeds, learned=learned, device=resolve_device(device),
                              cache=ReadOnlyCache())  # fmt: skip


def iterations(
    model: str, seeds: tuple[int, int], learned: bool, device: str | None,
    progress: Progress | None = None, *, compute: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """The barrier after every weight-matching round (and learned-matching checkpoint) of a
    pair (``experiments.iteration_barriers``): memoised, else read from the disk cache, else
    computed under ``progress``. Without ``compute``, :class:`NotCached` when not stored."""
    from landscape.experiments import iteration_barriers

    if not compute:
        return _stored_iterations(model, seeds, learned, device)
    return stored_else_computed(
        lambda: _stored_iterations(model, seeds, learned, device),
        lambda: iteration_barriers(model, seeds, learned=learned,
                                   device=resolve_device(device), progress=progress),
    )  # fmt: skip


def iterations_seconds(r: dict[str, Any]) -> float:
    """The seconds a barrier-per-round result took to compute: its matchings and evaluations."""
    return sum(part.get("matching_seconds", 0.0) + part.get("evaluation_seconds", 0.0)
               for facts in (r.get("weight_matching", {}), r.get("learned_matching", {}))
               for part in facts.values())  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def _stored_widths(
    model: str, seed_a: int, seed_b: int, factors: tuple[int, ...], split: str,
    device: str | None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`widths` read from the disk cache; :class:`NotCached` when it is not there."""
    from landscape.experiments import width_barriers

    return width_barriers(model, seed_a, seed_b, factors=list(factors), split=split,
                          device=resolve_device(device), cache=ReadOnlyCache())  # fmt: skip


def widths(
    model: str, seed_a: int, seed_b: int, factors: tuple[int, ...], split: str,
    device: str | None, progress: Progress | None = None, *, compute: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Barriers between A and narrower versions of B (``experiments.width_barriers``):
    memoised, else read from the disk cache, else computed under ``progress`` (training each
    narrow B not stored, aligning, evaluating). Without ``compute``, :class:`NotCached` when
    not stored."""
    from landscape.experiments import width_barriers

    args = (model, seed_a, seed_b, factors, split, device)
    if not compute:
        return _stored_widths(*args)
    return stored_else_computed(
        lambda: _stored_widths(*args),
        lambda: width_barriers(model, seed_a, seed_b, factors=list(factors), split=split,
                               device=resolve_device(device), progress=progress),
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
    from landscape.experiments.atlas import atlas as read

    return read(
        model,
        seeds,
        reference=reference,
        copies=copies,
        group=group,
        projection=projection,
        cache=ReadOnlyCache(),
    )


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
    from landscape.experiments.atlas import atlas as compute

    return compute(
        model,
        seeds,
        reference=reference,
        copies=copies,
        group=group,
        projection=projection,
        progress=progress,
    )


@st.cache_data(max_entries=64, show_spinner=False)
def gauge_part(
    model: str,
    seed: int,
    part: str,
    draws: int,
    steps_grid: tuple[int, ...],
    trajectory_steps: int,
    trajectory_every: int,
    device: str | None,
) -> dict[str, Any]:
    """One part of the gauge sweep (``landscape.experiments.gauge.runner.gauge_sweep``) read
    from the disk cache;
    :class:`NotCached` when it is not there (exceptions are not memoised, so a later call sees
    the entry once :func:`compute_gauge_part` has stored it)."""
    return _gauge_sweep_part(
        model,
        seed,
        part,
        draws,
        steps_grid,
        trajectory_steps,
        trajectory_every,
        device,
        cache=ReadOnlyCache(),
    )


def compute_gauge_part(
    model: str,
    seed: int,
    part: str,
    draws: int,
    steps_grid: tuple[int, ...],
    trajectory_steps: int,
    trajectory_every: int,
    device: str | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Compute (or read) one gauge-sweep part and store it on disk. Not memoised here: a
    cached function would record the progress bar's updates and replay them in later runs,
    where that bar no longer exists; :func:`gauge_part` memoises the stored result."""
    return _gauge_sweep_part(
        model,
        seed,
        part,
        draws,
        steps_grid,
        trajectory_steps,
        trajectory_every,
        device,
        progress=progress,
    )


def _gauge_sweep_part(
    model: str,
    seed: int,
    part: str,
    draws: int,
    steps_grid: tuple[int, ...],
    trajectory_steps: int,
    trajectory_every: int,
    device: str | None,
    *,
    progress: Progress | None = None,
    cache: Cache | None = None,
) -> dict[str, Any]:
    from landscape.experiments.gauge.runner import gauge_sweep

    out = gauge_sweep(
        model,
        seed,
        draws=draws,
        steps_grid=steps_grid,
        trajectory_steps=trajectory_steps,
        trajectory_every=trajectory_every,
        parts=(part,),
        device=resolve_device(device),
        progress=progress,
        cache=cache,
    )
    return out[part]


@st.cache_data(max_entries=32, show_spinner=False)
def transport_table(
    model: str, seed: int, gauge_seed: int, device: str | None
) -> list[dict[str, Any]]:
    """Artifacts moved across a random B_d gauge
    (``landscape.experiments.transport.transport_table``),
    read from the disk cache; :class:`NotCached` when not there (as :func:`gauge_part`)."""
    from landscape.experiments.transport import transport_table as table

    return table(model, seed, gauge_seed=gauge_seed, device=resolve_device(device),
                 cache=ReadOnlyCache())  # fmt: skip


def compute_transport_table(
    model: str,
    seed: int,
    gauge_seed: int,
    device: str | None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Compute (or read) the transport table and store it on disk (see
    :func:`compute_gauge_part` for why this is not memoised)."""
    from landscape.experiments.transport import transport_table as table

    return table(model, seed, gauge_seed=gauge_seed, device=resolve_device(device),
                 progress=progress)  # fmt: skip


def clear_memory_caches() -> None:
    """Forget in-memory results (after training, importing or clearing the disk cache)."""
    st.cache_data.clear()
    checkpoint.clear()


# ---------------------------------------------------------------- the session's figures

FIGURES = "_session_figures"  # session key: {identity: ReportFigure}, in the order first drawn
LATEST = "_session_figures_latest"  # session key: {figure key: identity of its last drawing}
PAGE = "_session_page"  # session key: the title of the page this run draws
REPORT_LIMIT = 100  # figures the report keeps: past it, the one first drawn is dropped


def figure_registry() -> dict[str, Any]:
    """The session's figures by identity (:func:`register_figure`): every figure drawn this
    session (a :class:`landscape.plots.export.ReportFigure`), in the order first drawn. The dict
    itself, so that a download prepared on click sees the figures drawn after it was offered."""
    return st.session_state.setdefault(FIGURES, {})


def figure_identity(key: str, entry: Any) -> str:
    """What tells one drawing of a figure from another: its key on the page, its file name and
    its settings (another model, other seeds, methods or split make another figure)."""
    settings = json.dumps(entry.settings, sort_keys=True, default=str)
    return f"{key}\n{entry.name}\n{settings}"


def register_figure(key: str, entry: Any) -> None:
    """Remember the figure drawn under ``key``, for the export report. Every figure a page drew
    is kept: drawn under other settings (another model, seeds, methods) it joins the earlier
    ones, which stay; drawn again with the same (a rerun, a moved λ marker) it replaces its
    earlier version and keeps its place. At most :data:`REPORT_LIMIT` are kept, the first
    drawn dropped first."""
    registry = figure_registry()
    identity = figure_identity(key, entry)
    registry[identity] = entry
    st.session_state.setdefault(LATEST, {})[key] = identity
    while len(registry) > REPORT_LIMIT:
        del registry[next(iter(registry))]


def session_figures() -> list[Any]:
    """Every figure this session has drawn (its latest version), in the order first drawn."""
    return list(figure_registry().values())


def on_page(title: str) -> None:
    """Say which page this run draws (``app/main.py``, before the page runs): its figures are
    reported under its title."""
    st.session_state[PAGE] = title


def page_title() -> str:
    """The title of the page this run draws ("" before :func:`on_page`)."""
    return st.session_state.get(PAGE, "")


# ---------------------------------------------------------------- surface page


@st.cache_data(max_entries=32, show_spinner=False)
def surface(
    model: str, seeds: tuple[int, ...], method: str, group: str, resolution: int, split: str,
    device: str | None, extent: float, directions_seed: int, margin: float,
    directions: str = "random",
) -> dict[str, Any]:  # fmt: skip
    """A loss surface (``landscape.experiments.surfaces.surface``: one seed, around it along
    ``directions``, random or the Hessian's; three, the plane through them) read from the disk
    cache; :class:`NotCached` when it is not there yet (then :func:`compute_surface`)."""
    from landscape.experiments.surfaces import surface as read

    return read(model, seeds, method, group, **_surface_options(len(seeds), extent,
                directions_seed, margin, directions), resolution=resolution, split=split,
                device=resolve_device(device), cache=ReadOnlyCache())  # fmt: skip


def compute_surface(
    model: str, seeds: tuple[int, ...], method: str, group: str, resolution: int, split: str,
    device: str | None, extent: float, directions_seed: int, margin: float,
    directions: str = "random", progress: Progress | None = None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`surface` computed (aligning the models of a plane first, or finding the Hessian's
    eigenvectors) under ``progress`` and stored, then read as the page reads it."""
    from landscape.experiments.surfaces import surface as compute

    args = (model, seeds, method, group, resolution, split, device, extent, directions_seed,
            margin, directions)  # fmt: skip
    compute(model, seeds, method, group, **_surface_options(len(seeds), extent, directions_seed,
            margin, directions), resolution=resolution, split=split,
            device=resolve_device(device), progress=progress)  # fmt: skip
    return surface(*args)


def _surface_options(n: int, extent: float, directions_seed: int, margin: float,
                     directions: str = "random") -> dict[str, Any]:  # fmt: skip
    """The options of a surface around one model (``n`` = 1) or through three."""
    if n == 1:
        return {"extent": extent, "directions_seed": directions_seed, "directions": directions}
    return {"margin": margin}
