"""Tasks: a loaded model on a device with its data, as the gauge sweep and artifact transport
use it: inputs for activation statistics, an evaluation split and a seeded sampler of training
minibatches at the model's learning rate. Built from a :class:`~landscape.sources.Source` and
its :func:`~landscape.sources.data_of`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from landscape.data import Split
from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.models import ModelConfig, Params
from landscape.models.zoo import ZOO, Checkpoint
from landscape.sources import Data, Sampler, Source, data_of
from landscape.store.cache import digest_tensors

__all__ = ["Task", "TaskSource", "load_task", "task_source"]


@dataclass
class Task:
    """A model with its data: activation/evaluation inputs and a sampler of training batches
    (the model's own training data). ``sample(gen, batch_size) -> (inputs, targets)``."""

    name: str
    seed: int
    cfg: ModelConfig
    params: Params  # float32, on ``device``
    sample: Sampler
    act_inputs: torch.Tensor  # inputs for activation statistics (training split)
    act_targets: torch.Tensor
    test: Split  # evaluation split (barriers, probe/steering metrics)
    lr: float = 3e-3  # the model's peak training learning rate
    batch_size: int = 64
    device: torch.device = CPU
    data_key: dict[str, Any] | None = None  # families: what identifies the data in cache keys
    lr_from: str = "task"  # where ``lr`` comes from: "family record", "zoo recipe" or "task"

    @property
    def digest(self) -> str:
        return digest_tensors({k: v.cpu() for k, v in self.params.items()})

    def batches(self, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Seeded endless minibatches of the training data, on the task's device."""
        gen = torch.Generator().manual_seed(seed)
        while True:
            x, y = self.sample(gen, self.batch_size)
            yield x.to(self.device), y.to(self.device)

    def frequent_classes(self, n: int) -> list[int]:
        """The n most frequent targets of the activation inputs (ties: lowest label)."""
        counts = torch.bincount(self.act_targets.reshape(-1).cpu(), minlength=self.cfg.n_out)
        return sorted(torch.argsort(-counts.double(), stable=True)[:n].tolist())


@dataclass(frozen=True)
class TaskSource:
    """A task before its data is read: the checkpoint, its name, its data (not yet loaded) and
    what a cache key of the task holds (``name``, ``cfg``, ``digest``, ``data_key``, ``lr``).
    A stored result is found from these alone; :meth:`load` reads the data when one is
    computed (seconds for the zoo's images)."""

    ckpt: Checkpoint
    name: str
    seed: int
    data: Data
    lr_from: str
    device: torch.device = CPU

    @property
    def cfg(self) -> ModelConfig:
        return self.ckpt.cfg

    @property
    def params(self) -> Params:
        return self.ckpt.params

    @property
    def lr(self) -> float:
        return self.data.lr

    @property
    def data_key(self) -> dict[str, Any] | None:
        return self.data.task_key

    @functools.cached_property
    def digest(self) -> str:
        """:attr:`Task.digest` of the loaded task (its float32 parameters)."""
        return digest_tensors({k: v.to("cpu", torch.float32) for k, v in self.params.items()})

    def load(self, n_act: int | None = None, n_test: int | None = None) -> Task:
        """The :class:`Task`, its data read (``n_act``, ``n_test``: :func:`load_task`)."""
        ckpt, data, device = self.ckpt, self.data, self.device
        default_act, default_test = data.task_sizes(ckpt.cfg)
        n_act, n_test = n_act or default_act, n_test or default_test
        train, test = data.task_splits()
        test = Split(test.inputs[:n_test].to(device), test.targets[:n_test].to(device))
        params = {k: v.to(device, torch.float32) for k, v in ckpt.params.items()}
        return Task(self.name, self.seed, ckpt.cfg, params, data.sampler(ckpt.cfg, train),
                    train.inputs[:n_act].to(device), train.targets[:n_act].to(device), test,
                    data.lr, data.batch_size, device, data.task_key, self.lr_from)  # fmt: skip


def task_source(
    model: str | Checkpoint | Source, seed: int = 0, *, device: torch.device = CPU
) -> TaskSource:
    """The :class:`TaskSource` of a zoo seed, a family member (name + seed), a Source or a
    Checkpoint: the checkpoint is loaded, its data only named."""
    if isinstance(model, Checkpoint):
        ckpt = model
    else:
        source = model if isinstance(model, Source) else Source(model, seed)
        ckpt = source.load(device)
    if ckpt.meta.get("family"):
        data: Data = data_of(ckpt)
        name = ckpt.meta["family"]
        lr_from = "family record"
    else:
        name = ckpt.meta.get("name", model if isinstance(model, str) else "")
        if name not in ZOO:
            raise LandscapeError(
                f"the gauge sweep needs a zoo model's training data; {name!r} is not a zoo model"
            )
        data = data_of(ckpt)
        if ZOO[name].config != ckpt.cfg:
            raise LandscapeError(f"checkpoint config differs from the zoo's {name} config")
        lr_from = "zoo recipe"
    return TaskSource(ckpt, name, int(ckpt.meta.get("seed", seed) or 0), data, lr_from, device)


def load_task(
    model: str | Checkpoint | Source,
    seed: int = 0,
    *,
    device: torch.device = CPU,
    n_act: int | None = None,
    n_test: int | None = None,
) -> Task:
    """A :class:`Task` of a zoo seed, a family member (name + seed), a Source or a Checkpoint.

    A zoo model's task samples its own training data at its recipe's ``lr`` and ``batch_size``
    (text: random windows of the training text); a family's samples minibatches from its
    training windows or images at the family's ``lr`` and ``batch_size``.
    ``n_act``/``n_test`` cap the activation and evaluation examples (defaults: 512 images or
    64 text windows for activations; the whole test split, or 128 windows of zoo text).
    """
    return task_source(model, seed, device=device).load(n_act, n_test)
