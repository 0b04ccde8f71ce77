import pytest
import torch

from landscape.models import (
    ARCHITECTURES,
    ARCHS,
    ModelConfig,
    architecture_of,
    count_params,
    default_fast,
    forward,
    init_params,
    param_shapes,
)
from landscape.models.registry import describe, random_inputs
from landscape.models.self_attention import attend, attention
from tests.conftest import ARCH_NORMS, tiny_config, tiny_inputs


@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_forward_shapes_and_param_count(arch_norm):
    cfg = tiny_config(*arch_norm)
    params = init_params(cfg, seed=0)
    assert {k: tuple(v.shape) for k, v in params.items()} == param_shapes(cfg)
    assert sum(v.numel() for v in params.values()) == count_params(cfg)
    logits = forward(cfg, params, tiny_inputs(cfg))
    expected = (4, cfg.n_out) if cfg.arch != "gpt" else (4, cfg.n_ctx, cfg.n_out)
    assert logits.shape == expected
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("arch_norm", ARCH_NORMS)
def test_batched_forward_over_stacked_params_matches_loop(arch_norm):
    cfg = tiny_config(*arch_norm)
    a, b = init_params(cfg, 0), init_params(cfg, 1)
    x = tiny_inputs(cfg)
    stacked = {k: torch.stack([a[k], b[k]]) for k in a}
    batched = torch.func.vmap(lambda p: forward(cfg, p, x))(stacked)
    assert torch.allclose(batched[0], forward(cfg, a, x), atol=1e-6)
    assert torch.allclose(batched[1], forward(cfg, b, x), atol=1e-6)


def test_gpt_is_causal():
    cfg = tiny_config("gpt")
    params = init_params(cfg, 0)
    x = tiny_inputs(cfg)
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % cfg.d_vocab
    assert torch.allclose(forward(cfg, params, x)[:, :-1], forward(cfg, params, y)[:, :-1])


def test_missing_norm_gain_means_one():
    cfg = tiny_config("vit")
    params = init_params(cfg, 0)
    x = tiny_inputs(cfg)
    stripped = {k: v for k, v in params.items() if not k.endswith("ln2.w")}
    assert torch.equal(forward(cfg, params, x), forward(cfg, stripped, x))


DTYPES = [pytest.param(torch.float32, id="f32"), pytest.param(torch.float64, id="f64")]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}
# Short contexts (attention by hand) and causal or long ones (the fused kernel), with the options
# of imported checkpoints; gains and biases are noisy so that every parameter matters.
INFERENCE_CASES = [
    pytest.param("mlp", {}, id="mlp"),
    pytest.param("mlp", dict(norm="ln", d_norm=6), id="mlp-ln"),
    pytest.param("vit", {}, id="vit"),
    pytest.param("vit", dict(norm="ln", n_kv_heads=1, attn_scale=0.3), id="vit-ln-gqa"),
    pytest.param("vit", dict(image_size=14, pos="rotary"), id="vit-50-positions-rotary"),
    pytest.param("gpt", {}, id="gpt"),
    pytest.param("gpt", dict(d_norm=6), id="gpt-narrow-rms"),
    pytest.param(
        "gpt",
        dict(n_kv_heads=1, pos="rotary", mlp="gated", act="silu", bias=False),
        id="gpt-llama-like",
    ),
]


def _case(arch, changes, dtype):
    cfg = tiny_config(arch).replace(**changes)
    gen = torch.Generator().manual_seed(5)
    params = {
        k: (v.double() + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)).to(dtype)
        for k, v in init_params(cfg, 0).items()
    }
    x = tiny_inputs(cfg)
    return cfg, params, (x.to(dtype) if x.is_floating_point() else x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("arch", "changes"), INFERENCE_CASES)
