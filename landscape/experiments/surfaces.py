"""2-D loss surfaces: around one model along two directions (filter-normalised random ones or
the top two eigenvectors of the loss's Hessian there, :mod:`landscape.experiments.directions`; or
the plane of its own training path, :mod:`landscape.experiments.trajectories`), and over the plane
through three models (B and C aligned onto A) beyond their triangle (docs/design.md §1,
*Surfaces*). Around one model, training paths of zoo seeds are projected onto the surface's plane
with their projection errors (``trajectories``).

Both are grids of mixtures of three parameter sets, evaluated in chunks by
:func:`landscape.experiments.evaluation.evaluate_mixtures` (batched on the device, the mixing
bounded by its memory budget):

- *directions*: θ + α·d₁ + β·d₂ = (1 − α − β)·θ + α·(θ + d₁) + β·(θ + d₂), weights that sum
  to one, so the mixed embeddings are those of the mixed parameters whatever the embedding;
  (α, β) = (0, 0) is θ bit for bit;
- *plane*: θ = A + x·e₁ + y·e₂ with (e₁, e₂) the Gram–Schmidt basis of (B − A, C − A), which is
  the affine mixture (1 − s − t)·A + s·B + t·C of the plane's coordinates; the three models and
  the straight paths between them are rows of the same pass, so each model's point is that
  model bit for bit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch

from landscape.budget import check_grid_points
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import ALGO_VERSION, align
from landscape.experiments.barriers.endpoints import check_method, check_pair, check_split
from landscape.experiments.barriers.pipeline import health
from landscape.experiments.basins import barrier_from_curve
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.curvature import (
    CURVATURE_VERSION,
    check_hessian_memory,
    curvature_batch,
)
from landscape.experiments.directions import (
    HESSIAN_ADVICE,
    VECTORS,
    Vectors,
    direction_pair,
    grid_axis,
    hessian_directions,
    hessian_options,
)
from landscape.experiments.evaluation import EvalOptions, check_finite_loss, evaluate_mixtures
from landscape.experiments.trajectories import (
    check_trajectories,
    path_directions,
    seed_path,
    trajectory_every,
)
from landscape.experiments.trajectories import (
    trajectories as project_trajectories,
)
from landscape.fields import Fields
from landscape.matching import worst_check
from landscape.models import ModelConfig, Params
from landscape.models.train import SNAPSHOTS_VERSION
from landscape.progress import Progress, tell, within
from landscape.sources import Data, Source, data_of, label
from landscape.store.cache import Cache, digest_tensors

__all__ = [
    "DIRECTIONS",
    "PATH",
    "POINT",
    "RESULT",
    "SURFACE_VERSION",
    "TRAJECTORY",
    "Surface",
    "SurfaceOptions",
    "check_directions",
    "check_surface",
    "plane_coordinates",
    "surface",
    "surface_directions",
    "surface_plane",
]

SURFACE_VERSION = 1  # bump when directions, grids or their evaluation change
Directions = Literal["random", "hessian", "trajectory"]
DIRECTIONS: tuple[Directions, ...] = ("random", "hessian", "trajectory")


@dataclass(frozen=True)
class SurfaceOptions:
    """What a surface measures (:func:`surface`): a ``resolution`` × ``resolution`` grid of the
    ``split``. Around one model: along ``directions`` (:data:`DIRECTIONS`) drawn by
    ``directions_seed``, ``extent`` out on each side, ``vectors`` for the parameters that are
    no filter (:data:`~landscape.experiments.directions.VECTORS`), the Hessian's rows
    ``hessian_batch`` (None: curvature's batch), training paths of the zoo seeds
    ``trajectories`` projected onto the plane, their snapshots ``every`` steps (None: the
    model's spacing). Through three models: ``margin`` past the triangle (of its larger side),
    ``path_points`` points on each straight path between them."""

    resolution: int = 21
    split: str = "test"
    directions: Directions = "random"
    directions_seed: int = 0
    extent: float = 1.0
    vectors: Vectors = "zero"
    hessian_batch: int | None = None
    trajectories: Sequence[int] = ()
    every: int | None = None
    margin: float = 0.2
    path_points: int = 21


SURFACE = SurfaceOptions()  # the defaults

# What a surface result holds (landscape.fields): what :func:`surface` writes (its grid is a
# :class:`Surface`), and what the figures, the page and the command's summary read. ``model``,
# ``seeds`` and ``split`` are always written, yet optional: the figures also draw a bare
# :class:`Surface`, which names none of them. Through three models (``kind`` ``"plane"``):
# ``method``, ``group``, ``margin``, ``path_points``, ``function_check`` and
# ``function_check_a``, with ``paths`` between the models; around one (``"directions"``):
# ``directions``, ``directions_seed``, ``extent`` and ``vectors``, with ``hessian``
# (:data:`~landscape.experiments.directions.HESSIAN_RECORD`) or ``trajectory``
# (:data:`TRAJECTORY`) where the directions are theirs, and ``trajectories``
# (:data:`~landscape.experiments.trajectories.PROJECTED_PATH`) and ``every`` where training
# paths were projected.
RESULT = Fields(
    "surface result",
    ("kind", "resolution", "x", "y", "loss", "accuracy", "points", "checks", "function_ok",
     "warnings", "seconds", "cached", "device"),
    {"paths": [], "model": "", "seeds": [], "split": "test", "method": "", "group": "",
     "margin": None, "path_points": None, "function_check": None, "function_check_a": None,
     "directions": "random", "directions_seed": 0, "extent": None, "vectors": None,
     "hessian": None, "trajectory": None, "trajectories": [], "every": None},
)  # fmt: skip
# a model in the plane (``points``)
POINT = Fields("surface model point", ("label", "x", "y", "loss", "accuracy"))
# a straight path between two of the three models (``paths``), λ = 1 at the first-named
PATH = Fields("surface path",
              ("label", "x", "y", "loss", "accuracy", "barrier_loss", "barrier_accuracy"),
              {"lambdas": None})  # fmt: skip
# the training path whose plane the surface is drawn in (``trajectory``)
TRAJECTORY = Fields("surface trajectory plane", ("seed", "every", "steps", "explained", "scale"))


# ---------------------------------------------------------------- the plane through three models


def _flat_difference(x: Params, a: Params, names: Sequence[str]) -> torch.Tensor:
    return torch.cat([(x[k].to(torch.float64) - a[k].to(torch.float64)).reshape(-1).cpu()
                      for k in names])  # fmt: skip


def plane_coordinates(a: Params, b: Params, c: Params) -> tuple[float, float, float]:
    """The models' places in the plane of (B − A, C − A), orthonormalised by Gram–Schmidt:
    A = (0, 0), B = (‖B − A‖, 0), C = (⟨C − A, e₁⟩, ‖(C − A)⊥‖). Returns (B_x, C_x, C_y).
    Collinear models span no plane and are refused."""
    names = sorted(a)
    u, v = _flat_difference(b, a, names), _flat_difference(c, a, names)
    bx = float(u.norm())
    if bx == 0:
        raise LandscapeError("A and B are the same point: they span no plane")
    cx = float(v @ u) / bx
    cy = float((v - (cx / bx) * u).norm())
    if cy <= 1e-9 * max(bx, float(v.norm())):
        raise LandscapeError("A, B and C lie on one line: they span no plane")
    return bx, cx, cy


def _plane_weights(xs: torch.Tensor, ys: torch.Tensor, bx: float, cx: float, cy: float
                   ) -> torch.Tensor:  # fmt: skip
    """Affine weights (w_A, w_B, w_C) of plane points (x, y): [P, 3], rows summing to 1."""
    t = ys / cy
    s = (xs - t * cx) / bx
    return torch.stack([1.0 - s - t, s, t], dim=1)


# ---------------------------------------------------------------- results


@dataclass
class Surface:
    """Loss and accuracy over a grid of a plane in weight space.

    ``loss[i][j]`` is at (x[j], y[i]) (rows along y, as a contour draws them). ``points`` are
    the models in the plane, each ``{"label", "x", "y", "loss", "accuracy"}``; ``paths`` the
    straight lines between them (plane only), each ``{"label", "x", "y", "lambdas", "loss",
    "accuracy"}`` with lists along the line (λ = 1 at the first-named model) and its
    ``barrier_loss`` and ``barrier_accuracy`` (docs/design.md §1). Along Hessian directions,
    ``hessian`` is what :func:`hessian_directions` records (the eigenvalues among it); in the
    plane of a training path, ``trajectory`` what :func:`path_directions` records (with the
    path's ``seed``, ``every`` and ``steps``).
    """

    kind: Literal["directions", "plane"]
    x: list[float]
    y: list[float]
    loss: list[list[float]]
    accuracy: list[list[float]]
    points: list[dict[str, Any]] = field(default_factory=list)
    paths: list[dict[str, Any]] = field(default_factory=list)
    hessian: dict[str, Any] | None = None
    trajectory: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields, without ``hessian`` or ``trajectory`` where the directions are not
        theirs."""
        out = asdict(self)
        for key in ("hessian", "trajectory"):
            if out[key] is None:
                del out[key]
        return out


def _evaluate(cfg: ModelConfig, endpoints: Sequence[Params], weights: torch.Tensor, data: Data,
              split: str, device: torch.device, progress: Progress | None
              ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    ev = data.evaluation(split)
    return evaluate_mixtures(cfg, endpoints, weights, ev.inputs, ev.targets,
                             EvalOptions(**data.eval_options(cfg, ev.inputs)),
                             context=RunContext(device, progress=progress))  # fmt: skip


def _grid(values: torch.Tensor, n_y: int, n_x: int) -> list[list[float]]:
    return values.reshape(n_y, n_x).tolist()


def surface_directions(cfg: ModelConfig, params: Params, data: Data,
                       options: SurfaceOptions = SURFACE, *, name: str = "model",
                       hessian: dict[str, Any] | None = None,
                       pair: tuple[Params, Params] | None = None,
                       context: RunContext = RUN) -> Surface:  # fmt: skip
    """θ + α·d₁ + β·d₂ for α, β on ``grid_axis(-extent, extent, resolution)`` (the options'),
    d₁ and d₂ from :func:`direction_pair` (``directions="random"``, drawn by
    ``directions_seed``, with ``vectors``) or :func:`hessian_directions` (``"hessian"``:
    ``directions_seed`` draws the batch and Lanczos' start, ``hessian`` holds its ``split``,
    ``batch`` and ``dtype``), or ``pair`` when given (found already: the surface's record of
    them is then the caller's), evaluated on the options' ``split`` on the context's device; the
    model itself (the origin) is the point ``name``. The options of a plane are not read."""
    o = options
    seed, extent, resolution, vectors, split = (o.directions_seed, o.extent, o.resolution,
                                                o.vectors, o.split)  # fmt: skip
    directions, device, progress = o.directions, context.device, context.progress
    check_directions(directions)
    info = None
    if pair is not None:
        d1, d2 = pair
    elif directions == "trajectory":
        raise LandscapeError("a training path's directions come from its snapshots: pass them")
    elif directions == "hessian":
        tell(progress, "Hessian eigenvectors", 0)
        d1, d2, info = hessian_directions(cfg, params, data,
                                          hessian_options(seed, **(hessian or {})),
                                          vectors=vectors, context=RunContext(device))  # fmt: skip
        progress = within(progress, 0.5, 1.0)
    else:
        d1, d2 = direction_pair(params, seed, vectors)
    ends = [params, {k: params[k] + d1[k] for k in params}, {k: params[k] + d2[k] for k in params}]
    axis = grid_axis(-extent, extent, resolution)
    beta, alpha = torch.meshgrid(axis, axis, indexing="ij")  # (y, x)
    a, b = alpha.reshape(-1), beta.reshape(-1)
    grid = torch.stack([1.0 - a - b, a, b], dim=1)
    weights = torch.cat([grid, torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)])
    loss, acc = _evaluate(cfg, ends, weights, data, split, device, progress)
    n = resolution * resolution

    def where(i: int) -> str:
        return f"(α, β) = ({float(weights[i, 1]):.4g}, {float(weights[i, 2]):.4g}) around {name}"

    check_finite_loss(loss, where, split)
    origin = {"label": name, "x": 0.0, "y": 0.0, "loss": float(loss[n]),
              "accuracy": float(acc[n])}  # fmt: skip
    return Surface("directions", axis.tolist(), axis.tolist(), _grid(loss[:n], resolution,
                   resolution), _grid(acc[:n], resolution, resolution), [origin],
                   hessian=info)  # fmt: skip


def surface_plane(cfg: ModelConfig, a: Params, b: Params, c: Params, data: Data,
                  options: SurfaceOptions = SURFACE, *, names: Sequence[str] = ("A", "B", "C"),
                  context: RunContext = RUN) -> Surface:  # fmt: skip
    """The plane through A, B and C (:func:`plane_coordinates`) on a ``resolution`` ×
    ``resolution`` grid over the triangle's bounding box widened by ``margin`` times its larger
    side on every side, with the three straight paths of ``path_points`` points each (λ = 1 at
    the first-named end) and the three models, evaluated on ``split`` (the options') on the
    context's device. The options of a surface around one model are not read."""
    margin, resolution, path_points, split = (options.margin, options.resolution,
                                              options.path_points, options.split)  # fmt: skip
    device, progress = context.device, context.progress
    bx, cx, cy = plane_coordinates(a, b, c)
    side = max(bx, abs(cx), abs(bx - cx), cy)
    x0, x1 = min(0.0, cx) - margin * side, max(bx, cx) + margin * side
    y0, y1 = -margin * side, cy + margin * side
    xs, ys = grid_axis(x0, x1, resolution), grid_axis(y0, y1, resolution)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    grid = _plane_weights(gx.reshape(-1), gy.reshape(-1), bx, cx, cy)
    corner = torch.eye(3, dtype=torch.float64)
    lam = torch.linspace(1.0, 0.0, path_points, dtype=torch.float64)[:, None]
    edges = ((0, 1), (0, 2), (1, 2))
    # λ·first + (1 − λ)·second in barycentric weights: the ends are the corners exactly
    lines = [lam * corner[i] + (1 - lam) * corner[j] for i, j in edges]
    weights = torch.cat([grid, *lines])
    loss, acc = _evaluate(cfg, [a, b, c], weights, data, split, device, progress)
    n = resolution * resolution

    def where(i: int) -> str:
        w = ", ".join(f"{float(v):.4g}" for v in weights[i])
        return f"the point (w_A, w_B, w_C) = ({w}) of the plane through {', '.join(names)}"

    check_finite_loss(loss, where, split)
    place = torch.tensor([[0.0, 0.0], [bx, 0.0], [cx, cy]], dtype=torch.float64)
    paths, points = [], [None, None, None]
    for e, (i, j) in enumerate(edges):
        lo = n + e * path_points
        w = weights[lo : lo + path_points]
        xy = w @ place  # (points, 2)
        seg_loss, seg_acc = loss[lo : lo + path_points], acc[lo : lo + path_points]
        bar = barrier_from_curve(lam[:, 0], seg_loss, seg_acc)
        paths.append({"label": f"{names[i]}–{names[j]}", "x": xy[:, 0].tolist(),
                      "y": xy[:, 1].tolist(), "lambdas": lam[:, 0].tolist(),
                      "loss": seg_loss.tolist(), "accuracy": seg_acc.tolist(),
                      "barrier_loss": bar.barrier_loss,
                      "barrier_accuracy": bar.barrier_accuracy})  # fmt: skip
        for k, at in ((i, 0), (j, path_points - 1)):
            points[k] = {"label": names[k], "x": float(place[k, 0]), "y": float(place[k, 1]),
                         "loss": float(seg_loss[at]), "accuracy": float(seg_acc[at])}  # fmt: skip
    return Surface("plane", xs.tolist(), ys.tolist(), _grid(loss[:n], resolution, resolution),
                   _grid(acc[:n], resolution, resolution), points, paths)  # fmt: skip


# ---------------------------------------------------------------- the cached experiment


def check_directions(directions: str) -> None:
    """Refuse unknown directions of a surface around one model in one line."""
    if directions not in DIRECTIONS:
        raise LandscapeError(f"unknown directions {directions!r}; expected one of "
                             f"{', '.join(DIRECTIONS)}")  # fmt: skip


def _check_grid(resolution: int, extent: float, margin: float, path_points: int, plane: bool
                ) -> None:  # fmt: skip
    if resolution < 2:
        raise LandscapeError("--resolution must be at least 2")
    if not (extent > 0 and extent < float("inf")):
        raise LandscapeError(f"--extent must be a positive number, got {extent:g}")
    if not (margin >= 0 and margin < float("inf")):
        raise LandscapeError(f"--margin must be a non-negative number, got {margin:g}")
    if path_points < 2:
        raise LandscapeError("--path-points must be at least 2")
    # the grid, and the three paths or the origin: the line names the options that ask
    grid = resolution * resolution
    if plane:
        paths = 3 * path_points
        check_grid_points(grid + paths, f"--resolution {resolution} and --path-points "
                          f"{path_points} ask for {grid + paths} points ({grid} on the grid, "
                          f"{paths} on the three paths)")  # fmt: skip
    else:
        check_grid_points(grid + 1, f"--resolution {resolution} asks for {grid + 1} grid points")


def check_surface(seeds: Sequence[int], method: str = "weight", group: str = "orth",
                  options: SurfaceOptions = SURFACE, *, cfg: ModelConfig | None = None,
                  model: str | None = None) -> None:  # fmt: skip
    """Refuse a surface request in one line before anything is loaded (:func:`surface`'s
    arguments): the number of seeds, the method and group of a plane, the grid and its budget,
    with Hessian directions around a model of ``cfg`` (when it is known before loading) the
    Hessian's memory budget, and with training paths (``trajectories`` or trajectory
    directions) their model (``model``, a zoo model), seeds, spacing and snapshots' budget."""
    o = options
    resolution, extent, margin, path_points = o.resolution, o.extent, o.margin, o.path_points
    vectors, split, directions, hessian_batch = o.vectors, o.split, o.directions, o.hessian_batch
    trajectories, every = o.trajectories, o.every
    if len(seeds) not in (1, 3):
        raise LandscapeError("a surface needs one seed (--seed S) or three (--seeds A B C)")
    if len(seeds) == 3 and len(set(seeds)) < 3:
        raise LandscapeError(f"seeds repeat ({' '.join(map(str, seeds))}): a plane needs three "
                             "different models")  # fmt: skip
    if vectors not in VECTORS:
        raise LandscapeError(f"unknown vectors {vectors!r}; expected one of {', '.join(VECTORS)}")
    check_directions(directions)
    if len(seeds) == 3 and directions != "random":
        raise LandscapeError(f"directions {directions!r}: only for a surface around one model")
    if len(seeds) == 3 and trajectories:
        raise LandscapeError("training paths: only on a surface around one model (--seed); the "
                             "plane through three models is in aligned coordinates")  # fmt: skip
    paths = list(trajectories) or ([seeds[0]] if directions == "trajectory" else [])
    if every is not None and not paths:
        raise LandscapeError("--every: only with --trajectories or --directions trajectory")
    if directions == "trajectory" and vectors != "zero":
        raise LandscapeError("--vectors: only for random or Hessian directions (a path's plane "
                             "moves every parameter as the run did)")  # fmt: skip
    if hessian_batch is not None and hessian_batch < 1:
        raise LandscapeError("the Hessian's batch must be at least 1 row")
    if len(seeds) == 3:
        check_method(method, group)
    check_split(split)
    _check_grid(resolution, extent, margin, path_points, len(seeds) == 3)
    if directions == "hessian" and cfg is not None:
        check_hessian_memory(cfg, hessian_options(batch=hessian_batch), HESSIAN_ADVICE)
    if paths:
        check_trajectories(model, paths, every)


def _stored(d1: Params, d2: Params) -> dict[str, torch.Tensor]:
    return {**{f"d1.{k}": v for k, v in d1.items()}, **{f"d2.{k}": v for k, v in d2.items()}}


@in_context
def surface(
    model: str,
    seeds: Sequence[int],
    method: str = "weight",
    group: str = "orth",
    options: SurfaceOptions = SURFACE,
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """A loss surface of ``model``, cached (kind ``surface``); what it measures in ``options``
    (:class:`SurfaceOptions`), where it runs in ``context``.

    One seed: around that model along two directions (:func:`surface_directions`; ``extent``):
    filter-normalised random ones drawn with ``directions_seed`` (``vectors``), or with
    ``directions="hessian"`` the top two eigenvectors of the Hessian of the loss there
    (:func:`hessian_directions`: curvature's loss, on ``hessian_batch`` rows of the training
    split, by default curvature's batch, drawn by ``directions_seed``, float32 products; refused
    over the memory budget), which the result records under ``hessian`` (its ``eigenvalues``
    among it), or with ``directions="trajectory"`` the plane of the seed's own training path
    (:func:`~landscape.experiments.trajectories.path_directions` on its snapshots every
    ``every`` steps; α and β in units of the path's reach), recorded under ``trajectory``.
    Three seeds: the plane through A, B aligned to A and C aligned to A by ``method``/``group``
    (:func:`surface_plane`; ``margin``, ``path_points``). Either on a ``resolution`` ×
    ``resolution`` grid of the ``split``.

    Around one model, ``trajectories`` (zoo seeds; the seed itself by default with trajectory
    directions) are projected onto the surface's plane (:mod:`landscape.experiments.trajectories`:
    coordinates, projection errors, and each run's ``end_gap`` from its checkpoint), listed
    under ``trajectories``; the snapshots are trained once and cached (kind ``snapshots``).
    """
    o = options
    seeds = list(seeds)
    check_surface(seeds, method, group, o, model=model)
    resolution, split, directions, directions_seed = (o.resolution, o.split, o.directions,
                                                      o.directions_seed)  # fmt: skip
    extent, vectors, hessian_batch, trajectories, every = (o.extent, o.vectors, o.hessian_batch,
                                                           o.trajectories, o.every)  # fmt: skip
    margin, path_points = o.margin, o.path_points
    device, progress = context.device, context.progress
    plane = len(seeds) == 3
    paths = list(trajectories) or ([seeds[0]] if directions == "trajectory" else [])
    t0 = time.perf_counter()
    cache = context.cache or Cache()
    ckpts = [Source(model, s).load(device, cache) for s in seeds]
    for other in ckpts[1:]:
        check_pair(ckpts[0], other)
    data = data_of(ckpts[0])
    names = [label(x) for x in ckpts]
    inputs: dict[str, Any] = {
        "models": [digest_tensors(x.params) for x in ckpts],
        "cfg": ckpts[0].cfg.to_dict(),
        "resolution": resolution,
        "split": split,
        "data": data.key,
        "version": SURFACE_VERSION,
    }
    if plane:
        inputs.update(method=method, group=group, margin=margin, path_points=path_points,
                      matching_version=ALGO_VERSION)  # fmt: skip
    else:
        inputs.update(directions_seed=directions_seed, extent=extent, vectors=vectors)
    hessian: dict[str, Any] = {}
    if directions == "hessian":  # random directions keep the key they always had
        options = hessian_options(directions_seed, batch=hessian_batch)
        check_hessian_memory(ckpts[0].cfg, options, HESSIAN_ADVICE)
        rows = len(curvature_batch(data, options.split, options.batch, options.seed))
        hessian = {"split": options.split, "batch": hessian_batch, "dtype": options.dtype}
        # the entry keeps its two directions (for the paths drawn on it)
        inputs.update(directions="hessian", hessian={**hessian, "batch": rows},
                      curvature_version=CURVATURE_VERSION, kept=1)  # fmt: skip
    spacing = trajectory_every(model, every) if paths else None
    share = within(progress, 0.0, 0.8) if paths else progress
    origin, centre = ckpts[0].params, names[0]
    if directions == "trajectory":  # the path first: the surface is centred where it ends
        tell(share, f"training path of seed {seeds[0]}", 0)
        first_half = RunContext(device, cache, within(share, 0.0, 0.5))
        steps, points, _ = seed_path(model, seeds[0], spacing, context=first_half)
        share = within(share, 0.5, 1.0)
        origin = {k: v.to(ckpts[0].params[k]) for k, v in points[-1].items()}
        if digest_tensors(origin) != digest_tensors(ckpts[0].params):
            centre = f"{names[0]} (run here)"
        inputs.update(directions="trajectory", every=spacing, snapshots=SNAPSHOTS_VERSION,
                      centre=digest_tensors(origin))  # fmt: skip

    def around() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        ckpt, record, pair = ckpts[0], {}, None
        if directions == "random":
            tell(share, "evaluate", 0)
        elif directions == "hessian":
            tell(share, "Hessian eigenvectors", 0)
            d1, d2, info = hessian_directions(ckpt.cfg, ckpt.params, data,
                                              hessian_options(directions_seed, **hessian),
                                              vectors=vectors,
                                              context=RunContext(device))  # fmt: skip
            pair, record = (d1, d2), {"hessian": info}
        else:
            d1, d2, info = path_directions(points, origin)
            pair = tuple({k: d[k].to(origin[k]) for k in d} for d in (d1, d2))
            record = {"trajectory": {"seed": seeds[0], "every": spacing, "steps": steps,
                                     **info}}  # fmt: skip
        at = share if pair is None else within(share, 0.5, 1.0)
        s = surface_directions(ckpt.cfg, origin, data, o, name=centre, pair=pair,
                               context=RunContext(device, cache, at))  # fmt: skip
        return ({} if pair is None else _stored(*pair)), {**s.to_dict(), **record, "checks": {}}

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        if not plane:
            return around()
        a, b, c = ckpts
        tell(progress, "match B", 0)
        ab = align(a, b, method, group, data=data,
                   context=RunContext(device, cache, within(progress, 0.0, 0.25)))
        tell(progress, "match C", 0.25)
        ac = align(a, c, method, group, data=data,
                   context=RunContext(device, cache, within(progress, 0.25, 0.5)))
        checks = {
            f"{names[1]} aligned to {names[0]} ({method}/{group})": ab.info["function_check"],
            f"{names[2]} aligned to {names[0]} ({method}/{group})": ac.info["function_check"],
            f"{names[0]} processed for {group}": worst_check(
                [ab.info.get("function_check_a"), ac.info.get("function_check_a")]
            ),
        }
        tell(progress, "evaluate", 0.5)
        s = surface_plane(ab.cfg, ab.params_a, ab.params_b, ac.params_b, data, o, names=names,
                          context=RunContext(device, cache, within(progress, 0.5, 1.0)))
        worst = worst_check([ab.info["function_check"], ac.info["function_check"]])
        return {}, {**s.to_dict(), "function_check": worst, "checks": checks}

    entry, hit = cache.get_or_compute("surface", inputs, compute)
    meta = dict(entry.meta)
    if paths:
        tell(progress, "training paths", 0.8)
        if directions == "random":
            d1, d2 = direction_pair(origin, directions_seed, vectors)
        else:
            d1, d2 = ({k[3:]: v for k, v in entry.tensors.items() if k.startswith(p)}
                      for p in ("d1.", "d2."))  # fmt: skip
        ends = [ckpts[0] if s == seeds[0] else Source(model, s).load(device, cache)
                for s in paths]  # fmt: skip
        meta["trajectories"] = project_trajectories(
            model, paths, origin, d1, d2, every=spacing, ends=[e.params for e in ends],
            context=RunContext(device, cache, within(progress, 0.8, 1.0)))
        meta["every"] = spacing
        hit = hit and all(t["cached"] for t in meta["trajectories"])
    tell(progress, "done", 1)
    checks = meta.pop("checks")
    return {
        "model": model,
        "seeds": seeds,
        **(
            {"method": method, "group": group, "margin": margin, "path_points": path_points}
            if plane
            else {
                "directions": directions,
                "directions_seed": directions_seed,
                "extent": extent,
                "vectors": vectors,
            }
        ),
        "resolution": resolution,
        "split": split,
        **meta,
        "checks": checks,
        **({"function_check_a": checks[f"{names[0]} processed for {group}"]} if plane else {}),
        **health(checks),
        "seconds": round(time.perf_counter() - t0, 4),
        "cached": hit,
        "device": str(device),
    }
