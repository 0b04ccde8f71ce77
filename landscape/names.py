"""The names of the contract: matching methods, group levels and merge spaces, written once.

Torch-free, so that the command line's parser (``landscape --help``), the app's pages and the
library read the same tuples (docs/design.md §5). What a name means lives where it is used: a
method in the registry (``landscape.matching.registry``), a group level in
``landscape.symmetry.spec`` (its kind per gauge variable), a space in
``landscape.models.circuits``.

- :data:`METHODS`: the matching methods offered, in the order tables and pages show them.
- :data:`MATCH_GROUPS`: every residual group level matching accepts (the keys of
  ``landscape.symmetry.RESID_GROUPS``; a test keeps them equal).
- :data:`BARRIER_GROUPS`: the levels a barrier is measured under, offered by the commands,
  tables and pages: the chain S_d ⊂ B_d ⊂ O(d), and O(d) fixing the mean direction
  (``orth-mean``, S_d ⊂ it ⊂ O(d)), the rotations a LayerNorm model can be written back with.
- :data:`MONOMIAL_GROUPS`: the coordinate-preserving levels (S_d, B_d), whose elements relabel
  and flip coordinates (atlas, artifact transport).
- :data:`SPACES`: the merge spaces a straight line is drawn in.

The symmetry table's levels (the residual ones and the within-head and scaling levels ``qk``,
``ov``, ``scale``) are ``landscape.symmetry.SYMMETRY_LEVELS``.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "BARRIER_GROUPS",
    "MATCH_GROUPS",
    "METHODS",
    "MONOMIAL_GROUPS",
    "SPACES",
    "Group",
    "Method",
    "Space",
    "method_key",
]

Method = Literal["naive", "activation", "weight", "learned"]
METHODS: tuple[Method, ...] = get_args(Method)

Group = Literal["perm", "perm-global-sign", "signed-perm", "orth", "orth-mean"]
MATCH_GROUPS: tuple[Group, ...] = get_args(Group)
BARRIER_GROUPS: tuple[Group, ...] = ("perm", "signed-perm", "orth", "orth-mean")
MONOMIAL_GROUPS: tuple[Group, ...] = ("perm", "signed-perm")

Space = Literal["weights", "circuits"]
SPACES: tuple[Space, ...] = get_args(Space)


def method_key(method: str, group: str | None = None, *, aligns: bool) -> str:
    """``"method/group"`` (``perm`` when no group is given), or the method's name alone for a
    method that aligns nothing (``aligns`` False: it has no group, e.g. ``"naive"``): how
    tables, legends and the figures' styles name a matching. Whether a method aligns is its
    registry entry's fact (``landscape.matching.aligns``, or a result's ``aligns``); this module
    only writes the key."""
    return f"{method}/{group or 'perm'}" if aligns else method
