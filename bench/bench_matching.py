"""Weight matching: ``weight_matching`` against the ``rebasin`` package on the residual MLP.

rebasin (``PermutationCoordinateDescent``) takes two ``nn.Module`` s, traces them with
torchview and permutes the units of the layers it finds. The residual MLP is handed to it as
``nn.Linear`` layers and an RMSNorm module with a 1-d ``weight`` (:class:`ResidualMLP`,
numerically the same function as ``models.forward``). It handles it: one permutation of the
residual stream (embedding, norm gains, W_in rows, W_out columns and b_out, unembedding) and
one per FFN layer, B's function kept. Its similarity differs from ours, though: 1-d parameters
(biases, norm gains) enter as ``w_a @ w_b``, a scalar added to every entry, so they are
ignored; and its list of parameters per permutation repeats some of them (W_in twice as often
as W_out for an FFN permutation), which weights them. So the two tools solve the same
coordinate descent with different costs and land on different permutations. Checked here: its
FFN permutations are exactly the assignment of ``2·⟨W_in⟩ + ⟨W_out⟩`` given its stream
permutation (our solver, :func:`rebasin_replica`), i.e. the difference is the cost, not a bug
on either side; and the barrier after each tool's matching.

Models: mlp-digits zoo seeds 0 and 1 (width 32/64; barriers on the digits test split, 25
points) and an untrained residual MLP at d_model 128, d_mlp 512 (barriers ≈ 0: the row is about
time). One torch thread, median of 5, ratios only.

    .venv/bin/python bench/bench_matching.py
"""

from __future__ import annotations

import copy
import math
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.nn.functional as F
from torch import nn

from bench.common import (
    REPEATS,
    Ratio,
    digits_test,
    machine_line,
    race,
    random_residual_mlp,
    ratio_table,
    table,
    version,
    zoo_pair,
)
from landscape.experiments.evaluation import EvalOptions, barrier_curve
from landscape.matching import weight_matching
from landscape.matching.solvers import solve_perm
from landscape.models import ModelConfig, Params, init_params
from landscape.symmetry import PERM, Element, Transform, apply, spec_for


