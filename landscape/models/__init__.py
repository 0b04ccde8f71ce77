"""Models: configurations, the architecture registry, parameters and the functional forward.

- :mod:`~landscape.models.registry`: one entry per architecture (mlp, vit, gpt, bert) with the
  facts code branches on; the only reader of ``cfg.arch``.
- :mod:`~landscape.models.layouts`: one entry per block layout (pre, post, parallel, sandwich,
  postln): where the norms sit, parallel or sequential; the reader of ``cfg.block``.
- :mod:`~landscape.models.config`: :class:`ModelConfig`, frozen, checked on construction.
- :mod:`~landscape.models.params`: canonical parameter names and shapes, seeded initialisation.
- :mod:`~landscape.models.functional`: norms, attention, embedding, ``forward`` (one block loop
  with two kernel sets, the reference and the fast inference path, chosen by ``fast=``) and the
  loss; the maths is in its docstring.
- :mod:`~landscape.models.checkpoint`, :mod:`~landscape.models.zoo`,
  :mod:`~landscape.models.train`, :mod:`~landscape.models.importers`: checkpoints, the default
  zoo, training and imports; imported where used, so ``import landscape`` stays fast.
"""

from __future__ import annotations

from landscape.models.config import ACTS, ARCHS, MLPS, NORMS, POS, ModelConfig
from landscape.models.functional import (
    default_fast,
    embed,
    forward,
    forward_resid,
    loss_and_accuracy,
)
from landscape.models.layouts import LAYOUTS, BlockLayout, layout_of
from landscape.models.params import Params, count_params, init_params, param_shapes
from landscape.models.primitives import rotary
from landscape.models.registry import ARCHITECTURES, Architecture, architecture_of, patchify
from landscape.models.self_attention import SHORT_CONTEXT, attention

__all__ = [
    "ACTS",
    "ARCHITECTURES",
    "ARCHS",
    "LAYOUTS",
    "MLPS",
    "NORMS",
    "POS",
    "SHORT_CONTEXT",
    "Architecture",
    "BlockLayout",
    "ModelConfig",
    "Params",
    "architecture_of",
    "attention",
    "count_params",
    "default_fast",
    "embed",
    "forward",
    "forward_resid",
    "init_params",
    "layout_of",
    "loss_and_accuracy",
    "param_shapes",
    "patchify",
    "rotary",
]
