"""Each result kind declared beside its producer (:mod:`landscape.fields`) is what the producer
writes: real results, measured on the shipped seeds in a fresh cache, have every required field
of their declaration and no field it does not name (``problems(...) == []``)."""

from __future__ import annotations

import pytest

from landscape.experiments import TableOptions, TriangleOptions, barrier, table, triangle
from landscape.experiments.atlas import POINT as ATLAS_POINT
from landscape.experiments.atlas import RESULT as ATLAS
from landscape.experiments.atlas import AtlasOptions, atlas
from landscape.experiments.barriers.controls import ORIGINAL
from landscape.experiments.barriers.pipeline import BARRIER
from landscape.experiments.barriers.tables import LEFT_OUT, SUMMARY, TABLE, TABLE_ROW
from landscape.experiments.barriers.triangles import TRIANGLE
from landscape.experiments.context import RunContext
from landscape.experiments.surfaces import PATH, POINT, RESULT, SurfaceOptions, surface
from landscape.store.cache import Cache


def surface_problems(r: dict) -> list[str]:
    """What keeps a surface result from its declarations: the result, its models and paths, and
    what its directions record (Hessian directions, a training path's plane and paths)."""
    from landscape.experiments.curvature import CURVATURE_BATCH
    from landscape.experiments.directions import HESSIAN_RECORD
    from landscape.experiments.surfaces import TRAJECTORY
    from landscape.experiments.trajectories import PROJECTED_PATH

    out = RESULT.problems(r)
    out += [x for p in RESULT.read(r, "points") for x in POINT.problems(p)]
    out += [x for p in RESULT.read(r, "paths") for x in PATH.problems(p)]
    out += [x for p in RESULT.read(r, "trajectories") for x in PROJECTED_PATH.problems(p)]
    h, t = RESULT.read(r, "hessian"), RESULT.read(r, "trajectory")
    if h is not None:
        out += HESSIAN_RECORD.problems(h) + CURVATURE_BATCH.problems(h["batch"])
    if t is not None:
        out += TRAJECTORY.problems(t)
    return out


def table_problems(r: dict) -> list[str]:
    """What keeps a table result from its declarations: the result, each row, each left out."""
    out = TABLE.problems(r)
    for row in TABLE.read(r, "rows"):
        out += TABLE_ROW.problems(row)
    for x in TABLE.read(r, "left_out"):
        out += LEFT_OUT.problems(x)
    return out


def test_a_barrier_result_holds_what_its_declaration_says(tmp_path) -> None:
    cache = Cache(tmp_path)
    r = barrier("mlp-digits", (0, 1), "weight", "perm", points=5, cache=cache)
    assert BARRIER.problems(r) == []
    assert BARRIER.read(r, "cache_key") and not BARRIER.read(r, "cached")
    # read again from the cache: the same fields
    again = barrier("mlp-digits", (0, 1), "weight", "perm", points=5, cache=cache)
    assert BARRIER.read(again, "cached") and BARRIER.problems(again) == []
    assert set(again) == set(r)


@pytest.mark.parametrize("request_", [
    pytest.param({"options": {"max_rounds": 3}}, id="options"),
    pytest.param({"calibrate": True}, id="calibrated"),
    pytest.param({"coordinates": ORIGINAL}, id="coordinates"),
])  # fmt: skip
def test_the_fields_written_in_some_cases_are_declared(tmp_path, request_) -> None:
    r = barrier("mlp-digits", (0, 1), "weight", "orth", points=3, cache=Cache(tmp_path),
                **request_)  # fmt: skip
    said = set(r) - set(BARRIER.required)
    assert said & {"options", "calibrated", "coordinates"}  # the case wrote its own field
    assert BARRIER.problems(r) == []


def test_a_table_holds_what_its_declarations_say(tmp_path) -> None:
    options = TableOptions(rows=(("naive", "perm"), ("weight", "perm")), points=3)
    r = table("mlp-digits", 2, options, context=RunContext(cache=Cache(tmp_path)))
    assert table_problems(r) == []
    assert len(TABLE.read(r, "rows")) == 2
    for row in TABLE.read(r, "rows"):  # the summary over pairs is the row's own part
        assert SUMMARY.problems({k: row[k] for k in SUMMARY.names}) == []


def test_a_triangle_holds_what_its_declaration_says(tmp_path) -> None:
    context = RunContext(cache=Cache(tmp_path))
    r = triangle("mlp-digits", (0, 1, 2), "weight", "perm", TriangleOptions(resolution=3),
                 context=context)  # fmt: skip
    assert TRIANGLE.problems(r) == []
    assert TRIANGLE.read(r, "eval_seconds") is not None  # a grid computed now keeps its time
    again = triangle("mlp-digits", (0, 1, 2), "weight", "perm", TriangleOptions(resolution=3),
                     context=context)  # fmt: skip
    assert TRIANGLE.read(again, "cached") and TRIANGLE.problems(again) == []


