"""The matching contract: the one list of methods and group levels, and what a level means.

``Method`` and ``Group`` are the names every layer above reads (experiments, pairs, the CLI, the
app, the atlas): import the tuples from here instead of writing the strings again.

- :data:`METHODS`: every matching method, in the order tables and pages show them.
- :data:`MATCH_GROUPS`: every residual group level matching accepts, the keys of
  ``landscape.symmetry.RESID_GROUPS`` (a test keeps them equal).
- :data:`GROUPS`: the chain S_d ⊂ B_d ⊂ O(d) offered by the barrier commands, tables and pages,
  and O(d) fixing the mean direction (``orth-mean``, S_d ⊂ it ⊂ O(d)): the rotations a
  LayerNorm model can be written back with (``landscape.models.exporters``).
- :data:`MONOMIAL_GROUPS`: the coordinate-preserving levels (S_d, B_d), the ones whose elements
  relabel and flip coordinates (atlas, artifact transport).

A group level means a kind per gauge variable (:func:`matching_kinds`) and the processing that
makes it exact on both endpoints (:func:`prepare_pair`).
"""

from __future__ import annotations

from typing import Literal, get_args

from landscape.models import ModelConfig, Params
from landscape.symmetry import RESID_GROUPS, Spec, group_kinds
from landscape.symmetry.processing import prepare

Method = Literal["naive", "activation", "weight", "learned"]
METHODS: tuple[Method, ...] = get_args(Method)

Group = Literal["perm", "perm-global-sign", "signed-perm", "orth", "orth-mean"]
MATCH_GROUPS: tuple[Group, ...] = get_args(Group)
GROUPS: tuple[Group, ...] = ("perm", "signed-perm", "orth", "orth-mean")
MONOMIAL_GROUPS: tuple[Group, ...] = ("perm", "signed-perm")


def matching_kinds(spec: Spec, group: str) -> dict[str, str]:
    """Kind per matched variable: the group's residual kind, permutations of FFN units and heads.

    :func:`landscape.symmetry.group_kinds` with ``gated_signs=True``: gated FFN units (SwiGLU)
    admit signed permutations (signs act on the linear up projection, the gate is only
    permuted), so with a signed or orthogonal residual group they are matched as signed
    permutations; ``perm`` keeps plain permutations everywhere. Only residual levels are
    matched here; weight matching adds the within-head maps
    (:func:`landscape.matching.weight.weight_kinds`).
    """
    if group not in RESID_GROUPS:
        raise ValueError(f"matching needs a group in {MATCH_GROUPS}, got {group!r}")
    return group_kinds(spec, group, gated_signs=True)


def prepare_pair(
    cfg: ModelConfig, params_a: Params, params_b: Params, group: str, *, consume: bool = False
) -> tuple[ModelConfig, Params, Params]:
    """Process A and B with the steps that make ``group`` exact (the same steps for both).

    ``consume``: the input dicts are emptied as soon as each is processed, so that a caller who
    handed them over holds one processed copy of each model, not the originals as well (tensors
    the processing leaves alone are shared, and stay).
    """
    cfg_a, a = prepare(cfg, params_a, group)
    if consume:  # a group that needs no processing returns the input dict itself
        a = dict(a)
        params_a.clear()
    cfg_b, b = prepare(cfg, params_b, group)
    if consume:
        b = dict(b)
        params_b.clear()
    if cfg_a != cfg_b or set(a) != set(b):
        raise ValueError("A and B process differently: are they the same architecture?")
    return cfg_a, a, b
