"""Learned matching: the latents move, the merged loss falls, the result is exactly in the group."""

from __future__ import annotations

import pytest
import torch

from landscape.data import Split
from landscape.matching import weight_matching
from landscape.matching.latents import apply_dense, project
from landscape.matching.learned import learned_matching, learned_triangle
from landscape.matching.methods import prepare_pair
from landscape.models import forward, init_params
from landscape.symmetry import apply, random_transform, spec_for
from tests.conftest import tiny_config, tiny_inputs


def _task(arch: str, seed: int = 1) -> tuple:
    """A tiny model A and a training split labelled by A's own predictions."""
    cfg = tiny_config(arch)
    a = init_params(cfg, seed)
    x = tiny_inputs(cfg, batch=256, seed=seed)
    with torch.no_grad():
        y = forward(cfg, a, x).argmax(-1)
    return cfg, a, Split(x, y)


def _is_perm(e) -> bool:
    return torch.equal(torch.sort(e.perm).values, torch.arange(len(e.perm))) and bool(
        (e.scale == 1).all()
    )


@pytest.mark.parametrize("group", ["perm", "signed-perm", "orth"])
def test_apply_dense_matches_apply(group: str) -> None:
    cfg = tiny_config("gpt")
    params = init_params(cfg, 0, torch.float64)
    spec = spec_for(cfg)
    g = random_transform(spec, "orth" if group == "orth" else group, 4)
    g = type(g)({k: e for k, e in g.elements.items() if e.over is None})
    if group == "orth":
        params = {k: v for k, v in params.items() if not k.endswith(".w")}  # gains folded
    mats = {v: e.dense() for v, e in g.elements.items()}
    got = apply_dense(spec, mats, params)
    want = apply(spec, g, params)
    assert max(float((got[k] - want[k]).abs().max()) for k in want) < 1e-12


def test_project_is_nearest_group_element() -> None:
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    for kind in ("perm", "signed-perm", "orth"):
        g = project(kind, z).dense()
        assert torch.allclose(g @ g.T, torch.eye(6, dtype=torch.float64), atol=1e-12)
    p = project("perm", torch.eye(6)[[2, 0, 1, 3, 5, 4]].T)
    assert p.perm.tolist() == [2, 0, 1, 3, 5, 4]


def test_permutation_latents_move_from_identity() -> None:
    # B is a permuted copy of A; from the identity the merged model is poor and only changed
    # assignments can lower its loss
    cfg, a, split = _task("mlp")
    spec = spec_for(cfg)
    b = apply(spec, random_transform(spec, "perm", 7), a)
    r = learned_matching(cfg, a, b, "perm", split, init="identity", steps=80, batch_size=64)
    assert sum(r.info["moved"].values()) > 0
    evals = [e["loss"] for e in r.info["eval_curve"]]
    assert min(evals) < 0.8 * evals[0]
    assert all(_is_perm(r.transform.elements[v]) for v in ("resid", "mlp0", "mlp1"))
    assert r.function_check < 1e-4
    assert len(r.lm_curve) == 80 and r.rounds == 80


@pytest.mark.parametrize("arch", ["mlp", "vit"])
def test_learned_orth_lowers_merged_loss_and_stays_in_group(arch: str) -> None:
    cfg, a, split = _task(arch)
    b = init_params(cfg, 2)
    r = learned_matching(cfg, a, b, "orth", split, steps=60, batch_size=128, lam="0.5")
    evals = [e["loss"] for e in r.info["eval_curve"]]
    assert min(evals) < evals[0]
    first = sum(p["loss"] for p in r.lm_curve[:10]) / 10
    last = sum(p["loss"] for p in r.lm_curve[-10:]) / 10
    assert last < first
    g = r.resid_matrix()
    assert (g @ g.T - torch.eye(cfg.d_model, dtype=torch.float64)).abs().max() < 1e-10
    elements = r.transform.elements
    assert all(_is_perm(e) for v, e in elements.items() if v != "resid" and e.over is None)
    inner = [e for e in elements.values() if e.over is not None]  # within-head maps, invertible
    assert (len(inner) > 0) == (arch == "vit") and all(e.kind == "invertible" for e in inner)
    assert r.function_check < 1e-4
    assert r.det_flips == len(r.info["det_flip_steps"])
    assert r.to_dict()["method"] == "learned"


