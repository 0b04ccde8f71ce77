"""Matchings of a checkpoint pair, cached: B aligned to A by a registered method
(:func:`align`, one disk entry per pair, method, group, seed and settings), and what a barrier
needs of it (:class:`Aligned`: processed A, π(θ_B), the residual matrix and the transform).
"""

from __future__ import annotations

from dataclasses import dataclass, is_dataclass
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.experiments.barriers.endpoints import check_method, check_pair
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.matching import MatchContext, WeightOptions, match, method_of, options_key
from landscape.models import ModelConfig, Params
from landscape.models.zoo import Checkpoint
from landscape.progress import Progress, tell, within
from landscape.sources import Data, data_of, label
from landscape.store.cache import Cache, digest_tensors
from landscape.symmetry import Transform

ALGO_VERSION = 5  # bump when matching or triangle evaluation changes: old entries stop matching
# 2: matchings also check the processed A (``function_check_a``)
# 3: within-head maps in weight and activation matching; learned rotations as G₀·exp(S − Sᵀ)
# 4: weight matching decides nothing on round-off (null spaces of a Procrustes by rule, ties of
#    an assignment by index, within-head steps on significant changes only), so its answer is
#    the pair's, not the machine's; entries hold the transform (learned matching starts from it)
# 5: within-head maps under rotary positions (QK maps commuting with RoPE) and grouped-query
#    attention (one QK and one OV map per key/value group): matchings of such models change;
#    models without either match as before


@dataclass
class Aligned:
    """A cached alignment: processed A, aligned B = π(θ_B), the residual matrix and facts."""

    cfg: ModelConfig
    params_a: Params
    params_b: Params
    resid: torch.Tensor  # (d_model, d_model) float64
    info: dict[str, Any]
    cached: bool
    transform: Transform | None = None  # acting on B as processed (None: not stored)


def split_prefixed(tensors: dict[str, torch.Tensor], prefix: str) -> Params:
    n = len(prefix)
    return {k[n:]: v for k, v in tensors.items() if k.startswith(prefix)}


def _match(
    a: Checkpoint,
    b: Checkpoint,
    method: str,
    group: str,
    seed: int,
    device: torch.device,
    options: Any,
    data: Data | None,
    progress: Progress | None,
    consume: bool = False,
    start: Transform | None = None,
) -> Aligned:
    """Align B to A (uncached); activation and learned matching learn from A's training split.

    ``consume``: the parameters of ``a`` and ``b`` are handed over to weight matching, which
    empties them (``landscape.matching.match``): the same result, in fewer copies of the pair.
    ``start``: learned matching's weight-matching start, when known (:func:`align` reads it
    from the cache). ``options``: the method's settings (its options dataclass).
    """
    entry = method_of(method)
    train = None
    if entry.needs_data:  # seconds for a large split: said, so the bar does not look stuck
        tell(progress, "load the train split", 0)
        train = (data or data_of(a)).split("train")
    hooks: dict[str, Any] = {}
    if start is not None:
        hooks["start"] = start
    if consume and entry.consumes:
        hooks["consume"] = True
    try:
        r = match(a.cfg, a.params, b.params, method, group, options=options, train_split=train,
                  context=MatchContext(seed, device, progress), **hooks)  # fmt: skip
    except torch.linalg.LinAlgError as e:  # e.g. weights so large that products overflow
        raise LandscapeError(
            f"{method} matching of {label(b)} to {label(a)} under {group} failed: "
            f"{' '.join(str(e).split())}"
        ) from None
    return Aligned(r.cfg, r.params_a, r.params_b, r.resid_matrix(), r.to_dict(), False,
                   r.transform)  # fmt: skip


def weight_start(
    a: Checkpoint,
    b: Checkpoint,
    group: str,
    *,
    seed: int,
    options: Any,
    context: RunContext = RUN,
    digests: tuple[str, str] | None = None,
) -> Transform | None:
    """Learned matching's start, weight matching under ``group`` (its cached entry, the one
    ``barrier --method weight`` reads), or None when the ``options`` of a learned method (its
    settings dataclass, or learned matching's as a dict) start elsewhere (``init``).
    The context's ``progress`` follows the weight matching when it is not cached. ``digests``:
    the endpoints' weight digests when the caller has them (:func:`digest_tensors`)."""
    learned = options if is_dataclass(options) else method_of("learned").settings(options)
    if getattr(learned, "init", "weight") != "weight":
        return None
    start = WeightOptions(within_heads=getattr(learned, "within_heads", True))
    return _align(a, b, "weight", group, seed=seed, options=start, context=context,
                  digests=digests).transform  # fmt: skip


