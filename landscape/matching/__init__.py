"""Matching: find the symmetry transform π that aligns model B to model A (docs/design.md §1).

Every method returns a :class:`MatchResult` holding π (a :class:`landscape.symmetry.Transform`
acting on B *as processed*), the processed A and the aligned B = π(θ_B), so that the barrier
``max_λ L(λθ_A + (1−λ)π(θ_B)) − …`` is measured between models whose functions are exactly those
of the inputs. :func:`match` is the one entry; the package, in import order:

- :mod:`~landscape.matching.methods`: the method and group names (``Method``, ``Group``,
  :data:`METHODS`, :data:`GROUPS`), the kinds a group matches, the processing of a pair;
- :mod:`~landscape.matching.solvers`: similarity matrix → group element, one dispatch
  (:func:`~landscape.matching.solvers.solve`);
- :mod:`~landscape.matching.result`: :class:`MatchResult`, function checks, distances, naive;
- :mod:`~landscape.matching.weight`: weight matching and the weight similarity;
- :mod:`~landscape.matching.activation`: activation matching (one implementation, two named
  option sets: :data:`~landscape.matching.activation.MATCHING` and
  :data:`~landscape.matching.activation.GAUGE_SWEEP`);
- :mod:`~landscape.matching.learned`: learned matching.

Conventions
-----------
- **Processing.** A group level (``perm``, ``perm-global-sign``, ``signed-perm``, ``orth``) may
  need function-preserving processing to be exact on the residual stream (fold norm gains for
  O(d); rewrite LayerNorm as RMSNorm for B_d and O(d)). :func:`prepare_pair` runs
  ``processing.prepare`` on A and B the same way; the result's ``cfg`` is the processed config.
- **Orientation.** The transform uses the spec's convention: the residual element G acts on
  writers as ``W ← W·G`` (so B's stream x_B becomes x_B·G ≈ x_A); a monomial element has
  ``G[perm[i], i] = scale[i]``, i.e. aligned unit i is ``scale[i] ·`` B's unit ``perm[i]``, which
  is exactly the solvers' convention (``perm[i] = j``: B's unit j goes to A's slot i). Dense
  solutions of the solvers map column vectors (``aligned b = X b``), so G = Xᵀ.
- **Gauge variables matched.** ``resid`` gets the group's residual kind; FFN units ``mlp{l}``
  and heads ``heads{l}`` are permutations in every group, except gated (SwiGLU) FFN units under
  ``signed-perm`` and ``orth``, which are signed permutations (the sign acts on the linear up
  projection; the gate, role ``P(G)``, is only permuted and enters the assignment unsigned like
  a norm gain). Grouped-query heads (``Variable.group`` = r > 1) move as whole key/value groups:
  the cost of pairing A's group I with B's group J is the best assignment of their r query
  heads, and the groups are then assigned on those costs (K/V weights, role ``G/group``, are
  repeated per query head for the circuit cost). The within-head maps ``qk{l}``/``ov{l}`` (one
  invertible map per head, or per key/value group under grouped-query attention; under rotary
  positions the QK maps commuting with RoPE, a scaled rotation per frequency pair; the head
  cost is invariant to them) are matched by weight matching (option ``within_heads``, on by
  default: without them the straight line between factored weights averages each head's Q, K,
  V and O in unrelated bases), by activation matching from the same weight objective, and kept
  from weight matching's start by learned matching.
- **Memory.** Nothing holds a transformed copy of the whole model during the descent: B' is
  formed one touched parameter at a time (in float64, cast from the stored dtype), so weight
  matching keeps the inputs, their processed forms and the final aligned B.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from landscape.matching.activation import activation_matching
from landscape.matching.learned import learned_matching
from landscape.matching.methods import (
    GROUPS,
    MATCH_GROUPS,
    METHODS,
    MONOMIAL_GROUPS,
    Group,
    Method,
    matching_kinds,
    prepare_pair,
)
from landscape.matching.result import (
    FUNCTION_TOLERANCE,
    MatchResult,
    function_check,
    function_probe,
    function_warnings,
    naive,
    probe_logits,
    weight_distance,
    worst_check,
)
from landscape.matching.weight import weight_matching
from landscape.models import ModelConfig, Params
from landscape.symmetry.table import PROBE_LOGITS, PROBE_TOKENS
from landscape.threads import threaded

# the old name of the function-check batch (it was defined here)
probe_inputs = function_probe

__all__ = [
    "FUNCTION_TOLERANCE",
    "GROUPS",
    "MATCH_GROUPS",
    "METHODS",
    "MONOMIAL_GROUPS",
    "PROBE_LOGITS",
    "PROBE_TOKENS",
    "Group",
    "MatchResult",
    "Method",
    "activation_matching",
    "function_check",
    "function_probe",
    "function_warnings",
    "given_options",
    "learned_matching",
    "match",
    "matching_kinds",
    "naive",
    "prepare_pair",
    "probe_inputs",
    "weight_distance",
    "weight_matching",
    "worst_check",
]


@threaded
def match(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    method: Method,
    group: Group,
    *,
    train_split: Any = None,
    seed: int = 0,
    device: str | torch.device | None = None,
    **kw: Any,
) -> MatchResult:
    """Align B to A with ``method`` ∈ {naive, weight, activation, learned} under ``group``.

    ``train_split`` (a ``data.Split``) is needed by learned matching (training batches) and by
    activation matching (its first ``kw.get("batch", 512)`` rows, a fixed batch, unless
    ``inputs`` is given). Other keywords go to the method. Every method's B is function-checked
    against the input B; here the processed A is checked against the input A as well
    (``function_check_a``): processing both endpoints must preserve both functions.
    ``consume=True`` (weight matching; ignored by the other methods) hands ``params_a`` and
    ``params_b`` over to be emptied, both checks then made against logits taken before
    (:func:`landscape.matching.weight.weight_matching`): the same result in less memory.
    """
    consume = kw.pop("consume", False) and method == "weight"
    reference_a = probe_logits(cfg, params_a) if consume else params_a
    if method == "naive":
        r = naive(cfg, params_a, params_b, group)
    elif method == "weight":
        r = weight_matching(cfg, params_a, params_b, group, seed=seed, consume=consume,
                            device=device, **kw)  # fmt: skip
    elif method == "activation":
        inputs = kw.pop("inputs", None)
        batch = kw.pop("batch", 512)
        if inputs is None:
            if train_split is None:
                raise ValueError("activation matching needs inputs or a train_split")
            inputs = train_split.inputs[:batch]
        r = activation_matching(cfg, params_a, params_b, group, inputs, device=device, **kw)
    elif method == "learned":
        if train_split is None:
            raise ValueError("learned matching needs a train_split")
        r = learned_matching(
            cfg, params_a, params_b, group, train_split, seed=seed, device=device, **kw
        )
    else:
        raise ValueError(f"unknown matching method {method!r}; expected one of {METHODS}")
    r.function_check_a = function_check(cfg, reference_a, r.cfg, r.params_a)
    return r


_METHOD_FUNCTIONS = {"weight": weight_matching, "activation": activation_matching,
                     "learned": learned_matching}  # fmt: skip


def given_options(method: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """``options`` of ``method`` less those that say the method's own default (a number, text
    or flag equal to its keyword's default), so that a default said explicitly keys the same
    cached result as one left out. Anything else (a tensor, an unknown keyword) is kept."""
    options = dict(options or {})
    fn = _METHOD_FUNCTIONS.get(method)
    if fn is None:
        return options
    params = inspect.signature(fn).parameters

    def said_default(k: str, v: Any) -> bool:
        p = params.get(k)
        if p is None or p.default is inspect.Parameter.empty:
            return False
        plain = (bool, int, float, str)
        return isinstance(v, plain) and type(v) is type(p.default) and v == p.default

    return {k: v for k, v in options.items() if not said_default(k, v)}
