"""Weight-space symmetries of the zoo transformers: one spec per architecture, one ``apply``.

The package, in import order (each module imports only the ones before it):

- :mod:`~landscape.symmetry.spec`: element kinds, :class:`Role`, :class:`Variable`,
  :class:`Spec` and :func:`spec_for` (which gauge variable acts on which parameter axis), the
  group levels and :func:`group_kinds`;
- :mod:`~landscape.symmetry.elements`: :class:`Element`, :class:`Transform` (compose, inverse,
  identity) and seeded random elements;
- :mod:`~landscape.symmetry.action`: the norm state of a parameter set, which residual kinds it
  admits (:func:`resid_needs`), :func:`check_transform` and the pure :func:`apply`;
- :mod:`~landscape.symmetry.processing`: the function-preserving processing steps that widen
  the exact group, and the width change :func:`embed_width`;
- :mod:`~landscape.symmetry.table`: :func:`symmetry_table`, every level measured, and the one
  probe-input builder :func:`probe_inputs`.
"""

from __future__ import annotations

from landscape.symmetry.action import (
    PROCESSING_ORDER,
    NormState,
    apply,
    check_transform,
    norm_state,
    resid_needs,
)
from landscape.symmetry.elements import (
    Element,
    Transform,
    as_matrix,
    compose,
    fix_mean,
    follow_slots,
    identity,
    inverse,
    mean_basis,
    mean_free_part,
    random_element,
    random_grouped_perm,
    random_orthogonal,
    random_rope_commuting,
    random_semi_orthogonal,
    random_transform,
    rope_commuting_error,
)
from landscape.symmetry.processing import embed_width, rescale_norm
from landscape.symmetry.spec import (
    ABS,
    GLOBAL_SIGN,
    GROUP_OF,
    INV_T,
    INVERTIBLE,
    KINDS,
    KV_G,
    KV_INV_T,
    MONOMIAL_KINDS,
    ORTH,
    ORTH_MEAN,
    PERM,
    PERM_OF,
    RESID_GROUPS,
    ROPE,
    SCALE,
    SCALED_PERM,
    SEMI_ORTH,
    SIGNED_PERM,
    SYMMETRY_LEVELS,
    G,
    Role,
    Spec,
    Variable,
    group_kinds,
    resid_blocked,
    spec_for,
)
from landscape.symmetry.table import admitted_symmetries, probe_inputs, symmetry_table

__all__ = [
    "ABS",
    "GLOBAL_SIGN",
    "GROUP_OF",
    "INVERTIBLE",
    "INV_T",
    "KINDS",
    "KV_G",
    "KV_INV_T",
    "MONOMIAL_KINDS",
    "ORTH",
    "ORTH_MEAN",
    "PERM",
    "PERM_OF",
    "PROCESSING_ORDER",
    "RESID_GROUPS",
    "ROPE",
    "SCALE",
    "SCALED_PERM",
    "SEMI_ORTH",
    "SIGNED_PERM",
    "SYMMETRY_LEVELS",
    "G",
    "Element",
    "NormState",
    "Role",
    "Spec",
    "Transform",
    "Variable",
    "apply",
    "as_matrix",
    "check_transform",
    "compose",
    "fix_mean",
    "follow_slots",
    "embed_width",
    "rescale_norm",
    "group_kinds",
    "identity",
    "inverse",
    "mean_basis",
    "mean_free_part",
    "norm_state",
    "probe_inputs",
    "random_element",
    "random_grouped_perm",
    "random_orthogonal",
    "random_rope_commuting",
    "random_semi_orthogonal",
    "random_transform",
    "resid_blocked",
    "resid_needs",
    "rope_commuting_error",
    "spec_for",
    "symmetry_table",
    "admitted_symmetries",
]
