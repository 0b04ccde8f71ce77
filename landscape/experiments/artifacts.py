"""Artifacts trained on or against a model's residual coordinates, and how they are measured:
steering vectors, linear probes, sparse autoencoders, LoRA adapters and AdamW optimizer state
(docs/design.md §1, "Coordinate transport"). How each moves under a gauge, and how it is saved
and read back, is :mod:`landscape.experiments.transport`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from landscape.errors import LandscapeError
from landscape.experiments.gauge.coordinates import readout_features
from landscape.models import ModelConfig, Params, forward
from landscape.tasks import Task


@dataclass
class Artifact:
    """Tensors of one artifact and its metadata (``layer``, ``cls``... see the builders)."""

    kind: str
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- steering


def class_mean_difference(feats: torch.Tensor, labels: torch.Tensor, cls: int) -> torch.Tensor:
    """``mean(x | y = c) − mean(x | y ≠ c)`` over rows of ``feats``."""
    mask = labels.reshape(-1) == cls
    return feats[mask].mean(0) - feats[~mask].mean(0)


def steering_vector(cfg: ModelConfig, params: Params, inputs: torch.Tensor,
                    targets: torch.Tensor, *, layer: int, cls: int, scale: float = 1.0
                    ) -> Artifact:  # fmt: skip
    """A class-mean-difference steering vector in the stream entering block ``layer`` (≥ 1)."""
    if not 1 <= layer <= cfg.n_layers:
        raise LandscapeError(f"steering layer must be in 1..{cfg.n_layers}, got {layer}")
    v = class_mean_difference(readout_features(cfg, params, inputs, layer), targets, cls)
    return Artifact("steering", {"vector": scale * v}, {"layer": layer, "cls": cls,
                                                        "scale": scale})  # fmt: skip


def steered(cfg: ModelConfig, params: Params, vector: torch.Tensor, layer: int) -> Params:
    """Parameters whose stream entering block ``layer`` is shifted by ``vector`` everywhere.

    Adding v at every position is adding v to the last writer bias before that point,
    ``b_out`` of block ``layer − 1`` — the steering vector is literally a writer. A bias-free
    model (``cfg.bias=False``: Llama) reads a missing bias as 0, so the vector becomes the bias.
    """
    out = dict(params)
    name = f"blocks.{layer - 1}.mlp.b_out"
    ref = params[f"blocks.{layer - 1}.mlp.W_out"]
    out[name] = params.get(name, torch.zeros((), dtype=ref.dtype, device=ref.device)) + vector.to(
        ref.dtype
    )
    return out


def _readout_probs(cfg: ModelConfig, params: Params, inputs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        logits = forward(cfg, params, inputs)
    return logits.reshape(-1, logits.shape[-1]).double().softmax(-1)


def steering_effect(cfg: ModelConfig, params: Params, artifact: Artifact,
                    inputs: torch.Tensor, targets: torch.Tensor) -> float:  # fmt: skip
    """Mean shift of the target class's probability when the vector is added, over every
    prediction whose label is not the target class."""
    cls, layer = int(artifact.meta["cls"]), int(artifact.meta["layer"])
    mask = targets.reshape(-1) != cls
    base = _readout_probs(cfg, params, inputs)[mask, cls]
    moved = _readout_probs(cfg, steered(cfg, params, artifact.tensors["vector"], layer),
                           inputs)[mask, cls]  # fmt: skip
    return float((moved - base).mean())


# ----------------------------------------------------------------------------- probe


def train_probe(feats: torch.Tensor, labels: torch.Tensor, n_classes: int, *, steps: int = 300,
                lr: float = 0.02, seed: int = 0) -> Artifact:  # fmt: skip
    """Multinomial logistic regression ``softmax(x·W + b)`` on residual features (Adam, full
    batch), over the classes that occur in ``labels``.

    A class the training labels never show cannot be learned, only pushed down; leaving it out
    keeps the probe's size to what the data can teach: a language model's probe has one column
    per token seen (hundreds), not per token of a 50,000-token vocabulary, which made it cost as
    much as fine-tuning. ``classes`` [k] holds the class of each column; where every one of the
    ``n_classes`` occurs, it is ``0 … n_classes − 1`` and the probe is the full one.
    """
    y_all = labels.reshape(-1)
    if y_all.numel() and (int(y_all.min()) < 0 or int(y_all.max()) >= n_classes):
        raise LandscapeError(f"probe labels must lie in 0 … {n_classes - 1}")
    classes, y = torch.unique(y_all, sorted=True, return_inverse=True)
    gen = torch.Generator().manual_seed(seed)
    d = feats.shape[1]
    w = (0.01 * torch.randn(d, classes.numel(), generator=gen)).to(feats.device).requires_grad_()
    b = torch.zeros(classes.numel(), device=feats.device, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=lr)
    x = feats.detach()
    for _ in range(steps):
        loss = F.cross_entropy(x @ w + b, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Artifact("probe", {"W": w.detach(), "b": b.detach(), "classes": classes}, {})


def probe_accuracy(artifact: Artifact, feats: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of rows whose most probable column is their class (an artifact without
    ``classes`` has one column per class)."""
    t = artifact.tensors
    pred = (feats @ t["W"] + t["b"]).argmax(-1)
    if "classes" in t:
        pred = t["classes"].to(pred.device)[pred]
    return float((pred == labels.reshape(-1)).double().mean())


# ----------------------------------------------------------------------------- SAE