@pytest.mark.parametrize(("seeds", "kind"), [([0, 1, 2], "plane"), ([0], "directions")])
def test_a_surface_holds_what_its_declarations_say(tmp_path, seeds, kind) -> None:
    options = SurfaceOptions(3, path_points=3, extent=0.5)
    context = RunContext(cache=Cache(tmp_path))
    r = surface("mlp-digits", seeds, "weight", "perm", options, context=context)
    assert RESULT.read(r, "kind") == kind and surface_problems(r) == []
    again = surface("mlp-digits", seeds, "weight", "perm", options, context=context)
    assert RESULT.read(again, "cached") and surface_problems(again) == []


def test_an_atlas_holds_what_its_declarations_say(tmp_path) -> None:
    context = RunContext(cache=Cache(tmp_path))
    r = atlas("mlp-digits", [0, 1], AtlasOptions(copies=1), context=context)
    points = ATLAS.read(r, "points")
    assert ATLAS.problems(r) == [] and len(points) == 4
    assert [x for p in points for x in ATLAS_POINT.problems(p)] == []
    again = atlas("mlp-digits", [0, 1], AtlasOptions(copies=1), context=context)
    assert ATLAS.read(again, "cached") and ATLAS.problems(again) == []


def test_a_field_the_declaration_leaves_out_is_caught() -> None:
    from landscape.fields import Fields

    row = {"method": "weight", "group": "perm", "space": "weights", "barrier_loss": 0.1,
           "barrier_loss_sem": 0.0, "barrier_accuracy": 0.0, "barrier_accuracy_sem": 0.0,
           "per_pair_loss": [0.1], "function_check": 1e-6, "function_ok": True, "warnings": [],
           "matching_seconds": 0.01, "paper": ""}  # fmt: skip
    assert TABLE_ROW.problems(row) == []
    narrower = Fields(TABLE_ROW.kind, TABLE_ROW.required[:-1])
    assert narrower.problems(row) == ["table row: undeclared field 'paper'"]
    assert TABLE_ROW.problems({**row, "pairs": 2}) == ["table row: undeclared field 'pairs'"]


def _parts(kind, r: dict, name: str, part) -> list[str]:
    """What keeps each of ``r``'s ``name`` (a list, or a dict's values) from ``part``."""
    items = kind.read(r, name)
    return [x for p in (items.values() if isinstance(items, dict) else items)
            for x in part.problems(p)]  # fmt: skip


def test_a_controls_table_holds_what_its_declarations_say(tmp_path) -> None:
    from landscape.experiments.barriers.controls import (
        CONTROL_PAIRS,
        CONTROLS_RESULT,
        CONTROLS_ROW,
        ControlsOptions,
        controls_table,
    )

    options = ControlsOptions(controls=("real",), rows=(("naive", "perm"), ("weight", "perm")),
                              points=3)  # fmt: skip
    r = controls_table("mlp-digits", 1, options, context=RunContext(cache=Cache(tmp_path)))
    assert CONTROLS_RESULT.problems(r) == []
    assert _parts(CONTROLS_RESULT, r, "controls", CONTROL_PAIRS) == []
    assert _parts(CONTROLS_RESULT, r, "rows", CONTROLS_ROW) == []
    # with ``original`` (the default) the rows say the line in unprocessed coordinates
    assert all("barrier_loss_original" in x for x in CONTROLS_RESULT.read(r, "rows"))


def test_a_widths_result_holds_what_its_declarations_say(tmp_path, monkeypatch) -> None:
    import dataclasses

    from landscape.experiments.barriers.widths import (
        WIDTH_NARROW,
        WIDTH_ROW,
        WIDTHS,
        WidthOptions,
        width_barriers,
    )
    from landscape.models.zoo import ZOO, TrainConfig

    # vit-digits with a 40-step recipe: a second to train (never the shipped weights)
    tc = TrainConfig(steps=40, batch_size=64, lr=3e-3, warmup=10, eval_every=20)
    monkeypatch.setitem(ZOO, "vit-digits", dataclasses.replace(ZOO["vit-digits"], train=tc))
    context = RunContext(cache=Cache(tmp_path))
    r = width_barriers("vit-digits", 0, 1, WidthOptions(factors=(2,), points=3), context=context)
    assert WIDTHS.problems(r) == [] and len(WIDTHS.read(r, "rows")) == 2
    assert _parts(WIDTHS, r, "rows", WIDTH_ROW) == []
    assert _parts(WIDTHS, r, "narrow", WIDTH_NARROW) == []