def test_inference_forward_matches_the_reference(monkeypatch, arch, changes, dtype):
    from landscape.models import self_attention

    cfg, params, x = _case(arch, changes, dtype)
    reference = forward(cfg, params, x, fast=False)
    assert torch.equal(reference, forward(cfg, params, x, {}))  # a cache selects the reference
    batched = torch.func.vmap(lambda p: forward(cfg, p, x))({k: v[None] for k, v in params.items()})
    assert torch.allclose(batched[0], reference, atol=TOL[dtype])
    for fused in (False, True):  # attention by hand and through the fused kernel
        monkeypatch.setattr(self_attention, "_fused_attention_ok", lambda *_, f=fused: f)
        assert torch.allclose(forward(cfg, params, x, fast=True), reference, atol=TOL[dtype])


@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_training_runs_the_reference_forward(arch):
    # the rounding the shipped checkpoints were trained with: bit for bit
    cfg, params, x = _case(arch, {}, torch.float32)
    trained = {k: v.clone().requires_grad_() for k, v in params.items()}
    assert torch.equal(forward(cfg, trained, x), forward(cfg, params, x, fast=False))


@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_default_rule_picks_the_paths_it_names(arch):
    # fast=None is default_fast: evaluation takes the inference path, recording the reference
    cfg, params, x = _case(arch, {}, torch.float32)
    fast, reference = forward(cfg, params, x, fast=True), forward(cfg, params, x, fast=False)
    assert default_fast(params, x, None) and not default_fast(params, x, {})
    assert torch.equal(forward(cfg, params, x), fast)
    with torch.no_grad():
        trained = {k: v.clone().requires_grad_() for k, v in params.items()}
        assert torch.equal(forward(cfg, trained, x), fast)  # nothing records under no_grad
    assert not default_fast(trained, x, None)
    assert torch.equal(forward(cfg, trained, x).detach(), reference)


def test_fast_path_refuses_a_cache():
    cfg, params, x = _case("gpt", {}, torch.float32)
    with pytest.raises(ValueError, match="fills no cache"):
        forward(cfg, params, x, {}, fast=True)


# ----------------------------------------------------------------------------- the registry

ARCHES = [pytest.param(a, id=a) for a in ARCHITECTURES]


def test_registry_lists_every_config_architecture():
    assert ARCHS == tuple(ARCHITECTURES) == ("mlp", "vit", "gpt", "bert", "bert-cls")
    with pytest.raises(ValueError, match=r"unknown architecture 'cnn'; expected one of \("):
        ModelConfig("cnn", d_model=4, d_mlp=4, n_layers=1, n_out=2)
    with pytest.raises(ValueError, match="unknown architecture"):
        ModelConfig(["mlp"], d_model=4, d_mlp=4, n_layers=1, n_out=2)  # JSON lists are no names


@pytest.mark.parametrize("arch", ARCHES)
def test_registry_facts_match_the_parameters_and_the_forward(arch):
    cfg = tiny_config(arch)
    entry = architecture_of(cfg)
    shapes = param_shapes(cfg)
    assert entry.name == arch and cfg.has_attn == entry.attention
    assert entry.embedding(cfg).items() <= shapes.items()
    assert ("blocks.0.attn.W_Q" in shapes) == entry.attention
    assert ("pos_embed.W_pos" in shapes) == entry.positions  # learned positions by default
    x = random_inputs(cfg, 3, torch.Generator().manual_seed(0))
    assert x.is_floating_point() == (entry.inputs != "tokens")
    logits = forward(cfg, init_params(cfg, 0), x)
    assert logits.shape == ((3, cfg.n_ctx, cfg.n_out) if entry.readout == "every position"
                            else (3, cfg.n_out))  # fmt: skip
    assert torch.equal(x, tiny_inputs(cfg, 3))  # the same seeded draws as the test inputs


