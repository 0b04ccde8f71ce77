"""The barrier per weight-matching round and per learned checkpoint, on the shipped vit-digits pair.

The ends of both series are barriers measured elsewhere: round 0 is the naive barrier, the last
round the weight-matching barrier of ``landscape barrier``, and learned matching's step 0 its
start (naive from the identity, weight matching from weight matching).
"""

import json

import pytest
import torch

from landscape.cli import main
from landscape.errors import LandscapeError
from landscape.experiments import IterationOptions, barrier, iteration_barriers
from landscape.experiments.barriers.iterations import FULL_ROUNDS, ROUND_STRIDE, measured_rounds
from landscape.matching import MatchContext, learned_matching, weight_matching
from landscape.plots.eigenangles import (
    RETURNED,
    figure_checkpoint_barriers,
    figure_round_barriers,
)
from landscape.sources import Source, data_of

MODEL, SEEDS, POINTS = "vit-digits", (0, 1), 5
STEPS, CHECKPOINTS = 20, 2  # scored at steps 0, 10 and 20


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    """One measurement (and its cached repeat) shared by the tests of this module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LANDSCAPE_CACHE", str(tmp_path_factory.mktemp("iterations") / "cache"))
        options = IterationOptions(steps=STEPS, checkpoints=CHECKPOINTS, points=POINTS)
        first = iteration_barriers(MODEL, SEEDS, options)
        again = iteration_barriers(MODEL, SEEDS, options)
    return first, again


def _rows(r: dict, key: str, field: str, value: str) -> list[dict]:
    return [row for row in r[key] if row[field] == value]


@pytest.mark.parametrize("group", ["perm", "orth"])
def test_round_zero_is_naive_and_the_last_round_is_weight_matching(result, group):
    r, _ = result
    rows = _rows(r, "rounds", "group", group)
    wm = r["weight_matching"][group]
    assert [row["round"] for row in rows] == measured_rounds(wm["rounds"])
    assert [row["objective"] for row in rows] == [wm["objective"][i] for i in
                                                  measured_rounds(wm["rounds"])]  # fmt: skip
    naive = barrier(MODEL, SEEDS, "naive", group, points=POINTS)
    matched = barrier(MODEL, SEEDS, "weight", group, points=POINTS)
    for metric in ("barrier_loss", "barrier_accuracy"):
        assert rows[0][metric] == pytest.approx(naive[metric], rel=1e-9, abs=1e-12)
        assert rows[-1][metric] == pytest.approx(matched[metric], rel=1e-9, abs=1e-12)
    assert rows[0]["barrier_loss"] != pytest.approx(rows[-1]["barrier_loss"], abs=1e-3)
    assert all(row["function_check"] < 1e-4 for row in rows)


@pytest.mark.parametrize("init,start", [("identity", "naive"), ("weight", "weight")])
def test_learned_matching_starts_from_its_start(result, init, start):
    r, _ = result
    rows = _rows(r, "checkpoints", "init", init)
    assert [row["step"] for row in rows] == [0, 10, 20]
    assert sum(row["selected"] for row in rows) == 1
    expected = barrier(MODEL, SEEDS, start, "orth", points=POINTS)
    # the start goes through one float32 projection onto O(d): equal up to its rounding
    assert rows[0]["barrier_loss"] == pytest.approx(expected["barrier_loss"], abs=1e-5)
    assert rows[0]["barrier_accuracy"] == pytest.approx(expected["barrier_accuracy"], abs=1e-9)
    assert rows[-1]["barrier_loss"] < rows[0]["barrier_loss"]  # learning lowers the barrier


def test_the_result_is_healthy_cached_and_json(result):
    first, again = result
    assert first["function_ok"] and first["function_check"] < 1e-4 and not first["warnings"]
    assert first["cached"] is False and again["cached"] is True
    assert again["rounds"] == first["rounds"] and again["checkpoints"] == first["checkpoints"]
    assert json.loads(json.dumps(first))["rounds"] == first["rounds"]
    assert set(first["learned_matching"]) == {"identity", "weight"}


def test_figures_read_what_the_measurement_writes(result):
    r = json.loads(json.dumps(result[0]))
    rounds, learned = figure_round_barriers(r), figure_checkpoint_barriers(r)
    assert [t.name for t in rounds.data if t.showlegend] == ["permutations (perm)",
                                                             "rotations (orth)"]  # fmt: skip
    assert [t.name for t in learned.data if t.showlegend] == [
        "from the identity",
        "from weight matching",
        RETURNED,
    ]
    returned = {row["init"]: row["step"] for row in r["checkpoints"] if row["selected"]}
    rings = [t for t in learned.data if t.name == RETURNED and t.xaxis == "x"]
    assert [t.x[0] for t in rings] == [returned["identity"], returned["weight"]]
    orth = next(t for t in rounds.data if t.name == "rotations (orth)")
    assert list(orth.y) == [row["barrier_loss"] for row in _rows(r, "rounds", "group", "orth")]


def test_measured_rounds():
    assert measured_rounds(3) == [0, 1, 2, 3]
    assert measured_rounds(23) == [*range(FULL_ROUNDS + 1), 15, 20, 23]
    assert measured_rounds(20)[-2:] == [15, 20] and ROUND_STRIDE == 5


def test_the_hooks_see_every_round_and_checkpoint_and_change_nothing():
    a, b = (Source(MODEL, s).load() for s in SEEDS)
    seen: list[tuple[int, dict]] = []
    heard = MatchContext(on_elements=lambda r, el: seen.append((r, el)))
    wm = weight_matching(a.cfg, a.params, b.params, "orth", max_rounds=3, context=heard)
    plain = weight_matching(a.cfg, a.params, b.params, "orth", max_rounds=3)
    assert [r for r, _ in seen] == list(range(wm.rounds + 1)) and seen[0][1] == {}
    assert seen[-1][1].keys() == wm.transform.elements.keys()
    for v, e in seen[-1][1].items():
        assert torch.equal(e.dense(), wm.transform.elements[v].dense())
    assert wm.objective == plain.objective
    assert all(torch.equal(wm.params_b[k], plain.params_b[k]) for k in wm.params_b)

    train = data_of(a).split("train")
    steps: list[int] = []
    kept: dict[int, dict] = {}

    def on_eval(step, elements):
        steps.append(step)
        kept[step] = elements

    lm = learned_matching(a.cfg, a.params, b.params, "orth", train, steps=6, eval_every=3,
                          context=MatchContext(on_elements=on_eval))  # fmt: skip
    again = learned_matching(a.cfg, a.params, b.params, "orth", train, steps=6, eval_every=3)
    assert steps == [0, 3, 6]
    chosen = kept[lm.info["selected_step"]]
    assert chosen.keys() == lm.transform.elements.keys()
    for v, e in chosen.items():
        assert torch.equal(e.dense(), lm.transform.elements[v].dense())
    assert lm.info["eval_curve"] == again.info["eval_curve"]
    assert all(torch.equal(lm.params_b[k], again.params_b[k]) for k in lm.params_b)


def test_round_zero_in_the_circuits_space_is_the_naive_circuit_barrier():
    r = iteration_barriers(MODEL, SEEDS, IterationOptions(groups=("orth",), max_rounds=1,
                                                          learned=False, points=3,
                                                          space="circuits"))  # fmt: skip
    assert r["space"] == "circuits" and r["checkpoints"] == []
    assert [row["round"] for row in r["rounds"]] == [0, 1]
    naive = barrier(MODEL, SEEDS, "naive", "orth", points=3, space="circuits")
    assert r["rounds"][0]["barrier_loss"] == pytest.approx(naive["barrier_loss"], rel=1e-6)
    assert r["function_ok"]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"seeds": (0,)}, "two seeds"),
        ({"groups": ("rot",)}, "unknown group 'rot'"),
        ({"inits": ("random",)}, "unknown learned start 'random'"),
        ({"groups": (), "learned": False}, "a group to match or a learned start"),
        ({"max_rounds": 0}, "--max-rounds must be at least 1"),
        ({"steps": 0}, "at least 1 step"),
        ({"checkpoints": 0}, "--checkpoints must be at least 1"),
        ({"points": 1}, "--points must be at least 2"),
        ({"split": "val"}, "unknown split 'val'"),
        ({"space": "factors"}, "unknown space 'factors'"),
        ({"seeds": (0, 1), "model": "mlp-digits", "space": "circuits"}, "has none"),
    ],
)
def test_bad_inputs_are_one_line_errors(kwargs, match):
    kwargs = {"model": MODEL, "seeds": SEEDS, **kwargs}
    with pytest.raises(LandscapeError, match=match):
        iteration_barriers(kwargs.pop("model"), kwargs.pop("seeds"), IterationOptions(**kwargs))


def test_cli_adds_the_iterations_key_and_keeps_the_rest(capsys):
    base = ["eigenangles", "mlp-digits", "--seeds", "0", "1", "--json"]
    assert main(base) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*base, "--iterations", "--points", "3", "--checkpoints", "1",
                 "--max-rounds", "2"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert set(out) == set(plain) | {"iterations"}
    for k in ("angles_wm", "angles_correction", "angles_haar", "wm_objective", "lm_curve"):
        assert out[k] == plain[k]
    it = out["iterations"]
    assert {row["group"] for row in it["rounds"]} == {"perm", "orth"}
    assert {row["init"] for row in it["checkpoints"]} == {"identity", "weight"}
    assert max(row["round"] for row in it["rounds"]) <= 2 and it["points"] == 3


def test_cli_refuses_iteration_options_without_iterations(capsys):
    argv = ["eigenangles", "mlp-digits", "--seeds", "0", "1", "--checkpoints", "2"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "landscape: error: --checkpoints only with --iterations"
    )
