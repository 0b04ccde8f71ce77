"""A training run's state at one step, and where an unfinished run keeps it.

A :class:`Snapshot` (parameters and AdamW's moments) is all a run needs to go on from its step:
spawned children start from one (``landscape.models.train.train_snapshots``). A
:class:`RunKeeper` writes the same state, with the curves and dropout generators, into the cache
at every evaluation, so an interrupted run resumes instead of starting again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models.config import ModelConfig
from landscape.models.params import Params, param_shapes
from landscape.models.primitives import Dropout
from landscape.models.recipe import new_curves
from landscape.store.cache import Cache, Entry


@dataclass(frozen=True)
class Snapshot:
    """A training run before its step ``step``: the parameters and AdamW's moments, all a run
    needs to go on from there (the learning rate is the recipe's at that step)."""

    step: int
    params: Params
    exp_avg: Params
    exp_avg_sq: Params


def take_snapshot(step: int, params: Params, opt: torch.optim.AdamW) -> Snapshot:
    """The run now, copied to the CPU (moments zero before the first step)."""

    def moment(name: str) -> Params:
        return {k: opt.state[v][name].detach().cpu().clone() if v in opt.state
                else torch.zeros_like(v, device="cpu") for k, v in params.items()}  # fmt: skip

    return Snapshot(step, {k: v.detach().cpu().clone() for k, v in params.items()},
                    moment("exp_avg"), moment("exp_avg_sq"))  # fmt: skip


RUN_STATE = "run-state"  # the cache kind of an unfinished run's progress (RunKeeper)


@dataclass(frozen=True)
class RunKeeper:
    """Where an unfinished training run keeps its progress, so that a run that is interrupted
    (a closed terminal, a lost machine) goes on from its last evaluation when it is asked for
    again, instead of from step 0.

    At every evaluation but the last, the run writes its parameters, AdamW's moments, its
    curves so far, each seed's dropout generator and the seconds spent into the cache (kind
    :data:`RUN_STATE`) under ``key`` (the key of the checkpoint, or checkpoints, being trained);
    the entry is removed once the checkpoint is stored. The data order needs nothing stored:
    each seed's stream is replayed from its seed to the step. So a resumed run computes what the
    uninterrupted run computes, bit for bit (the same kernels assumed, as ever)."""

    cache: Cache
    key: str

    def read(self) -> Entry | None:
        return self.cache.get(RUN_STATE, self.key)

    def write(self, step: int, params: Params, opt: torch.optim.AdamW,
              curves: list[dict[str, list[float]]], drops: list[Dropout] | None,
              seconds: float) -> None:  # fmt: skip
        snap = take_snapshot(step, params, opt)
        tensors = {f"p.{k}": v for k, v in snap.params.items()}
        tensors.update({f"m.{k}": v for k, v in snap.exp_avg.items()})
        tensors.update({f"v.{k}": v for k, v in snap.exp_avg_sq.items()})
        for i, d in enumerate(drops or []):
            tensors[f"rng.{i}"] = d.generator.get_state()
        meta = {"step": step, "curves": curves, "seconds": seconds}
        try:
            self.cache.put(RUN_STATE, self.key, tensors, meta)
        except LandscapeError as e:  # the run goes on; only its resumption is lost
            print(f"landscape: warning: {e}; this run cannot resume if interrupted",
                  file=sys.stderr)  # fmt: skip

    def remove(self) -> None:
        self.cache.remove(RUN_STATE, self.key)


def resumed(keep: RunKeeper | None, cfg: ModelConfig
            ) -> tuple[Snapshot, dict[str, Any], Params] | None:  # fmt: skip
    """The snapshot, meta (step, curves, seconds) and dropout generator states of a kept run,
    its parameters in the model's own order (the optimizer's groups and the gradient norm's sum
    follow it: another order rounds otherwise)."""
    entry = keep.read() if keep is not None else None
    if entry is None:
        return None
    t = entry.tensors
    order = list(param_shapes(cfg))

    def part(prefix: str) -> Params:
        if prefix == "rng.":
            return {k[len(prefix) :]: v for k, v in t.items() if k.startswith(prefix)}
        return {k: t[prefix + k] for k in order}

    snap = Snapshot(entry.meta["step"], part("p."), part("m."), part("v."))
    # the curves' columns in the run's order (the stored JSON sorts them): rows are zipped in
    meta = {**entry.meta, "curves": [{k: list(c[k]) for k in new_curves()}
                                     for c in entry.meta["curves"]]}  # fmt: skip
    return snap, meta, part("rng.")