def test_a_barrier_matrix_holds_what_its_declarations_say(tmp_path) -> None:
    from landscape.experiments.barriers.matrix import PAIR, RESULT, MatrixOptions, barrier_matrix

    r = barrier_matrix("mlp-digits", [0, 1, 2], "weight", "perm", MatrixOptions(points=3),
                       context=RunContext(cache=Cache(tmp_path)))  # fmt: skip
    assert RESULT.problems(r) == [] and len(RESULT.read(r, "pairs")) == 3
    assert _parts(RESULT, r, "pairs", PAIR) == []


def test_a_curve_holds_what_its_declarations_say(tmp_path) -> None:
    from landscape.experiments.barriers.curved import (
        CURVED,
        CURVED_ALIGNMENT,
        CURVED_PATH,
        CURVED_ROW,
        CurveOptions,
        curve,
    )
    from landscape.experiments.barriers.request import seeds_request

    request = seeds_request("mlp-digits", (0, 1), "weight", "perm", points=3)
    r = curve(request, CurveOptions(kind="bezier", steps=5),
              context=RunContext(cache=Cache(tmp_path)))  # fmt: skip
    assert CURVED.problems(r) == [] and _parts(CURVED, r, "rows", CURVED_ROW) == []
    alignments = CURVED.read(r, "alignments")
    assert len(alignments) == 2 and _parts(CURVED, r, "alignments", CURVED_ALIGNMENT) == []
    assert [x for al in alignments for path in ("line", "curve")
            for x in CURVED_PATH.problems(CURVED_ALIGNMENT.read(al, path))] == []  # fmt: skip


def test_a_spawn_result_holds_what_its_declarations_say(tmp_path) -> None:
    from landscape.experiments.spawn import MEMBER, RESULT, ROW, SpawnOptions, spawn

    # children spawned at the run's last step: the parent's run and no further training
    r = spawn("mlp-digits", [1000], SpawnOptions(every=500, method="weight", points=3),
              context=RunContext(cache=Cache(tmp_path)))  # fmt: skip
    assert RESULT.problems(r) == [] and len(RESULT.read(r, "rows")) == 2
    assert _parts(RESULT, r, "rows", ROW) == []
    assert _parts(RESULT, r, "members", MEMBER) == []


def test_merges_hold_what_their_declarations_say(tmp_path) -> None:
    from landscape.experiments.merging.operators import (
        MERGE_ALIGNMENT,
        MERGE_CURVE,
        MERGES_RESULT,
        MERGES_ROW,
        PAIR_MERGES,
        MergesOptions,
        merges,
    )

    options = MergesOptions(operators=("linear",), points=3)
    r = merges("mlp-digits", [0, 1], "weight", "perm", options,
               context=RunContext(cache=Cache(tmp_path)))  # fmt: skip
    assert MERGES_RESULT.problems(r) == [] and _parts(MERGES_RESULT, r, "rows", MERGES_ROW) == []
    (pair,) = MERGES_RESULT.read(r, "pairs")
    assert PAIR_MERGES.problems(pair) == []
    alignments = PAIR_MERGES.read(pair, "alignments")
    assert len(alignments) == 2 and _parts(PAIR_MERGES, pair, "alignments", MERGE_ALIGNMENT) == []
    for al in alignments:
        assert MERGE_CURVE.problems(MERGE_ALIGNMENT.read(al, "line")) == []
        assert _parts(MERGE_ALIGNMENT, al, "operators", MERGE_CURVE) == []


def test_an_iterations_result_holds_what_its_declarations_say(tmp_path) -> None:
    from landscape.experiments.barriers.iterations import (
        ITERATION_ROUND,
        ITERATIONS,
        LEARNED_CHECKPOINT,
        LEARNED_RUN,
        WEIGHT_RUN,
        IterationOptions,
        iteration_barriers,
    )

    options = IterationOptions(groups=("perm",), inits=("identity",), steps=4, checkpoints=2,
                               points=3)  # fmt: skip
    context = RunContext(cache=Cache(tmp_path))
    for cached in (False, True):  # computed, then read from the cache
        r = iteration_barriers("mlp-digits", (0, 1), options, context=context)
        assert ITERATIONS.read(r, "cached") is cached and ITERATIONS.problems(r) == []
        assert _parts(ITERATIONS, r, "rounds", ITERATION_ROUND) == []
        assert _parts(ITERATIONS, r, "checkpoints", LEARNED_CHECKPOINT) == []
        assert _parts(ITERATIONS, r, "weight_matching", WEIGHT_RUN) == []
        assert _parts(ITERATIONS, r, "learned_matching", LEARNED_RUN) == []