@in_context
def align(
    a: Checkpoint,
    b: Checkpoint,
    method: str,
    group: str,
    *,
    seed: int = 0,
    options: Any = None,
    data: Data | None = None,
    context: RunContext = RUN,
) -> Aligned:
    """Align B to A (cached). ``options`` are the matching method's settings, a dict or its
    options dataclass (those not at their defaults key the cache entry); ``data`` is A's
    (default :func:`landscape.sources.data_of`).

    The ``context``'s progress follows the matching: weight matching's visits, activation
    matching's passes, learned matching's steps (its weight-matching start, when not cached,
    in the first tenth).
    """
    return _align(a, b, method, group, seed=seed, options=options, data=data, context=context)


def _align(
    a: Checkpoint,
    b: Checkpoint,
    method: str,
    group: str,
    *,
    seed: int = 0,
    options: Any = None,
    data: Data | None = None,
    context: RunContext = RUN,
    digests: tuple[str, str] | None = None,
) -> Aligned:
    """:func:`align`, for a caller that holds the endpoints' weight digests already
    (``digests``: A's and B's, as :func:`digest_tensors` gives them), so that one request hashes
    each model's weights once."""
    check_method(method, group)
    check_pair(a, b)
    device, progress = context.device, context.progress
    cache = context.cache or Cache()
    entry = method_of(method)
    options = entry.settings(options)  # read once: a dataclass passes as it is
    digest_a, digest_b = digests or (digest_tensors(a.params), digest_tensors(b.params))
    inputs = {
        "a": digest_a,
        "b": digest_b,
        "cfg": a.cfg.to_dict(),
        "method": method,
        "group": group,
        "seed": seed,
        "options": options_key(options),
        "version": ALGO_VERSION,
    }

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        start, steps = None, progress
        if entry.learned:
            start = weight_start(a, b, group, seed=seed, options=options,
                                 context=RunContext(device, cache, within(progress, 0.0, 0.1,
                                                                          "start: ")),
                                 digests=(digest_a, digest_b))  # fmt: skip
            steps = within(progress, 0.1, 1.0)
        al = _match(a, b, method, group, seed, device, options, data, steps, start=start)
        tensors = {f"a.{k}": v for k, v in al.params_a.items()}
        tensors.update({f"b.{k}": v for k, v in al.params_b.items()})
        tensors["resid"] = al.resid
        moves, about = al.transform.to_tensors("t.")
        tensors.update(moves)
        return unshared(tensors), {**al.info, "transform": about}

    entry, hit = cache.get_or_compute("matching", inputs, compute)
    t = entry.tensors
    cfg = ModelConfig.from_dict(entry.meta["cfg"])
    about = entry.meta.get("transform")
    transform = None if about is None else Transform.from_tensors(t, about, "t.")
    return Aligned(cfg, split_prefixed(t, "a."), split_prefixed(t, "b."), t["resid"],
                   entry.meta, hit, transform)  # fmt: skip


def unshared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Copies of the tensors whose storage another one already uses (e.g. a parameter the
    processing left untouched in both endpoints): the cache's file format stores each tensor's
    memory once and refuses shared storage."""
    seen: set[int] = set()
    out = {}
    for k, v in tensors.items():
        ptr = v.untyped_storage().data_ptr()
        out[k] = v.clone() if ptr in seen else v
        seen.add(ptr)
    return out


def learned_space(method: str, space: str) -> dict[str, Any]:
    """The matching setting that makes a ``learned`` method descend the loss along the line
    that is measured: in the circuits space, the circuit line (none in the weights space, so
    its cache keys are those of before spaces)."""
    return {"space": space} if method_of(method).learned and space != "weights" else {}
