"""The gauge sweep as one call (:func:`gauge_sweep`): its parts
(:mod:`landscape.experiments.gauge.parts`) run in order or as Ray
draws, each part cached under the model's weights and its arguments.

``executor="ray"`` cuts every part into independent draws (:data:`_DRAWS`: a (group, draw) of the
scramble and the claims, a draw of the recovery; the table and the trajectory are one task each),
runs the ones not yet cached on a cluster (:mod:`landscape.experiments.sweeps`) and assembles each
part from its draws as the serial function of the part does.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from landscape.device import CPU
from landscape.errors import GroupNotAdmitted, LandscapeError
from landscape.experiments import sweeps
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.gauge.parts import (
    GAUGE_VERSION,
    Claims,
    check_kept_checkpoints,
    check_sweep_args,
    claim_check,
    draw_units,
    recovery_draw,
    recovery_lr,
    recovery_result,
    recovery_under_drift,
    scramble_result,
    scramble_row,
    scramble_test,
    trajectory_transport,
)
from landscape.fields import Fields
from landscape.models.checkpoint import Checkpoint
from landscape.progress import Progress
from landscape.sources import Source
from landscape.store.cache import Cache
from landscape.symmetry import resid_blocked, symmetry_table
from landscape.tasks import Task, load_task, task_source

__all__ = ["GAUGE", "GAUGE_SWEEP", "PARTS", "SYMMETRY_TABLE", "GaugeOptions", "gauge_sweep"]

PARTS = ("table", "scramble", "recovery", "trajectory", "claims")

# What a gauge sweep holds (landscape.fields): what :func:`gauge_sweep` writes, one field per part
# asked (``options.parts``; a part not asked is absent): ``table`` a SYMMETRY_TABLE, the others
# the results of :mod:`landscape.experiments.gauge.results` (SCRAMBLE, RECOVERY, TRAJECTORY,
# CLAIMS), each with its ``seconds``
GAUGE_SWEEP = Fields("gauge sweep", ("model", "seed", "version"), dict.fromkeys(PARTS))
# the ``table`` part: the symmetry table's rows (landscape.symmetry.table.SYMMETRY_ROW), and the
# seconds they took (written by the sweep; absent from :func:`_table_part`'s own result)
SYMMETRY_TABLE = Fields("symmetry table", ("rows",), {"seconds": None})


@dataclass(frozen=True)
class GaugeOptions:
    """What a gauge sweep measures and how its work is spread (:func:`gauge_sweep`): the
    ``parts`` (of :data:`PARTS`), ``draws`` random elements per group and recovery, the
    recovery's fine-tuning steps ``steps_grid`` at ``lr`` (None: the model's own rate), the
    trajectory's ``trajectory_steps`` steps with a snapshot every ``trajectory_every``;
    ``executor`` (``"local"`` or ``"ray"``, at ``address``)."""

    draws: int = 3
    steps_grid: Sequence[int] = (0, 10, 30, 100, 300)
    trajectory_steps: int = 1500
    trajectory_every: int = 10
    parts: Sequence[str] = PARTS
    lr: float | None = None
    executor: str = "local"
    address: str | None = None


GAUGE = GaugeOptions()  # the defaults


@in_context
def gauge_sweep(
    model: str | Checkpoint | Source,
    seed: int = 0,
    options: GaugeOptions = GAUGE,
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """The whole gauge sweep of one model as a JSON-serialisable dict, one key per part; what it
    measures in ``options`` (:class:`GaugeOptions`), where it runs in ``context``.

    Each part is cached (kind ``"gauge-sweep"``) under the model's weight digest, its arguments
    and ``GAUGE_VERSION``; ``seconds`` records the compute time of each part (0 on a cache hit
    keeps the original time). The recovery part fine-tunes at ``lr``, by default the model's
    own (a family's record, a zoo model's recipe); its result and its cache key hold the rate
    used, and the result says where it came from (``lr_from``).

    ``executor="ray"`` computes every draw of the parts not yet in the cache as a Ray task (a
    (group, draw) of the scramble and the claims, a draw of the recovery; the table and the
    trajectory are one task each), on the cluster at ``address`` or a local one, assembles each
    part from its draws here and stores it (``seconds``: the draws' compute time summed)
    (:mod:`landscape.experiments.sweeps`); the sweep then reads every part from the cache.
    """
    o = options
    draws, steps_grid, parts, lr = o.draws, o.steps_grid, o.parts, o.lr
    trajectory_steps, trajectory_every = o.trajectory_steps, o.trajectory_every
    executor, address = o.executor, o.address
    device, progress = context.device, context.progress
    sweeps.check_executor(executor, address)
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise LandscapeError(f"unknown gauge-sweep parts {sorted(unknown)}; expected {PARTS}")
    check_sweep_args(seed=seed, draws=draws, steps_grid=steps_grid,
                     trajectory_steps=trajectory_steps,
                     trajectory_every=trajectory_every, lr=lr)  # fmt: skip
    # the parts' cache keys need the checkpoint alone; the data is read for a part computed
    source = task_source(model, seed, device=device)
    task = functools.cache(source.load)
    # before any part runs: a later part that outgrows the budget would waste the earlier ones
    check_kept_checkpoints(source, steps_grid=steps_grid if "recovery" in parts else None,
                           trajectory=((trajectory_steps, trajectory_every)
                                       if "trajectory" in parts else None))  # fmt: skip
    why = resid_blocked(source.cfg)
    rotating = sorted(set(parts) & {"scramble", "claims"})
    if why and rotating:
        raise GroupNotAdmitted(
            f"the {' and '.join(rotating)} part{'s compare' if len(rotating) > 1 else ' compares'} "
            f"S_d, B_d and O(d), and {source.name} admits no O(d): {why}; run the other parts "
            "(--parts table recovery trajectory)"
        )
    recovery_rate, lr_from = recovery_lr(source, lr)
    cache = context.cache or Cache()
    base = {"version": GAUGE_VERSION, "model": source.name, "config": source.cfg.to_dict(),
            "weights": source.digest, "seed": seed}  # fmt: skip
    if source.data_key:
        base["data"] = source.data_key
    runners: dict[str, tuple[dict[str, Any], Callable[[], dict[str, Any]]]] = {
        "table": ({}, lambda: _table_part(task())),
        "scramble": ({"draws": draws},
                     lambda: scramble_test(task(), draws=draws, seed=seed, progress=progress)),
        "recovery": ({"draws": draws, "steps_grid": list(steps_grid), "lr": recovery_rate},
                     lambda: recovery_under_drift(task(), steps_grid=steps_grid, draws=draws,
                                                  seed=seed, lr=recovery_rate,
                                                  progress=progress)),
        "trajectory": ({"steps": trajectory_steps, "every": trajectory_every},
                       lambda: trajectory_transport(task(), steps=trajectory_steps,
                                                    every=trajectory_every, seed=seed,
                                                    progress=progress)),
        "claims": ({"draws": draws}, lambda: claim_check(task(), draws=draws, seed=seed)),
    }  # fmt: skip
    inputs = {part: {**base, "part": part, **runners[part][0]} for part in parts}
    if executor == "ray":
        options = {"seed": seed, "draws": draws, "steps_grid": list(steps_grid),
                   "trajectory_steps": trajectory_steps, "trajectory_every": trajectory_every,
                   "lr": recovery_rate, "lr_from": lr_from}  # fmt: skip
        _on_ray(model, task, inputs, options, address, cache, progress)
    out: dict[str, Any] = {"model": source.name, "seed": seed, "version": GAUGE_VERSION}
    for part in parts:
        _, run = runners[part]

        def compute(run=run) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
            t0 = time.perf_counter()
            result = run()
            result["seconds"] = round(time.perf_counter() - t0, 3)
            return {}, result

        entry, _ = cache.get_or_compute("gauge-sweep", inputs[part], compute)
        out[part] = entry.meta
    return out


def _table_part(task: Task) -> dict[str, Any]:
    return {"rows": symmetry_table(task.cfg, {k: v.cpu() for k, v in task.params.items()})}


@dataclass(frozen=True)
class _Draws:
    """A part of the sweep as independent draws: ``units(options)``, ``run(task, unit,
    options)`` for one, ``combine(task, values, options)`` the part's result (as the serial
    function of the part computes it)."""

    units: Callable[[dict[str, Any]], list[Any]]
    run: Callable[[Task, Any, dict[str, Any]], Any]
    combine: Callable[[Task, list[Any], dict[str, Any]], dict[str, Any]]


_DRAWS = {
    "table": _Draws(lambda o: [None], lambda t, u, o: _table_part(t), lambda t, v, o: v[0]),
    "scramble": _Draws(lambda o: draw_units(o["draws"]),
                       lambda t, u, o: scramble_row(t, *u, seed=o["seed"]),
                       lambda t, v, o: scramble_result(v, o["draws"])),
    "recovery": _Draws(lambda o: list(range(o["draws"])),
                       lambda t, u, o: recovery_draw(t, u, steps_grid=o["steps_grid"],
                                                     seed=o["seed"], lr=o["lr"]),
                       lambda t, v, o: recovery_result([p for points in v for p in points],
                                                       o["steps_grid"], o["draws"], o["lr"],
                                                       o["lr_from"])),
    "trajectory": _Draws(lambda o: [None],
                         lambda t, u, o: trajectory_transport(t, steps=o["trajectory_steps"],
                                                              every=o["trajectory_every"],
                                                              seed=o["seed"]),
                         lambda t, v, o: v[0]),
    "claims": _Draws(lambda o: draw_units(o["draws"]),
                     lambda t, u, o: Claims.of(t).row(*u, seed=o["seed"]),
                     lambda t, v, o: Claims.of(t).result(v)),
}  # fmt: skip


def _draw(model: str | Checkpoint | Source, part: str, unit: Any, *, cache: Cache,
          **options: Any) -> Any:  # fmt: skip
    """On a worker: one draw of a part of the sweep, on the CPU."""
    task = load_task(model, options["seed"], device=CPU)
    return _DRAWS[part].run(task, unit, options)


def _draw_name(unit: Any) -> str:
    """How a draw reads in an error: ``, draw 1`` or ``, orth draw 1`` (nothing for a part that
    is one task)."""
    if unit is None:
        return ""
    return ", " + (f"{unit[0]} draw {unit[1]}" if isinstance(unit, tuple) else f"draw {unit}")


def _on_ray(model: str | Checkpoint | Source, task: Callable[[], Task],
            inputs: dict[str, dict[str, Any]],
            options: dict[str, Any], address: str | None, cache: Cache,
            progress: Progress | None) -> None:  # fmt: skip
    """Every draw of the parts (cache inputs ``inputs``) not yet in ``cache`` as a Ray task;
    each part assembled from its draws and stored (``task()``: the loaded task, read once)."""
    todo = [p for p in inputs if cache.get("gauge-sweep", cache.key("gauge-sweep", inputs[p]))
            is None]  # fmt: skip
    calls = [(part, sweeps.Call(_draw, (model, part, unit), options,
                                what=f"the gauge sweep's {part}" + _draw_name(unit)))
             for part in todo for unit in _DRAWS[part].units(options)]  # fmt: skip
    done = sweeps.run([c for _, c in calls], cache, address=address, progress=progress,
                      stage="ray draws")  # fmt: skip
    for part in todo:
        mine = [d for (p, _), d in zip(calls, done, strict=True) if p == part]
        result = _DRAWS[part].combine(task(), [d.value for d in mine], options)
        result["seconds"] = round(sum(d.seconds for d in mine), 3)
        cache.put("gauge-sweep", cache.key("gauge-sweep", inputs[part]), {}, result)
