"""What a matching returns, and the checks and distances every method reports.

:class:`MatchResult` holds π (a :class:`landscape.symmetry.Transform` acting on B *as
processed*), the processed A and the aligned B = π(θ_B), so that the barrier
``max_λ L(λθ_A + (1−λ)π(θ_B)) − …`` is measured between models whose functions are exactly those
of the inputs. :func:`function_check` measures that they are; :func:`worst_check` and
:func:`function_warnings` aggregate and report checks without dropping a NaN.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from landscape.matching.methods import (
    MatchContext,
    MatchingMethod,
    NoOptions,
    Prepared,
    prepare_pair,
)
from landscape.models import ModelConfig, Params, forward
from landscape.models.circuits import circuit_forms
from landscape.symmetry import (
    Element,
    Spec,
    Transform,
    apply,
    check_transform,
    probe_inputs,
    spec_for,
)

FUNCTION_TOLERANCE = 1e-4  # float32 max |Δlogits| (docs/design.md §1)


@dataclass
class MatchResult:
    """One alignment of B to A.

    ``transform`` acts on B as processed (``params_b == apply(spec_for(cfg), transform, B_proc)``);
    ``params_a`` is the processed A. ``objective`` is recorded per round (WM: ``‖θ_A − π(θ_B)‖²``;
    AM and LM: before and after). ``det_flips`` counts sign changes of det G_resid during learned
    matching; ``lm_curve`` is its merged training loss ``[{step, loss}]``. ``function_check`` is
    ``max |Δlogits|`` of π(θ_B) (processed config) against the unprocessed θ_B on a fixed probe
    batch, float32 forward; ``function_check_a`` the same for the processed A against A (None
    until :func:`match` fills it in). ``info`` holds method-specific facts (kept JSON-safe).
    """

    method: str
    group: str
    transform: Transform
    cfg: ModelConfig
    params_a: Params
    params_b: Params
    objective: list[float] = field(default_factory=list)
    rounds: int = 0
    det_flips: int = 0
    lm_curve: list[dict[str, float]] = field(default_factory=list)
    function_check: float = 0.0
    function_check_a: float | None = None  # processed A against A; set by ``match``
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def resid_matrix(self) -> torch.Tensor:
        """The residual element G as a dense float64 [d, d] matrix (writers ``W ← W·G``).

        Its eigenangles (``landscape.experiments.eigen.angles.eigenangles``) show how far the
        alignment is from a coordinate relabelling; the identity when ``resid`` was not matched.
        """
        g = self.transform.matrix("resid")
        return torch.eye(self.cfg.d_model, dtype=torch.float64) if g is None else g

    def to_dict(self) -> dict[str, Any]:
        """Everything but tensors: scalars, curves, the processed config and the resid kind."""
        kinds = {k: e.kind for k, e in self.transform.elements.items()}
        return {
            "method": self.method,
            "group": self.group,
            "cfg": self.cfg.to_dict(),
            "kinds": kinds,
            "objective": list(self.objective),
            "rounds": self.rounds,
            "det_flips": self.det_flips,
            "lm_curve": list(self.lm_curve),
            "function_check": self.function_check,
            "function_check_a": self.function_check_a,
            "seconds": self.seconds,
            "info": self.info,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def function_probe(cfg: ModelConfig, batch: int = 16, seed: int = 0) -> torch.Tensor:
    """The fixed, seeded batch of every function check: :func:`landscape.symmetry.probe_inputs`
    in the default float dtype (float32), with its caps (``PROBE_TOKENS``, ``PROBE_LOGITS``),
    so the check of an imported model (context 8192, vocabulary 49152) stays a few MB of
    logits."""
    return probe_inputs(cfg, batch, seed, torch.get_default_dtype())


def function_check(
    cfg: ModelConfig,
    params_b: Params | torch.Tensor,
    cfg_aligned: ModelConfig,
    aligned_b: Params,
    dtype: torch.dtype = torch.float32,
) -> float:
    """``max |Δlogits|`` of aligned B against the original B on :func:`function_probe`, both
    evaluated in ``dtype`` (float32, the tolerance's precision, unless asked otherwise).
    ``params_b`` may be the original B's logits instead (:func:`probe_logits`)."""
    ref = probe_logits(cfg, params_b, dtype) if isinstance(params_b, dict) else params_b
    return float((ref - probe_logits(cfg, aligned_b, dtype, cfg_aligned)).abs().max())


def probe_logits(
    cfg: ModelConfig,
    params: Params,
    dtype: torch.dtype = torch.float32,
    cfg_params: ModelConfig | None = None,
) -> torch.Tensor:
    """Logits of ``params`` (of ``cfg_params``, default ``cfg``) on :func:`function_probe` of
    ``cfg``, evaluated in ``dtype``: one side of :func:`function_check`, kept on its own so that
    a caller can drop a large model once its logits are known."""
    x = function_probe(cfg)
    if x.is_floating_point():
        x = x.to(dtype)
    cast = {k: v.detach().to("cpu", dtype) for k, v in params.items()}
    with torch.no_grad():
        return forward(cfg_params or cfg, cast, x)


# Up to this many parameters, checks of a rewrite (circuit form, original coordinates) are made
# from float64 copies in float64 (four copies of a pair: 1 GB at this size); larger models are
# checked in float32, where the rounding of the forward alone can approach the tolerance.
FLOAT64_CHECK_PARAMS = 2**25


def check_dtype(params: Params) -> torch.dtype:
    """float64 for models up to :data:`FLOAT64_CHECK_PARAMS` parameters, else float32."""
    n = sum(v.numel() for v in params.values())
    return torch.float64 if n <= FLOAT64_CHECK_PARAMS else torch.float32


def circuit_checks(
    originals: Sequence[tuple[ModelConfig, Params]],
    cfg_processed: ModelConfig,
    processed: Sequence[Params],
) -> list[float]:
    """max |Δlogits| of each of ``processed``, rewritten together for the circuits space
    (:func:`~landscape.models.circuits.circuit_forms`, the form the line or triangle is
    evaluated in), against its original (configuration, parameters).

    Whether the rewrite keeps the functions, so it is made from float64 copies and evaluated in
    float64 (:func:`check_dtype`): in float32 the products and the forward's rounding alone
    reach 1.1e-4 on a width-128 GPT, above the tolerance, for a rewrite that is exact.
    """
    dtype = check_dtype(processed[0])
    cfg_c, forms = circuit_forms(
        cfg_processed, [{k: v.to(dtype) for k, v in p.items()} for p in processed]
    )
    return [function_check(cfg, original, cfg_c, pc, dtype)
            for (cfg, original), pc in zip(originals, forms, strict=True)]  # fmt: skip


def worst_check(values: Iterable[float | None]) -> float:
    """The largest function check, NaN if any is NaN (Python's ``max`` drops a NaN that is not
    first); None entries (not checked) are skipped. 0.0 for no values."""
    checks = [float(v) for v in values if v is not None]
    if any(math.isnan(v) for v in checks):
        return math.nan
    return max(checks, default=0.0)


def function_warnings(
    checks: Mapping[str, float | None], tol: float = FUNCTION_TOLERANCE
) -> list[str]:
    """One line per function check that is NaN or above ``tol`` (max |Δlogits|, float32).

    ``checks`` maps what was checked (e.g. "B aligned to A") to its value; None means not
    checked and is skipped. A NaN check means the logits themselves are not finite on the probe
    batch, so the function cannot be said to be preserved either.
    """
    out = []
    for what, v in checks.items():
        if v is None:
            continue
        if math.isnan(v):
            out.append(f"function check of {what} is NaN: its logits are not finite")
        elif v > tol:
            out.append(
                f"function check of {what} is {v:.3g}, above the tolerance {tol:g}: "
                "it does not compute the same function"
            )
    return out


def weight_distance(a: Params, b: Params) -> float:
    """``‖θ_A − θ_B‖²`` summed over every parameter, float64 (one parameter at a time)."""
    return float(sum(float(((a[k].double() - b[k].double()) ** 2).sum()) for k in a))


def moved(spec: Spec, elements: Mapping[str, Element], params: Params, name: str) -> torch.Tensor:
    """One parameter under ``elements`` (float64): the transform, one tensor at a time, so no
    transformed copy of the whole model is ever held."""
    t = Transform(dict(elements))
    return apply(spec, t, {name: params[name].double()}, check=False)[name]


def aligned_distance(spec: Spec, elements: Mapping[str, Element], a: Params, b: Params) -> float:
    """``‖θ_A − π(θ_B)‖²`` without materialising π(θ_B): parameter by parameter, float64."""
    return float(sum(float((a[k].double() - moved(spec, elements, b, k)).pow(2).sum()) for k in a))


def finish(
    method: str,
    group: str,
    cfg: ModelConfig,
    params_b: Params,
    prepared: Prepared,
    transform: Transform,
    t0: float,
    **fields: Any,
) -> MatchResult:
    """Apply π to processed B (checked: exact for its norm state) and fill in the result.

    ``prepared`` is the pair as processed, ``(cfg_p, a, b)`` (:func:`prepare_pair`), π acting on
    its B; ``params_b`` is the original B, or its :func:`probe_logits` with ``dtype`` B's dtype:
    then ``b`` is consumed, emptied one parameter at a time as its aligned copy is made, so that
    the processed and the aligned B are never both held whole. ``t0`` is when the matching
    began (``time.perf_counter``); ``fields`` are the rest of the :class:`MatchResult`.
    """
    cfg_p, a, b = prepared
    consume = not isinstance(params_b, dict)
    if consume:
        dtype = fields.pop("dtype")
        spec = spec_for(cfg_p)
        check_transform(spec, transform, b)
        aligned = {}
        for k in list(b):
            aligned[k] = apply(spec, transform, {k: b.pop(k)}, check=False)[k].to(dtype)
    else:
        dtype = next(iter(params_b.values())).dtype
        aligned = {k: v.to(dtype) for k, v in apply(spec_for(cfg_p), transform, b).items()}
    a = {k: v.to(dtype) for k, v in a.items()}
    check = function_check(cfg, params_b, cfg_p, aligned)
    return MatchResult(
        method,
        group,
        transform,
        cfg_p,
        a,
        aligned,
        function_check=check,
        seconds=time.perf_counter() - t0,
        **fields,
    )


def naive(cfg: ModelConfig, params_a: Params, params_b: Params, group: str = "perm") -> MatchResult:
    """No alignment: π = identity (after the same processing as the matched methods)."""
    t0 = time.perf_counter()
    prepared = prepare_pair(cfg, params_a, params_b, group)
    obj = [weight_distance(prepared[1], prepared[2])]
    return finish("naive", group, cfg, params_b, prepared, Transform({}), t0, objective=obj)


def _run_naive(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    group: str,
    options: NoOptions,
    *,
    train_split: Any,
    context: MatchContext,
) -> MatchResult:
    return naive(cfg, params_a, params_b, group)


NAIVE = MatchingMethod("naive", "no matching", NoOptions, _run_naive, aligns=False)
