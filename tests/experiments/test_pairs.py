"""Pair barriers between checkpoint paths: imported and landscape-format, cached, clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from landscape.cli import main  # noqa: E402
from landscape.errors import LandscapeError  # noqa: E402
from landscape.experiments.barriers.pairs import PAIR_BARRIER  # noqa: E402
from landscape.experiments.barriers.pipeline import measure_barrier  # noqa: E402
from landscape.experiments.barriers.request import BarrierRequest  # noqa: E402
from landscape.models import ModelConfig, init_params  # noqa: E402
from landscape.models.importers.common import _SafetensorsSource  # noqa: E402
from landscape.models.zoo import Checkpoint, save_checkpoint_dir  # noqa: E402
from landscape.sources import DataSpec, Source, load_any  # noqa: E402
from landscape.store.cache import Cache  # noqa: E402
from tests.conftest import llama_checkpoints, paths_barrier  # noqa: E402

transformers.logging.set_verbosity_error()
KEYS = {
    "lambdas", "loss", "accuracy", "barrier_loss", "barrier_accuracy", "endpoint_loss",
    "endpoint_accuracy", "function_check", "seconds", "cached", "device",
}  # fmt: skip


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Paths of two Llama fine-tune stand-ins, a planted-gauge copy of A, an MHA model, text."""
    return llama_checkpoints(tmp_path_factory.mktemp("pairs"), 4)


def _run(pair, b: str, tmp_path, **kw) -> dict:
    kw = {"text": pair["text"], "points": 3, "n_ctx": 16, "max_windows": 4, **kw}
    return paths_barrier(pair["a"], pair[b], cache=Cache(tmp_path), device="cpu", **kw)


def test_planted_gauge_has_no_barrier_and_results_are_cached(pair, tmp_path) -> None:
    r = _run(pair, "planted", tmp_path, group="signed-perm")
    assert KEYS <= set(r) and not r["cached"]
    assert PAIR_BARRIER.problems(r) == []  # what the summary reads is what the producer declares
    assert r["barrier_loss"] < 1e-6 and r["function_check"] < 1e-4
    assert r["data"]["tokens"] == "bytes" and r["windows"] == 4
    assert r["endpoint_loss"][0] == pytest.approx(r["endpoint_loss"][1], abs=1e-5)
    again = _run(pair, "planted", tmp_path, group="signed-perm")
    assert again["cached"] and again["loss"] == r["loss"]


def test_an_imported_rotary_pair_has_a_circuits_space_and_says_so(pair, tmp_path) -> None:
    """Llama (rotary, grouped-query) checkpoints in the circuits space: a planted copy of A has
    no barrier there either, an independent pair's line differs from the weights space's, and
    the result and its summary name the space (the summary said "weights" for every run)."""
    from landscape.cli import summaries

    planted = _run(pair, "planted", tmp_path, group="signed-perm", space="circuits")
    assert planted["space"] == "circuits" and planted["barrier_loss"] < 1e-6
    assert planted["function_ok"] and planted["function_check"] < 1e-4
    circuits = _run(pair, "b", tmp_path, method="naive", space="circuits")
    weights = _run(pair, "b", tmp_path, method="naive")
    assert weights["space"] == "weights"
    assert circuits["endpoint_loss"] == pytest.approx(weights["endpoint_loss"], abs=1e-5)
    assert abs(circuits["loss"][1] - weights["loss"][1]) > 1e-4
    assert "in the circuits space" in summaries.show("pair-barrier", circuits)


@pytest.mark.parametrize("method", ["naive", "weight", "activation"])
def test_independent_pair_runs_every_method(pair, tmp_path, method: str) -> None:
    r = _run(pair, "b", tmp_path, method=method, group="orth")
    assert len(r["loss"]) == 3 and r["barrier_loss"] >= 0
    assert r["function_check"] < 1e-4 and r["lambdas"] == [0.0, 0.5, 1.0]


def test_mismatched_architectures_name_the_field(pair, tmp_path) -> None:
    with pytest.raises(LandscapeError, match="n_kv_heads") as e:
        _run(pair, "mha", tmp_path)
    assert "\n" not in str(e.value)


def test_language_model_needs_text(pair, tmp_path) -> None:
    with pytest.raises(LandscapeError, match="--text"):
        _run(pair, "b", tmp_path, text=None)