@pytest.mark.parametrize("arch", ["vit", "gpt", "bert"])
@pytest.mark.parametrize("fast", [False, True], ids=["reference", "fast"])
def test_registry_causal_flag_is_the_mask(arch, fast):
    # a later position reaches the earlier ones exactly when the architecture is not causal
    cfg = tiny_config(arch)
    params = init_params(cfg, 0)
    x = torch.randn(2, 5, cfg.d_model, generator=torch.Generator().manual_seed(1))
    y = x.clone()
    y[:, -1] += 1.0
    run = attend if fast else attention
    a, b = run(cfg, params, "blocks.0.attn", x), run(cfg, params, "blocks.0.attn", y)
    assert torch.allclose(a[:, :-1], b[:, :-1]) == architecture_of(cfg).causal


ZOO_LINES = {
    "mlp-digits": "residual MLP, d=32, 2 blocks × 64 GELU units, RMSNorm",
    "vit-digits": "pre-norm ViT, d=32, 2 layers × 4 heads of 8, MLP 64, RMSNorm",
    "vit-fashion": "pre-norm ViT, d=64, 2 layers × 4 heads of 16, MLP 128, RMSNorm",
    "gpt-shakespeare": "pre-norm causal GPT, d=64, 2 layers × 4 heads of 16, MLP 256, RMSNorm",
    "vit-fashion-d256": "pre-norm ViT, d=256, 4 layers × 8 heads of 32, MLP 512, RMSNorm",
    "vit-fashion-d128": "pre-norm ViT, d=128, 4 layers × 4 heads of 32, MLP 256, RMSNorm",
    "gpt-shakespeare-d128": "pre-norm causal GPT, d=128, 4 layers × 4 heads of 32, MLP 512, "
    "RMSNorm",
    "gpt-shakespeare-d128-drop0.3": "pre-norm causal GPT, d=128, 4 layers × 4 heads of 32, "
    "MLP 512, RMSNorm",
    "llama-shakespeare-d128": "pre-norm causal GPT, d=128, 4 layers × 8 heads of 16, gated SiLU "
    "MLP 256, RMSNorm, grouped-query attention (2 key/value heads), rotary positions, no biases",
    "vit-fashion-d256-l6": "pre-norm ViT, d=256, 6 layers × 8 heads of 32, MLP 512, RMSNorm",
    "gpt-shakespeare-d256-l6": "pre-norm causal GPT, d=256, 6 layers × 8 heads of 32, MLP 1024, "
    "RMSNorm",
    # the Llama ablation: the dropout GPT with one change each, and the Llama layout
    "gpt-shakespeare-d128-drop0.3-rotary": "pre-norm causal GPT, d=128, 4 layers × 4 heads of "
    "32, MLP 512, RMSNorm, rotary positions",
    "gpt-shakespeare-d128-drop0.3-gqa": "pre-norm causal GPT, d=128, 4 layers × 4 heads of 32, "
    "MLP 512, RMSNorm, grouped-query attention (2 key/value heads)",
    "gpt-shakespeare-d128-drop0.3-h8": "pre-norm causal GPT, d=128, 4 layers × 8 heads of 16, "
    "MLP 512, RMSNorm",
    "gpt-shakespeare-d128-drop0.3-swiglu": "pre-norm causal GPT, d=128, 4 layers × 4 heads of "
    "32, gated SiLU MLP 256, RMSNorm",
    "gpt-shakespeare-d128-drop0.3-nobias": "pre-norm causal GPT, d=128, 4 layers × 4 heads of "
    "32, MLP 512, RMSNorm, no biases",
    "llama-shakespeare-d128-drop0.3": "pre-norm causal GPT, d=128, 4 layers × 8 heads of 16, "
    "gated SiLU MLP 256, RMSNorm, grouped-query attention (2 key/value heads), rotary positions, "
    "no biases",
    "llama-shakespeare-d128-drop0.3-learnedpos": "pre-norm causal GPT, d=128, 4 layers × 8 heads "
    "of 16, gated SiLU MLP 256, RMSNorm, grouped-query attention (2 key/value heads), no biases",
    "llama-shakespeare-d128-drop0.3-gelu": "pre-norm causal GPT, d=128, 4 layers × 8 heads of 16, "
    "MLP 512, RMSNorm, grouped-query attention (2 key/value heads), rotary positions, no biases",
    "llama-shakespeare-d128-drop0.3-mha": "pre-norm causal GPT, d=128, 4 layers × 8 heads of 16, "
    "gated SiLU MLP 256, RMSNorm, rotary positions, no biases",
    "gpt-shakespeare-d128-drop0.3-rotary-s700": "pre-norm causal GPT, d=128, 4 layers × 4 heads "
    "of 32, MLP 512, RMSNorm, rotary positions",
    "llama-shakespeare-d128-drop0.3-s700": "pre-norm causal GPT, d=128, 4 layers × 8 heads of 16, "
    "gated SiLU MLP 256, RMSNorm, grouped-query attention (2 key/value heads), rotary positions, "
    "no biases",
    "moe-shakespeare-d64": "pre-norm causal GPT, d=64, 2 layers × 4 heads of 16, MLP 128, "
    "RMSNorm, mixture of 4 experts (top 2) per FFN",
}