def sae_reconstruct(artifact: Artifact, x: torch.Tensor) -> torch.Tensor:
    """``x̂ = ReLU((x − b_dec)·W_enc + b_enc)·W_dec + b_dec``."""
    t = artifact.tensors
    z = F.relu((x - t["b_dec"]) @ t["W_enc"] + t["b_enc"])
    return z @ t["W_dec"] + t["b_dec"]


def sae_nmse(artifact: Artifact, x: torch.Tensor) -> float:
    """Normalised reconstruction error ``Σ‖x − x̂‖² / Σ‖x − x̄‖²``."""
    x = x.double()
    a = Artifact("sae", {k: v.double() for k, v in artifact.tensors.items()})
    err = ((x - sae_reconstruct(a, x)) ** 2).sum()
    return float(err / ((x - x.mean(0)) ** 2).sum())


def train_sae(feats: torch.Tensor, *, expansion: int = 4, l1: float = 1e-3, steps: int = 600,
              lr: float = 3e-3, seed: int = 0) -> Artifact:  # fmt: skip
    """A small ReLU sparse autoencoder on residual features (Adam, full batch).

    Loss ``‖x − x̂‖²/‖x − x̄‖² + l1·mean|z|·‖W_dec‖_row`` with the decoder rows' norms in the
    penalty so the sparsity cannot be bought by shrinking z.
    """
    gen = torch.Generator().manual_seed(seed)
    x = feats.detach().float()
    d, m = x.shape[1], expansion * x.shape[1]
    dec = torch.randn(m, d, generator=gen).to(x.device)
    dec = dec / dec.norm(dim=1, keepdim=True)
    scale = float(x.std())
    t = {
        "W_enc": (dec.T.clone() / scale).requires_grad_(),
        "b_enc": torch.zeros(m, device=x.device, requires_grad=True),
        "W_dec": (dec * scale).requires_grad_(),
        "b_dec": x.mean(0).clone().requires_grad_(),
    }
    opt = torch.optim.Adam(list(t.values()), lr=lr)
    var = ((x - x.mean(0)) ** 2).sum(1).mean()
    for _ in range(steps):
        z = F.relu((x - t["b_dec"]) @ t["W_enc"] + t["b_enc"])
        x_hat = z @ t["W_dec"] + t["b_dec"]
        rec = ((x - x_hat) ** 2).sum(1).mean() / var
        loss = rec + l1 * (z * t["W_dec"].norm(dim=1)).sum(1).mean() / scale
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Artifact("sae", {k: v.detach() for k, v in t.items()}, {"l1": l1})


# ----------------------------------------------------------------------------- LoRA


def lora_targets(cfg: ModelConfig) -> list[str]:
    """The adapted matrices: every layer's ``W_in`` (reader) and ``W_out`` (writer), and ``W_U``."""
    names = [f"blocks.{layer}.mlp.{w}" for layer in range(cfg.n_layers) for w in ("W_in", "W_out")]
    return [*names, "unembed.W_U"]


def with_lora(params: Params, artifact: Artifact) -> Params:
    """``W ← W + A·B`` for every adapted parameter."""
    out = dict(params)
    for name, a in artifact.tensors.items():
        if name.endswith(".A"):
            param = name[: -len(".A")]
            out[param] = params[param] + a @ artifact.tensors[f"{param}.B"]
    return out


def swap_labels(targets: torch.Tensor, pair: Sequence[int]) -> torch.Tensor:
    """The LoRA sub-task's labels: classes ``pair[0]`` and ``pair[1]`` exchanged."""
    c1, c2 = pair
    out = targets.clone()
    out[targets == c1] = c2
    out[targets == c2] = c1
    return out


def subtask_loss(cfg: ModelConfig, params: Params, inputs: torch.Tensor, targets: torch.Tensor,
                 pair: Sequence[int]) -> float:  # fmt: skip
    """Cross-entropy on the swapped labels over the predictions whose label is in ``pair``."""
    with torch.no_grad():
        logits = forward(cfg, params, inputs)
    y = targets.reshape(-1)
    mask = (y == pair[0]) | (y == pair[1])
    logits = logits.reshape(-1, logits.shape[-1])[mask].double()
    return float(F.cross_entropy(logits, swap_labels(y[mask], pair)))


def train_lora(task: Task, pair: Sequence[int], *, rank: int = 2, steps: int = 150,
               lr: float = 1e-2, seed: int = 0) -> Artifact:  # fmt: skip
    """Rank-``rank`` LoRA on :func:`lora_targets` teaching the sub-task "swap two classes"
    (``ΔW = A·B``, B initialised to zero; Adam on the training data with swapped labels)."""
    cfg, params = task.cfg, task.params
    gen = torch.Generator().manual_seed(seed)
    t: dict[str, torch.Tensor] = {}
    for name in lora_targets(cfg):
        rows, cols = params[name].shape
        t[f"{name}.A"] = (torch.randn(rows, rank, generator=gen) / math.sqrt(rows)).to(
            task.device).requires_grad_()  # fmt: skip
        t[f"{name}.B"] = torch.zeros(rank, cols, device=task.device, requires_grad=True)
    opt = torch.optim.Adam(list(t.values()), lr=lr)
    batches = task.batches(seed=300 + seed)
    for _ in range(steps):
        x, y = next(batches)
        logits = forward(cfg, with_lora(params, Artifact("lora", t)), x)
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), swap_labels(y, pair).reshape(-1)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Artifact("lora", {k: v.detach() for k, v in t.items()}, {"pair": list(pair),
                                                                    "rank": rank})  # fmt: skip


# ----------------------------------------------------------------------------- AdamW


def adamw_artifact(state: dict[str, torch.Tensor]) -> Artifact:
    return Artifact("adamw", dict(state), {"step": int(state["step"])})
