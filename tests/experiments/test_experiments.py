"""The cached experiment layer on the shipped zoo: barrier keys, caching, tables, errors."""

import json

import pytest
import torch

from landscape.cli import main
from landscape.errors import LandscapeError
from landscape.experiments import (
    RunContext,
    TableOptions,
    TriangleOptions,
    barrier,
    mean_sem,
    pairs_for,
    paper_value,
    table,
    triangle,
)
from landscape.experiments.barriers.tables import DEFAULT_ROWS, fitting_rows
from landscape.experiments.barriers.triangles import TRIANGLE

BARRIER_KEYS = {"lambdas", "loss", "accuracy", "barrier_loss", "barrier_accuracy", "endpoint_loss",
                "endpoint_accuracy", "function_check", "seconds", "cached", "device"}  # fmt: skip


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def test_barrier_json_keys_and_cache_hit(capsys):
    argv = ["barrier", "mlp-digits", "--seeds", "0", "1", "--method", "weight", "--group", "perm",
            "--points", "9", "--json"]  # fmt: skip
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert BARRIER_KEYS <= set(first)
    assert first["cached"] is False and len(first["lambdas"]) == 9
    assert first["lambdas"][0] == 0.0 and first["lambdas"][-1] == 1.0
    assert first["function_check"] < 1e-4
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["cached"] is True and second["loss"] == first["loss"]


def test_a_default_said_explicitly_reads_the_defaults_cache_entry():
    from landscape.matching import given_options

    def run(**options):
        return barrier("mlp-digits", (0, 1), "weight", "orth", points=3, options=options or None)

    plain = run()
    said = run(max_rounds=50, tol=1e-4)  # weight matching's own defaults
    assert said["cached"] and said["cache_key"] == plain["cache_key"]
    fewer = run(max_rounds=2)
    assert not fewer["cached"] and fewer["cache_key"] != plain["cache_key"]
    # only plain values equal to the keyword's default, of its type, are left out
    assert given_options("learned", {"steps": 300, "lr": 0.2, "init": "weight"}) == {"lr": 0.2}
    assert given_options("learned", {"steps": 300.0, "space": "circuits"}) == {
        "steps": 300.0, "space": "circuits"}  # fmt: skip
    x = torch.zeros(2)
    assert given_options("activation", {"inputs": x, "batch": 7}) == {"inputs": x, "batch": 7}
    assert given_options("naive", {"anything": 1}) == {"anything": 1}


def test_barrier_of_a_model_with_itself_is_zero():
    r = barrier("mlp-digits", (3, 3), "naive", "perm", points=7)
    assert abs(r["barrier_loss"]) < 1e-6 and abs(r["barrier_accuracy"]) < 1e-9
    assert r["endpoint_loss"][0] == pytest.approx(r["endpoint_loss"][1], abs=1e-7)


def test_endpoints_are_the_models_own_metrics():
    from landscape.sources.zoo import get_checkpoint

    r = barrier("mlp-digits", (0, 1), "weight", "orth", points=5)
    a, b = get_checkpoint("mlp-digits", 0), get_checkpoint("mlp-digits", 1)
    # λ = 1 is A; aligning and processing B never changes its function.
    assert r["endpoint_loss"][0] == pytest.approx(a.meta["metrics"]["test_loss"], abs=1e-5)
    assert r["endpoint_loss"][1] == pytest.approx(b.meta["metrics"]["test_loss"], abs=1e-5)
    assert r["endpoint_accuracy"][1] == pytest.approx(b.meta["metrics"]["test_accuracy"], abs=1e-6)


def test_table_rows_equal_barrier_numbers():
    rows = (("naive", "perm"), ("weight", "orth"))
    t = table("mlp-digits", 2, TableOptions(rows=rows, points=5))
    assert t["pairs"] == [[0, 1], [2, 3]]
    for row in t["rows"]:
        singles = [barrier("mlp-digits", p, row["method"], row["group"], points=5)["barrier_loss"]
                   for p in t["pairs"]]  # fmt: skip
        assert row["per_pair_loss"] == singles
        assert row["barrier_loss"] == pytest.approx(sum(singles) / 2)
    naive, weight = t["rows"]
    assert naive["barrier_loss"] > weight["barrier_loss"]