def test_learned_rejects_unknown_settings() -> None:
    cfg, a, split = _task("mlp")
    with pytest.raises(ValueError, match="unknown init"):
        learned_matching(cfg, a, a, "perm", split, init="random", steps=1)
    with pytest.raises(ValueError, match="λ distribution"):
        learned_matching(cfg, a, a, "perm", split, lam="u(0,2)", steps=1)
    with pytest.raises(ValueError, match="orth parametrisation"):
        learned_matching(cfg, a, a, "orth", split, orth="cayley", steps=1)


@pytest.mark.parametrize("orth", ["exp", "polar"])
def test_both_rotation_parametrisations_lower_the_merged_loss(orth: str) -> None:
    cfg, a, split = _task("vit")
    b = init_params(cfg, 2)
    r = learned_matching(cfg, a, b, "orth", split, steps=40, batch_size=64, lam="0.5", orth=orth,
                         eval_every=10)  # fmt: skip
    evals = [e["loss"] for e in r.info["eval_curve"]]
    assert min(evals) < evals[0] and r.info["orth"] == orth
    assert r.function_check < 1e-4
    g = r.resid_matrix()
    assert (g @ g.T - torch.eye(cfg.d_model, dtype=torch.float64)).abs().max() < 1e-10
    if orth == "exp":  # G₀·exp(S − Sᵀ) never leaves G₀'s component of O(d)
        assert r.det_flips == 0


@pytest.mark.parametrize("orth", ["exp", "polar"])
def test_learned_rotations_fixing_the_mean_direction_stay_in_their_subgroup(orth: str) -> None:
    """``orth-mean``: the learned residual rotation keeps G·1 = 1 under both parametrisations
    (the exponential's generator has 1 in its kernel; the polar latent is projected by the
    restricted Procrustes), lowers the merged loss and keeps B's function."""
    cfg, a, split = _task("vit")
    b = init_params(cfg, 2)
    r = learned_matching(cfg, a, b, "orth-mean", split, steps=40, batch_size=64, lam="0.5",
                         orth=orth, eval_every=10)  # fmt: skip
    evals = [e["loss"] for e in r.info["eval_curve"]]
    assert min(evals) < evals[0] and r.function_check < 1e-4
    g = r.resid_matrix()
    ones = torch.ones(cfg.d_model, dtype=torch.float64)
    assert (g @ g.T - torch.eye(cfg.d_model, dtype=torch.float64)).abs().max() < 1e-10
    assert (g @ ones - ones).abs().max() < 1e-10
    assert r.transform.elements["resid"].kind == "orth-mean"


def test_learned_matching_in_the_circuit_space_descends_the_circuit_line() -> None:
    from landscape.models.circuits import circuit_form

    cfg, a, split = _task("vit")
    b = init_params(cfg, 2)
    r = learned_matching(cfg, a, b, "orth", split, steps=30, batch_size=64, lam="0.5",
                         space="circuits", eval_every=10)  # fmt: skip
    assert r.info["space"] == "circuits" and r.function_check < 1e-4

    def circuit_mid_loss(pb) -> float:
        cfg_c, ca = circuit_form(r.cfg, r.params_a)
        cb = circuit_form(r.cfg, pb)[1]
        logits = forward(cfg_c, {k: (ca[k] + cb[k]) / 2 for k in ca}, split.inputs)
        return float(torch.nn.functional.cross_entropy(logits, split.targets))

    start = learned_matching(cfg, a, b, "orth", split, steps=0, space="circuits")
    assert circuit_mid_loss(r.params_b) < circuit_mid_loss(start.params_b)


