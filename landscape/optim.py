"""Functional AdamW: parameters and optimizer state are flat dicts of tensors, never mutated.

The one functional copy of the optimizer. Zoo training keeps ``torch.optim.AdamW`` (its shipped
checkpoints are reproduced bit for bit, and the fused update rounds differently); both apply the
recipe's weight-decay rule, :func:`landscape.models.recipe.decays`. The state is a dict
``exp_avg.{name}``, ``exp_avg_sq.{name}``, ``step`` so that it can be saved and transported like
any other artifact (``landscape.experiments.transport``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from landscape.models import ModelConfig, Params, forward, loss_and_accuracy
from landscape.models.recipe import decays

__all__ = ["ADAMW", "AdamWOptions", "adamw_init", "adamw_steps", "adamw_update", "decays"]

State = dict[str, torch.Tensor]
LossFn = Callable[[Params, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class AdamWOptions:
    """AdamW's hyper-parameters (:func:`adamw_update` says what each does): the step ``lr``,
    the moments' decay rates ``betas``, ``eps`` in the denominator, the decoupled
    ``weight_decay`` (where :func:`decays` says) and the global gradient-norm clip
    ``grad_clip``."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    weight_decay: float = 0.01
    grad_clip: float = 1.0


ADAMW = AdamWOptions()  # the defaults


def adamw_init(params: Params) -> State:
    """Fresh AdamW state: ``exp_avg.{name}``, ``exp_avg_sq.{name}`` zeros, ``step`` 0."""
    state = {f"exp_avg.{k}": torch.zeros_like(v) for k, v in params.items()}
    state.update({f"exp_avg_sq.{k}": torch.zeros_like(v) for k, v in params.items()})
    state["step"] = torch.zeros((), dtype=torch.float64)
    return state


def adamw_update(
    params: Params,
    grads: Params,
    state: State,
    *,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-8,
    weight_decay: float = 0.01,
    grad_clip: float = 1.0,
) -> tuple[Params, State]:
    """One AdamW step (PyTorch's update, decoupled decay, global-norm clipping): new params and
    state, the inputs untouched.

    ``g ← g·min(1, c/(‖g‖ + 10⁻⁶))`` over all gradients at once, ``m ← β₁m + (1−β₁)g``,
    ``v ← β₂v + (1−β₂)g²``, ``θ ← θ(1 − lr·wd) − lr·m̂/(√v̂ + ε)`` with ``m̂ = m/(1−β₁ᵗ)``,
    ``v̂ = v/(1−β₂ᵗ)``; decay only where :func:`decays` says so. Every operation is
    elementwise or a global norm, so the update commutes with any signed permutation of the
    parameters when m moves like θ and v like |G| (the transport rule).
    """
    params = {k: v.clone() for k, v in params.items()}
    state = {k: v.clone() for k, v in state.items()}
    _step_(params, dict(grads), state, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
           grad_clip=grad_clip)  # fmt: skip
    return params, state


def _step_(
    params: Params,
    grads: Params,
    state: State,
    *,
    lr: float,
    betas: tuple[float, float],
    eps: float,
    weight_decay: float,
    grad_clip: float,
) -> None:
    """:func:`adamw_update` in place on ``params`` and ``state``; each gradient is dropped from
    ``grads`` once used. The same operations in the same order, so the same bits, without a
    second copy of the parameters and moments (a 163M-parameter model: 2 GB less at the peak)."""
    b1, b2 = betas
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values()))
    coef = min(1.0, grad_clip / (float(norm) + 1e-6))
    t = float(state["step"]) + 1
    state["step"] = torch.tensor(t, dtype=torch.float64)
    for k, w in params.items():
        g = grads.pop(k) * coef
        m = state[f"exp_avg.{k}"].mul_(b1).add_((1 - b1) * g)
        v = state[f"exp_avg_sq.{k}"].mul_(b2).add_((1 - b2) * g * g)
        del g
        if decays(k, w):
            w.mul_(1 - lr * weight_decay)
        denom = (v / (1 - b2**t)).sqrt() + eps
        w.sub_(lr * (m / (1 - b1**t)) / denom)


def adamw_steps(
    cfg: ModelConfig,
    start: tuple[Params, State | None],
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    steps: int,
    options: AdamWOptions = ADAMW,
    *,
    loss_fn: LossFn | None = None,
    callback: Callable[[int, Params], None] | None = None,
    take_state: bool = False,
) -> tuple[Params, State]:
    """``steps`` of :func:`adamw_update` with the hyper-parameters ``options``
    (:class:`AdamWOptions`) on minibatches from ``batches``, from ``start`` = (parameters,
    state) (a state of None starts fresh); returns the final parameters and state.

    The caller's parameters and state are never touched, unless ``take_state``: then the
    caller hands the state over, and it is updated in place and returned instead of copied
    (on a 135M-parameter model the copy is 1.2 GiB).

    The loss is the model's cross-entropy (``loss_and_accuracy``) unless ``loss_fn(params, x,
    y)`` is given. ``callback(step, params)`` runs after each step (step counted from 1) with
    the live parameters, which later steps change in place: a callback that keeps them keeps
    a copy.
    """
    # copies (of the state, unless it is handed over), updated in place step after step
    params, state = start
    o = options
    if state is None:
        state = adamw_init(params)
    elif not take_state:
        state = {k: v.clone() for k, v in state.items()}
    p = {k: v.detach().clone() for k, v in params.items()}
    for i in range(steps):
        x, y = next(batches)
        if x.is_floating_point():
            x = x.to(next(iter(p.values())).dtype)
        leaves = {k: v.detach().requires_grad_() for k, v in p.items()}
        if loss_fn is None:
            loss, _ = loss_and_accuracy(cfg, forward(cfg, leaves, x), y)
        else:
            loss = loss_fn(leaves, x, y)
        grads = dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values())), strict=True))
        del loss, leaves
        _step_(p, grads, state, lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay,
               grad_clip=o.grad_clip)  # fmt: skip
        if callback is not None:
            callback(i + 1, p)
    return p, state
