"""The FFN of a block: its hidden units (plain or gated), and the sparse mixture of experts
with its router.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from landscape.models.config import ModelConfig
from landscape.models.params import Params
from landscape.models.primitives import activation, bias_of, reference_linear


def hidden_units(
    cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor, linear: Callable,
    gate_first: bool = False,
) -> torch.Tensor:  # fmt: skip
    """The FFN's hidden units (after the activation, and the gate of a gated FFN) on ``x``;
    ``gate_first``: the gate's product before the up projection's (``BlockLayout.gate_first``)."""

    def lin(name: str) -> torch.Tensor:
        return linear(x, params[f"{prefix}.W_{name}"], bias_of(cfg, params, f"{prefix}.b_{name}"))

    if not cfg.gated:
        return activation(cfg, lin("in"))
    if gate_first:
        gate = lin("gate")
        return activation(cfg, gate) * lin("in")
    h = lin("in")
    return activation(cfg, lin("gate")) * h


def routing(cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor,
            linear: Callable = reference_linear) -> torch.Tensor:  # fmt: skip
    """The router's weights [..., n_experts] on the normalised stream ``x``: the ``top_k``
    largest router logits ``x·W_router + b_router``, a softmax over those alone, and 0 for every
    other expert (the Mixtral-style router: a softmax over all logits renormalised over the top
    k is the same). With ``cfg.norm_top_k`` False the chosen experts keep their weights in a
    softmax over every logit, not renormalised (they sum to less than 1). Ties go to the lower
    expert index, as ``torch.topk`` keeps them."""
    logits = linear(x, params[f"{prefix}.W_router"], bias_of(cfg, params, f"{prefix}.b_router"))
    top, idx = logits.topk(cfg.top_k, dim=-1)
    w = top.softmax(-1) if cfg.norm_top_k else logits.softmax(-1).gather(-1, idx)
    return torch.zeros_like(logits).scatter(-1, idx, w)


def mixture(
    cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor, linear: Callable,
    gate_first: bool, cache: dict | None,
) -> torch.Tensor:  # fmt: skip
    """A sparse mixture of experts on ``x`` [..., d_model]: ``Σ_e w_e(x)·FFN_e(x)`` with the
    router's weights ``w`` (:func:`routing`; zero outside each position's top k) and expert e an
    FFN of the config's kind (plain or gated) with the parameters at index e of the expert axis.

    Every expert runs on every position and the unrouted ones are weighted by an exact 0: the
    same function as running each expert on its own positions, with no data-dependent shapes, so
    it is deterministic on every device and runs under ``torch.vmap`` (batched training, the
    vmapped evaluation of mixtures); it costs ``n_experts / top_k`` times the routed work, which
    is nothing at the zoo's sizes. Both kernel sets compute it alike. With a ``cache`` it holds
    ``{prefix}.hidden`` [..., n_experts, d_mlp] (every expert's units at every position) and
    ``{prefix}.routing`` [..., n_experts] (the weights).
    """
    w = routing(cfg, params, prefix, x, linear)

    def lin(name: str) -> torch.Tensor:  # [..., n_experts, d_mlp]
        b = bias_of(cfg, params, f"{prefix}.b_{name}")
        return torch.einsum("...d,edf->...ef", x, params[f"{prefix}.W_{name}"]) + b

    if not cfg.gated:
        h = activation(cfg, lin("in"))
    elif gate_first:
        gate = lin("gate")
        h = activation(cfg, gate) * lin("in")
    else:
        up = lin("in")
        h = activation(cfg, lin("gate")) * up
    if cache is not None:
        cache[f"{prefix}.hidden"], cache[f"{prefix}.routing"] = h, w
    y = torch.einsum("...ef,efd->...ed", h, params[f"{prefix}.W_out"])
    y = y + bias_of(cfg, params, f"{prefix}.b_out")
    return torch.einsum("...e,...ed->...d", w, y)