@pytest.mark.parametrize("model, left_out", [
    pytest.param("gpt-shakespeare", [], id="dense"),
    pytest.param("moe-shakespeare-d64", [("activation", "perm")], id="experts"),
])  # fmt: skip
def test_a_tables_rows_are_those_whose_method_aligns_the_model(model, left_out):
    kept, out = fitting_rows(model, DEFAULT_ROWS)  # the zoo's config: nothing is trained
    assert [(x["method"], x["group"]) for x in out] == left_out
    assert kept == [r for r in DEFAULT_ROWS if r not in left_out]
    assert all("mixtures of experts" in x["reason"] for x in out)


def test_a_table_with_no_row_that_aligns_the_model_is_refused():
    with pytest.raises(LandscapeError, match="no row of the table aligns moe-shakespeare-d64"):
        fitting_rows("moe-shakespeare-d64", (("activation", "perm"),))


def test_table_in_both_spaces_reads_against_the_paper():
    rows = (("naive", "perm"), ("weight", "orth"), ("activation", "perm"))
    t = table("vit-digits", 1, TableOptions(rows=rows, points=5, space="both"))
    assert t["spaces"] == ["weights", "circuits"]
    got = [(r["method"], r["group"], r["space"]) for r in t["rows"]]
    assert got == [(m, g, s) for m, g in rows for s in ("weights", "circuits")]
    for row in t["rows"]:  # each cell is the one barrier of that space
        b = barrier("vit-digits", (0, 1), row["method"], row["group"], points=5,
                    space=row["space"])  # fmt: skip
        assert row["per_pair_loss"] == [b["barrier_loss"]]
    assert [r["paper"] for r in t["rows"][::2]] == ["1.69–2.84", "0.34–0.69", ""]
    assert paper_value("learned", "orth", "vit") == "0.00"
    assert paper_value("learned", "orth", "gpt") == "0.02"
    # without heads there is no circuits space: both is the weights alone
    both = TableOptions(rows=rows[:1], points=5, space="both")
    assert table("mlp-digits", 1, both)["spaces"] == ["weights"]
    with pytest.raises(LandscapeError, match="unknown space"):
        table("mlp-digits", 1, TableOptions(rows=rows[:1], points=5, space="circuit"))


def test_triangle_keys():
    r = triangle("mlp-digits", (0, 1, 2), "weight", "orth", TriangleOptions(resolution=4))
    assert len(r["points"]) == 15 and len(r["loss"]) == 15
    assert 0.0 < r["basin_fraction"] <= 1.0


def test_pairs_and_statistics():
    assert pairs_for("vit-digits", 3) == [(0, 1), (0, 2), (1, 2)]
    assert pairs_for("mlp-digits", 6)[-1] == (10, 11)
    with pytest.raises(LandscapeError):
        pairs_for("vit-digits", 4)
    assert mean_sem([1.0, 3.0]) == (2.0, 1.0)


