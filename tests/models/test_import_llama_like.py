"""Qwen2 and Mistral: the Llama layout with their own biases and options, against transformers."""

import json

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.models import forward
from landscape.models.importers import import_checkpoint
from landscape.symmetry import symmetry_table
from tests.conftest import perturbed

transformers = pytest.importorskip("transformers")

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=24, vocab_size=64, max_position_embeddings=32)  # fmt: skip


def _build(kind: str, **extra):
    torch.manual_seed(0)
    if kind == "qwen2":
        cfg = transformers.Qwen2Config(**SMALL, tie_word_embeddings=True, **extra)
        model = transformers.Qwen2ForCausalLM(cfg)
    else:
        cfg = transformers.MistralConfig(**SMALL, head_dim=16, **{"sliding_window": None, **extra})
        model = transformers.MistralForCausalLM(cfg)
    return perturbed(model).eval()


@pytest.mark.parametrize("kind", ["qwen2", "mistral"])
def test_logits_equal_transformers_and_admitted_gauges_keep_them(tmp_path, kind):
    model = _build(kind)
    model.save_pretrained(tmp_path, safe_serialization=True)
    ckpt = import_checkpoint(tmp_path)
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(x).logits
    assert (forward(ckpt.cfg, ckpt.params, x) - ref).abs().max() < 1e-4
    if kind == "qwen2":  # the q/k/v biases are read, the output projection has none
        assert bool(ckpt.params["blocks.0.attn.b_Q"].abs().max() > 0)
        assert bool(ckpt.params["blocks.0.attn.b_O"].abs().max() == 0)
    else:
        assert ckpt.cfg.d_head == 16 and not ckpt.cfg.bias
    assert ckpt.meta["model_type"] == kind
    rows = symmetry_table(ckpt.cfg, ckpt.params)
    assert all(r["max_abs_dlogits"] < 1e-8 for r in rows if r["valid"])
    assert any(not r["valid"] and r["max_abs_dlogits"] > 1e-3 for r in rows)  # orth, unfolded


def test_a_sliding_layer_without_a_window_is_refused(tmp_path):
    _build("qwen2").save_pretrained(tmp_path, safe_serialization=True)
    f = tmp_path / "config.json"
    cfg = json.loads(f.read_text())
    f.write_text(json.dumps({**cfg, "sliding_window": None,
                             "layer_types": ["sliding_attention", "full_attention"]}))  # fmt: skip
    with pytest.raises(LandscapeError, match="sliding layers but no sliding_window"):
        import_checkpoint(tmp_path)


def test_inspect_audit_measures_every_group_and_says_why(tmp_path, capsys):
    import json

    from landscape.cli import main

    _build("qwen2").save_pretrained(tmp_path, safe_serialization=True)
    assert main(["inspect", str(tmp_path), "--audit", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["group"]: r for r in out["audit"]}
    assert rows["signed-perm"]["valid"] and rows["signed-perm"]["max_abs_dlogits"] < 1e-8
    orth = rows["orth"]  # trained gains block rotations until they are folded
    assert not orth["valid"] and orth["needs"] == "fold_norm_gains" and "gain" in orth["note"]
    assert orth["max_abs_dlogits"] > 1e-3
    assert rows["orth after fold_norm_gains"]["max_abs_dlogits"] < 1e-8


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("mistral", {"sliding_window": 4}),
        ("qwen2", {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}),
        ("phi3", {"sliding_window": 4}),
    ],
)
def test_sliding_windows_shorter_than_the_input_equal_transformers(tmp_path, kind, extra):
    if kind == "phi3":
        torch.manual_seed(0)
        cfg = transformers.Phi3Config(**SMALL, pad_token_id=0, **extra)
        model = perturbed(transformers.Phi3ForCausalLM(cfg)).eval()
    else:
        model = _build(kind, **extra)
    model.save_pretrained(tmp_path, safe_serialization=True)
    ckpt = import_checkpoint(tmp_path)
    expected = (4, 4) if kind != "qwen2" else (0, 4)  # Qwen2 slides from max_window_layers on
    assert ckpt.cfg.windows == expected
    x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(x).logits
    got = forward(ckpt.cfg, ckpt.params, x)
    assert (got - ref).abs().max() < 1e-4
    full = forward(ckpt.cfg.replace(windows=()), ckpt.params, x)
    assert (full - ref).abs().max() > 1e-3  # the window is what makes them agree
    rows = symmetry_table(ckpt.cfg, ckpt.params)
    assert all(r["max_abs_dlogits"] < 1e-8 for r in rows if r["valid"])
