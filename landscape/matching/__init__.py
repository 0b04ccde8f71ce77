"""Matching: find the symmetry transform π that aligns model B to model A (docs/design.md §1).

Every method returns a :class:`MatchResult` holding π (a :class:`landscape.symmetry.Transform`
acting on B *as processed*), the processed A and the aligned B = π(θ_B), so that the barrier
``max_λ L(λθ_A + (1−λ)π(θ_B)) − …`` is measured between models whose functions are exactly those
of the inputs. :func:`match` is the one entry; the package, in import order:

- :mod:`~landscape.matching.methods`: what a method declares (:class:`MatchingMethod`), the
  method and group names (``Method``, ``Group`` and their tuples, from :mod:`landscape.names`),
  the kinds a group matches, the processing of a pair;
- :mod:`~landscape.matching.solvers`: similarity matrix → group element, one dispatch
  (:func:`~landscape.matching.solvers.solve`);
- :mod:`~landscape.matching.within_heads`: each head's own maps, from the stacked factors;
- :mod:`~landscape.matching.result`: :class:`MatchResult`, function checks, distances, naive;
- :mod:`~landscape.matching.weight`: weight matching and the weight similarity;
- :mod:`~landscape.matching.activation`: activation matching (one implementation, two named
  similarities: :data:`~landscape.matching.activation.MATCHING` and
  :data:`~landscape.matching.activation.GAUGE_SWEEP`);
- :mod:`~landscape.matching.latents`, :mod:`~landscape.matching.learning`,
  :mod:`~landscape.matching.learned`: learned matching (latents and elements, its settings and
  loop, the method);
- :mod:`~landscape.matching.registry`: the methods by name (:func:`method_of`), which
  :func:`match` looks up.

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

from typing import Any

from landscape.matching.activation import ActivationOptions, activation_matching
from landscape.matching.learned import learned_matching
from landscape.matching.learning import LearnedOptions
from landscape.matching.methods import (
    BARRIER_GROUPS,
    MATCH_CONTEXT,
    MATCH_GROUPS,
    METHODS,
    MONOMIAL_GROUPS,
    Group,
    MatchContext,
    MatchingMethod,
    Method,
    NoOptions,
    OnElements,
    matching_kinds,
    options_key,
    prepare_pair,
)
from landscape.matching.registry import (
    METHODS_BY_NAME,
    aligns,
    declaring,
    given_options,
    matching_key,
    matching_keys,
    method_of,
    register,
    result_aligns,
    unregister,
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
from landscape.matching.weight import WeightOptions, weight_matching
from landscape.models import ModelConfig, Params
from landscape.symmetry.table import PROBE_LOGITS, PROBE_TOKENS
from landscape.threads import threaded

# the old name of the function-check batch (it was defined here)
probe_inputs = function_probe

__all__ = [
    "BARRIER_GROUPS",
    "FUNCTION_TOLERANCE",
    "MATCH_CONTEXT",
    "MATCH_GROUPS",
    "METHODS",
    "METHODS_BY_NAME",
    "MONOMIAL_GROUPS",
    "PROBE_LOGITS",
    "PROBE_TOKENS",
    "ActivationOptions",
    "Group",
    "LearnedOptions",
    "MatchContext",
    "MatchResult",
    "MatchingMethod",
    "Method",
    "NoOptions",
    "OnElements",
    "WeightOptions",
    "activation_matching",
    "aligns",
    "declaring",
    "function_check",
    "function_probe",
    "function_warnings",
    "given_options",
    "learned_matching",
    "match",
    "matching_key",
    "matching_keys",
    "matching_kinds",
    "method_of",
    "naive",
    "options_key",
    "prepare_pair",
    "probe_inputs",
    "register",
    "result_aligns",
    "unregister",
    "weight_distance",
    "weight_matching",
    "worst_check",
]


@threaded
def match(
    cfg: ModelConfig,
    params_a: Params,
    params_b: Params,
    method: Method | str,
    group: Group,
    *,
    options: Any = None,
    train_split: Any = None,
    context: MatchContext = MATCH_CONTEXT,
    **kw: Any,
) -> MatchResult:
    """Align B to A with the registered ``method`` (:func:`method_of`: naive, weight,
    activation, learned, …) under ``group``.

    The method's settings come as ``options`` (its options dataclass, or a dict) and as
    keywords named like its settings (keywords over ``options``); the other keywords are the
    method's per-call hooks (its entry's ``hooks``; any other name is refused in one line
    naming the settings). ``train_split`` (a ``data.Split``) is what a method that
    ``needs_data`` learns from: activation matching's fixed batch (its first ``batch`` rows,
    unless ``inputs`` is given), learned matching's training batches. ``context``
    (:class:`MatchContext`): the seed of whatever the method draws, where it computes and who
    hears its stages and elements. Every method's B is function-checked against the input B;
    here the processed A is checked against the input A as well (``function_check_a``):
    processing both endpoints must preserve both functions. ``consume=True`` (a method that
    ``consumes``: weight matching; ignored by the others) hands ``params_a`` and ``params_b``
    over to be emptied, both checks then made against logits taken before
    (:func:`landscape.matching.weight.weight_matching`): the same result in less memory.
    """
    entry = method_of(method)
    consume = kw.pop("consume", False) and entry.consumes
    settings = entry.settings(options, **{k: kw.pop(k) for k in list(kw) if k not in entry.hooks})
    if consume:
        kw["consume"] = True
    reference_a = probe_logits(cfg, params_a) if consume else params_a
    r = entry.run(cfg, params_a, params_b, group, settings, train_split=train_split,
                  context=context, **kw)  # fmt: skip
    r.function_check_a = function_check(cfg, reference_a, r.cfg, r.params_a)
    return r
