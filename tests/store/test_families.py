"""Imported families: registration, errors, and every zoo-style computation on their members."""

from __future__ import annotations

import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from landscape import experiments  # noqa: E402
from landscape.cli import main  # noqa: E402
from landscape.errors import LandscapeError  # noqa: E402
from landscape.experiments.artifacts import Artifact  # noqa: E402
from landscape.experiments.transport import (  # noqa: E402
    load_artifact,
    save_artifact,
    transport,
)
from landscape.models.zoo import save_checkpoint_dir  # noqa: E402
from landscape.sources import DataSpec, Source, add_family, available_seeds  # noqa: E402
from landscape.sources.zoo import get_checkpoint  # noqa: E402
from landscape.store import families as fm  # noqa: E402
from landscape.symmetry import random_transform, spec_for  # noqa: E402
from tests.conftest import llama_checkpoints  # noqa: E402

transformers.logging.set_verbosity_error()


PLANTED_GAUGE = 7  # seed of the signed-permutation element planted in member 2


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """Two independent tiny Llamas (GQA, RoPE, SwiGLU), a planted-gauge copy of the first, an
    MHA model of another shape, and a text file."""
    return llama_checkpoints(tmp_path_factory.mktemp("family"), PLANTED_GAUGE)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))
    return tmp_path


@pytest.fixture
def tunes(ckpts, home) -> str:
    add_family("tunes", [ckpts["a"], ckpts["b"], ckpts["planted"]],
               DataSpec(text=ckpts["text"], n_ctx=16, max_windows=8),
               labels=["ft-a", "ft-b", "planted"])  # fmt: skip
    return "tunes"


def test_a_family_is_registered_listed_and_removed(tunes, ckpts) -> None:
    fam = fm.family(tunes)
    assert fam.arch == "gpt" and len(fam.members) == 3 and fam.n_ctx == 16
    assert "grouped-query" in fam.architecture and fam.parameters == 27296
    assert [f.name for f in fm.families()] == ["tunes"] and fm.is_family("tunes")
    rows = experiments.family_members(tunes)
    assert [r["label"] for r in rows] == ["ft-a", "ft-b", "planted"]
    assert all(r["present"] and r["test_loss"] > 0 for r in rows)
    # the planted copy computes the same function as member 0
    assert rows[2]["test_loss"] == pytest.approx(rows[0]["test_loss"], abs=1e-5)
    assert [r["seed"] for r in available_seeds(tunes)] == [0, 1, 2]
    m = Source(tunes, 1).load()
    assert m.meta["family"] == "tunes" and m.meta["seed"] == 1 and m.meta["label"] == "ft-b"
    assert fm.remove_family(tunes) and not fm.is_family(tunes) and not fm.remove_family(tunes)


def test_family_errors_are_one_line_and_name_the_problem(ckpts, home, tunes) -> None:
    text = ckpts["text"]
    on_text = DataSpec(text=text)
    cases = [
        (("tunes", [ckpts["a"]], on_text), {}, "exists"),
        (("mlp-digits", [ckpts["a"]], on_text), {}, "zoo model"),
        (("bad name!", [ckpts["a"]], on_text), {}, "family name"),
        (("x", [ckpts["a"]], DataSpec()), {}, "needs a text file"),
        (("x", [ckpts["a"]], DataSpec(text=text, data="digits")), {}, "not --data"),
        (("x", [ckpts["a"], ckpts["mha"]], on_text), {}, "mismatched architectures"),
        (("x", [ckpts["a"], home / "nowhere"], on_text), {}, "nowhere"),
        (("x", [ckpts["a"], ckpts["a"]], on_text), {}, "twice"),
        (("x", [ckpts["a"]], DataSpec(text=home / "missing.txt")), {}, "missing.txt"),
        (("x", [ckpts["a"]], on_text), {"labels": ["1", "2"]}, "labels"),
        (("x", [ckpts["a"]], DataSpec(text=text, activation_tokens=64)), {}, "activation_tokens"),
    ]
    for args, kw, words in cases:
        with pytest.raises(LandscapeError, match=words) as err:
            add_family(*args, **kw)
        assert "\n" not in str(err.value)
    assert [f.name for f in fm.families()] == ["tunes"]  # nothing half-registered
    with pytest.raises(LandscapeError, match="no member 3"):
        Source(tunes, 3).load()
    with pytest.raises(LandscapeError, match="unknown family"):
        fm.family("nope")


def test_barriers_triangles_and_tables_run_on_a_family(tunes) -> None:
    r = experiments.barrier(tunes, (0, 2), "weight", "signed-perm", points=5)
    assert r["barrier_loss"] < 1e-5 and r["function_check"] < 1e-4  # the planted gauge is found
    assert not r["cached"]
    again = experiments.barrier(tunes, (0, 2), "weight", "signed-perm", points=5)
    assert again["cached"] and again["loss"] == r["loss"]
    naive = experiments.barrier(tunes, (0, 2), "naive", "perm", points=5)
    # aligned, the path stays on one function; without matching it leaves it (random weights:
    # the midpoint's loss drops towards uniform, so the barrier itself can be 0)
    assert max(r["loss"]) - min(r["loss"]) < 1e-5
    assert max(naive["loss"]) - min(naive["loss"]) > 0.01
    tri = experiments.triangle(tunes, (0, 1, 2), "weight", "orth",
                               experiments.TriangleOptions(resolution=2))
    assert len(tri["loss"]) == 6 and 0 <= tri["basin_fraction"] <= 1
    rows = (("naive", "perm"), ("weight", "perm"))
    table = experiments.table(tunes, 1, experiments.TableOptions(rows=rows, points=3))
    assert table["pairs"] == [[0, 1]] and len(table["rows"]) == 2


