"""Gauge sweep: which facts about a model survive a random function-preserving gauge (DESIGN §1,
"Signed-permutation transport").

For an RMSNorm stream with per-channel gains the coordinate-preserving residual gauge is the
signed-permutation group B_d = S_d ⋉ {±1}^d: B = g(A) writes ``x·G`` where A writes ``x``, so
B's residual coordinate i is ``s_i · x[π(i)]`` (``Element``: ``G[π(i), i] = s_i``). The sweep:

1. the symmetry table (:func:`landscape.symmetry.symmetry_table`);
2. scramble: θ against g(θ) for random g in S_d, B_d and O(d): function check, naive barrier,
   barrier after matching restricted to S_d, B_d, O(d) (:func:`scramble_test`);
3. recovery under drift: B = g(A) with g ∈ B_d, fine-tuned k steps, the gauge recovered from paired
   activations and from weights by signed-correlation and sign-marginalised assignment
   (:func:`recovery_under_drift`);
4. trajectory transport: checkpoints of one run, each stored in its own random B_d gauge; local
   matches composed along the run against matching the endpoints (:func:`trajectory_transport`);
5. claim check: "the top-k residual coordinates for class c" under each gauge, and after
   transporting back (:func:`claim_check`): the negative control for coordinate claims.

Recovered gauges are returned as the transform ``h`` that aligns B to A, ``apply(h, θ_B) ≈ θ_A``;
for B = g(A) the truth is ``h = g⁻¹``. Orientation of every similarity matrix: rows are A's units,
columns B's (landscape.matching.solvers).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from landscape import data
from landscape.device import resolve_device
from landscape.errors import LandscapeError, check_seed
from landscape.experiments.curves import barrier_curve
from landscape.matching.activation import (
    GAUGE_SWEEP,
    activation_transform,
    collect,
    resid_stack,
)
from landscape.matching.activation import activation_similarity as matching_similarity
from landscape.matching.solvers import Signs, solve
from landscape.matching.weight import weight_similarity as resid_weight_similarity
from landscape.models import ModelConfig, Params, forward, init_params, loss_and_accuracy
from landscape.models.checkpoint import Checkpoint
from landscape.models.zoo import split_for, zoo_model
from landscape.store.cache import Cache, digest_tensors
from landscape.symmetry import (
    ORTH,
    PERM,
    SIGNED_PERM,
    Element,
    Spec,
    Transform,
    apply,
    group_kinds,
    probe_inputs,
    random_transform,
    spec_for,
    symmetry_table,
)
from landscape.symmetry.processing import prepare

GAUGE_VERSION = 2  # bump when a sweep algorithm or result changes: old cache entries stop matching
Progress = Callable[[str, int, int], None]  # (stage, done, total)

# The three residual groups of the sweep, by group-level name (landscape.symmetry.RESID_GROUPS).
SWEEP_GROUPS = {"perm": PERM, "signed-perm": SIGNED_PERM, "orth": ORTH}
GROUP_LABEL = {"perm": "S_d", "signed-perm": "B_d", "orth": "O(d)"}
RECOVERY_METHODS = ("signed", "marginalised")  # signed-correlation vs sign-marginalised assignment


# ----------------------------------------------------------------------------- task and data


@dataclass
class Task:
    """A model with its data: activation/evaluation inputs and a sampler of training batches
    (the model's own training data). ``sample(gen, batch_size) -> (inputs, targets)``."""

    name: str
    seed: int
    cfg: ModelConfig
    params: Params  # float32, on ``device``
    sample: Callable[[torch.Generator, int], tuple[torch.Tensor, torch.Tensor]]
    act_inputs: torch.Tensor  # inputs for activation statistics (training split)
    act_targets: torch.Tensor
    test: data.Split  # evaluation split (barriers, probe/steering metrics)
    lr: float = 3e-3  # the model's peak training learning rate
    batch_size: int = 64
    device: torch.device = torch.device("cpu")
    data_key: dict[str, Any] | None = None  # families: what identifies the data in cache keys

    @property
    def digest(self) -> str:
        return digest_tensors({k: v.cpu() for k, v in self.params.items()})

    def batches(self, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Seeded endless minibatches of the training data, on the task's device."""
        gen = torch.Generator().manual_seed(seed)
        while True:
            x, y = self.sample(gen, self.batch_size)
            yield x.to(self.device), y.to(self.device)


def split_sampler(
    split: data.Split,
) -> Callable[[torch.Generator, int], tuple[torch.Tensor, torch.Tensor]]:
    """Uniform minibatches (with replacement across batches) from a fixed split."""

    def sample(gen: torch.Generator, bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        j = torch.randint(0, len(split), (bs,), generator=gen)
        return split.inputs[j], split.targets[j]

    return sample


def stream_sampler(
    stream: torch.Tensor, n_ctx: int
) -> Callable[[torch.Generator, int], tuple[torch.Tensor, torch.Tensor]]:
    """Random windows of ``n_ctx`` characters and their next-character targets."""

    def sample(gen: torch.Generator, bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(stream) - n_ctx - 1, (bs,), generator=gen)
        chunk = stream[starts[:, None] + torch.arange(n_ctx + 1)].long()  # compact codes
        return chunk[:, :-1], chunk[:, 1:]

    return sample


def load_task(
    model: str | Checkpoint,
    seed: int = 0,
    *,
    device: str | torch.device | None = "cpu",
    n_act: int | None = None,
    n_test: int | None = None,
) -> Task:
    """Resolve a zoo name (+ seed), a family name (+ member), or a Checkpoint of either into a
    :class:`Task`. A family's task samples minibatches from its training windows or images at
    the family's ``lr`` and ``batch_size`` (:mod:`landscape.store.families`).

    ``n_act``/``n_test`` cap the activation and evaluation examples (defaults: 512 images or
    64 text windows for activations; the whole test split, or 128 windows for text).
    """
    from landscape.models.train import get_checkpoint

    ckpt = model if isinstance(model, Checkpoint) else get_checkpoint(model, seed)
    name = ckpt.meta.get("name", model if isinstance(model, str) else "")
    if ckpt.meta.get("family"):
        return _family_task(ckpt, device, n_act, n_test)
    try:
        zm = zoo_model(name)
    except LandscapeError:
        raise LandscapeError(
            f"the gauge sweep needs a zoo model's training data; {name!r} is not a zoo model"
        ) from None
    if zm.config != ckpt.cfg:
        raise LandscapeError(f"checkpoint config differs from the zoo's {name} config")
    dev = resolve_device(device)
    vocab = ckpt.meta.get("vocab")
    text = zm.dataset == "shakespeare"
    n_act = n_act or (64 if text else 512)
    n_test = n_test or (128 if text else None)
    train = split_for(zm, "train", vocab=vocab)
    test = split_for(zm, "test", vocab=vocab)
    test = data.Split(test.inputs[:n_test].to(dev), test.targets[:n_test].to(dev))
    params = {k: v.to(dev, torch.float32) for k, v in ckpt.params.items()}
    if text:
        sample = stream_sampler(data.shakespeare(vocab).train, ckpt.cfg.n_ctx)
    else:
        sample = split_sampler(train)
    return Task(name, int(ckpt.meta.get("seed", seed) or 0), ckpt.cfg, params, sample,
                train.inputs[:n_act].to(dev), train.targets[:n_act].to(dev), test,
                zm.train.lr, zm.train.batch_size, dev)  # fmt: skip


def _family_task(
    ckpt: Checkpoint, device: str | torch.device | None, n_act: int | None, n_test: int | None
) -> Task:
    from landscape.store.families import family, family_splits

    fam = family(ckpt.meta["family"])
    splits, data_key = family_splits(fam.name)
    dev = resolve_device(device)
    text = ckpt.cfg.arch == "gpt"
    train, test = splits["train"], splits["test"]
    n_act = n_act or (64 if text else 512)
    test = data.Split(test.inputs[:n_test].to(dev), test.targets[:n_test].to(dev))
    params = {k: v.to(dev, torch.float32) for k, v in ckpt.params.items()}
    return Task(fam.name, int(ckpt.meta["seed"]), ckpt.cfg, params, split_sampler(train),
                train.inputs[:n_act].to(dev), train.targets[:n_act].to(dev), test,
                fam.lr, fam.batch_size, dev,
                {**data_key, "lr": fam.lr, "batch_size": fam.batch_size})  # fmt: skip


# ----------------------------------------------------------------------------- activations
# The residual alignment of the sweep: one implementation each in landscape.matching, with the
# sweep's options (landscape.matching.activation.GAUGE_SWEEP, norm gains left out of weights).


def readout_features(cfg: ModelConfig, params: Params, inputs: torch.Tensor, layer: int
                     ) -> torch.Tensor:  # fmt: skip
    """Residual stream entering block ``layer`` at the positions that are read out:
    mlp [N, d]; vit the class token [N, d]; gpt every position [N·T, d]."""
    x = collect(cfg, params, inputs)[f"resid.{layer}"]
    if cfg.arch == "vit":
        x = x[:, 0]
    return x.reshape(-1, cfg.d_model)


def activation_similarity(xa: torch.Tensor, xb: torch.Tensor, kind: str) -> torch.Tensor:
    """Similarity of A's and B's residual coordinates from paired activations [L, N, d]: [d, d],
    by the sweep's statistic (``landscape.matching.activation.activation_similarity``,
    ``"cosine"``: correlations summed over layers; O(d): uncentred cross-moments)."""
    return matching_similarity(xa, xb, kind, GAUGE_SWEEP.statistic)


def weight_similarity(cfg: ModelConfig, pa: Params, pb: Params) -> torch.Tensor:
    """Similarity of A's and B's residual coordinates from weights: [d, d].

    ``M = Σ_W W_Aᵀ W_B`` over every parameter the residual gauge acts on by G or G⁻ᵀ: one
    coordinate-descent step of weight matching (``landscape.matching.weight.weight_similarity``).
    Norm gains move by |G| and carry no sign, so they are left out (``gains="ignore"``).
    """
    return resid_weight_similarity(spec_for(cfg), "resid", pa, pb, gains="ignore")[0]


def solve_resid(m: torch.Tensor, kind: str, method: Signs = "marginalised") -> Element:
    """The residual element ``h`` aligning B to A from a similarity ``m`` (rows A, columns B):
    ``landscape.matching.solvers.solve`` with ``method`` ∈ {"marginalised", "signed"} as its
    sign handling of signed permutations."""
    return solve(kind, m, signs=method)


def coordinate_accuracy(est: Element, true: Element) -> dict[str, float]:
    """Agreement of two monomial elements per coordinate.

    ``perm``: share of slots mapped to the right coordinate; ``sign``: share of those with the
    right sign; ``coord``: share right in both (the coordinate is recovered exactly).
    """
    ok_p = est.perm.cpu() == true.perm.cpu()
    ok_s = torch.sign(est.scale.cpu()) == torch.sign(true.scale.cpu())
    n_ok = int(ok_p.sum())
    return {
        "perm": n_ok / len(ok_p),
        "sign": float((ok_s & ok_p).sum()) / max(n_ok, 1),
        "coord": float((ok_s & ok_p).double().mean()),
    }


def align_activations(
    cfg: ModelConfig,
    pa: Params,
    pb: Params,
    inputs: torch.Tensor,
    resid_kind: str,
    *,
    method: Signs = "marginalised",
    drop_first: bool = False,
) -> Transform:
    """Activation matching restricted to ``resid_kind`` on the stream (DESIGN §1, "Matching"),
    with the sweep's options (``landscape.matching.activation.GAUGE_SWEEP``).

    Residual: :func:`activation_similarity` solved by ``resid_kind`` (``method``: the sign
    handling). FFN units of each layer: assignment on correlations of the hidden activations
    (they do not see the residual gauge). Heads: assignment on the QK/OV circuit cost of A
    against B with its stream already aligned. The parameters are used as given (processed by
    the caller). Returns ``h`` with ``apply(h, θ_B) ≈ θ_A``.
    """
    kinds = group_kinds(spec_for(cfg), resid_kind)  # the kind names its own level
    options = replace(GAUGE_SWEEP, signs=method)
    return activation_transform(cfg, pa, pb, inputs, kinds, options=options,
                                drop_first=drop_first)[0]  # fmt: skip


def resid_only(spec: Spec, kind: str, seed: int) -> Transform:
    """A random element of ``kind`` on the residual stream only (FFN units and heads fixed)."""
    return random_transform(spec, {"resid": kind}, seed)


# ----------------------------------------------------------------------------- training


def adamw_init(params: Params) -> dict[str, torch.Tensor]:
    """Fresh AdamW state: ``exp_avg.{name}``, ``exp_avg_sq.{name}`` zeros, ``step`` 0."""
    state = {f"exp_avg.{k}": torch.zeros_like(v) for k, v in params.items()}
    state.update({f"exp_avg_sq.{k}": torch.zeros_like(v) for k, v in params.items()})
    state["step"] = torch.zeros((), dtype=torch.float64)
    return state


def decays(name: str, w: torch.Tensor) -> bool:
    """Weight decay on matrices except positions, as in the zoo's training recipe."""
    return w.ndim >= 2 and "W_pos" not in name


def adamw_steps(
    cfg: ModelConfig,
    params: Params,
    state: dict[str, torch.Tensor] | None,
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    steps: int,
    *,
    lr: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-8,
    weight_decay: float = 0.01,
    grad_clip: float = 1.0,
    loss_fn: Callable[[Params, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    callback: Callable[[int, Params], None] | None = None,
) -> tuple[Params, dict[str, torch.Tensor]]:
    """``steps`` of functional AdamW (PyTorch's update, decoupled decay, global-norm clipping).

    ``m ← β₁m + (1−β₁)g``, ``v ← β₂v + (1−β₂)g²``, ``θ ← θ(1 − lr·wd) − lr·m̂/(√v̂ + ε)``.
    Every operation is elementwise or a global norm, so the update commutes with any signed
    permutation of the parameters when m moves like θ and v like |G| (the transport rule).
    ``callback(step, params)`` runs after each step (step counted from 1).
    """
    state = dict(adamw_init(params) if state is None else state)
    p = {k: v.detach().clone() for k, v in params.items()}
    b1, b2 = betas
    for i in range(steps):
        x, y = next(batches)
        if x.is_floating_point():
            x = x.to(next(iter(p.values())).dtype)
        leaves = {k: v.detach().requires_grad_() for k, v in p.items()}
        if loss_fn is None:
            loss, _ = loss_and_accuracy(cfg, forward(cfg, leaves, x), y)
        else:
            loss = loss_fn(leaves, x, y)
        grads = torch.autograd.grad(loss, list(leaves.values()))
        norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
        coef = min(1.0, grad_clip / (float(norm) + 1e-6))
        t = float(state["step"]) + 1
        state["step"] = torch.tensor(t, dtype=torch.float64)
        new: Params = {}
        for (k, w), g in zip(leaves.items(), grads, strict=True):
            w = w.detach()
            g = g * coef
            m = state[f"exp_avg.{k}"] * b1 + (1 - b1) * g
            v = state[f"exp_avg_sq.{k}"] * b2 + (1 - b2) * g * g
            state[f"exp_avg.{k}"], state[f"exp_avg_sq.{k}"] = m, v
            if decays(k, w):
                w = w * (1 - lr * weight_decay)
            denom = (v / (1 - b2**t)).sqrt() + eps
            new[k] = w - lr * (m / (1 - b1**t)) / denom
        p = new
        if callback is not None:
            callback(i + 1, p)
    return p, state


# ----------------------------------------------------------------------------- 2. scramble


def max_dlogits(cfg: ModelConfig, pa: Params, pb: Params) -> float:
    """max |Δlogits| of two parameter sets on a fixed probe batch, computed in float64."""
    x = probe_inputs(cfg)
    a = {k: v.cpu().double() for k, v in pa.items()}
    b = {k: v.cpu().double() for k, v in pb.items()}
    with torch.no_grad():
        return float((forward(cfg, a, x) - forward(cfg, b, x)).abs().max())


def scramble_test(task: Task, *, draws: int = 3, seed: int = 0, lambdas: int = 11,
                  progress: Progress | None = None) -> dict[str, Any]:  # fmt: skip
    """θ against g(θ) for random g in S_d, B_d, O(d) (with FFN units and heads permuted too).

    Per draw: max |Δlogits| (function check, float64), the naive barrier, and the barriers after
    activation matching restricted to S_d, B_d and O(d) on the stream. O(d) needs folded gains:
    O(d) scrambles and O(d) matching run on ``prepare(·, "orth")`` parameters (the same function).
    Rows ``group, draw, max_abs_dlogits, naive, matched_{perm,signed-perm,orth}`` (test loss
    barriers; accuracy barriers under ``*_acc``) and a per-group mean summary.
    """
    cfg, pa = task.cfg, task.params
    cfg_f, pa_f = prepare(cfg, pa, "orth")
    spec, spec_f = spec_for(cfg), spec_for(cfg_f)
    x, y = task.test.inputs, task.test.targets
    rows = []
    total, done = len(SWEEP_GROUPS) * draws, 0
    for group, kind in SWEEP_GROUPS.items():
        for d in range(draws):
            gseed = 1000 * seed + d
            if kind == ORTH:
                g = random_transform(spec_f, group, gseed)
                a_cfg, a, b = cfg_f, pa_f, apply(spec_f, g, pa_f)
            else:
                g = random_transform(spec, group, gseed)
                a_cfg, a, b = cfg, pa, apply(spec, g, pa)
            row: dict[str, Any] = {"group": group, "draw": d,
                                   "max_abs_dlogits": max_dlogits(a_cfg, a, b)}  # fmt: skip
            curve = barrier_curve(a_cfg, a, b, x, y, lambdas)
            row["naive"], row["naive_acc"] = curve.barrier_loss, curve.barrier_accuracy
            for match_group, match_kind in SWEEP_GROUPS.items():
                if match_kind == ORTH:
                    mc, ma, mb = cfg_f, *_fold_pair(cfg, a_cfg, a, b)
                else:
                    mc, ma, mb = a_cfg, a, b
                h = align_activations(mc, ma, mb, task.act_inputs, match_kind)
                mb = apply(spec_for(mc), h, mb)
                curve = barrier_curve(mc, ma, mb, x, y, lambdas)
                row[f"matched_{match_group}"] = curve.barrier_loss
                row[f"matched_{match_group}_acc"] = curve.barrier_accuracy
            rows.append(row)
            done += 1
            if progress:
                progress("scramble", done, total)
    keys = ["max_abs_dlogits", "naive", *(f"matched_{g}" for g in SWEEP_GROUPS)]
    summary = [
        {"group": g, "label": GROUP_LABEL[g],
         **{k: _mean(r[k] for r in rows if r["group"] == g) for k in keys}}
        for g in SWEEP_GROUPS
    ]  # fmt: skip
    # Every barrier names the split it was measured on (DESIGN §5); the task's is its test split.
    return {"rows": rows, "summary": summary, "draws": draws, "lambdas": lambdas, "split": "test"}


def _fold_pair(cfg: ModelConfig, a_cfg: ModelConfig, a: Params, b: Params
               ) -> tuple[Params, Params]:  # fmt: skip
    if a_cfg is not cfg:  # already folded
        return a, b
    return prepare(cfg, a, "orth")[1], prepare(cfg, b, "orth")[1]


def _mean(xs) -> float | None:
    """Mean, or None for no values (JSON has no NaN)."""
    xs = list(xs)
    return float(sum(xs) / len(xs)) if xs else None


# ----------------------------------------------------------------------------- 3. drift


def recover(
    cfg: ModelConfig,
    pa: Params,
    pb: Params,
    inputs: torch.Tensor,
    *,
    source: str,
    method: str,
    drop_first: bool = False,
) -> Element:
    """The B_d element aligning B's stream to A's, from ``source`` ∈ {"activations", "weights"}
    with ``method`` ∈ {"signed", "marginalised"} (see :func:`solve_resid`)."""
    if source == "activations":
        sim = activation_similarity(resid_stack(cfg, pa, inputs, drop_first=drop_first),
                                    resid_stack(cfg, pb, inputs, drop_first=drop_first),
                                    SIGNED_PERM)  # fmt: skip
    elif source == "weights":
        sim = weight_similarity(cfg, pa, pb)
    else:
        raise ValueError(f"unknown source {source!r}; expected 'activations' or 'weights'")
    return solve_resid(sim, SIGNED_PERM, method)


def _rel_dist(pa: Params, pb: Params) -> float:
    num = sum(float(((pa[k] - pb[k]).double() ** 2).sum()) for k in pa)
    den = sum(float((pa[k].double() ** 2).sum()) for k in pa)
    return math.sqrt(num / den)


def recovery_under_drift(
    task: Task,
    *,
    steps_grid: Sequence[int] = (0, 10, 30, 100, 300),
    draws: int = 2,
    seed: int = 0,
    lr: float = 1e-3,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Scramble with g ∈ B_d (stream only), fine-tune g(A) k steps, recover g.

    For each k in ``steps_grid`` and draw: recovery from paired activations and from weights
    (:func:`recover`) with signed-correlation and sign-marginalised assignment, scored per
    coordinate against the truth ``g⁻¹`` (:func:`coordinate_accuracy`). Also the relative weight
    drift ``‖θ_k − θ_0‖/‖θ_0‖``. Fine-tuning: AdamW at ``lr`` (no warm-up) on the training data.
    """
    check_sweep_args(draws=draws, steps_grid=steps_grid)
    cfg, spec = task.cfg, spec_for(task.cfg)
    grid = sorted(set(int(k) for k in steps_grid))
    rows = []
    for d in range(draws):
        g = resid_only(spec, SIGNED_PERM, 1000 * seed + d)
        truth = g.inverse().elements["resid"]
        b0 = apply(spec, g, task.params)
        snaps = {0: b0} if 0 in grid else {}

        def keep(step: int, p: Params, snaps=snaps) -> None:
            if step in grid:
                snaps[step] = p

        if grid[-1] > 0:
            adamw_steps(cfg, b0, None, task.batches(seed=7 + d), grid[-1], lr=lr, callback=keep)
        for k in grid:
            row: dict[str, Any] = {
                "draw": d,
                "steps": k,
                "drift": _rel_dist(b0, snaps[k]),
                "flipped": float((truth.scale < 0).double().mean()),
            }
            for source in ("activations", "weights"):
                for method in RECOVERY_METHODS:
                    est = recover(cfg, task.params, snaps[k], task.act_inputs, source=source,
                                  method=method)  # fmt: skip
                    acc = coordinate_accuracy(est, truth)
                    for key, v in acc.items():
                        row[f"{source}_{method}_{key}"] = v
            rows.append(row)
        if progress:
            progress("recovery", d + 1, draws)
    cols = [c for c in rows[0] if c not in ("draw", "steps")]
    curve = [
        {"steps": k, **{c: _mean(r[c] for r in rows if r["steps"] == k) for c in cols}}
        for k in grid
    ]
    return {"rows": rows, "curve": curve, "steps_grid": grid, "lr": lr, "draws": draws}


# ----------------------------------------------------------------------------- 4. trajectory


def trajectory_transport(
    task: Task,
    *,
    steps: int = 1500,
    every: int = 10,
    seed: int = 0,
    lr: float | None = None,
    weight_decay: float = 1.0,
    sources: Sequence[str] = ("weights", "activations"),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Gauge recovery along one training run versus across it.

    A run from a fresh initialisation (seed ``seed``), AdamW at the model's peak ``lr``
    (constant) with strong decoupled weight decay (so the initialisation is forgotten and the
    endpoints share little), ``steps`` long; a checkpoint every ``every`` steps, checkpoint t
    stored as ``g_t(θ_t)`` with its own random g_t ∈ B_d. The truth between stored
    checkpoints 0 and t is ``h_t = g_0 ∘ g_t⁻¹`` (aligns stored t to stored 0). *Local*: match
    consecutive stored checkpoints (sign-marginalised) and compose,
    ``ĥ_{0←t} = ĥ_{0←t−1} ∘ ĥ_{t−1←t}``.
    *Endpoint*: match stored 0 and stored t directly. Accuracy per coordinate against the
    distance in steps.
    """
    check_sweep_args(trajectory_steps=steps, trajectory_every=every)
    cfg, spec = task.cfg, spec_for(task.cfg)
    lr = task.lr if lr is None else lr
    snaps = [init_params(cfg, seed)]
    snaps[0] = {k: v.to(task.device) for k, v in snaps[0].items()}

    def keep(step: int, p: Params) -> None:
        if step % every == 0:
            snaps.append(p)

    adamw_steps(
        cfg,
        snaps[0],
        None,
        task.batches(seed=100 + seed),
        steps,
        lr=lr,
        weight_decay=weight_decay,
        callback=keep,
    )
    gauges = [resid_only(spec, SIGNED_PERM, 5000 + 1000 * seed + t) for t in range(len(snaps))]
    stored = [apply(spec, g, p) for g, p in zip(gauges, snaps, strict=True)]
    rows = []
    for source in sources:
        local = Element(SIGNED_PERM, torch.arange(cfg.d_model),
                        torch.ones(cfg.d_model, dtype=torch.float64))  # fmt: skip
        for t in range(1, len(stored)):
            truth = (gauges[0] @ gauges[t].inverse()).elements["resid"]
            step = recover(cfg, stored[t - 1], stored[t], task.act_inputs, source=source,
                           method="marginalised")  # fmt: skip
            local = (Transform({"resid": local}) @ Transform({"resid": step})).elements["resid"]
            direct = recover(cfg, stored[0], stored[t], task.act_inputs, source=source,
                             method="marginalised")  # fmt: skip
            rows.append({
                "source": source,
                "steps": t * every,
                "drift": _rel_dist(snaps[0], snaps[t]),
                "local_coord": coordinate_accuracy(local, truth)["coord"],
                "endpoint_coord": coordinate_accuracy(direct, truth)["coord"],
            })  # fmt: skip
        if progress:
            progress("trajectory", sources.index(source) + 1, len(sources))
    return {"rows": rows, "steps": steps, "every": every, "lr": lr, "weight_decay": weight_decay}


# ----------------------------------------------------------------------------- 5. claims


def top_coordinates(feats: torch.Tensor, labels: torch.Tensor, cls: int, k: int) -> list[int]:
    """The claim "the top-k residual coordinates for class c": the k largest entries of
    ``mean(x | y = c) − mean(x | y ≠ c)``."""
    mask = labels == cls
    diff = feats[mask].double().mean(0) - feats[~mask].double().mean(0)
    return sorted(torch.topk(diff, k).indices.tolist())


def _act_on_rows(x: torch.Tensor, e: Element) -> torch.Tensor:
    """Row vectors x (stream coordinates) through an element: ``x·G``."""
    if e.is_monomial:
        return x[:, e.perm.to(x.device)] * e.scale.to(x.device, x.dtype)
    return (x.double() @ e.matrix.to(x.device)).to(x.dtype)


def claim_classes(task: Task, n: int = 3) -> list[int]:
    """The classes claims are made about: the n most frequent targets (ties: lowest label)."""
    counts = torch.bincount(task.act_targets.reshape(-1).cpu(), minlength=task.cfg.n_out)
    return sorted(torch.argsort(-counts.double(), stable=True)[:n].tolist())


def claim_check(task: Task, *, draws: int = 3, k: int = 4, seed: int = 0,
                classes: Sequence[int] | None = None) -> dict[str, Any]:  # fmt: skip
    """Coordinate claims under random gauges (the negative control of a gauge sweep).

    The claim is made in A's coordinates at the last layer boundary (``resid.{n_layers}``,
    read-out positions) on the training inputs. Per gauge g in S_d, B_d, O(d) (gains folded
    first, which leaves the stream unchanged) and draw: the claim re-made in g(θ) (``raw``: its
    overlap with the original top-k, expected ≈ k/d), re-made after transporting B's activations
    back through the gauge recovered by activation matching of the same group (``transported``:
    1.0), and for B_d also through the recovered permutation without its signs
    (``perm_only``). The function-level control, the class accuracy, is identical in every gauge.
    """
    cfg, pa = prepare(task.cfg, task.params, "orth")
    spec = spec_for(cfg)
    layer = cfg.n_layers
    x = task.act_inputs
    labels = task.act_targets.reshape(-1)
    classes = list(classes) if classes is not None else claim_classes(task)
    fa = readout_features(cfg, pa, x, layer)
    claims_a = {c: top_coordinates(fa, labels, c, k) for c in classes}
    acc_a = _accuracy(cfg, pa, task.test)
    rows = []
    for group, kind in SWEEP_GROUPS.items():
        for d in range(draws):
            g = resid_only(spec, kind, 2000 + 1000 * seed + d)
            pb = apply(spec, g, pa)
            fb = readout_features(cfg, pb, x, layer)
            h = align_activations(cfg, pa, pb, x, kind).elements["resid"]
            back = _act_on_rows(fb, h)
            variants = {"raw": fb, "transported": back}
            if kind != ORTH:
                variants["perm_only"] = _act_on_rows(fb, Element(PERM, h.perm, h.scale.abs()))
            row: dict[str, Any] = {
                "group": group,
                "draw": d,
                "accuracy_delta": _accuracy(cfg, pb, task.test) - acc_a,
            }
            for name, f in variants.items():
                overlaps = [len(set(top_coordinates(f, labels, c, k)) & set(claims_a[c])) / k
                            for c in classes]  # fmt: skip
                row[name] = _mean(overlaps)
            rows.append(row)
    summary = [
        {"group": g, "label": GROUP_LABEL[g],
         **{c: _mean(r[c] for r in rows if r["group"] == g and c in r)
            for c in ("raw", "transported", "perm_only", "accuracy_delta")}}
        for g in SWEEP_GROUPS
    ]  # fmt: skip
    return {"rows": rows, "summary": summary, "k": k, "classes": classes, "layer": layer,
            "chance": k / cfg.d_model, "accuracy": acc_a, "split": "test"}  # fmt: skip


def _accuracy(cfg: ModelConfig, params: Params, split: data.Split) -> float:
    with torch.no_grad():
        return float(loss_and_accuracy(cfg, forward(cfg, params, split.inputs), split.targets)[1])


# ----------------------------------------------------------------------------- the sweep

PARTS = ("table", "scramble", "recovery", "trajectory", "claims")


def check_sweep_args(
    *,
    seed: int = 0,
    draws: int = 1,
    steps_grid: Sequence[int] = (0,),
    trajectory_steps: int = 1,
    trajectory_every: int = 1,
) -> None:
    """One-line errors for sweep arguments that would otherwise fail deep inside a part
    (a ``KeyError`` for a negative step, a division by a zero spacing) or overflow a seed."""
    check_seed(seed, "the gauge-sweep seed")
    if draws < 1:
        raise LandscapeError(f"gauge-sweep --draws must be at least 1, got {draws}")
    if not steps_grid or min(steps_grid) < 0:
        raise LandscapeError(
            f"gauge-sweep --steps must be one or more non-negative step counts, got "
            f"{list(steps_grid)}"
        )
    if trajectory_every < 1:
        raise LandscapeError(
            f"gauge-sweep --trajectory-every must be at least 1, got {trajectory_every}"
        )
    if trajectory_steps < trajectory_every:
        raise LandscapeError(
            f"gauge-sweep --trajectory-steps ({trajectory_steps}) must be at least "
            f"--trajectory-every ({trajectory_every}): no checkpoint would be stored"
        )


def gauge_sweep(
    model: str | Checkpoint,
    seed: int = 0,
    *,
    draws: int = 3,
    steps_grid: Sequence[int] = (0, 10, 30, 100, 300),
    trajectory_steps: int = 1500,
    trajectory_every: int = 10,
    parts: Sequence[str] = PARTS,
    device: str | torch.device | None = "cpu",
    progress: Progress | None = None,
    cache: Cache | None = None,
) -> dict[str, Any]:
    """The whole gauge sweep of one model as a JSON-serialisable dict, one key per part.

    Each part is cached (kind ``"gauge-sweep"``) under the model's weight digest, its arguments
    and ``GAUGE_VERSION``; ``seconds`` records the compute time of each part (0 on a cache hit
    keeps the original time).
    """
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise LandscapeError(f"unknown gauge-sweep parts {sorted(unknown)}; expected {PARTS}")
    check_sweep_args(seed=seed, draws=draws, steps_grid=steps_grid,
                     trajectory_steps=trajectory_steps,
                     trajectory_every=trajectory_every)  # fmt: skip
    task = load_task(model, seed, device=device)
    cache = cache or Cache()
    base = {"version": GAUGE_VERSION, "model": task.name, "config": task.cfg.to_dict(),
            "weights": task.digest, "seed": seed}  # fmt: skip
    if task.data_key:
        base["data"] = task.data_key
    runners: dict[str, tuple[dict[str, Any], Callable[[], dict[str, Any]]]] = {
        "table": ({}, lambda: {"rows": symmetry_table(task.cfg, {k: v.cpu() for k, v in
                                                                task.params.items()})}),
        "scramble": ({"draws": draws},
                     lambda: scramble_test(task, draws=draws, seed=seed, progress=progress)),
        "recovery": ({"draws": draws, "steps_grid": list(steps_grid)},
                     lambda: recovery_under_drift(task, steps_grid=steps_grid, draws=draws,
                                                  seed=seed, progress=progress)),
        "trajectory": ({"steps": trajectory_steps, "every": trajectory_every},
                       lambda: trajectory_transport(task, steps=trajectory_steps,
                                                    every=trajectory_every, seed=seed,
                                                    progress=progress)),
        "claims": ({"draws": draws}, lambda: claim_check(task, draws=draws, seed=seed)),
    }  # fmt: skip
    out: dict[str, Any] = {"model": task.name, "seed": seed, "version": GAUGE_VERSION}
    for part in parts:
        args, run = runners[part]

        def compute(run=run) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
            t0 = time.perf_counter()
            result = run()
            result["seconds"] = round(time.perf_counter() - t0, 3)
            return {}, result

        entry, _ = cache.get_or_compute("gauge-sweep", {**base, "part": part, **args}, compute)
        out[part] = entry.meta
    return out
