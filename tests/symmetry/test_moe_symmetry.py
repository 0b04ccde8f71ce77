"""The symmetry of a mixture of experts: experts permuted with their router columns, units
permuted inside each expert, and the residual groups acting on the router as on any reader.
Every random element keeps the logits to float64 rounding; moving the experts without their
router columns does not."""

from __future__ import annotations

import pytest
import torch

from landscape.models import forward
from landscape.symmetry import (
    PERM,
    RESID_GROUPS,
    SIGNED_PERM,
    Element,
    Transform,
    apply,
    compose,
    inverse,
    random_transform,
    spec_for,
    symmetry_table,
)
from landscape.symmetry.processing import prepare
from tests.conftest import tiny_inputs, tiny_moe
from tests.models.test_moe import noisy

FLAVOURS = [
    pytest.param(dict(), id="gpt-plain"),
    pytest.param(dict(mlp="gated", act="silu", bias=False), id="gpt-gated"),
    pytest.param(dict(arch="mlp", act="relu"), id="mlp-relu"),
    pytest.param(dict(norm="ln"), id="gpt-ln"),
]


def _dlogits(cfg, a, cfg_b, b) -> float:
    x = tiny_inputs(cfg, 3)
    x = x.double() if x.is_floating_point() else x
    return float((forward(cfg, a, x) - forward(cfg_b, b, x)).abs().max())


def test_spec_declares_experts_and_units_per_expert():
    spec = spec_for(tiny_moe(mlp="gated"))
    assert spec.variables["experts0"].size == 4 and spec.variables["experts0"].kinds == (PERM,)
    units = spec.variables["mlp0"]
    assert units.over == "experts0" and units.size == 6
    assert [r.var for r in spec.axes["blocks.0.mlp.W_in"]] == ["experts0", "resid", "mlp0"]
    assert [r.var for r in spec.axes["blocks.0.mlp.W_router"]] == ["resid", "experts0"]
    assert spec.axes["blocks.0.mlp.W_router"][0].transpose  # a reader of the stream
    assert ("blocks.0.mlp.W_router", "blocks.0.mlp.b_router") in spec.norm_readers["blocks.0.ln2"]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("group", ["perm", "signed-perm", "orth"])
def test_random_group_element_keeps_the_logits(flavour, group):
    flavour = dict(flavour)
    cfg = tiny_moe(flavour.pop("arch", "gpt"), **flavour)
    params = noisy(cfg)
    cfg_p, p = prepare(cfg, params, group)  # the steps that make the level exact
    spec = spec_for(cfg_p)
    kinds = {"resid": RESID_GROUPS[group]}
    for v in spec.variables.values():
        if v.name != "resid":  # every expert, unit and head permutation, units signed if they may
            kinds[v.name] = SIGNED_PERM if SIGNED_PERM in v.kinds else v.kinds[0]
    g = random_transform(spec, kinds, 7)
    assert g.elements["mlp0"].perm.shape == (4, 6)  # one permutation per expert
    moved = apply(spec, g, p)
    assert _dlogits(cfg, params, cfg_p, moved) < 1e-10
    assert max(float((moved[k] - p[k]).abs().max()) for k in p) > 0.1  # it did move


def test_relu_experts_admit_positive_scalings():
    cfg = tiny_moe("mlp", act="relu")
    params = noisy(cfg)
    spec = spec_for(cfg)
    moved = apply(spec, random_transform(spec, "scale", 3), params)
    assert _dlogits(cfg, params, cfg, moved) < 1e-10


def test_experts_without_their_router_columns_change_the_function():
    cfg = tiny_moe()
    params = noisy(cfg)
    perm = torch.tensor([1, 2, 3, 0])
    swapped = dict(params)
    for leaf in ("W_in", "b_in", "W_out", "b_out"):
        swapped[f"blocks.0.mlp.{leaf}"] = params[f"blocks.0.mlp.{leaf}"][perm]
    assert _dlogits(cfg, params, cfg, swapped) > 1e-2
    spec = spec_for(cfg)
    e = Element(PERM, perm, torch.ones(4, dtype=torch.float64))
    assert _dlogits(cfg, params, cfg, apply(spec, Transform({"experts0": e}), params)) < 1e-12


def test_inverse_and_composition_follow_the_experts():
    cfg = tiny_moe(mlp="gated", act="silu")
    params = noisy(cfg)
    spec = spec_for(cfg)
    kinds = {v.name: SIGNED_PERM if v.family == "mlp" else v.kinds[0]
             for v in spec.variables.values()}  # fmt: skip
    g, h = random_transform(spec, kinds, 1), random_transform(spec, kinds, 2)
    gp = apply(spec, g, params)
    back = apply(spec, inverse(g), gp)
    assert max(float((back[k] - params[k]).abs().max()) for k in params) < 1e-12
    both = apply(spec, compose(g, h), params)
    seq = apply(spec, g, apply(spec, h, params))
    assert max(float((both[k] - seq[k]).abs().max()) for k in params) < 1e-12
    assert _dlogits(cfg, params, cfg, both) < 1e-10


def test_unit_elements_must_come_one_per_expert():
    cfg = tiny_moe()
    params = noisy(cfg)
    spec = spec_for(cfg)
    one = Element(PERM, torch.randperm(6), torch.ones(6, dtype=torch.float64), over="experts0")
    with pytest.raises(ValueError, match="one permutation per slot"):
        apply(spec, Transform({"mlp0": one}), params)
    three = Element(PERM, torch.stack([torch.randperm(6) for _ in range(3)]),
                    torch.ones(3, 6, dtype=torch.float64), over="experts0")  # fmt: skip
    with pytest.raises(ValueError, match="one per slot of experts0"):
        apply(spec, Transform({"mlp0": three}), params)
    dup = Element(PERM, torch.zeros(4, 6, dtype=torch.long), torch.ones(4, 6, dtype=torch.float64),
                  over="experts0")  # fmt: skip
    with pytest.raises(ValueError, match="not one permutation per slot"):
        apply(spec, Transform({"mlp0": dup}), params)


def test_symmetry_table_names_the_experts():
    cfg = tiny_moe()
    rows = symmetry_table(cfg, noisy(cfg))
    perm = next(r for r in rows if r["group"] == "perm")
    assert perm["valid"] and perm["max_abs_dlogits"] < 1e-10 and "experts S_E" in perm["acts_on"]
