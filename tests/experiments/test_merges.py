"""Merge operators after alignment (``landscape merges``): mergekit's operators, run through
mergekit on tiny Hugging Face pairs built here, beside the straight line.

mergekit comes with the ``test`` extra; where it is missing these tests fail unless
``LANDSCAPE_NO_MERGEKIT=1`` says the machine has none (as ``test_mergekit.py``).
"""

import json
import math
import os
import sys

import pytest
import torch

from landscape.cli import main
from landscape.experiments import seeds_request
from landscape.experiments.merging.operators import (
    MergesOptions,
    mergekit_installed,
    pair_merges,
    run_operator,
)
from tests.conftest import tiny_llama
from tests.experiments.test_export import _family, _gpt2

pytest.importorskip("transformers")

OPERATORS = ["linear", "slerp", "ties", "dare_ties"]


@pytest.fixture(autouse=True)
def _mergekit():
    if mergekit_installed():
        return
    if os.environ.get("LANDSCAPE_NO_MERGEKIT") == "1":
        pytest.skip("LANDSCAPE_NO_MERGEKIT=1: this machine has no mergekit")
    pytest.fail("mergekit not installed: pip install -e '.[test]' installs it (or "
                "LANDSCAPE_NO_MERGEKIT=1 on a machine without it)")  # fmt: skip


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))


PAIRS = [
    pytest.param(_gpt2, "weight", "perm", id="gpt2-weight-perm"),
    pytest.param(_gpt2, "weight", "orth-mean", id="gpt2-weight-orth-mean"),  # A processed, too
    pytest.param(tiny_llama, "weight", "orth", id="llama-weight-orth"),
]