def test_a_classifier_family_gives_the_zoo_numbers(home, tmp_path) -> None:
    """mlp-digits seeds saved as directories, registered with --data digits: same barrier."""
    paths = [save_checkpoint_dir(get_checkpoint("mlp-digits", s), tmp_path / f"m{s}")
             for s in (0, 1)]  # fmt: skip
    add_family("digit-mlps", paths, DataSpec(data="digits"))
    fam = experiments.barrier("digit-mlps", (0, 1), "weight", "perm", points=5)
    zoo = experiments.barrier("mlp-digits", (0, 1), "weight", "perm", points=5)
    assert fam["loss"] == pytest.approx(zoo["loss"], abs=1e-6)
    assert fam["barrier_loss"] == pytest.approx(zoo["barrier_loss"], abs=1e-6)
    with pytest.raises(LandscapeError, match="needs --data"):
        add_family("no-data", paths, DataSpec())


def test_transport_table_on_a_gqa_swiglu_family_keeps_every_artifact_exactly(tunes) -> None:
    from landscape.experiments.transport import TransportOptions, transport_table

    rows = transport_table(tunes, 0, TransportOptions(adamw_steps_before=3, adamw_steps_after=3))
    exact = {r["artifact"]: r for r in rows if r["mode"] == "exact"}
    assert set(exact) == {"steering", "probe", "sae", "lora", "adamw"}
    for name in ("steering", "probe", "sae", "lora"):
        assert exact[name]["kept"] == pytest.approx(100, abs=0.01), name
    assert exact["adamw"]["value"] < 1e-4
    none = {r["artifact"]: r for r in rows if r["mode"] == "none"}
    assert none["probe"]["value"] < exact["probe"]["value"]


def test_gauge_sweep_on_a_family(tunes) -> None:
    from landscape.experiments.gauge.runner import GaugeOptions, gauge_sweep

    out = gauge_sweep(tunes, 0, GaugeOptions(draws=1, parts=("table", "scramble", "claims")))
    valid = {r["group"]: r["valid"] for r in out["table"]["rows"]}
    assert valid["signed-perm"] and not valid["orth"]
    summary = {r["group"]: r for r in out["scramble"]["summary"]}
    assert summary["signed-perm"]["max_abs_dlogits"] < 1e-4
    assert summary["signed-perm"]["matched_signed-perm"] < 1e-5
    assert {r["transported"] for r in out["claims"]["summary"]} == {1}


def test_cli_registers_a_family_and_moves_an_artifact_onto_a_planted_member(
    tunes, ckpts, tmp_path, capsys
) -> None:
    assert main(["family", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["families"]
    assert [f["name"] for f in listed] == ["tunes"] and listed[0]["members"] == 3
    assert main(["barrier", tunes, "--seeds", "0", "2", "--group", "signed-perm",
                 "--points", "3", "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["barrier_loss"] < 1e-5
    a = Source(tunes, 0).load()
    vector = torch.randn(a.cfg.d_model, generator=torch.Generator().manual_seed(0))
    art = Artifact("steering", {"vector": vector}, {"layer": 1, "cls": 0, "scale": 1.0})
    save_artifact(tmp_path / "steer", art, a.cfg)
    assert main(["transport", tunes, "--seed", "0", "--artifact", str(tmp_path / "steer"),
                 "--to-seed", "2", "--group", "signed-perm", "--out",
                 str(tmp_path / "moved"), "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    moved = load_artifact(tmp_path / "moved", a.cfg).tensors["vector"]
    g = random_transform(spec_for(a.cfg), "signed-perm", PLANTED_GAUGE)
    want = transport(a.cfg, art, g, "exact").tensors["vector"]
    assert torch.allclose(moved, want, atol=1e-6)
    assert main(["family", "remove", tunes]) == 0
    assert main(["family", "remove", tunes]) == 2
    assert "no family" in capsys.readouterr().err


def test_cli_family_batch_size_is_kept_and_used_by_fine_tuning(ckpts, home, capsys) -> None:
    from landscape.tasks import load_task

    assert main(["family", "add", "small-steps", str(ckpts["a"]), str(ckpts["b"]), "--text",
                 str(ckpts["text"]), "--n-ctx", "16", "--max-windows", "8", "--batch-size", "3",
                 "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["batch_size"] == 3
    x, _ = next(load_task("small-steps", 0).batches(seed=0))
    assert x.shape[0] == 3


def test_a_task_of_member_0_reads_the_member_once(tunes, monkeypatch) -> None:
    from landscape import tasks
    from landscape.sources import checkpoints, families

    read = []
    real = checkpoints.load_any
    monkeypatch.setattr(checkpoints, "load_any", lambda p: read.append(str(p)) or real(p))
    monkeypatch.setattr(families, "_FAMILY_DATA", {})  # no data read before in this process
    task = tasks.load_task(tunes, 0)  # its data is read with member 0's vocabulary
    assert read == [fm.family(tunes).members[0]]
    # another member's task reads that member, and member 0 only where the data is not known yet
    read.clear()
    other = tasks.load_task(tunes, 1)
    assert read == [fm.family(tunes).members[1]]
    assert torch.equal(other.test.inputs, task.test.inputs)