def test_image_models_use_digits_or_refuse(tmp_path) -> None:
    cfg = ModelConfig("vit", d_model=8, d_mlp=12, n_layers=1, n_out=10, n_heads=2, d_head=4,
                      image_size=8, patch_size=4)  # fmt: skip
    for seed in (0, 1):
        save_checkpoint_dir(Checkpoint(cfg, init_params(cfg, seed), {}), tmp_path / f"v{seed}")
    kw = {"cache": Cache(tmp_path / "c"), "device": "cpu", "points": 3}
    r = paths_barrier(tmp_path / "v0", tmp_path / "v1", "weight", "perm", data="digits", **kw)
    assert r["data"]["data"] == "digits" and r["windows"] == 497
    with pytest.raises(LandscapeError, match="image data set"):
        paths_barrier(tmp_path / "v0", tmp_path / "v1", "weight", "perm", **kw)


def test_cli_inspect_and_pair_barrier(pair, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path))
    assert main(["inspect", str(pair["a"]), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["config"]["n_kv_heads"] == 2 and info["model_type"] == "llama"
    argv = ["pair-barrier", str(pair["a"]), str(pair["b"]), "--text", str(pair["text"]),
            "--n-ctx", "16", "--max-windows", "2", "--points", "3", "--group", "orth",
            "--device", "cpu", "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out) and out["group"] == "orth"
    assert main([*argv[:2], str(pair["mha"]), *argv[3:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bar
    assert err.startswith("landscape: error: mismatched architectures")
    assert "has n_kv_heads=2" in err and "has n_kv_heads=4" in err


@pytest.mark.parametrize("group", ["orth", "signed-perm"])
def test_streamed_pair_matches_the_path_that_keeps_every_copy(pair, tmp_path, group) -> None:
    """Endpoints loaded by the pipeline are consumed by weight matching; handed in as
    checkpoints they are kept (and nothing is emptied). Both give the same curve."""
    spec = DataSpec(pair["text"], None, None, 16, 4, activation_tokens=64)
    kw = {"points": 3, "store_matching": False}
    a_source = Source(str(pair["a"]), data=spec)
    streamed = measure_barrier(
        BarrierRequest(a_source, Source(str(pair["b"]), data=spec), "weight", group, **kw),
        cache=Cache(tmp_path / "s"),
    )
    a, b = load_any(pair["a"]), load_any(pair["b"])
    n = len(a.params)
    kept = measure_barrier(BarrierRequest(a_source, b, "weight", group, **kw),
                           cache=Cache(tmp_path / "k"))  # fmt: skip
    assert len(b.params) == n and len(a.params) == n  # a checkpoint handed in is never emptied
    s, k = streamed.entry, kept.entry
    assert s["function_check"] < 1e-4 and s["function_check_a"] < 1e-4
    assert s["function_check"] == k["function_check"]
    assert s["function_check_a"] == k["function_check_a"]
    assert s["curve"]["loss"] == k["curve"]["loss"]
    same = ("rounds", "objective", "kinds", "det_flips")
    assert {x: s["matching"][x] for x in same} == {x: k["matching"][x] for x in same}


def test_plain_safetensors_reads_equal_safe_open(pair) -> None:
    """The importer's plain file reads give safe_open's tensors bit for bit, in every dtype."""
    root = Path(pair["a"])
    f = root.parent / "dtypes.safetensors"
    g = torch.Generator().manual_seed(0)
    dtypes = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
    tensors = {f"x{i}": torch.randn(3, 5, generator=g).to(dt) for i, dt in enumerate(dtypes)}
    tensors["scalar"] = torch.tensor(2.5)
    tensors["empty"] = torch.zeros(0, 4)
    save_file(tensors, str(f))
    src = _SafetensorsSource.single(f, torch.float32)
    with safe_open(str(f), "pt") as h:
        for name in tensors:
            got, ref = src._read(name), h.get_tensor(name)
            assert got.dtype == ref.dtype and torch.equal(got, ref), name
    src.close()
    for shard in sorted(root.glob("*.safetensors")):
        src = _SafetensorsSource.single(shard, torch.float32)
        with safe_open(str(shard), "pt") as h:
            for name in h.keys():
                assert torch.equal(src._read(name), h.get_tensor(name)), name
        src.close()


def test_cli_max_rounds_caps_weight_matching_only(pair, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path))
    argv = ["pair-barrier", str(pair["a"]), str(pair["b"]), "--text", str(pair["text"]),
            "--n-ctx", "16", "--max-windows", "2", "--points", "3", "--group", "orth",
            "--device", "cpu", "--json"]  # fmt: skip
    assert main([*argv, "--max-rounds", "1"]) == 0
    capped = json.loads(capsys.readouterr().out)
    assert capped["matching"]["rounds"] == 1 and len(capped["matching"]["objective"]) == 2
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["matching"]["rounds"] > 1
    assert main([*argv, "--max-rounds", "1", "--method", "naive"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--max-rounds is for weight matching" in err