@pytest.mark.parametrize(
    "argv,match",
    [
        pytest.param(
            ["barrier", "mlp-digits", "--seeds", "0", "1", "--group", "rot"],
            "invalid",
            id="bad-group",
        ),  # fmt: skip
        pytest.param(["barrier", "mlp-digits", "--seeds", "0"], "--seeds", id="one-seed"),
        pytest.param(
            ["barrier", "/nonexistent/ckpt", "--seeds", "0", "1"], "not a zoo model", id="bad-path"
        ),  # fmt: skip
        pytest.param(
            ["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "1"],
            "points",
            id="one-point",
        ),  # fmt: skip
    ],
)
def test_bad_input(capsys, argv, match):
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    errors = [line for line in err.splitlines() if line.startswith("landscape: error")]
    assert len(errors) == 1 and match in errors[0] and "Traceback" not in err


def test_mismatched_architectures(tmp_path):
    from landscape.experiments import align, load
    from landscape.models import init_params
    from landscape.models.zoo import Checkpoint

    a = load("mlp-digits", 0)
    cfg = a.cfg.replace(d_mlp=32)
    b = Checkpoint(cfg, init_params(cfg, 0), {"name": "mlp-digits", "seed": 99})
    with pytest.raises(LandscapeError, match="mismatched architectures"):
        align(a, b, "weight", "perm")


def test_a_checkpoint_path_and_its_zoo_seed_run_through_one_pipeline(tmp_path):
    """``pair-barrier`` on directories written from zoo seeds measures what ``barrier`` does."""
    from landscape.models.zoo import save_checkpoint_dir
    from landscape.sources import Source
    from tests.conftest import paths_barrier

    dirs = [save_checkpoint_dir(Source("mlp-digits", s).load(), tmp_path / f"m{s}")
            for s in (0, 1)]  # fmt: skip
    assert Source(str(dirs[0])).kind == "path" and Source("mlp-digits", 0).kind == "zoo"
    zoo = barrier("mlp-digits", (0, 1), "weight", "orth", points=5)
    pair = paths_barrier(*dirs, "weight", "orth", data="digits", points=5)
    assert pair["loss"] == pytest.approx(zoo["loss"], abs=1e-6)
    assert pair["function_check"] == zoo["function_check"]
    # a directory written from a zoo checkpoint is evaluated on its zoo model's data
    path = barrier(str(dirs[0]), (0, 0), "naive", "perm", points=3)
    assert path["barrier_loss"] == pytest.approx(0.0, abs=1e-9)


def test_gauge_results_are_typed_and_keep_their_keys():
    """Each sweep part is written by its dataclass; reading a result back gives it again, and the
    keys derived from groups and sources are the ones the figures read."""
    from landscape.experiments.gauge import parts as gauge
    from landscape.experiments.gauge import results as gr
    from tests.experiments.test_gauge import synthetic_task

    task = synthetic_task("mlp")
    parts = {
        gr.ScrambleResult: gauge.scramble_test(task, draws=1, lambdas=3),
        gr.RecoveryResult: gauge.recovery_under_drift(task, steps_grid=(0, 2), draws=1),
        gr.TrajectoryResult: gauge.trajectory_transport(task, steps=4, every=2),
        gr.ClaimResult: gauge.claim_check(task, draws=1),
    }
    for cls, result in parts.items():
        assert cls.from_dict(result).to_dict() == result, cls.__name__
    summary = parts[gr.ScrambleResult]["summary"][0]
    assert {gr.matched_key(g) for g in gr.SWEEP_GROUPS} <= set(summary)
    curve = parts[gr.RecoveryResult]["curve"][0]
    assert gr.recovery_key("weights", "marginalised", "coord") in curve
    assert "draw" not in curve and "draw" in parts[gr.RecoveryResult]["rows"][0]


def test_progress_is_one_protocol():
    from landscape.progress import within

    seen = []
    part = within(lambda stage, done, total: seen.append((stage, done, total)), 0.5, 1.0, "b ")
    part("evaluate", 1, 4)
    assert seen == [("b evaluate", 0.625, 1.0)]
    assert within(None, 0, 1) is None


def test_eigenangles_without_learned_matching_are_the_weight_matching_part():
    from landscape.experiments import eigenangle_result

    fast = eigenangle_result("mlp-digits", (0, 1), learned=False)
    full = eigenangle_result("mlp-digits", (0, 1))
    assert "angles_correction" not in fast and fast["lm_curve"] == []
    assert len(full["angles_correction"]) == full["d_model"] and full["lm_curve"]
    for key in ("angles_wm", "angles_haar", "summary_wm", "wm_objective", "d_model"):
        assert fast[key] == full[key], key


@pytest.mark.parametrize("space", ["weights", "circuits"])
def test_a_model_with_itself_has_no_barrier_in_either_space(space) -> None:
    r = barrier("vit-digits", (0, 0), "naive", "perm", points=3, space=space)
    assert r["space"] == space and r["function_ok"], r["warnings"]
    assert r["barrier_loss"] == pytest.approx(0.0, abs=1e-5)


def test_the_circuit_line_is_another_path_between_the_same_functions(capsys) -> None:
    argv = ["barrier", "vit-digits", "--seeds", "0", "1", "--method", "weight", "--group", "orth",
            "--points", "5", "--json"]  # fmt: skip
    runs = {}
    for space in ("weights", "circuits"):
        assert main([*argv, "--space", space]) == 0
        runs[space] = json.loads(capsys.readouterr().out)
    w, c = runs["weights"], runs["circuits"]
    assert c["space"] == "circuits" and c["function_ok"], c["warnings"]
    assert c["endpoint_loss"] == pytest.approx(w["endpoint_loss"], abs=1e-4)
    assert abs(c["barrier_loss"] - w["barrier_loss"]) > 1e-3


def test_circuits_refuse_a_model_without_heads(capsys) -> None:
    argv = ["barrier", "mlp-digits", "--seeds", "0", "1", "--space", "circuits"]
    assert main(argv) == 2
    assert "rewrites attention heads" in capsys.readouterr().err
    with pytest.raises(LandscapeError, match="rewrites attention heads"):
        table("mlp-digits", 1, TableOptions(rows=[("naive", "perm")], points=3, space="circuits"))


def test_joint_triangle_is_learned_together_and_keeps_every_function(capsys) -> None:
    joint = TriangleOptions(resolution=2, joint=True)
    r = triangle("vit-digits", (0, 1, 2), "learned", "orth", joint)
    assert r["joint"] and r["function_ok"], r["warnings"]
    assert TRIANGLE.problems(r) == []  # a joint triangle writes what the declaration says
    assert r["function_check"] < 1e-4 and r["function_check_a"] < 1e-4
    again = triangle("vit-digits", (0, 1, 2), "learned", "orth", joint)
    assert again["cached"] and again["excess_loss"] == r["excess_loss"]
    argv = ["triangle", "vit-digits", "--seeds", "0", "1", "2", "--method", "weight", "--joint"]
    assert main(argv) == 2
    assert "--method learned" in capsys.readouterr().err


def test_a_pair_that_shares_a_tensor_is_aligned_and_cached(tmp_path) -> None:
    """Endpoints holding one tensor in common (B derived from A) are stored in the cache."""
    from landscape.experiments import align, load
    from landscape.models.zoo import Checkpoint
    from landscape.store.cache import Cache

    a = load("vit-digits", 0)
    b = load("vit-digits", 1)
    b = Checkpoint(b.cfg, {**b.params, "unembed.b_U": a.params["unembed.b_U"]}, b.meta)
    cache = Cache(tmp_path / "c")
    first = align(a, b, "weight", "perm", context=RunContext(cache=cache))
    again = align(a, b, "weight", "perm", context=RunContext(cache=cache))
    assert not first.cached and again.cached
    assert torch.equal(again.params_b["unembed.b_U"], first.params_b["unembed.b_U"])


def test_a_width_only_difference_points_to_widths() -> None:
    from landscape.experiments import BarrierRequest, load, measure_barrier
    from landscape.experiments.barriers.widths import narrow_checkpoint

    a = load("vit-digits", 0)
    b = narrow_checkpoint("vit-digits", 2, 1)
    with pytest.raises(LandscapeError, match="landscape widths"):
        measure_barrier(BarrierRequest(a, b, "naive", "perm", points=3))


def test_learned_matching_starts_from_the_cached_weight_matching(monkeypatch) -> None:
    import landscape.matching.learning as learning
    from landscape.experiments.barriers.alignment import align
    from landscape.experiments.barriers.endpoints import load

    a, b = load("mlp-digits", 0), load("mlp-digits", 1)
    wm = align(a, b, "weight", "orth")
    assert wm.transform is not None and set(wm.transform.elements) >= {"resid", "mlp0"}
    calls = []
    real = learning.weight_matching
    monkeypatch.setattr(learning, "weight_matching",
                        lambda *a, **k: calls.append(1) or real(*a, **k))  # fmt: skip
    options = {"steps": 20, "eval_every": 10}
    lm = align(a, b, "learned", "orth", options=options)
    assert calls == []  # the start came from the cache, not from matching again
    # the same as learned matching that matches its own start
    from landscape.matching import learned_matching
    from landscape.sources import data_of

    inline = learned_matching(a.cfg, a.params, b.params, "orth", data_of(a).split("train"),
                              **options)  # fmt: skip
    assert calls == [1]
    assert torch.equal(lm.resid, inline.resid_matrix())
    assert lm.info["info"]["start_objective"] == pytest.approx(wm.info["objective"][-1])
    again = align(a, b, "learned", "orth", options=options)
    assert again.cached
    assert torch.equal(again.transform.matrix("resid"), lm.transform.matrix("resid"))


def test_the_eigenangle_view_is_the_result_stored_without_weights(tmp_path):
    """The Eigenangles page's entry holds its result, not the matchings' weights nor the Haar
    reference (recomputed from the width), and reads back as computed."""
    from landscape.experiments import eigenangle_result, eigenangle_view
    from landscape.store.cache import Cache

    cache = Cache(tmp_path / "cache", shipped=False)
    view = eigenangle_view("mlp-digits", (0, 1), learned=False, cache=cache)
    again = eigenangle_view("mlp-digits", (0, 1), learned=False, cache=cache)
    direct = eigenangle_result("mlp-digits", (0, 1), learned=False, cache=cache)
    assert not view["cached"] and again["cached"]
    for r in (view, again):
        assert {k: v for k, v in r.items() if k not in ("seconds", "cached")} == {
            k: v for k, v in direct.items() if k not in ("seconds", "cached")}  # fmt: skip
    [(kind, path)] = [(k, p) for k, p in cache.entries() if k == "eigenangles"]
    entry = cache.get(kind, path.name.removesuffix(".lsc"))
    assert not entry.tensors and "angles_haar" not in entry.meta
    assert path.stat().st_size < 20_000  # the matching it read holds both models' weights