def test_a_kv_sharing_result_holds_what_its_declarations_say(tmp_path) -> None:
    from landscape.experiments.barriers.ablation import (
        KV_SHARING,
        KV_SHARING_ROW,
        SharingOptions,
        kv_sharing,
    )
    from landscape.sources import available_seeds
    from landscape.store.paths import data_root

    if len(available_seeds("llama-shakespeare-d128")) < 2:
        pytest.skip("needs two shipped Llama seeds")
    if not data_root().joinpath("shakespeare.txt").exists():
        pytest.skip("the Shakespeare text is not fetched")
    r = kv_sharing("llama-shakespeare-d128", (0, 1),
                   SharingOptions(method="naive", group="perm", points=2),
                   context=RunContext(cache=Cache(tmp_path)))  # fmt: skip
    assert KV_SHARING.problems(r) == [] and _parts(KV_SHARING, r, "rows", KV_SHARING_ROW) == []


@pytest.mark.parametrize("learned", [False, True])
def test_an_eigenangle_result_holds_what_its_declarations_say(tmp_path, learned) -> None:
    from landscape.experiments.eigen.view import (
        ANGLE_SUMMARY,
        EIGENANGLES,
        LM_STEP,
        eigenangle_result,
        eigenangle_view,
    )

    def problems(r: dict) -> list[str]:
        out = EIGENANGLES.problems(r) + _parts(EIGENANGLES, r, "lm_curve", LM_STEP)
        return out + [x for k in ("wm", "correction", "haar")
                      if (s := EIGENANGLES.read(r, f"summary_{k}")) is not None
                      for x in ANGLE_SUMMARY.problems(s)]  # fmt: skip

    cache = Cache(tmp_path)
    r = eigenangle_result("mlp-digits", (0, 1), learned=learned, cache=cache)
    assert problems(r) == []
    assert (EIGENANGLES.read(r, "angles_correction") is not None) is learned
    assert bool(EIGENANGLES.read(r, "lm_curve")) is learned
    for cached in (False, True):  # the page's entry, stored and then read
        view = eigenangle_view("mlp-digits", (0, 1), learned=learned, cache=cache)
        assert EIGENANGLES.read(view, "cached") is cached and problems(view) == []


def test_a_gauge_sweep_holds_what_its_declarations_say(tmp_path) -> None:
    from landscape.experiments.gauge import results as R
    from landscape.experiments.gauge.runner import (
        GAUGE_SWEEP,
        PARTS,
        SYMMETRY_TABLE,
        GaugeOptions,
        gauge_sweep,
    )
    from landscape.symmetry.table import SYMMETRY_ROW

    options = GaugeOptions(draws=1, steps_grid=(0, 2), trajectory_steps=4, trajectory_every=2)
    context = RunContext(cache=Cache(tmp_path))
    r = gauge_sweep("mlp-digits", 0, options, context=context)
    assert GAUGE_SWEEP.problems(r) == [] and all(GAUGE_SWEEP.read(r, p) for p in PARTS)
    # each part: its result, its rows, and its summary or curve
    parts = {"table": (SYMMETRY_TABLE, {"rows": SYMMETRY_ROW}),
             "scramble": (R.SCRAMBLE, {"rows": R.SCRAMBLE_ROW, "summary": R.SCRAMBLE_SUMMARY}),
             "recovery": (R.RECOVERY, {"rows": R.RECOVERY_POINT, "curve": R.RECOVERY_POINT}),
             "trajectory": (R.TRAJECTORY, {"rows": R.TRAJECTORY_ROW}),
             "claims": (R.CLAIMS, {"rows": R.CLAIM_ROW, "summary": R.CLAIMS_SUMMARY})}  # fmt: skip
    for name, (kind, inner) in parts.items():
        part = GAUGE_SWEEP.read(r, name)
        assert kind.problems(part) == [], name
        assert kind.read(part, "seconds") is not None  # the sweep times every part
        for key, of in inner.items():
            assert _parts(kind, part, key, of) == [], (name, key)
    # a row of a draw names its draw, a point of the curve (means over draws) none
    recovery = GAUGE_SWEEP.read(r, "recovery")
    assert all("draw" in x for x in R.RECOVERY.read(recovery, "rows"))
    assert not any("draw" in x for x in R.RECOVERY.read(recovery, "curve"))
    # under O(d) the claims have no permutation part
    claims = R.CLAIMS.read(GAUGE_SWEEP.read(r, "claims"), "rows")
    assert {R.CLAIM_ROW.read(x, "group") for x in claims if "perm_only" not in x} == {"orth"}


def test_transport_rows_hold_what_their_declaration_says() -> None:
    from landscape.experiments.transport import TRANSPORT_ROW, transport_rows
    from landscape.tasks import load_task

    rows = transport_rows(load_task("mlp-digits", 0), lora_steps=2, adamw_before=2,
                          adamw_after=2)  # fmt: skip
    assert rows and [x for r in rows for x in TRANSPORT_ROW.problems(r)] == []