def test_descriptions_are_read_from_the_config():
    from landscape.models.zoo import ZOO

    assert {name: m.architecture for name, m in ZOO.items()} == ZOO_LINES
    mlp = ZOO["mlp-digits"].config.replace(act="relu", norm="ln")
    assert describe(mlp) == "residual MLP, d=32, 2 blocks × 64 ReLU units, LayerNorm"
    gpt = ZOO["gpt-shakespeare"].config.replace(
        n_kv_heads=2, pos="rotary", mlp="gated", act="silu", bias=False
    )
    assert describe(gpt) == (
        "pre-norm causal GPT, d=64, 2 layers × 4 heads of 16, gated SiLU MLP 256, RMSNorm, "
        "grouped-query attention (2 key/value heads), rotary positions, no biases"
    )


def test_shipped_assets_fit_the_budget_and_verify():
    """Every manifest record's file is shipped and intact (its digest verified, its recipe the
    zoo's), every zoo model that ships ships at least two seeds (the others none), and assets/
    stays within its budgets: the checkpoints' and figures', and the shipped results'."""
    from landscape.assets.checkpoints import ASSETS_BUDGET_MB
    from landscape.assets.results import RESULTS_BUDGET_MB
    from landscape.models.zoo import ZOO
    from landscape.sources.zoo import load_shipped, read_manifest
    from landscape.store.paths import assets_root, shipped_results_root

    records = read_manifest()
    for rec in records:
        assert load_shipped(rec["name"], rec["seed"]) is not None, (rec["name"], rec["seed"])
    for name, model in ZOO.items():
        n = sum(r["name"] == name for r in records)
        assert n >= 2 if model.ships else n == 0, name
    results = shipped_results_root()
    files = [f for f in assets_root().rglob("*") if f.is_file()]
    shipped = sum(f.stat().st_size for f in files if results in f.parents)
    assert sum(f.stat().st_size for f in files) - shipped <= ASSETS_BUDGET_MB * 2**20
    assert 0 < shipped <= RESULTS_BUDGET_MB * 2**20


def test_the_manifest_is_parsed_once_per_version_of_its_file(tmp_path, monkeypatch):
    """Read once (every page run lists the seeds of every zoo model), read again when the file
    is replaced."""
    import json

    from landscape.sources.zoo import read_manifest

    monkeypatch.setenv("LANDSCAPE_ASSETS", str(tmp_path))
    assert read_manifest() == []
    path = tmp_path / "zoo" / "manifest.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"checkpoints": [{"name": "a", "seed": 0}]}))
    first = read_manifest()
    assert first == [{"name": "a", "seed": 0}] and read_manifest() is first
    new = tmp_path / "new.json"
    records = [{"name": "a", "seed": 0}, {"name": "a", "seed": 1}]
    new.write_text(json.dumps({"checkpoints": records}))
    new.replace(path)
    assert [r["seed"] for r in read_manifest()] == [0, 1]