class RMSNorm(nn.Module):
    """``models._norm`` for ``norm="rms"``: ``x·√d / √(Σx² + d·ε) · w``."""

    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.d, self.eps = d, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = math.sqrt(self.d) / torch.sqrt((x * x).sum(-1, keepdim=True) + self.d * self.eps)
        return x * scale * self.weight


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln2 = RMSNorm(cfg.d_model, cfg.eps)
        self.W_in = nn.Linear(cfg.d_model, cfg.d_mlp)
        self.W_out = nn.Linear(cfg.d_mlp, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.W_out(F.gelu(self.W_in(self.ln2(x))))


class ResidualMLP(nn.Module):
    """The zoo's residual MLP as ordinary layers (``nn.Linear`` stores W transposed)."""

    def __init__(self, cfg: ModelConfig, p: Params) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Linear(cfg.d_in, cfg.d_model)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.ln_final = RMSNorm(cfg.d_model, cfg.eps)
        self.unembed = nn.Linear(cfg.d_model, cfg.n_out)
        state = {k: v.detach().clone() for k, v in self._names(p).items()}
        self.load_state_dict(state)

    def _names(self, p: Params) -> Params:
        out = {
            "embed.weight": p["embed.W_E"].T,
            "embed.bias": p["embed.b_E"],
            "ln_final.weight": p["ln_final.w"],
            "unembed.weight": p["unembed.W_U"].T,
            "unembed.bias": p["unembed.b_U"],
        }
        for i in range(self.cfg.n_layers):
            b = f"blocks.{i}"
            out[f"{b}.ln2.weight"] = p[f"{b}.ln2.w"]
            out[f"{b}.W_in.weight"] = p[f"{b}.mlp.W_in"].T
            out[f"{b}.W_in.bias"] = p[f"{b}.mlp.b_in"]
            out[f"{b}.W_out.weight"] = p[f"{b}.mlp.W_out"].T
            out[f"{b}.W_out.bias"] = p[f"{b}.mlp.b_out"]
        return out

    def params(self) -> Params:
        """Back to the flat dict in canonical names."""
        s = self.state_dict()
        out = {
            "embed.W_E": s["embed.weight"].T,
            "embed.b_E": s["embed.bias"],
            "ln_final.w": s["ln_final.weight"],
            "unembed.W_U": s["unembed.weight"].T,
            "unembed.b_U": s["unembed.bias"],
        }
        for i in range(self.cfg.n_layers):
            b = f"blocks.{i}"
            out[f"{b}.ln2.w"] = s[f"{b}.ln2.weight"]
            out[f"{b}.mlp.W_in"] = s[f"{b}.W_in.weight"].T
            out[f"{b}.mlp.b_in"] = s[f"{b}.W_in.bias"]
            out[f"{b}.mlp.W_out"] = s[f"{b}.W_out.weight"].T
            out[f"{b}.mlp.b_out"] = s[f"{b}.W_out.bias"]
        return {k: v.detach().contiguous().clone() for k, v in out.items()}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.unembed(self.ln_final(x))


def rebasin_match(
    module_a: ResidualMLP, module_b: ResidualMLP, probe: torch.Tensor
) -> tuple[Params, torch.Tensor]:
    """rebasin's permutation coordinate descent on B (in place): B's aligned parameters and the
    residual-stream permutation it computed internally (the one of width d_model)."""
    from rebasin import PermutationCoordinateDescent

    torch.manual_seed(0)  # it visits permutations in torch.randperm order
    pcd = PermutationCoordinateDescent(module_a, module_b, probe)
    pcd.rebasin()
    perms = [p.perm_indices for p, _ in pcd.pinit.model_graph.permutation_to_info]
    stream = [p for p in perms if len(p) == module_a.cfg.d_model]
    return module_b.params(), (stream[0] if stream else None)


def rebasin_replica(cfg: ModelConfig, a: Params, b: Params, stream: torch.Tensor) -> Params:
    """rebasin's answer rebuilt with our solver: its stream permutation, and per FFN layer the
    assignment of ``2·⟨W_in⟩ + ⟨W_out⟩`` (its weighting; biases dropped) on B with that stream
    permutation applied."""
    spec = spec_for(cfg)
    ones = torch.ones(cfg.d_model, dtype=torch.float64)
    elements = {"resid": Element(PERM, stream, ones)}
    b64 = {k: v.double() for k, v in b.items()}
    b_s = apply(spec, Transform(dict(elements)), b64)
    for layer, var in enumerate(spec.family("mlp")):
        w_in_a, w_out_a = (a[f"blocks.{layer}.mlp.{w}"].double() for w in ("W_in", "W_out"))
        w_in_b, w_out_b = (b_s[f"blocks.{layer}.mlp.{w}"] for w in ("W_in", "W_out"))
        m = 2 * w_in_a.T @ w_in_b + w_out_a @ w_out_b.T
        elements[var] = Element(PERM, solve_perm(m), torch.ones(m.shape[0], dtype=torch.float64))
    return {k: v.float() for k, v in apply(spec, Transform(elements), b64).items()}


def _one_model(
    label: str, cfg: ModelConfig, a: Params, b: Params, repeats: int
) -> tuple[list, list[Ratio]]:
    x, y = digits_test(cfg)
    module_a = ResidualMLP(cfg, a)
    template_b = ResidualMLP(cfg, b)
    res = race(
        {
            "rebasin": partial(rebasin_match, module_a, probe=x[:8]),
            "ours": partial(weight_matching, cfg, a, b, "perm"),
        },
        repeats,
        setups={"rebasin": partial(copy.deepcopy, template_b)},
    )
    (t_rb, (b_rb, stream)), (t_ours, ours) = res["rebasin"], res["ours"]
    replica = rebasin_replica(cfg, a, b, stream) if stream is not None else None
    explained = replica is not None and all(torch.equal(b_rb[k], replica[k]) for k in b_rb)

    def barrier(pa: Params, pb: Params, c: ModelConfig = cfg) -> float:
        return barrier_curve(c, pa, pb, x, y, 25, EvalOptions(x.shape[0])).barrier_loss

    bar_naive, bar_rb = barrier(a, b), barrier(a, b_rb)
    bar_ours = barrier(ours.params_a, ours.params_b, ours.cfg)
    with torch.no_grad():
        d_func = float((ResidualMLP(cfg, b_rb)(x) - template_b(x)).abs().max())
    rb = f"rebasin {version('rebasin')}"
    rows = [
        (label, "naive (no matching)", "-", bar_naive, "-"),
        (label, rb, t_rb, bar_rb, f"{d_func:.1e}"),
        (label, "ours, weight_matching perm", t_ours, bar_ours, f"{ours.function_check:.1e}"),
    ]
    agree = (
        f"barrier {bar_rb:.4f} vs ours {bar_ours:.4f} (different costs); rebasin = "
        f"its cost solved by ours: {explained}"
    )
    return rows, [Ratio("weight matching, perm", label, rb, t_ours, t_rb, agree)]


def run(repeats: int = REPEATS) -> tuple[str, list[Ratio]]:
    cfg, (a, b) = zoo_pair("mlp-digits")
    models = [("mlp-digits", cfg, a, b)]
    for d, f in ((128, 512),):  # untrained: barriers ≈ 0, the row is about time
        c = random_residual_mlp(d, f)
        models.append((f"random d={d} f={f}", c, init_params(c, 0), init_params(c, 1)))
    rows, ratios = [], []
    for label, c, pa, pb in models:
        r, q = _one_model(label, c, pa, pb, repeats)
        rows += r
        ratios += q
    head = (
        f"weight matching (permutations), barrier on the digits test split (25 points), "
        f"median of {repeats}; {machine_line()}"
    )
    headers = ("model", "method", "seconds", "barrier", "max|Δlogits| of B")
    return head + "\n" + table(headers, rows), ratios


def main() -> None:
    torch.set_num_threads(1)
    text, ratios = run()
    print(text)
    print()
    print(ratio_table(ratios))


if __name__ == "__main__":
    main()
