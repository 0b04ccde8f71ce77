"""One barrier measurement asked for (:class:`BarrierRequest`): what it measures, checked when it
is made, its settings for A's data and its disk-cache key; the requests of two seeds of one model
(:func:`seeds_request`, :func:`seeds_of`), the refusal of what a command does not read
(:func:`refuse_unread`), and the slice of training data a calibrated line fits on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from landscape.budget import check_points
from landscape.data import Split
from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import learned_space
from landscape.experiments.barriers.coordinates import PROCESSED, Coordinates, in_space
from landscape.experiments.barriers.endpoints import Endpoint, check_method, check_split
from landscape.matching import method_of, options_key
from landscape.models import ModelConfig
from landscape.models.zoo import Checkpoint
from landscape.sources import Data, Source
from landscape.store.cache import digest_tensors

BARRIER_VERSION = 6  # bump when the barrier pipeline changes
# 3: one pipeline for zoo seeds, family members and paths, keyed by the endpoints' weights
# 4: the matchings of ALGO_VERSION 3 (a barrier entry does not hold the matching's version)
# 5: function checks of endpoints in other coordinates (circuit form, original) in float64
# 6: the matchings of ALGO_VERSION 5
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class BarrierRequest:
    """One barrier measurement asked for: what :func:`measure_barrier` measures.

    ``a``, ``b``: the endpoints, each a :class:`~landscape.sources.Source` or a loaded
    checkpoint (compared by identity); ``options``: the matching method's settings, its options
    dataclass (a dict of settings is read into it here; a name that is not one of its settings
    is refused); the line is ``θ(λ) = λ·θ_A + (1−λ)·π(θ_B)`` at ``points`` values of λ, λ = 1 is
    A (docs/design.md §1), straight in ``coordinates`` and merge ``space`` (``"weights"`` or
    ``"circuits"``: :func:`in_space`), evaluated on A's ``split`` in ``dtype``. ``seed`` seeds
    the matching. ``store_matching`` off: the matching is not stored apart (large imported
    pairs: it would write two copies of the weights); the result is the same, so it is not
    part of what the request is compared or hashed by. ``calibrate``: every model on the line
    has its logits rescaled by the inverse temperature that fits it best on a slice of A's
    training data (:data:`CALIBRATION_ROWS` rows, :func:`calibration_split`), so the barrier
    left is what no temperature removes.

    Frozen and hashable (with sources as endpoints it is also the app's memo key); every check
    that needs nothing loaded is done when it is made, as one line (docs/design.md, the CLI's
    error contract). :meth:`key` is its disk-cache key.
    """

    a: Endpoint
    b: Endpoint
    method: str = "weight"
    group: str = "perm"
    options: Any = None
    points: int = 25
    split: str = "test"
    space: str = "weights"
    coordinates: Coordinates = PROCESSED
    dtype: str = "float32"
    seed: int = 0
    store_matching: bool = field(default=True, compare=False)
    calibrate: bool = False

    def __post_init__(self) -> None:
        check_method(self.method, self.group)
        check_split(self.split)
        in_space(self.coordinates, self.space)  # a space that is not one, or a second space
        if self.points < 2:
            raise LandscapeError("--points must be at least 2 (the endpoints)")
        check_points(self.points)
        if self.dtype not in DTYPES:
            raise LandscapeError(
                f"unknown dtype {self.dtype!r}; expected one of {', '.join(DTYPES)}"
            )
        object.__setattr__(self, "options", method_of(self.method).settings(self.options))

    @property
    def line(self) -> Coordinates:
        """The coordinates the line is straight in, in the request's merge space."""
        return in_space(self.coordinates, self.space)

    def settings(self, cfg: ModelConfig, data: Data) -> Any:
        """The method's settings for A's data: those that follow from the data and the merge
        space (``Data.match_options``, :func:`learned_space`), then those said (the options'
        settings not at their defaults)."""
        return method_of(self.method).settings({
            **data.match_options(cfg, self.method),
            **learned_space(self.method, self.space),
            **options_key(self.options),
        })  # fmt: skip

    def key(self, a: Checkpoint, b: Checkpoint, data: Data,
            digests: tuple[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
        """The inputs of the measurement's cache entry (kind ``"barrier"``): both endpoints'
        weights, A's configuration, method, group, seed, the settings not at their defaults,
        points, split, coordinates (with the merge space), A's data and dtype. ``digests``: the
        endpoints' weight digests when the caller has them (:func:`digest_tensors`)."""
        digest_a, digest_b = digests or (digest_tensors(a.params), digest_tensors(b.params))
        return {
            "a": digest_a,
            "b": digest_b,
            "cfg": a.cfg.to_dict(),
            "method": self.method,
            "group": self.group,
            "seed": self.seed,
            "options": options_key(self.settings(a.cfg, data)),
            "points": self.points,
            "split": self.split,
            "coordinates": self.line.key,
            "data": data.key,
            "dtype": self.dtype,
            "version": BARRIER_VERSION,
            # a calibrated line is another measurement; the plain ones keep their keys
            **({"calibrate": CALIBRATION_ROWS} if self.calibrate else {}),
        }


# rows of A's training split a calibrated line fits each temperature on (a language model's
# windows count as rows: 64 windows of 128 tokens are learned matching's batch of 8,192 tokens)
CALIBRATION_ROWS = {"rows": 1024, "windows": 64}


def calibration_split(data: Data) -> Split:
    """The slice of A's training split a calibrated line fits its temperatures on: its first
    :data:`CALIBRATION_ROWS` rows (windows, for a language model), never the evaluated split."""
    train = data.split("train")
    n = CALIBRATION_ROWS["windows" if train.inputs.ndim == 2 and train.targets.ndim == 2
                         else "rows"]  # fmt: skip
    return Split(train.inputs[:n], train.targets[:n])


def seeds_request(model: str, seeds: Sequence[int], method: str = "weight",
                  group: str = "perm", **request: Any) -> BarrierRequest:  # fmt: skip
    """The request for two seeds (or members) of one zoo model or family; ``request``: the
    rest of :class:`BarrierRequest`."""
    if len(seeds) != 2:
        raise LandscapeError("barrier needs two seeds: --seeds A B")
    return BarrierRequest(Source(model, seeds[0]), Source(model, seeds[1]), method, group,
                          **request)  # fmt: skip


def seeds_of(request: BarrierRequest) -> tuple[str, tuple[int, int]]:
    """The model (zoo name or family) and the two seeds of a request whose endpoints must be two
    different seeds of one model; one line refusing anything else."""
    a, b = request.a, request.b
    if not (isinstance(a, Source) and isinstance(b, Source) and a.model == b.model
            and a.seed is not None and b.seed is not None):  # fmt: skip
        raise LandscapeError("give two seeds of one model: --seeds A B")
    if a.seed == b.seed:
        raise LandscapeError("give two different seeds: --seeds A B")
    return a.model, (a.seed, b.seed)


def refuse_unread(request: BarrierRequest, what: str, read: Sequence[str]) -> None:
    """Refuse a request that sets what ``what`` does not read: any field other than the endpoints
    and ``read`` that is not at its default (one line naming them), so that nothing asked for is
    silently left out."""
    unread = []
    for f in fields(request):
        if f.name in ("a", "b", "store_matching", *read):
            continue
        value = getattr(request, f.name)
        if f.name == "options" and not options_key(value):
            continue
        if f.name != "options" and value == f.default:
            continue
        unread.append(f.name)
    if unread:
        raise LandscapeError(f"{what} does not take the request's {', '.join(unread)}: leave "
                             f"{'them' if len(unread) > 1 else 'it'} at the default")  # fmt: skip
