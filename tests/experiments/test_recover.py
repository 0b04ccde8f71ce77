"""The recovery benchmark: a planted symmetry of every level is undone exactly by matching, and
the scores say so; without the alignment they do not."""

from __future__ import annotations

import json

import pytest
import torch

from landscape.cli import main
from landscape.cli.parser.arguments import RECOVER_LEVELS
from landscape.data import Split
from landscape.experiments.merging.recover_benchmark import (
    COLUMN_TOL,
    LEVELS,
    RecoveryOptions,
    levels_of,
    recover,
    score_transform,
    score_variable,
)
from landscape.models import ModelConfig, forward, init_params
from landscape.sources import DataSpec, SplitData
from landscape.symmetry import Element, Transform, random_transform, spec_for
from tests.conftest import tiny_config, tiny_inputs, tiny_llama

# d_vocab ≥ d_model: a rotary model has no W_pos, so the stream's first visit needs a full-rank
# embedding (tests/matching/test_rope_matching.py)
LLAMA = ModelConfig("gpt", d_model=16, d_mlp=12, n_layers=2, n_out=20, n_heads=4, d_head=8,
                    d_vocab=20, n_ctx=6, pos="rotary", n_kv_heads=2, mlp="gated", bias=False,
                    act="silu")  # fmt: skip
MODELS = [
    pytest.param(tiny_config("gpt", "ln"), id="gpt2-style"),  # LayerNorm, positions, GELU
    pytest.param(LLAMA, id="llama-style"),  # RMSNorm, RoPE, GQA (2 groups of 2), SwiGLU
]


def _model(cfg: ModelConfig, seed: int = 1) -> dict[str, torch.Tensor]:
    """Float64 parameters off their init (gains away from 1, biases away from 0)."""
    gen = torch.Generator().manual_seed(seed + 100)
    return {k: v + 0.3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
            for k, v in init_params(cfg, seed, torch.float64).items()}  # fmt: skip


def _data(cfg: ModelConfig, params: dict[str, torch.Tensor]) -> SplitData:
    """Random inputs labelled by the model itself: a loss well below chance at λ = 1."""
    x = tiny_inputs(cfg, batch=32, seed=7)
    with torch.no_grad():
        y = forward(cfg, params, x).argmax(-1)
    split = Split(x, y)
    return SplitData({"train": split, "test": split}, {"note": "test"}, DataSpec())


@pytest.mark.parametrize("cfg", MODELS)
def test_planted_elements_of_every_level_are_recovered_exactly(cfg: ModelConfig) -> None:
    params = _model(cfg)
    levels = levels_of(cfg)
    assert {"perm", "signed-perm", "orth", "qk", "ov"} <= set(levels)
    rows = recover(cfg, params, levels, data=_data(cfg, params))
    assert [r.level for r in rows] == list(levels)
    for r in rows:
        assert r.scramble_check < 1e-9, r.level  # the scramble keeps the function
        assert r.recovered == 1.0 and r.in_place == 1.0, (r.level, r.by_family)
        assert r.distance < 1e-10, r.level  # permutations: 0; rotations and maps: round-off
        assert r.gap < 1e-10 and r.function_check < 1e-4
        assert abs(r.barrier_loss) < 1e-12 and abs(r.barrier_accuracy) < 1e-12
        assert set(r.by_family) >= {"resid", "mlp", "heads", "qk", "ov"}
    kinds = {r.level: r.planted for r in rows}
    assert kinds["signed-perm"]["resid"] == "signed-perm" and kinds["orth"]["resid"] == "orth"
    qk = "rope-commuting" if cfg.rot_dim else "invertible"
    assert kinds["qk"] == {"qk": qk} and kinds["ov"] == {"ov": "invertible"}