@pytest.mark.parametrize(("build", "method", "group"), PAIRS)
def test_operators_along_the_line(tmp_path, cache_env, build, method, group):
    name = f"mg-{build.__name__.strip('_')}"
    _family(tmp_path, build, name)
    r = pair_merges(seeds_request(name, [0, 1], method, group, points=5),
                    MergesOptions(operators=OPERATORS))
    assert [a["method"] for a in r["alignments"]] == ["naive", method]
    assert r["lambdas"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    for al in r["alignments"]:
        line, ops = al["line"], al["operators"]
        # mergekit's linear merge, written, merged, read back and evaluated, is the line
        for x, got, want in zip(r["lambdas"], ops["linear"]["loss"], line["loss"], strict=True):
            assert got == pytest.approx(want, abs=1e-4), (al["method"], x)
        for op in OPERATORS:
            c = ops[op]
            assert all(math.isfinite(v) for v in [*c["loss"], *c["accuracy"]]), op
            assert math.isfinite(c["barrier_loss"]) and math.isfinite(c["barrier_accuracy"])
            # λ = 0 is the base, B, for every operator
            assert c["loss"][0] == pytest.approx(line["loss"][0], abs=1e-4), op
        # slerp ends at A; the sparsifying operators are curves in λ that leave the line
        assert ops["slerp"]["loss"][-1] == pytest.approx(line["loss"][-1], abs=1e-4)
        for op in ("ties", "dare_ties"):
            assert max(abs(a - b) for a, b in zip(ops[op]["loss"], line["loss"],
                                                  strict=True)) > 1e-3, op  # fmt: skip
            assert len({round(v, 6) for v in ops[op]["loss"]}) == 5, op  # λ is not divided away


def test_dare_is_seeded_and_leaves_the_callers_generators(tmp_path, cache_env):
    import random

    paths = _family(tmp_path, _gpt2, "mg-seeded")
    from safetensors.torch import load_file

    torch.manual_seed(123)
    random.seed(7)
    before = torch.get_rng_state(), random.getstate()
    merged = []
    for k in range(2):
        out = tmp_path / f"dare{k}"
        run_operator(paths[0], paths[1], "dare_ties", 0.5, out)
        merged.append(load_file(out / "model.safetensors"))
    assert torch.equal(torch.get_rng_state(), before[0]) and random.getstate() == before[1]
    assert merged[0].keys() == merged[1].keys()
    assert all(torch.equal(merged[0][k], merged[1][k]) for k in merged[0])
    other = tmp_path / "dare-seed1"
    run_operator(paths[0], paths[1], "dare_ties", 0.5, other, merge_seed=1)
    drawn = load_file(other / "model.safetensors")
    assert any(not torch.equal(drawn[k], merged[0][k]) for k in drawn)


def test_cli_json_table_and_cache(tmp_path, cache_env, capsys):
    _family(tmp_path, _gpt2, "mg-cli")
    argv = ["merges", "mg-cli", "--seeds", "0", "1", "--operators", "ties", "--points", "3",
            "--threads", "1"]  # fmt: skip
    fig = tmp_path / "merges.html"
    assert main([*argv, "--json", "--figure", str(fig)]) == 0
    r = json.loads(capsys.readouterr().out)
    html = fig.read_text()
    assert r["figures"] == [str(fig)] and "Plotly.newPlot" in html and "straight line" in html
    assert r["operators"] == ["ties"] and r["density"] == 0.5 and r["points"] == 3
    assert [x["operator"] for x in r["rows"]] == ["line", "ties"]
    row = r["rows"][1]
    assert row["loss_gain"] == pytest.approx(row["loss_naive"] - row["loss_aligned"])
    assert row["loss_naive_sem"] is None  # one pair: no spread
    assert main(argv) == 0  # the table for people, from the cache
    out = capsys.readouterr().out
    assert "ties" in out and "straight line" in out and "gain" in out


@pytest.mark.parametrize(("argv", "says"), [
    (["merges", "mg-bad", "--seeds", "0", "7"], "no member 7"),
    (["merges", "mg-bad", "--seeds", "0", "0"], "seeds must differ"),
    (["merges", "mg-bad", "--seeds", "0"], "at least two seeds"),
    (["merges", "mg-bad", "--seeds", "0", "1", "--density", "0"], "--density"),
    (["merges", "mg-bad", "--seeds", "0", "1", "--operators", "karcher"], "invalid choice"),
    (["merges", "mg-bad", "--seeds", "0", "1", "--method", "weight", "--group", "orth"],
     "orth"),
], ids=["member", "same-seed", "one-seed", "density", "operator", "file-group"])  # fmt: skip
def test_cli_refusals_are_one_line(tmp_path, cache_env, capsys, argv, says):
    _family(tmp_path, _gpt2, "mg-bad")
    assert main([*argv, "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("landscape: error:") and says in err, err


def test_cli_without_mergekit_names_the_extra(tmp_path, cache_env, capsys, monkeypatch):
    _family(tmp_path, _gpt2, "mg-none")
    monkeypatch.setitem(sys.modules, "mergekit", None)  # import mergekit → ImportError
    monkeypatch.setitem(sys.modules, "mergekit.merge", None)
    capsys.readouterr()  # the family's own writing
    assert main(["merges", "mg-none", "--seeds", "0", "1", "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'landscape[merge]'" in err, err


def test_a_merge_with_a_non_finite_loss_is_refused_and_not_stored(tmp_path, cache_env,
                                                                  monkeypatch):  # fmt: skip
    from landscape.errors import LandscapeError
    from landscape.experiments.merging import operators as merges

    _family(tmp_path, _gpt2, "mg-nan")
    real = merges.evaluate_path

    def nan_path(*args, **kwargs):
        loss, acc = real(*args, **kwargs)
        return torch.full_like(loss, float("nan")), acc

    monkeypatch.setattr(merges, "evaluate_path", nan_path)
    request = seeds_request("mg-nan", [0, 1], "weight", "perm", points=3)
    with pytest.raises(LandscapeError, match="slerp's merge at λ = 0 "):
        pair_merges(request, MergesOptions(operators=["slerp"]))
    monkeypatch.setattr(merges, "evaluate_path", real)
    r = pair_merges(request, MergesOptions(operators=["slerp"]))
    assert all(math.isfinite(v) for v in r["alignments"][0]["operators"]["slerp"]["loss"])


@pytest.mark.parametrize("operator", ["linear", "slerp", "ties", "task_arithmetic"])
def test_the_in_memory_route_is_mergekits_files_route(tmp_path, operator):
    """A model mergekit reads as a Hugging Face directory merged both ways: the in-memory route
    (the zoo's GPTs and ViTs take it) gives the merged model the command's files give, tensor
    for tensor (Llama's files partition the weights as the canonical names do)."""
    from landscape.experiments.merging.operators import merge_in_memory
    from landscape.models.importers import import_checkpoint

    dirs = []
    for seed in (0, 1):
        tiny_llama(seed).save_pretrained(tmp_path / f"m{seed}", safe_serialization=True)
        dirs.append(tmp_path / f"m{seed}")
    a, b = (import_checkpoint(d) for d in dirs)
    run_operator(dirs[0], dirs[1], operator, 0.3, tmp_path / "merged", density=0.5)
    files = import_checkpoint(tmp_path / "merged").params
    memory = merge_in_memory(a.params, b.params, operator, 0.3, density=0.5)
    assert files.keys() == memory.keys()
    for k in files:
        torch.testing.assert_close(memory[k], files[k], rtol=0, atol=2e-6, msg=k)
    if operator != "linear":  # a real operator, not B or A
        assert any((memory[k] - b.params[k]).abs().max() > 1e-3 for k in memory)


def test_in_memory_dare_is_seeded_and_leaves_the_callers_generators():
    from landscape.experiments.merging.operators import merge_in_memory

    g = torch.Generator().manual_seed(0)
    a = {"w": torch.randn(16, 16, generator=g)}
    b = {"w": torch.randn(16, 16, generator=g)}
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    one = merge_in_memory(a, b, "dare_ties", 0.5, merge_seed=1)
    assert torch.equal(torch.rand(3), before)  # the caller's draws go on as if no merge ran
    assert torch.equal(merge_in_memory(a, b, "dare_ties", 0.5, merge_seed=1)["w"], one["w"])
    assert not torch.equal(merge_in_memory(a, b, "dare_ties", 0.5, merge_seed=2)["w"], one["w"])


def test_a_zoo_pair_is_merged_in_memory(tmp_path, cache_env):
    """mlp-digits has no Hugging Face format: its operators run through mergekit in memory, and
    mergekit's linear merge is the line."""
    request = seeds_request("mlp-digits", [0, 1], "weight", "perm", points=3)
    r = pair_merges(request, MergesOptions(operators=["linear", "ties"]))
    assert r["route"] == "memory"
    for al in r["alignments"]:
        for got, want in zip(al["operators"]["linear"]["loss"], al["line"]["loss"], strict=True):
            assert got == pytest.approx(want, abs=1e-5)
        assert al["operators"]["ties"]["loss"][0] == pytest.approx(al["line"]["loss"][0], abs=1e-5)


@pytest.mark.parametrize(
    ("request_of", "message"),
    [
        pytest.param(lambda: seeds_request("mlp-digits", (0, 0), points=3),
                     "give two different seeds: A and B", id="same-seed"),
        pytest.param(lambda: seeds_request("mlp-digits", (0, 1), points=3, space="circuits"),
                     "merge operators act on the processed weights", id="circuits"),
        pytest.param(lambda: seeds_request("mlp-digits", (0, 1), points=3, seed=1),
                     "matched with seed 0", id="matching-seed"),
    ],
)  # fmt: skip
def test_a_merges_request_off_the_processed_weights_is_one_line(request_of, message) -> None:
    """The operators act on the processed weights, keyed without a space or a matching seed:
    a request for another line is refused before anything is loaded."""
    from landscape.errors import LandscapeError

    with pytest.raises(LandscapeError, match=message) as err:
        pair_merges(request_of(), MergesOptions(operators=["linear"]))
    assert "\n" not in str(err.value)


DIGITS = {"name": "digits", "split": "numpy default_rng(0) permutation, 1300/497"}


def test_a_merged_points_cache_key_is_the_one_it_always_had(cache_env, monkeypatch):
    """The inputs of a merged point's entry, as they were when ``merges`` took its options as
    keywords (and the rest of its request as ``**request``): points cached before are still
    read back. The line is measured for real; the first merged point is recorded."""
    import importlib.metadata

    from landscape.experiments.merging.operators import merges
    from landscape.sources import Source
    from landscape.store.cache import Cache, digest_tensors

    seen = []
    real = Cache.get_or_compute

    def spy(self, kind, inputs, compute):
        if kind != "merge":
            return real(self, kind, inputs, compute)
        seen.append(inputs)
        raise LookupError("recorded")

    monkeypatch.setattr(Cache, "get_or_compute", spy)
    options = MergesOptions(operators=("dare_ties",), density=0.3, merge_seed=2, points=3,
                            split="train")  # fmt: skip
    with pytest.raises(LookupError, match="recorded"):
        merges("mlp-digits", [0, 1], "weight", "perm", options)
    (inputs,) = seen
    a, b = (Source("mlp-digits", s).load() for s in (0, 1))
    assert inputs.pop("a") == digest_tensors(a.params)
    assert inputs.pop("b") == digest_tensors(b.params)
    assert inputs.pop("cfg") == a.cfg.to_dict()
    assert inputs == {"method": "naive", "group": "perm", "options": {}, "split": "train",
                      "data": DIGITS, "mergekit": importlib.metadata.version("mergekit"),
                      "version": 1, "route": "memory", "operator": "dare_ties", "lambda": 0.0,
                      "density": 0.3, "merge_seed": 2}  # fmt: skip
