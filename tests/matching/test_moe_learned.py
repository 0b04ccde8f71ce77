"""Learned matching on mixtures of experts: the expert permutation is held at weight matching's,
the residual element and the units inside each expert are learned, and B's function is kept."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from landscape.data import Split
from landscape.matching import weight_matching
from landscape.matching.latents import apply_dense, project
from landscape.matching.learned import learned_matching, learned_triangle
from landscape.matching.result import function_check
from landscape.models import forward, init_params
from landscape.symmetry import Transform, apply, random_transform, spec_for
from landscape.symmetry.processing import prepare
from tests.conftest import tiny_inputs, tiny_moe


def _task(cfg, seed: int = 1) -> tuple:
    """Model A (float64) and a training split labelled by A's own predictions."""
    a = init_params(cfg, seed, torch.float64)
    x = tiny_inputs(cfg, batch=256, seed=seed)
    with torch.no_grad():
        y = forward(cfg, a, x).argmax(-1)
    return a, Split(x, y)


def _barrier(r, split: Split) -> float:
    """The largest loss above the endpoints' line, at λ = ¼, ½, ¾ (float64, the split's rows)."""

    def loss(t: float) -> float:
        mix = {k: (1 - t) * r.params_a[k] + t * r.params_b[k] for k in r.params_a}
        logits = forward(r.cfg, mix, split.inputs)
        y = split.targets.reshape(-1)
        return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y))

    ends = loss(0.0), loss(1.0)
    return max(loss(t) - ((1 - t) * ends[0] + t * ends[1]) for t in (0.25, 0.5, 0.75))


def test_apply_dense_acts_per_expert_slot_after_the_held_experts() -> None:
    """Units per expert slot (``[E, n, n]``) applied densely to B with its experts already
    permuted are the spec's action of the whole transform."""
    cfg = tiny_moe(mlp="gated", act="silu")
    params = init_params(cfg, 0, torch.float64)
    spec = spec_for(cfg)
    g = random_transform(spec, "signed-perm", 4)
    held = {v: e for v, e in g.elements.items() if v.startswith("experts")}
    assert held and g.elements["mlp0"].perm.shape == (4, 6)
    rest = {v: e.dense() for v, e in g.elements.items() if v not in held}
    got = apply_dense(spec, rest, apply(spec, Transform(held), params))
    want = apply(spec, g, params)
    assert max(float((got[k] - want[k]).abs().max()) for k in want) < 1e-12
    # a per-slot latent projects slot by slot back onto those elements
    e = project("signed-perm", g.elements["mlp0"].dense(), over="experts0")
    assert torch.equal(e.perm, g.elements["mlp0"].perm) and e.over == "experts0"


@pytest.mark.parametrize(("flavour", "group"), [
    pytest.param({}, "orth", id="gpt-orth"),
    pytest.param({}, "perm", id="gpt-perm"),
    pytest.param(dict(mlp="gated", act="silu", bias=False), "orth", id="gated-orth"),
])  # fmt: skip
def test_learned_matching_recovers_a_planted_mixture(flavour, group) -> None:
    """B is A with its experts, the units inside them and the residual stream permuted (and
    rotated under ``orth``), plus small noise: learned matching keeps weight matching's expert
    assignment (the planted one undone), keeps B's function to float64 rounding, and its
    barrier is near zero and not above weight matching's."""
    cfg, a = prepare(tiny_moe(**flavour), _task(tiny_moe(**flavour))[0], group)
    _, split = _task(tiny_moe(**flavour))
    spec = spec_for(cfg)
    planted = random_transform(spec, group, 3)
    gen = torch.Generator().manual_seed(5)
    b = {k: v + 0.01 * v.std() * torch.randn(v.shape, generator=gen, dtype=v.dtype)
         for k, v in apply(spec, planted, a).items()}  # fmt: skip
    wm = weight_matching(cfg, a, b, group)
    r = learned_matching(cfg, a, b, group, split, steps=40, eval_every=10, batch_size=64,
                         start=wm.transform)  # fmt: skip
    assert function_check(cfg, b, r.cfg, r.params_b, torch.float64) < 1e-9
    assert r.function_check < 1e-4
    undo = planted.inverse().elements
    for layer in range(cfg.n_layers):
        got = r.transform.elements[f"experts{layer}"]
        assert torch.equal(got.perm, undo[f"experts{layer}"].perm)
        units = r.transform.elements[f"mlp{layer}"]
        assert units.over == f"experts{layer}" and units.perm.shape == (4, 6)
        assert torch.equal(torch.sort(units.perm).values, torch.arange(6).expand(4, 6))
    learned, weight = _barrier(r, split), _barrier(wm, split)
    assert learned <= weight + 1e-3 and learned < 0.02
    # the units are learned per slot; the expert permutation is no latent
    assert {"mlp0", "mlp1"} <= set(r.info["moved"]) and "experts0" not in r.info["moved"]


def test_learned_matching_from_the_identity_holds_the_experts_in_place() -> None:
    """``init="identity"``: no expert permutation is learned or held; the units and the stream
    still move, and the merged loss on the scoring slice falls."""
    cfg = tiny_moe()
    a, split = _task(cfg)
    b = init_params(cfg, 2, torch.float64)
    r = learned_matching(cfg, a, b, "orth", split, init="identity", steps=40, eval_every=10,
                         lam="0.5")  # fmt: skip
    assert not any(v.startswith("experts") for v in r.transform.elements)
    evals = [e["loss"] for e in r.info["eval_curve"]]
    assert min(evals) < evals[0]
    assert function_check(cfg, b, r.cfg, r.params_b, torch.float64) < 1e-9


def test_dual_and_triangle_learned_matching_keep_a_mixtures_functions() -> None:
    """Both endpoints moving (A's transform from the identity, no experts held) and the joint
    triangle (each model with its own held experts) keep every function to float64 rounding;
    the dual line is the one-sided line."""
    cfg = tiny_moe()
    a, split = _task(cfg)
    b, c = init_params(cfg, 2, torch.float64), init_params(cfg, 3, torch.float64)
    r = learned_matching(cfg, a, b, "orth", split, steps=10, eval_every=5, dual=True)
    assert r.info["dual"]["line_gap"] < 1e-12
    assert function_check(cfg, b, r.cfg, r.params_b, torch.float64) < 1e-9
    rb, rc = learned_triangle(cfg, a, (b, c), "orth", split, steps=10, eval_every=5)
    for given, res in ((b, rb), (c, rc)):
        assert function_check(cfg, given, res.cfg, res.params_b, torch.float64) < 1e-9
        assert {"experts0", "experts1"} <= set(res.transform.elements)
