""":class:`Source`, where a model comes from (a zoo seed, a family member or a checkpoint path),
and :func:`data_of`, the data a loaded checkpoint is evaluated on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.models.zoo import (
    ZOO,
    Checkpoint,
    zoo_model,
)
from landscape.sources.checkpoints import label, load_any, load_member
from landscape.sources.data import Data, DataSpec, ZooData, spec_data
from landscape.sources.families import family_data
from landscape.sources.zoo import get_checkpoint
from landscape.store.cache import Cache
from landscape.store.families import (
    family,
    is_family,
)


def data_of(ckpt: Checkpoint) -> Data:
    """The data a checkpoint is evaluated on, from its metadata: its family's, else its zoo
    model's (a control variant is evaluated on the normal task)."""
    if ckpt.meta.get("family"):
        fam = family(ckpt.meta["family"])
        member0 = ckpt if ckpt.meta.get("member") == fam.members[0] else None
        return family_data(fam.name, member0)
    name = ckpt.meta.get("name")
    if name not in ZOO:
        raise LandscapeError(
            f"no evaluation data is known for checkpoint {name!r}: it is not a zoo model; "
            "register it in a family (`landscape family add`) to give it data"
        )
    return ZooData(zoo_model(name), ckpt.meta.get("vocab"))


@dataclass(frozen=True)
class Source:
    """Where a model comes from: a zoo seed, a family member, or a checkpoint path.

    ``model`` is a zoo name, a family name or a path; ``seed`` the zoo seed or member number;
    ``variant`` a control variant of a zoo recipe (``models.zoo.VARIANTS``); ``data`` the
    evaluation data of a path (without it, a landscape directory written from a zoo checkpoint
    is evaluated on its zoo model's data).
    """

    model: str
    seed: int | None = None
    variant: str | None = None
    data: DataSpec | None = None

    @property
    def kind(self) -> Literal["zoo", "family", "path"]:
        if self.model in ZOO:
            return "zoo"
        return "family" if is_family(self.model) else "path"

    def load(
        self, device: torch.device = CPU, cache: Cache | None = None, train_if_missing: bool = True
    ) -> Checkpoint:
        """The checkpoint (a zoo seed comes from the cache, the shipped assets or, unless
        ``train_if_missing`` is off, training on ``device``; a family member or a path is read
        from disk)."""
        kind = self.kind
        if self.variant is not None and kind != "zoo":
            raise LandscapeError(f"control variants are zoo recipes; {self.model} is a {kind}")
        if kind == "family":
            return load_member(self.model, self.seed)
        if kind == "path":
            return load_any(self.model)
        return get_checkpoint(self.model, self.seed, device=device, cache=cache,
                              train_if_missing=train_if_missing, variant=self.variant)  # fmt: skip

    def label(self, ckpt: Checkpoint) -> str:
        """How the loaded checkpoint is named in messages (a path by its path)."""
        return str(self.model) if self.kind == "path" else label(ckpt)

    def data_of(self, ckpt: Checkpoint) -> Data:
        """The loaded checkpoint's data: the spec's for a path given one, else :func:`data_of`."""
        if self.data is not None:
            return spec_data(ckpt, self.model, self.data)
        return data_of(ckpt)