@pytest.mark.parametrize("cfg", MODELS)
@pytest.mark.parametrize("level", ["perm", "signed-perm", "orth", "qk"])
def test_without_the_alignment_nothing_is_recovered(cfg: ModelConfig, level: str) -> None:
    """The control: B as scrambled (naive) keeps A's function, but the scores see the scramble."""
    params = _model(cfg)
    (r,) = recover(cfg, params, [level], RecoveryOptions(method="naive"), data=_data(cfg, params))
    assert r.scramble_check < 1e-9
    assert r.recovered < 0.9 and r.in_place < 0.9 and r.distance > 0.1 and r.gap > 0.1
    assert r.barrier_loss > 1e-3


def test_scores_count_a_swapped_pair_and_a_bent_column() -> None:
    spec = spec_for(tiny_config("gpt"))
    n = spec.variables["mlp0"].size
    truth = Element("perm", torch.arange(n), torch.ones(n, dtype=torch.float64))
    swapped = torch.arange(n)
    swapped[[2, 5]] = swapped[[5, 2]]
    s = score_variable(spec, "mlp0", Element("perm", swapped, truth.scale), truth)
    assert (s.units, s.recovered) == (n, n - 2) and s.distance == pytest.approx((4 / n) ** 0.5)
    flipped = truth.scale.clone()
    flipped[0] = -1.0
    assert score_variable(spec, "mlp0", Element("signed-perm", truth.perm, flipped),
                          truth).recovered == n - 1  # fmt: skip
    d = spec.variables["resid"].size
    rot = random_transform(spec, "orth", 0).elements["resid"]
    bent = rot.matrix.clone()
    bent[:, 3] += 10 * COLUMN_TOL * bent[:, 3].norm()  # one column off by 10× the tolerance
    s = score_variable(spec, "resid", Element("orth", matrix=bent), rot)
    assert (s.units, s.recovered) == (d, d - 1)
    # a variable found but not planted is scored against the identity
    (extra,) = score_transform(spec, Transform({"resid": rot}), Transform({}))
    assert extra.variable == "resid" and extra.recovered < d


def test_the_parser_offers_the_library_s_levels() -> None:
    assert RECOVER_LEVELS == LEVELS


def test_cli_json_rows_on_a_zoo_model(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))  # the shipped seed serves
    argv = ["recover", "mlp-digits", "--seed", "0", "--groups", "perm", "orth", "--json",
            "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["function_ok"] and out["warnings"] == [] and out["dtype"] == "float64"
    assert [r["level"] for r in out["rows"]] == ["perm", "orth"]
    for r in out["rows"]:
        assert r["recovered"] == 1.0 and r["units"] > 0 and r["seconds"] > 0
        assert abs(r["barrier_loss"]) < 1e-9 and r["scramble_check"] < 1e-9


def test_cli_on_a_hugging_face_llama(capsys, tmp_path, monkeypatch) -> None:
    """A Hugging Face directory (RoPE, GQA, SwiGLU) with its text: the rotary QK maps too."""
    pytest.importorskip("transformers")
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    tiny_llama(0, 2).save_pretrained(tmp_path / "llama", safe_serialization=True)
    (tmp_path / "text.txt").write_text("To be, or not to be, that is the question. " * 60)
    argv = ["recover", str(tmp_path / "llama"), "--text", str(tmp_path / "text.txt"),
            "--groups", "signed-perm", "qk", "--json", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["planted"].get("qk") for r in rows] == [None, "rope-commuting"]
    assert all(r["recovered"] == 1.0 and abs(r["barrier_loss"]) < 1e-9 for r in rows)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(
            ["mlp-digits", "--seed", "0", "--groups", "qk"], "does not admit", id="no-level"
        ),
        pytest.param(["mlp-digits"], "give the checkpoint's --seed", id="missing-seed"),
        pytest.param(
            ["mlp-digits", "--seed", "0", "--groups", "rot"], "invalid choice", id="bad-level"
        ),
        pytest.param(["no/such/model", "--seed", "0"], "not a zoo model", id="unknown-model"),
    ],
)
def test_bad_input_is_one_line(capsys, tmp_path, monkeypatch, argv, fragment) -> None:
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    assert main(["recover", *argv]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert len(err) == 1 and fragment in err[0], err
