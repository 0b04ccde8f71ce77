"""Several seeds of one recipe as one batched model: every parameter stacked on a seed axis.

Seed s's parameters are slice s of every tensor, θ[s] (shapes [S, ...]). A training step computes
the vector of the seeds' losses L_s(θ[s]) by ``torch.vmap`` over the reference forward (the one
solo training runs, so each slice does the solo step's operations) and back-propagates their sum:
L_s reads θ[s] alone, so ∂(Σ_s L_s)/∂θ[s] = ∇L_s(θ[s]), each seed's own gradient. Clipping is per
seed (:func:`clip_per_seed_`), and AdamW is elementwise with one learning rate and one decay rule
for every seed, so ``torch.optim.AdamW`` on the stacked tensors updates each slice as the solo
optimizer updates that seed. A step runs one set of kernels for all S seeds instead of S sets,
which is what a launch-bound GPU needs (a 0.5M-parameter model spends its step launching kernels).

What can differ from S solo runs is the rounding inside the batched kernels. On the CPU nothing
did: mlp-digits over its whole recipe, and short ViT and GPT runs with dropout, gave weights
bit-identical to the solo runs' under ATen's default, avx2 and the machine's own kernels (torch
2.13, AMD EPYC); only the reported training loss, a batch mean that vmap reduces in another order,
moved (by < 1e-7). A GPU's batched matrix products may sum in another order than its single
ones, so ``landscape.models.train.train_seeds`` stores the seeds under a key of their own.
"""

from __future__ import annotations

import torch

from landscape.device import CPU
from landscape.models.config import ModelConfig
from landscape.models.functional import forward, loss_and_accuracy
from landscape.models.params import Params, init_params
from landscape.models.primitives import Dropout
from landscape.models.registry import random_inputs


def stack_params(seeds: list[Params], device: torch.device) -> Params:
    """The seeds' parameters as one dict of [S, ...] leaves that autograd tracks."""
    return {k: torch.stack([p[k] for p in seeds]).to(device).requires_grad_() for k in seeds[0]}


def seed_slice(params: Params, s: int) -> Params:
    """Seed ``s``'s parameters, detached views of the stacked ones (no copy)."""
    return {k: v.detach()[s] for k, v in params.items()}


class SeedDropouts:
    """Each seed's own :class:`Dropout` inside ``torch.vmap`` over seeds.

    Solo training draws one uniform per entry from the seed's generator at every dropout site, in
    forward order. Here the same sites are reached once for all seeds with ``x`` batched: each
    seed's generator draws its uniforms for the per-seed shape (the same calls, so the same
    values as in its solo run), the draws are stacked [S, ...], and ``index`` (the seed number as
    vmap sees it, one per slice) picks each slice's own. The vmap runs with ``randomness="same"``,
    under which a draw from an explicit generator is made once, as written.
    """

    def __init__(self, dropouts: list[Dropout], index: torch.Tensor) -> None:
        self.dropouts = dropouts
        self.index = index

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        u = torch.stack([d.uniform(x.shape, x.device, x.dtype) for d in self.dropouts])
        return self.dropouts[0].drop(x, u[self.index])


def seed_losses(
    cfg: ModelConfig,
    params: Params,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    dropouts: list[Dropout] | None = None,
) -> torch.Tensor:
    """[S] training losses, seed s's model on its own batch ``inputs[s]``, ``targets[s]``
    (mean cross-entropy, as ``loss_and_accuracy``), with seed s's dropout if any."""
    index = torch.arange(inputs.shape[0], device=inputs.device)

    def loss(p: Params, x: torch.Tensor, y: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        drop = SeedDropouts(dropouts, i) if dropouts else None
        return loss_and_accuracy(cfg, forward(cfg, p, x, fast=False, dropout=drop), y)[0]

    return torch.vmap(loss, randomness="same")(params, inputs, targets, index)


@torch.no_grad()
def clip_per_seed_(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale each seed's gradients, in place, by min(1, c / (‖g_s‖ + 10⁻⁶)), where ‖g_s‖ is the
    global 2-norm of seed s's slices of all ``grads`` [S, ...]: ``clip_grad_norm_`` of each seed
    on its own, by the same operations on each seed's slices (per-tensor norms, the norm of
    their stack, the clamped coefficient). Returns the [S] norms."""
    n_seeds, n = grads[0].shape[0], len(grads)
    norms = torch._foreach_norm([g[s] for s in range(n_seeds) for g in grads], 2.0)
    total = torch.stack([torch.linalg.vector_norm(torch.stack(norms[s * n : (s + 1) * n]), 2.0)
                         for s in range(n_seeds)])  # fmt: skip
    coef = torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *[1] * (g.ndim - 1)))
    return total


def batching_problem(cfg: ModelConfig, dropout: float = 0.0) -> str | None:
    """Why ``cfg`` cannot be trained batched, or None: a training step (forward, loss, backward)
    of two copies of its initial model on a random batch of two, on the CPU. An operation
    without a ``torch.vmap`` batching rule is named here, before any training starts, so that
    training can fall back to one seed at a time instead of failing."""
    params = stack_params([init_params(cfg, 0)] * 2, CPU)
    x = random_inputs(cfg, 2, torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = forward(cfg, seed_slice(params, 0), x, fast=False)
    y = torch.zeros(logits.shape[:-1], dtype=torch.long)
    drops = [Dropout(dropout, s) for s in range(2)] if dropout else None
    try:
        seed_losses(cfg, params, torch.stack([x, x]), torch.stack([y, y]), drops).sum().backward()
    except (RuntimeError, NotImplementedError) as e:  # vmap's "no batching rule" and kin
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None
