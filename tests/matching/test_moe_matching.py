"""Weight matching on mixtures of experts: a planted permutation of the experts, of the units
inside each expert and of the residual stream is found back exactly."""

from __future__ import annotations

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.matching import match, weight_matching
from landscape.symmetry import RESID_GROUPS, SIGNED_PERM, apply, random_transform, spec_for
from landscape.symmetry.processing import prepare
from tests.conftest import tiny_moe
from tests.models.test_moe import noisy


@pytest.mark.parametrize(
    ("flavour", "group"),
    [
        pytest.param(dict(), "perm", id="gpt-plain-perm"),
        pytest.param(dict(mlp="gated", act="silu", bias=False), "signed-perm", id="gpt-gated"),
        pytest.param(dict(arch="mlp", act="relu"), "orth", id="mlp-relu-orth"),
    ],
)
def test_weight_matching_recovers_planted_experts(flavour, group):
    flavour = dict(flavour)
    cfg = tiny_moe(flavour.pop("arch", "gpt"), **flavour)
    cfg, a = prepare(cfg, noisy(cfg), group)
    spec = spec_for(cfg)
    kinds = {"resid": RESID_GROUPS[group]}
    for v in spec.variables.values():  # experts, heads, units in each expert (signed if gated)
        if v.family in ("experts", "heads", "mlp"):
            kinds[v.name] = SIGNED_PERM if group != "perm" and SIGNED_PERM in v.kinds else "perm"
    planted = random_transform(spec, kinds, 4)
    assert not torch.equal(planted.elements["experts0"].perm, torch.arange(4))
    b = apply(spec, planted, a)
    r = weight_matching(cfg, a, b, group)
    assert max(float((r.params_a[k] - r.params_b[k]).abs().max()) for k in a) < 1e-10
    assert r.objective[-1] < 1e-20 and r.function_check < 1e-4
    undo = planted.inverse().elements
    for layer in range(cfg.n_layers):  # the inverse of the planted experts, units per expert
        e, u = r.transform.elements[f"experts{layer}"], r.transform.elements[f"mlp{layer}"]
        assert torch.equal(e.perm, undo[f"experts{layer}"].perm)
        assert torch.equal(u.perm, undo[f"mlp{layer}"].perm) and u.perm.shape == (4, 6)
        assert torch.equal(u.scale, undo[f"mlp{layer}"].scale)


def test_methods_not_built_for_experts_say_so():
    cfg = tiny_moe()
    a, b = noisy(cfg, 0), noisy(cfg, 1)
    x = torch.randint(0, cfg.d_vocab, (4, cfg.n_ctx))
    with pytest.raises(LandscapeError, match="not built for mixtures of experts"):
        match(cfg, a, b, "activation", "perm", inputs=x)
