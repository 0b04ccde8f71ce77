"""CLI wiring of the gauge sweep and artifact transport."""

import json

import pytest
import torch

from landscape.cli import main


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def test_gauge_sweep_table_and_claims(capsys):
    argv = ["gauge-sweep", "mlp-digits", "--seed", "0", "--parts", "table", "claims",
            "--draws", "2", "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"table", "claims"} <= set(out)
    assert any(r["group"] == "signed-perm" and r["valid"] for r in out["table"]["rows"])


def test_gauge_sweep_unknown_part(capsys):
    assert main(["gauge-sweep", "mlp-digits", "--parts", "nope"]) == 2
    assert "unknown gauge-sweep parts" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["exact", "perm-only"])
def test_transport_user_artifact_round_trip(tmp_path, capsys, mode):
    from landscape.experiments.artifacts import Artifact
    from landscape.experiments.transport import load_artifact, save_artifact
    from landscape.sources.zoo import get_checkpoint
    from landscape.symmetry import random_transform, spec_for

    ckpt = get_checkpoint("mlp-digits", 0)
    v = torch.randn(ckpt.cfg.d_model, generator=torch.Generator().manual_seed(0))
    src = tmp_path / "steer"
    save_artifact(src, Artifact("steering", {"vector": v}, {"layer": 1}), ckpt.cfg)
    out = tmp_path / "moved"
    argv = ["transport", "mlp-digits", "--seed", "0", "--artifact", str(src), "--out", str(out),
            "--gauge-seed", "3", "--mode", mode, "--json"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    moved = load_artifact(out, ckpt.cfg).tensors["vector"]
    g = random_transform(spec_for(ckpt.cfg), "signed-perm", 3).matrix("resid").float()
    expected = v @ g  # a writer: v·G
    if mode == "exact":
        assert torch.allclose(moved, expected, atol=1e-6)
    else:
        assert not torch.allclose(moved, expected, atol=1e-3)


def test_transport_needs_out(tmp_path, capsys):
    assert main(["transport", "mlp-digits", "--artifact", str(tmp_path / "x")]) == 2
    assert "--out" in capsys.readouterr().err


def test_transport_table_step_counts_reach_the_result(capsys):
    """The table's LoRA and AdamW budgets are options; a different budget is another entry."""
    argv = ["transport", "mlp-digits", "--lora-steps", "3", "--adamw-steps", "2", "--json"]
    assert main(argv) == 0
    short = json.loads(capsys.readouterr().out)
    assert short["lora_steps"] == 3 and short["adamw_steps"] == 2
    assert main([*argv[:2], "--lora-steps", "20", "--adamw-steps", "2", "--json"]) == 0
    longer = json.loads(capsys.readouterr().out)

    def lora(out):
        return {r["mode"]: r for r in out["rows"] if r["artifact"] == "lora"}["exact"]

    assert lora(longer)["reference"] != lora(short)["reference"]  # more steps, another adapter
    assert lora(short)["kept"] == pytest.approx(100.0)  # exact transport keeps the gain