def test_joint_triangle_alignment_keeps_every_function_and_lowers_the_centroid_loss() -> None:
    from landscape.matching.learned import learned_triangle

    cfg, a, split = _task("vit")
    b, c = init_params(cfg, 2), init_params(cfg, 3)
    rb, rc = learned_triangle(cfg, a, (b, c), "orth", split, steps=30, batch_size=64,
                              eval_every=10)  # fmt: skip
    assert rb.function_check < 1e-4 and rc.function_check < 1e-4
    assert rb.info["joint"] and rb.info["lam"] == "dirichlet(1,1,1)"
    evals = [e["loss"] for e in rb.info["eval_curve"]]
    assert min(evals) < evals[0]  # the mixture losses at the centroid and edge midpoints fell
    for r in (rb, rc):
        g = r.resid_matrix()
        assert (g @ g.T - torch.eye(cfg.d_model, dtype=torch.float64)).abs().max() < 1e-10


def test_learned_matching_does_not_depend_on_the_order_of_the_parameter_dicts() -> None:
    # a checkpoint just trained and the same one read back from the cache list their tensors in
    # different orders; the gradient of a shared rotation must not be summed in dict order
    cfg, a, split = _task("vit")
    b = init_params(cfg, 2)
    backwards = lambda d: dict(reversed(list(d.items())))  # noqa: E731
    runs = [learned_matching(cfg, pa, pb, "orth", split, steps=40, batch_size=64, lam="0.5")
            for pa, pb in ((a, b), (backwards(a), backwards(b)))]  # fmt: skip
    curves = [[p["loss"] for p in r.lm_curve] for r in runs]
    assert curves[0] == curves[1]
    assert torch.equal(runs[0].resid_matrix(), runs[1].resid_matrix())


def test_a_given_start_is_the_weight_matching_it_stands_for() -> None:
    cfg, a, split = _task("mlp")
    b = init_params(cfg, 2)
    wm = weight_matching(cfg, a, b, "orth")
    given = learned_matching(cfg, a, b, "orth", split, steps=8, eval_every=4, start=wm.transform)
    own = learned_matching(cfg, a, b, "orth", split, steps=8, eval_every=4)
    assert torch.equal(given.resid_matrix(), own.resid_matrix())
    assert given.objective == own.objective
    changes = own.info["projection_changes"]
    assert set(changes) == {v for v in own.transform.elements if v != "resid"}
    assert all(0 <= n <= 8 for n in changes.values())


@pytest.mark.parametrize("group", ["perm", "orth"])
def test_dual_learned_matching_is_a_one_sided_matching_in_disguise(group: str) -> None:
    """Both endpoints moving reach no line that B alone cannot: the returned single-sided
    π_A⁻¹∘π_B keeps B's function, its line has the two-sided line's loss at every scored λ (to
    float64 rounding), and A's own transform did move."""
    cfg, a, split = _task("vit")
    b = init_params(cfg, 2)
    r = learned_matching(cfg, a, b, group, split, steps=40, batch_size=128, dual=True)
    dual = r.info["dual"]
    assert dual["line_gap"] < 1e-12
    assert group == "perm" or dual["a_resid_change"] > 1e-3
    assert r.function_check < 1e-4
    # the line measured: processed A against B moved by the equivalent
    spec = spec_for(r.cfg)
    _, a_proc, b_proc = prepare_pair(cfg, a, b, group)
    assert all(torch.equal(r.params_a[k], a_proc[k]) for k in a_proc)
    moved = apply(spec, r.transform, b_proc)
    assert max((moved[k] - r.params_b[k]).abs().max().item() for k in moved) < 1e-5
    with pytest.raises(ValueError, match="pairwise"):
        learned_triangle(cfg, a, (b, init_params(cfg, 3)), group, split, steps=2, dual=True)
